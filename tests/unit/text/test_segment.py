"""The compact jieba dictionary (memory_ext.text.segment) cuts and tags as jieba itself does."""

from __future__ import annotations

import logging
import random

import numpy as np
import pytest

from memory_ext.bench.scale import SyntheticCorpus
from memory_ext.text import segment
from memory_ext.text.strtable import StrTable, check_all, hash_all

jieba = pytest.importorskip("jieba")

TRICKY = [
    "", "猫", "我喜欢猫和圣诞节", "长江大桥武汉市长江大桥", "小明硕士毕业于中国科学院计算所，后在日本京都大学深造",
    "AT&T和c#的B超 测试 3.5% 　全角空格\r\n换行", "𠀀𠀁奇字㐀", "李明和王小红昨天去了临平镇", "他说：“我们走吧！”",
    "abc def", "结婚的和尚未结婚的", "乒乓球拍卖完了", "南京市长江大桥欢迎您", "下雨天留客天留我不留",
]


@pytest.fixture(scope="module")
def reference() -> object:
    jieba.setLogLevel(logging.WARNING)
    jieba.dt.initialize()
    return jieba


def _texts() -> list[str]:
    corpus = [t["content"] for _, t in SyntheticCorpus(seed=3).turns(400)]
    rng = random.Random(5)
    words = ["的", "了", "我们", "北京", "喜欢", "今天", "，", " "]
    sample = [line.split(" ")[0] for line in _dict_lines(rng, 4000)]
    mixed = ["".join(rng.choice(sample + words) for _ in range(rng.randint(1, 12))) for _ in range(300)]
    return TRICKY + [t for t in corpus if any("\u4e00" <= c <= "\u9fff" for c in t)] + mixed


def _dict_lines(rng: random.Random, n: int) -> list[str]:
    import os

    with open(os.path.join(os.path.dirname(jieba.__file__), "dict.txt"), encoding="utf-8") as fh:
        lines = fh.read().splitlines()
    return rng.sample(lines, n)


def test_cuts_as_jieba_does(reference: object) -> None:
    texts = _texts()
    assert len(texts) > 400
    for text in texts:
        assert segment.lcut(text) == jieba.lcut(text, HMM=True), text


def test_frequencies_and_tags_are_jiebas(reference: object) -> None:
    import jieba.posseg as posseg

    tags = posseg.dt.word_tag_tab
    rng = random.Random(11)
    freq = jieba.dt.FREQ
    words = rng.sample(list(freq), 5000)  # words and bare prefixes (frequency 0)
    assert any(freq[w] == 0 for w in words)
    for word in [*words, "不存在的词语xyz", "猫", "北京"]:
        assert segment.word_freq(word) == freq.get(word, 0), word
        assert segment.word_tag(word) == (tags.get(word, "") if freq.get(word) is not None else ""), word
    assert segment.dictionary().total == jieba.dt.total


def test_the_cut_list_is_the_callers_own() -> None:
    first = segment.lcut("我喜欢圣诞节")
    first.append("x")
    assert segment.lcut("我喜欢圣诞节") == ["我", "喜欢", "圣诞节"]


def test_table_later_duplicates_win_and_absent_keys_get_the_default() -> None:
    table = StrTable(["a", "b", "a", "猫"], [1, 2, 3, 4])
    assert len(table) == 3
    assert table.lookup(["a", "b", "c", "猫", ""], default=-7).tolist() == [3, 2, -7, 4, -7]
    assert "猫" in table and "c" not in table and 1 not in table
    assert table.lookup([]).tolist() == []
    assert StrTable([], []).lookup(["a"]).tolist() == [-1]
    with pytest.raises(ValueError):
        StrTable(["a"], [-1])
    with pytest.raises(ValueError):
        StrTable(["a", "b"], [1])


def test_table_agrees_with_a_dict_over_many_repeated_keys() -> None:
    """Thousands of keys given many times each, as jieba's prefixes are: the last value of each key wins."""
    rng = np.random.default_rng(7)
    keys = [f"k{int(i)}" for i in rng.integers(0, 3000, 40_000)]
    values = rng.integers(0, 10_000, len(keys)).tolist()
    table = StrTable(keys, values)
    expected = dict(zip(keys, values, strict=True))
    assert len(table) == len(expected)
    assert table.lookup(list(expected)).tolist() == list(expected.values())


@pytest.mark.parametrize("fake_first", [True, False])
def test_table_keeps_keys_whose_first_hashes_clash_apart(fake_first: bool) -> None:
    real = int(check_all(["key"])[0])
    fake = (real - 1) % 2**32 if fake_first else (real + 1) % 2**32
    h = int(hash_all(["key"])[0])
    table = StrTable.from_hashes(np.array([h, h, int(hash_all(["other"])[0])]), np.array([fake, real, 0]),
                                 np.array([5, 6, 7]))
    assert table.lookup(["key", "other", "none"]).tolist() == [6, -1, -1]  # "other"'s check is not 0
