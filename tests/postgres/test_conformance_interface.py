"""Conformance, the truth-store interface: every method of :class:`memory_ext.store.interface.TruthStore`,
called directly on each backend, answers the same.

Each test names the methods it exercises with :func:`covers`; :func:`test_every_interface_method_is_covered`
fails when the interface gains a method no test here calls (or when a name here is not in the interface).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import numpy as np
import pytest

from memory_ext import MemoryEngine
from memory_ext.errors import EmbedderMismatchError, StoreError
from memory_ext.ingest.indexer import Work
from memory_ext.store.filters import RecordFilter, filter_sql
from memory_ext.store.interface import TRUTH_STORE_METHODS, Connection, StoreConflict, TruthStore
from memory_ext.store.statements import sql_of
from tests.conftest import RULES_CHAT, StoreTarget, rules_turns

pytestmark = pytest.mark.postgres

COVERED: set[str] = set()
"""The interface methods the tests of this module call."""
F = TypeVar("F", bound=Callable[..., Any])


def covers(*names: str) -> Callable[[F], F]:
    """Declare the interface methods a test calls (checked against the interface below)."""
    COVERED.update(names)
    return lambda test: test


KEY = ("maya", "")


@pytest.fixture
def maya(store_target: StoreTarget) -> Iterator[MemoryEngine]:
    engine = store_target.open()
    try:
        engine.add_turns(rules_turns(), "maya")
        engine.flush("maya", timeout=60)
        yield engine
    finally:
        engine.close()


def _store(engine: MemoryEngine) -> TruthStore:
    return engine._store


def _ns(store: TruthStore) -> int:
    ns_id = store.find_namespace(KEY)
    assert ns_id is not None
    return ns_id


def test_every_interface_method_is_covered() -> None:
    assert sorted(TRUTH_STORE_METHODS - COVERED) == [], "interface methods no conformance test calls"
    assert sorted(COVERED - TRUTH_STORE_METHODS) == [], "names here that the interface does not have"


def test_both_backends_implement_every_method() -> None:
    from memory_ext.store.pg.truth import PgTruthStore
    from memory_ext.store.sqlite import TruthStore as SqliteTruthStore

    for backend in (SqliteTruthStore, PgTruthStore):
        assert sorted(n for n in TRUTH_STORE_METHODS if not hasattr(backend, n)) == [], backend.__name__


@covers("reader", "transaction", "after_commit", "namespace_lock", "add_schema", "items", "close")
def test_connections_transactions_and_close(store_target: StoreTarget) -> None:
    engine = store_target.open()
    store = _store(engine)
    assert isinstance(store.reader(), Connection)
    ran: list[str] = []
    with store.namespace_lock(KEY), store.transaction("conformance") as conn:
        assert isinstance(conn, Connection)
        ns_id = store.ensure_namespace(conn, KEY)
        store.set_meta(conn, "conformance", "kept")
        store.after_commit(lambda: ran.append("committed"))
        assert ran == []
    assert ran == ["committed"] and store.get_meta("conformance") == "kept"
    with pytest.raises(RuntimeError), store.transaction("conformance") as conn:
        store.set_meta(conn, "conformance", "rolled back")
        store.after_commit(lambda: ran.append("rolled back"))
        raise RuntimeError("undo")
    assert ran == ["committed"] and store.get_meta("conformance") == "kept"
    with pytest.raises(StoreError):
        store.after_commit(lambda: None)  # no transaction open
    store.add_schema(lambda c: c.execute("CREATE TABLE IF NOT EXISTS conformance_probe(x INTEGER)"))
    with store.transaction("conformance") as conn:
        conn.execute(f"INSERT INTO conformance_probe(x) VALUES({sql_of(conn).mark})", (7,))
    assert store.reader().execute("SELECT x FROM conformance_probe").fetchall() == [(7,)]
    assert store.items.rows(store.reader(), ns_id, time.time()) == []
    engine.close()
    store.close()  # idempotent
    with pytest.raises(StoreError):
        store.reader()


@covers("store_id", "get_meta", "set_meta", "delete_meta", "check_embedder", "find_namespace", "namespace_id",
        "ensure_namespace", "namespaces", "namespace_key", "namespace_counts", "count", "disk_bytes")
def test_meta_and_namespaces(maya: MemoryEngine) -> None:
    store = _store(maya)
    assert len(store.store_id) == 32 and store.store_id == store.store_id
    embedder_id = store.get_meta("embedder_id")
    assert embedder_id is not None and store.check_embedder(embedder_id) is False
    with pytest.raises(EmbedderMismatchError):
        store.check_embedder("another-embedder")
    with store.transaction("conformance") as conn:
        store.set_meta(conn, "probe", "1")
        store.set_meta(conn, "probe", "2")  # replaces
        assert store.namespace_id(conn, ("nobody", "")) is None
        tom = store.ensure_namespace(conn, ("tom", "agent"))
        assert store.ensure_namespace(conn, ("tom", "agent")) == tom
        assert store.namespace_id(conn, ("tom", "agent")) == tom
    assert store.get_meta("probe") == "2"
    with store.transaction("conformance") as conn:
        store.delete_meta(conn, "probe")
    assert store.get_meta("probe") is None
    ns_id = _ns(store)
    assert store.find_namespace(("nobody", "")) is None
    assert store.namespaces() == [(ns_id, "maya", ""), (tom, "tom", "agent")]
    assert store.namespace_key(tom) == ("tom", "agent")
    assert store.namespace_counts() == [("maya", "", len(RULES_CHAT), len(RULES_CHAT)), ("tom", "agent", 0, 0)]
    assert store.count("turns") == len(RULES_CHAT) == store.count("turns", ns_id)
    assert store.count("records", ns_id) >= 2 * len(RULES_CHAT)  # a turn and a window record per turn at least
    assert store.count("embeddings", ns_id) == store.count("records", ns_id)
    assert store.count("turns", tom) == 0
    assert store.disk_bytes() > 0


@covers("next_seq", "insert_turns", "tail_turns", "turns_by_id", "list_turns", "turns_by_seq_ranges",
        "recent_turns", "turns_from_seq", "turns_with_external_ids", "turn_lookup", "stored_turn_rows")
def test_turns(maya: MemoryEngine) -> None:
    store = _store(maya)
    ns_id = _ns(store)
    turns = store.list_turns(ns_id)
    contents = [c for *_, c, _ in RULES_CHAT]
    assert [t.content for t in turns] == contents and [t.seq for t in turns] == list(range(len(RULES_CHAT)))
    assert [t.content for t in store.list_turns(ns_id, session_id="trip", limit=2, offset=1)] == contents[5:7]
    assert store.turns_by_id(ns_id, [turns[2].id, "missing"]) == {turns[2].id: turns[2]}
    assert [t.seq for t in store.turns_by_seq_ranges(ns_id, [(5, 6), (0, 1), (6, 7)])] == [0, 1, 5, 6, 7]
    assert store.recent_turns(ns_id, 2) == [(t.role, t.content, t.tid) for t in reversed(turns[-2:])]
    assert turns[0].metadata == RULES_CHAT[0][4] and turns[0].to_turn().external_id == "rules:0"
    with store.transaction("conformance") as conn:
        assert store.next_seq(conn, ns_id) == len(RULES_CHAT)
        tail = store.tail_turns(conn, ns_id, 2)
        assert [t["content"] for t in tail] == contents[-2:] and all(t["rid"] for t in tail)
        assert [c for _, _, c in store.turns_from_seq(conn, ns_id, 6)] == contents[6:]
        assert store.turns_with_external_ids(conn, ns_id, ["rules:1", "rules:5", "nope"]) == {
            ("rules:1", "bank"): turns[1].id, ("rules:5", "trip"): turns[5].id}
        assert store.turn_lookup(conn, ns_id, turns[3].id, None) == turns[3]
        assert store.turn_lookup(conn, ns_id, "rules:4", "trip") == turns[4]
        assert store.turn_lookup(conn, ns_id, "rules:4", "bank") is None
        rows = store.stored_turn_rows(conn, ns_id)
        assert [r["content"] for r in rows] == contents and rows[0]["metadata"] == RULES_CHAT[0][4]
    with pytest.raises(StoreConflict), store.transaction("conformance") as conn:
        store.insert_turns(conn, ns_id, [{**rows[0], "seq": len(RULES_CHAT)}])  # the id is stored already
    with store.transaction("conformance") as conn:
        store.insert_turns(conn, ns_id, [{**rows[0], "id": "conformance-new", "seq": len(RULES_CHAT)}])
    assert store.list_turns(ns_id)[-1].id == "conformance-new"


@covers("turn_tids", "file_fids", "tids_of_record", "tids_of_file", "neighbour_tids", "turn_records_with_neighbours")
def test_what_a_forget_selects(maya: MemoryEngine) -> None:
    store = _store(maya)
    ns_id = _ns(store)
    turns = store.list_turns(ns_id)
    tids = [t.tid for t in turns]
    assert sorted(store.turn_tids(ns_id)) == sorted(tids)
    assert sorted(store.turn_tids(ns_id, session_id="bank")) == sorted(tids[:4])
    fids = store.file_fids(ns_id)
    assert fids and sorted(t for fid in fids for t in store.tids_of_file(fid)) == sorted(tids)
    record = store.records_by_rid(ns_id, [turns[2].record_rid or 0])[turns[2].record_rid or 0]
    assert store.tids_of_record(ns_id, record.id) == [tids[2]]
    assert store.tids_of_record(ns_id, "no-such-record") is None
    assert store.neighbour_tids(ns_id, [tids[2]]) == sorted([tids[1], tids[3]])
    assert store.neighbour_tids(ns_id, [tids[3]]) == [tids[2]]  # the next turn is of another session
    with store.transaction("conformance") as conn:
        [item] = store.turn_records_with_neighbours(conn, ns_id, [tids[2]])
    assert item["rid"] == turns[2].record_rid and item["session_id"] == "bank"
    assert sorted(item["neighbours"]) == sorted([turns[1].content, turns[3].content])


@covers("insert_records", "insert_embeddings", "records_by_rid", "record_ids_by_rid", "vectors_by_rid",
        "stored_vectors", "filter_rids", "rids_matching")
def test_records_and_vectors(maya: MemoryEngine) -> None:
    store = _store(maya)
    ns_id = _ns(store)
    turn = store.list_turns(ns_id)[0]
    rid = turn.record_rid
    assert rid is not None
    row = store.records_by_rid(ns_id, [rid])[rid]
    assert (row.kind, row.turn_ids, row.session_id, row.speaker) == ("turn", [turn.id], "bank", "Maya")
    dim = len(store.vectors_by_rid(ns_id, [rid])[rid])
    every = store.rids_matching(ns_id, RecordFilter())
    assert rid in every and len(every) == store.count("records", ns_id)
    turns = filter_sql(RecordFilter(kinds=("turn",)), store.dialect)  # a condition in the store's dialect
    assert store.filter_rids(ns_id, *turns) == {t.record_rid for t in store.list_turns(ns_id)}
    with store.transaction("conformance") as conn:
        [new] = store.insert_records(conn, ns_id, [{
            "id": "conformance-fact", "kind": "fact", "text": "Maya banks with Nordea.", "index_text": "Nordea",
            "turn_ids": [turn.id], "session_id": "bank", "speaker": "Maya"}], anchor_rids=[rid])
        store.insert_embeddings(conn, ns_id, [new], np.ones((1, dim), dtype=np.float32),
                                store.get_meta("embedder_id") or "")
        assert store.record_ids_by_rid(conn, ns_id, [new, rid]) == {new: "conformance-fact", rid: row.id}
        assert np.allclose(store.stored_vectors(conn, [new])[new], 1.0)
    assert store.records_by_rid(ns_id, [new])[new].text == "Maya banks with Nordea."
    assert np.allclose(store.vectors_by_rid(ns_id, [new])[new], 1.0)
    assert store.vectors_by_rid(ns_id + 1000, [new]) == {}  # another namespace sees nothing
    assert new in store.filter_rids(ns_id, *filter_sql(RecordFilter(kinds=("fact",)), store.dialect))


@covers("turns_of_memory", "turn_record_ids", "memory_key_of", "memory_keys_of", "mark_replaced", "add_history",
        "history_ops", "delete_history", "current_turns", "replaced_turn_ids", "live_update_counts")
def test_versions_and_history(maya: MemoryEngine) -> None:
    store = _store(maya)
    ns_id = _ns(store)
    maya.update("maya", "rules:3", content="My Nordea card is a green Mastercard now.")
    turns = store.list_turns(ns_id)
    old, new = turns[3], turns[-1]
    assert store.replaced_turn_ids(ns_id) == {old.id}
    with store.transaction("conformance") as conn:
        versions = store.turns_of_memory(conn, ns_id, "rules:3", "bank")
        assert [(t.id, replaced) for t, _, replaced in versions] == [(old.id, 1), (new.id, 0)]
        assert versions[0][1] is not None and versions[1][1] is None  # the old version's validity ended
        assert store.memory_key_of(conn, ns_id, new.id) == "rules:3"
        assert store.memory_key_of(conn, ns_id, turns[0].id) is None
        assert store.memory_keys_of(conn, ns_id, [new.id, turns[0].id]) == {new.id: "rules:3"}
        assert store.live_update_counts(conn, ns_id, ["rules:3", "rules:0"]) == {("rules:3", "bank"): 1}
        assert [op for op, *_ in store.history_ops(conn, ns_id, "rules:3", "bank")] == ["update"]
        records = store.turn_record_ids(conn, ns_id, [turns[0].id, turns[1].id])
        assert len(records) == 2
        current = store.current_turns(conn, ns_id, RecordFilter(), before_seq=None, limit=100)
        assert old.id not in [t.id for t in current] and current[0].id == new.id
        assert [t.id for t in store.current_turns(conn, ns_id, RecordFilter(), before_seq=2, limit=1)] == \
            [turns[1].id]
        store.add_history(conn, ns_id, "rules:0", "bank", "delete", None, time.time())
        assert [op for op, *_ in store.history_ops(conn, ns_id, "rules:0", None)] == ["delete"]
        store.mark_replaced(conn, ns_id, turns[0].id, time.time(), "conformance")
    assert store.replaced_turn_ids(ns_id) == {old.id, turns[0].id}
    with store.transaction("conformance") as conn:
        store.delete_history(conn, ns_id)
        assert store.history_ops(conn, ns_id, "rules:3", None) == []


@covers("reindex_state", "clear_records", "delete_claims")
def test_what_a_reindex_keeps_and_clears(maya: MemoryEngine) -> None:
    store = _store(maya)
    ns_id = _ns(store)
    maya.update("maya", "rules:3", content="My Nordea card is a green Mastercard now.")
    turns = store.list_turns(ns_id)
    with store.transaction("conformance") as conn:
        state = store.reindex_state(conn, ns_id)
        assert set(state["record_ids"]) == {t.id for t in turns}
        assert [r[0] for r in state["replaced"]] == [turns[3].id] and state["cold"] == []
        store.delete_claims(conn, ns_id)
        store.clear_records(conn, ns_id)
    assert store.count("records", ns_id) == 0 == store.count("embeddings", ns_id)
    assert store.count("turns", ns_id) == len(turns) and all(t.record_rid is None for t in store.list_turns(ns_id))


@covers("create_queue_schema", "enqueue", "dequeue", "drop_queue", "queued", "queued_windows", "claimed_work",
        "pending", "work_sources")
def test_the_queue_of_model_work(maya: MemoryEngine) -> None:
    store = _store(maya)
    ns_id = _ns(store)
    assert store.pending(ns_id) == 0 == store.pending()
    turns = store.list_turns(ns_id)
    rids = [t.record_rid or 0 for t in turns[:3]]
    reader = store.reader()
    windows = [int(r[0]) for r in reader.execute(
        f"SELECT rid FROM records WHERE anchor_rid = {sql_of(reader).mark} AND kind = 'window' ORDER BY rid",
        (rids[1],))]
    with store.transaction("conformance") as conn:
        store.create_queue_schema(conn)  # idempotent
        store.enqueue(conn, ns_id, [(rids[0], 1, 0), (rids[1], 0, 1), (rids[2], 1, 1), (rids[2] + 10_000, 0, 0)])
        if windows:
            store.enqueue(conn, ns_id, [(windows[0], 2, 0)])
        assert store.queued(conn, 2) == [(rids[0], ns_id, 1, 0), (rids[1], ns_id, 0, 1)]
        assert store.queued(conn, 10, rids=[rids[2]]) == [(rids[2], ns_id, 1, 1)]
        assert store.queued(conn, 10, ns_id=ns_id + 1000) == []
        if windows:
            assert store.queued_windows(conn, [rids[1]]) == [(windows[0], ns_id, 2, 0)]
    assert store.pending(ns_id) == 3 + len(windows[:1])
    sources = store.work_sources(rids)
    assert sources[rids[0]][1] == turns[0].content and sources[rids[0]][2] == [rids[0]]
    with store.claimed_work(2) as batch:
        assert [item[0] for item in batch] == rids[:2]
    with store.transaction("conformance") as conn:
        store.dequeue(conn, [rids[0]])
        store.dequeue(conn, [rids[1]], ns_id=ns_id + 1000)  # another namespace's: nothing
        assert [item[0] for item in store.queued(conn, 10, ns_id=ns_id)][:2] == [rids[1], rids[2]]
        store.drop_queue(conn, ns_id)
    assert store.pending(ns_id) == 0


@covers("quarantine", "quarantined", "release_quarantined")
def test_quarantined_work_leaves_the_queue_and_comes_back(maya: MemoryEngine) -> None:
    """A work item the indexer gave up on moves out of the queue (nothing waits behind it) with its error and
    attempts, is listed with its record and turns, is removed by a forget's dequeue, and is queued again."""
    store = _store(maya)
    ns_id = _ns(store)
    turns = store.list_turns(ns_id)
    rids = [t.record_rid or 0 for t in turns[:3]]
    with store.transaction("conformance") as conn:
        store.enqueue(conn, ns_id, [(rids[0], 1, 0), (rids[1], 1, 1), (rids[2], 1, 0)])
        items = store.queued(conn, 10, rids=rids[:2])
        store.quarantine(conn, items, {rids[0]: "EmbedderError: NaN", rids[1]: "boom"}, {rids[0]: 3, rids[1]: 2})
    assert store.pending(ns_id) == 1  # only the third is still queued
    held = store.quarantined(ns_id)
    assert [(q.rid, q.dense, q.sparse, q.attempts, q.error) for q in held] == \
        [(rids[0], 1, 0, 3, "EmbedderError: NaN"), (rids[1], 1, 1, 2, "boom")]
    assert held[0].kind == "turn" and held[0].turn_ids == (turns[0].id,) and held[0].since
    assert store.quarantined(ns_id + 1000) == [] and len(store.quarantined()) == 2
    with store.transaction("conformance") as conn:
        store.dequeue(conn, [rids[1]])  # its record forgotten: gone from the quarantine too
        assert store.release_quarantined(conn, ns_id + 1000) == 0
        assert store.release_quarantined(conn, ns_id) == 1
    assert store.quarantined() == []
    assert sorted(item[0] for item in store.queued(store.reader(), 10, ns_id=ns_id)) == [rids[0], rids[2]]
    with store.transaction("conformance") as conn:
        store.dequeue(conn, [rids[0], rids[2]])


@covers("sparse_queued", "queue_sparse")
def test_queue_sparse_flags_queued_turns_and_queues_the_others(store_target: StoreTarget) -> None:
    """The store's part, with the hashing embedder: a turn record still queued for its vector gets the sparse
    flag (so no batch in flight can drop it), the other turn records a sparse-only item; windows are left alone."""
    with store_target.open(config={"ingest": {"background_indexing": False}}) as engine:
        engine.add_turns(rules_turns(), "maya")
        store = _store(engine)
        ns_id = _ns(store)
        turns = [t.record_rid or 0 for t in store.list_turns(ns_id)]
        assert store.pending(ns_id) == 0 and not store.sparse_queued(store.reader(), ns_id)
        with store.transaction("test") as conn:
            store.enqueue(conn, ns_id, [(turns[0], int(Work.EMBED), 0)])
            assert not store.sparse_queued(conn, ns_id)
            store.queue_sparse(conn, ns_id, turns)
        queued = {rid: (dense, sparse) for rid, _, dense, sparse in store.queued(store.reader(), 1000)}
        assert queued == {turns[0]: (int(Work.EMBED), 1), **{rid: (0, 1) for rid in turns[1:]}}
        assert store.sparse_queued(store.reader(), ns_id)
        assert not store.sparse_queued(store.reader(), ns_id + 1000)  # another namespace's: none
        with store.transaction("test") as conn:
            store.queue_sparse(conn, ns_id, turns)  # idempotent
        assert len(store.queued(store.reader(), 1000)) == len(turns)


@covers("purge", "checkpoint", "purge_pending", "pending_targets")
def test_a_forget_is_purged(maya: MemoryEngine) -> None:
    store = _store(maya)
    record_id = store.records_by_rid(_ns(store), [store.list_turns(_ns(store))[0].record_rid or 0])
    maya.forget("maya", record_ids=[r.id for r in record_id.values()])
    assert store.purge(wait_s=5.0) is True
    assert store.purge_pending is False and store.pending_targets == ()
    assert store.checkpoint() is True
