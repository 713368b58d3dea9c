"""The SQL of supersession: the ``claims`` table and the validity of the records it supersedes.

Which claims conflict, and which record is out of date, is decided in :mod:`memory_ext.lifecycle.supersede`
(:func:`memory_ext.lifecycle.conflicts.conflicts`); this module reads and writes the rows. Each backend writes
the statements in its own dialect (:class:`ClaimsSql`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .interface import Connection
from .statements import sql_of

__all__ = ["ClaimsSql", "count_claims", "insert_claim", "live_claims", "supersede_record"]


@dataclass(frozen=True)
class ClaimsSql:
    """The statements of supersession, as each backend writes them (:mod:`memory_ext.store.statements`)."""

    live_claims: str
    """``(ns_id, holder, subject, attribute, other_than)`` -> ``rid, value, negated, ts`` of the claims whose
    records are not superseded."""
    count_claims: str
    """``(ns_id, holder, subject, attribute, other_than)`` -> how many claims, superseded or not."""
    supersede_record: str
    """``(valid_to, superseded_by, rid, ns_id)``."""
    insert_claim: str
    """``(ns_id, rid, holder, subject, attribute, value, negated, ts)``."""


def live_claims(conn: Connection, ns_id: int, holder: str, subject: str, attribute: str,
                other_than: int) -> list[tuple[Any, ...]]:
    """``(rid, value, negated, ts)`` of the claims on this holder, subject and attribute whose records are not
    superseded, the record ``other_than`` left out."""
    return conn.execute(
        sql_of(conn).claims.live_claims, (ns_id, holder, subject, attribute, other_than)).fetchall()


def count_claims(conn: Connection, ns_id: int, holder: str, subject: str, attribute: str, other_than: int) -> int:
    """How many claims on this holder, subject and attribute were ever stated (superseded ones too), the record
    ``other_than`` left out."""
    row = conn.execute(sql_of(conn).claims.count_claims, (ns_id, holder, subject, attribute, other_than)).fetchone()
    return int(row[0]) if row else 0


def supersede_record(conn: Connection, ns_id: int, rid: int, valid_to: float | None, by_record_id: str) -> None:
    """The record ``rid`` stops being valid at ``valid_to``: ``by_record_id`` replaced it."""
    conn.execute(sql_of(conn).claims.supersede_record,
                 (valid_to, by_record_id, rid, ns_id))


def insert_claim(conn: Connection, ns_id: int, rid: int, holder: str, subject: str, attribute: str,
                 value: str, negated: bool, ts: float | None) -> None:
    """One claim of the record ``rid``."""
    conn.execute(sql_of(conn).claims.insert_claim, (ns_id, rid, holder, subject, attribute, value, int(negated), ts))
