"""LLM-free conflict detection (memory_ext.lifecycle.conflicts): extraction and a labelled pair set."""

from __future__ import annotations

import pytest

from memory_ext.lifecycle.conflicts import (
    Claim,
    conflicts,
    extract_claims,
    find_conflicts,
    normalize_value,
)

# (new line, old line) pairs where the new line supersedes the old one.
TRUE_EN: list[tuple[str, str]] = [
    ("I moved to Berlin last month.", "I live in Paris."),
    (
        "We finally sorted it out: I'm based in Lisbon now.",
        "I live in Madrid with two roommates.",
    ),
    (
        "Quick update, I relocated to Toronto for the new job.",
        "I've lived in Chicago for five years.",
    ),
    ("I work at Spotify now.", "I work for Google as a data analyst."),
    (
        "Big news: I joined Microsoft on Monday!",
        "I'm working at Amazon on the logistics team.",
    ),
    ("I'm a nurse at the children's hospital.", "I'm a teacher at a primary school."),
    ("These days I work as a graphic designer.", "I am an accountant."),
    ("My name is Ana, by the way.", "My name is Anna."),
    ("Just call me Sam.", "My name is Samantha."),
    ("I'm 31 now.", "I am 30 years old."),
    ("I got married in June!", "I'm single and honestly loving it."),
    ("I'm divorced now.", "I'm married, we have two kids."),
    ("My favorite color is green these days.", "My favorite color is blue."),
    ("Purple is my favorite color.", "My favourite colour is red."),
    ("I hate sushi, it makes me feel sick.", "I love sushi!"),
    ("I don't like jazz anymore.", "I really like jazz."),
    ("I'm vegan now.", "I'm a vegetarian."),
    ("I'm not vegetarian anymore.", "I'm vegetarian."),
    ("My dog's name is Max.", "My dog's name is Rex."),
    ("My phone number is 555-987-6543.", "My phone number is 555-123-4567."),
    ("My email is ana.new@example.org", "My email is ana@example.com"),
    ("My sister lives in Porto now.", "My sister lives in Lisbon."),
    ("Ana works at Deloitte now.", "Ana works at KPMG."),
    ("I don't live in Paris anymore.", "I live in Paris."),
]

# (new line, old line) pairs that must NOT be flagged.
FALSE_EN: list[tuple[str, str]] = [
    ("I hate the cold.", "I love the rain."),
    ("My brother lives in Rome.", "I live in Paris."),
    ("I visited Berlin last week.", "I live in Paris."),
    ("I used to live in Paris.", "I live in London."),
    ("Do you live in Paris?", "I live in London."),
    ("If I lived in Paris, I'd eat croissants every day.", "I live in London."),
    ("I have a cat named Miso.", "I have a dog named Rex."),
    ("I am happy today.", "I'm a teacher."),
    ("I live in Berlin.", "I live in berlin"),
    ("I'd like a coffee, please.", "I hate coffee."),
    ("I'm 5 minutes late, sorry.", "I'm 30 years old."),
    ("I want to move to Tokyo someday.", "I live in Osaka."),
    ("You live in the cloud, right?", "I live in Dublin."),
    ("I love my job.", "I hate Mondays."),
    ("Call me tomorrow after lunch.", "My name is Ben."),
    ("I was a teacher before I retired.", "I'm a nurse."),
    ("He works at Apple.", "I work at Google."),
    ("I'm a big fan of horror movies.", "I'm a teacher."),
    ("I love sushi.", "I really love sushi!"),
    ("My friend is a doctor.", "I'm a lawyer."),
    ("I'm thinking of going vegan.", "I'm vegetarian."),
    ("My mom's name is Maria.", "My name is Ana."),
    ("I worked at IBM in the nineties.", "I work at Google."),
    ("Would you like to work at Google?", "I work at Spotify."),
]

TRUE_ZH: list[tuple[str, str]] = [
    ("我上个月搬到了上海。", "我住在北京。"),
    ("我现在定居在成都了", "我住在杭州，离西湖很近。"),
    ("我已经搬去深圳了！", "我一直住在广州。"),
    ("我现在在阿里巴巴上班。", "我在腾讯工作。"),
    ("我入职了字节跳动", "我在百度工作，做搜索。"),
    ("我现在是一名律师了", "我是一名医生。"),
    ("我是程序员", "我是老师，教初中数学。"),
    ("我叫小李", "我叫小王。"),
    ("我的名字是王芳", "我的名字是李华"),
    ("我今年31岁了", "我今年三十岁。"),
    ("我结婚了！", "我现在单身。"),
    ("我离婚了", "我结婚五年了。"),
    ("我最喜欢的颜色是绿色", "我最喜欢的颜色是蓝色。"),
    ("我最喜欢的水果是芒果", "我最喜欢的水果是西瓜"),
    ("我不喜欢咖啡了", "我喜欢咖啡。"),
    ("我讨厌下雨天", "我很喜欢下雨天"),
    ("我不吃素了", "我吃素。"),
    ("我的狗叫豆豆", "我的狗叫旺财"),
    ("我的手机号是13900001111", "我的手机号是13812345678"),
    ("我妹妹住在南京", "我妹妹住在苏州。"),
    ("小明在华为上班了", "小明在小米工作"),
    ("我不住在北京了", "我住在北京"),
    ("我的邮箱是li.hua@example.cn", "我的邮箱是lihua@example.com"),
    ("我已经不是学生了", "我是学生。"),
]

FALSE_ZH: list[tuple[str, str]] = [
    ("我讨厌冬天", "我喜欢下雨"),
    ("我哥哥住在上海", "我住在北京"),
    ("我去北京出差了", "我住在上海"),
    ("我以前住在北京", "我住在上海"),
    ("你住在哪里？", "我住在上海"),
    ("如果我住在上海就好了", "我住在北京"),
    ("我养了一只猫", "我养了一只狗"),
    ("我很开心", "我是老师"),
    ("我住在北京。", "我住在北京"),
    ("我想搬到上海", "我住在北京"),
    ("我是上海人", "我是医生"),
    ("我叫了外卖", "我叫小王"),
    ("我30岁的时候搬到了上海", "我住在北京"),
    ("我喜欢喝咖啡", "我很喜欢咖啡"),
    ("他在腾讯工作", "我在阿里巴巴工作"),
    ("我打算明年结婚", "我单身"),
    ("我朋友是医生", "我是律师"),
    ("我最喜欢的颜色是蓝色", "我喜欢红色的衣服"),
    ("我在北京工作", "我住在上海"),
    ("我妈妈叫王丽", "我叫李华"),
    ("我以前在百度工作", "我在腾讯工作"),
    ("我喜欢你", "我讨厌他"),
    ("你是不是在腾讯工作？", "我在阿里巴巴工作"),
    ("我曾经是一名老师", "我是一名医生"),
]


def _flagged(new: str, old: str) -> bool:
    return bool(find_conflicts(extract_claims(new), extract_claims(old)))


def _scores(
    true_pairs: list[tuple[str, str]], false_pairs: list[tuple[str, str]]
) -> tuple[float, float]:
    tp = sum(_flagged(n, o) for n, o in true_pairs)
    fp = sum(_flagged(n, o) for n, o in false_pairs)
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / len(true_pairs)
    return precision, recall


def test_labelled_set_is_big_enough() -> None:
    assert len(TRUE_EN) + len(TRUE_ZH) >= 30
    assert len(FALSE_EN) + len(FALSE_ZH) >= 30
    assert min(len(TRUE_EN), len(TRUE_ZH), len(FALSE_EN), len(FALSE_ZH)) >= 12


@pytest.mark.parametrize(
    ("name", "true_pairs", "false_pairs"),
    [
        ("en", TRUE_EN, FALSE_EN),
        ("zh", TRUE_ZH, FALSE_ZH),
        ("all", TRUE_EN + TRUE_ZH, FALSE_EN + FALSE_ZH),
    ],
)
def test_precision_and_recall(
    name: str, true_pairs: list[tuple[str, str]], false_pairs: list[tuple[str, str]]
) -> None:
    precision, recall = _scores(true_pairs, false_pairs)
    missed = [p for p in true_pairs if not _flagged(*p)]
    wrong = [p for p in false_pairs if _flagged(*p)]
    assert precision >= 0.95, f"{name}: precision {precision:.2f}, false alarms {wrong}"
    assert recall >= 0.8, f"{name}: recall {recall:.2f}, missed {missed}"


def _triples(text: str) -> list[tuple[str, str, str, bool]]:
    return [(c.subject, c.attribute, c.value, c.negated) for c in extract_claims(text)]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("I live in New York City.", [("self", "residence", "new york city", False)]),
        ("My sister lives in Rome", [("self:sister", "residence", "rome", False)]),
        ("Ana lives in Rome.", [("ana", "residence", "rome", False)]),
        ("You live in Paris.", [("assistant", "residence", "paris", False)]),
        (
            "I'm a software engineer at Google.",
            [
                ("self", "job_title", "software engineer", False),
                ("self", "employer", "google", False),
            ],
        ),
        ("My favorite color is blue.", [("self", "favorite:color", "blue", False)]),
        ("I don't like sushi anymore", [("self", "opinion:sushi", "like", True)]),
        ("I am 30 years old", [("self", "age", "30", False)]),
        (
            "I used to live in Paris, but now I live in Berlin.",
            [("self", "residence", "berlin", False)],
        ),
        (
            "My phone number is +1 (555) 123-4567.",
            [("self", "phone", "+15551234567", False)],
        ),
        ("我妹妹住在杭州", [("self:妹妹", "residence", "杭州", False)]),
        ("我以前住在北京，现在住在上海", [("self", "residence", "上海", False)]),
        ("我今年三十五岁", [("self", "age", "35", False)]),
        (
            "我是腾讯的程序员",
            [
                ("self", "job_title", "程序员", False),
                ("self", "employer", "腾讯", False),
            ],
        ),
        ("我最喜欢的颜色是蓝色", [("self", "favorite:color", "蓝色", False)]),
        ("我不喜欢咖啡", [("self", "opinion:咖啡", "like", True)]),
        ("我还没结婚", [("self", "relationship_status", "married", True)]),
        ("我的狗叫旺财", [("self:狗", "name", "旺财", False)]),
    ],
)
def test_extraction(text: str, expected: list[tuple[str, str, str, bool]]) -> None:
    assert _triples(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "Do you live in Paris?",
        "Where do you work",
        "If I lived in Paris, I would walk everywhere.",
        "I wish I were married.",
        "I'm going to move to Berlin.",
        "I used to be vegetarian.",
        "I'm happy.",
        "She lives in Oslo.",
        "你住在哪里？",
        "你在哪里工作",
        "如果我住在上海就好了",
        "我打算搬到深圳",
        "他住在深圳",
        "我以前在百度工作",
        "你喜欢咖啡吗",
    ],
)
def test_no_claims(text: str) -> None:
    assert extract_claims(text) == []


def test_normalisation() -> None:
    assert normalize_value("  The Berlin. ") == "berlin"
    assert normalize_value("New   York!") == "new york"
    assert _triples("I live in Berlin.") == _triples("i live in berlin")
    assert not _flagged("I moved to Berlin!", "I live in berlin")
    # different spellings of the same place are not reconciled (documented limitation)
    assert _flagged("I live in NYC", "I live in New York City")


def test_span_points_into_text() -> None:
    text = "Hi there. I moved to Berlin last month."
    (claim,) = extract_claims(text)
    start, end = claim.span
    assert text[start:end] == "I moved to Berlin"


def test_speaker_name_maps_to_self() -> None:
    (claim,) = extract_claims("Ana lives in Rome", speaker="Ana")
    assert claim.subject == "self"
    (claim,) = extract_claims("Ana lives in Rome", speaker="Ben")
    assert claim.subject == "ana"


def test_conflicts_rules() -> None:
    paris = Claim("self", "residence", "paris")
    assert conflicts(Claim("self", "residence", "berlin"), paris)
    assert not conflicts(Claim("self", "residence", "Paris."), paris)
    assert conflicts(Claim("self", "residence", "paris", negated=True), paris)
    assert not conflicts(Claim("self:brother", "residence", "rome"), paris)
    assert not conflicts(Claim("self", "residence", "rome", negated=True), paris)
    assert not conflicts(Claim("self", "pet", "cat"), Claim("self", "pet", "dog"))
    assert conflicts(
        Claim("self", "pet", "dog", negated=True), Claim("self", "pet", "dog")
    )
    assert conflicts(
        Claim("self", "diet", "vegetarian", negated=True),
        Claim("self", "diet", "vegan"),
    )
    # values in different scripts are not compared (could be the same place)
    assert not conflicts(
        Claim("self", "residence", "柏林"), Claim("self", "residence", "berlin")
    )


def test_find_conflicts_pairs_new_with_old() -> None:
    new = extract_claims("I moved to Berlin. I'm vegan now.")
    old = extract_claims("I live in Paris. I love cheese. I'm vegetarian.")
    got = {(n.attribute, n.value, o.value) for n, o in find_conflicts(new, old)}
    assert got == {("residence", "berlin", "paris"), ("diet", "vegan", "vegetarian")}


def test_extraction_is_per_line_and_stateless() -> None:
    """Every labelled line gives the same claims whatever was extracted before it (speed: memext bench)."""
    lines = [line for pair in TRUE_EN + FALSE_EN + TRUE_ZH + FALSE_ZH for line in pair]
    forward = [extract_claims(line) for line in lines]
    backward = [extract_claims(line) for line in reversed(lines)][::-1]
    assert forward == backward
    assert sum(map(bool, forward)) >= len(TRUE_EN) + len(TRUE_ZH)  # the true conflicts' lines make claims
