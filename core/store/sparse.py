"""Sparse latent-term vectors of turn records (e5's SAE head), stored in SQLite and scored in memory.

Turn records are encoded at write time (the vectors are L2-normalised ``(indices, values)`` pairs in the
``sparse_vectors`` table) and read back into one CSR-like array per namespace, kept in sync by the highest rid
seen (a delete bumps the namespace's generation). :mod:`memory_ext.recall.sparse` scores queries against it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .base import CachedIndex, RecordBatch
from .interface import Connection

__all__ = ["SparseIndex", "normalise"]


def normalise(pairs: Sequence[tuple[np.ndarray, np.ndarray]]) -> list[tuple[np.ndarray, np.ndarray]]:
    """L2-normalised ``(int32 indices, float32 values)`` pairs."""
    out = []
    for idx, val in pairs:
        v = np.asarray(val, dtype=np.float32)
        norm = float(np.linalg.norm(v))
        out.append((np.asarray(idx, dtype=np.int32), v / norm if norm > 0 else v))
    return out


@dataclass
class _Matrix:
    generation: int
    last_rid: int
    rids: np.ndarray
    ptr: np.ndarray  # row starts (len = rows + 1)
    idx: np.ndarray
    val: np.ndarray


class SparseIndex(CachedIndex[_Matrix]):
    """Sparse vectors of turn records in SQLite, and a per-namespace in-memory matrix for scoring."""

    name = "sparse"

    def index(self, conn: Connection, ns_id: int, batch: RecordBatch) -> None:
        """Store the sparse encodings the write pipeline made for the batch (turn records)."""
        if batch.sparse is not None:
            self.add(conn, ns_id, batch.sparse_rids, batch.sparse)

    @staticmethod
    def create_schema(conn: Connection) -> None:
        conn.execute("CREATE TABLE IF NOT EXISTS sparse_vectors(rid INTEGER PRIMARY KEY, ns_id INTEGER NOT NULL,"
                     " idx BLOB NOT NULL, val BLOB NOT NULL)")
        conn.execute("CREATE INDEX IF NOT EXISTS sparse_vectors_ns ON sparse_vectors(ns_id, rid)")

    @staticmethod
    def add(conn: Connection, ns_id: int, rids: Sequence[int],
            vectors: Sequence[tuple[np.ndarray, np.ndarray]]) -> None:
        conn.executemany("INSERT OR REPLACE INTO sparse_vectors(rid, ns_id, idx, val) VALUES(?,?,?,?)",
                         [(int(r), ns_id, i.astype(np.int32).tobytes(), v.astype(np.float32).tobytes())
                          for r, (i, v) in zip(rids, vectors, strict=True)])

    def remove(self, conn: Connection, ns_id: int, rids: Sequence[int]) -> None:
        conn.executemany("DELETE FROM sparse_vectors WHERE ns_id=? AND rid=?", [(ns_id, int(r)) for r in rids])
        self.invalidate(ns_id)

    def drop_namespace(self, conn: Connection, ns_id: int) -> None:
        conn.execute("DELETE FROM sparse_vectors WHERE ns_id=?", (ns_id,))
        self.invalidate(ns_id)

    def matrix(self, conn: Connection, ns_id: int) -> _Matrix:
        row = conn.execute("SELECT generation FROM namespaces WHERE ns_id=?", (ns_id,)).fetchone()
        generation = int(row[0]) if row else 0
        with self._lock:
            m = self._cache.get(ns_id)
            if m is None or m.generation != generation:
                m = _Matrix(generation, 0, np.zeros(0, np.int64), np.zeros(1, np.int64), np.zeros(0, np.int32),
                            np.zeros(0, np.float32))
            rows = conn.execute("SELECT rid, idx, val FROM sparse_vectors WHERE ns_id=? AND rid>? ORDER BY rid",
                                (ns_id, m.last_rid)).fetchall()
            if rows:
                idx = [np.frombuffer(r[1], np.int32) for r in rows]
                val = [np.frombuffer(r[2], np.float32) for r in rows]
                lengths = np.fromiter((len(i) for i in idx), np.int64, len(idx))
                m = _Matrix(generation, int(rows[-1][0]),
                            np.concatenate([m.rids, np.fromiter((r[0] for r in rows), np.int64, len(rows))]),
                            np.concatenate([m.ptr, m.ptr[-1] + np.cumsum(lengths)]),
                            np.concatenate([m.idx, *idx]), np.concatenate([m.val, *val]))
            self._cache[ns_id] = m
            return m
