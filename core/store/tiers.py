"""The SQL of the cold tier (``records.cold``) and of the namespace's flags generation.

Which turns go cold is decided by the monthly eviction and the weekly merge (:mod:`memory_ext.lifecycle.compact`),
and re-applied by reindex and import; the rule every such write keeps lives in the statement itself: a turn a
fact, preference, event, procedure or failure pattern was derived from is never made cold, nor are those records
(:data:`STATED_KINDS`). Every statement is accepted by SQLite and by the PostgreSQL store's connection.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..models import RecordKind
from .interface import Connection

__all__ = ["STATED_KINDS", "bump_flags", "cold_tids", "set_cold"]

STATED_KINDS = tuple(kind.value for kind in RecordKind if kind.stated)
"""Derived record kinds that are never demoted to the cold tier, nor is the turn they are anchored to."""


def set_cold(conn: Connection, ns_id: int, tids: Sequence[int], cold: int) -> None:
    """Mark the records centred on these turns (their turn records, windows and layers) cold (1) or warm (0).
    A turn with a derived fact, preference, event, procedure or failure
    pattern (:data:`STATED_KINDS`) is never made cold, nor are those records: what a user stated stays warm."""
    if not tids:
        return
    ids = [r[0] for r in conn.execute(
        f"SELECT id FROM turns WHERE ns_id=? AND tid IN ({','.join('?' * len(tids))})", (ns_id, *tids))]
    kinds = ",".join("?" * len(STATED_KINDS))
    for i in range(0, len(ids), 400):
        chunk = ids[i:i + 400]
        marks = ",".join("?" * len(chunk))
        if cold:
            stated = {r[0] for r in conn.execute(
                f"SELECT DISTINCT json_extract(turn_ids, '$[0]') FROM records WHERE ns_id=? AND kind IN ({kinds})"
                f" AND json_extract(turn_ids, '$[0]') IN ({marks})", (ns_id, *STATED_KINDS, *chunk))}
            chunk = [t for t in chunk if t not in stated]
            if not chunk:
                continue
            marks = ",".join("?" * len(chunk))
        conn.execute(
            f"UPDATE records SET cold=? WHERE ns_id=? AND kind NOT IN ({kinds})"
            f" AND json_extract(turn_ids, '$[0]') IN ({marks})", (cold, ns_id, *STATED_KINDS, *chunk))


def cold_tids(conn: Connection, ns_id: int, tids: Sequence[int]) -> list[int]:
    """Those of ``tids`` whose turn record is in the cold tier."""
    out: list[int] = []
    for i in range(0, len(tids), 400):
        chunk = list(tids[i:i + 400])
        out += [r[0] for r in conn.execute(
            f"SELECT t.tid FROM turns t JOIN records r ON r.rid = t.record_rid WHERE t.ns_id=? AND r.cold=1"
            f" AND t.tid IN ({','.join('?' * len(chunk))})", (ns_id, *chunk))]
    return out


def bump_flags(conn: Connection, ns_id: int) -> None:
    """The namespace's records changed tier or validity: cached ranking columns reload them
    (:mod:`memory_ext.store.catalog`)."""
    conn.execute("UPDATE namespaces SET flags_generation = flags_generation + 1 WHERE ns_id=?", (ns_id,))
