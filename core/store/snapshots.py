"""Per-namespace in-memory snapshots of an index, kept in sync with its SQLite tables through a stats row.

The entity graph, the time index and the evidence nodes each keep, per namespace, an immutable snapshot built
from their tables and a ``*_stats`` row that changes on every write. :func:`synced_snapshot` is their one sync
rule: unchanged stats -> the cached snapshot (one SQL statement); otherwise, under the index's lock and inside
one read transaction, the snapshot is extended with what was added (``snap.extended``) or, when that is not
possible (a delete, a rid out of order, a large delta), loaded whole (``load``). A snapshot is replaced, never
changed in place, so concurrent readers stay consistent.

The module also holds the small SQL helpers these indexes share: :func:`chunks` of ids per ``IN (...)``,
:func:`marks` for its placeholders, :func:`indexed_rids` (which of some rids a table indexes) and
:func:`remove_indexed` (the first step of a re-add).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, MutableMapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from .interface import Connection
from .statements import sql_of

__all__ = ["SQL_CHUNK", "Snapshot", "SnapshotsSql", "chunks", "indexed_rids", "marks", "remove_indexed",
           "synced_snapshot"]


@dataclass(frozen=True)
class SnapshotsSql:
    """The statements of the shared helpers of this module, as each backend writes them
    (:mod:`memory_ext.store.statements`)."""

    indexed_rids: str
    """``{table}`` (an index's table) and ``{ids}`` (:meth:`~memory_ext.store.statements.Statements.marks`)
    template, ``(ns_id, *rids)`` -> the distinct rids among them the table holds rows for."""
    begin: str
    """Open the read transaction a snapshot is loaded in."""
    commit: str
    """End it."""

SQL_CHUNK = 400
"""Ids per ``IN (...)`` statement (SQLite's default variable limit is 999 or more)."""


def chunks(items: Sequence[Any], size: int = SQL_CHUNK) -> Iterable[Sequence[Any]]:
    """``items`` in slices of at most ``size``."""
    for i in range(0, len(items), size):
        yield items[i : i + size]


def marks(n: int) -> str:
    """``(?,?,...)`` with ``n`` SQLite placeholders (the derived indexes use their dialect's
    :meth:`~memory_ext.store.statements.Statements.marks` instead).

    >>> marks(3)
    '(?,?,?)'
    """
    return "(" + ",".join("?" * n) + ")"


def indexed_rids(conn: Connection, table: str, ns_id: int, rids: Sequence[int]) -> list[int]:
    """The rids among ``rids`` that ``table`` (a constant of the calling index) holds rows for, sorted."""
    found: set[int] = set()
    sql = sql_of(conn)
    for part in chunks(sorted(set(rids))):
        found.update(int(r[0]) for r in conn.execute(
            sql.snapshots.indexed_rids.format(table=table, ids=sql.marks(len(part))), (ns_id, *part)))
    return sorted(found)


def remove_indexed(conn: Connection, table: str, ns_id: int, rids: Sequence[int],
                   remove: Callable[[Connection, int, Sequence[int]], None]) -> None:
    """The first step of an index's ``add``: a re-added record replaces its rows, so the rids among ``rids``
    that ``table`` already holds go through the index's ``remove`` (which keeps its stats right)."""
    existing = indexed_rids(conn, table, ns_id, rids)
    if existing:
        remove(conn, ns_id, existing)


class Snapshot(Protocol):
    def matches(self, stats: Any) -> bool: ...

    def extended(self, conn: Connection, ns_id: int, stats: Any) -> Any: ...


S = TypeVar("S", bound=Snapshot)


def synced_snapshot(conn: Connection, ns_id: int, *, cache: MutableMapping[int, S],
                    snap_lock: threading.Lock, lock: threading.Lock, invalidate: Callable[[int], None],
                    read_stats: Callable[[Connection, int], Any],
                    load: Callable[[Connection, int, Any], S]) -> S | None:
    """The namespace's snapshot as ``conn`` sees it (None when nothing is indexed)."""
    stats = read_stats(conn, ns_id)
    snap = cache.get(ns_id)
    if stats is None:
        if snap is not None:
            invalidate(ns_id)
        return None
    if snap is not None and snap.matches(stats):
        return snap
    with snap_lock:
        own = not conn.in_transaction
        sql = sql_of(conn).snapshots
        if own:
            conn.execute(sql.begin)
        try:
            stats = read_stats(conn, ns_id)
            if stats is None:
                return None
            snap = cache.get(ns_id)
            if snap is not None and snap.matches(stats):
                return snap
            new = None if snap is None else snap.extended(conn, ns_id, stats)
            if new is None:
                new = load(conn, ns_id, stats)
        finally:
            if own:
                conn.execute(sql.commit)
        with lock:
            cache[ns_id] = new
        return new
