"""Content first: a turn that only acknowledges or only asks never ranks above the statement it belongs to."""

from __future__ import annotations

from pathlib import Path

import pytest

from memory_ext import MemoryEngine, Turn
from memory_ext.rank.carriers import turn_shape


def _chat(lines: list[tuple[str, str]], day: int = 2) -> list[Turn]:
    return [Turn(role=role, content=text, session_id="s1", timestamp=f"2026-03-0{day}T09:{i:02d}:00Z")
            for i, (role, text) in enumerate(lines)]


def _texts(engine: MemoryEngine, query: str, ns: str) -> list[str]:
    return [item.text for item in engine.search(query, ns, k=5).items]


@pytest.mark.parametrize(("text", "neighbour", "asks", "content_free"), [
    ("Noted.", "I'm allergic to shellfish.", False, True),
    ("Got it, thanks!", "My dog is called Biscuit.", False, True),
    ("What's my dog called?", None, True, True),
    ("好的，记住了。", "我对花生过敏，吃了会起疹子。", False, True),
    ("我住在哪里？", None, True, True),
    ("He's a beagle called Biscuit, three years old.", "What's my dog called?", False, False),
    ("我每天坐地铁二号线上班，大概四十分钟。", "好的。", False, False),
    ("I went to a pottery class yesterday! Have you ever tried it?", "Hi Mel!", True, False),
])
def test_the_shape_of_a_turn_is_measured_against_its_neighbour(text: str, neighbour: str | None, asks: bool,
                                                               content_free: bool) -> None:
    shape = turn_shape(text, neighbour)
    assert shape.asks == asks
    assert (shape.novel_tokens <= 3) == content_free


def test_the_statement_ranks_above_its_acknowledgement_and_the_question_that_asked_for_it(tmp_path: Path) -> None:
    with MemoryEngine.open(tmp_path / "m", embedder="e5") as engine:
        engine.add_turns(_chat([
            ("user", "I'm allergic to shellfish."), ("assistant", "Noted."),
            ("user", "What's my dog called?"), ("assistant", "You haven't told me yet."),
            ("user", "My dog is called Biscuit."), ("assistant", "Got it, thanks!"),
        ]), "maya", wait=True)
        shellfish = _texts(engine, "shellfish", "maya")
        dog = _texts(engine, "What's my dog called?", "maya")
    assert shellfish[0] == "I'm allergic to shellfish."
    assert shellfish.index("Noted.") > 0
    # a non-answer ("You haven't told me yet.") is not detected: the statement comes after it and the question
    assert dog[2] == "My dog is called Biscuit."
    assert dog.index("What's my dog called?") > dog.index("You haven't told me yet.")


def test_a_restating_reply_ranks_below_the_users_own_statement(tmp_path: Path) -> None:
    with MemoryEngine.open(tmp_path / "m", embedder="e5") as engine:
        engine.add_turns(_chat([
            ("user", "I'm allergic to shellfish."),
            ("assistant", "Noted: no shellfish in restaurant suggestions."),
            ("user", "I take my coffee black, no sugar."), ("assistant", "Okay, black coffee."),
        ]), "maya", wait=True)
        texts = _texts(engine, "what can't Maya eat? any shellfish?", "maya")
    assert texts[0] == "I'm allergic to shellfish."
    assert "Noted: no shellfish in restaurant suggestions." in texts[1:]


def test_chinese_acknowledgements_and_questions_rank_below_the_statement(tmp_path: Path) -> None:
    with MemoryEngine.open(tmp_path / "m", embedder="e5") as engine:
        engine.add_turns(_chat([
            ("user", "我住在成都的高新区，离公司骑车十分钟。"), ("assistant", "好的，记住了。"),
            ("user", "我住在哪里？"), ("assistant", "你住在成都高新区。"),
            ("user", "我对花生过敏。"), ("assistant", "收到，推荐菜的时候会注意。"),
        ]), "li", wait=True)
        home = _texts(engine, "我住在哪里？", "li")
    assert home[0] == "我住在成都的高新区，离公司骑车十分钟。"
    assert home.index("我住在哪里？") > 0 and home.index("好的，记住了。") > 0


def test_the_answer_to_a_question_keeps_its_place(tmp_path: Path) -> None:
    """A reply that says something new after a question is content, not an acknowledgement."""
    with MemoryEngine.open(tmp_path / "m", embedder="e5") as engine:
        engine.add_turns(_chat([
            ("assistant", "How do you manage your sleep with night shifts?"),
            ("user", "Blackout curtains and a strict schedule, mostly."),
            ("assistant", "Makes sense."),
        ]), "sam", wait=True)
        texts = _texts(engine, "how do I manage sleep", "sam")
    assert texts[0] == "Blackout curtains and a strict schedule, mostly."
