"""Derive searchable records from turns, with no LLM.

The foundation derives one ``turn`` record per turn. Its *index text* — what the keyword and vector channels
see — is the speaker's name, the content, and the names of the tools called, so "what did Ana say about X"
and "when did I call flight_search" both match.

>>> index_text("I adopted a puppy", speaker="Ana", tool_calls=())
'Ana: I adopted a puppy'
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

__all__ = ["derive_turn_record", "derive_windows", "index_text", "new_id"]


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


def derive_turn_record(turn_row: dict[str, Any]) -> dict[str, Any]:
    """The ``turn`` record of one stored turn row (as written by the engine)."""
    return {
        "id": new_id("rec"),
        "kind": "turn",
        "text": turn_row["content"],
        "index_text": index_text(turn_row["content"], speaker=turn_row["speaker"],
                                 tool_calls=turn_row["tool_calls"]),
        "ref_ts": turn_row["ts"],
        "turn_ids": [turn_row["id"]],
        "source_role": turn_row["role"],
        "speaker": turn_row["speaker"],
        "session_id": turn_row["session_id"],
    }


WINDOW_MAX_GAP_S = 1800.0
"""Neighbours more than 30 minutes apart are not one conversation: they do not share a window."""


def _same_exchange(a: dict[str, Any], b: dict[str, Any]) -> bool:
    if a["session_id"] != b["session_id"]:
        return False
    return a["ts"] is None or b["ts"] is None or abs(a["ts"] - b["ts"]) <= WINDOW_MAX_GAP_S


def derive_windows(sequence: Sequence[dict[str, Any]], first_center: int) -> list[dict[str, Any]]:
    """``window`` records for the centres ``sequence[first_center:-1]``.

    ``sequence`` is the namespace's turns in order (the stored tail, then the new batch), each a dict with
    ``id``, ``session_id``, ``speaker``, ``content``, ``ts`` and ``tool_calls``; ``anchor_turn_id`` names the
    centre turn, whose turn record the window is anchored to. A
    window is the centre turn with its neighbours (±1) of the *same exchange* — same session, at most
    ``WINDOW_MAX_GAP_S`` apart — so a question that needs the context of a reply ("…and what did she say about
    it?") still finds the turn, while independent notes (memories days apart) are never blended. A window is
    made once its centre has a successor, and only when it has a neighbour; a turn without one is searched by
    its turn record alone.
    ``turn_ids`` lists the centre first, so a window always maps back to its own turn.
    """
    out = []
    for c in range(max(first_center, 0), len(sequence) - 1):
        center = sequence[c]
        members = [sequence[j] for j in (c - 1, c, c + 1)
                   if 0 <= j < len(sequence) and _same_exchange(sequence[j], center)]
        if len(members) < 2:
            continue
        text = " ".join(index_text(m["content"], speaker=m["speaker"], tool_calls=m["tool_calls"]) for m in members)
        out.append({
            "id": new_id("win"),
            "kind": "window",
            "text": text,
            "index_text": text,
            "ref_ts": center["ts"],
            "turn_ids": [center["id"]] + [m["id"] for m in members if m is not center],
            "source_role": center.get("role"),
            "speaker": center["speaker"],
            "session_id": center["session_id"],
            "anchor_turn_id": center["id"],
        })
    return out
