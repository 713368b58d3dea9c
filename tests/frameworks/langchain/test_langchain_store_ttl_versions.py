"""MemoryStore TTL (LangGraph's ``ttl=`` / ``TTLConfig``) and what updates and deletes leave in the engine.

Time is a clock the test moves (``MemoryStore(clock=...)``), never the wall clock.
"""

from __future__ import annotations

import asyncio
import doctest
import sqlite3
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langgraph.store.base")

import langchain_memory_ext._store_data
from langchain_memory_ext import MemoryRetriever, MemoryStore
from memory_ext import MemoryEngine, Namespace
from memory_ext.errors import InvalidQueryError

NS = ("users", "ana", "memories")
START = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)


class Clock:
    """The store's clock, moved by the test."""

    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> datetime:
        return self.now

    def advance(self, minutes: float) -> None:
        self.now += timedelta(minutes=minutes)


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def store(engine: MemoryEngine, clock: Clock) -> Iterator[MemoryStore]:
    st = MemoryStore(engine=engine, clock=clock)
    try:
        yield st
    finally:
        st.close()


def _engine_texts(engine: MemoryEngine, user: str = "langgraph-store") -> list[str]:
    return [t.content for t in engine.get_turns(user)]


def test_the_store_data_docstrings_run() -> None:
    result = doctest.testmod(langchain_memory_ext._store_data)
    assert result.failed == 0 and result.attempted > 0


# -- TTL ---------------------------------------------------------------------------------------------------------
def test_an_expired_item_is_never_returned_and_reads_refresh_its_ttl(store: MemoryStore, clock: Clock) -> None:
    store.put(NS, "tmp", {"text": "the gate code is 4711"}, ttl=10)
    store.put(NS, "keep", {"text": "Lena lives in Porto"})
    clock.advance(9)
    assert store.get(NS, "tmp") is not None  # a read restarts the TTL: now expires at minute 19
    clock.advance(9)
    assert [i.key for i in store.search(NS, refresh_ttl=False)] == ["tmp", "keep"]  # minute 18: no refresh
    clock.advance(2)  # minute 20
    assert store.get(NS, "tmp") is None
    assert [i.key for i in store.search(NS)] == ["keep"]
    assert [i.key for i in store.search(NS, query="gate code")] == ["keep"]
    assert store.list_namespaces() == [NS]
    clock.advance(1000)
    assert store.get(NS, "keep") is not None  # no TTL, no expiry


def test_the_store_default_ttl_and_refresh_on_read(engine: MemoryEngine, clock: Clock) -> None:
    store = MemoryStore(engine=engine, clock=clock, ttl={"default_ttl": 5, "refresh_on_read": False})
    store.put(NS, "short", {"text": "remind me to call the vet"})
    store.put(NS, "forever", {"text": "my sister is Lena"}, ttl=None)  # explicit None: no expiry
    clock.advance(4)
    assert store.get(NS, "short") is not None  # refresh_on_read=False: the read does not extend it
    assert store.get(NS, "short", refresh_ttl=True) is not None  # ...unless asked: now expires at minute 9
    clock.advance(4.5)
    assert [i.key for i in store.search(NS)] == ["short", "forever"]
    clock.advance(1)
    assert [i.key for i in store.search(NS)] == ["forever"] and store.list_namespaces() == [NS]
    store.close()


def test_expired_items_are_swept_from_the_engine_on_the_next_write(engine: MemoryEngine, store: MemoryStore,
                                                                   clock: Clock) -> None:
    store.put(("scratch",), "pin", {"text": "my bank PIN is 4242"}, ttl=1)
    store.put(NS, "m1", {"text": "Lena lives in Porto"})
    clock.advance(2)
    assert "my bank PIN is 4242" in _engine_texts(engine)  # expired, hidden, not yet swept
    store.put(NS, "m2", {"text": "Toby the beagle"})  # a write sweeps first
    assert _engine_texts(engine) == ["Lena lives in Porto", "Toby the beagle"]
    assert store.list_namespaces() == [NS]
    store.put(("scratch",), "a", {"text": "one"}, ttl=1)
    store.put(("scratch",), "b", {"text": "two"}, ttl=3)
    clock.advance(2)
    assert store.sweep_ttl() == 1 and asyncio.run(store.asweep_ttl()) == 0
    assert [i.key for i in store.search(("scratch",))] == ["b"]


def test_the_background_sweeper_removes_expired_items(engine: MemoryEngine, clock: Clock) -> None:
    every_30_ms: Any = {"sweep_interval_minutes": 0.0005}  # (TTLConfig types it int; any positive number works)
    store = MemoryStore(engine=engine, clock=clock, ttl=every_30_ms)
    store.put(NS, "tmp", {"text": "the gate code is 4711"}, ttl=1)
    clock.advance(2)
    done = store.start_ttl_sweeper()
    assert store.start_ttl_sweeper() is done  # one sweeper per store
    swept = threading.Event()
    for _ in range(2000):  # the sweeper runs every 30 ms: wait (boundedly) until it has run
        if not engine.get_turns("langgraph-store"):
            swept.set()
            break
        threading.Event().wait(0.01)
    assert swept.is_set()
    assert store.stop_ttl_sweeper(timeout=10) and done.done()
    store.close()


def test_ttl_survives_reopening_the_store(tmp_path: Path, clock: Clock) -> None:
    with MemoryEngine.open(tmp_path / "s", embedder="hashing") as engine:
        st = MemoryStore(engine=engine, clock=clock)
        st.put(NS, "tmp", {"text": "temporary"}, ttl=10)
        st.close()
    clock.advance(11)
    with MemoryEngine.open(tmp_path / "s", embedder="hashing") as engine:
        st = MemoryStore(engine=engine, clock=clock)
        assert st.get(NS, "tmp") is None and st.sweep_ttl() == 1
        st.close()


def test_async_ttl(store: MemoryStore, clock: Clock) -> None:
    async def run() -> tuple[object, object]:
        await store.aput(NS, "tmp", {"text": "x"}, ttl=1)
        first = await store.aget(NS, "tmp")
        clock.advance(2)
        return first, await store.aget(NS, "tmp")

    first, second = asyncio.run(run())
    assert first is not None and second is None


# -- versions: put on an existing key, delete --------------------------------------------------------------------
def test_after_updates_no_face_returns_a_stale_version(engine: MemoryEngine) -> None:
    """Observation 4: Oslo -> Porto -> Nairobi; the user's retriever returns only Nairobi."""
    store = MemoryStore(engine=engine, user_id="ana")
    for city in ("Oslo", "Porto", "Nairobi"):
        store.put(("profile",), "home", {"text": f"Ana lives in {city}"})
    docs = MemoryRetriever(engine=engine, user_id="ana", k=5).invoke("where does Ana live?")
    assert [d.page_content for d in docs] == ["Ana lives in Nairobi"]
    assert [i.value["text"] for i in store.search(("profile",), query="Ana lives in Oslo")] == ["Ana lives in Nairobi"]
    # the old versions are kept as history (lossless, reachable with as_of), never returned by default
    assert _engine_texts(engine, "ana") == ["Ana lives in Oslo", "Ana lives in Porto", "Ana lives in Nairobi"]
    assert [(v.operation, v.current) for v in engine.history(Namespace("ana", session_id="profile"), "home")] == \
        [("add", False), ("update", False), ("update", True)]
    store.close()


def test_delete_forgets_that_item_only_and_does_not_re_archive_the_namespace(engine: MemoryEngine) -> None:
    """Observation 3: a delete removes its own turn; the other items' turns are untouched (same ids), so its
    cost is that of the item, not of the namespace (the cost itself is measured by ``memext bench``)."""
    store = MemoryStore(engine=engine)
    for i in range(30):
        store.put(NS, f"m{i}", {"text": f"note number {i} about city {i}"})
    before = {t.external_id: t.id for t in engine.get_turns("langgraph-store")}
    store.delete(NS, "m7")
    store.put(NS, "m3", {"text": "note number 3 was rewritten"})
    after = {t.external_id: t.id for t in engine.get_turns("langgraph-store")}
    assert "m7" not in after and after["m3"] != before["m3"]
    assert {k: v for k, v in after.items() if k != "m3"} == {k: v for k, v in before.items() if k not in ("m7", "m3")}
    assert [i.key for i in store.search(NS, query="note number 7 about city 7", limit=1)] != ["m7"]
    store.close()


def test_a_store_file_of_the_first_version_is_imported_and_deletes_cleanly(tmp_path: Path) -> None:
    """Items written by the first release (no ``record_id``, no namespaces table) are imported at the next open;
    delete goes through ``engine.delete`` by the item's turn id, so the deleted text still leaves the engine."""
    path = tmp_path / "s"
    with MemoryEngine.open(path, embedder="hashing") as engine:
        session = Namespace("langgraph-store", session_id="users.ana.memories")
        added = engine.add_turns([{"role": "user", "content": "Lena lives in Porto", "external_id": "m1"},
                                  {"role": "user", "content": "my bank PIN is 4242", "external_id": "m2"}], session)
    db = sqlite3.connect(path / "langgraph_store.sqlite3")
    db.executescript("CREATE TABLE items (part TEXT NOT NULL, ns TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT "
                     "NULL, created_at TEXT NOT NULL, updated_at TEXT NOT NULL, turn_id TEXT, PRIMARY KEY (part, ns, "
                     "key));")
    stamp = START.isoformat()
    db.executemany("INSERT INTO items VALUES (?, ?, ?, ?, ?, ?, ?)",
                   [('["langgraph-store", ""]', "users.ana.memories", key, f'{{"text": "{text}"}}', stamp, stamp, tid)
                    for key, text, tid in [("m1", "Lena lives in Porto", added.turn_ids[0]),
                                           ("m2", "my bank PIN is 4242", added.turn_ids[1])]])
    db.commit()
    db.close()
    with MemoryEngine.open(path, embedder="hashing") as engine:
        assert not (path / "langgraph_store.sqlite3").exists()
        store = MemoryStore(engine=engine)
        item = store.get(NS, "m2")
        assert item is not None and item.value == {"text": "my bank PIN is 4242"} and item.created_at == START
        store.delete(NS, "m2")
        assert _engine_texts(engine) == ["Lena lives in Porto"]
        store.delete(NS, "m1")
        assert _engine_texts(engine) == [] and store.list_namespaces() == []
        store.close()


def test_an_update_keeps_the_old_version_as_history(engine: MemoryEngine) -> None:
    """Wanted: ``put`` on an existing key is ``engine.update``: the old version keeps its validity interval and
    is listed by ``engine.history``, reachable with ``as_of``, while no face returns it by default."""
    store = MemoryStore(engine=engine, user_id="ana")
    store.put(("profile",), "home", {"text": "Ana lives in Oslo"})
    store.put(("profile",), "home", {"text": "Ana lives in Porto"})
    history = engine.history(Namespace("ana", session_id="profile"), "home")
    assert [(v.operation, v.content) for v in history] == [("add", "Ana lives in Oslo"),
                                                           ("update", "Ana lives in Porto")]
    docs = MemoryRetriever(engine=engine, user_id="ana", k=5).invoke("where does Ana live?")
    assert [d.page_content for d in docs] == ["Ana lives in Porto"]
    store.close()


def test_delete_goes_through_the_engine_delete(engine: MemoryEngine) -> None:
    """Wanted: ``delete`` is ``engine.delete(namespace, ids)``, recorded in ``engine.history`` as a delete."""
    store = MemoryStore(engine=engine, user_id="ana")
    store.put(("profile",), "home", {"text": "Ana lives in Oslo"})
    store.delete(("profile",), "home")
    history = engine.history(Namespace("ana", session_id="profile"), "home")
    assert [v.operation for v in history] == ["add", "delete"]
    store.close()


@pytest.mark.parametrize(("kwargs", "field"), [
    ({"index": {"dims": 3, "embed": 42}}, "index.embed"),
    ({"index": {"embed": len}}, "index.dims"),
    ({"index": {"dims": 3, "embed": lambda texts: [[1.0] * 3 for _ in texts], "metric": "l2"}}, "index.metric"),
    ({"index": {"fields": "text"}}, "index.fields"),
    ({"index": {"fields": ["text"]}, "index_fields": ["text"]}, "index_fields"),
    ({"ttl": {"default_ttl": -1}}, "ttl.default_ttl"),
    ({"ttl": {"refresh": True}}, "ttl.refresh"),
])
def test_bad_index_and_ttl_configurations_are_typed_errors(engine: MemoryEngine, kwargs: dict[str, Any],
                                                           field: str) -> None:
    with pytest.raises(InvalidQueryError) as info:
        MemoryStore(engine=engine, **kwargs)
    assert info.value.field == field


def test_an_embedding_of_the_wrong_size_is_refused_before_anything_is_written(engine: MemoryEngine) -> None:
    store = MemoryStore(engine=engine, index={"dims": 4, "embed": lambda texts: [[1.0, 0.0] for _ in texts]})
    with pytest.raises(InvalidQueryError, match=r"index\.dims"):
        store.put(NS, "m1", {"text": "Lena lives in Porto"})
    assert store.get(NS, "m1") is None and _engine_texts(engine) == []
    store.close()
