"""``records`` and ``embeddings`` (:class:`memory_ext.store.interface.RecordRepository`)."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..filters import RecordFilter, filter_sql
from ..interface import Connection
from ..rows import RecordRow
from ..snapshots import chunks
from ..statements import sql_of
from .meta import TURN_VECTORS_KEY, MetaRepo

__all__ = ["RecordRepo", "RecordsSql"]


@dataclass(frozen=True)
class RecordsSql:
    """The statements of ``records`` and ``embeddings``, as each backend writes them
    (:mod:`memory_ext.store.statements`). ``{marks}``: a template's ``IN`` list (``sql.marks(n)``)."""

    insert_record: str
    """``(id, ns_id, kind, text, index_text, l0, l1, entities, tags, ref_ts, turn_ids, source_role, speaker,
    session_id, importance, anchor_rid, created_at, updated_at)`` -> the new ``rid`` (``RETURNING``)."""
    self_anchor: str
    """``(rid, rid)``: a turn record is its own anchor."""
    turn_record_rid: str
    """``(rid, ns_id, turn id)``: the turn's record."""
    upsert_embedding: str
    """``(rid, ns_id, embedder_id, dim, vector)``: insert or overwrite a record's vector."""
    records_by_rid: str
    """``{marks}`` template, ``(ns_id, *rids)`` -> ``rid, id, kind, text, turn_ids, source_role, speaker,
    session_id, ref_ts``."""
    record_ids_by_rid: str
    """``{marks}`` template, ``(ns_id, *rids)`` -> ``rid, id``."""
    vectors_by_rid: str
    """``{marks}`` template, ``(ns_id, *rids)`` -> ``rid, vector, dim``."""
    stored_vectors: str
    """``{marks}`` template, ``(*rids)`` -> ``rid, vector`` (any namespace)."""
    filter_rids: str
    """``{where}`` template (a condition built by :func:`memory_ext.store.filters.filter_sql`), ``(ns_id,
    *args)`` -> rids."""


class RecordRepo(MetaRepo):
    """The statements of this table family, shared by the backends."""

    @staticmethod
    def insert_records(conn: Connection, ns_id: int, rows: Sequence[dict[str, Any]],
                       anchor_rids: Sequence[int | None] | None = None) -> list[int]:
        """Insert records; returns their rids in order. ``anchor_rids``: the turn record each row is evidence for
        (a turn record is its own anchor)."""
        now = time.time()
        rids = []
        sql = sql_of(conn).records
        anchors = anchor_rids if anchor_rids is not None else [None] * len(rows)
        for r, anchor in zip(rows, anchors, strict=True):
            cur = conn.execute(
                sql.insert_record,
                (r["id"], ns_id, r["kind"], r["text"], r["index_text"], r.get("l0"), r.get("l1"),
                 json.dumps(r.get("entities", [])), json.dumps(r.get("tags", [])), r.get("ref_ts"),
                 json.dumps(r["turn_ids"]), r.get("source_role"), r.get("speaker"), r.get("session_id"),
                 r.get("importance", 0.5), anchor, now, now),
            )
            rid = int(cur.fetchone()[0])
            if r["kind"] == "turn":
                conn.execute(sql.self_anchor, (rid, rid))
            if r["kind"] == "turn" and r["turn_ids"]:
                conn.execute(sql.turn_record_rid, (rid, ns_id, r["turn_ids"][0]))
            rids.append(rid)
        return rids

    def insert_embeddings(self, conn: Connection, ns_id: int, rids: Sequence[int], vectors: np.ndarray,
                          embedder_id: str, vector_kind: str | None = None) -> None:
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        dim = int(vectors.shape[1])
        if self.get_meta("embedder_id") is None:
            self.set_meta(conn, "embedder_id", embedder_id)
            self.set_meta(conn, "embedder_dim", str(dim))
            if vector_kind is not None:
                self.set_meta(conn, TURN_VECTORS_KEY, vector_kind)
        conn.executemany(
            sql_of(conn).records.upsert_embedding,
            [(rid, ns_id, embedder_id, dim, vectors[i].tobytes()) for i, rid in enumerate(rids)],
        )

    def records_by_rid(self, ns_id: int, rids: Sequence[int]) -> dict[int, RecordRow]:
        out: dict[int, RecordRow] = {}
        conn = self.reader()
        sql = sql_of(conn)
        for chunk in chunks(list(rids)):
            for r in conn.execute(sql.records.records_by_rid.format(marks=sql.marks(len(chunk))), (ns_id, *chunk)):
                out[int(r[0])] = RecordRow(int(r[0]), r[1], r[2], r[3], json.loads(r[4]), r[5], r[6], r[7], r[8])
        return out

    @staticmethod
    def record_ids_by_rid(conn: Connection, ns_id: int, rids: Sequence[int]) -> dict[int, str]:
        """The public ids of these records."""
        out: dict[int, str] = {}
        sql = sql_of(conn)
        for part in chunks(list(rids)):
            out.update((int(r[0]), str(r[1])) for r in conn.execute(
                sql.records.record_ids_by_rid.format(marks=sql.marks(len(part))), (ns_id, *part)))
        return out

    def vectors_by_rid(self, ns_id: int, rids: Sequence[int]) -> dict[int, np.ndarray]:
        """Stored vectors of the given records of one namespace (damaged blobs are left out)."""
        out: dict[int, np.ndarray] = {}
        conn = self.reader()
        sql = sql_of(conn)
        for chunk in chunks(list(rids)):
            rows = conn.execute(sql.records.vectors_by_rid.format(marks=sql.marks(len(chunk))), (ns_id, *chunk))
            # a damaged blob (not dim float32 values) is skipped: callers fall back as for a missing vector
            out.update((int(r[0]), np.frombuffer(r[1], dtype=np.float32)) for r in rows
                       if isinstance(r[1], bytes) and len(r[1]) == 4 * int(r[2]))
        return out

    @staticmethod
    def stored_vectors(conn: Connection, rids: Sequence[int]) -> dict[int, np.ndarray]:
        """Stored vectors of the given records, as ``conn`` sees them (any namespace: rids are global)."""
        out: dict[int, np.ndarray] = {}
        sql = sql_of(conn)
        for part in chunks(sorted({int(r) for r in rids})):
            out.update((int(r[0]), np.frombuffer(r[1], dtype=np.float32)) for r in conn.execute(
                sql.records.stored_vectors.format(marks=sql.marks(len(part))), part))
        return out

    def filter_rids(self, ns_id: int, where: str, args: Sequence[Any]) -> set[int]:
        """rids of the namespace matching a SQL condition built by the engine from validated filters."""
        conn = self.reader()
        return {int(r[0]) for r in conn.execute(sql_of(conn).records.filter_rids.format(where=where), (ns_id, *args))}

    def rids_matching(self, ns_id: int, record_filter: RecordFilter) -> set[int]:
        """rids of the namespace's records that pass ``record_filter`` (every rid when it is empty)."""
        where, args = filter_sql(record_filter, self.dialect)
        return self.filter_rids(ns_id, where or "1", args)
