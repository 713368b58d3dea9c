"""The action route is robust: a subgoal or the available tools added to the state do not push the failure's
lesson down, a search for k items is the first k of a search for more, and the lesson still comes first with
many similar successful sessions in the store."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from memory_ext import ActionState, MemoryEngine, Turn
from memory_ext.plan.heuristic import plan_search

T0 = datetime(2026, 4, 1, 9, tzinfo=UTC)
ERROR = "HTTP 422 Unprocessable Entity: check_in"
CITIES = ["Madrid", "Paris", "Rome", "Berlin", "Vienna", "Prague", "Oslo", "Lyon", "Nice", "Milan", "Seville",
          "Bilbao", "Ghent", "Bruges", "Turin", "Genoa", "Munich", "Zurich", "Geneva", "Basel"]


def _t(i: int, session: str, role: str, content: str, **kw: Any) -> Turn:
    return Turn(role=role, content=content, timestamp=T0 + timedelta(minutes=i), session_id=session, **kw)


def _call(name: str, **args: Any) -> tuple[dict[str, Any], ...]:
    return ({"name": name, "arguments": args},)


PAST = [
    _t(0, "porto", "user", "Book me a hotel in Porto, checking in on 14/04/2026 for two nights"),
    _t(1, "porto", "assistant", "", tool_calls=_call("book_hotel", city="Porto", check_in="14/04/2026", nights=2)),
    _t(2, "porto", "tool", ERROR, metadata={"status": "error", "tool_name": "book_hotel"}),
    _t(3, "porto", "assistant", "", tool_calls=_call("book_hotel", city="Porto", check_in="2026-04-14", nights=2)),
    _t(4, "porto", "tool", json.dumps({"booking_id": "H-881", "status": "confirmed"}),
       metadata={"tool_name": "book_hotel"}),
    _t(5, "porto", "assistant", "Booked: Hotel Ribeira, booking H-881."),
]
SIMILAR = [turn for n, city in enumerate(CITIES) for turn in (
    _t(100 + 10 * n, f"ok{n}", "user", f"Please book a hotel in {city} for two nights from May {n + 1}"),
    _t(101 + 10 * n, f"ok{n}", "assistant", "",
       tool_calls=_call("book_hotel", city=city, check_in=f"2026-05-{n + 1:02d}", nights=2)),
    _t(102 + 10 * n, f"ok{n}", "tool", json.dumps({"booking_id": f"H-{n}", "status": "confirmed"}),
       metadata={"tool_name": "book_hotel"}),
    _t(103 + 10 * n, f"ok{n}", "assistant", f"Your hotel in {city} is booked."))]

SUBGOAL = "Book a hotel in Lisbon from 20/06/2026 for 3 nights"
TOOLS = ("search_hotels", "book_hotel", "cancel_booking", "get_weather", "send_email")
STATES = {
    "failure": ActionState(last_tool_name="book_hotel", failure_signal=ERROR),
    "failure+subgoal": ActionState(current_subgoal=SUBGOAL, last_tool_name="book_hotel", failure_signal=ERROR),
    "failure+subgoal+tools": ActionState(current_subgoal=SUBGOAL, last_tool_name="book_hotel", failure_signal=ERROR,
                                         available_tools=TOOLS),
}


def _lesson_rank(engine: MemoryEngine, query: str, state: ActionState, k: int = 10) -> int:
    items = engine.search(query, "ana", k=k, action_state=state).items
    return next((n for n, i in enumerate(items) if "succeeded with check_in '2026-04-14'" in i.text), 99)


def test_the_action_route_asks_for_the_tool_and_error_alone() -> None:
    plans = {name: plan_search(SUBGOAL, now=None, speakers=(), action_state=s) for name, s in STATES.items()}
    action = {name: next(r for r in p.routes if r.name == "action") for name, p in plans.items()}
    assert {a.queries for a in action.values()} == {(f"book_hotel {ERROR} succeeded",)}
    # the subgoal is the query here: no route of its own; another query gets one
    assert [r.name for r in plans["failure+subgoal+tools"].routes] == ["query", "action"]
    other = plan_search("which hotel?", now=None, speakers=(), action_state=STATES["failure+subgoal"])
    assert [(r.name, r.queries) for r in other.routes][-1] == ("subgoal", (SUBGOAL,))


@pytest.mark.parametrize("store", ["past", "past+20 similar sessions"])
def test_subgoal_and_tools_do_not_push_the_lesson_down(tmp_path: Path, store: str) -> None:
    with MemoryEngine.open(tmp_path, embedder="hashing") as engine:
        engine.add_turns(PAST + (SIMILAR if store != "past" else []), "ana")
        ranks = {name: _lesson_rank(engine, SUBGOAL, state) for name, state in STATES.items()}
        assert ranks["failure"] <= 1, ranks
        assert ranks["failure+subgoal"] <= ranks["failure"], ranks
        assert ranks["failure+subgoal+tools"] <= ranks["failure"], ranks
        # the latest user message as the query, the state as the agent derives it
        assert _lesson_rank(engine, "ok go ahead", STATES["failure+subgoal+tools"]) <= 1


def test_a_search_for_k_items_is_the_first_k_of_a_search_for_more(tmp_path: Path) -> None:
    with MemoryEngine.open(tmp_path, embedder="hashing") as engine:
        engine.add_turns(PAST + SIMILAR, "ana")
        states = [None, *STATES.values(), ActionState(current_subgoal=SUBGOAL, missing_slots=("check_in", "city"))]
        for query in (SUBGOAL, "which hotel did I book in Porto?", "ok"):
            for state in states:
                ids = [i.id for i in engine.search(query, "ana", k=10, action_state=state).items]
                for k in (1, 2, 3, 5):
                    got = [i.id for i in engine.search(query, "ana", k=k, action_state=state).items]
                    assert got == ids[:k], (query, state, k)
