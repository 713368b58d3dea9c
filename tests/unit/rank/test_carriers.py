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
    # the agent's non-answer ("You haven't told me yet.") yields to what the user said next, the question to both
    assert dog[0] == "My dog is called Biscuit."
    assert dog.index("What's my dog called?") > dog.index("You haven't told me yet.") > 0


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


def test_the_agents_non_answer_and_advice_yield_to_the_users_statement(tmp_path: Path) -> None:
    with MemoryEngine.open(tmp_path / "m", embedder="e5") as engine:
        engine.add_turns(_chat([
            ("user", "我家的猫叫什么来着？"), ("assistant", "你还没告诉过我呢。"),
            ("user", "它叫年糕，是一只橘猫，今年四岁。"), ("assistant", "年糕这个名字真可爱！"),
        ]), "cat", wait=True)
        engine.add_turns(_chat([
            ("user", "I keep a monstera and two snake plants in the living room."),
            ("assistant", "Lovely. The monstera likes bright indirect light."),
            ("user", "I water them every Sunday."), ("assistant", "Sounds right."),
        ]), "plants", wait=True)
        cat = _texts(engine, "我家猫叫什么名字", "cat")
        plants = _texts(engine, "when do I water plants", "plants")
    assert cat[0] == "它叫年糕，是一只橘猫，今年四岁。"
    assert cat.index("你还没告诉过我呢。") > 0
    # the agent's advice comes right after the statement it answers, not above the user's own words
    assert plants.index("Lovely. The monstera likes bright indirect light.") == \
        plants.index("I keep a monstera and two snake plants in the living room.") + 1


def test_between_two_named_people_a_short_reply_to_a_question_keeps_its_place(tmp_path: Path) -> None:
    turns = [Turn(role=role, content=text, speaker=speaker, session_id="s1", timestamp=f"2026-03-02T09:0{i}:00Z")
             for i, (role, speaker, text) in enumerate([
                 ("user", "Caroline", "What's the name of your new puppy?"),
                 ("assistant", "Melanie", "Oscar, after my grandfather."),
                 ("user", "Caroline", "That's such a sweet story, I love dogs with names like that."),
             ])]
    with MemoryEngine.open(tmp_path / "m", embedder="e5") as engine:
        engine.add_turns(turns, "locomo", wait=True)
        puppy = _texts(engine, "What is Melanie's puppy called?", "locomo")
    assert puppy[0] == "Oscar, after my grandfather."


def test_the_agents_reply_to_a_replaced_statement_stays_below_it(tmp_path: Path) -> None:
    """The reply holds the question's word (工作) and the old statement does not: it would stand for the answer,
    but the statement it answers was replaced, so it is as out of date and comes after it."""
    turns = [Turn(role=role, content=text, session_id=f"s{i // 2}", timestamp=f"2026-03-0{2 + i // 2}T09:0{i}:00Z")
             for i, (role, text) in enumerate([
                 ("user", "我在一家广告公司做设计，已经三年了。"), ("assistant", "广告公司的工作挺有意思的。"),
                 ("user", "我跳槽了，下个月开始去一家游戏公司做设计。"), ("assistant", "恭喜！"),
             ])]
    with MemoryEngine.open(tmp_path / "m", embedder="e5") as engine:
        engine.add_turns(turns, "job", wait=True)
        job = _texts(engine, "我现在在哪工作？", "job")
    assert job[0] == "我跳槽了，下个月开始去一家游戏公司做设计。"
    assert job.index("广告公司的工作挺有意思的。") > job.index("我在一家广告公司做设计，已经三年了。")


@pytest.mark.parametrize(("lines", "question", "statement", "reply"), [
    ([("user", "We're planning a trip to Iceland in August, mainly for the ring road."),
      ("assistant", "Great choice, August has the longest days."),
      ("user", "My partner wants to see puffins."),
      ("assistant", "Puffins nest on the cliffs in the south until mid-August."),
      ("user", "Change of plans — Iceland got too expensive, so we booked Norway instead, same dates."),
      ("assistant", "Norway in August is lovely. Want fjord suggestions?")],
     "where are we going on holiday in August?",
     "Change of plans — Iceland got too expensive, so we booked Norway instead, same dates.",
     "Norway in August is lovely. Want fjord suggestions?"),
])
def test_a_reply_telling_back_the_users_earlier_words_stays_below_the_statement(
        tmp_path: Path, lines: list[tuple[str, str]], question: str, statement: str, reply: str) -> None:
    """The reply holds a word of the question the new statement does not ("August"), but the user said it
    before ("a trip to Iceland in August"): it tells the plan back, the statement is the answer."""
    turns = [Turn(role=role, content=text, session_id=f"s{i // 4}", timestamp=f"2026-03-0{2 + i // 4}T09:0{i}:00Z")
             for i, (role, text) in enumerate(lines)]  # the change said in a later session
    with MemoryEngine.open(tmp_path / "m", embedder="e5") as engine:
        engine.add_turns(turns, "trip", wait=True)
        ranked = _texts(engine, question, "trip")
    assert ranked[0] == statement
    assert ranked.index(reply) > ranked.index(statement)
