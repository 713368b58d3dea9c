"""A later statement supersedes the earlier one about the same thing, at write time and without an LLM: the older
turn gets ``valid_to`` and ``superseded_by`` and stays in history (``as_of`` before the change and questions about the
past find it); a default search ranks the newer first. Two statements that only share a word are left alone."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from memory_ext import MemoryEngine, Turn
from memory_ext.ingest.supersede import frame_row, replaces

SAID = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
CHANGED = SAID + timedelta(days=9)
NOW = CHANGED + timedelta(days=1)


def _chat(engine: MemoryEngine, ns: str, first: str, later: str) -> list[str]:
    """A user statement, the assistant's reply, the later statement and its reply; returns the turn ids."""
    return engine.add_turns([
        Turn(role="user", content=first, session_id="s1", timestamp=SAID),
        Turn(role="assistant", content="Okay, noted.", session_id="s1", timestamp=SAID + timedelta(minutes=1)),
        Turn(role="user", content=later, session_id="s2", timestamp=CHANGED),
        Turn(role="assistant", content="Thanks for the update.", session_id="s2",
             timestamp=CHANGED + timedelta(minutes=1)),
    ], ns, wait=True).turn_ids


@pytest.fixture
def engine(tmp_path: Path):
    with MemoryEngine.open(tmp_path / "m", embedder="hashing", config={"lifecycle": {"statement_frames": True}}) as e:
        yield e


@pytest.mark.parametrize(("first", "later", "now_q", "past_q"), [
    # read by the claims extractor (residence) ...
    ("Lena lives in Porto.", "Lena moved to Coimbra last month.", "Where does Lena live now?",
     "Where did Lena live before?"),
    ("Lena住在杭州。", "Lena上个月搬到苏州了。", "Lena现在住在哪里？", "Lena以前住在哪里？"),
    # ... and by the statements' frames alone: no rule of the extractor reads these
    ("Lena lives in Porto.", "Lena's new flat is in Coimbra now, close to the university.",
     "Where does Lena live now?", "Where did Lena live before?"),
    ("I use an iPhone 12 at work.", "The iPhone died, so I'm using a Pixel 8 now.", "Which phone do I use?",
     "Which phone did I use before?"),
    ("我每天骑一辆捷安特自行车上班。", "捷安特被偷了，现在换了一辆电动车骑。", "我现在骑什么车上班？",
     "我以前骑什么车上班？"),
    ("周三下午三点和客户开项目评审会。", "客户那边临时有事，评审会改到周五上午十点了。", "项目评审会是什么时候？",
     "评审会原来是什么时候？"),
])
def test_the_later_statement_supersedes_the_earlier(engine: MemoryEngine, first: str, later: str, now_q: str,
                                                   past_q: str) -> None:
    old_id, _, new_id, _ = _chat(engine, "a", first, later)

    supersede = [v for v in engine.history("a", old_id) if v.operation == "supersede"]
    assert [(v.content, v.valid_to) for v in supersede] == [(first, CHANGED)]  # kept, with its end of validity
    assert not [v for v in engine.history("a", new_id) if v.operation == "supersede"]

    now = [i.text for i in engine.search(now_q, "a", k=4, now=NOW).items]
    assert now[0] == later and first in now  # the old statement is still found, below the new one
    before = [i.text for i in engine.search(now_q, "a", k=4, as_of=CHANGED - timedelta(days=1)).items]
    assert first in before and later not in before
    past = [i.text for i in engine.search(past_q, "a", k=4, now=NOW).items]
    assert past[0] == first


@pytest.mark.parametrize(("first", "later"), [
    ("I live in Porto.", "My sister Lena lives in Coimbra."),  # another person
    ("我住在北京。", "我妹妹住在上海。"),
    ("My bike is a Trek, I ride it on Sundays.", "My brother's bike shop opens on Mondays."),
    ("I go to the gym on Mondays.", "Remind me to renew the gym card by May 3rd?"),  # a question states nothing
    ("My daughter Mia turns seven on May 3rd.", "If the weather holds we could have the party on May 10th."),
])
def test_statements_that_only_share_a_word_are_not_superseded(engine: MemoryEngine, first: str, later: str) -> None:
    old_id, *_ = _chat(engine, "b", first, later)
    assert not replaces(later, frame_row(first))
    assert [v.operation for v in engine.history("b", old_id)] == ["add"]


def test_a_theme_many_statements_share_links_nothing(engine: MemoryEngine) -> None:
    """A training diary: every entry names the gym and a day; no entry replaces the one before."""
    days = ["Mondays", "Tuesdays", "Wednesdays", "Thursdays", "Fridays"]
    turns = []
    for i, day in enumerate(days):
        at = SAID + timedelta(days=i)
        turns += [Turn(role="user", content=f"Gym log: squats at the gym on {day}, 5x5.", timestamp=at),
                  Turn(role="assistant", content="Logged.", timestamp=at + timedelta(minutes=1))]
    ids = engine.add_turns(turns, "diary", wait=True).turn_ids
    superseded = [i for i in ids[::2] if any(v.operation == "supersede" for v in engine.history("diary", i))]
    assert len(superseded) <= 1  # at most the first entry, before "gym" is seen to be the theme


def test_memories_without_an_assistant_are_events_not_updates(engine: MemoryEngine) -> None:
    """Memories written one by one (no assistant speaks): each is dated, none replaces another by its frame."""
    ids = engine.add_turns([Turn(role="user", content="Bart won the 100 metres at the school games on 7 March.",
                                 timestamp=SAID),
                            Turn(role="user", content="Bart won the long jump at the school games on 9 May.",
                                 timestamp=CHANGED)], "memories", wait=True).turn_ids
    assert [v.operation for v in engine.history("memories", ids[0])] == ["add"]


LISBON = [  # the lifecycle notebook's chat, shortened: several topics, places and dates shared between them
    ("I live in Paris and I work as a data engineer at a logistics company.", "Noted."),
    ("I'm going to a conference in Lisbon from November 20 to 23. My hotel budget is 150 euros a night.",
     "Noted: Lisbon, November 20-23, hotel up to 150 EUR per night."),
    ("My sister Clara is visiting me in Paris on December 12; she is vegetarian.",
     "Noted: Clara visits on December 12 and is vegetarian."),
    ("Clara's train was cancelled, she is now visiting on December 14.", "Noted: Clara arrives on December 14."),
    ("My flight to Lisbon is TP 433 from Orly on November 20 at 07:10.",
     "Saved: TP 433, Orly to Lisbon, November 20, 07:10."),
    ("My hotel in Lisbon is Chiado Rooms, booked from November 20 to November 23.", "Saved."),
    ("The Lisbon conference was great. Next: find a vegetarian restaurant in Paris for Clara's visit.",
     "I'll look for vegetarian restaurants in Paris for December 12."),
]
SHENZHEN = [  # the same in Chinese: a trip, its train and hotel, a school meeting, the wife's job in the same city
    ("我下周三去深圳见客户，住两晚。", "好的，记下了。"),
    ("我女儿的家长会在周五下午三点。", "好的。"),
    ("去深圳的高铁票买好了，周三早上九点出发。", "好的，记下了。"),
    ("我老婆在深圳工作，是做设计的。", "好的。"),
    ("我在深圳住的酒店是南山的希尔顿，周三入住。", "酒店记下了。"),
    ("家长会改到下周一晚上七点了。", "好的，已更新。"),
]


@pytest.mark.parametrize(("chat", "updated"), [(LISBON, {2: 3}), (SHENZHEN, {1: 5})])
def test_a_multi_topic_chat_supersedes_only_its_updates(tmp_path: Path, chat: list[tuple[str, str]],
                                                         updated: dict[int, int]) -> None:
    """With the default configuration: statements that share a place and a date with an earlier one but add to
    it (a flight and a hotel for the conference trip, a restaurant for the sister's visit, the wife's job in the
    same city) stay current; the later time of the sister's visit, the moved school meeting supersede theirs."""
    turns = []
    for i, (said, reply) in enumerate(chat):
        at = SAID + timedelta(days=i)
        turns += [Turn(role="user", content=said, session_id=f"s{i}", timestamp=at),
                  Turn(role="assistant", content=reply, session_id=f"s{i}", timestamp=at + timedelta(minutes=1))]
    with MemoryEngine.open(tmp_path / "m", embedder="hashing") as engine:  # the default configuration
        ids = engine.add_turns(turns, "chat", wait=True).turn_ids[::2]
        superseded = {i for i, turn_id in enumerate(ids)
                      if any(v.operation == "supersede" for v in engine.history("chat", turn_id))}
    assert superseded == set(updated)


@pytest.mark.parametrize(("first", "later"), [
    ("Our standup is at 9:30.", "Standup is at 10:15 from now on."),
    ("My dentist appointment is on Tuesday at 9am.", "The dentist moved my appointment to Thursday at 2pm."),
    ("My sister Lena lives in Porto.", "Lena lives in Coimbra now."),
    ("The book club meets on Thursdays.", "The book club now meets on Wednesdays."),
    ("My daughter Emma has piano on Tuesdays at 5pm with Mrs. Hall.", "Mrs. Hall moved Emma's piano to Thursdays."),
    ("I'm flying to Tokyo on March 3 for a work trip.", "My flight got cancelled, I'm now flying on March 4."),
    ("我每周二下午去上瑜伽课。", "瑜伽课改到周四晚上了。"),
    ("我的手机是华为P40。", "我换了手机，现在用iPhone 15。"),
    ("我下个月十五号去上海出差。", "出差推迟了，改成十八号去上海。"),
])
def test_a_change_of_one_value_replaces(first: str, later: str) -> None:
    assert replaces(later, frame_row(first))


@pytest.mark.parametrize(("first", "later"), [
    # the later statement adds to the earlier one: its clause restates the old value, or gives a finer one
    ("I'm flying to Rome on May 5.", "My hotel in Rome is the Hotel Artemide, from May 5 to May 9."),
    ("I'm going to a conference in Lisbon in November.", "I'm staying at the Hotel Avenida in Lisbon."),
    ("I'm going to a conference in Lisbon from November 20 to 23.", "My flight to Lisbon is TP 433 on November 20."),
    ("我十一月二十号去里斯本开会，开到二十三号。", "我去里斯本的航班是TP433，二十号早上七点起飞。"),
    ("我下周三去深圳见客户。", "去深圳的高铁票买好了，周三早上九点出发。"),
    # it is about something else than the earlier statement's subject
    ("I'm going to a conference in Lisbon from November 20 to 23.", "My talk at the conference is on November 21."),
    ("My son Leo plays football on Saturdays.", "Leo's coach Mark moved to Madrid."),
    ("I work at Northwind in Rotterdam.", "My manager at Northwind is Priya, based in London."),
    ("I work at Northwind as a backend developer.", "Northwind's office is in Rotterdam, I go in on Tuesdays."),
    ("The book club meets on Thursdays.", "This month the club reads Dune by Frank Herbert."),
    ("我每周二下午去上瑜伽课。", "瑜伽老师叫Anna，她是从上海来的。"),
    # they share only a unit, or a name that is a possessive
    ("My budget for the trip is 2000 euros.", "The flight costs 350 euros, the rest is for the hotel."),
    ("My sister Clara is visiting me in Paris on December 12.",
     "Find a vegetarian restaurant in Paris for Clara's visit."),
])
def test_a_statement_that_adds_or_speaks_of_something_else_replaces_nothing(first: str, later: str) -> None:
    assert not replaces(later, frame_row(first))


@pytest.mark.xfail(strict=True, reason="what precision costs: the old value in the changed clause; flight / flying")
@pytest.mark.parametrize(("first", "later"), [
    ("Our standup is at 9:30.", "The standup moves from 9:30 to 10:15."),
    ("I drive a Honda Civic.", "I sold the Civic and bought a Tesla Model 3."),
    ("I'm flying to Rome on May 5.", "My flight to Rome is now on May 7."),
])
def test_changes_said_with_the_old_value_or_another_word_are_missed(first: str, later: str) -> None:
    assert replaces(later, frame_row(first))
