"""Supersession at write time: a new statement of the same subject and attribute with another value replaces
the old one ("I moved to Berlin" after "I live in Paris").

Claims come from one extractor, :mod:`memory_ext.ingest.claims` (rules in English and Chinese): read here from
user turns, and carried by the fact and preference records derived from them (``DerivedRecord.claims``,
:mod:`memory_ext.ingest.kinds`). They are kept in the ``claims`` table keyed by holder (the speaker, or the role
when unnamed), subject and attribute. When a new claim conflicts with an older one
(:func:`memory_ext.lifecycle.conflicts.conflicts`), the older record -- the turn, and the fact record derived
from it -- gets ``valid_to`` (the new statement's time) and ``superseded_by`` (the new record's id). Nothing is
deleted: ``search(..., as_of=...)`` still finds what was true then, and a plain search ranks the replacing record
above the replaced one.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..ingest.supersede import in_conversation, mark_conversation, supersede_frames
from ..store.claims import insert_claim, live_claims, supersede_record
from ..store.interface import Connection
from ..store.tiers import bump_flags
from .conflicts import Claim, conflicts, extract_claims

if TYPE_CHECKING:
    from ..ingest.derive import DerivedRecord

__all__ = ["supersede"]

CLAIM_ROLES = ("user",)
"""Roles whose statements about themselves and others are tracked (assistants' words are not the user's facts)."""


def supersede(conn: Connection, ns_id: int, records: Sequence[DerivedRecord], rids: Sequence[int], *,
              derived: Sequence[DerivedRecord] = (), derived_rids: Sequence[int] = (), frames: bool = False) -> int:
    """Record the claims of new records and supersede older conflicting ones; returns how many records were.

    ``records``/``rids`` are the new turn records (their claims are read from their text); ``derived``/
    ``derived_rids`` the records derived from the new turns (only those with ``claims`` count: facts and
    preferences), so a derived fact is superseded as its turn is. Statements are applied in time order.
    ``frames`` (``lifecycle.statement_frames``): statements also supersede by their frames
    (:mod:`memory_ext.ingest.supersede`).
    """
    pending: list[tuple[DerivedRecord, int, Sequence[Claim] | None]] = [
        (r, rid, None) for r, rid in zip(records, rids, strict=True) if r.kind == "turn"]
    pending += [(r, rid, r.claims) for r, rid in zip(derived, derived_rids, strict=True) if r.claims]
    pending = sorted((p for p in pending if p[0].source_role in CLAIM_ROLES),
                     key=lambda p: (p[0].ref_ts or 0.0, p[1]))
    assistant = next((rid for r, rid in zip(records, rids, strict=True) if r.source_role == "assistant"), None)
    talk = (bool(pending) or assistant is not None) and in_conversation(conn, ns_id)
    if assistant is not None and not talk:
        mark_conversation(conn, ns_id, assistant)  # once: frames supersede only where an assistant speaks
        talk = True
    changed = 0
    for rec, rid, given in pending:
        claims = given if given is not None else extract_claims(rec.text, speaker=rec.speaker)
        holder = rec.speaker or rec.source_role or "user"
        ts = rec.ref_ts
        for c in claims:
            for old_rid, value, negated, old_ts in live_claims(conn, ns_id, holder, c.subject, c.attribute, rid):
                old = Claim(subject=c.subject, attribute=c.attribute, value=value, negated=bool(negated))
                if not conflicts(c, old):
                    continue
                if ts is not None and old_ts is not None and old_ts > ts:
                    continue  # the stored statement is newer: this one was already out of date
                supersede_record(conn, ns_id, old_rid, ts, rec.id)
                changed += 1
            insert_claim(conn, ns_id, rid, holder, c.subject, c.attribute, c.value, c.negated, ts)
        if frames and given is None:  # a statement, not a derived record: its frame ("I'm on a Pixel 8 now")
            changed += supersede_frames(conn, ns_id, holder, rid, rec.id, rec.text, ts, replace=talk)
    if changed:
        bump_flags(conn, ns_id)
    return changed
