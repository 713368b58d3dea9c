"""The SQL of supersession: the ``claims`` table and the validity of the records it supersedes.

Which claims conflict, and which record is out of date, is decided in :mod:`memory_ext.lifecycle.supersede`
(:func:`memory_ext.lifecycle.conflicts.conflicts`); this module reads and writes the rows. Every statement is
accepted by SQLite and by the PostgreSQL store's connection.
"""

from __future__ import annotations

from typing import Any

from .interface import Connection

__all__ = ["insert_claim", "live_claims", "supersede_record"]


def live_claims(conn: Connection, ns_id: int, holder: str, subject: str, attribute: str,
                other_than: int) -> list[tuple[Any, ...]]:
    """``(rid, value, negated, ts)`` of the claims on this holder, subject and attribute whose records are not
    superseded, the record ``other_than`` left out."""
    return conn.execute(
        "SELECT c.rid, c.value, c.negated, c.ts FROM claims c JOIN records r ON r.rid = c.rid"
        " WHERE c.ns_id=? AND c.holder=? AND c.subject=? AND c.attribute=? AND r.superseded_by IS NULL"
        " AND c.rid != ?", (ns_id, holder, subject, attribute, other_than)).fetchall()


def supersede_record(conn: Connection, ns_id: int, rid: int, valid_to: float | None, by_record_id: str) -> None:
    """The record ``rid`` stops being valid at ``valid_to``: ``by_record_id`` replaced it."""
    conn.execute("UPDATE records SET valid_to=?, superseded_by=? WHERE rid=? AND ns_id=?",
                 (valid_to, by_record_id, rid, ns_id))


def insert_claim(conn: Connection, ns_id: int, rid: int, holder: str, subject: str, attribute: str,
                 value: str, negated: bool, ts: float | None) -> None:
    """One claim of the record ``rid``."""
    conn.execute("INSERT INTO claims(ns_id, rid, holder, subject, attribute, value, negated, ts)"
                 " VALUES(?,?,?,?,?,?,?,?)", (ns_id, rid, holder, subject, attribute, value, int(negated), ts))
