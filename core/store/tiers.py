"""The SQL of the cold tier (``records.cold``) and of the namespace's flags generation.

Which turns go cold is decided by the monthly eviction and the weekly merge (:mod:`memory_ext.lifecycle.compact`),
and re-applied by reindex and import; the rule every such write keeps lives in the statement itself: a turn a
fact, preference, event, procedure or failure pattern was derived from is never made cold, nor are those records
(:data:`STATED_KINDS`). Each backend writes the statements in its own dialect (:class:`TiersSql`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..models import RecordKind
from .interface import Connection
from .statements import sql_of

__all__ = ["STATED_KINDS", "TiersSql", "bump_flags", "cold_tids", "set_cold"]


@dataclass(frozen=True)
class TiersSql:
    """The statements of the cold tier, as each backend writes them (:mod:`memory_ext.store.statements`).
    ``{marks}``: a template's ``IN`` list (``sql.marks(n)``); ``{kinds}``: one mark per :data:`STATED_KINDS`."""

    turn_ids: str
    """``{marks}`` template, ``(ns_id, *tids)`` -> the turns' ids."""
    stated_turns: str
    """``{kinds}``/``{marks}`` template, ``(ns_id, *STATED_KINDS, *turn ids)`` -> those turn ids (a record's first
    turn) a stated record was derived from."""
    set_cold: str
    """``{kinds}``/``{marks}`` template, ``(cold, ns_id, *STATED_KINDS, *turn ids)``: the tier of the records
    whose first turn is one of these, stated kinds left out."""
    cold_tids: str
    """``{marks}`` template, ``(ns_id, *tids)`` -> those tids whose turn record is cold."""

STATED_KINDS = tuple(kind.value for kind in RecordKind if kind.stated)
"""Derived record kinds that are never demoted to the cold tier, nor is the turn they are anchored to."""


def set_cold(conn: Connection, ns_id: int, tids: Sequence[int], cold: int) -> None:
    """Mark the records centred on these turns (their turn records, windows and layers) cold (1) or warm (0).
    A turn with a derived fact, preference, event, procedure or failure
    pattern (:data:`STATED_KINDS`) is never made cold, nor are those records: what a user stated stays warm."""
    if not tids:
        return
    sql = sql_of(conn)
    ids = [r[0] for r in conn.execute(sql.tiers.turn_ids.format(marks=sql.marks(len(tids))), (ns_id, *tids))]
    kinds = sql.marks(len(STATED_KINDS))
    for i in range(0, len(ids), 400):
        chunk = ids[i:i + 400]
        if cold:
            stated = {r[0] for r in conn.execute(
                sql.tiers.stated_turns.format(kinds=kinds, marks=sql.marks(len(chunk))),
                (ns_id, *STATED_KINDS, *chunk))}
            chunk = [t for t in chunk if t not in stated]
            if not chunk:
                continue
        conn.execute(sql.tiers.set_cold.format(kinds=kinds, marks=sql.marks(len(chunk))),
                     (cold, ns_id, *STATED_KINDS, *chunk))


def cold_tids(conn: Connection, ns_id: int, tids: Sequence[int]) -> list[int]:
    """Those of ``tids`` whose turn record is in the cold tier."""
    out: list[int] = []
    sql = sql_of(conn)
    for i in range(0, len(tids), 400):
        chunk = list(tids[i:i + 400])
        out += [r[0] for r in conn.execute(sql.tiers.cold_tids.format(marks=sql.marks(len(chunk))), (ns_id, *chunk))]
    return out


def bump_flags(conn: Connection, ns_id: int) -> None:
    """The namespace's records changed tier or validity: cached ranking columns reload them
    (:mod:`memory_ext.store.catalog`)."""
    conn.execute(sql_of(conn).versions.bump_flags, (ns_id,))
