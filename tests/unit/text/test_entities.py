"""Entities, tags and query names of chat turns, by heuristics, in English and Chinese."""

from __future__ import annotations

import doctest
import subprocess
import sys
import time

import pytest

from memory_ext.text import entities
from memory_ext.text.entities import EN_STOP_CAPS, TAGS, extract_entities, extract_tags, query_names

# ------------------------------------------------------------------------------------------- entities

ENTITIES = [
    ("Thanks Caroline! I ran the Berlin Marathon last Sunday.", "Melanie",
     ["Melanie", "Caroline", "Berlin Marathon"]),
    ("Hey Mel! I went to a LGBTQ support group yesterday.", None, ["Mel", "LGBTQ"]),
    ("Lena and I cycled 60 kilometres along the coast near Porto.", None, ["60 kilometres", "Porto"]),
    ("We paid 180 euros for the tickets, about $200 in total.", None, ["180 euros", "$200"]),
    ("My 3 kids ran a 5km race and raised 10% more than last year.", None, ["3 kids", "5km", "10%"]),
    ('Have you read "Becoming Nicole" by Amy Ellis Nutt?', None, ["Becoming Nicole", "Amy Ellis Nutt"]),
    ("I love the song \u2018Summer Sounds\u2019!", None, ["Summer Sounds"]),
    ("Wow, that's amazing! Good luck with everything.", None, []),
    ("Sounds great! Let's do it. Maybe next time.", None, []),
    ("I visited the Museum of Modern Art with Jon's sister.", None, ["Museum of Modern Art", "Jon"]),
    ("Porto was lovely. We want to go back to Porto next year.", None, ["Porto"]),
    ("OMG I can't believe it. NASA posted the photo!", None, ["NASA"]),
    ("I'm off to Paris on Friday in May! So excited.", None, ["Paris"]),
    ("My sister lives in São Paulo and works at Google.", None, ["São Paulo", "Google"]),
    ("We adopted two dogs and a cat named Whiskers.", None, ["two dogs", "Whiskers"]),
    ("I read 'Charlotte's Web' to the kids, and they loved it.", None, ["Charlotte's Web"]),
    ("I went to the Grand Canyon with Matt Patterson in 2019 and it cost 1,200 dollars.", None,
     ["Grand Canyon", "Matt Patterson", "1,200 dollars"]),
    ("我和李明去了杭州西湖，小红也来了。", None, ["李明", "杭州", "西湖", "小红"]),
    ("我们去了迪士尼乐园和上海外滩", None, ["迪士尼", "上海"]),
    ("我读了《三体》，还养了两只猫。", None, ["三体", "两只猫"]),
    ("张伟在清华大学读书，每天跑10公里。", "Lisa", ["Lisa", "张伟", "清华大学", "10公里"]),
    ("我们在「老地方」见，我有3个孩子。", None, ["老地方", "3个孩子"]),
]


@pytest.mark.parametrize(("text", "speaker", "expected"), ENTITIES)
def test_entities_of_chat_turns(text: str, speaker: str | None, expected: list[str]) -> None:
    assert extract_entities(text, speaker=speaker) == expected


def test_sentence_initial_word_needs_repetition_or_knowledge() -> None:
    text = "Lena called. She loves Porto."
    assert extract_entities(text) == ["Porto"]
    assert extract_entities(text, known={"lena"}) == ["Lena", "Porto"]
    assert extract_entities("Lena called. I told Lena about it.") == ["Lena"]


def test_speaker_first_and_case_insensitive_dedup() -> None:
    assert extract_entities("Caroline? caroline! Hi CAROLINE and Caroline.", speaker="Caroline") == ["Caroline"]
    assert extract_entities("I met Ana and ana's dog", speaker="Bo") == ["Bo", "Ana"]


def test_common_capitalised_words_are_not_entities() -> None:
    text = "Hey! Thanks so much. Wow, Good Morning. I think That's great, Absolutely. LOL. OK Then."
    assert extract_entities(text) == []


def test_month_and_weekday_names_are_left_to_time_expressions() -> None:
    assert extract_entities("See you on Monday, or in March, or next Fri.") == []


def test_long_quotes_are_speech_not_names() -> None:
    assert extract_entities('She said "I will always be there for you, no matter what happens".') == []


def test_numbers_without_units_and_years_are_not_entities() -> None:
    assert extract_entities("I was born in 1990 and I have 2 of them, at 3 pm.") == []
    assert extract_entities("我有一个朋友") == []  # 一个 is an article, not a count


def test_chinese_dictionary_words_mistagged_as_names_are_dropped() -> None:
    # jieba's dictionary tags 明白/阳光 as person names and 东西/美丽/城市 as places
    assert extract_entities("我明白了，阳光很美丽，这东西真好") == []


def test_empty_text() -> None:
    assert extract_entities("") == []
    assert extract_entities("", speaker="Ana") == ["Ana"]


def test_english_text_never_loads_jieba() -> None:
    code = (
        "import sys, memory_ext.text.entities as e; "
        "e.extract_entities('Hey Lena, we ran 5km in Porto!', speaker='Bo'); e.extract_tags('I love it'); "
        "e.query_names('Where is Lena?', ['Lena']); print('jieba' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_stop_list_is_small_and_lower_case() -> None:
    assert len(EN_STOP_CAPS) < 400
    assert all(word == word.lower() for word in EN_STOP_CAPS)


# ------------------------------------------------------------------------------------------- tags

TAGGED = [
    ("How did the interview go?", ["question"]),
    ("When did you move? I forgot", ["question"]),
    ("When I was young I loved painting.", ["preference"]),
    ("Check https://example.com/a?b=1 for details", ["url"]),
    ("Use `df.groupby()` to aggregate", ["code"]),
    ("def foo(x):\n    return x", ["code"]),
    ("I'm going to visit Rome", ["plan"]),
    ("I prefer tea over coffee, my favorite is green tea.", ["preference"]),
    ("I feel so happy and proud", ["emotion"]),
    ("We went to the beach and attended a concert", ["event"]),
    ("I have 3 kids", ["number"]),
    ("I'll run 10km because I love it and feel great!", ["number", "plan", "preference", "emotion"]),
    ("我打算下个月去杭州", ["plan"]),
    ("我最喜欢吃冰淇淋", ["preference"]),
    ("今天我好开心", ["emotion"]),
    ("昨天我去了博物馆参观", ["event"]),
    ("你今天去哪儿了吗", ["question"]),
    ("我有三个孩子", ["number"]),
    ("Hey!", []),
    ("What a day!", []),
    ("It looks like rain.", []),
    ("", []),
]


@pytest.mark.parametrize(("text", "expected"), TAGGED)
def test_tags(text: str, expected: list[str]) -> None:
    assert extract_tags(text) == expected


def test_tags_come_from_the_documented_set_in_its_order() -> None:
    tags = extract_tags("Where will you go? I love https://x.io, I went there with 3 friends and felt happy `x()`")
    assert tags == ["question", "url", "code", "number", "plan", "preference", "emotion", "event"]
    assert list(TAGS) == tags
    assert "tool_call" not in TAGS  # added by the caller for turns that call tools


# ------------------------------------------------------------------------------------------- query names


@pytest.mark.parametrize(
    ("query", "known", "expected"),
    [
        ("What did caroline's sister say?", ["Caroline", "Melanie"], ["Caroline"]),
        ("What did Caroline\u2019s sister say?", ["Caroline"], ["Caroline"]),
        ("When did Melanie and Mel meet?", ["Mel", "Melanie"], ["Melanie", "Mel"]),
        ("What about Melanie?", ["Mel"], []),  # whole words only
        ("Did they run the Berlin Marathon or stay in Berlin?", ["Berlin", "Berlin Marathon"],
         ["Berlin Marathon", "Berlin"]),
        ("Results of the Berlin Marathon?", ["Berlin", "Berlin Marathon"], ["Berlin Marathon"]),
        ("李明去过杭州西湖吗？", ["杭州", "西湖", "李明", "王芳"], ["李明", "杭州", "西湖"]),
        ("北京大学在哪？", ["北京", "北京大学"], ["北京大学"]),
        ("Lena和我去了哪里？", ["Lena"], ["Lena"]),
        ("What did Zoë say?", ["zoë"], ["zoë"]),
        ("What did they say?", [], []),
        ("", ["Ana"], []),
    ],
)
def test_query_names(query: str, known: list[str], expected: list[str]) -> None:
    assert query_names(query, known) == expected


def test_docstring_examples() -> None:
    result = doctest.testmod(entities, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0


if __name__ == "__main__":  # timing over a synthetic 600-turn conversation (not a unit test)
    texts = ([t for t, _, _ in ENTITIES] + [t for t, _ in TAGGED]) * 14
    texts = texts[:600]
    extract_entities("预热 jieba")
    start = time.perf_counter()
    for t in texts:
        extract_entities(t, speaker="Ana")
        extract_tags(t)
    print(f"{len(texts)} turns: {(time.perf_counter() - start) * 1000:.1f} ms")
