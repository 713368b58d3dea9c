"""The turn view and the text helpers the derivations of :mod:`memory_ext.ingest.kinds` share.

A :class:`TurnView` is a stored turn as the rules read it (role, speaker, content, time, session, tool calls);
:func:`make_record` builds one derived record (a :class:`~memory_ext.ingest.derive.DerivedRecord`).

>>> t = view_turn({"id": "t1", "role": "user", "content": "Hi", "ts": 1.0, "session_id": "s"}, 0)
>>> t.role, t.calls, clean("  a  long   text ,", 100)
('user', [], 'a long text')
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Final

from memory_ext.ingest.derive import DerivedRecord, IngestTurn, new_id
from memory_ext.models import RecordKind
from memory_ext.text.sentences import sentences

if TYPE_CHECKING:
    from memory_ext.ingest.claims import Claim

__all__ = ["TurnView", "ToolCall", "make_record", "view_turn"]

#: How far (in turns) a request, a tool call or a fix may be from the turn that uses it.
LOOKBACK: Final = 8
LOOKAHEAD: Final = 8
TEXT_MAX_CHARS: Final = 240
ASSISTANT_NAMES: Final = frozenset({"assistant", "ai", "bot", "agent", "system", "tool", "model", "助手"})


@dataclass(slots=True)
class ToolCall:
    name: str
    args: dict[str, Any] | None
    call_id: str | None
    error: str | None  # an error embedded in the call dict
    result: Any = None  # a result embedded in the call dict


@dataclass(slots=True)
class TurnView:
    index: int
    id: str
    role: str
    speaker: str | None
    content: str
    ts: float | None
    session: Any
    calls: list[ToolCall] = field(default_factory=list)
    metadata: Mapping[str, Any] = field(default_factory=dict)
    is_error: bool = False
    """A tool result its face flagged as an error (``ToolMessage.status="error"``, LlamaIndex ``is_error``, MCP
    ``isError``), whatever its text says."""


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _parse_args(raw: Any) -> dict[str, Any] | None:
    if isinstance(raw, str):
        s = raw.strip()
        if not s.startswith("{") or len(s) > 20000:
            return None
        try:
            raw = json.loads(s)
        except ValueError:
            return None
    return dict(raw) if isinstance(raw, Mapping) else None


def _calls(raw: Any) -> list[ToolCall]:
    if not isinstance(raw, (list, tuple)):
        return []
    out = []
    for c in raw[:32]:
        if not isinstance(c, Mapping):
            continue
        fn = c.get("function")
        name = c.get("name") or c.get("tool") or c.get("tool_name")
        if not name and isinstance(fn, Mapping):
            name = fn.get("name")
        elif not name and isinstance(fn, str):
            name = fn
        if not isinstance(name, str) or not name.strip():
            continue
        args = c.get("arguments", c.get("args", c.get("input")))
        if args is None and isinstance(fn, Mapping):
            args = fn.get("arguments")
        err = c.get("error")
        if isinstance(err, Mapping):
            err = err.get("message") or err.get("type") or json.dumps(err, default=str)[:200]
        status = c.get("status")
        if not err and isinstance(status, str) and status.lower() in ("error", "failed", "failure", "timeout"):
            err = status
        call_id = c.get("id") or c.get("call_id") or c.get("tool_call_id")
        out.append(ToolCall(name.strip()[:80], _parse_args(args), str(call_id) if call_id else None,
                         str(err)[:300] if err else None, c.get("result", c.get("output"))))
    return out


def view_turn(raw: IngestTurn | Mapping[str, Any] | Any, index: int) -> TurnView | None:
    """The rules' view of one turn (an :class:`~memory_ext.ingest.derive.IngestTurn` or a mapping with its
    fields); None for a malformed one."""
    if isinstance(raw, IngestTurn):
        raw = raw.as_row()
    if not isinstance(raw, Mapping):
        return None
    tid = raw.get("id")
    if not isinstance(tid, str) or not tid:
        return None
    ts = raw.get("ts")
    if isinstance(ts, datetime):
        ts = (ts if ts.tzinfo else ts.replace(tzinfo=UTC)).timestamp()
    elif isinstance(ts, bool) or not isinstance(ts, (int, float)) or ts != ts:
        ts = None
    speaker = raw.get("speaker")
    meta = raw.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    return TurnView(index=index, id=tid, role=_str(raw.get("role")).strip().lower() or "user",
              speaker=speaker.strip() or None if isinstance(speaker, str) else None,
              content=_str(raw.get("content")), ts=float(ts) if ts is not None else None,
              session=raw.get("session_id"), calls=_calls(raw.get("tool_calls")),
              metadata=meta, is_error=error_flag(raw, meta))


_ERROR_STATUSES: Final = frozenset({"error", "failed", "failure", "timeout"})


def error_flag(raw: Mapping[str, Any], meta: Mapping[str, Any]) -> bool:
    """True when a turn is flagged as a failed tool result: ``is_error`` (the turn's field or its metadata's),
    ``isError`` (MCP) or ``status`` ``"error"`` (LangChain's ``ToolMessage.status``) in its metadata.

    >>> error_flag({}, {"status": "error"}), error_flag({"is_error": True}, {}), error_flag({}, {"status": "ok"})
    (True, True, False)
    """
    for src in (raw, meta):
        for key in ("is_error", "isError"):
            if src.get(key) is True:
                return True
        status = src.get("status")
        if isinstance(status, str) and status.strip().lower() in _ERROR_STATUSES:
            return True
    return False


# ------------------------------------------------------------------------------------------ shared text helpers

SPACE_RE: Final = re.compile(r"\s+")
FENCE_RE: Final = re.compile(r"```[^\n]*\n?(.*?)(?:```|\Z)", re.DOTALL)
INLINE_CODE_RE: Final = re.compile(r"`([^`\n]{2,120})`")
CHAT_RE: Final = re.compile(
    r"^(?:\W|_|ok|okay|k|sure|yes|yeah|yep|no problem|thanks|thank you|thx|cheers|great|cool|nice|awesome|perfect"
    r"|hi|hello|hey|bye|lol|haha|wow|got it|sounds good"
    r"|好的|好|嗯|谢谢|多谢|哈哈|收到|明白|没问题|你好|再见|可以|行)+$",
    re.IGNORECASE,
)
_DANGLING: Final = frozenset(
    "a an the on of in at to for with from by and or but my our your this that last next is are was were be as "
    "so very really just".split())


def clean(text: str, limit: int = 100) -> str:
    text = SPACE_RE.sub(" ", text).strip(" \t,;:，；：、-–—\"“”")
    if len(text) > limit:
        cut = text[:limit]
        space = cut.rfind(" ")
        text = (cut[:space] if space > limit // 2 else cut).rstrip(" ,;:") + "…"
    return text


def trim_words(text: str, max_words: int = 8) -> str:
    words = text.split()
    if len(words) > max_words:
        words = words[:max_words]
    while words and words[-1].lower().strip(",.;:") in _DANGLING:
        words.pop()
    return " ".join(words).strip(" ,;:.!")


def sentences_of(text: str) -> list[str]:
    """The sentences of ``text`` with their end punctuation: every ``.`` and ``;`` ends one here."""
    return [s.text for s in sentences(text, hard=".!?…。！？；;", soft="", merge=True) if s.body]


def is_chitchat(t: TurnView) -> bool:
    if t.calls or t.role == "tool":
        return False
    s = t.content.strip()
    return not s or (len(s) <= 40 and bool(CHAT_RE.match(s)))


def same_session(a: TurnView, b: TurnView) -> bool:
    return a.session == b.session


def make_record(kind: str, source: TurnView, text: str, index_text: str, context: Sequence[TurnView], tags: list[str],
            entities: list[str], claims: Sequence[Claim] = ()) -> DerivedRecord:
    """A derived record of ``kind`` anchored to ``source``; ``context``: the other turns it draws on."""
    turn_ids = [source.id]
    for c in context:
        if c.id not in turn_ids:
            turn_ids.append(c.id)
    prefix = {"failure_pattern": "fail", "procedure": "proc"}.get(kind, kind[:4])
    return DerivedRecord(
        id=new_id(prefix), kind=RecordKind(kind), text=text[:TEXT_MAX_CHARS],
        index_text=SPACE_RE.sub(" ", index_text).strip(), ref_ts=source.ts, turn_ids=turn_ids,
        source_role=source.role, speaker=source.speaker, session_id=source.session, anchor_turn_id=source.id,
        tags=list(dict.fromkeys(t for t in tags if t)), entities=list(dict.fromkeys(e for e in entities if e)),
        claims=tuple(claims))
