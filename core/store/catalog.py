"""The record catalog: per-namespace numpy columns of what ranking needs to know about every record.

Kind, anchor (the turn record a window belongs to), session, speaker, time, the cold tier, validity and
supersession, aligned by position, loaded lazily from SQLite on a namespace's first search and then extended with
new rows only (rows with a higher rid); a delete bumps the namespace's generation, a change of flags (cold tier,
supersession) its ``flags_generation``, and the next search reloads it. Ranking then works on whole columns with
numpy instead of SQL per candidate.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from ..models import RecordKind
from .base import CachedIndex, RecordBatch
from .interface import Connection
from .statements import sql_of

__all__ = ["DERIVED_KINDS", "KIND_CODES", "Catalog", "CatalogSql", "RecordCatalog"]


@dataclass(frozen=True)
class CatalogSql:
    """The catalog's reads of the truth store, as each backend writes them (:mod:`memory_ext.store.statements`)."""

    generations: str
    """``(ns_id,)`` -> ``generation, flags_generation`` of the namespace."""
    records_after: str
    """``(rid, ns_id)`` -> ``rid, kind, anchor_rid, session_id, speaker, ref_ts, source_role, cold, valid_to,
    replaced, asks`` of the later records, by rid (a primary-key range); ``asks``: a turn whose text holds a
    question mark (``?`` or ``？``)."""
    successors: str
    """``(ns_id,)`` -> ``rid, rid of its successor`` of every superseded record."""

KIND_CODES = {kind.value: kind.code for kind in RecordKind}
"""Record kinds by code (:class:`~memory_ext.models.RecordKind` says which is which)."""
OTHER_KIND = 9
DERIVED_KINDS = tuple(kind.value for kind in RecordKind if kind.derived)


@dataclass
class Catalog:
    """One namespace's columns. ``pos_of(rids)`` maps rids to positions."""

    generation: tuple[int, int]
    last_rid: int = 0
    rids: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    kind: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int8))
    anchor: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    """position of each record's anchor turn record (itself for a turn; -1 when unknown)."""
    session: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int32))
    speaker: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int32))
    ts: np.ndarray = field(default_factory=lambda: np.zeros(0, np.float64))
    assistant: np.ndarray = field(default_factory=lambda: np.zeros(0, bool))
    """records whose source turn is the assistant's"""
    cold: np.ndarray = field(default_factory=lambda: np.zeros(0, bool))
    """records in the cold tier (moved there by the monthly eviction)"""
    valid_to: np.ndarray = field(default_factory=lambda: np.zeros(0, np.float64))
    """end of validity (NaN: still valid)"""
    replaced: np.ndarray = field(default_factory=lambda: np.zeros(0, bool))
    """records of a version replaced by ``MemoryEngine.update`` (only ``as_of`` searches return them)"""
    successor: dict[int, int] = field(default_factory=dict)
    """position of a superseded record -> position of the record that superseded it"""
    reply_to: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    """position of the turn a turn answers: the turn before it in its session (in arrival order) when that one
    asks a question (its text holds ``?`` or ``？``) and another speaker (or role) said it; -1 otherwise"""
    prev_turn: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    """position of the turn before each turn in its session (in arrival order); -1 for the first turn of its
    session and for records that are not turns"""
    next_turn: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    """position of the turn after each turn in its session; -1 for the latest turn and for other records (an
    append replaces the array: a snapshot taken before it keeps its own)"""
    last_turn: dict[int, tuple[int, bool, int, bool]] = field(default_factory=dict, repr=False, compare=False)
    """session code -> its latest turn: (position, whether it asks a question, speaker code, assistant's); kept
    across appends"""
    session_codes: dict[str | None, int] = field(default_factory=dict)
    speaker_codes: dict[str | None, int] = field(default_factory=dict)

    _groups: tuple[np.ndarray, list[tuple[int, np.ndarray]]] | None = field(default=None, repr=False,
                                                                           compare=False)

    def __len__(self) -> int:
        return int(self.rids.size)

    def kind_groups(self) -> list[tuple[int, np.ndarray]]:
        """``(kind code, positions of that kind)`` for each kind present, by code; computed once per state of the
        catalog (an append replaces ``kind``, which makes it compute them again). Every route's z-scores use them.
        """
        cached = self._groups
        if cached is None or cached[0] is not self.kind:
            kind = self.kind
            cached = (kind, [(int(code), np.flatnonzero(kind == code)) for code in np.unique(kind)])
            self._groups = cached
        return cached[1]

    def pos_of(self, rids: np.ndarray) -> np.ndarray:
        """Positions of ``rids`` (rids are ascending); -1 for rids the catalog does not hold."""
        rids = np.asarray(rids, dtype=np.int64)
        pos = np.searchsorted(self.rids, rids)
        pos = np.clip(pos, 0, max(len(self) - 1, 0))
        ok = (len(self) > 0) & (self.rids[pos] == rids) if len(self) else np.zeros(rids.shape, bool)
        return np.where(ok, pos, -1)

    def speakers(self) -> list[str]:
        """The distinct speaker names of the namespace."""
        return [s for s in self.speaker_codes if s]

    def _append(self, rows: list[tuple]) -> None:
        if not rows:
            return
        rids = np.fromiter((r[0] for r in rows), np.int64, len(rows))
        kinds = np.fromiter((KIND_CODES.get(r[1], OTHER_KIND) for r in rows), np.int8, len(rows))
        sess = np.fromiter((self.session_codes.setdefault(r[3], len(self.session_codes)) for r in rows),
                           np.int32, len(rows))
        spk = np.fromiter((self.speaker_codes.setdefault(r[4], len(self.speaker_codes)) for r in rows),
                          np.int32, len(rows))
        ts = np.fromiter((r[5] if r[5] is not None else np.nan for r in rows), np.float64, len(rows))
        self.rids = np.concatenate([self.rids, rids])
        self.kind = np.concatenate([self.kind, kinds])
        self.session = np.concatenate([self.session, sess])
        self.speaker = np.concatenate([self.speaker, spk])
        self.ts = np.concatenate([self.ts, ts])
        self.assistant = np.concatenate([self.assistant, np.fromiter((r[6] == "assistant" for r in rows), bool,
                                                                     len(rows))])
        self.cold = np.concatenate([self.cold, np.fromiter((bool(r[7]) for r in rows), bool, len(rows))])
        self.valid_to = np.concatenate([self.valid_to, np.fromiter((r[8] if r[8] is not None else np.nan
                                                                    for r in rows), np.float64, len(rows))])
        self.replaced = np.concatenate([self.replaced, np.fromiter((len(r) > 9 and bool(r[9]) for r in rows), bool,
                                                                   len(rows))])
        anchor_rids = np.fromiter((r[2] if r[2] is not None else -1 for r in rows), np.int64, len(rows))
        self.anchor = np.concatenate([self.anchor, self.pos_of(anchor_rids)])
        replies, prev = self._replies(rows, len(self) - len(rows))
        self.reply_to = np.concatenate([self.reply_to, replies])
        self.prev_turn = np.concatenate([self.prev_turn, prev])
        nxt = np.concatenate([self.next_turn, np.full(len(rows), -1, np.int64)])
        linked = np.flatnonzero(prev >= 0)
        nxt[prev[linked]] = linked + (len(self) - len(rows))  # a fresh array: snapshots keep the old one
        self.next_turn = nxt
        self.last_rid = int(rids[-1])

    def _replies(self, rows: list[tuple], start: int) -> tuple[np.ndarray, np.ndarray]:
        """:attr:`reply_to` and :attr:`prev_turn` of the appended ``rows`` (at positions from ``start``; the other
        columns are in)."""
        out = np.full(len(rows), -1, np.int64)
        prev = np.full(len(rows), -1, np.int64)
        turn = KIND_CODES["turn"]
        kinds, sessions = self.kind[start:].tolist(), self.session[start:].tolist()
        speakers, assistants = self.speaker[start:].tolist(), self.assistant[start:].tolist()
        for i, r in enumerate(rows):
            if kinds[i] != turn:
                continue
            before = self.last_turn.get(sessions[i])
            if before is not None:
                prev[i] = before[0]
            if before is not None and before[1] and (before[2], before[3]) != (speakers[i], assistants[i]):
                out[i] = before[0]
            self.last_turn[sessions[i]] = (start + i, len(r) > 10 and bool(r[10]), speakers[i], assistants[i])
        return out, prev


class RecordCatalog(CachedIndex[Catalog]):
    """Thread-safe cache of :class:`Catalog` per namespace, kept in sync with the truth store.

    A derived index with no tables of its own: it reads the ``records`` table, so writes only have to tell it
    when rows went (``remove``, ``drop_namespace``); new rows are picked up by the next :meth:`get`.
    """

    name = "catalog"

    @staticmethod
    def create_schema(conn: Connection) -> None:
        """Nothing: the catalog reads the truth store's ``records`` table."""

    def index(self, conn: Connection, ns_id: int, batch: RecordBatch) -> None:
        """Nothing: new records are read by the next :meth:`get` (rows with a higher rid)."""

    def remove(self, conn: Connection, ns_id: int, rids: Sequence[int]) -> None:
        self.invalidate(ns_id)

    def drop_namespace(self, conn: Connection, ns_id: int) -> None:
        self.invalidate(ns_id)

    def get(self, conn: Connection, ns_id: int) -> Catalog:
        """The namespace's catalog, brought up to date (reads only rows newer than the cached ones)."""
        sql = sql_of(conn).catalog
        row = conn.execute(sql.generations, (ns_id,)).fetchone()
        generation = (int(row[0]), int(row[1])) if row else (0, 0)
        with self._lock:
            cat = self._cache.get(ns_id)
            if cat is None or cat.generation != generation:
                cat = Catalog(generation=generation)
                self._cache[ns_id] = cat
            rows = conn.execute(sql.records_after, (cat.last_rid, ns_id)).fetchall()
            fresh = cat.last_rid == 0
            cat._append(rows)
            if fresh and len(cat):
                pairs = conn.execute(sql.successors, (ns_id,)).fetchall()
                if pairs:
                    arr = np.asarray(pairs, np.int64)
                    old, new = cat.pos_of(arr[:, 0]), cat.pos_of(arr[:, 1])
                    cat.successor = {int(o): int(n) for o, n in zip(old, new, strict=True) if o >= 0 and n >= 0}
            # a consistent snapshot: appends replace the arrays, they never write into them
            return replace(cat, session_codes=dict(cat.session_codes), speaker_codes=dict(cat.speaker_codes),
                           successor=dict(cat.successor), last_turn=dict(cat.last_turn))
