"""Vectors in PostgreSQL with pgvector: cosine distance, an HNSW index, filtered by namespace.

``storage.vector_backend: pgvector`` (the default with ``storage.backend: postgres``). The vectors live in one
table per dimension, ``pgvector_d<dim>(rid, ns_id, embedding vector(dim))`` (with ``pgvector_d<dim>_counts``,
vectors per namespace), beside the truth store's
``embeddings`` rows, written in the same transaction. A namespace holding at most
``storage.pgvector_exact_max`` vectors is scored exactly (every vector, as numpy does: identical rankings); a
larger one is searched through an HNSW index of its own: a partial index ``pgvector_d<dim>_hnsw_ns<ns_id>``
(``WHERE ns_id = <ns_id>``), built when the namespace grows past ``pgvector_exact_max``. A namespace's graph holds
only its own vectors, so a search walks no other namespace's part of it (one HNSW index over every namespace
made the filtered scan visit about as many times more of the graph as there are namespaces of that size); and
small namespaces, scored exactly, cost no HNSW insertion at all. An older store's single ``pgvector_d<dim>_hnsw``
is replaced by these when a writer opens it (:meth:`PgVectorIndex.create_schema`). Without its index (a reader of
an older store, a lowered ``pgvector_exact_max`` before the next write) a large namespace's search is still
correct: the planner uses the old shared index, or scores the namespace exactly.

>>> vector_literal([0.5, -1.0])
'[0.5,-1.0]'
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

import numpy as np

from ...registry import vector_backends
from ..base import RecordBatch

__all__ = ["PgVectorIndex", "vector_literal"]


def vector_literal(values: Any) -> str:
    """pgvector's text form of a vector."""
    return "[" + ",".join(repr(float(v)) for v in np.asarray(values, dtype=np.float32).tolist()) + "]"


@vector_backends.register("pgvector")
class PgVectorIndex:
    """A pgvector table with an HNSW (cosine) index; exact scoring for namespaces up to ``exact_max``."""

    name = "vector:pgvector"

    def __init__(self, *, storage: Any, dim: int, reader: Any = None, **_: object) -> None:
        if getattr(storage, "backend", "sqlite") != "postgres":
            from ...errors import ConfigError

            raise ConfigError("storage.vector_backend", "pgvector", "pgvector keeps vectors in PostgreSQL: set "
                              "storage.backend: postgres, or use numpy / chroma with SQLite")
        self.dim = int(dim)
        self.table = f"pgvector_d{self.dim}"
        self.counts = f"{self.table}_counts"  # vectors per namespace (the exact/HNSW choice)
        self.exact_max = int(storage.pgvector_exact_max)
        self._reader = reader

    def create_schema(self, conn: Any) -> None:
        conn.execute(f"CREATE TABLE IF NOT EXISTS {self.table}(rid BIGINT PRIMARY KEY, ns_id BIGINT NOT NULL,"
                     f" embedding vector({self.dim}) NOT NULL)")
        conn.execute(f"CREATE INDEX IF NOT EXISTS {self.table}_ns ON {self.table}(ns_id, rid)")
        conn.execute(f"CREATE TABLE IF NOT EXISTS {self.counts}(ns_id BIGINT PRIMARY KEY, n BIGINT NOT NULL)")
        # every namespace past exact_max gets its own HNSW index (an older store: built here, from its vectors),
        # then the older layout's shared index goes
        for (ns_id,) in conn.execute(f"SELECT ns_id FROM {self.counts} WHERE n > %s"
                                     " AND to_regclass(%s || ns_id::text) IS NULL ORDER BY ns_id",
                                     (self.exact_max, f"{self.table}_hnsw_ns")).fetchall():
            self._build_hnsw(conn, int(ns_id))
        conn.execute(f"DROP INDEX IF EXISTS {self.table}_hnsw")

    def hnsw_name(self, ns_id: int) -> str:
        """The name of namespace ``ns_id``'s HNSW index (a partial index of the vector table)."""
        return f"{self.table}_hnsw_ns{int(ns_id)}"

    def _build_hnsw(self, conn: Any, ns_id: int) -> None:
        """Build namespace ``ns_id``'s HNSW index from its vectors (in the caller's transaction; it holds off other
        writers of the vector table until that commits — once per namespace)."""
        conn.execute(f"CREATE INDEX IF NOT EXISTS {self.hnsw_name(ns_id)} ON {self.table}"
                     f" USING hnsw (embedding vector_cosine_ops) WHERE ns_id = {int(ns_id)}")

    def index(self, conn: Any, ns_id: int, batch: RecordBatch) -> None:
        if batch.vectors is not None:
            self.add(conn, ns_id, batch.vector_rids, batch.vectors)

    def add(self, conn: Any, ns_id: int, rids: Sequence[int], vectors: np.ndarray) -> None:
        if not len(rids):
            return
        rows = [(int(r), ns_id, vector_literal(v)) for r, v in zip(rids, vectors, strict=True)]
        wanted = sorted(set(int(r) for r in rids))
        row = conn.execute(f"SELECT (SELECT count(*) FROM {self.table} WHERE ns_id=%s AND rid = ANY(%s)),"
                           f" (SELECT n FROM {self.counts} WHERE ns_id=%s), to_regclass(%s) IS NOT NULL",
                           (ns_id, wanted, ns_id, self.hnsw_name(ns_id))).fetchone()
        before, stored, indexed = (int(row[0]), int(row[1] or 0), bool(row[2])) if row else (0, 0, False)
        if stored + len(wanted) - before > self.exact_max and not indexed:
            # past exact_max: the namespace's own HNSW index, built before this transaction writes the table (the
            # build waits for other namespaces' writers to commit; holding no lock on the table yet, it makes
            # nobody wait in a circle)
            self._build_hnsw(conn, ns_id)
        conn.executemany(f"INSERT INTO {self.table}(rid, ns_id, embedding) VALUES(%s, %s, %s::vector)"
                         " ON CONFLICT (rid) DO UPDATE SET embedding = EXCLUDED.embedding", rows)
        added = len(wanted) - before
        if added:
            conn.execute(f"INSERT INTO {self.counts}(ns_id, n) VALUES(%s, %s) ON CONFLICT (ns_id)"
                         f" DO UPDATE SET n = {self.counts}.n + EXCLUDED.n", (ns_id, added))

    def _count_rows(self, conn: Any, ns_id: int, rids: Sequence[int]) -> int:
        row = conn.execute(f"SELECT count(*) FROM {self.table} WHERE ns_id=%s AND rid = ANY(%s)",
                           (ns_id, [int(r) for r in rids])).fetchone()
        return int(row[0]) if row else 0

    def _older_tables(self, conn: Any) -> list[str]:
        """The vector tables of other dimensions: what the store's earlier embedders wrote (an embedder change
        reindexes into a new table; the old one still holds those vectors until each namespace is rebuilt)."""
        rows = conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = current_schema()"
                            " AND tablename ILIKE %s ESCAPE '^' ORDER BY tablename", ("pgvector^_d%",)).fetchall()
        return [r[0] for r in rows if r[0] != self.table and r[0][len("pgvector_d"):].isdigit()]

    def remove(self, conn: Any, ns_id: int, rids: Sequence[int]) -> None:
        if not len(rids):
            return
        wanted = [int(r) for r in rids]
        gone = self._count_rows(conn, ns_id, rids)
        conn.execute(f"DELETE FROM {self.table} WHERE ns_id=%s AND rid = ANY(%s)", (ns_id, wanted))
        for table in self._older_tables(conn):  # forgetting reaches an earlier embedder's vectors too
            conn.execute(f"DELETE FROM {table} WHERE ns_id=%s AND rid = ANY(%s)", (ns_id, wanted))
        if gone:
            conn.execute(f"UPDATE {self.counts} SET n = n - %s WHERE ns_id=%s", (gone, ns_id))

    def drop_namespace(self, conn: Any, ns_id: int) -> None:
        """Every vector of the namespace, of every dimension (a reindex after an embedder change drops the old
        embedder's vectors here; a forget of the namespace leaves none)."""
        for table in (self.table, *self._older_tables(conn)):
            conn.execute(f"DELETE FROM {table} WHERE ns_id=%s", (ns_id,))
            conn.execute(f"DELETE FROM {table}_counts WHERE ns_id=%s", (ns_id,))

    def invalidate(self, ns_id: int | None = None) -> None:
        """Nothing is cached in memory."""

    def count(self, conn: Any, ns_id: int) -> int:
        row = conn.execute(f"SELECT n FROM {self.counts} WHERE ns_id=%s", (ns_id,)).fetchone()
        return int(row[0]) if row else 0

    def score_all(self, conn: Any, ns_id: int, query: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
        """Cosine similarity to every vector of a namespace of at most ``exact_max`` vectors (None: larger —
        use :meth:`search`)."""
        n = self.count(conn, ns_id)
        if n > self.exact_max:
            return None
        if n == 0:
            return np.zeros(0, np.int64), np.zeros(0, np.float32)
        rows = conn.execute(f"SELECT rid, 1 - (embedding <=> %s::vector) FROM {self.table} WHERE ns_id=%s",
                            (vector_literal(query), ns_id)).fetchall()
        return (np.fromiter((r[0] for r in rows), np.int64, len(rows)),
                np.fromiter((r[1] for r in rows), np.float32, len(rows)))

    def search(self, conn: Any, ns_id: int, query: np.ndarray, k: int, *,
               allowed: Collection[int] | None = None) -> list[tuple[int, float]]:
        if k <= 0:
            return []
        q = vector_literal(query)
        if allowed is not None:  # a filtered search: score the allowed records exactly
            if len(allowed) == 0:  # (a set, or the recall request's numpy array: no truth value)
                return []
            rows = conn.execute(f"SELECT rid, 1 - (embedding <=> %s::vector) AS s FROM {self.table} WHERE ns_id=%s"
                                " AND rid = ANY(%s) ORDER BY s DESC, rid LIMIT %s",
                                (q, ns_id, [int(r) for r in allowed], k)).fetchall()
        elif self.count(conn, ns_id) <= self.exact_max:
            rows = conn.execute(f"SELECT rid, 1 - (embedding <=> %s::vector) AS s FROM {self.table} WHERE ns_id=%s"
                                " ORDER BY s DESC, rid LIMIT %s", (q, ns_id, k)).fetchall()
        else:
            rows = self._hnsw(conn, ns_id, q, k)
        return [(int(r[0]), float(r[1])) for r in rows]

    def _hnsw(self, conn: Any, ns_id: int, q: str, k: int) -> list[tuple[Any, ...]]:
        own = not conn.in_transaction
        if own:
            conn.execute("BEGIN")
        try:
            # both settings for this transaction only (SET LOCAL) in one round trip
            conn.execute("SELECT set_config('hnsw.iterative_scan', 'relaxed_order', true),"
                         f" set_config('hnsw.ef_search', '{max(40, min(1000, 2 * k))}', true)")
            # ns_id inlined (an int): the planner matches the namespace's partial HNSW index to a literal only
            rows = conn.execute(f"SELECT rid, 1 - (embedding <=> %s::vector) FROM {self.table}"
                                f" WHERE ns_id = {int(ns_id)} ORDER BY embedding <=> %s::vector LIMIT %s",
                                (q, q, k)).fetchall()
        finally:
            if own:
                conn.execute("COMMIT")
        rows.sort(key=lambda r: (-float(r[1]), int(r[0])))
        return rows

    def close(self) -> None:
        """Nothing to release: the rows live in PostgreSQL."""
