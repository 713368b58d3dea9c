"""Entity co-occurrence graph, persisted in SQLite, one independent graph per namespace.

Nodes are the entities named in records (people, places, titles... as found by
:func:`memory_ext.text.entities.extract_entities`); two entities are joined by an edge when one record names
both. The graph lets recall follow a relation the query does not spell out: "What does Ana's brother do?"
reaches "Marco works as a chef" through the record "Ana: my brother Marco is visiting".

Storage (tables prefixed ``graph_``; written inside the caller's transaction, never committed here)::

    graph_entities(eid INTEGER PRIMARY KEY AUTOINCREMENT, ns_id, key, name, n_records)   UNIQUE(ns_id, key)
        one row per entity of a namespace: ``key`` is the normalised name (:func:`entity_key`: NFKC, casefold,
        possessives and punctuation stripped), ``name`` the first spelling seen, ``n_records`` the number of
        records naming it (its document frequency).
    graph_postings(ns_id, eid, rid, ts)   PRIMARY KEY(ns_id, eid, rid), INDEX(ns_id, rid)
        entity -> record; ``ts`` is the record's time (``ref_ts``), NULL when unknown.
    graph_edges(ns_id, a, b, count, last_ts)   PRIMARY KEY(ns_id, a, b) with a < b, INDEX(ns_id, b)
        co-occurrence: ``count`` records name both entities, the latest of them at ``last_ts``.
    graph_stats(ns_id PRIMARY KEY, version, last_eid, n_records, max_ts)
        per-namespace counters: ``n_records`` records have at least one entity, ``max_ts`` is the newest
        posting time; ``version`` is bumped by every delete; ``last_eid`` is the highest entity id written.

Edge weight (:meth:`EntityGraph.neighbours`) is ``count * 0.5 ** (age / half_life)`` where ``age`` is the time
from the edge's ``last_ts`` to ``now`` (by default the namespace's newest posting, so an old store is not
uniformly "stale"): a pair named together often and recently weighs most. An edge or a reference time that is
unknown (NULL) gets recency factor 1.

Query side, :meth:`EntityGraph.match` finds the known entities a text names: the entities
:func:`extract_entities` finds in it, plus every known key that occurs as a run of whole tokens
(case-insensitive; possessive "Ana's" matches "Ana") or, for keys written in CJK characters, as a substring
(李明 in 李明的哥哥). Where two matches overlap the longer wins ("Berlin Marathon" over "Berlin"). Keys are looked
up in a per-namespace in-memory dict (n-grams of the text's tokens and CJK substrings, so the cost depends on the
text's length, not on the number of entities), synced from ``graph_stats`` at every call like the keyword
index: nothing changed -> no further SQL; only new entities -> load just those; a delete -> reload.

Recall reads none of the tables per call: :meth:`EntityGraph.snapshot` keeps a per-namespace in-memory
:class:`GraphSnapshot` (numpy arrays: postings per entity newest first, weighted adjacency, document
frequencies, names), synced from ``graph_stats`` the same way: unchanged -> one SQL statement; only records
added -> their postings are read and appended (edges derived from them as :meth:`EntityGraph.add` does);
a delete -> rebuilt whole.

Every statement carries ``ns_id``: one namespace never reads or changes another's rows.

>>> import sqlite3
>>> conn = sqlite3.connect(":memory:")
>>> EntityGraph.create_schema(conn)
>>> graph = EntityGraph()
>>> graph.add(conn, 1, [(10, ["Ana", "Marco"], 0.0), (11, ["Marco", "Lisbon"], 0.0)])
>>> snap = graph.snapshot(conn, 1)
>>> [snap.names[i] for i in (snap.index[e] for e in graph.match(conn, 1, "What does Ana's brother do?"))]
['Ana']
>>> marco = snap.index[graph.match(conn, 1, "marco")[0]]
>>> sorted(snap.names[int(i)] for i in snap.neighbours(marco)[0])
['Ana', 'Lisbon']
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import numpy as np

from ..errors import ConfigError
from ..text.entities import extract_entities
from ..text.entity_keys import entity_key, key_extent, match_known, record_entities
from .base import CachedIndex, RecordBatch
from .interface import Connection
from .snapshots import SQL_CHUNK, chunks, remove_indexed
from .statements import sql_of

__all__ = ["EntityGraph", "GraphSnapshot", "GraphSql", "entity_key", "record_entities"]

_DAY_S: Final = 86_400.0


# ------------------------------------------------------------------------------------------- SQL helpers

@dataclass(frozen=True)
class GraphSql:
    """The statements of the ``graph_`` tables, as each backend writes them (:mod:`memory_ext.store.statements`).

    ``{ids}`` templates take :meth:`~memory_ext.store.statements.Statements.marks` of the list's length."""

    schema: tuple[str, ...]
    """The four ``graph_`` tables and their indexes (``IF NOT EXISTS``)."""
    stats: str
    """``(ns_id,)`` -> ``version, last_eid, n_records, max_ts``."""
    entities: str
    """``(ns_id,)`` -> ``eid, name, n_records`` of every entity, by eid."""
    postings: str
    """``(ns_id,)`` -> ``eid, rid, ts IS NULL, coalesce(ts, 0.0)`` of every posting."""
    edges: str
    """``(ns_id,)`` -> ``a, b, count, last_ts IS NULL, coalesce(last_ts, 0.0)`` of every edge."""
    postings_after: str
    """``(ns_id, rid)`` -> ``rid, eid, ts`` of the postings of later records, by rid and eid."""
    entities_after: str
    """``(ns_id, eid)`` -> ``eid, name`` of the later entities, by eid."""
    insert_posting: str
    """``(ns_id, eid, rid, ts)`` (``executemany``)."""
    upsert_edge: str
    """``(ns_id, a, b, count, last_ts)``: a new edge, or ``count`` added and ``last_ts`` the latest."""
    add_stats: str
    """``(n_records, last_eid, max_ts, max_ts, max_ts, ns_id)``: records added to the counters."""
    insert_stats: str
    """``(ns_id, last_eid, n_records, max_ts)``: the namespace's first counters (version 0)."""
    upsert_entity: str
    """``(ns_id, key, name, n_records)``: a new entity, or ``n_records`` added."""
    entity_ids: str
    """``{ids}`` template, ``(ns_id, *keys)`` -> ``eid, key``."""
    record_postings: str
    """``{ids}`` template, ``(ns_id, *rids)`` -> ``eid, rid, ts``."""
    delete_record_postings: str
    """``{ids}`` template, ``(ns_id, *rids)``."""
    subtract_edge: str
    """``(count, ns_id, a, b)`` (``executemany``)."""
    delete_empty_edges: str
    """``(ns_id,)``: the edges left with no record."""
    edge_last_ts: str
    """``(ns_id, a, b)`` -> ``last_ts``."""
    pair_last_ts: str
    """``(b, ns_id, a)`` -> the latest posting time of the records naming both ``a`` and ``b``."""
    set_edge_last_ts: str
    """``(last_ts, ns_id, a, b)``."""
    subtract_entity: str
    """``(n_records, ns_id, eid)`` (``executemany``)."""
    orphan_entities: str
    """``{ids}`` template, ``(ns_id, *eids)`` -> the eids among them left without records."""
    delete_entity_edges: str
    """``{ids}`` template (twice), ``(ns_id, *eids, *eids)``: the edges of those entities."""
    delete_entity_postings: str
    """``{ids}`` template, ``(ns_id, *eids)``."""
    delete_entities: str
    """``{ids}`` template, ``(ns_id, *eids)``."""
    max_ts: str
    """``(ns_id,)`` -> the newest posting time."""
    remove_stats: str
    """``(n_records, max_ts, ns_id)``: records removed from the counters, a new version."""
    drop_edges: str
    """``(ns_id,)``."""
    drop_postings: str
    """``(ns_id,)``."""
    drop_entities: str
    """``(ns_id,)``."""
    drop_stats: str
    """``(ns_id,)``: the counters zeroed, a new version."""
    entity_keys: str
    """``(ns_id,)`` -> ``eid, key`` of every entity."""
    entity_keys_after: str
    """``(ns_id, eid)`` -> ``eid, key`` of the later entities."""


def _max_ts(a: float | None, b: float | None) -> float | None:
    if a is None:
        return b
    return a if b is None else max(a, b)


@dataclass(frozen=True)
class _Stats:
    version: int
    last_eid: int
    n_records: int
    max_ts: float | None


def _read_stats(conn: Connection, ns_id: int) -> _Stats | None:
    row = conn.execute(sql_of(conn).graph.stats, (ns_id,)).fetchone()
    return None if row is None else _Stats(int(row[0]), int(row[1]), int(row[2]), row[3])


@dataclass
class _KeyCache:
    """The entity keys of one namespace: normalised key -> eid, and how long keys get."""

    version: int = -1
    last_eid: int = 0
    by_key: dict[str, int] = field(default_factory=dict)
    max_tokens: int = 1
    max_cjk: int = 0

    def load(self, rows: Iterable[tuple[int, str]]) -> None:
        keys = []
        for eid, key in rows:
            self.by_key[key] = int(eid)
            self.last_eid = max(self.last_eid, int(eid))
            keys.append(key)
        self.max_tokens, self.max_cjk = key_extent(keys, self.max_tokens, self.max_cjk)


_NO_I: Final = np.zeros(0, np.int64)
_NO_F: Final = np.zeros(0, np.float64)
_MIN_DELTA: Final = 4096  # postings appended to a snapshot before it is rebuilt from the tables


def _ts_key(ts: np.ndarray) -> np.ndarray:
    """Sort key for "ts DESC" as SQLite orders it: NULL (NaN here) after every time."""
    return np.where(np.isnan(ts), -np.inf, ts)


def _csr(rows: np.ndarray, size: int) -> np.ndarray:
    """Row pointers of a CSR layout whose row ids ``rows`` are sorted."""
    ptr = np.zeros(size + 1, np.int64)
    np.cumsum(np.bincount(rows, minlength=size), out=ptr[1:])
    return ptr


class GraphSnapshot:
    """An in-memory copy of one namespace's graph, so that recall runs without SQL (see :meth:`EntityGraph.snapshot`).

    Entities are numbered densely (``idx``) in eid order, records (``ridx``) in rid order (``rids[ridx]``). The
    snapshot is never changed once published (a sync makes a new one), so any number of threads may read it. It
    holds a *base* loaded from the tables (postings per entity newest first, adjacency per entity sorted by
    neighbour) plus a *delta* of the records appended since, derived from their postings the way
    :meth:`EntityGraph.add` derives edges; a delete (new ``version``) or a large delta rebuilds the base.
    """

    __slots__ = (
        "_a_cnt",
        "_a_delta",
        "_a_dst",
        "_a_ptr",
        "_a_ts",
        "_half_life_s",
        "_n_delta",
        "_nb_cache",
        "_p_delta",
        "_p_ptr",
        "_p_rec",
        "_p_ts",
        "df",
        "eids",
        "index",
        "last_eid",
        "max_ts",
        "n_records",
        "names",
        "rids",
        "version",
    )
    version: int
    n_records: int
    last_eid: int
    max_ts: float | None
    index: dict[int, int]
    """eid -> entity position"""
    eids: np.ndarray
    names: list[str]
    df: np.ndarray
    rids: np.ndarray
    _p_ptr: np.ndarray
    _p_rec: np.ndarray
    _p_ts: np.ndarray
    _a_ptr: np.ndarray
    _a_dst: np.ndarray
    _a_cnt: np.ndarray
    _a_ts: np.ndarray

    def __init__(self, half_life_s: float) -> None:
        self._half_life_s = half_life_s
        self._nb_cache: dict[tuple[int, int | None], tuple[np.ndarray, np.ndarray]] = {}
        self._p_delta: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        self._a_delta: dict[int, dict[int, tuple[int, float]]] = {}
        self._n_delta = 0

    # ------------------------------------------------------------------------------------------ build

    def _set_stats(self, stats: _Stats) -> None:
        self.version, self.n_records, self.max_ts = stats.version, stats.n_records, stats.max_ts
        self.last_eid = max(stats.last_eid, int(self.eids[-1]) if len(self.eids) else 0)

    def matches(self, stats: _Stats) -> bool:
        return (self.version == stats.version and self.n_records == stats.n_records
                and self.last_eid >= stats.last_eid and self.max_ts == stats.max_ts)

    @classmethod
    def load(cls, conn: Connection, ns_id: int, stats: _Stats, half_life_s: float) -> GraphSnapshot:
        """Read the whole graph of ``ns_id`` (call inside one read transaction)."""
        snap = cls(half_life_s)
        sql = sql_of(conn).graph
        ent = conn.execute(sql.entities, (ns_id,)).fetchall()
        snap.eids = np.fromiter((r[0] for r in ent), np.int64, len(ent))
        snap.names = [r[1] for r in ent]
        snap.df = np.fromiter((r[2] for r in ent), np.int64, len(ent))
        snap.index = dict(zip(snap.eids.tolist(), range(len(ent)), strict=True))
        n_ent = len(ent)

        rows = conn.execute(sql.postings, (ns_id,)).fetchall()
        arr = np.array(rows, np.float64).reshape(-1, 4)
        p_eid, rid = arr[:, 0].astype(np.int64), arr[:, 1].astype(np.int64)
        ts = np.where(arr[:, 2] != 0, np.nan, arr[:, 3])
        pidx = np.searchsorted(snap.eids, p_eid)
        ok = pidx < n_ent
        ok[ok] = snap.eids[pidx[ok]] == p_eid[ok]
        pidx, ts = pidx[ok], ts[ok]
        snap.rids, rec = np.unique(rid[ok], return_inverse=True)
        order = np.lexsort((-rec, -_ts_key(ts), pidx))  # per entity: ts DESC (NULL last), rid DESC
        snap._p_ptr, snap._p_rec, snap._p_ts = _csr(pidx[order], n_ent), rec[order], ts[order]

        rows = conn.execute(sql.edges, (ns_id,)).fetchall()
        arr = np.array(rows, np.float64).reshape(-1, 5)
        a = np.searchsorted(snap.eids, arr[:, 0].astype(np.int64))
        b = np.searchsorted(snap.eids, arr[:, 1].astype(np.int64))
        ok = (a < n_ent) & (b < n_ent)
        ok[ok] = (snap.eids[a[ok]] == arr[ok, 0]) & (snap.eids[b[ok]] == arr[ok, 1])
        cnt = arr[ok, 2]
        ets = np.where(arr[ok, 3] != 0, np.nan, arr[ok, 4])
        src, dst = np.concatenate([a[ok], b[ok]]), np.concatenate([b[ok], a[ok]])
        order = np.lexsort((dst, src))
        snap._a_ptr, snap._a_dst = _csr(src[order], n_ent), dst[order]
        snap._a_cnt, snap._a_ts = np.concatenate([cnt, cnt])[order], np.concatenate([ets, ets])[order]
        snap._set_stats(stats)
        return snap

    def extended(self, conn: Connection, ns_id: int, stats: _Stats) -> GraphSnapshot | None:
        """This snapshot plus the records added since (same ``version``), or None when a full load is due.

        New records are the postings with a rid above every rid loaded; if they do not account for all of
        ``stats.n_records`` (a record added with a lower rid) or the delta grew large, the caller reloads.
        """
        if stats.version != self.version:
            return None
        sql = sql_of(conn).graph
        rows = conn.execute(sql.postings_after, (ns_id, self.max_rid)).fetchall()
        by_rid: dict[int, tuple[list[int], float]] = {}
        for rid, e, ts in rows:
            got = by_rid.get(rid)
            if got is None:
                by_rid[rid] = got = ([], math.nan if ts is None else float(ts))
            got[0].append(int(e))
        n_delta = self._n_delta + len(rows)
        if (self.n_records + len(by_rid) != stats.n_records
                or n_delta > max(_MIN_DELTA, len(self._p_rec) // 4)):
            return None
        new_ent = conn.execute(sql.entities_after, (ns_id, self.last_eid)).fetchall()
        snap = GraphSnapshot(self._half_life_s)
        snap._p_ptr, snap._p_rec, snap._p_ts = self._p_ptr, self._p_rec, self._p_ts
        snap._a_ptr, snap._a_dst, snap._a_cnt, snap._a_ts = self._a_ptr, self._a_dst, self._a_cnt, self._a_ts
        if new_ent:
            snap.index = dict(self.index)
            snap.index.update((int(e), len(self.eids) + i) for i, (e, _) in enumerate(new_ent))
            snap.eids = np.concatenate([self.eids, np.array([e for e, _ in new_ent], np.int64)])
            snap.names = [*self.names, *(n for _, n in new_ent)]
        else:
            snap.index, snap.eids, snap.names = self.index, self.eids, self.names
        df = np.zeros(len(snap.eids), np.int64)
        df[: len(self.df)] = self.df
        p_new: dict[int, list[tuple[int, float]]] = defaultdict(list)
        a_delta = dict(self._a_delta)
        copied: set[int] = set()
        for ridx, (eids, ts) in enumerate(by_rid.values(), start=len(self.rids)):  # rids in ascending order
            found = [snap.index.get(e) for e in eids]
            idxs = [i for i in found if i is not None]
            if len(idxs) != len(found):
                return None  # a posting without its entity: the tables moved on, reload
            for i in idxs:
                df[i] += 1
                p_new[i].append((ridx, ts))
                if i not in copied:
                    a_delta[i] = dict(a_delta.get(i, {}))
                    copied.add(i)
            for i in idxs:
                row = a_delta[i]
                for j in idxs:
                    if j != i:
                        old = row.get(j)
                        row[j] = (1, ts) if old is None else (old[0] + 1, ts if math.isnan(old[1]) else
                                                              old[1] if math.isnan(ts) else max(old[1], ts))
        p_delta = dict(self._p_delta)
        for i, items in p_new.items():
            r = np.fromiter((x for x, _ in items), np.int64, len(items))
            t = np.fromiter((x for _, x in items), np.float64, len(items))
            prev = p_delta.get(i)
            p_delta[i] = (r, t) if prev is None else (np.concatenate([prev[0], r]), np.concatenate([prev[1], t]))
        snap.df, snap._p_delta, snap._a_delta, snap._n_delta = df, p_delta, a_delta, n_delta
        snap.rids = np.concatenate([self.rids, np.fromiter(by_rid, np.int64, len(by_rid))])
        snap._set_stats(stats)
        return snap

    # ------------------------------------------------------------------------------------------ reads

    @property
    def max_rid(self) -> int:
        return int(self.rids[-1]) if len(self.rids) else 0

    @property
    def stats(self) -> _Stats:
        """The ``graph_stats`` counters this snapshot is in sync with."""
        return _Stats(self.version, self.last_eid, self.n_records, self.max_ts)

    @property
    def size(self) -> int:
        """Number of entities."""
        return len(self.eids)

    def postings(self, idx: int, limit: int | None = None) -> np.ndarray:
        """ridxs of the records naming entity ``idx``, the ``limit`` newest (ts DESC, rid DESC) when truncated."""
        if idx + 1 < len(self._p_ptr):
            lo, hi = int(self._p_ptr[idx]), int(self._p_ptr[idx + 1])
        else:
            lo = hi = 0
        base = self._p_rec[lo:hi]
        extra = self._p_delta.get(idx)
        if extra is None:
            return base if limit is None else base[:limit]
        if limit is None or len(base) + len(extra[0]) <= limit:
            return np.concatenate([base, extra[0]])
        rid = np.concatenate([base[:limit], extra[0]])
        ts = np.concatenate([self._p_ts[lo : min(hi, lo + limit)], extra[1]])
        return rid[np.lexsort((-rid, -_ts_key(ts)))[:limit]]

    def postings_many(self, idxs: np.ndarray, limit: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`postings` of several entities, concatenated in their order, and how many each has."""
        if not len(idxs):
            return _NO_I, _NO_I
        if self._p_delta and not self._p_delta.keys().isdisjoint(idxs.tolist()):
            parts = [self.postings(i, limit) for i in idxs.tolist()]
            return np.concatenate(parts), np.array([len(p) for p in parts], np.int64)
        rows = len(self._p_ptr) - 1
        inside = idxs < rows
        lo = self._p_ptr[np.where(inside, idxs, 0)]
        lens = self._p_ptr[np.where(inside, idxs + 1, 0)] - lo
        if limit is not None:
            lens = np.minimum(lens, limit)
        ends = np.cumsum(lens)
        pos = np.arange(int(ends[-1]), dtype=np.int64) + np.repeat(lo - (ends - lens), lens)
        return self._p_rec[pos], lens

    def neighbours(self, idx: int, limit: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """``(neighbour idxs, weights)`` of entity ``idx``, heaviest first, ties by eid (at most ``limit``).

        ``weight = count * 0.5 ** ((max_ts - last_ts) / half_life)`` (1 when a time is unknown), as
        :meth:`EntityGraph.neighbours` with its default ``now``.
        """
        key = (idx, limit)
        hit = self._nb_cache.get(key)
        if hit is not None:
            return hit
        if idx + 1 < len(self._a_ptr):
            lo, hi = int(self._a_ptr[idx]), int(self._a_ptr[idx + 1])
        else:
            lo = hi = 0
        dst, cnt, ts = self._a_dst[lo:hi], self._a_cnt[lo:hi], self._a_ts[lo:hi]
        extra = self._a_delta.get(idx)
        if extra:
            d_dst = np.fromiter(extra.keys(), np.int64, len(extra))
            d_cnt = np.fromiter((c for c, _ in extra.values()), np.float64, len(extra))
            d_ts = np.fromiter((t for _, t in extra.values()), np.float64, len(extra))
            pos = np.searchsorted(dst, d_dst)
            found = pos < len(dst)
            found[found] = dst[pos[found]] == d_dst[found]
            cnt, ts = cnt.copy(), ts.copy()
            at = pos[found]
            cnt[at] += d_cnt[found]
            ts[at] = np.fmax(ts[at], d_ts[found])
            new = ~found
            dst = np.concatenate([dst, d_dst[new]])
            cnt, ts = np.concatenate([cnt, d_cnt[new]]), np.concatenate([ts, d_ts[new]])
        weight = cnt.copy()
        if self.max_ts is not None:
            old = ts < self.max_ts  # False for NaN (unknown time): recency 1
            weight[old] *= np.power(0.5, (self.max_ts - ts[old]) / self._half_life_s)
        if limit is not None and len(weight) > limit:
            kth = np.partition(weight, len(weight) - limit)[len(weight) - limit]
            cand = np.flatnonzero(weight >= kth)
            order = cand[np.lexsort((dst[cand], -weight[cand]))][:limit]
        else:
            order = np.lexsort((dst, -weight))
        out = (dst[order], weight[order])
        self._nb_cache[key] = out
        return out

    def specificity(self, idxs: np.ndarray) -> np.ndarray:
        """``log(1 + N / df) / log(1 + N)`` of the entities ``idxs`` (``N`` = records naming an entity, >= 1)."""
        n = float(max(self.n_records, 1))
        return np.log1p(n / np.maximum(self.df[idxs], 1)) / math.log1p(n)


# ---------------------------------------------------------------------------------------------- the graph


class EntityGraph(CachedIndex["GraphSnapshot"]):
    """Per-namespace entity co-occurrence graph (see the module docstring for tables and weights).

    Writes (:meth:`add`, :meth:`remove`, :meth:`drop_namespace`) run inside the caller's open transaction and
    never commit; after a rollback call :meth:`invalidate`. Reads take any connection (normally the store's
    per-thread reader) and may run from several threads.
    """

    name = "graph"

    def __init__(self, *, half_life_days: float = 30.0) -> None:
        if not half_life_days > 0:
            raise ConfigError("graph.half_life_days", half_life_days, "the edge recency half-life must be > 0 days")
        super().__init__()
        self.half_life_s = float(half_life_days) * _DAY_S
        self._keys: dict[int, _KeyCache] = {}

    def _caches(self) -> tuple[dict[int, Any], ...]:
        return (self._cache, self._keys)

    # ----------------------------------------------------------------------------------------- writes

    @staticmethod
    def create_schema(conn: Connection) -> None:
        """Create the ``graph_`` tables and indexes if they do not exist (no commit)."""
        for statement in sql_of(conn).graph.schema:
            conn.execute(statement)

    def index(self, conn: Connection, ns_id: int, batch: RecordBatch) -> None:
        """Store the entities the write pipeline extracted for the batch's records."""
        self.add(conn, ns_id, [(r.rid, r.entities, r.ref_ts) for r in batch.records if r.entities is not None])

    def add(
        self, conn: Connection, ns_id: int, items: Sequence[tuple[int, Sequence[str], float | None]]
    ) -> None:
        """Index records ``(rid, entity names, timestamp)`` inside the CALLER's open transaction (never commit).

        Upserts the entities (names equal under :func:`entity_key` are one entity), one posting per entity and
        record, and one co-occurrence per pair of the record's entities (``count + 1``, ``last_ts`` = the
        latest). Re-adding a rid already indexed in ``ns_id`` replaces its entities (within one call the last
        wins). A record without entities writes nothing.
        """
        latest: dict[int, tuple[dict[str, str], float | None]] = {}
        for rid, names, ts in items:
            keys: dict[str, str] = {}
            for name in names:
                key = entity_key(name)
                if key and key not in keys:
                    keys[key] = name.strip()
            latest[int(rid)] = (keys, None if ts is None else float(ts))
        if not latest:
            return
        remove_indexed(conn, "graph_postings", ns_id, list(latest), self.remove)
        latest = {rid: v for rid, v in latest.items() if v[0]}
        if not latest:
            return

        sql = sql_of(conn).graph
        eid_of = self._upsert_entities(conn, ns_id, latest)
        postings = [(ns_id, eid_of[k], rid, ts) for rid, (keys, ts) in latest.items() for k in keys]
        conn.executemany(sql.insert_posting, postings)

        pairs: Counter[tuple[int, int]] = Counter()
        pair_ts: dict[tuple[int, int], float | None] = {}
        for keys, ts in latest.values():
            eids = sorted({eid_of[k] for k in keys})
            for i, a in enumerate(eids):
                for b in eids[i + 1 :]:
                    pairs[a, b] += 1
                    pair_ts[a, b] = _max_ts(pair_ts.get((a, b)), ts)
        conn.executemany(sql.upsert_edge, [(ns_id, a, b, n, pair_ts[a, b]) for (a, b), n in pairs.items()])

        new_max = None
        for _, ts in latest.values():
            new_max = _max_ts(new_max, ts)
        last_eid = max(eid_of.values())
        cur = conn.execute(sql.add_stats, (len(latest), last_eid, new_max, new_max, new_max, ns_id))
        if cur.rowcount == 0:
            conn.execute(sql.insert_stats, (ns_id, last_eid, len(latest), new_max))

    @staticmethod
    def _upsert_entities(
        conn: Connection, ns_id: int, latest: Mapping[int, tuple[dict[str, str], float | None]]
    ) -> dict[str, int]:
        """Create missing entities, add the new records to ``n_records``; return key -> eid."""
        df: Counter[str] = Counter()
        display: dict[str, str] = {}
        for keys, _ in latest.values():
            for key, name in keys.items():
                df[key] += 1
                display.setdefault(key, name)
        statements = sql_of(conn)
        sql = statements.graph
        conn.executemany(sql.upsert_entity, [(ns_id, key, display[key], n) for key, n in df.items()])
        eid_of: dict[str, int] = {}
        keys_list = list(df)
        for i in range(0, len(keys_list), SQL_CHUNK):
            part = keys_list[i : i + SQL_CHUNK]
            for eid, key in conn.execute(sql.entity_ids.format(ids=statements.marks(len(part))), (ns_id, *part)):
                eid_of[key] = int(eid)
        return eid_of

    def remove(self, conn: Connection, ns_id: int, rids: Sequence[int]) -> None:
        """Delete the records ``rids`` of ``ns_id`` from the graph inside the caller's transaction.

        Their postings go; the co-occurrences they contributed are subtracted (an edge left with no record is
        deleted, a surviving edge whose latest record went gets its ``last_ts`` recomputed); entities left
        without records are deleted with their names. Unknown rids are ignored.
        """
        wanted = sorted({int(r) for r in rids})
        statements = sql_of(conn)
        sql = statements.graph
        marks = statements.marks
        by_rid: dict[int, list[tuple[int, float | None]]] = defaultdict(list)
        for part in chunks(wanted):
            for eid, rid, ts in conn.execute(sql.record_postings.format(ids=marks(len(part))), (ns_id, *part)):
                by_rid[int(rid)].append((int(eid), ts))
        if not by_rid:
            return
        df: Counter[int] = Counter()
        pairs: Counter[tuple[int, int]] = Counter()
        pair_ts: dict[tuple[int, int], float | None] = {}
        for postings in by_rid.values():
            ts = postings[0][1]
            eids = sorted(e for e, _ in postings)
            df.update(eids)
            for i, a in enumerate(eids):
                for b in eids[i + 1 :]:
                    pairs[a, b] += 1
                    pair_ts[a, b] = _max_ts(pair_ts.get((a, b)), ts)
        gone = sorted(by_rid)
        for part in chunks(gone):
            conn.execute(sql.delete_record_postings.format(ids=marks(len(part))), (ns_id, *part))

        conn.executemany(sql.subtract_edge, [(n, ns_id, a, b) for (a, b), n in pairs.items()])
        conn.execute(sql.delete_empty_edges, (ns_id,))
        for (a, b), ts in pair_ts.items():
            row = conn.execute(sql.edge_last_ts, (ns_id, a, b)).fetchone()
            if row is not None and row[0] is not None and ts is not None and ts >= row[0]:
                latest = conn.execute(sql.pair_last_ts, (b, ns_id, a)).fetchone()[0]
                conn.execute(sql.set_edge_last_ts, (latest, ns_id, a, b))

        conn.executemany(sql.subtract_entity, [(n, ns_id, eid) for eid, n in df.items()])
        orphans: list[int] = []
        for part in chunks(sorted(df)):
            orphans += [int(r[0]) for r in conn.execute(sql.orphan_entities.format(ids=marks(len(part))),
                                                        (ns_id, *part))]
        for part in chunks(orphans):
            ids = marks(len(part))
            conn.execute(sql.delete_entity_edges.format(ids=ids), (ns_id, *part, *part))
            conn.execute(sql.delete_entity_postings.format(ids=ids), (ns_id, *part))
            conn.execute(sql.delete_entities.format(ids=ids), (ns_id, *part))
        max_ts = conn.execute(sql.max_ts, (ns_id,)).fetchone()[0]
        conn.execute(sql.remove_stats, (len(by_rid), max_ts, ns_id))
        self.invalidate(ns_id)

    def drop_namespace(self, conn: Connection, ns_id: int) -> None:
        """Delete the whole graph of ``ns_id`` inside the caller's transaction.

        The ``graph_stats`` row stays (counters only, zeroed with a new version) so that other processes
        holding a cached copy notice the drop.
        """
        sql = sql_of(conn).graph
        conn.execute(sql.drop_edges, (ns_id,))
        conn.execute(sql.drop_postings, (ns_id,))
        conn.execute(sql.drop_entities, (ns_id,))
        conn.execute(sql.drop_stats, (ns_id,))
        self.invalidate(ns_id)

    # ------------------------------------------------------------------------------------------ reads

    def record_count(self, conn: Connection, ns_id: int) -> int:
        """Number of records of ``ns_id`` that name at least one entity."""
        stats = _read_stats(conn, ns_id)
        return 0 if stats is None else stats.n_records

    def reference_time(self, conn: Connection, ns_id: int) -> float | None:
        """The newest record time of ``ns_id`` (what edge recency is measured from by default)."""
        stats = _read_stats(conn, ns_id)
        return None if stats is None else stats.max_ts

    def recency(self, last_ts: float | None, now: float | None) -> float:
        """``0.5 ** (age / half_life)``, 1.0 when either time is unknown or the edge is newer than ``now``."""
        if last_ts is None or now is None or last_ts >= now:
            return 1.0
        return float(0.5 ** ((now - last_ts) / self.half_life_s))

    def match(self, conn: Connection, ns_id: int, text: str, *, stats: _Stats | None = None) -> list[int]:
        """The eids of the known entities ``text`` names (see the module docstring), without reading their names
        (an eid may be unknown to a connection that has not seen the latest write)."""
        if not text or not text.strip():
            return []
        cache = self._sync(conn, ns_id, stats)
        if cache is None or not cache.by_key:
            return []
        by_key = cache.by_key
        found = match_known(text, by_key.get, cache.max_tokens, cache.max_cjk)
        extracted = [e for e in (by_key.get(entity_key(name)) for name in extract_entities(text)) if e is not None]
        return list(dict.fromkeys([*found, *extracted]))

    def snapshot(self, conn: Connection, ns_id: int) -> GraphSnapshot | None:
        """The in-memory :class:`GraphSnapshot` of ``ns_id`` as ``conn`` sees it (None: no graph).

        Synced from ``graph_stats`` like the key cache: unchanged -> one SQL statement; only records added
        -> their postings and new entities are read and appended; a delete (or a rid out of order, or a large
        delta) -> reloaded whole. Reads run in one read transaction, so they see one state of the tables.
        """
        return self._synced(conn, ns_id, _read_stats, lambda c, n, st: GraphSnapshot.load(c, n, st, self.half_life_s))

    def _sync(self, conn: Connection, ns_id: int, stats: _Stats | None = None) -> _KeyCache | None:
        """The key cache of ``ns_id``, brought up to date with the database (``stats``: already read)."""
        if stats is None:
            stats = _read_stats(conn, ns_id)
        if stats is None:
            self.invalidate(ns_id)
            return None
        with self._lock:
            cache = self._keys.get(ns_id)
            if cache is not None and cache.version == stats.version and cache.last_eid >= stats.last_eid:
                return cache
            if cache is None or cache.version != stats.version:
                cache = _KeyCache(version=stats.version)
                rows = conn.execute(sql_of(conn).graph.entity_keys, (ns_id,))
            else:  # only appends since the last load: read the new entities
                rows = conn.execute(sql_of(conn).graph.entity_keys_after, (ns_id, cache.last_eid))
            cache.load(rows)
            cache.last_eid = max(cache.last_eid, stats.last_eid)
            self._keys[ns_id] = cache
            return cache

    def known_keys(self, conn: Connection, ns_id: int) -> Collection[str]:
        """The normalised keys of every entity of ``ns_id`` (a read-only view of the cache)."""
        cache = self._sync(conn, ns_id)
        return () if cache is None else cache.by_key.keys()
