"""The rows the truth store hands back, the same on every backend (no driver import).

>>> turn_row((1, "t1", 0, None, "user", None, "hi", None, None, "[]", "[]", "{}", 1, None)).content
'hi'
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from ..models import Turn
from ..validate import stored_json

__all__ = ["TURN_COLS", "TURN_NCOLS", "RecordRow", "TurnRow", "turn_row"]


@dataclass(frozen=True, slots=True)
class TurnRow:
    """A stored turn, as the engine reads it back."""

    tid: int
    id: str
    seq: int
    session_id: str | None
    role: str
    speaker: str | None
    content: str
    ts: float | None
    external_id: str | None
    tool_calls: list[dict[str, Any]]
    attachments: list[dict[str, Any]]
    metadata: dict[str, Any]
    token_count: int
    record_rid: int | None = None
    """The rid of the turn's own record (its position in the catalog decides whether a search may show it)."""

    def to_turn(self) -> Turn:
        """The public :class:`~memory_ext.models.Turn` of this row."""
        return Turn(role=self.role, content=self.content, speaker=self.speaker, session_id=self.session_id,
                    timestamp=datetime.fromtimestamp(self.ts, UTC) if self.ts is not None else None,
                    external_id=self.external_id, tool_calls=tuple(self.tool_calls),
                    attachments=tuple(self.attachments), metadata=self.metadata, id=self.id)


@dataclass(frozen=True, slots=True)
class RecordRow:
    """A stored record, as the read path needs it."""

    rid: int
    id: str
    kind: str
    text: str
    turn_ids: list[str]
    source_role: str | None
    speaker: str | None
    session_id: str | None
    ref_ts: float | None


# "+ns_id" keeps the namespace check but stops SQLite from scanning the namespace's index instead of using the
# primary key: a lookup of k rows stays O(k) however large the namespace is.
TURN_COLS = ("tid, id, seq, session_id, role, speaker, content, ts, external_id, tool_calls, attachments, metadata,"
             " token_count, record_rid")
TURN_NCOLS = len(TURN_COLS.split(","))
"""How many columns :data:`TURN_COLS` selects (a query that selects more reads its own after them)."""


def turn_row(r: Sequence[Any]) -> TurnRow:
    # the JSON columns are repaired as they are read (memory_ext.validate.stored_json): a row an older version
    # stored with a lone surrogate, NaN or deep nesting reads back as values every face can serialise
    return TurnRow(int(r[0]), r[1], int(r[2]), r[3], r[4], r[5], r[6], r[7], r[8], stored_json(r[9], list),
                   stored_json(r[10], list), stored_json(r[11], dict), int(r[12]),
                   int(r[13]) if r[13] is not None else None)

