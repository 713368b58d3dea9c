"""Evidence nodes: small, named facets of records (who, what kind, when), persisted in SQLite per namespace.

Every record is posted under a handful of *evidence nodes*, each named by a key:

* ``e:<entity key>`` -- an entity the record names (:func:`memory_ext.text.entity_keys.record_entities`, normalised by
  :func:`memory_ext.text.entity_keys.entity_key`; a named speaker counts);
* ``t:<tag>`` -- a content tag of the record (:func:`memory_ext.text.entities.extract_tags`, without
  ``question``: almost every query is one, so it would match everything);
* ``et:<entity key>|<tag>`` -- an entity with a tag of the same record ("Ana" x ``preference``);
* ``d:YYYY-MM-DD`` / ``m:YYYY-MM`` -- the record's own day and month (from ``ref_ts``, UTC), plus the days and
  months its time expressions resolve to (:func:`memory_ext.text.timeexpr.extract_times`, confidence >= 0.5):
  a span of at most 7 days gives its days and their months, a span of at most 92 days its months only,
  anything longer (a year) nothing;
* ``ev:<entity key>|<day>`` -- an *event frame*: an entity named by the record or by one of its +-1 neighbours
  of the same session, on the record's own day or a day that the record's or those neighbours' time
  expressions name (spans of at most 3 days, resolved against the record's time). At most
  :data:`MAX_FRAME_ENTITIES` x :data:`MAX_FRAME_DAYS` frames per record.

Storage (tables prefixed ``evidence_``; written inside the caller's transaction, never committed here)::

    evidence_nodes(nid INTEGER PRIMARY KEY AUTOINCREMENT, ns_id, key, n_records)   UNIQUE(ns_id, key)
        one row per node of a namespace, ``n_records`` its document frequency. A node whose last record is
        removed is deleted with its key (forgetting removes the text a key carries).
    evidence_postings(pid INTEGER PRIMARY KEY AUTOINCREMENT, ns_id, rid, nid)   UNIQUE(ns_id, rid, nid)
        node -> record; ``pid`` grows with every write, so a reader can fetch just the postings written since.
    evidence_stats(ns_id PRIMARY KEY, version, last_pid, n_records)
        ``version`` is bumped by every delete, ``last_pid`` is the newest posting id when the namespace was last
        written, ``n_records`` the number of records with at least one node.

Recall reads none of the tables per call: :meth:`EvidenceIndex.snapshot` keeps a per-namespace in-memory
:class:`EvidenceSnapshot` (key -> node index, postings per node as a CSR array of record indexes, document
frequencies), synced from ``evidence_stats`` at every call: unchanged -> one SQL statement; only records added
-> just the new postings and nodes are read and appended; a delete (or a large delta) -> reloaded whole.

Every statement carries ``ns_id``: one namespace never reads or changes another's rows.

>>> import sqlite3
>>> conn = sqlite3.connect(":memory:")
>>> EvidenceIndex.create_schema(conn)
>>> index = EvidenceIndex()
>>> from memory_ext.ingest.evidence_keys import node_keys
>>> index.add(conn, 1, [(7, node_keys("I love playing tennis.", speaker="Ana", ref_ts=1683554160.0))])
>>> index.nodes_of(conn, 1, 7)
['d:2023-05-08', 'e:ana', 'et:ana|preference', 'ev:ana|2023-05-08', 'm:2023-05', 't:preference']
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from datetime import date, timedelta
from typing import Final

import numpy as np

from ..text.entity_keys import key_extent, match_known
from .base import CachedIndex, RecordBatch
from .interface import Connection
from .snapshots import chunks, remove_indexed
from .statements import sql_of

__all__ = [
    "KINDS",
    "EvidenceIndex",
    "EvidenceSnapshot",
    "EvidenceSql",
    "day_key",
    "month_key",
    "span_days",
    "span_months",
]

#: Node kinds, by key prefix.
KINDS: Final = ("e", "t", "et", "d", "m", "ev")
#: Tags never indexed (a query is nearly always a question: the node would match everything).
SKIP_TAGS: Final = frozenset({"question"})


def day_key(d: date) -> str:
    """``d:YYYY-MM-DD``."""
    return f"d:{d.isoformat()}"


def month_key(d: date) -> str:
    """``m:YYYY-MM``."""
    return f"m:{d.year:04d}-{d.month:02d}"


def span_days(start: date, end: date) -> list[date]:
    """The days of the half-open span ``[start, end)`` (at least ``start``)."""
    n = max((end - start).days, 1)
    return [start + timedelta(days=i) for i in range(n)]


def span_months(start: date, end: date) -> list[date]:
    """The first day of each month the half-open span ``[start, end)`` touches."""
    last = max(end - timedelta(days=1), start)
    out: list[date] = []
    y, m = start.year, start.month
    while (y, m) <= (last.year, last.month):
        out.append(date(y, m, 1))
        y, m = (y + 1, 1) if m == 12 else (y, m + 1)
    return out



_MIN_DELTA: Final = 4096  # postings appended to a snapshot before it is rebuilt from the tables

@dataclass(frozen=True)
class EvidenceSql:
    """The statements of the ``evidence_`` tables, as each backend writes them
    (:mod:`memory_ext.store.statements`). ``{ids}`` templates take
    :meth:`~memory_ext.store.statements.Statements.marks` of the list's length."""

    schema: tuple[str, ...]
    """The three ``evidence_`` tables and the postings index (``IF NOT EXISTS``)."""
    stats: str
    """``(ns_id,)`` -> ``version, last_pid, n_records``."""
    nodes: str
    """``(ns_id,)`` -> ``nid, key`` of every node, by nid."""
    postings: str
    """``(ns_id,)`` -> ``nid, rid`` of every posting."""
    postings_after: str
    """``(pid, ns_id)`` -> ``rid, nid`` of the later postings, by pid."""
    nodes_after: str
    """``(nid, ns_id)`` -> ``nid, key`` of the later nodes, by nid."""
    node_keys: str
    """``{ids}`` template, ``(ns_id, *nids)`` -> ``nid, key``."""
    upsert_node: str
    """``(ns_id, key, n_records)``: a new node, or ``n_records`` added."""
    node_ids: str
    """``{ids}`` template, ``(ns_id, *keys)`` -> ``nid, key``."""
    insert_posting: str
    """``(ns_id, rid, nid)`` (``executemany``)."""
    last_pid: str
    """-> the highest posting id (of every namespace)."""
    add_stats: str
    """``(n_records, last_pid, ns_id)``: records added to the counters."""
    insert_stats: str
    """``(ns_id, last_pid, n_records)``: the namespace's first counters (version 0)."""
    record_postings: str
    """``{ids}`` template, ``(ns_id, *rids)`` -> ``rid, nid``."""
    delete_record_postings: str
    """``{ids}`` template, ``(ns_id, *rids)``."""
    subtract_node: str
    """``(n_records, ns_id, nid)`` (``executemany``)."""
    delete_empty_nodes: str
    """``{ids}`` template, ``(ns_id, *nids)``: those of the nodes left without records."""
    remove_stats: str
    """``(n_records, ns_id)``: records removed from the counters, a new version."""
    drop_postings: str
    """``(ns_id,)``."""
    drop_nodes: str
    """``(ns_id,)``."""
    drop_stats: str
    """``(ns_id,)``: the counters zeroed, a new version."""
    entity_keys: str
    """``(ns_id,)`` -> the keys of the ``e:`` nodes."""
    record_nodes: str
    """``(ns_id, rid)`` -> the node keys of one record."""
    node_counts: str
    """``{ids}`` template, ``(ns_id, *keys)`` -> ``key, n_records``."""


# ------------------------------------------------------------------------------------------ SQL helpers



@dataclass(frozen=True)
class _Stats:
    version: int
    last_pid: int
    n_records: int


def _read_stats(conn: Connection, ns_id: int) -> _Stats | None:
    row = conn.execute(sql_of(conn).evidence.stats, (ns_id,)).fetchone()
    return None if row is None else _Stats(int(row[0]), int(row[1]), int(row[2]))


def _csr(rows: np.ndarray, size: int) -> np.ndarray:
    ptr = np.zeros(size + 1, np.int64)
    np.cumsum(np.bincount(rows, minlength=size), out=ptr[1:])
    return ptr


_NO_I: Final = np.zeros(0, np.int64)


# -------------------------------------------------------------------------------------------- snapshot


class EvidenceSnapshot:
    """An in-memory copy of one namespace's evidence nodes (see :meth:`EvidenceIndex.snapshot`).

    Nodes are numbered densely (``idx``, in nid order; ``index`` maps key -> idx), records (``ridx``) in rid order
    (``rids[ridx]``). Never changed once published (a sync makes a new one), so any number of threads may read it.
    Postings are a CSR *base* loaded from the tables plus a *delta* per node of the records appended since.
    """

    __slots__ = (
        "_delta",
        "_n_delta",
        "_ptr",
        "_rec",
        "df",
        "index",
        "keys",
        "last_nid",
        "last_pid",
        "max_cjk",
        "max_tokens",
        "n_records",
        "rids",
        "version",
    )
    _ptr: np.ndarray
    _rec: np.ndarray
    df: np.ndarray
    index: dict[str, int]
    keys: list[str]
    last_nid: int
    last_pid: int
    n_records: int
    rids: np.ndarray
    version: int

    def __init__(self) -> None:
        self._delta: dict[int, np.ndarray] = {}
        self._n_delta = 0
        self.max_tokens = 1
        self.max_cjk = 0

    def _set_stats(self, stats: _Stats) -> None:
        self.version, self.last_pid, self.n_records = stats.version, stats.last_pid, stats.n_records

    def matches(self, stats: _Stats) -> bool:
        return (self.version == stats.version and self.last_pid == stats.last_pid
                and self.n_records == stats.n_records)

    def _note_keys(self, keys: Iterable[str]) -> None:
        ents = (key[2:] for key in keys if key.startswith("e:"))
        self.max_tokens, self.max_cjk = key_extent(ents, self.max_tokens, self.max_cjk)

    @classmethod
    def load(cls, conn: Connection, ns_id: int, stats: _Stats) -> EvidenceSnapshot:
        """Read all nodes and postings of ``ns_id`` (call inside one read transaction)."""
        snap = cls()
        sql = sql_of(conn).evidence
        nodes = conn.execute(sql.nodes, (ns_id,)).fetchall()
        nids = np.fromiter((r[0] for r in nodes), np.int64, len(nodes))
        snap.keys = [r[1] for r in nodes]
        snap.index = {k: i for i, k in enumerate(snap.keys)}
        snap.last_nid = int(nids[-1]) if len(nids) else 0
        snap._note_keys(snap.keys)
        rows = conn.execute(sql.postings, (ns_id,)).fetchall()
        arr = np.array(rows, np.int64).reshape(-1, 2)
        pos = np.searchsorted(nids, arr[:, 0])
        ok = pos < len(nids)
        ok[ok] = nids[pos[ok]] == arr[ok, 0]
        node, rid = pos[ok], arr[ok, 1]
        snap.rids, rec = np.unique(rid, return_inverse=True)
        rec = rec.reshape(-1).astype(np.int64, copy=False)
        order = np.lexsort((rec, node))
        snap._ptr, snap._rec = _csr(node[order], len(nids)), rec[order]
        snap.df = np.bincount(node, minlength=len(nids)).astype(np.int64)
        snap._set_stats(stats)
        return snap

    def extended(self, conn: Connection, ns_id: int, stats: _Stats) -> EvidenceSnapshot | None:
        """This snapshot plus the postings written since (same ``version``), or None when a full load is due
        (a delete, a record added with a rid below the newest one loaded, a large delta)."""
        if stats.version != self.version or stats.last_pid < self.last_pid:
            return None
        statements = sql_of(conn)
        sql = statements.evidence
        rows = conn.execute(sql.postings_after, (self.last_pid, ns_id)).fetchall()
        n_delta = self._n_delta + len(rows)
        if n_delta > max(_MIN_DELTA, len(self._rec) // 4):
            return None
        new_rids = sorted({int(r) for r, _ in rows})
        if (self.n_records + len(new_rids) != stats.n_records
                or (new_rids and len(self.rids) and new_rids[0] <= int(self.rids[-1]))):
            return None
        nodes = conn.execute(sql.nodes_after, (self.last_nid, ns_id)).fetchall()
        snap = EvidenceSnapshot()
        snap._ptr, snap._rec = self._ptr, self._rec
        snap.max_tokens, snap.max_cjk = self.max_tokens, self.max_cjk
        if nodes:
            snap.keys = [*self.keys, *(k for _, k in nodes)]
            snap.index = dict(self.index)
            snap.index.update((k, len(self.keys) + i) for i, (_, k) in enumerate(nodes))
            snap.last_nid = int(nodes[-1][0])
            snap._note_keys(k for _, k in nodes)
        else:
            snap.keys, snap.index, snap.last_nid = self.keys, self.index, self.last_nid
        # nid -> idx for the nodes this delta touches (old ones by key lookup, read once)
        idx_of = {int(n): len(self.keys) + i for i, (n, _) in enumerate(nodes)}
        missing = sorted({int(n) for _, n in rows} - idx_of.keys())
        for part in chunks(missing):
            for nid, key in conn.execute(sql.node_keys.format(ids=statements.marks(len(part))), (ns_id, *part)):
                i = self.index.get(key)
                if i is not None:
                    idx_of[int(nid)] = i
        ridx_of = {r: len(self.rids) + i for i, r in enumerate(new_rids)}
        added: dict[int, list[int]] = defaultdict(list)
        for rid, nid in rows:
            i = idx_of.get(int(nid))
            if i is None:
                return None  # a posting without its node: the tables moved on, reload
            added[i].append(ridx_of[int(rid)])
        df = np.zeros(len(snap.keys), np.int64)
        df[: len(self.df)] = self.df
        delta = dict(self._delta)
        for i, recs in added.items():
            arr = np.array(sorted(recs), np.int64)
            df[i] += len(arr)
            old = delta.get(i)
            delta[i] = arr if old is None else np.concatenate([old, arr])
        snap.df, snap._delta, snap._n_delta = df, delta, n_delta
        snap.rids = np.concatenate([self.rids, np.array(new_rids, np.int64)]) if new_rids else self.rids
        snap._set_stats(stats)
        return snap

    # ------------------------------------------------------------------------------------------- reads

    @property
    def size(self) -> int:
        """Number of nodes."""
        return len(self.keys)

    def postings(self, idx: int) -> np.ndarray:
        """ridxs of the records posted under node ``idx``, ascending."""
        base = self._rec[int(self._ptr[idx]) : int(self._ptr[idx + 1])] if idx + 1 < len(self._ptr) else _NO_I
        extra = self._delta.get(idx)
        return base if extra is None else np.concatenate([base, extra])

    def postings_many(self, idxs: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`postings` of several nodes, concatenated in their order, and how many each has."""
        parts = [self.postings(i) for i in idxs]
        if not parts:
            return _NO_I, _NO_I
        return np.concatenate(parts), np.fromiter((len(p) for p in parts), np.int64, len(parts))

    def idf(self, idxs: Sequence[int]) -> np.ndarray:
        """``log(1 + N / df)`` of the nodes ``idxs`` (``N`` = records with a node, at least 1)."""
        n = float(max(self.n_records, 1))
        return np.log1p(n / np.maximum(self.df[np.asarray(idxs, np.int64)], 1))

    def record_index(self, rids: Collection[int]) -> np.ndarray:
        """A mask over ridxs of the records among ``rids``."""
        n = len(self.rids)
        mask = np.zeros(n, bool)
        if not n or len(rids) == 0:  # (``rids`` may be a numpy array: no truth value)
            return mask
        wanted = np.fromiter((int(r) for r in rids), np.int64, len(rids))
        pos = np.minimum(np.searchsorted(self.rids, wanted), n - 1)
        mask[pos[self.rids[pos] == wanted]] = True
        return mask

    def match_entities(self, text: str) -> list[str]:
        """The known entity keys (without ``e:``) ``text`` names, in order of mention: runs of whole tokens
        (case-insensitive, possessives ignored) or, for CJK keys, substrings; overlapping matches: the longer
        wins (as :meth:`~memory_ext.store.graph.EntityGraph.match`)."""
        if not text or not text.strip():
            return []
        index = self.index
        return match_known(text, lambda key: key if "e:" + key in index else None, self.max_tokens, self.max_cjk)


# -------------------------------------------------------------------------------------------- the index


class EvidenceIndex(CachedIndex["EvidenceSnapshot"]):
    """Per-namespace evidence nodes (see the module docstring for keys and tables).

    Writes (:meth:`add`, :meth:`remove`, :meth:`drop_namespace`) run inside the caller's open transaction and
    never commit; after a rollback call :meth:`invalidate`. Reads take any connection and may run from several
    threads.
    """

    name = "evidence"

    @staticmethod
    def create_schema(conn: Connection) -> None:
        """Create the ``evidence_`` tables and indexes if they do not exist (no commit)."""
        for statement in sql_of(conn).evidence.schema:
            conn.execute(statement)

    # ------------------------------------------------------------------------------------------ writes

    def index(self, conn: Connection, ns_id: int, batch: RecordBatch) -> None:
        """Store the node keys the write pipeline derived for the batch's records."""
        self.add(conn, ns_id, [(r.rid, r.evidence_keys) for r in batch.records if r.evidence_keys is not None])

    def add(self, conn: Connection, ns_id: int, items: Sequence[tuple[int, Sequence[str]]]) -> None:
        """Index records ``(rid, node keys)`` inside the CALLER's open transaction (never commits).

        The keys come from :func:`memory_ext.ingest.evidence_keys.window_keys`. Re-adding a rid already indexed
        replaces its nodes (within one call the last wins); a record without any node writes nothing.
        """
        if not items:
            return
        latest: dict[int, list[str]] = {int(rid): list(keys) for rid, keys in items}
        remove_indexed(conn, "evidence_postings", ns_id, list(latest), self.remove)
        latest = {rid: keys for rid, keys in latest.items() if keys}
        if not latest:
            return
        df = Counter(k for keys in latest.values() for k in keys)
        statements = sql_of(conn)
        sql = statements.evidence
        conn.executemany(sql.upsert_node, [(ns_id, k, n) for k, n in df.items()])
        nid_of: dict[str, int] = {}
        for part in chunks(list(df)):
            for nid, key in conn.execute(sql.node_ids.format(ids=statements.marks(len(part))), (ns_id, *part)):
                nid_of[key] = int(nid)
        conn.executemany(sql.insert_posting, [(ns_id, rid, nid_of[k]) for rid in sorted(latest) for k in latest[rid]])
        last_pid = int(conn.execute(sql.last_pid).fetchone()[0])
        cur = conn.execute(sql.add_stats, (len(latest), last_pid, ns_id))
        if cur.rowcount == 0:
            conn.execute(sql.insert_stats, (ns_id, last_pid, len(latest)))

    def remove(self, conn: Connection, ns_id: int, rids: Sequence[int]) -> None:
        """Delete the records ``rids`` of ``ns_id`` inside the caller's transaction; nodes left without a record
        are deleted with their keys. Unknown rids are ignored."""
        wanted = sorted({int(r) for r in rids})
        gone: set[int] = set()
        df: Counter[int] = Counter()
        statements = sql_of(conn)
        sql = statements.evidence
        marks = statements.marks
        for part in chunks(wanted):
            for rid, nid in conn.execute(sql.record_postings.format(ids=marks(len(part))), (ns_id, *part)):
                gone.add(int(rid))
                df[int(nid)] += 1
        if not gone:
            return
        for part in chunks(sorted(gone)):
            conn.execute(sql.delete_record_postings.format(ids=marks(len(part))), (ns_id, *part))
        conn.executemany(sql.subtract_node, [(n, ns_id, nid) for nid, n in df.items()])
        for part in chunks(sorted(df)):
            conn.execute(sql.delete_empty_nodes.format(ids=marks(len(part))), (ns_id, *part))
        conn.execute(sql.remove_stats, (len(gone), ns_id))
        self.invalidate(ns_id)

    def drop_namespace(self, conn: Connection, ns_id: int) -> None:
        """Delete every node and posting of ``ns_id`` inside the caller's transaction (the stats row stays,
        zeroed with a new version, so other processes holding a snapshot notice)."""
        sql = sql_of(conn).evidence
        conn.execute(sql.drop_postings, (ns_id,))
        conn.execute(sql.drop_nodes, (ns_id,))
        conn.execute(sql.drop_stats, (ns_id,))
        self.invalidate(ns_id)

    # ------------------------------------------------------------------------------------------- reads

    @staticmethod
    def known_entities(conn: Connection, ns_id: int) -> set[str]:
        """The entity keys of ``ns_id`` (from its ``e:`` nodes)."""
        rows = conn.execute(sql_of(conn).evidence.entity_keys, (ns_id,))
        return {r[0][2:] for r in rows}

    @staticmethod
    def record_count(conn: Connection, ns_id: int) -> int:
        """Number of records of ``ns_id`` with at least one node."""
        stats = _read_stats(conn, ns_id)
        return 0 if stats is None else stats.n_records

    @staticmethod
    def nodes_of(conn: Connection, ns_id: int, rid: int) -> list[str]:
        """The node keys of record ``rid`` of ``ns_id``, sorted."""
        return sorted(r[0] for r in conn.execute(sql_of(conn).evidence.record_nodes, (ns_id, int(rid))))

    @staticmethod
    def node_info(conn: Connection, ns_id: int, keys: Sequence[str]) -> dict[str, int]:
        """key -> number of records, for the nodes of ``ns_id`` among ``keys``."""
        out: dict[str, int] = {}
        statements = sql_of(conn)
        for part in chunks(list(dict.fromkeys(keys))):
            for key, n in conn.execute(statements.evidence.node_counts.format(ids=statements.marks(len(part))),
                                       (ns_id, *part)):
                out[key] = int(n)
        return out

    def snapshot(self, conn: Connection, ns_id: int) -> EvidenceSnapshot | None:
        """The in-memory :class:`EvidenceSnapshot` of ``ns_id`` as ``conn`` sees it (None: nothing indexed yet).

        Unchanged -> one SQL statement; only records added -> their postings and new nodes are read and
        appended; a delete (or a rid out of order, or a large delta) -> reloaded whole, in one read transaction.
        """
        return self._synced(conn, ns_id, _read_stats, EvidenceSnapshot.load)
