"""``records`` and ``embeddings`` (:class:`memory_ext.store.interface.RecordRepository`)."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..filters import RecordFilter, filter_sql
from ..interface import Connection
from ..rows import RecordRow
from ..snapshots import chunks, marks
from .meta import MetaRepo

__all__ = ["RecordRepo"]


class RecordRepo(MetaRepo):
    """The statements of this table family, shared by the backends."""

    @staticmethod
    def insert_records(conn: Connection, ns_id: int, rows: Sequence[dict[str, Any]],
                       anchor_rids: Sequence[int | None] | None = None) -> list[int]:
        """Insert records; returns their rids in order. ``anchor_rids``: the turn record each row is evidence for
        (a turn record is its own anchor)."""
        now = time.time()
        rids = []
        anchors = anchor_rids if anchor_rids is not None else [None] * len(rows)
        for r, anchor in zip(rows, anchors, strict=True):
            cur = conn.execute(
                "INSERT INTO records(id, ns_id, kind, text, index_text, l0, l1, entities, tags, ref_ts, turn_ids,"
                " source_role, speaker, session_id, importance, anchor_rid, created_at, updated_at)"
                " VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                (r["id"], ns_id, r["kind"], r["text"], r["index_text"], r.get("l0"), r.get("l1"),
                 json.dumps(r.get("entities", [])), json.dumps(r.get("tags", [])), r.get("ref_ts"),
                 json.dumps(r["turn_ids"]), r.get("source_role"), r.get("speaker"), r.get("session_id"),
                 r.get("importance", 0.5), anchor, now, now),
            )
            assert cur.lastrowid is not None
            rid = cur.lastrowid
            if r["kind"] == "turn":
                conn.execute("UPDATE records SET anchor_rid=? WHERE rid=?", (rid, rid))
            if r["kind"] == "turn" and r["turn_ids"]:
                conn.execute("UPDATE turns SET record_rid=? WHERE ns_id=? AND id=?", (rid, ns_id, r["turn_ids"][0]))
            rids.append(rid)
        return rids

    def insert_embeddings(self, conn: Connection, ns_id: int, rids: Sequence[int], vectors: np.ndarray,
                          embedder_id: str) -> None:
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        dim = int(vectors.shape[1])
        if self.get_meta("embedder_id") is None:
            self.set_meta(conn, "embedder_id", embedder_id)
            self.set_meta(conn, "embedder_dim", str(dim))
        conn.executemany(
            "INSERT OR REPLACE INTO embeddings(rid, ns_id, embedder_id, dim, vector) VALUES(?,?,?,?,?)",
            [(rid, ns_id, embedder_id, dim, vectors[i].tobytes()) for i, rid in enumerate(rids)],
        )

    def records_by_rid(self, ns_id: int, rids: Sequence[int]) -> dict[int, RecordRow]:
        out: dict[int, RecordRow] = {}
        conn = self.reader()
        for chunk in chunks(list(rids)):
            for r in conn.execute(
                f"SELECT rid, id, kind, text, turn_ids, source_role, speaker, session_id, ref_ts FROM records"
                f" WHERE +ns_id=? AND rid IN {marks(len(chunk))}", (ns_id, *chunk)):
                out[int(r[0])] = RecordRow(int(r[0]), r[1], r[2], r[3], json.loads(r[4]), r[5], r[6], r[7], r[8])
        return out

    @staticmethod
    def record_ids_by_rid(conn: Connection, ns_id: int, rids: Sequence[int]) -> dict[int, str]:
        """The public ids of these records."""
        out: dict[int, str] = {}
        for part in chunks(list(rids)):
            out.update((int(r[0]), str(r[1])) for r in conn.execute(
                f"SELECT rid, id FROM records WHERE ns_id=? AND rid IN {marks(len(part))}", (ns_id, *part)))
        return out

    def vectors_by_rid(self, ns_id: int, rids: Sequence[int]) -> dict[int, np.ndarray]:
        """Stored vectors of the given records of one namespace (damaged blobs are left out)."""
        out: dict[int, np.ndarray] = {}
        for chunk in chunks(list(rids)):
            rows = self.reader().execute(
                f"SELECT rid, vector, dim FROM embeddings WHERE +ns_id=? AND rid IN {marks(len(chunk))}",
                (ns_id, *chunk))
            # a damaged blob (not dim float32 values) is skipped: callers fall back as for a missing vector
            out.update((int(r[0]), np.frombuffer(r[1], dtype=np.float32)) for r in rows
                       if isinstance(r[1], bytes) and len(r[1]) == 4 * int(r[2]))
        return out

    @staticmethod
    def stored_vectors(conn: Connection, rids: Sequence[int]) -> dict[int, np.ndarray]:
        """Stored vectors of the given records, as ``conn`` sees them (any namespace: rids are global)."""
        out: dict[int, np.ndarray] = {}
        for part in chunks(sorted({int(r) for r in rids})):
            out.update((int(r[0]), np.frombuffer(r[1], dtype=np.float32)) for r in conn.execute(
                f"SELECT rid, vector FROM embeddings WHERE rid IN {marks(len(part))}", part))
        return out

    def filter_rids(self, ns_id: int, where: str, args: Sequence[Any]) -> set[int]:
        """rids of the namespace matching a SQL condition built by the engine from validated filters."""
        sql = f"SELECT rid FROM records WHERE ns_id=? AND ({where})"
        return {int(r[0]) for r in self.reader().execute(sql, (ns_id, *args))}

    def rids_matching(self, ns_id: int, record_filter: RecordFilter) -> set[int]:
        """rids of the namespace's records that pass ``record_filter`` (every rid when it is empty)."""
        where, args = filter_sql(record_filter, self.dialect)
        return self.filter_rids(ns_id, where or "1", args)
