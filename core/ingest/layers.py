"""L0/L1 layers of long records: a short title (L0) and an abstract (L1), with no LLM.

A turn longer than ``ingest.layer_min_chars`` gets two extra records anchored to its turn record: ``l0`` (the
title) and ``l1`` (the abstract), made by the heuristic summariser of memory files
(:func:`memory_ext.lifecycle.summary.summarize`). They are what the ``keyword_l0`` / ``keyword_l1`` /
``vector_l0`` / ``vector_l1`` channels search: a long tool result or a long answer is then found by what it is
*about*, not drowned by its length. The turn record itself is L2 (the whole text).

>>> from memory_ext.ingest.derive import IngestTurn
>>> turns = [IngestTurn(id="t1", session_id="s", role="tool", speaker=None, content="x " * 400, ts=0.0)]
>>> [r.kind.value for r in derive_layers(turns, min_chars=100)]
['l0', 'l1']
"""

from __future__ import annotations

from collections.abc import Sequence

from ..models import RecordKind
from .derive import DerivedRecord, IngestTurn, new_id

__all__ = ["derive_layers"]


def derive_layers(turns: Sequence[IngestTurn], *, min_chars: int) -> list[DerivedRecord]:
    """``l0`` and ``l1`` records for the turns whose content has at least ``min_chars`` characters."""
    from ..lifecycle.summary import summarize

    out: list[DerivedRecord] = []
    for turn in turns:
        if len(turn.content) < min_chars:
            continue
        summary = summarize([turn])
        tools = [str(c.get("name") or "") for c in turn.tool_calls if isinstance(c, dict) and c.get("name")]
        suffix = f" [tools: {', '.join(tools)}]" if tools else ""
        for kind, text in ((RecordKind.L0, summary.title), (RecordKind.L1, summary.abstract)):
            if not text.strip():
                continue
            out.append(DerivedRecord(id=new_id(kind), kind=kind, text=text, index_text=text + suffix, ref_ts=turn.ts,
                                     turn_ids=[turn.id], source_role=turn.role, speaker=turn.speaker,
                                     session_id=turn.session_id, anchor_turn_id=turn.id))
    return out
