"""The declared interface of derived indexes, and the typed records the write pipeline hands them.

Every index beside the truth store (keyword postings, vectors, sparse encodings, entity graph, time spans,
evidence nodes, the record catalog) is *derived*: it can be rebuilt from the truth store, and the engine treats
all of them alike through :class:`DerivedIndex` — it creates their schema, hands each new batch to every index,
removes forgotten records from every index and drops a whole namespace from every index, in one loop. An index
**stores what it is given**: the write pipeline (``memory_ext.ingest.pipeline``) derives text, entities, time
spans, evidence keys and vectors once, into :class:`IndexedRecord` objects, and an index picks the fields it
keeps. A second storage backend implements the same protocol in a module of its own.

Indexes that keep per-namespace in-memory snapshots share :class:`CachedIndex`: one lock, one cache dict, one
``invalidate`` and the snapshot sync rule of :func:`~memory_ext.store.snapshots.synced_snapshot`.

>>> from memory_ext.store.base import IndexedRecord, RecordBatch
>>> batch = RecordBatch([IndexedRecord(rid=1, kind="turn", text="hi", index_text="Ana: hi")])
>>> [r.rid for r in batch.of_kind("turn")]
[1]
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar, runtime_checkable

import numpy as np

from .interface import Connection
from .snapshots import synced_snapshot

__all__ = ["CachedIndex", "DerivedIndex", "IndexedRecord", "RecordBatch"]


@dataclass(frozen=True)
class IndexedRecord:
    """One stored record as the indexes see it: what was derived for it once, at write time.

    ``entities``, ``time_spans`` and ``evidence_keys`` are ``None`` when that index does not take the record
    (only turn records are entity-, time- and evidence-indexed) — never an empty guess made by the index.
    """

    rid: int
    kind: str
    text: str
    index_text: str
    speaker: str | None = None
    session_id: str | None = None
    ref_ts: float | None = None
    anchor_rid: int | None = None
    entities: tuple[str, ...] | None = None
    time_spans: tuple[Any, ...] | None = None
    """:class:`~memory_ext.store.timeindex.Span` objects."""
    evidence_keys: tuple[str, ...] | None = None


@dataclass(frozen=True)
class RecordBatch:
    """The records of one write, with their dense vectors and sparse encodings (aligned by position)."""

    records: Sequence[IndexedRecord]
    vectors: np.ndarray | None = None
    """One row per record of ``vector_rids``."""
    vector_rids: Sequence[int] = ()
    sparse: Sequence[tuple[np.ndarray, np.ndarray]] | None = None
    """One ``(term ids, weights)`` pair per record of ``sparse_rids``."""
    sparse_rids: Sequence[int] = ()
    extra: dict[str, Any] = field(default_factory=dict)

    def of_kind(self, kind: str) -> Iterator[IndexedRecord]:
        """The records of one kind, in batch order."""
        return (r for r in self.records if r.kind == kind)


@runtime_checkable
class DerivedIndex(Protocol):
    """What every derived index implements. Writes run inside the caller's open transaction and never commit;
    after a rollback the caller calls :meth:`invalidate`."""

    name: str
    """The index's name in receipts and errors (``keyword``, ``graph``, ``vector:numpy``...)."""

    def create_schema(self, conn: Connection) -> None:
        """Create the index's tables if they do not exist (no commit)."""

    def index(self, conn: Connection, ns_id: int, batch: RecordBatch) -> None:
        """Store what this index keeps of a new batch."""

    def remove(self, conn: Connection, ns_id: int, rids: Sequence[int]) -> None:
        """Delete these records of ``ns_id`` (unknown rids are ignored)."""

    def drop_namespace(self, conn: Connection, ns_id: int) -> None:
        """Delete everything of ``ns_id``."""

    def invalidate(self, ns_id: int | None = None) -> None:
        """Forget in-memory state of ``ns_id`` (all namespaces if None)."""


C = TypeVar("C")


class CachedIndex(Generic[C]):
    """Shared base of indexes with a per-namespace in-memory cache (a snapshot, a partition, a catalog).

    ``_lock`` guards ``_cache``; ``_snap_lock`` serialises rebuilds so two threads never load the same snapshot
    twice. Subclasses with a second cache list it in :meth:`_caches`.
    """

    name = "cached"

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._snap_lock = threading.Lock()
        self._cache: dict[int, C] = {}

    def _caches(self) -> tuple[dict[int, Any], ...]:
        return (self._cache,)

    def invalidate(self, ns_id: int | None = None) -> None:
        """Forget the cached state of ``ns_id`` (all namespaces if None); the next read reloads it."""
        with self._lock:
            for cache in self._caches():
                if ns_id is None:
                    cache.clear()
                else:
                    cache.pop(ns_id, None)

    def _synced(self, conn: Connection, ns_id: int, read_stats: Callable[[Connection, int], Any],
                load: Callable[[Connection, int, Any], C]) -> C | None:
        """The namespace's snapshot brought in sync with the tables (see :func:`synced_snapshot`)."""
        return synced_snapshot(conn, ns_id, cache=self._cache, snap_lock=self._snap_lock,  # type: ignore[type-var]
                               lock=self._lock, invalidate=self.invalidate, read_stats=read_stats, load=load)
