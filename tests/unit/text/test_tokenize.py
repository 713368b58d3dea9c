"""The mixed Chinese/English BM25 tokenizer, the CJK ratio and the token estimate."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from concurrent.futures import ThreadPoolExecutor

import pytest

from memory_ext.text import EN_STOP_WORDS, ZH_STOP_CHARS, cjk_ratio, estimate_tokens, tokenize, warm_up


def _bigrams(run: str) -> list[str]:
    return [run[i : i + 2] for i in range(len(run) - 1)]


# ------------------------------------------------------------------------------------------- English


def test_english_is_lower_cased_without_stop_words() -> None:
    assert tokenize("The Cat sat ON the MAT with my Dog") == ["cat", "sat", "mat", "dog"]


def test_english_possessives_and_contractions() -> None:
    assert tokenize("Caroline's dog") == ["carolin", "dog"]  # stemmed, as every other word
    assert tokenize("I'm sure it's fine, don't worry") == ["sure", "fine", "dont", "worri"]


def test_curly_apostrophe_and_ascii_give_the_same_terms() -> None:
    assert tokenize("Melanie\u2019s kids don\u2019t swim") == tokenize("Melanie's kids don't swim")
    assert tokenize("Melanie's kids don't swim") == ["melani", "kid", "dont", "swim"]


def test_english_words_are_stemmed_so_inflections_match() -> None:
    assert tokenize("painting paints painted") == ["paint", "paint", "paint"]
    assert tokenize("She adopted two puppies") == ["adopt", "two", "puppi"]
    assert set(tokenize("adopting a puppy")) == {"adopt", "puppi"}


def test_non_alphanumerics_split_words_and_numbers_are_kept() -> None:
    assert tokenize("LGBTQ+ support-group, 8 May 2023 @ 3.5pm") == [
        "lgbtq", "support", "group", "8", "may", "2023", "3", "5pm",
    ]


def test_nfkc_folds_full_width_letters_and_digits() -> None:
    assert tokenize("\uff28\uff45\uff4c\uff4c\uff4f \uff11\uff12") == ["hello", "12"]


def test_accented_words_stay_whole() -> None:
    assert tokenize("Café Zoë") == ["café", "zoë"]


@pytest.mark.parametrize("text", ["", "   ", "\n\t", "!!! ... ???", "，。！？", "the and of"])
def test_empty_whitespace_punctuation_and_stop_words_give_nothing(text: str) -> None:
    assert tokenize(text) == []


def test_stop_word_lists_are_small_and_documented() -> None:
    assert {"the", "a", "is", "you", "what"} <= EN_STOP_WORDS
    assert "not" not in EN_STOP_WORDS and "may" not in EN_STOP_WORDS
    assert len(EN_STOP_WORDS) < 150
    assert {"的", "了", "是", "在", "我", "你", "吗", "呢", "吧", "啊"} <= ZH_STOP_CHARS


# ------------------------------------------------------------------------------------------- Chinese


def test_chinese_yields_jieba_words_and_bigrams() -> None:
    terms = tokenize("Bart在圣诞节晚会上跳舞")
    assert "bart" in terms
    assert "圣诞节" in terms  # a jieba word of three characters
    for bigram in _bigrams("在圣诞节晚会上跳舞"):
        both_function_chars = bigram[0] in ZH_STOP_CHARS and bigram[1] in ZH_STOP_CHARS
        assert (bigram in terms) != both_function_chars, bigram  # "会上" is dropped
    # a two-character jieba word is exactly one of the bigrams: emitted once, not twice
    assert terms.count("晚会") == 1
    assert terms.count("跳舞") == 1


def test_chinese_single_content_characters_kept_function_characters_dropped() -> None:
    terms = tokenize("我喜欢猫")
    assert "猫" in terms  # jieba word of one content character
    assert "我" not in terms  # function character
    assert terms == ["猫", "我喜", "喜欢", "欢猫"]


def test_short_query_matches_a_longer_memory_through_single_characters() -> None:
    assert set(tokenize("猫呢？")) & set(tokenize("我养了一只猫"))


def test_bigrams_of_two_function_characters_are_dropped() -> None:
    terms = tokenize("我的狗")
    assert "我的" not in terms
    assert "的狗" in terms and "狗" in terms


def test_one_character_runs() -> None:
    assert tokenize("猫，狗。") == ["猫", "狗"]
    assert tokenize("啊！") == []


def test_chinese_punctuation_separates_runs() -> None:
    terms = tokenize("元旦，晚会")
    assert "旦晚" not in terms  # no bigram across punctuation
    assert "元旦" in terms and "晚会" in terms


def test_mixed_chinese_and_english() -> None:
    terms = tokenize("我昨天买了iPhone 15手机, it's great")
    assert "iphon" in terms and "15" in terms and "great" in terms
    assert "手机" in terms and "昨天" in terms
    assert "it" not in terms


def test_kana_and_hangul_runs_give_bigrams() -> None:
    assert "こん" in tokenize("こんにちは")
    assert "안녕" in tokenize("안녕하세요")


def test_documents_and_queries_tokenize_identically() -> None:
    text = "你知道吗？元旦晚会我要表演魔术！ I'll do a card trick."
    assert tokenize(text) == tokenize(text)
    assert tokenize(text.upper()) == tokenize(text)


def test_concurrent_tokenization_is_consistent() -> None:
    texts = [f"第{i}次去北京旅游，我们吃了烤鸭 trip {i}" for i in range(64)]
    expected = [tokenize(t) for t in texts]
    with ThreadPoolExecutor(8) as pool:
        assert list(pool.map(tokenize, texts)) == expected


# ----------------------------------------------------------------------------------------- laziness


def _run(code: str) -> str:
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=60, check=True
    )
    return result.stdout.strip() + result.stderr.strip()


def test_import_does_not_load_the_jieba_dictionary_warm_up_does() -> None:
    out = _run(
        """
        import sys
        import memory_ext.text
        from memory_ext.text import segment
        print("loaded" if segment.loaded() else "lazy", "jieba" in sys.modules)
        memory_ext.text.tokenize("plain English only")
        print("loaded" if segment.loaded() else "lazy", "jieba" in sys.modules)
        memory_ext.text.warm_up()
        print("loaded" if segment.loaded() else "lazy")
        """
    )
    assert out.split() == ["lazy", "False", "lazy", "False", "loaded"]


def test_first_chinese_text_loads_jieba_silently_and_concurrently() -> None:
    out = _run(
        """
        import sys
        from concurrent.futures import ThreadPoolExecutor
        import memory_ext.text
        with ThreadPoolExecutor(4) as pool:
            results = list(pool.map(memory_ext.text.tokenize, ["圣诞节晚会"] * 8))
        assert all(r == results[0] for r in results), results
        from memory_ext.text import segment
        print(segment.loaded(), sys.modules["jieba"].dt.initialized)
        """
    )
    # and nothing else: no "Building prefix dict" chatter on stderr; jieba's own dicts (~65 MB) never built
    assert out == "True False"


def test_warm_up_in_process_is_idempotent() -> None:
    warm_up()
    warm_up()
    assert "圣诞节" in tokenize("圣诞节")


# ----------------------------------------------------------------------------------- ratio, estimate


def test_cjk_ratio() -> None:
    assert cjk_ratio("") == 0.0
    assert cjk_ratio("abcd") == 0.0
    assert cjk_ratio("中文") == 1.0
    assert cjk_ratio("ab中文") == 0.5


@pytest.mark.parametrize(
    ("text", "expected"),
    [("", 0), ("abcd", 1), ("abcde", 2), ("中文", 3), ("ab中文", 4), ("a" * 400, 100)],
)
def test_estimate_tokens(text: str, expected: int) -> None:
    # ceil(len * (0.25 + 1.25 * cjk_ratio)); "ab中文": 4 * (0.25 + 0.625) = 3.5 -> 4
    assert estimate_tokens(text) == expected
