"""Time index: the time spans each record is about, persisted in SQLite, one independent index per namespace.

A record is about two kinds of time:

* **said**: the moment it was written, its ``ref_ts`` (a point, ``start == end``, confidence 1);
* **mentioned**: the spans of the time expressions of its text, resolved against ``ref_ts`` by
  :func:`memory_ext.text.timeexpr.extract_times` and kept when their confidence is at least
  ``min_confidence`` (0.5 by default): a turn of 2023-05-08 saying "I went to the museum yesterday" is about
  ``[2023-05-07, 2023-05-08)``. Identical spans of one record are stored once (the highest confidence).

A record without ``ref_ts`` has neither (relative expressions cannot be resolved without it) and is not
indexed; a record with ``ref_ts`` always has its "said" span.

Storage (tables prefixed ``time_``; written inside the caller's transaction, never committed here)::

    time_spans(ns_id, rid, start_ts, end_ts, source, confidence, expr)   INDEX(ns_id, rid)
        one row per span of a record: ``[start_ts, end_ts)`` in UTC epoch seconds (``start_ts == end_ts`` for
        a "said" point), ``source`` 'said' | 'mentioned', ``expr`` the expression's text (NULL for 'said').
    time_stats(ns_id PRIMARY KEY, version, n_records, n_spans, max_rid)
        per-namespace counters: ``n_records`` records have a span, ``n_spans`` spans in all, ``max_rid`` the
        highest rid ever indexed; ``version`` is bumped by every delete.

Query side, :meth:`TimeIndex.snapshot` keeps a per-namespace in-memory :class:`TimeSnapshot` (numpy arrays of
the spans sorted by rid), synced from ``time_stats`` like the entity graph's: unchanged -> one SQL statement;
only records added (rids above every rid loaded) -> just their spans are read and appended; a delete (or a rid
added out of order) -> reloaded whole. A snapshot is never changed once published, so threads may share it.

Every statement carries ``ns_id``: one namespace never reads or changes another's rows.

>>> import sqlite3
>>> from datetime import datetime, timezone
>>> conn = sqlite3.connect(":memory:")
>>> TimeIndex.create_schema(conn)
>>> index = TimeIndex()
>>> monday = datetime(2023, 5, 8, 13, 56, tzinfo=timezone.utc).timestamp()
>>> index.add(conn, 1, [(10, index.spans_of("I went to the museum yesterday.", monday))])
>>> [(source, datetime.fromtimestamp(s, timezone.utc).date().isoformat(), expr)
...  for s, _, source, _, expr in index.spans(conn, 1, 10)]
[('mentioned', '2023-05-07', 'yesterday'), ('said', '2023-05-08', None)]
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Final, Literal

import numpy as np

from ..errors import ConfigError
from ..text.timeexpr import extract_times
from .base import CachedIndex, RecordBatch
from .interface import Connection
from .snapshots import chunks, remove_indexed
from .statements import sql_of

__all__ = ["Span", "TimeIndex", "TimeIndexSql", "TimeSnapshot", "record_spans"]

Source = Literal["said", "mentioned"]

DEFAULT_MIN_CONFIDENCE: Final = 0.5


@dataclass(frozen=True)
class TimeIndexSql:
    """The statements of the ``time_`` tables, as each backend writes them (:mod:`memory_ext.store.statements`)."""

    schema: tuple[str, ...]
    """The ``time_spans`` and ``time_stats`` tables and the span index (``IF NOT EXISTS``)."""
    stats: str
    """``(ns_id,)`` -> ``version, n_records, n_spans, max_rid``."""
    spans_after: str
    """``(ns_id, rid)`` -> ``rid, start_ts, end_ts, source = 'mentioned', confidence`` of the spans of later
    records, by rid, start and end."""
    insert_span: str
    """``(ns_id, rid, start_ts, end_ts, source, confidence, expr)`` (``executemany``)."""
    add_stats: str
    """``(n_records, n_spans, max_rid, ns_id)``: records added to the counters."""
    insert_stats: str
    """``(ns_id, n_records, n_spans, max_rid)``: the namespace's first counters (version 0)."""
    count_spans: str
    """``{ids}`` template, ``(ns_id, *rids)`` -> ``records, spans`` among them."""
    delete_spans: str
    """``{ids}`` template, ``(ns_id, *rids)``."""
    remove_stats: str
    """``(n_records, n_spans, ns_id)``: records removed from the counters, a new version."""
    drop_spans: str
    """``(ns_id,)``."""
    drop_stats: str
    """``(ns_id,)``: the counters zeroed, a new version."""
    record_spans: str
    """``(ns_id, rid)`` -> ``start_ts, end_ts, source, confidence, expr`` of one record, by start time."""


@dataclass(frozen=True, slots=True)
class Span:
    """One time span a record is about: ``[start, end)`` in UTC epoch seconds (a point when equal)."""

    start: float
    end: float
    source: Source
    confidence: float
    expr: str | None = None


def record_spans(text: str, ref_ts: float | None, *, min_confidence: float = DEFAULT_MIN_CONFIDENCE) -> list[Span]:
    """The spans of one record: its mentioned spans (in order of appearance, duplicates merged), then "said".

    ``ref_ts`` is the record's time (UTC epoch seconds); without it the record is about no known time.

    >>> from datetime import datetime, timezone
    >>> ref = datetime(2023, 5, 8, 13, 56, tzinfo=timezone.utc).timestamp()  # a Monday
    >>> [(s.source, s.expr, s.end - s.start) for s in record_spans("上周六我们去爬山了", ref)]
    [('mentioned', '上周六', 86400.0), ('said', None, 0.0)]
    >>> record_spans("yesterday", None)
    []
    """
    if ref_ts is None or not math.isfinite(ref_ts):
        return []
    ref_ts = float(ref_ts)
    found: dict[tuple[float, float], Span] = {}
    try:
        reference = datetime.fromtimestamp(ref_ts, UTC)
    except (OverflowError, OSError, ValueError):  # outside the calendar: said, but nothing to resolve against
        text = ""
    if text:
        for m in extract_times(text, reference):
            if m.confidence < min_confidence:
                continue
            key = (m.start.timestamp(), m.end.timestamp())
            old = found.get(key)
            if old is None or m.confidence > old.confidence:
                found[key] = Span(key[0], key[1], "mentioned", float(m.confidence), m.text)
    return [*found.values(), Span(ref_ts, ref_ts, "said", 1.0)]



@dataclass(frozen=True)
class _Stats:
    version: int
    n_records: int
    n_spans: int
    max_rid: int


def _read_stats(conn: Connection, ns_id: int) -> _Stats | None:
    row = conn.execute(sql_of(conn).timeindex.stats, (ns_id,)).fetchone()
    return None if row is None else _Stats(int(row[0]), int(row[1]), int(row[2]), int(row[3]))


class TimeSnapshot:
    """An in-memory copy of one namespace's spans, so that recall runs without SQL (see :meth:`TimeIndex.snapshot`).

    Parallel arrays, one entry per span, sorted by ``rid`` (so the spans of one record are contiguous):
    ``rid`` (int64), ``start`` / ``end`` (float64, UTC epoch seconds), ``mentioned`` (bool; False = "said"),
    ``confidence`` (float64). Never changed once published.
    """

    __slots__ = ("confidence", "end", "max_rid", "mentioned", "n_records", "n_spans", "rid", "start", "version")

    def __init__(self, stats: _Stats, rid: np.ndarray, start: np.ndarray, end: np.ndarray, mentioned: np.ndarray,
                 confidence: np.ndarray) -> None:
        self.version, self.n_records, self.n_spans, self.max_rid = (
            stats.version, stats.n_records, stats.n_spans, stats.max_rid)
        self.rid, self.start, self.end, self.mentioned, self.confidence = rid, start, end, mentioned, confidence

    @staticmethod
    def _arrays(rows: list[tuple[int, float, float, int, float]]) -> tuple[np.ndarray, ...]:
        arr = np.array(rows, np.float64).reshape(-1, 5)
        return (arr[:, 0].astype(np.int64), np.ascontiguousarray(arr[:, 1]), np.ascontiguousarray(arr[:, 2]),
                arr[:, 3] != 0, np.ascontiguousarray(arr[:, 4]))

    @classmethod
    def load(cls, conn: Connection, ns_id: int, stats: _Stats) -> TimeSnapshot:
        """Read every span of ``ns_id`` (call inside one read transaction)."""
        return cls(stats, *cls._arrays(conn.execute(sql_of(conn).timeindex.spans_after, (ns_id, -1)).fetchall()))

    def matches(self, stats: _Stats) -> bool:
        return (self.version == stats.version and self.n_records == stats.n_records
                and self.n_spans == stats.n_spans and self.max_rid == stats.max_rid)

    def extended(self, conn: Connection, ns_id: int, stats: _Stats) -> TimeSnapshot | None:
        """This snapshot plus the records added since (same ``version``), or None when a full load is due
        (a delete, or new records that are not all above ``max_rid``)."""
        if stats.version != self.version:
            return None
        rows = conn.execute(sql_of(conn).timeindex.spans_after, (ns_id, self.max_rid)).fetchall()
        rid, start, end, mentioned, conf = self._arrays(rows)
        n_new = len(np.unique(rid))
        if self.n_records + n_new != stats.n_records or self.n_spans + len(rows) != stats.n_spans:
            return None
        return TimeSnapshot(stats, np.concatenate([self.rid, rid]), np.concatenate([self.start, start]),
                            np.concatenate([self.end, end]), np.concatenate([self.mentioned, mentioned]),
                            np.concatenate([self.confidence, conf]))

    @property
    def stats(self) -> _Stats:
        return _Stats(self.version, self.n_records, self.n_spans, self.max_rid)

    def overlapping(self, start: float, end: float) -> np.ndarray:
        """Indexes (ascending, so grouped by rid) of the spans meeting the window ``[start, end)``: a span
        ``[a, b)`` with ``a < end and b > start``, a point ``a`` with ``start <= a < end``."""
        s, e = self.start, self.end
        return np.flatnonzero((s < end) & ((e > start) | (s >= start)))


class TimeIndex(CachedIndex["TimeSnapshot"]):
    """Per-namespace time spans of records (see the module docstring for the tables).

    Writes (:meth:`add`, :meth:`remove`, :meth:`drop_namespace`) run inside the caller's open transaction and
    never commit; after a rollback call :meth:`invalidate`. Reads take any connection (normally the store's
    per-thread reader) and may run from several threads.
    """

    name = "time"

    def __init__(self, *, min_confidence: float = DEFAULT_MIN_CONFIDENCE) -> None:
        if not 0.0 <= min_confidence <= 1.0:
            raise ConfigError("time_index.min_confidence", min_confidence, "must be between 0 and 1")
        super().__init__()
        self.min_confidence = float(min_confidence)

    # ----------------------------------------------------------------------------------------- writes

    @staticmethod
    def create_schema(conn: Connection) -> None:
        """Create the ``time_`` tables and index if they do not exist (no commit)."""
        for statement in sql_of(conn).timeindex.schema:
            conn.execute(statement)

    def spans_of(self, text: str, ref_ts: float | None) -> list[Span]:
        """The spans this index keeps for a record (:func:`record_spans` at its ``min_confidence``); the write
        pipeline calls it once per record."""
        return record_spans(text, ref_ts, min_confidence=self.min_confidence)

    def index(self, conn: Connection, ns_id: int, batch: RecordBatch) -> None:
        """Store the spans the write pipeline derived for the batch's records."""
        self.add(conn, ns_id, [(r.rid, r.time_spans) for r in batch.records if r.time_spans is not None])

    def add(self, conn: Connection, ns_id: int, items: Sequence[tuple[int, Sequence[Span]]]) -> None:
        """Index records ``(rid, spans)`` inside the CALLER's open transaction (never commit).

        Re-adding a rid already indexed in ``ns_id`` replaces its spans (within one call the last wins). A record
        without spans writes nothing.
        """
        latest: dict[int, list[Span]] = {int(rid): list(spans) for rid, spans in items}
        if not latest:
            return
        remove_indexed(conn, "time_spans", ns_id, sorted(latest), self.remove)
        latest = {rid: spans for rid, spans in latest.items() if spans}
        if not latest:
            return
        rows = [(ns_id, rid, s.start, s.end, s.source, s.confidence, s.expr)
                for rid, spans in latest.items() for s in spans]
        sql = sql_of(conn).timeindex
        conn.executemany(sql.insert_span, rows)
        max_rid = max(latest)
        cur = conn.execute(sql.add_stats, (len(latest), len(rows), max_rid, ns_id))
        if cur.rowcount == 0:
            conn.execute(sql.insert_stats, (ns_id, len(latest), len(rows), max_rid))

    def remove(self, conn: Connection, ns_id: int, rids: Sequence[int]) -> None:
        """Delete the spans of records ``rids`` of ``ns_id`` inside the caller's transaction (unknown rids are
        ignored)."""
        wanted = sorted({int(r) for r in rids})
        n_records = n_spans = 0
        statements = sql_of(conn)
        sql = statements.timeindex
        for part in chunks(wanted):
            ids = statements.marks(len(part))
            row = conn.execute(sql.count_spans.format(ids=ids), (ns_id, *part)).fetchone()
            if row[1]:
                n_records += int(row[0])
                n_spans += int(row[1])
                conn.execute(sql.delete_spans.format(ids=ids), (ns_id, *part))
        if not n_spans:
            return
        conn.execute(sql.remove_stats, (n_records, n_spans, ns_id))
        self.invalidate(ns_id)

    def drop_namespace(self, conn: Connection, ns_id: int) -> None:
        """Delete every span of ``ns_id`` inside the caller's transaction.

        The ``time_stats`` row stays (zeroed, with a new version) so that other processes holding a cached
        snapshot notice the drop.
        """
        sql = sql_of(conn).timeindex
        conn.execute(sql.drop_spans, (ns_id,))
        conn.execute(sql.drop_stats, (ns_id,))
        self.invalidate(ns_id)

    # ------------------------------------------------------------------------------------------ reads

    def record_count(self, conn: Connection, ns_id: int) -> int:
        """Number of records of ``ns_id`` with at least one span."""
        stats = _read_stats(conn, ns_id)
        return 0 if stats is None else stats.n_records

    def spans(self, conn: Connection, ns_id: int,
              rid: int) -> list[tuple[float, float, Source, float, str | None]]:
        """``(start_ts, end_ts, source, confidence, expr)`` of record ``rid`` of ``ns_id``, by start time."""
        return [(float(s), float(e), src, float(c), x) for s, e, src, c, x in conn.execute(
            sql_of(conn).timeindex.record_spans, (ns_id, int(rid)))]

    def snapshot(self, conn: Connection, ns_id: int) -> TimeSnapshot | None:
        """The in-memory :class:`TimeSnapshot` of ``ns_id`` as ``conn`` sees it (None: nothing indexed yet).

        Unchanged -> one SQL statement; only records added -> their spans are read and appended; a delete
        (or a rid added out of order) -> reloaded whole. Reads run in one read transaction.
        """
        return self._synced(conn, ns_id, _read_stats, TimeSnapshot.load)
