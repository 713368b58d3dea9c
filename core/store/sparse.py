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
from .statements import sql_of

__all__ = ["SparseIndex", "SparseSql", "normalise"]


@dataclass(frozen=True)
class SparseSql:
    """The statements of ``sparse_vectors`` (and the namespace generation it syncs on), as each backend writes
    them (:mod:`memory_ext.store.statements`)."""

    schema: tuple[str, ...]
    """The ``sparse_vectors`` table and its index (``IF NOT EXISTS``)."""
    upsert: str
    """``(rid, ns_id, idx, val)``: insert or overwrite (``executemany``)."""
    delete: str
    """``(ns_id, rid)`` (``executemany``)."""
    drop: str
    """``(ns_id,)``."""
    generation: str
    """``(ns_id,)`` -> the namespace's ``generation`` (bumped by every delete)."""
    rows_after: str
    """``(ns_id, rid)`` -> ``rid, idx, val`` of the later records, by rid."""
    any_row: str
    """``(ns_id,)`` -> one row, true when the namespace has a sparse encoding."""


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
        for statement in sql_of(conn).sparse.schema:
            conn.execute(statement)

    @staticmethod
    def has_rows(conn: Connection, ns_id: int) -> bool:
        """True when the namespace has a stored sparse encoding."""
        row = conn.execute(sql_of(conn).sparse.any_row, (ns_id,)).fetchone()
        return bool(row and row[0])

    @staticmethod
    def add(conn: Connection, ns_id: int, rids: Sequence[int],
            vectors: Sequence[tuple[np.ndarray, np.ndarray]]) -> None:
        conn.executemany(sql_of(conn).sparse.upsert,
                         [(int(r), ns_id, i.astype(np.int32).tobytes(), v.astype(np.float32).tobytes())
                          for r, (i, v) in zip(rids, vectors, strict=True)])

    def remove(self, conn: Connection, ns_id: int, rids: Sequence[int]) -> None:
        conn.executemany(sql_of(conn).sparse.delete, [(ns_id, int(r)) for r in rids])
        self.invalidate(ns_id)

    def drop_namespace(self, conn: Connection, ns_id: int) -> None:
        conn.execute(sql_of(conn).sparse.drop, (ns_id,))
        self.invalidate(ns_id)

    def matrix(self, conn: Connection, ns_id: int) -> _Matrix:
        sql = sql_of(conn).sparse
        row = conn.execute(sql.generation, (ns_id,)).fetchone()
        generation = int(row[0]) if row else 0
        with self._lock:
            m = self._cache.get(ns_id)
            if m is None or m.generation != generation:
                m = _Matrix(generation, 0, np.zeros(0, np.int64), np.zeros(1, np.int64), np.zeros(0, np.int32),
                            np.zeros(0, np.float32))
            rows = conn.execute(sql.rows_after, (ns_id, m.last_rid)).fetchall()
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
