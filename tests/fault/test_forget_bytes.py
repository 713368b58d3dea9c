"""Forgetting leaves no byte behind (issue 14, fault suite): after each kind of forget — a namespace, a session,
record ids, hook ids, ``delete`` by external id, ``update`` then ``delete`` of every version — every byte of every
file under the store (the WAL, the LangGraph item table and Chroma's files included) is scanned for the forgotten
text; one variant runs with a reader process holding a snapshot during the forget, and checks again after it
leaves and the next write; one plants old copies of the text in the unallocated space of live pages first (what a
b-tree balance leaves and ``secure_delete`` never clears, issue 22 §4)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from memory_ext import MemoryEngine, Namespace
from tests.fault.faultkit import SnapshotReader, hnsw_slack, invariant_violations, plant_in_free_space, scan_bytes

BACKENDS = ["numpy", pytest.param("chroma", marks=pytest.mark.fault)]
KINDS = ["namespace", "session", "record", "hook", "delete", "update-delete"]
SECRET = "zebrafinchvault"


def _open(path: Path, backend: str) -> MemoryEngine:
    return MemoryEngine.open(path, embedder="hashing", config={"storage": {"vector_backend": backend}})


def _fill(engine: MemoryEngine) -> None:
    for day in range(3):
        engine.add_turns([{"role": "user", "content": f"day {day}: I walked by the harbour", "speaker": "Ana",
                           "timestamp": f"2026-03-0{day + 2}T09:00Z"},
                          {"role": "assistant", "content": f"day {day}: lovely weather", "speaker": "Bot",
                           "timestamp": f"2026-03-0{day + 2}T09:01Z"}], Namespace("ana", session_id=f"d{day}"))
    engine.add_turns([{"role": "user", "content": f"my locker code word is {SECRET}", "speaker": "Ana",
                       "timestamp": "2026-03-10T10:00Z", "external_id": "locker"},
                      {"role": "assistant", "content": "noted, I will remember it", "speaker": "Bot",
                       "timestamp": "2026-03-10T10:01Z"}], Namespace("ana", session_id="secret"))
    engine.pre_compress(Namespace("ana", session_id="secret"),
                        f"User: my locker code word is {SECRET}\nAssistant: noted, I will remember it",
                        now="2026-03-10T10:05Z")
    engine.add_turns([{"role": "user", "content": "Bob likes sailing"}], "bob")
    engine.flush()  # every vector written: the forget below races readers only, not the background indexer
    # (forgetting while vectors are pending: test_forget_races_indexer.py; the one CI find here, the text in
    # Chroma's data_level0.bin, was hnswlib's uninitialised slack and happened with a flushed store too)


def _forget(engine: MemoryEngine, kind: str) -> Any:
    if kind == "namespace":
        return engine.forget(Namespace("ana"))
    if kind == "session":
        return engine.forget(Namespace("ana", session_id="secret"))
    if kind == "record":
        item = next(i for i in engine.search(f"locker code word {SECRET}", "ana", k=5).items if SECRET in i.text)
        return engine.forget("ana", record_ids=[item.id])
    if kind in ("delete", "update-delete"):
        ns = Namespace("ana", session_id="secret")
        if kind == "update-delete":  # a new version (the old one keeps the text), then every version goes
            engine.update(ns, "locker", content=f"my locker code word is now {SECRET}2")
        return engine.delete(ns, ["locker"])
    hooks = [h.id for h in engine.hooks("ana", include_merged=True)
             if SECRET in engine.retrieve(h.id, "ana").text]
    assert hooks
    return engine.forget("ana", hook_ids=hooks)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("kind", KINDS)
def test_no_byte_of_the_forgotten_text_is_left(tmp_path: Path, backend: str, kind: str) -> None:
    engine = _open(tmp_path, backend)
    try:
        _fill(engine)
        assert scan_bytes(tmp_path, [SECRET.encode()])
        receipt = _forget(engine, kind)
        assert receipt.purge_complete, receipt.pending_purge
        assert scan_bytes(tmp_path, [SECRET.encode()]) == {}
        assert hnsw_slack(tmp_path) == {}  # no uninitialised memory in Chroma's HNSW files (ChromaVectorIndex.scrub)
        assert SECRET not in engine.render_prompt("ana") and engine.search("Bob sailing", "bob").items
    finally:
        engine.close()
    assert scan_bytes(tmp_path, [SECRET.encode()]) == {}
    assert invariant_violations(tmp_path / "memory.sqlite3") == []


@pytest.mark.timeout(120)
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("kind", KINDS)
def test_with_a_concurrent_reader_the_purge_finishes_after_it_leaves(tmp_path: Path, backend: str,
                                                                     kind: str) -> None:
    engine = _open(tmp_path, backend)
    try:
        _fill(engine)
        with SnapshotReader(tmp_path / "memory.sqlite3") as reader:
            receipt = _forget(engine, kind)
            assert reader.holding and not receipt.purge_complete
            assert "memory.sqlite3-wal" in receipt.pending_purge
            reader.release()
        engine.add_turns([{"role": "user", "content": "Bob bought a boat"}], "bob")  # the next write purges
        assert scan_bytes(tmp_path, [SECRET.encode()]) == {}
    finally:
        engine.close()


@pytest.mark.parametrize("kind", KINDS)
def test_the_langgraph_items_are_scanned_too(tmp_path: Path, kind: str) -> None:
    pytest.importorskip("langgraph")
    from langchain_memory_ext import MemoryStore

    engine = _open(tmp_path, "numpy")
    try:
        _fill(engine)
        store = MemoryStore(engine=engine, user_id="ana")
        store.put(("secret",), "code", {"text": f"the locker code word is {SECRET}"})
        if kind in ("record", "hook", "delete", "update-delete"):
            store.close()
            engine.forget(Namespace("ana"))  # the item's turn lives in its session; forget it with the user
        else:
            _forget(engine, kind)
            assert store.get(("secret",), "code") is None
            store.close()
        assert scan_bytes(tmp_path, [SECRET.encode()]) == {}
    finally:
        engine.close()


@pytest.mark.parametrize("kind", KINDS)
def test_old_copies_in_the_free_space_of_live_pages_are_zeroed(tmp_path: Path, kind: str) -> None:
    engine = _open(tmp_path, "numpy")
    try:
        _fill(engine)
    finally:
        engine.close()
    planted = plant_in_free_space(tmp_path / "memory.sqlite3", f"my locker code word is {SECRET}".encode())
    assert len(planted) == 3 and invariant_violations(tmp_path / "memory.sqlite3") == []  # nothing reads them
    engine = _open(tmp_path, "numpy")
    try:
        receipt = _forget(engine, kind)
        assert receipt.purge_complete, receipt.pending_purge
        assert scan_bytes(tmp_path, [SECRET.encode()]) == {}
        assert engine.search("Bob sailing", "bob").items
    finally:
        engine.close()
    assert scan_bytes(tmp_path, [SECRET.encode()]) == {}
    assert invariant_violations(tmp_path / "memory.sqlite3") == []


def test_a_purge_cut_short_is_finished_by_the_next_open(tmp_path: Path) -> None:
    engine = _open(tmp_path, "numpy")
    try:
        _fill(engine)
    finally:
        engine.close()
    plant_in_free_space(tmp_path / "memory.sqlite3", f"my locker code word is {SECRET}".encode())
    engine = _open(tmp_path, "numpy")
    with SnapshotReader(tmp_path / "memory.sqlite3") as reader:
        receipt = _forget(engine, "session")
        assert not receipt.purge_complete
        engine.close()  # the reader still holds its snapshot: the purge cannot finish at close either
        reader.release()
    assert scan_bytes(tmp_path, [SECRET.encode()])  # the planted copies are still there
    engine = _open(tmp_path, "numpy")  # the forget's mark tells the next open to finish the purge
    try:
        assert not engine._store.purge_pending
        assert scan_bytes(tmp_path, [SECRET.encode()]) == {}
    finally:
        engine.close()
    assert invariant_violations(tmp_path / "memory.sqlite3") == []
