"""Vector indexes: the protocol and the embedded default (exact cosine with numpy, per namespace partition).

The truth store keeps every vector (float32 blob, embedder id, dimension) in SQLite. ``NumpyVectorIndex``
loads a namespace's vectors lazily on its first search into a growable float32 matrix and afterwards reads only
rows with a higher rid, so new writes (from this process or another) are seen without a rebuild.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np

from ..registry import vector_backends
from .base import CachedIndex, DerivedIndex, RecordBatch
from .interface import Connection
from .statements import sql_of

__all__ = ["NumpyVectorIndex", "VectorBatches", "VectorIndex", "VectorSql"]


@dataclass(frozen=True)
class VectorSql:
    """The exact vector index's reads of the truth store, as each backend writes them
    (:mod:`memory_ext.store.statements`)."""

    generation: str
    """``(ns_id,)`` -> the namespace's ``generation`` (bumped by every delete)."""
    top_rid: str
    """``(ns_id,)`` -> the highest rid with an embedding."""
    rows_after: str
    """``(ns_id, rid)`` -> ``rid, dim, vector`` of the later embeddings, by rid."""


@runtime_checkable
class VectorIndex(DerivedIndex, Protocol):
    """A derived index of dense vectors (see :class:`~memory_ext.store.base.DerivedIndex`), searchable.
    Writes happen inside the caller's SQLite transaction."""

    def add(self, conn: Connection, ns_id: int, rids: Sequence[int], vectors: np.ndarray) -> None: ...

    def remove(self, conn: Connection, ns_id: int, rids: Sequence[int]) -> None: ...

    def invalidate(self, ns_id: int | None = None) -> None: ...

    def search(self, conn: Connection, ns_id: int, query: np.ndarray, k: int, *,
               allowed: Collection[int] | None = None) -> list[tuple[int, float]]: ...

    def close(self) -> None: ...


class VectorBatches:
    """The ``index`` step every vector backend shares: a batch's vectors, when it has any, go to ``add``."""

    def add(self, conn: Connection, ns_id: int, rids: Sequence[int], vectors: np.ndarray) -> None:
        raise NotImplementedError

    def index(self, conn: Connection, ns_id: int, batch: RecordBatch) -> None:
        """Store the batch's vectors (``batch.vector_rids``, one row each)."""
        if batch.vectors is not None:
            self.add(conn, ns_id, batch.vector_rids, batch.vectors)


class _Partition:
    __slots__ = ("dim", "generation", "last_rid", "matrix", "n", "rids")

    def __init__(self, dim: int, generation: int) -> None:
        self.dim = dim
        self.generation = generation
        self.last_rid = 0
        self.n = 0
        self.matrix = np.zeros((0, dim), dtype=np.float32)
        self.rids = np.zeros(0, dtype=np.int64)

    def append(self, rids: np.ndarray, rows: np.ndarray) -> None:
        need = self.n + len(rids)
        if need > len(self.rids):
            cap = max(need, 2 * len(self.rids), 256)
            matrix = np.zeros((cap, self.dim), dtype=np.float32)
            matrix[: self.n] = self.matrix[: self.n]
            ids = np.zeros(cap, dtype=np.int64)
            ids[: self.n] = self.rids[: self.n]
            self.matrix, self.rids = matrix, ids
        self.matrix[self.n : need] = rows
        self.rids[self.n : need] = rids
        self.n = need
        self.last_rid = int(rids.max())


@vector_backends.register("numpy")
class NumpyVectorIndex(CachedIndex[_Partition], VectorBatches):
    """Exact cosine search over float32 rows partitioned by namespace (vectors are unit-normalised)."""

    name = "vector:numpy"

    def __init__(self, **_: object) -> None:
        super().__init__()

    @staticmethod
    def create_schema(conn: Connection) -> None:
        """Nothing: the vectors are the truth store's ``embeddings`` rows."""

    def drop_namespace(self, conn: Connection, ns_id: int) -> None:
        self.invalidate(ns_id)

    def add(self, conn: Connection, ns_id: int, rids: Sequence[int], vectors: np.ndarray) -> None:
        """Nothing beyond the truth store's rows: the partition picks them up at its next search."""

    def remove(self, conn: Connection, ns_id: int, rids: Sequence[int]) -> None:
        self.invalidate(ns_id)

    def _sync(self, conn: Connection, ns_id: int) -> _Partition | None:
        sql = sql_of(conn).vector
        row = conn.execute(sql.generation, (ns_id,)).fetchone()
        generation = int(row[0]) if row else 0
        with self._lock:
            part = self._cache.get(ns_id)
            if part is not None and part.generation != generation:
                part = None
            top = conn.execute(sql.top_rid, (ns_id,)).fetchone()[0]
            if top is None:
                self._cache.pop(ns_id, None)
                return None
            if part is not None and int(top) <= part.last_rid:
                return part
            after = part.last_rid if part is not None else 0
            rows = conn.execute(sql.rows_after, (ns_id, after)).fetchall()
            if not rows:
                return part
            dim = int(rows[0][1])
            if part is None:
                part = _Partition(dim, generation)
                self._cache[ns_id] = part
            rids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
            mat = np.frombuffer(b"".join(r[2] for r in rows), dtype=np.float32).reshape(len(rows), dim)
            part.append(rids, mat)
            return part

    def score_all(self, conn: Connection, ns_id: int, query: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Cosine similarity of ``query`` to every vector of the namespace: ``(rids, scores)``."""
        part = self._sync(conn, ns_id)
        if part is None:
            return np.zeros(0, np.int64), np.zeros(0, np.float32)
        with self._lock:
            matrix, rids = part.matrix[: part.n], part.rids[: part.n]
        return rids, matrix @ np.asarray(query, dtype=np.float32)

    def search(self, conn: Connection, ns_id: int, query: np.ndarray, k: int, *,
               allowed: Collection[int] | None = None) -> list[tuple[int, float]]:
        part = self._sync(conn, ns_id)
        if part is None or k <= 0:
            return []
        with self._lock:
            matrix, rids = part.matrix[: part.n], part.rids[: part.n]
        scores = matrix @ np.asarray(query, dtype=np.float32)
        if allowed is not None:
            mask = np.isin(rids, np.fromiter(allowed, dtype=np.int64, count=len(allowed)))
            scores = np.where(mask, scores, -np.inf)
            k = min(k, int(mask.sum()))
            if k == 0:
                return []
        k = min(k, len(scores))
        top = np.argpartition(-scores, k - 1)[:k] if k < len(scores) else np.arange(len(scores))
        top = top[np.lexsort((rids[top], -scores[top]))]
        return [(int(rids[i]), float(scores[i])) for i in top]

    def close(self) -> None:
        self.invalidate()
