"""Forgetting while the background indexer is making the forgotten records' vectors (fault suite).

A fake embedder (the hashing interface, with text-determined dense vectors) blocks the indexer inside
``embed_documents`` of the batch that holds the secret's records, so ``forget`` runs deterministically while that
batch is in flight (``engine.pending() > 0``); then the indexer is released and the store flushed. Each round
checks that no index holds a vector of a forgotten record (the Chroma collection's ids against the truth store's
``embeddings``), that the released batch did not add one afterwards, and that after the purge no file of the
store holds the forgotten text or the bytes of the vectors the embedder made for it, nor any non-zero byte in the
slack of Chroma's HNSW files (hnswlib writes a new segment's capacity from uninitialised memory). Several rounds
run on one store, the secret landing at different places of its batch, on the Chroma backend and on numpy for
comparison. Two more: the indexer's first write after a purge that emptied the collection (it creates the HNSW
files), and ``engine.purge()`` racing a batch the indexer commits while the collection is rebuilt.
"""

from __future__ import annotations

import sqlite3
import threading
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from memory_ext import MemoryEngine, Namespace
from memory_ext.embed import HashingEmbedder
from tests.fault.faultkit import hnsw_slack, invariant_violations, scan_bytes

pytestmark = pytest.mark.fault

BACKENDS = ["numpy", "chroma"]
KINDS = ["session", "namespace", "record"]
ROUNDS = 4
BATCH = 8  # ingest.indexer_batch: the secret's records share a batch with others, at a different place each round
GATE_S = 60.0  # a safety net only: the test releases the gate itself


class GatedEmbedder(HashingEmbedder):
    """Dense, text-determined unit vectors (their bytes are unique needles); a call from a background thread whose
    texts contain ``armed`` signals ``entered`` and waits for ``release``. Remembers the vectors it made for texts
    containing a secret."""

    def __init__(self) -> None:
        super().__init__(dim=32)
        self.id = "gated-dense:32"
        self.armed: str | None = None
        self.entered = threading.Event()
        self.release = threading.Event()
        self.made: dict[str, list[bytes]] = {}

    def _embed(self, text: str) -> np.ndarray:
        vec = np.random.default_rng(zlib.crc32(text.encode())).normal(size=self.dim).astype(np.float32)
        return vec / np.linalg.norm(vec)

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        secret = self.armed
        hit = secret is not None and any(secret in t for t in texts)
        if hit and threading.current_thread() is not threading.main_thread():
            self.entered.set()
            self.release.wait(GATE_S)
        out = super().embed_documents(texts)
        for text, row in zip(texts, np.asarray(out, np.float32), strict=True):
            if secret is not None and secret in text:
                self.made.setdefault(secret, []).append(row.tobytes())
        return out


def _open(path: Path, backend: str, embedder: GatedEmbedder) -> MemoryEngine:
    return MemoryEngine.open(path, embedder=embedder, config={
        "storage": {"vector_backend": backend},
        "ingest": {"indexer_batch": BATCH, "search_wait_s": 0}})


def _index_ids(engine: MemoryEngine, backend: str) -> set[int]:
    """The rids the engine's vector index holds (Chroma: the collection's ids; numpy: the truth store's rows)."""
    if backend == "chroma":
        return {int(i) for i in engine._vector.collection.get(include=[])["ids"]}  # type: ignore[union-attr]
    return set()


def _rids(path: Path, sql: str, args: tuple[Any, ...] = ()) -> set[int]:
    conn = sqlite3.connect(f"{(path / 'memory.sqlite3').absolute().as_uri()}?mode=ro", uri=True)
    try:
        return {int(r[0]) for r in conn.execute(sql, args)}
    finally:
        conn.close()


def _user(rnd: int) -> str:
    return f"sec{rnd}"


def _write_round(engine: MemoryEngine, rnd: int, secret: str) -> None:
    """Filler turns of two users, then the secret in its own session, then more filler: nothing waited for."""
    engine.add_turns([{"role": "user", "content": f"round {rnd}: the tide was low at the pier"}],
                     Namespace(_user(rnd), session_id="other"))
    for i in range(1 + rnd):  # the secret's place in its batch moves from round to round
        engine.add_turns([{"role": "user", "content": f"round {rnd}: Bob trims the jib {i}"}], "bob")
    engine.add_turns([{"role": "user", "content": f"my locker code word is {secret}", "speaker": "Ana"},
                      {"role": "assistant", "content": f"noted: {secret}, I will remember it", "speaker": "Bot"}],
                     Namespace(_user(rnd), session_id="secret"))
    for i in range(4):
        engine.add_turns([{"role": "user", "content": f"round {rnd}: Bob coils the sheet {i}"}], "bob")


def _forget(engine: MemoryEngine, kind: str, rnd: int, secret: str) -> Any:
    if kind == "namespace":
        return engine.forget(Namespace(_user(rnd)))
    if kind == "session":
        return engine.forget(Namespace(_user(rnd), session_id="secret"))
    items = [i for i in engine.search(f"locker code word {secret}", _user(rnd), k=10).items if secret in i.text]
    assert items, "the keyword channel finds the secret while its vectors are pending"
    return engine.forget(_user(rnd), record_ids=[i.id for i in items])


@pytest.mark.timeout(300)
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("kind", KINDS)
def test_a_forget_racing_the_indexer_leaves_no_vector_and_no_byte(tmp_path: Path, backend: str, kind: str) -> None:
    if backend == "chroma":
        pytest.importorskip("chromadb")
    embedder = GatedEmbedder()
    engine = _open(tmp_path, backend, embedder)
    db = tmp_path / "memory.sqlite3"
    try:
        engine.add_turns([{"role": "user", "content": "Bob likes sailing"}], "bob", wait=True)
        for rnd in range(ROUNDS):
            secret = f"zebrafinch{rnd}vault"
            embedder.entered.clear()
            embedder.release.clear()
            embedder.armed = secret
            _write_round(engine, rnd, secret)
            assert embedder.entered.wait(GATE_S), "the indexer reached the secret's batch"
            assert engine.pending() > 0  # the forget below races the in-flight batch
            secret_rids = _rids(tmp_path, "SELECT rid FROM records WHERE text LIKE ?", (f"%{secret}%",))
            assert secret_rids and secret_rids <= _rids(tmp_path, "SELECT rid FROM index_queue")
            receipt = _forget(engine, kind, rnd, secret)
            assert set(receipt.record_ids) and receipt.records >= 2
            gone = secret_rids
            assert not gone & _rids(tmp_path, "SELECT rid FROM records")
            assert not gone & _index_ids(engine, backend)
            embedder.release.set()  # the blocked batch goes on: it must write only what is still queued
            assert engine.flush(timeout=GATE_S)
            embedder.armed = None
            assert engine.pending() == 0
            assert not gone & _rids(tmp_path, "SELECT rid FROM embeddings")
            held = _index_ids(engine, backend)
            assert not gone & held, f"round {rnd}: the indexer re-added forgotten vectors {sorted(gone & held)}"
            chroma = held if backend == "chroma" else None
            assert invariant_violations(db, chroma) == []
            assert engine.purge() == ()
            needles = [secret.encode(), *(v[8:24] for v in embedder.made.get(secret, []))]
            assert scan_bytes(tmp_path, needles) == {}, f"round {rnd}: forgotten bytes left after the purge"
            assert hnsw_slack(tmp_path) == {}, f"round {rnd}: uninitialised memory in Chroma's HNSW files"
            assert engine.search("Bob trims the jib", "bob").items
        assert engine.search("Bob likes sailing", "bob").items
    finally:
        embedder.release.set()
        engine.close()
    for rnd in range(ROUNDS):
        assert scan_bytes(tmp_path, [f"zebrafinch{rnd}vault".encode()]) == {}
    assert invariant_violations(db) == []


@pytest.mark.timeout(120)
def test_the_first_write_after_a_purge_that_emptied_the_collection_leaves_no_slack(tmp_path: Path) -> None:
    """A purge that leaves no vector recreates an empty collection whose HNSW files would appear with the next
    write (the indexer's), from memory that may hold the forgotten text: the purge makes them (and scrubs them)
    itself, and a write that makes a segment scrubs it too."""
    pytest.importorskip("chromadb")
    engine = _open(tmp_path, "chroma", GatedEmbedder())
    try:
        for rnd in range(ROUNDS):
            secret = f"zebrafinch{rnd}vault"
            engine.add_turns([{"role": "user", "content": f"my locker code word is {secret}"}], "ana", wait=True)
            assert engine.forget(Namespace("ana")).purge_complete
            engine.forget(Namespace("bob"))
            assert not engine._vector.collection.get(include=[])["ids"]  # type: ignore[union-attr]
            assert list((tmp_path / "chroma").glob("*/header.bin")), "the purge made the empty collection's files"
            assert hnsw_slack(tmp_path) == {}
            engine.add_turns([{"role": "user", "content": f"Bob trims the jib {i}"} for i in range(5)], "bob",
                             wait=True)
            assert hnsw_slack(tmp_path) == {}, f"round {rnd}"
            assert scan_bytes(tmp_path, [secret.encode()]) == {}, f"round {rnd}"
            assert engine.search("Bob trims the jib", "bob").items
    finally:
        engine.close()


@pytest.mark.timeout(120)
def test_a_purge_racing_the_indexer_loses_no_vector(tmp_path: Path) -> None:
    """``engine.purge()`` rebuilds the Chroma collection from the truth store's vectors: a batch the indexer
    commits between that read and the rebuild would be missing from the new collection. The purge holds the
    store's write lock, so the batch lands before the read or after the rebuild, never in between."""
    pytest.importorskip("chromadb")
    embedder = GatedEmbedder()
    engine = _open(tmp_path, "chroma", embedder)
    index = engine._vector
    indexer = engine._writer.indexer
    assert indexer is not None
    try:
        engine.add_turns([{"role": "user", "content": "Bob likes sailing"}], "bob", wait=True)
        embedder.armed = "racing"
        engine.add_turns([{"role": "user", "content": f"Bob is racing dinghy {i}"} for i in range(3)], "bob")
        assert embedder.entered.wait(GATE_S)
        read_truth = index._truth  # type: ignore[union-attr]
        batches = indexer.batches

        def truth_then_let_the_indexer_write() -> Any:
            truth = read_truth()
            embedder.release.set()
            deadline = threading.Event()
            for _ in range(20):  # give the batch its chance to land inside the window (it must not be able to)
                if indexer.batches > batches:
                    break
                deadline.wait(0.05)
            return truth

        index._truth = truth_then_let_the_indexer_write  # type: ignore[union-attr]
        try:
            assert engine.purge() == ()
        finally:
            index._truth = read_truth  # type: ignore[union-attr]
        assert engine.flush(timeout=GATE_S)
        held = {int(i) for i in index.collection.get(include=[])["ids"]}  # type: ignore[union-attr]
        assert invariant_violations(tmp_path / "memory.sqlite3", held) == []
    finally:
        embedder.release.set()
        engine.close()
