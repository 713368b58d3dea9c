"""Updates without an LLM: a later statement of the same subject with another value ranks first for the present,
the earlier one for questions about the past."""

from __future__ import annotations

from pathlib import Path

import pytest

from memory_ext import MemoryEngine, Turn
from memory_ext.rank.updates import asks_past, restates


@pytest.mark.parametrize(("older", "newer"), [
    ("Our team standup is at 9:30 every morning.", "Heads up: from next week the standup moves to 10:15."),
    ("I drive a 2015 Honda Civic, silver.", "The Civic finally died, so I'm leasing a Tesla Model 3 now."),
    ("My rent is 1,200 euros, due on the 1st.", "The landlord raised the rent — it's 1,350 from July."),
    ("My pottery class is on Saturday mornings.", "They moved pottery to Sunday afternoons."),
    ("周三下午三点和客户开项目评审会。", "客户那边临时有事，评审会改到周五上午十点了。"),
    ("我们的婚礼定在五月二十号，在苏州办。", "苏州的酒店档期没了，婚礼挪到无锡办，日子没变。"),
    ("孩子的钢琴课在每周二下午四点半。", "钢琴老师换了时间，以后是每周三下午五点。"),
])
def test_a_restated_subject_with_another_value_is_an_update(older: str, newer: str) -> None:
    assert restates(older, newer)
    assert not restates(newer, newer)


@pytest.mark.parametrize(("older", "newer"), [
    ("I go to the gym on Mondays.", "At the gym I mostly do deadlifts."),
    ("My daughter Mia turns seven on May 3rd.", "Remind me to order the cake by April 28."),
    ("我每天坐地铁二号线上班，大概四十分钟。", "下雨天我就打车。"),
    # a new name in a sentence about something else; "Clara's" is Clara
    ("My sister Clara is visiting me in Paris on December 12; she is vegetarian.",
     "The Lisbon conference was great. Next: find a vegetarian restaurant in Paris for Clara's visit."),
])
def test_more_about_a_subject_or_another_subject_is_no_update(older: str, newer: str) -> None:
    assert not restates(older, newer)


def test_questions_about_the_past_are_told_from_the_present() -> None:
    assert asks_past("Where did Lena live before?") and asks_past("我以前住在哪里？")
    assert asks_past("What phone did I use to have?")
    assert not asks_past("Where does Lena live now?") and not asks_past("我现在住在哪里？")


def _store(engine: MemoryEngine, ns: str, first: str, later: str) -> None:
    engine.add_turns([Turn(role="user", content=first, session_id="s1", timestamp="2026-03-02T09:00:00Z"),
                      Turn(role="assistant", content="Okay.", session_id="s1", timestamp="2026-03-02T09:01:00Z"),
                      Turn(role="user", content=later, session_id="s2", timestamp="2026-03-11T09:00:00Z"),
                      Turn(role="assistant", content="Got it.", session_id="s2", timestamp="2026-03-11T09:01:00Z")],
                     ns, wait=True)


def test_the_newer_statement_answers_the_present_and_the_older_the_past(tmp_path: Path) -> None:
    with MemoryEngine.open(tmp_path / "m", embedder="e5") as engine:
        _store(engine, "a", "Our team standup is at 9:30 every morning.",
               "From next week the standup moves to 10:15 because of the new hires.")
        _store(engine, "b", "周三下午三点和客户开项目评审会。", "客户那边临时有事，评审会改到周五上午十点了。")
        now = engine.search("What time is the standup?", "a", k=3).items[0].text
        before = engine.search("What time was the standup before?", "a", k=3).items[0].text
        zh_now = engine.search("项目评审会是什么时候？", "b", k=3).items[0].text
        zh_before = engine.search("评审会原来是什么时候？", "b", k=3).items[0].text
    assert now.startswith("From next week") and before.startswith("Our team standup")
    assert zh_now.startswith("客户那边") and zh_before.startswith("周三下午")


def test_a_later_turn_about_something_else_does_not_outrank_the_fact(tmp_path: Path) -> None:
    """Notebook 04's chat: the later turn names another city (Lisbon, in a sentence about a conference) and
    Clara's visit; it is no update of "Clara is vegetarian", so the statement answers first."""
    fact = "My sister Clara is visiting me in Paris on December 12; she is vegetarian."
    with MemoryEngine.open(tmp_path / "m", embedder="e5") as engine:
        _store(engine, "ana", fact,
               "The Lisbon conference was great. Next: find a vegetarian restaurant in Paris for Clara's visit.")
        first = engine.search("Is Clara vegetarian?", "ana", k=3).items[0].text
    assert first == fact
