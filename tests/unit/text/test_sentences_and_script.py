"""text/: the one sentence splitter, the one question test and the one CJK definition."""

from __future__ import annotations

import doctest
import importlib

import pytest

from memory_ext.text.script import CJK, HAN, has_cjk, has_han, is_cjk_char
from memory_ext.text.sentences import is_question, is_sentence_start, sentences, split_sentences


@pytest.mark.parametrize("name", ["memory_ext.text.script", "memory_ext.text.sentences", "memory_ext.ingest.claims",
                                  "memory_ext.ingest.claim_rules", "memory_ext.ingest.turns",
                                  "memory_ext.ingest.statements", "memory_ext.ingest.failures",
                                  "memory_ext.lifecycle.turn_signals"])
def test_docstring_examples(name: str) -> None:
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.failed == 0


def test_cjk_covers_han_extensions_kana_and_hangul() -> None:
    for ch in "北㐀豈𠀀ひカㇰ한":
        assert is_cjk_char(ch), ch
    assert not any(is_cjk_char(ch) for ch in "aé1，")  # CJK punctuation is not a letter of the script
    assert has_han("Tokyo 東京") and not has_han("とうきょう") and has_cjk("とうきょう")
    assert set(HAN) <= set(CJK)


def test_offsets_point_into_the_text() -> None:
    text = "I moved to Porto. 我住在北京！Did you know?\nNew line"
    for s in sentences(text, merge=True):
        assert text[s.start:s.end] == s.text
    assert split_sentences(text) == ["I moved to Porto.", "我住在北京！", "Did you know?", "New line"]


def test_periods_need_a_space_and_abbreviations_can_be_kept() -> None:
    text = "Dr. Li paid 3.50 for tea. Then left"
    assert [s.text.strip() for s in sentences(text, hard="", soft=".")] == ["Dr.", "Li paid 3.50 for tea.", "Then left"]
    assert [s.text.strip() for s in sentences(text, hard="", soft=".", abbreviations=True)] == [
        "Dr. Li paid 3.50 for tea.", "Then left"]
    assert [s.text for s in sentences("e.g.x", hard=".", soft="", merge=True)] == ["e.", "g.", "x"]


def test_runs_of_terminators() -> None:
    assert [s.terminator for s in sentences("What?! 嗯……好", merge=True)] == ["?!", "……", ""]
    assert [s.text.strip() for s in sentences("What?! 嗯……好")] == ["What?", "!", "嗯…", "…", "好"]


@pytest.mark.parametrize(("text", "strict", "loose"), [
    ("Do you live in Paris", True, True),
    ("so where do you live now", True, True),
    ("I live in Paris.", False, False),
    ("Is it ok?", True, True),
    ("你住在北京吗", True, True),
    ("你住在哪里", False, True),
    ("我也住在北京呢。", False, True),
    ("我住在北京。", False, False),
])
def test_is_question(text: str, strict: bool, loose: bool) -> None:
    assert is_question(text) is strict
    assert is_question(text, loose=True) is loose


def test_sentence_start() -> None:
    text = 'He left. "Bob stayed."'
    assert is_sentence_start(text, 0) and is_sentence_start(text, text.index("Bob"))
    assert not is_sentence_start(text, text.index("left"))
