"""Stage 7, hydrate: the chosen rids become :class:`~memory_ext.models.RetrievedItem` objects (text, kind, turns,
session, time, speaker, role, the source turn's metadata, channel ranks, bounded and raw scores, explanation),
read from the truth store in two queries."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from ..models import RecordKind, RetrievedItem, Role
from ..store.interface import TruthStore
from ..store.rows import TurnRow

__all__ = ["Hydrated", "hydrate"]


@dataclass(frozen=True)
class Hydrated:
    """The items, best first, and the source turns they were built from (by turn id; the context reuses them)."""

    items: list[RetrievedItem]
    source_turns: dict[str, TurnRow] = field(default_factory=dict)
    rids: list[int] = field(default_factory=list)
    """The rid of each item."""


def hydrate(store: TruthStore, ns_id: int, rids: Sequence[int], scores: Sequence[float],
            ranks: Mapping[int, dict[str, int]], details: Mapping[int, dict[str, Any]], explain: bool,
            raw_scores: Sequence[float] | None = None) -> Hydrated:
    """The items of ``rids`` with their bounded ``scores`` and unbounded ``raw_scores`` (a record deleted since
    recall is skipped)."""
    records = store.records_by_rid(ns_id, rids)
    turns = store.turns_by_id(ns_id, (t for r in records.values() for t in r.turn_ids))
    items = []
    kept: list[int] = []
    raws = list(raw_scores) if raw_scores is not None else [None] * len(rids)
    for rid, score, raw in zip(rids, scores, raws, strict=True):
        rec = records.get(rid)
        if rec is None:  # deleted between recall and hydration
            continue
        src = [turns[t] for t in rec.turn_ids if t in turns]
        kept.append(rid)
        calls = tuple(src[0].tool_calls) if src and rec.kind == RecordKind.TURN.value else ()
        items.append(RetrievedItem(
            id=rec.id, text=rec.text, score=float(score),
            kind=RecordKind(rec.kind), turn_ids=tuple(rec.turn_ids),
            external_ids=tuple(t.external_id for t in src), session_id=rec.session_id,
            timestamp=datetime.fromtimestamp(rec.ref_ts, UTC) if rec.ref_ts is not None else None,
            speaker=rec.speaker, role=Role(rec.source_role) if rec.source_role is not None else None,
            channels=ranks.get(rid, {}), raw_score=float(raw) if raw is not None else None,
            metadata=dict(src[0].metadata) if src and isinstance(src[0].metadata, dict) else {},
            tool_calls=calls,
            explanation=details.get(rid) if explain else None))
    return Hydrated(items=items, source_turns=turns, rids=kept)
