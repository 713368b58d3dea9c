"""L0/L1 layers of long records: a short title (L0) and an abstract (L1), with no LLM.

A turn longer than ``ingest.layer_min_chars`` gets two extra records anchored to its turn record: ``l0`` (the
title) and ``l1`` (the abstract), made by the heuristic summariser of memory files
(:func:`memory_ext.lifecycle.summary.summarize`). They are what the ``keyword_l0`` / ``keyword_l1`` /
``vector_l0`` / ``vector_l1`` channels search: a long tool result or a long answer is then found by what it is
*about*, not drowned by its length. The turn record itself is L2 (the whole text).

>>> rows = [{"id": "t1", "role": "tool", "speaker": None, "content": "x " * 400, "ts": 0.0, "session_id": "s",
...          "tool_calls": [], "attachments": [], "metadata": {}}]
>>> [r["kind"] for r in derive_layers(rows, min_chars=100)]
['l0', 'l1']
"""

from __future__ import annotations

from collections.abc import Sequence
from types import SimpleNamespace
from typing import Any

from .derive import new_id

__all__ = ["derive_layers"]


def derive_layers(turn_rows: Sequence[dict[str, Any]], *, min_chars: int) -> list[dict[str, Any]]:
    """``l0`` and ``l1`` records for the turns whose content has at least ``min_chars`` characters."""
    from ..lifecycle.summary import summarize

    out: list[dict[str, Any]] = []
    for row in turn_rows:
        content = row.get("content") or ""
        if len(content) < min_chars:
            continue
        turn = SimpleNamespace(role=row.get("role", "user"), speaker=row.get("speaker"), content=content,
                               ts=row.get("ts"), tool_calls=list(row.get("tool_calls") or []),
                               attachments=list(row.get("attachments") or []), metadata=dict(row.get("metadata") or {}))
        summary = summarize([turn])
        tools = [str(c.get("name") or "") for c in turn.tool_calls if isinstance(c, dict) and c.get("name")]
        suffix = f" [tools: {', '.join(tools)}]" if tools else ""
        for kind, text in (("l0", summary.title), ("l1", summary.abstract)):
            if not text.strip():
                continue
            out.append({"id": new_id(kind), "kind": kind, "text": text, "index_text": text + suffix,
                        "ref_ts": row.get("ts"), "turn_ids": [row["id"]], "source_role": row.get("role"),
                        "speaker": row.get("speaker"), "session_id": row.get("session_id"),
                        "anchor_turn_id": row["id"]})
    return out
