"""Experience as memory, without an LLM: a failed call then a successful call of the same tool is derived as the
lesson (from the two calls' arguments, not from the wording), a flagged error is a failure whatever its text,
a value the user gave for a parameter is found by the parameter's name, and derived items come back as items."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from memory_ext import ActionState, MemoryEngine, Turn
from memory_ext.ingest.kinds import derive_kinds

T0 = datetime(2026, 4, 1, 9, tzinfo=UTC)


def _t(i: int, role: str, content: str, session: str = "porto", **kw: Any) -> Turn:
    return Turn(role=role, content=content, timestamp=T0 + timedelta(minutes=i), session_id=session, **kw)


def _call(name: str, **args: Any) -> tuple[dict[str, Any], ...]:
    return ({"name": name, "arguments": args},)


def hotel_session(error: str = "HTTP 422 Unprocessable Entity: check_in", session: str = "porto") -> list[Turn]:
    return [
        _t(0, "user", "Book me a hotel in Porto, arriving 14/04/2026, two nights", session),
        _t(1, "assistant", "", session, tool_calls=_call("book_hotel", city="Porto", check_in="14/04/2026", nights=2)),
        _t(2, "tool", error, session, metadata={"status": "error", "tool_name": "book_hotel"}),
        _t(3, "assistant", "", session, tool_calls=_call("book_hotel", city="Porto", check_in="2026-04-14", nights=2)),
        _t(4, "tool", json.dumps({"booking_id": "H-881", "status": "confirmed"}), session,
           metadata={"tool_name": "book_hotel"}),
        _t(5, "assistant", "Booked: Hotel Ribeira, booking H-881.", session),
    ]


def _rows(turns: list[Turn]) -> list[dict[str, Any]]:
    return [{"id": f"t{i}", "role": t.role.value, "content": t.content, "session_id": t.session_id,
             "ts": t.timestamp.timestamp() if t.timestamp else None, "tool_calls": list(t.tool_calls),
             "metadata": t.stored_metadata()} for i, t in enumerate(turns)]


def _lessons(turns: list[Turn]) -> list[Any]:
    return [r for r in derive_kinds(_rows(turns), 0) if r.kind == "failure_pattern"]


def test_the_lesson_is_the_diff_of_the_failed_and_the_successful_call() -> None:
    [lesson] = _lessons(hotel_session())
    assert lesson.text == ("book_hotel failed: HTTP 422 Unprocessable Entity: check_in (check_in '14/04/2026'); "
                           "succeeded with check_in '2026-04-14'")
    # anchored to the call that worked; its turns then: the error, the failed call, the success's result
    assert lesson.turn_ids == ["t3", "t2", "t1", "t4"] and lesson.source_role == "assistant"


def test_the_lesson_does_not_depend_on_the_error_wording() -> None:
    # a plain-text error in any language, flagged by its face (status="error"), gives the same lesson shape
    for error in ("Das Datum ist ungültig", "日期格式不对", "nope"):
        [lesson] = _lessons(hotel_session(error))
        assert lesson.text.startswith("book_hotel failed: ")
        assert lesson.text.endswith("(check_in '14/04/2026'); succeeded with check_in '2026-04-14'")
    # without the flag, text that reads as success is no failure
    turns = hotel_session("Das Datum ist ungültig")
    turns[2] = _t(2, "tool", "Das Datum ist ungültig", metadata={"tool_name": "book_hotel"})
    assert _lessons(turns) == []


def test_a_flagged_error_without_a_fix_is_still_a_failure_record() -> None:
    turns = hotel_session("the date is wrong")[:3]
    [failure] = _lessons(turns)
    assert failure.text.startswith("book_hotel failed") and "the date is wrong" in failure.text
    for flagged in (_t(2, "tool", "the date is wrong", tool_name="book_hotel", is_error=True),
                    _t(2, "tool", "the date is wrong", metadata={"isError": True})):  # the field, MCP's key
        turns[2] = flagged
        assert len(_lessons(turns)) == 1


def test_the_lesson_comes_back_as_an_item_with_its_source_turns(tmp_path: Path) -> None:
    with MemoryEngine.open(tmp_path, embedder="hashing") as engine:
        written = engine.add_turns(hotel_session(), "ana")
        state = ActionState(last_tool_name="book_hotel", failure_signal="HTTP 422 Unprocessable Entity: check_in")
        items = engine.search("Book a hotel in Lisbon, arriving 20/06/2026", "ana", k=5, action_state=state).items
        lesson = next(i for i in items if i.kind == "failure_pattern")
        assert "succeeded with check_in '2026-04-14'" in lesson.text
        ids = written.turn_ids
        assert lesson.turn_ids == (ids[3], ids[2], ids[1], ids[4])
        assert items.index(lesson) <= 1


def test_a_value_the_user_gave_is_found_by_the_parameter_name(tmp_path: Path) -> None:
    chat = [
        _t(0, "user", "Please use my loyalty number LX-99812 for the booking", "s1"),
        _t(1, "assistant", "", "s1", tool_calls=_call("book_hotel", city="Oslo", loyalty_id="LX-99812")),
        _t(2, "tool", json.dumps({"status": "confirmed"}), "s1", metadata={"tool_name": "book_hotel"}),
        *[_t(10 + i, "user", f"My note {i}: the Oslo trip needs a rain jacket and boots", f"n{i}") for i in range(8)],
    ]
    facts = [r for r in derive_kinds(_rows(chat), 0) if "slot" in r.tags]
    # the city was never said by the user before the call: only the loyalty number is a value they gave
    assert [f.text for f in facts] == ["loyalty_id: 'LX-99812' (given for book_hotel)"]
    assert facts[0].turn_ids[0] == "t0"  # anchored to the user's words
    with MemoryEngine.open(tmp_path, embedder="hashing") as engine:
        ids = engine.add_turns(chat, "ana").turn_ids
        items = engine.search("loyalty_id", "ana", k=3).items
        assert any(ids[0] in i.turn_ids for i in items[:2])
        state = ActionState(current_subgoal="book a hotel in Oslo", missing_slots=("loyalty_id",))
        items = engine.search("book a hotel in Oslo", "ana", k=3, action_state=state).items
        assert any(ids[0] in i.turn_ids for i in items)
