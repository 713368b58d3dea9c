"""Conformance, tool turns: a tool result's tool name, call id and error flag are fields of the turn, kept by every
backend, by export/import and by updates; the context shows tool calls and results as readable lines — the same
test code on SQLite and on PostgreSQL (``store_target``)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from memory_ext import MemoryEngine, Turn
from memory_ext.errors import InvalidTurnError
from tests.conftest import StoreTarget

pytestmark = pytest.mark.postgres

T0 = datetime(2026, 4, 1, 9, 0, tzinfo=UTC)


def _booking(session: str) -> list[Turn]:
    def at(i: int, **kw) -> Turn:
        return Turn(timestamp=T0 + timedelta(minutes=i), session_id=session, **kw)

    return [
        at(0, role="user", content="Book me a hotel in Lisbon from April 14 to April 16."),
        at(1, role="assistant", content="", tool_calls=({"id": "call_1", "name": "book_hotel",
                                                         "args": {"city": "Lisbon", "check_in": "14/04/2026"}},)),
        at(2, role="tool", content="HTTP 422 Unprocessable Entity: check_in must be YYYY-MM-DD",
           tool_name="book_hotel", tool_call_id="call_1", is_error=True, metadata={"latency_ms": 41}),
        at(3, role="assistant", content="", tool_calls=({"id": "call_2", "name": "book_hotel",
                                                         "args": {"city": "Lisbon", "check_in": "2026-04-14"}},)),
        at(4, role="tool", content='{"booking_id": "H-5521", "status": "confirmed"}', tool_name="book_hotel",
           tool_call_id="call_2"),
    ]


@pytest.fixture
def engine(store_target: StoreTarget):
    with store_target.open() as eng:
        yield eng


def test_tool_fields_round_trip(engine: MemoryEngine) -> None:
    turns = _booking("s1")
    engine.add_turns(turns, "ana")
    back = engine.get_turns("ana")
    assert [t.model_dump(exclude={"id"}) for t in back] == [t.model_dump(exclude={"id"}) for t in turns]
    assert (back[2].tool_name, back[2].tool_call_id, back[2].is_error, back[2].metadata) == (
        "book_hotel", "call_1", True, {"latency_ms": 41})
    assert back[4].is_error is False


def test_search_items_carry_the_fields_and_the_context_reads_as_lines(engine: MemoryEngine) -> None:
    engine.add_turns(_booking("s1"), "ana")
    engine.flush()
    result = engine.search("book_hotel check_in HTTP 422", "ana", k=3)
    # the tool turn itself (the lesson derived from the failure and its fix quotes the error too)
    failed = next(i for i in result.items if "HTTP 422" in i.text and i.kind == "turn")
    assert failed.metadata == {"latency_ms": 41, "tool_name": "book_hotel", "tool_call_id": "call_1",
                               "is_error": True}
    assert 'assistant → book_hotel(city="Lisbon", check_in="14/04/2026")' in result.context
    assert "tool book_hotel (error): HTTP 422 Unprocessable Entity" in result.context
    assert "assistant: \n" not in result.context + "\n" and not result.context.rstrip().endswith("assistant:")
    only_errors = engine.search("book_hotel", "ana", k=5, filters={"metadata": {"is_error": True}})
    assert [i.text for i in only_errors.items] == [failed.text]


def test_export_import_and_update_keep_the_fields(engine: MemoryEngine, store_target: StoreTarget,
                                                  tmp_path) -> None:
    engine.add_turns(_booking("s1"), "ana")
    lines = list(engine.export("ana"))
    exported = next(r for r in lines if r.get("type") == "turn" and r.get("role") == "tool")
    assert exported["metadata"]["is_error"] is True  # stored under the reserved keys of Turn.metadata
    with MemoryEngine.open(tmp_path / "copy", embedder="hashing") as copy:
        copy.import_records(lines)
        assert [(t.tool_name, t.is_error) for t in copy.get_turns("ana")] == [
            (None, False), (None, False), ("book_hotel", True), (None, False), ("book_hotel", False)]
    failed = engine.get_turns("ana")[2]
    engine.update("ana", failed.id, content="HTTP 422: check_in must be an ISO date")
    latest = engine.get_turns("ana")[-1]
    assert (latest.content, latest.tool_name, latest.tool_call_id, latest.is_error) == (
        "HTTP 422: check_in must be an ISO date", "book_hotel", "call_1", True)


def test_a_metadata_key_that_contradicts_a_field_is_refused() -> None:
    with pytest.raises(InvalidTurnError, match=r"metadata\.tool_name"):
        Turn(role="tool", content="ok", tool_name="book_hotel", metadata={"tool_name": "cancel_hotel"})
    with pytest.raises(InvalidTurnError, match="is_error"):
        Turn(role="tool", content="ok", is_error="yes")
    # a value of another type is the user's own metadata, left alone
    assert Turn(role="tool", content="ok", metadata={"is_error": "maybe"}).metadata == {"is_error": "maybe"}
