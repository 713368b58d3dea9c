"""Derive searchable records from turns, with no LLM; the two bundles the write path passes around.

A write carries its turns as :class:`IngestTurn` (a validated turn of the batch, or a stored turn the derivation
reads as context) and what it derives from them as :class:`DerivedRecord` — frozen, so a step that needs another
value (the ``seq`` a turn is stored at, the id a reindex keeps) makes a copy with :func:`dataclasses.replace`.

The foundation derives one ``turn`` record per turn. Its *index text* — what the keyword and vector channels
see — is the speaker's name, the content, and the names of the tools called, so "what did Ana say about X"
and "when did I call flight_search" both match.

>>> index_text("I adopted a puppy", speaker="Ana", tool_calls=())
'Ana: I adopted a puppy'
>>> turn = IngestTurn(id="t1", session_id="s", role="user", speaker="Ana", content="I adopted a puppy", ts=0.0)
>>> derive_turn_record(turn).index_text
'Ana: I adopted a puppy'
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..models import RecordKind

if TYPE_CHECKING:
    from .claims import Claim

__all__ = ["DerivedRecord", "IngestTurn", "derive_turn_record", "derive_windows", "index_text", "new_id"]


@dataclass(frozen=True, slots=True)
class IngestTurn:
    """One turn on the write path: a validated turn of a batch (:func:`memory_ext.ingest.pipeline.turn_rows`) or
    a stored one read back as the derivation's context (then ``seq`` and ``rid`` are known)."""

    id: str
    session_id: str | None
    role: str
    speaker: str | None
    content: str
    ts: float | None
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    attachments: list[dict[str, Any]] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)
    external_id: str | None = None
    token_count: int = 0
    seq: int | None = None
    """The turn's position in its namespace once it is stored (set just before the insert)."""
    rid: int | None = None
    """The rid of the turn's own record, for a stored turn (the anchor of the records derived from it)."""

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> IngestTurn:
        """The turn of a row the truth store hands back (``tail_turns``, ``stored_turn_rows``)."""
        return cls(id=row["id"], session_id=row.get("session_id"), role=row.get("role") or "user",
                   speaker=row.get("speaker"), content=row.get("content") or "", ts=row.get("ts"),
                   tool_calls=list(row.get("tool_calls") or []), attachments=list(row.get("attachments") or []),
                   metadata=dict(row.get("metadata") or {}), external_id=row.get("external_id"),
                   token_count=int(row.get("token_count") or 0), seq=row.get("seq"), rid=row.get("rid"))

    def as_row(self) -> dict[str, Any]:
        """The row the truth store's ``insert_turns`` writes."""
        return {"id": self.id, "seq": self.seq, "session_id": self.session_id, "role": self.role,
                "speaker": self.speaker, "content": self.content, "ts": self.ts, "external_id": self.external_id,
                "tool_calls": self.tool_calls, "attachments": self.attachments, "metadata": self.metadata,
                "token_count": self.token_count}


@dataclass(frozen=True, slots=True)
class DerivedRecord:
    """A record derived from turns, before it is stored: a turn record, a window, an L0/L1 layer or a typed kind
    (fact, preference, event, procedure, failure_pattern)."""

    id: str
    kind: RecordKind
    text: str
    index_text: str
    ref_ts: float | None
    turn_ids: list[str]
    """The turns it comes from, its own turn first."""
    source_role: str | None
    speaker: str | None
    session_id: str | None
    anchor_turn_id: str | None = None
    """The turn whose turn record it is anchored to (None: a turn record, its own anchor)."""
    tags: list[str] = field(default_factory=list)
    entities: list[str] = field(default_factory=list)
    claims: tuple[Claim, ...] = ()
    """The claims a fact or preference states (:mod:`memory_ext.ingest.claims`), for supersession."""
    key_text: str | None = None
    """The text the keyword index keys the record under when it differs from ``index_text`` (a turn's text
    plus the facts it states, ``ingest.fact_keys``: :mod:`memory_ext.ingest.fact_keys`); not stored."""

    def as_row(self) -> dict[str, Any]:
        """The row the truth store's ``insert_records`` writes."""
        return {"id": self.id, "kind": self.kind.value, "text": self.text, "index_text": self.index_text,
                "ref_ts": self.ref_ts, "turn_ids": self.turn_ids, "source_role": self.source_role,
                "speaker": self.speaker, "session_id": self.session_id, "tags": self.tags,
                "entities": self.entities}


def new_id(prefix: str) -> str:
    """A fresh opaque id such as ``rec_3f2a9c...`` (uuid4, 20 hex digits)."""
    return f"{prefix}_{uuid.uuid4().hex[:20]}"


def index_text(content: str, *, speaker: str | None, tool_calls: Sequence[dict[str, Any]]) -> str:
    """The text the indexes see for one turn."""
    parts = [f"{speaker}: {content}" if speaker else content]
    names = [str(c.get("name") or c.get("tool") or "") for c in tool_calls if isinstance(c, dict)]
    names = [n for n in names if n]
    if names:
        parts.append("[tools: " + ", ".join(names) + "]")
    return " ".join(p for p in parts if p.strip())


def derive_turn_record(turn: IngestTurn) -> DerivedRecord:
    """The ``turn`` record of one turn."""
    return DerivedRecord(id=new_id("rec"), kind=RecordKind.TURN, text=turn.content,
                         index_text=index_text(turn.content, speaker=turn.speaker, tool_calls=turn.tool_calls),
                         ref_ts=turn.ts, turn_ids=[turn.id], source_role=turn.role, speaker=turn.speaker,
                         session_id=turn.session_id)


WINDOW_MAX_GAP_S = 1800.0
"""Neighbours more than 30 minutes apart are not one conversation: they do not share a window."""


def _same_exchange(a: IngestTurn, b: IngestTurn) -> bool:
    if a.session_id != b.session_id:
        return False
    return a.ts is None or b.ts is None or abs(a.ts - b.ts) <= WINDOW_MAX_GAP_S


def derive_windows(sequence: Sequence[IngestTurn], first_center: int) -> list[DerivedRecord]:
    """``window`` records for the centres ``sequence[first_center:-1]``.

    ``sequence`` is the namespace's turns in order (the stored tail, then the new batch); ``anchor_turn_id``
    names the centre turn, whose turn record the window is anchored to. A window is the centre turn with its
    neighbours (±1) of the *same exchange* — same session, at most ``WINDOW_MAX_GAP_S`` apart — so a question
    that needs the context of a reply ("…and what did she say about it?") still finds the turn, while
    independent notes (memories days apart) are never blended. A window is made once its centre has a successor,
    and only when it has a neighbour; a turn without one is searched by its turn record alone.
    ``turn_ids`` lists the centre first, so a window always maps back to its own turn.
    """
    out = []
    for c in range(max(first_center, 0), len(sequence) - 1):
        center = sequence[c]
        members = [sequence[j] for j in (c - 1, c, c + 1)
                   if 0 <= j < len(sequence) and _same_exchange(sequence[j], center)]
        if len(members) < 2:
            continue
        text = " ".join(index_text(m.content, speaker=m.speaker, tool_calls=m.tool_calls) for m in members)
        out.append(DerivedRecord(
            id=new_id("win"), kind=RecordKind.WINDOW, text=text, index_text=text, ref_ts=center.ts,
            turn_ids=[center.id] + [m.id for m in members if m is not center], source_role=center.role,
            speaker=center.speaker, session_id=center.session_id, anchor_turn_id=center.id))
    return out
