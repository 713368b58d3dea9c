"""``index_queue``, the durable queue of model work (:class:`memory_ext.store.interface.QueueRepository`)."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime

from ..interface import Connection
from ..snapshots import chunks
from ..statements import sql_of
from .base import CommonStore

__all__ = ["QuarantinedWork", "QueueRepo", "QueueSql"]


@dataclass(frozen=True)
class QuarantinedWork:
    """A work item the indexer gave up on (``index_quarantine``): its record and the last error."""

    rid: int
    ns_id: int
    dense: int
    sparse: int
    attempts: int
    error: str
    since: str
    """When it was quarantined (ISO 8601, UTC)."""
    record_id: str
    kind: str
    turn_ids: tuple[str, ...]


@dataclass(frozen=True)
class QueueSql:
    """The statements of ``index_queue``, as each backend writes them (:mod:`memory_ext.store.statements`).
    ``{marks}``: a template's ``IN`` list (``sql.marks(n)``)."""

    create_table: str
    """``index_queue(rid, ns_id, dense, sparse)`` (idempotent)."""
    create_index: str
    """The index on ``ns_id`` (idempotent)."""
    enqueue: str
    """``(rid, ns_id, dense, sparse)``: insert or overwrite a work item."""
    dequeue: str
    """``{marks}`` template, ``(*rids)``."""
    dequeue_ns: str
    """``{marks}`` template, ``(ns_id, *rids)``."""
    drop_ns: str
    """``(ns_id,)``: every work item of a namespace."""
    oldest: str
    """``(limit,)`` -> ``rid, ns_id, dense, sparse`` of the oldest items."""
    oldest_ns: str
    """``(ns_id, limit)`` -> the same, of one namespace."""
    queued_rids: str
    """``{marks}`` template, ``(*rids)`` -> ``rid, ns_id, dense, sparse``."""
    queued_windows: str
    """``{marks}`` template, ``(*turn record rids)`` -> ``rid, ns_id, dense, sparse`` of the queued windows
    anchored to them."""
    pending: str
    """-> how many items the queue holds."""
    pending_ns: str
    """``(ns_id,)`` -> how many items of one namespace."""
    pending_dense_ns: str
    """``(ns_id,)`` -> how many items of one namespace still need a dense vector."""
    work_records: str
    """``{marks}`` template, ``(*rids)`` -> ``rid, ns_id, index_text, text, turn_ids, anchor_rid``."""
    work_turns: str
    """``{marks}`` template, ``(ns_id, *turn ids)`` -> ``id, seq, record_rid`` of those with a turn record (by the
    id index)."""
    sparse_queued: str
    """``(ns_id,)`` -> one row, true when a queued item of the namespace asks for a sparse encoding."""
    flag_sparse: str
    """``{marks}`` template, ``(*rids)``: those queued items get a sparse encoding too."""
    create_quarantine: str
    """``index_quarantine(rid, ns_id, dense, sparse, attempts, error, since)``: work items the indexer gave up on
    (idempotent)."""
    quarantine: str
    """``(rid, ns_id, dense, sparse, attempts, error, since)``: insert or overwrite a quarantined item."""
    unquarantine: str
    """``{marks}`` template, ``(*rids)``: remove quarantined items."""
    unquarantine_ns: str
    """``{marks}`` template, ``(ns_id, *rids)``: the same, of one namespace."""
    drop_quarantine_ns: str
    """``(ns_id,)``: every quarantined item of a namespace."""
    quarantined: str
    """-> ``rid, ns_id, dense, sparse, attempts, error, since, record id, kind, turn_ids`` of every quarantined
    item (oldest first)."""
    quarantined_ns: str
    """``(ns_id,)`` -> the same, of one namespace."""


class QueueRepo(CommonStore):
    """The statements of this table family, shared by the backends."""

    @staticmethod
    def create_queue_schema(conn: Connection) -> None:
        """``index_queue``: one row per record whose dense vector (``dense``: 1 embed its text, 2 the mean of
        its turns' vectors, 3 its turn's vector) or sparse encoding (``sparse`` = 1) is still to be made; and
        ``index_quarantine``, the items the indexer gave up on (:meth:`quarantine`)."""
        sql = sql_of(conn).queue
        conn.execute(sql.create_table)
        conn.execute(sql.create_index)
        conn.execute(sql.create_quarantine)

    @staticmethod
    def enqueue(conn: Connection, ns_id: int, items: Sequence[tuple[int, int, int]]) -> None:
        """Queue ``(rid, dense, sparse)`` work items of the namespace (inside the write transaction)."""
        conn.executemany(sql_of(conn).queue.enqueue,
                         [(int(r), ns_id, int(d), int(s)) for r, d, s in items if d or s])

    @staticmethod
    def sparse_queued(conn: Connection, ns_id: int) -> bool:
        """True when a queued item of the namespace asks for a sparse encoding."""
        row = conn.execute(sql_of(conn).queue.sparse_queued, (ns_id,)).fetchone()
        return bool(row and row[0])

    def queue_sparse(self, conn: Connection, ns_id: int, rids: Sequence[int]) -> None:
        """Queue a sparse encoding of the namespace's turn records ``rids`` (inside a write transaction): those
        queued already get the flag, the others a work item of their own. The indexer keeps an item queued until
        its flagged sparse encoding is written, so none is lost to a batch in flight."""
        wanted = sorted({int(r) for r in rids})
        queued = {item[0] for item in self.queued(conn, len(wanted), wanted)} if wanted else set()
        sql = sql_of(conn)
        for part in chunks(sorted(queued)):
            conn.execute(sql.queue.flag_sparse.format(marks=sql.marks(len(part))), part)
        self.enqueue(conn, ns_id, [(rid, 0, 1) for rid in wanted if rid not in queued])

    @staticmethod
    def dequeue(conn: Connection, rids: Sequence[int], ns_id: int | None = None) -> None:
        """Remove work items (done, or their records forgotten), queued or quarantined; with ``ns_id``, only that
        namespace's."""
        sql = sql_of(conn)
        for part in chunks([int(r) for r in rids]):
            marks = sql.marks(len(part))
            if ns_id is None:
                conn.execute(sql.queue.dequeue.format(marks=marks), part)
                conn.execute(sql.queue.unquarantine.format(marks=marks), part)
            else:
                conn.execute(sql.queue.dequeue_ns.format(marks=marks), (ns_id, *part))
                conn.execute(sql.queue.unquarantine_ns.format(marks=marks), (ns_id, *part))

    @staticmethod
    def drop_queue(conn: Connection, ns_id: int) -> None:
        conn.execute(sql_of(conn).queue.drop_ns, (ns_id,))
        conn.execute(sql_of(conn).queue.drop_quarantine_ns, (ns_id,))

    @staticmethod
    def quarantine(conn: Connection, items: Sequence[tuple[int, int, int, int]], errors: Mapping[int, str],
                   attempts: Mapping[int, int]) -> None:
        """Move work items ``(rid, ns_id, dense, sparse)`` the indexer gave up on out of the queue into
        ``index_quarantine`` with their last error and number of attempts (inside a write transaction): they no
        longer hold up the queue; the record stays searchable by every channel that needs no model, and
        :meth:`release_quarantined` (``reindex``) queues them again."""
        if not items:
            return
        sql = sql_of(conn)
        since = datetime.now(UTC).isoformat()
        conn.executemany(sql.queue.quarantine, [(int(r), int(ns), int(d), int(sp), int(attempts.get(r, 1)),
                                                 errors.get(r, "")[:2000], since) for r, ns, d, sp in items])
        for part in chunks([int(i[0]) for i in items]):
            conn.execute(sql.queue.dequeue.format(marks=sql.marks(len(part))), part)

    def quarantined(self, ns_id: int | None = None) -> list[QuarantinedWork]:
        """The work items in quarantine (of ``ns_id`` only, when given), oldest first."""
        conn = self.reader()
        queue = sql_of(conn).queue
        text, args = (queue.quarantined, ()) if ns_id is None else (queue.quarantined_ns, (ns_id,))
        try:
            rows = conn.execute(text, args).fetchall()
        except self._missing_table:  # a store written before the quarantine existed (read-only opener)
            return []
        return [QuarantinedWork(rid=int(r[0]), ns_id=int(r[1]), dense=int(r[2]), sparse=int(r[3]),
                                attempts=int(r[4]), error=str(r[5]), since=str(r[6]), record_id=str(r[7]),
                                kind=str(r[8]), turn_ids=tuple(json.loads(r[9] or "[]"))) for r in rows]

    def release_quarantined(self, conn: Connection, ns_id: int | None = None) -> int:
        """Queue the quarantined work items (of ``ns_id`` only, when given) again; returns how many."""
        sql = sql_of(conn)
        text, args = (sql.queue.quarantined, ()) if ns_id is None else (sql.queue.quarantined_ns, (ns_id,))
        rows = conn.execute(text, args).fetchall()
        by_ns: dict[int, list[tuple[int, int, int]]] = {}
        for r in rows:
            by_ns.setdefault(int(r[1]), []).append((int(r[0]), int(r[2]), int(r[3])))
        for ns, items in by_ns.items():
            self.enqueue(conn, ns, items)
            for part in chunks([i[0] for i in items]):
                conn.execute(sql.queue.unquarantine.format(marks=sql.marks(len(part))), part)
        return len(rows)

    @staticmethod
    def queued(conn: Connection, limit: int, rids: Sequence[int] | None = None,
               ns_id: int | None = None) -> list[tuple[int, int, int, int]]:
        """``(rid, ns_id, dense, sparse)`` of the oldest ``limit`` work items (of ``rids`` only when given; of
        namespace ``ns_id`` only when given)."""
        sql = sql_of(conn)
        if rids is None:
            text, args = (sql.queue.oldest, (limit,)) if ns_id is None else (sql.queue.oldest_ns, (ns_id, limit))
            return [(int(r[0]), int(r[1]), int(r[2]), int(r[3])) for r in conn.execute(text, args)]
        out = []
        for part in chunks(sorted(int(r) for r in rids)):
            out += [(int(r[0]), int(r[1]), int(r[2]), int(r[3])) for r in conn.execute(
                sql.queue.queued_rids.format(marks=sql.marks(len(part))), part)]
        return out

    @staticmethod
    def queued_windows(conn: Connection, turn_rids: Sequence[int]) -> list[tuple[int, int, int, int]]:
        """Work items (as :meth:`queued`) of the queued windows anchored to these turn records: the indexer
        encodes a turn and its window in one pass of the run of turns around them."""
        out = []
        sql = sql_of(conn)
        for part in chunks(sorted(int(r) for r in turn_rids)):
            out += [(int(r[0]), int(r[1]), int(r[2]), int(r[3])) for r in conn.execute(
                sql.queue.queued_windows.format(marks=sql.marks(len(part))), part)]
        return out

    @contextmanager
    def claimed_work(self, limit: int) -> Iterator[list[tuple[int, int, int, int]]]:
        """The next batch of queued work for this process's indexer: the oldest ``limit`` items. Only one
        process writes a SQLite store, so nothing else claims work; the PostgreSQL store hands each indexer one
        namespace at a time (see :meth:`memory_ext.store.pg.truth.PgTruthStore.claimed_work`)."""
        yield self.queued(self.reader(), limit)

    def pending(self, ns_id: int | None = None, *, dense_only: bool = False) -> int:
        """Records (of ``ns_id``, or of the store) whose vectors or sparse encodings are not written yet;
        ``dense_only``: those still waiting for a vector (of ``ns_id``), not for a sparse encoding alone."""
        conn = self.reader()
        queue = sql_of(conn).queue
        sql, args = ((queue.pending, ()) if ns_id is None else
                     (queue.pending_dense_ns if dense_only else queue.pending_ns, (ns_id,)))
        try:
            return int(conn.execute(sql, args).fetchone()[0])
        except self._missing_table:  # a store written before the queue existed (read-only opener)
            return 0

    def work_sources(self, rids: Sequence[int]) -> dict[int, tuple[str, str, list[int], int | None]]:
        """``rid -> (index_text, text, rids of its turns' turn records, anchor rid)`` of queued records."""
        conn = self.reader()
        sql = sql_of(conn)
        rows: list[tuple[int, int, str, str, list[str], int | None]] = []
        for part in chunks(sorted(int(r) for r in rids)):
            rows += [(int(rid), int(ns_id), index_text, text, json.loads(turn_ids), anchor) for
                     rid, ns_id, index_text, text, turn_ids, anchor in conn.execute(
                         sql.queue.work_records.format(marks=sql.marks(len(part))), part).fetchall()]
        # the turns of every record at once, per namespace: (seq, turn record rid) by turn id
        turn_of: dict[tuple[int, str], tuple[int, int]] = {}
        wanted: dict[int, set[str]] = {}
        for _, ns_id, _, _, ids, _ in rows:
            wanted.setdefault(ns_id, set()).update(ids)
        for ns_id, turn_ids in wanted.items():
            for part in chunks(sorted(turn_ids)):
                # SQLite's text ("+ns_id") makes it use the id index, not scan the namespace by seq
                for turn_id, seq, record_rid in conn.execute(
                        sql.queue.work_turns.format(marks=sql.marks(len(part))), (ns_id, *part)):
                    turn_of[(ns_id, turn_id)] = (int(seq), int(record_rid))
        out: dict[int, tuple[str, str, list[int], int | None]] = {}
        for rid, ns_id, index_text, text, ids, anchor in rows:
            members = [m[1] for m in sorted(turn_of[(ns_id, i)] for i in ids if (ns_id, i) in turn_of)]
            out[rid] = (index_text, text, members, None if anchor is None else int(anchor))
        return out
