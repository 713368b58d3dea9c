"""Defect 3 of issue 14: with the Chroma backend, deletions wait for the SQLite commit, the next open repairs a
collection that lost or kept entries, and forgetting leaves no vector of the forgotten records in Chroma's files
(its log ``embeddings_queue`` in ``chroma.sqlite3`` and its HNSW segment files included)."""

from __future__ import annotations

import sqlite3
import zlib
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("chromadb")

from memory_ext import MemoryEngine, Namespace
from memory_ext.embed import HashingEmbedder
from memory_ext.store.chroma import ChromaVectorIndex
from tests.fault.faultkit import invariant_violations, scan_bytes

CHROMA = {"storage": {"vector_backend": "chroma"}}


class DenseEmbedder(HashingEmbedder):
    """Dense, text-determined unit vectors: every vector has byte runs no other vector shares."""

    def __init__(self) -> None:
        super().__init__(dim=32)
        self.id = "dense-test:32"

    def _embed(self, text: str) -> np.ndarray:
        vec = np.random.default_rng(zlib.crc32(text.encode())).normal(size=self.dim).astype(np.float32)
        return vec / np.linalg.norm(vec)


def _open(path: Path) -> MemoryEngine:
    return MemoryEngine.open(path, embedder=DenseEmbedder(), config=CHROMA)


def _vectors(path: Path, user: str) -> list[bytes]:
    conn = sqlite3.connect(path / "memory.sqlite3")
    try:
        return [r[0] for r in conn.execute("SELECT e.vector FROM embeddings e JOIN namespaces n USING(ns_id)"
                                           " WHERE n.user_id=?", (user,))]
    finally:
        conn.close()


def _needles(blobs: Sequence[bytes]) -> list[bytes]:
    return [b[8:24] for b in blobs]  # 4 floats of a dense vector: unique to it


def _chroma_ids(engine: MemoryEngine) -> list[int]:
    vector = engine._vector  # the engine's derived index (read only, to compare with the truth store)
    assert isinstance(vector, ChromaVectorIndex)
    return [int(i) for i in vector.collection.get(include=[])["ids"]]


def _fill(engine: MemoryEngine) -> None:
    engine.add_turns([{"role": "user", "content": f"Ana's secret number {i} is {i * 7919}"} for i in range(12)], "ana",
                     wait=True)  # vectors are made by the background indexer: wait for them
    engine.add_turns([{"role": "user", "content": f"Bob sails boat {i}"} for i in range(12)], "bob", wait=True)


def test_forget_leaves_no_vector_in_chromas_files(tmp_path: Path) -> None:
    engine = _open(tmp_path)
    _fill(engine)
    ana = _needles(_vectors(tmp_path, "ana"))
    bob = _needles(_vectors(tmp_path, "bob"))
    assert scan_bytes(tmp_path / "chroma", ana)  # Chroma holds them before the forget
    receipt = engine.forget(Namespace("ana"))
    assert receipt.purge_complete and receipt.pending_purge == ()
    assert scan_bytes(tmp_path / "chroma", ana) == {}
    assert engine.search("Bob sails", "bob").items  # the rebuilt collection still serves the others
    assert sorted(_chroma_ids(engine)) == sorted(_chroma_ids(engine))
    assert invariant_violations(tmp_path / "memory.sqlite3", _chroma_ids(engine)) == []
    engine.close()
    assert scan_bytes(tmp_path, ana) == {}
    assert scan_bytes(tmp_path / "chroma", bob)


def test_a_rolled_back_forget_leaves_chroma_untouched(tmp_path: Path) -> None:
    engine = _open(tmp_path)
    _fill(engine)
    before = sorted(_chroma_ids(engine))
    store = engine._store
    ns_id = store.find_namespace(("ana", ""))
    vector = engine._vector
    assert vector is not None and ns_id is not None
    rids = [int(r[0]) for r in store.reader().execute("SELECT rid FROM embeddings WHERE ns_id=?", (ns_id,))]
    with pytest.raises(RuntimeError, match="crash"), store.transaction("forget") as conn:
        conn.execute(f"DELETE FROM embeddings WHERE rid IN ({','.join('?' * len(rids))})", rids)
        vector.remove(conn, ns_id, rids)
        raise RuntimeError("crash before the commit")
    assert sorted(_chroma_ids(engine)) == before  # the old code had deleted them already
    engine.close()


def test_the_next_open_repairs_missing_and_extra_vectors(tmp_path: Path) -> None:
    engine = _open(tmp_path)
    _fill(engine)
    vector = engine._vector
    assert isinstance(vector, ChromaVectorIndex)
    ids = sorted(_chroma_ids(engine))
    vector.collection.delete(ids=[str(i) for i in ids[:3]])  # lost entries (a crash mid-write)
    vector.collection.upsert(ids=["999999"], embeddings=np.ones((1, 32), np.float32),
                             metadatas=[{"ns_id": 1, "rid": 999999}])  # an entry whose SQLite commit never came
    engine.close()
    engine = _open(tmp_path)
    assert sorted(_chroma_ids(engine)) == ids
    assert invariant_violations(tmp_path / "memory.sqlite3", _chroma_ids(engine)) == []
    engine.close()
