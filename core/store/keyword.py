"""Incremental BM25 keyword index, persisted in SQLite, one independent index per namespace.

Storage (tables prefixed ``kw_``; written inside the caller's transaction, never committed here)::

    kw_docs(seq INTEGER PRIMARY KEY AUTOINCREMENT, ns_id, rid, len, terms, tfs)   UNIQUE(ns_id, rid)
        one row per indexed document: its distinct terms as 64-bit term hashes (:func:`term_hash`,
        little-endian int64 blob) and their frequencies (int32 blob); ``len`` is the token count;
        ``seq`` only ever grows.
    kw_stats(ns_id PRIMARY KEY, n_docs, total_len, last_seq, version)
        per-namespace counters; ``version`` is bumped by every delete (remove, drop, re-add).

Search runs on an in-memory copy of a namespace, loaded lazily on its first search and kept in sync at
every search by one primary-key lookup in ``kw_stats``:

* nothing changed -> no further SQL;
* only appends (``last_seq`` grew, same ``version``) -> load just the rows with a higher ``seq``;
* anything else (a delete here or in another process, a rolled-back write) -> reload the namespace.

So readers in other processes see new writes, and adding a document never rebuilds the index. In memory a
namespace is a CSR posting matrix (term -> doc positions, tf) plus a small unsorted tail of recent postings,
merged into the CSR matrix when it grows past :data:`_TAIL_MERGE`. Scores are computed with numpy over the
postings of the query terms only.

Statistics (N, avgdl, df) are per namespace: one tenant's documents never change another tenant's scores,
and no query can reach another namespace's rows.

>>> import sqlite3
>>> conn = sqlite3.connect(":memory:")
>>> KeywordIndex.create_schema(conn)
>>> index = KeywordIndex()
>>> index.add(conn, 1, [(10, "I adopted a cat named Mochi"), (11, "We went hiking in the Alps")])
>>> index.add(conn, 2, [(12, "My cat hates the vet")])
>>> [rid for rid, _ in index.search(conn, 1, "cat", k=5)]
[10]
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from hashlib import blake2b

import numpy as np
import numpy.typing as npt

from ..errors import ConfigError, InvalidQueryError
from ..text.tokenize import tokenize
from .base import CachedIndex, RecordBatch
from .interface import Connection
from .snapshots import chunks, remove_indexed
from .statements import sql_of

__all__ = ["KeywordIndex", "KeywordSql", "bm25_idf", "bm25_tf_weight", "okapi_idf_floor", "term_hash"]

_TAIL_MERGE = 65_536  # postings kept unsorted before they are merged into the CSR matrix

F64 = npt.NDArray[np.float64]


# --------------------------------------------------------------------------------------------- formulas


def bm25_idf(df: npt.ArrayLike, n_docs: int) -> F64:
    """Okapi/Robertson-Sparck Jones IDF without the +1: ``log(N - df + 0.5) - log(df + 0.5)``.

    Negative for terms in more than half of the documents. Source: Robertson & Zaragoza, "The
    Probabilistic Relevance Framework: BM25 and Beyond" (2009), eq. 3.3; the exact expression of
    ``rank_bm25.BM25Okapi._calc_idf`` (rank_bm25 0.2.2).

    >>> float(bm25_idf(1, 3).round(4))
    0.5108
    """
    d = np.asarray(df, dtype=np.float64)
    return np.log(n_docs - d + 0.5) - np.log(d + 0.5)


def okapi_idf_floor(
    df: npt.ArrayLike, n_docs: int, epsilon: float, counts: npt.ArrayLike | None = None
) -> float:
    """The value rank_bm25's BM25Okapi gives to every term whose IDF is negative: ``epsilon * mean(idf)``.

    The mean runs over the raw IDF of every term of the corpus vocabulary: ``df`` holds their document
    frequencies (zeros ignored), or, with ``counts``, the distinct df values and how many terms have each
    (a histogram: the same mean, computed in O(distinct df values)). Source: ``rank_bm25.BM25Okapi._calc_idf``
    (an ATIRE-style floor; Trotman, Puurula & Burgess, "Improvements to BM25 and Language Models Examined",
    ADCS 2014).

    >>> round(okapi_idf_floor([1, 1, 2], 3, 0.25), 4)
    0.0426
    >>> round(okapi_idf_floor([1, 2], 3, 0.25, counts=[2, 1]), 4)
    0.0426
    """
    d = np.asarray(df, dtype=np.float64)
    c = np.ones_like(d) if counts is None else np.asarray(counts, dtype=np.float64)
    keep = (d > 0) & (c > 0)
    d, c = d[keep], c[keep]
    if d.size == 0:
        return epsilon
    floor = float(epsilon * (c * bm25_idf(d, n_docs)).sum() / c.sum())
    # Deviation from rank_bm25: in a tiny corpus (two or three documents) the mean IDF itself is negative,
    # so matching a term would *lower* a score below that of a document without it. The floor stays positive.
    return floor if floor > 0 else epsilon


def bm25_tf_weight(tf: npt.ArrayLike, doc_len: npt.ArrayLike, avgdl: float, k1: float, b: float) -> F64:
    """Okapi BM25 saturated term frequency: ``tf * (k1 + 1) / (tf + k1 * (1 - b + b * dl / avgdl))``.

    Source: Robertson & Zaragoza (2009), eq. 3.15, as computed by ``rank_bm25.BM25Okapi.get_scores``.

    >>> float(bm25_tf_weight(1.0, 10, 10.0, 1.5, 0.75))
    1.0
    """
    t = np.asarray(tf, dtype=np.float64)
    norm = k1 * (1.0 - b + b * np.asarray(doc_len, dtype=np.float64) / avgdl)
    return t * (k1 + 1.0) / (t + norm)


def term_hash(term: str) -> int:
    """Stable signed 64-bit id of a term (BLAKE2b, 8 bytes): what the index stores instead of the string.

    Loading a namespace then needs no per-term Python work. Two distinct terms of one namespace share an
    id with probability about V**2 / 2**65 (3e-8 for a million distinct terms).

    >>> term_hash("cat") == term_hash("cat") != term_hash("dog")
    True
    """
    return int.from_bytes(blake2b(term.encode("utf-8"), digest_size=8).digest(), "little", signed=True)


# ------------------------------------------------------------------------------------------ SQL helpers

@dataclass(frozen=True)
class KeywordSql:
    """The statements of the ``kw_`` tables, as each backend writes them (:mod:`memory_ext.store.statements`)."""

    schema: tuple[str, ...]
    """The ``kw_docs`` and ``kw_stats`` tables and their index (``IF NOT EXISTS``)."""
    stats: str
    """``(ns_id,)`` -> ``n_docs, total_len, last_seq, version``."""
    load: str
    """``(ns_id, after_seq, up_to_seq)`` -> ``rid, len, terms, tfs`` of those documents, by ``seq``."""
    insert_doc: str
    """``(ns_id, rid, len, terms, tfs)`` (``executemany``)."""
    last_seq: str
    """``(ns_id,)`` -> the highest ``seq`` of the namespace."""
    add_stats: str
    """``(n_docs, total_len, last_seq, ns_id)``: documents added to the counters."""
    insert_stats: str
    """``(ns_id, n_docs, total_len, last_seq)``: the namespace's first counters (version 0)."""
    count_docs: str
    """``{ids}`` template, ``(ns_id, *rids)`` -> ``count, total length`` of those documents."""
    delete_docs: str
    """``{ids}`` template, ``(ns_id, *rids)``."""
    remove_stats: str
    """``(n_docs, total_len, ns_id)``: documents removed from the counters, a new version."""
    drop_docs: str
    """``(ns_id,)``: every document of the namespace."""
    drop_stats: str
    """``(ns_id,)``: the counters zeroed, a new version."""


@dataclass(frozen=True)
class _Stats:
    n_docs: int
    total_len: int
    last_seq: int
    version: int


def _read_stats(conn: Connection, ns_id: int) -> _Stats | None:
    row = conn.execute(sql_of(conn).keyword.stats, (ns_id,)).fetchone()
    return None if row is None else _Stats(int(row[0]), int(row[1]), int(row[2]), int(row[3]))


# ------------------------------------------------------------------------------------ in-memory index


def _grow(arr: np.ndarray, needed: int) -> np.ndarray:
    """Return ``arr`` or a copy with capacity >= ``needed`` (doubling); existing cells are never changed."""
    if needed <= arr.shape[0]:
        return arr
    out = np.zeros(max(needed, 2 * arr.shape[0], 64), dtype=arr.dtype)
    out[: arr.shape[0]] = arr
    return out


@dataclass
class _Snapshot:
    """What one search needs, taken under the lock; arrays in it are never mutated afterwards."""

    n_docs: int
    k1: float
    b: float
    avgdl: float
    rids: npt.NDArray[np.int64]
    dl: F64  # document length per doc position
    pos: list[npt.NDArray[np.int32]]
    tf: list[npt.NDArray[np.float32]]
    weight: list[float | F64]  # idf * query-term count: one per part, or one per posting (tail part)


@dataclass
class _NsIndex:
    """The in-memory BM25 index of one namespace (mutated only under its namespace lock)."""

    version: int = -1
    last_seq: int = 0
    n_docs: int = 0
    total_len: int = 0
    rids: npt.NDArray[np.int64] = field(default_factory=lambda: np.zeros(0, np.int64))
    dl: npt.NDArray[np.float64] = field(default_factory=lambda: np.zeros(0, np.float64))
    # term hash -> local term id: ``keys`` sorted, ``key_ids`` aligned with it
    keys: npt.NDArray[np.int64] = field(default_factory=lambda: np.zeros(0, np.int64))
    key_ids: npt.NDArray[np.int64] = field(default_factory=lambda: np.zeros(0, np.int64))
    n_terms: int = 0
    df: npt.NDArray[np.int64] = field(default_factory=lambda: np.zeros(0, np.int64))
    # CSR postings of the merged part: term id t -> pos[indptr[t]:indptr[t+1]], tf[...]
    indptr: npt.NDArray[np.int64] = field(default_factory=lambda: np.zeros(1, np.int64))
    pos: npt.NDArray[np.int32] = field(default_factory=lambda: np.zeros(0, np.int32))
    tf: npt.NDArray[np.float32] = field(default_factory=lambda: np.zeros(0, np.float32))
    # recent postings, unsorted, as appended batches (flattened lazily)
    tail: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = field(default_factory=list)
    tail_size: int = 0
    _tail_flat: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
    # caches keyed by the corpus state
    df_hist: npt.NDArray[np.int64] = field(default_factory=lambda: np.zeros(1, np.int64))  # terms per df value
    _floor_key: tuple[int, int] = (-1, -1)
    _floor: float = 0.0
    _generation: int = 0  # bumped whenever df changes

    def _append_docs(
        self, rows: Sequence[tuple[int, int, bytes, bytes]]
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int32], npt.NDArray[np.float32]]:
        """Append the documents' rids and lengths; return their postings as (term hash, position, tf)."""
        n0, n = self.n_docs, len(rows)
        self.rids = _grow(self.rids, n0 + n)
        self.dl = _grow(self.dl, n0 + n)
        self.rids[n0 : n0 + n] = np.fromiter((r[0] for r in rows), np.int64, n)
        lens = np.fromiter((r[1] for r in rows), np.int64, n)
        self.dl[n0 : n0 + n] = lens
        self.total_len += int(lens.sum())
        self.n_docs = n0 + n
        blobs = [r[2] for r in rows]
        counts = np.fromiter((len(blob) >> 3 for blob in blobs), np.int64, n)
        hashes = np.frombuffer(b"".join(blobs), dtype="<i8")
        tf = np.frombuffer(b"".join([r[3] for r in rows]), dtype="<i4").astype(np.float32)
        pos = np.repeat(np.arange(n0, n0 + n, dtype=np.int32), counts)
        return hashes, pos, tf

    @classmethod
    def build(cls, rows: Sequence[tuple[int, int, bytes, bytes]], *, version: int, last_seq: int) -> _NsIndex:
        """A fresh index of ``rows`` ``(rid, len, term hashes, tfs)``: one sort gives vocabulary and CSR matrix."""
        index = cls(version=version, last_seq=last_seq)
        hashes, pos, tf = index._append_docs(rows)
        if hashes.size:
            order = np.argsort(hashes, kind="stable")  # much faster than quicksort on many repeats
            sorted_hashes = hashes[order]
            starts = np.flatnonzero(np.concatenate([[True], sorted_hashes[1:] != sorted_hashes[:-1]]))
            index.keys = sorted_hashes[starts]
            index.n_terms = int(starts.size)
            index.key_ids = np.arange(index.n_terms, dtype=np.int64)
            index.indptr = np.concatenate([starts, [hashes.size]]).astype(np.int64)
            index.df = np.diff(index.indptr)
            index.df_hist = np.bincount(index.df)
            index.pos, index.tf = pos[order], tf[order]
        return index

    def append(self, rows: Sequence[tuple[int, int, bytes, bytes]]) -> None:
        """Append documents ``(rid, len, term hashes, tfs)`` at the next positions; postings go to the tail."""
        if not rows:
            return
        hashes, pos_arr, tf_arr = self._append_docs(rows)
        if hashes.size == 0:
            return
        terms_arr = self._intern(hashes)
        self._count_terms(terms_arr)
        self.tail.append((terms_arr, pos_arr, tf_arr))
        self.tail_size += int(terms_arr.size)
        self._tail_flat = None
        self._generation += 1
        if self.tail_size > _TAIL_MERGE:
            self.merge_tail()

    def _count_terms(self, terms: npt.NDArray[np.int32]) -> None:
        """Add one to the df of each posting's term (a doc lists a term once), keeping ``df_hist`` in step."""
        uniq, cnt = np.unique(terms, return_counts=True)
        self.df = _grow(self.df, self.n_terms)
        old = self.df[uniq]
        new = old + cnt
        self.df[uniq] = new
        self.df_hist = _grow(self.df_hist, int(new.max()) + 1)
        np.subtract.at(self.df_hist, old, 1)  # df 0 (new terms) is never read
        np.add.at(self.df_hist, new, 1)

    def _intern(self, hashes: npt.NDArray[np.int64]) -> npt.NDArray[np.int32]:
        """Local term ids of ``hashes``, giving new ids to hashes never seen in this namespace."""
        uniq, inverse = np.unique(hashes, return_inverse=True)
        ids = self.lookup(uniq)
        new = ids < 0
        n_new = int(new.sum())
        if n_new:
            new_ids = np.arange(self.n_terms, self.n_terms + n_new, dtype=np.int64)
            ids[new] = new_ids
            at = np.searchsorted(self.keys, uniq[new])
            self.keys = np.insert(self.keys, at, uniq[new])
            self.key_ids = np.insert(self.key_ids, at, new_ids)
            self.n_terms += n_new
        return ids[inverse.reshape(-1)].astype(np.int32)

    def lookup(self, hashes: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        """Local term ids of ``hashes``; -1 where the namespace has no such term."""
        out = np.full(hashes.shape[0], -1, dtype=np.int64)
        if self.keys.size == 0:
            return out
        at = np.minimum(np.searchsorted(self.keys, hashes), self.keys.size - 1)
        found = self.keys[at] == hashes
        out[found] = self.key_ids[at[found]]
        return out

    def _flat_tail(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        if self._tail_flat is None:
            if self.tail:
                self._tail_flat = (
                    np.concatenate([t[0] for t in self.tail]),
                    np.concatenate([t[1] for t in self.tail]),
                    np.concatenate([t[2] for t in self.tail]),
                )
            else:
                empty = np.zeros(0, np.int32)
                self._tail_flat = (empty, empty, np.zeros(0, np.float32))
        return self._tail_flat

    def merge_tail(self) -> None:
        """Merge the tail into the CSR matrix: one linear pass (``np.insert``), postings stay grouped by term."""
        if not self.tail:
            return
        t_terms, t_pos, t_tf = self._flat_tail()
        order = np.argsort(t_terms, kind="stable")
        t_terms, t_pos, t_tf = t_terms[order], t_pos[order], t_tf[order]
        n_terms = self.n_terms
        old = self.indptr
        ext = np.concatenate([old, np.full(n_terms + 1 - old.shape[0], old[-1], dtype=np.int64)])
        at = ext[t_terms.astype(np.int64) + 1]
        self.pos = np.insert(self.pos, at, t_pos)
        self.tf = np.insert(self.tf, at, t_tf)
        added = np.bincount(t_terms, minlength=n_terms)
        self.indptr = ext + np.concatenate([[0], np.cumsum(added)])
        self.tail, self.tail_size, self._tail_flat = [], 0, None

    def idf_floor(self, epsilon: float) -> float:
        """rank_bm25's floor for negative IDFs, from the df histogram; cached until df or N change."""
        key = (self.n_docs, self._generation)
        if key != self._floor_key:
            values = np.flatnonzero(self.df_hist[1:]) + 1
            self._floor = okapi_idf_floor(values, self.n_docs, epsilon, counts=self.df_hist[values])
            self._floor_key = key
        return self._floor

    def postings(
        self, tids: npt.NDArray[np.int64], weights: F64
    ) -> tuple[list[npt.NDArray[np.int32]], list[npt.NDArray[np.float32]], list[float | F64]]:
        """Postings of the terms ``tids`` as parallel lists (doc positions, tfs, weight per posting or scalar).

        The merged part gives one slice per term (views, no copy); the tail is scanned once for all terms.
        """
        pos_parts: list[npt.NDArray[np.int32]] = []
        tf_parts: list[npt.NDArray[np.float32]] = []
        w_parts: list[float | F64] = []
        n_merged = self.indptr.shape[0] - 1
        for tid, w in zip(tids.tolist(), weights.tolist(), strict=True):
            if tid < n_merged:
                lo, hi = int(self.indptr[tid]), int(self.indptr[tid + 1])
                if hi > lo:
                    pos_parts.append(self.pos[lo:hi])
                    tf_parts.append(self.tf[lo:hi])
                    w_parts.append(w)
        if self.tail:
            t_terms, t_pos, t_tf = self._flat_tail()
            hit = np.isin(t_terms, tids)
            if hit.any():
                order = np.argsort(tids)
                which = order[np.searchsorted(tids, t_terms[hit], sorter=order)]
                pos_parts.append(t_pos[hit])
                tf_parts.append(t_tf[hit])
                w_parts.append(weights[which])
        return pos_parts, tf_parts, w_parts


# ------------------------------------------------------------------------------------------- the index


class KeywordIndex(CachedIndex["_NsIndex"]):
    """BM25 (Okapi, k1=1.5, b=0.75, same IDF rule as ``rank_bm25.BM25Okapi`` incl. its epsilon floor) per namespace.

    Scores equal ``rank_bm25.BM25Okapi(corpus).get_scores(tokenize(query))`` over the namespace's documents
    (tokenized with :func:`memory_ext.text.tokenize`), to floating-point rounding: a query term repeated in
    the query counts once per occurrence, exactly as rank_bm25 loops over the query tokens.

    Writes (:meth:`add`, :meth:`remove`, :meth:`drop_namespace`) run inside the caller's open transaction and
    never commit. After a rollback call :meth:`invalidate`. Searches may run from several threads while
    another thread adds; the in-memory copy is changed under a lock and scoring runs outside it.

    >>> import sqlite3
    >>> conn = sqlite3.connect(":memory:")
    >>> KeywordIndex.create_schema(conn)
    >>> index = KeywordIndex()
    >>> index.add(conn, 7, [(1, "我喜欢猫"), (2, "the cat sat on the mat"), (3, "dogs bark")])
    >>> [rid for rid, _ in index.search(conn, 7, "猫 cat", k=10)]
    [2, 1]
    >>> index.doc_count(conn, 7)
    3
    """

    name = "keyword"

    def __init__(self, *, k1: float = 1.5, b: float = 0.75, epsilon: float = 0.25) -> None:
        if not k1 >= 0:
            raise ConfigError("keyword.k1", k1, "BM25 k1 must be >= 0 (usual values 1.2-2.0)")
        if not 0.0 <= b <= 1.0:
            raise ConfigError("keyword.b", b, "BM25 b must be between 0 and 1")
        super().__init__()  # self._lock guards _cache and _ns_locks
        self.k1, self.b, self.epsilon = float(k1), float(b), float(epsilon)
        self._ns_locks: dict[int, threading.Lock] = {}  # one per namespace: loads of one never block another

    # ----------------------------------------------------------------------------------------- writes

    @staticmethod
    def create_schema(conn: Connection) -> None:
        """Create the ``kw_`` tables and indexes if they do not exist (no commit)."""
        for statement in sql_of(conn).keyword.schema:
            conn.execute(statement)

    def index(self, conn: Connection, ns_id: int, batch: RecordBatch) -> None:
        """Index every record of the batch under its index text."""
        self.add(conn, ns_id, [(r.rid, r.index_text) for r in batch.records])

    def add(self, conn: Connection, ns_id: int, docs: Sequence[tuple[int, str]]) -> None:
        """Tokenize and write postings for ``(rid, text)`` docs inside the CALLER's open transaction (never commit).

        Re-adding a rid already indexed in ``ns_id`` replaces its text (within one call, the last wins).
        """
        latest: dict[int, str] = {}
        for rid, text in docs:
            latest[int(rid)] = text
        if not latest:
            return
        remove_indexed(conn, "kw_docs", ns_id, list(latest), self.remove)
        sql = sql_of(conn).keyword
        counted = [(rid, Counter(tokenize(text))) for rid, text in latest.items()]
        hashes = {t: term_hash(t) for t in set().union(*(c for _, c in counted))}
        rows = []
        total = 0
        for rid, counts in counted:
            length = sum(counts.values())
            total += length
            tids = np.fromiter((hashes[t] for t in counts), "<i8", len(counts)).tobytes()
            rows.append((ns_id, rid, length, tids, np.fromiter(counts.values(), "<i4", len(counts)).tobytes()))
        conn.executemany(sql.insert_doc, rows)
        last_seq = conn.execute(sql.last_seq, (ns_id,)).fetchone()[0]
        cur = conn.execute(sql.add_stats, (len(rows), total, last_seq, ns_id))
        if cur.rowcount == 0:
            conn.execute(sql.insert_stats, (ns_id, len(rows), total, last_seq))

    def remove(self, conn: Connection, ns_id: int, rids: Sequence[int]) -> None:
        """Delete the postings of ``rids`` in ``ns_id`` inside the caller's transaction; unknown rids are ignored."""
        wanted = sorted({int(r) for r in rids})
        n_removed = removed_len = 0
        statements = sql_of(conn)
        sql = statements.keyword
        for part in chunks(wanted):
            ids = statements.marks(len(part))
            row = conn.execute(sql.count_docs.format(ids=ids), (ns_id, *part)).fetchone()
            if row[0]:
                conn.execute(sql.delete_docs.format(ids=ids), (ns_id, *part))
                n_removed += int(row[0])
                removed_len += int(row[1])
        if n_removed:
            conn.execute(sql.remove_stats, (n_removed, removed_len, ns_id))
            self.invalidate(ns_id)

    def drop_namespace(self, conn: Connection, ns_id: int) -> None:
        """Delete every document of ``ns_id`` inside the caller's transaction.

        The namespace's ``kw_stats`` row stays, zeroed with a new version (it holds counters only), so that
        other processes holding a cached copy notice the drop.
        """
        sql = sql_of(conn).keyword
        conn.execute(sql.drop_docs, (ns_id,))
        conn.execute(sql.drop_stats, (ns_id,))
        self.invalidate(ns_id)

    # ------------------------------------------------------------------------------------------ reads

    def doc_count(self, conn: Connection, ns_id: int) -> int:
        """Number of documents indexed in ``ns_id``."""
        stats = _read_stats(conn, ns_id)
        return 0 if stats is None else stats.n_docs

    def doc_freqs(self, conn: Connection, ns_id: int, terms: Sequence[str]) -> list[int]:
        """How many documents of ``ns_id`` hold each of ``terms`` (index terms, i.e. :func:`tokenize`'s output;
        0 for a term the namespace does not have): the counts BM25's IDF is computed from."""
        if not terms:
            return []
        with self._lock:
            ns_lock = self._ns_locks.setdefault(ns_id, threading.Lock())
        with ns_lock:
            index = self._sync(conn, ns_id)
            if index is None or index.n_docs == 0:
                return [0] * len(terms)
            local = index.lookup(np.fromiter((term_hash(t) for t in terms), np.int64, len(terms)))
            return [int(index.df[t]) if t >= 0 else 0 for t in local.tolist()]

    def search(
        self,
        conn: Connection,
        ns_id: int,
        query: str,
        k: int,
        *,
        allowed: Collection[int] | None = None,
    ) -> list[tuple[int, float]]:
        """Top-k ``(rid, score)`` by BM25 within ``ns_id`` only, highest first; ties broken by rid ascending.

        ``allowed`` restricts the result to those rids (a filter: BM25 statistics stay those of the whole
        namespace). Only documents sharing at least one term with the query are returned, so fewer than k
        (possibly none) may come back. An empty query (or one made only of stop words) returns ``[]``.
        """
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise InvalidQueryError("k", k, "pass a positive integer")
        if allowed is not None and len(allowed) == 0:
            return []
        qtf = Counter(tokenize(query))
        if not qtf:
            return []
        snap = self._snapshot(conn, ns_id, qtf)
        if snap is None:
            return []
        return _top_k(snap, k, allowed)

    def score_all(self, conn: Connection, ns_id: int, query: str) -> tuple[np.ndarray, np.ndarray]:
        """Every document of ``ns_id`` that shares a term with ``query``: ``(rids, scores)``; all others score 0.

        The ranking code uses the whole score distribution (to standardise scores across channels).
        """
        qtf = Counter(tokenize(query))
        snap = self._snapshot(conn, ns_id, qtf) if qtf else None
        if snap is None or not snap.pos:
            return np.zeros(0, np.int64), np.zeros(0, np.float64)
        scores, cand = _scores(snap)
        return snap.rids[cand].astype(np.int64), scores[cand]

    def _snapshot(self, conn: Connection, ns_id: int, qtf: Counter[str]) -> _Snapshot | None:
        with self._lock:
            ns_lock = self._ns_locks.setdefault(ns_id, threading.Lock())
        with ns_lock:
            index = self._sync(conn, ns_id)
            if index is None or index.n_docs == 0:
                return None
            local = index.lookup(np.fromiter((term_hash(t) for t in qtf), np.int64, len(qtf)))
            tids = [(int(tid), c) for tid, c in zip(local, qtf.values(), strict=True) if tid >= 0]
            if not tids:
                return None
            floor = index.idf_floor(self.epsilon)
            ids = np.array([t for t, _ in tids], dtype=np.int64)
            idf = bm25_idf(index.df[ids], index.n_docs)
            idf = np.where(idf < 0, floor, idf)
            weights = idf * np.array([c for _, c in tids], dtype=np.float64)  # rank_bm25 adds a repeated term again
            pos, tf, w = index.postings(ids, weights)
            return _Snapshot(
                n_docs=index.n_docs,
                k1=self.k1,
                b=self.b,
                avgdl=index.total_len / index.n_docs,
                rids=index.rids[: index.n_docs],
                dl=index.dl[: index.n_docs],
                pos=pos,
                tf=tf,
                weight=w,
            )

    def _sync(self, conn: Connection, ns_id: int) -> _NsIndex | None:
        """Bring the cached copy of ``ns_id`` up to date with the database (caller holds the namespace lock)."""
        stats = _read_stats(conn, ns_id)
        if stats is None:
            self.invalidate(ns_id)
            return None
        with self._lock:
            index = self._cache.get(ns_id)
        if index is not None and index.version == stats.version and index.last_seq == stats.last_seq:
            return index
        if index is not None and index.version == stats.version and index.last_seq < stats.last_seq:
            index.append(conn.execute(sql_of(conn).keyword.load, (ns_id, index.last_seq, stats.last_seq)).fetchall())
            index.last_seq = stats.last_seq
            if index.n_docs == stats.n_docs:
                return index
        built = self._full_load(conn, ns_id, stats)
        with self._lock:
            self._cache[ns_id] = built
        return built

    @staticmethod
    def _full_load(conn: Connection, ns_id: int, stats: _Stats) -> _NsIndex:
        """Build the namespace from its rows up to ``stats.last_seq``; retried if a delete ran meanwhile."""
        for _ in range(3):
            rows = conn.execute(sql_of(conn).keyword.load, (ns_id, 0, stats.last_seq)).fetchall()
            built = _NsIndex.build(rows, version=stats.version, last_seq=stats.last_seq)
            fresh = _read_stats(conn, ns_id)
            if fresh is None or (fresh.version == stats.version and built.n_docs == stats.n_docs):
                break
            stats = fresh
        return built


def _scores(snap: _Snapshot) -> tuple[np.ndarray, np.ndarray]:
    """Dense BM25 scores over the snapshot's documents, and the positions of the documents that matched."""
    positions = np.concatenate(snap.pos)
    weights = np.concatenate(
        [
            w * _saturate(tf, snap.dl[p], snap.avgdl, snap.k1, snap.b)
            for w, p, tf in zip(snap.weight, snap.pos, snap.tf, strict=True)
        ]
    )
    scores = np.bincount(positions, weights=weights, minlength=snap.n_docs)
    hit = np.zeros(snap.n_docs, dtype=bool)
    hit[positions] = True
    return scores, np.flatnonzero(hit)


def _top_k(snap: _Snapshot, k: int, allowed: Collection[int] | None) -> list[tuple[int, float]]:
    """Score the snapshot's postings and return the k best ``(rid, score)``, ties by rid ascending."""
    if not snap.pos:
        return []
    scores, cand = _scores(snap)
    if allowed is not None:
        allowed_arr = np.fromiter((int(r) for r in allowed), dtype=np.int64)
        cand = cand[np.isin(snap.rids[cand], allowed_arr)]
    if cand.size == 0:
        return []
    cand_scores = scores[cand]
    if cand.size > k:
        kth = np.partition(cand_scores, cand.size - k)[cand.size - k]
        keep = cand_scores >= kth  # every doc tied with the k-th stays in, for the rid tie-break
        cand, cand_scores = cand[keep], cand_scores[keep]
    cand_rids = snap.rids[cand]
    order = np.lexsort((cand_rids, -cand_scores))[:k]
    return [(int(cand_rids[i]), float(cand_scores[i])) for i in order]


def _saturate(tf: npt.NDArray[np.float32], dl: F64, avgdl: float, k1: float, b: float) -> F64:
    """:func:`bm25_tf_weight` for one posting list, written to touch each posting once."""
    t = tf.astype(np.float64)
    return t * (k1 + 1.0) / (t + (k1 * (1.0 - b) + (k1 * b / avgdl) * dl))
