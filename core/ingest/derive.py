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

__all__ = ["derive_turn_record", "index_text", "new_id"]


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
