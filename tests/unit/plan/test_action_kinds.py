"""A failure signal or a last tool name pulls failure patterns and procedures, and only in that direction."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

from memory_ext import ActionState, MemoryEngine, Turn

T0 = datetime(2026, 5, 4, 9, tzinfo=UTC)


def _turn(i: int, role: str, content: str, **kw) -> Turn:
    return Turn(role=role, content=content, timestamp=T0 + timedelta(minutes=i), session_id="trip", **kw)


CHAT = [
    _turn(0, "user", "Find me flights from Berlin to Tokyo on March 3"),
    _turn(1, "assistant", "Searching flights.", tool_calls=({"name": "flight_search",
                                                             "arguments": {"to": "TYO", "timeout_s": 5}},)),
    _turn(2, "tool", json.dumps({"error": "timeout contacting airline API"}),
          tool_calls=({"name": "flight_search"},)),
    _turn(3, "assistant", "Retrying.", tool_calls=({"name": "flight_search",
                                                    "arguments": {"to": "TYO", "timeout_s": 30}},)),
    _turn(4, "tool", json.dumps({"flights": [{"no": "NH204", "price_eur": 812}]}),
          tool_calls=({"name": "flight_search"},)),
    _turn(5, "assistant", "Found NH204 for 812 EUR."),
    _turn(6, "user", "I prefer aisle seats on long flights"),
    _turn(7, "user", "My sister lives in Osaka"),
    _turn(8, "user", "Book a restaurant in Tokyo for the first evening"),
    _turn(9, "assistant", "Booked Sushi Dai for 7pm."),
]


def test_failure_patterns_are_derived_and_boosted_by_the_action_state(tmp_path: Path) -> None:
    with MemoryEngine.open(tmp_path, embedder="hashing") as engine:
        engine.add_turns(CHAT, "ana")
        query = "what should I do next for the Tokyo trip?"
        plain = engine.search(query, "ana", k=10, explain=True)
        acting = engine.search(query, "ana", k=10, explain=True,
                               action_state=ActionState(last_tool_name="flight_search", failure_signal="timeout"))

        def rank(result, text: str) -> int:
            texts = [i.text for i in result.items]
            return texts.index(text) if text in texts else 99

        # the lesson (the failure and the retry that worked) comes back as an item of its own, with its turns, and
        # moves up; its error turn stays right below it; an unrelated preference does not move up
        lesson = next(i for i in acting.items if i.kind == "failure_pattern")
        assert lesson.text == ("flight_search failed: timeout contacting airline API (timeout_s 5); succeeded with "
                               "timeout_s 30")
        assert acting.items[rank(acting, CHAT[2].content)].turn_ids[0] in lesson.turn_ids
        assert rank(acting, lesson.text) < rank(plain, lesson.text)
        assert rank(acting, lesson.text) <= 1  # the query's best item, or the lesson first
        assert lesson.explanation["routes"]["action"]["kind_bonus"] > 0
        assert rank(acting, CHAT[2].content) > rank(acting, lesson.text)
        assert rank(acting, CHAT[6].content) >= rank(plain, CHAT[6].content) or rank(plain, CHAT[6].content) == 99


NOTES = [Turn(role="user", session_id=f"n{i}", content=c) for i, c in enumerate([
    "The team offsite is planned for the spring.",
    "My passport number ends in 4471 and expires in 2031.",
    "The offsite budget is 12,000 euros for everyone.",
    "I prefer window seats when I fly.",
    "We used calendar_lookup last time to find free dates for the whole team.",
    "The offsite venue shortlist has three castles.",
])]


def _rank(result, text: str) -> int:
    texts = [i.text for i in result.items]
    return texts.index(text) if text in texts else 99


def test_missing_slots_become_routes_that_find_them(tmp_path: Path) -> None:
    with MemoryEngine.open(tmp_path, embedder="hashing") as engine:
        engine.add_turns(NOTES, "ana")
        query = "help me organise the offsite"
        plain = engine.search(query, "ana", k=6)
        acting = engine.search(query, "ana", k=6,
                               action_state=ActionState(current_subgoal="book the offsite flights",
                                                        missing_slots=("passport number",)))
        assert "slot:passport number" in [r.name for r in acting.plan.routes]
        assert _rank(acting, NOTES[1].content) < _rank(plain, NOTES[1].content)
        assert _rank(acting, NOTES[1].content) <= 3  # the slot route has its quota in the top k


def test_available_tools_favour_memories_about_those_tools(tmp_path: Path) -> None:
    with MemoryEngine.open(tmp_path, embedder="hashing") as engine:
        engine.add_turns(NOTES, "ana")
        query = "help me organise the offsite"
        plain = engine.search(query, "ana", k=6)
        acting = engine.search(query, "ana", k=6, action_state=ActionState(available_tools=("calendar_lookup",)))
        assert _rank(acting, NOTES[4].content) < _rank(plain, NOTES[4].content)
