"""Observations 2, 3 and 4 of issue 13: memories can be updated (the old version keeps its validity interval and
is reachable with ``as_of``, never returned by default), their history listed, and exactly the named memories
deleted from every store — recorded in the history without their text."""

from __future__ import annotations

import asyncio
import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from memory_ext import MemoryEngine, Namespace, Turn
from memory_ext.errors import InvalidQueryError
from tests.conftest import CONVERSATIONS, make_turns

T0 = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)


def _db_text(engine: MemoryEngine) -> bytes:
    engine.purge(wait_s=1.0)
    return b"".join(p.read_bytes() for p in Path(engine.path).iterdir() if p.name.startswith("memory.sqlite3"))


def test_update_writes_a_new_version_and_keeps_the_old_one_for_as_of(engine: MemoryEngine) -> None:
    engine.add_turns(make_turns("ana", T0), "ana")
    engine.update("ana", "ana:2", content="My sister Lena is moving to Nairobi in June.",
                  timestamp=T0 + timedelta(days=30))
    now = engine.search("Where is Lena moving?", "ana", k=5).items
    assert "Nairobi" in now[0].text and not any("Lena is moving to Porto" in i.text for i in now)
    then = engine.search("Where is Lena moving?", "ana", k=5, as_of=T0 + timedelta(days=1)).items
    assert "Lena is moving to Porto" in then[0].text and not any("Nairobi" in i.text for i in then)
    assert sum("Lena" in t.content for t in engine.get_turns("ana")) == 2  # lossless: both versions are stored
    history = engine.history("ana", "ana:2")
    assert [(v.operation, v.current) for v in history] == [("add", False), ("update", True)]
    assert history[0].valid_to == T0 + timedelta(days=30) and "Porto" in (history[0].content or "")
    assert history[1].turn_id is not None and engine.get_turns("ana")[-1].external_id == "ana:2"


def test_update_by_search_result_id_or_turn_id_and_of_metadata(engine: MemoryEngine) -> None:
    added = engine.add_turns([Turn(role="user", content="I drink my coffee black", metadata={"topic": "food"})], "ana")
    hit = engine.search("how do I take my coffee?", "ana", k=1).items[0]
    second = engine.update("ana", hit.id, content="I drink my coffee with oat milk now")
    third = engine.update("ana", second.turn_ids[0], metadata={"topic": "drinks"})
    top = engine.search("how do I take my coffee?", "ana", k=3).items
    assert [(i.text, i.metadata) for i in top] == [("I drink my coffee with oat milk now", {"topic": "drinks"})]
    versions = engine.history("ana", added.turn_ids[0])
    assert [v.operation for v in versions] == ["add", "update", "update"]
    assert versions[-1].turn_id == third.turn_ids[0] and versions[0].memory_id == added.turn_ids[0]


def test_unknown_or_empty_updates_are_typed_errors_and_write_nothing(engine: MemoryEngine) -> None:
    engine.add_turns(make_turns("ana"), "ana")
    with pytest.raises(InvalidQueryError) as info:
        engine.update("ana", "no-such-memory", content="x")
    assert info.value.field == "id"
    with pytest.raises(InvalidQueryError):
        engine.update("ana", "ana:0")
    with pytest.raises(InvalidQueryError):
        engine.update("nobody", "ana:0", content="x")
    assert len(engine.get_turns("ana")) == len(CONVERSATIONS["ana"])


def test_delete_removes_exactly_those_memories_from_every_store(engine: MemoryEngine) -> None:
    for user in CONVERSATIONS:
        engine.add_turns(make_turns(user), user)
    engine.update("ana", "ana:0", content="I adopted a beagle puppy called Biscuit last weekend.")
    before = {t.external_id: t.id for t in engine.get_turns("ana")}
    receipt = engine.delete("ana", ["ana:0", "ana:4"])
    assert receipt.turns == 3  # both versions of the beagle, and the cello
    after = {t.external_id: t.id for t in engine.get_turns("ana")}
    assert after == {k: v for k, v in before.items() if k not in ("ana:0", "ana:4")}
    assert not any("beagle" in i.text or "cello" in i.text for i in engine.search("beagle cello", "ana", k=10).items)
    assert len(engine.get_turns("ben")) == len(CONVERSATIONS["ben"])
    text = _db_text(engine)
    assert b"Biscuit" not in text and b"cello" not in text  # deleted means forgotten, on disk too
    assert [(v.operation, v.content) for v in engine.history("ana", "ana:0")] == \
        [("add", None), ("update", None), ("delete", None)]
    with pytest.raises(InvalidQueryError):
        engine.delete("ana", ["ana:0"])


def test_delete_cost_does_not_touch_the_rest_of_the_namespace(engine: MemoryEngine) -> None:
    """The other turns keep their records (same ids): nothing is re-derived or re-archived."""
    engine.add_turns([Turn(role="user", content=f"note {i} about city {i}", external_id=f"n{i}",
                           timestamp=T0 + timedelta(hours=i)) for i in range(40)], "ana")
    conn = sqlite3.connect(engine.path / "memory.sqlite3")
    records = dict(conn.execute("SELECT id, rid FROM records"))
    engine.delete("ana", ["n20"])
    kept = dict(conn.execute("SELECT id, rid FROM records"))
    conn.close()
    gone = set(records) - set(kept)
    assert set(kept) <= set(records) and 1 <= len(gone) <= 6  # its turn record and the windows holding it


def test_forgetting_the_namespace_forgets_its_history(engine: MemoryEngine) -> None:
    engine.add_turns(make_turns("ana"), "ana")
    engine.update("ana", "ana:2", content="Lena moved to Oslo")
    engine.forget("ana")
    engine.add_turns(make_turns("ana"), "ana")
    assert [v.operation for v in engine.history("ana", "ana:2")] == ["add"]


def test_async_twins(engine: MemoryEngine) -> None:
    async def run() -> list[str]:
        await engine.aadd_turns([Turn(role="user", content="My locker code is 4471", external_id="locker")],
                                Namespace("ana"))
        await engine.aupdate("ana", "locker", content="My locker code is 9902")
        ops = [v.operation for v in await engine.ahistory("ana", "locker")]
        await engine.adelete("ana", ["locker"])
        return ops + [v.operation for v in await engine.ahistory("ana", "locker")]

    assert asyncio.run(run()) == ["add", "update", "add", "update", "delete"]


def test_a_superseded_statement_shows_in_its_history(engine: MemoryEngine) -> None:
    added = engine.add_turns([Turn(role="user", speaker="Ana", content="I live in Paris.", timestamp=T0),
                              Turn(role="user", speaker="Ana", content="I moved to Berlin last week.",
                                   timestamp=T0 + timedelta(days=31))], "ana")
    history = engine.history("ana", added.turn_ids[0])
    assert [(v.operation, v.timestamp) for v in history] == [("add", T0), ("supersede", T0 + timedelta(days=31))]
    assert history[0].valid_to == T0 + timedelta(days=31)
    assert history[0].current  # still the memory's own latest version: a later statement ended its validity
