"""Tool calls and tool results as readable lines, the one rendering the prompt context and the action state use.

An assistant turn that only calls tools reads ``assistant → book_hotel(check_in="14/04/2026")``; a tool turn
reads ``tool book_hotel (error): HTTP 422 …``. The calls are parsed by :func:`memory_ext.ingest.turns.view_turn`
(OpenAI ``{"function": {"name", "arguments"}}``, LangChain ``{"name", "args", "id"}``, MCP ``{"name", "input"}``).

>>> turn_line("assistant", None, "", [{"name": "book_hotel", "args": {"check_in": "14/04/2026", "nights": 2}}])
'assistant → book_hotel(check_in="14/04/2026", nights=2)'
>>> turn_line("tool", None, "HTTP 422: check_in must be YYYY-MM-DD", (),
...           {"tool_name": "book_hotel", "is_error": True})
'tool book_hotel (error): HTTP 422: check_in must be YYYY-MM-DD'
>>> turn_line("user", "Ana", "Book me a room", ())
'Ana: Book me a room'
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Final

from .turns import ToolCall, view_turn

__all__ = ["ARG_MAX_CHARS", "CALL_MAX_CHARS", "calls_text", "format_call", "parse_calls", "spoken_text", "turn_line"]

ARG_MAX_CHARS: Final = 80
"""An argument value longer than this is cut (with ``…``) in a rendered call."""
CALL_MAX_CHARS: Final = 300
"""A rendered call's arguments longer than this are cut (with ``…``)."""


def parse_calls(tool_calls: Sequence[Mapping[str, Any]]) -> list[ToolCall]:
    """The tool calls of a turn's ``tool_calls``, whatever framework's shape they have (malformed ones dropped).

    >>> [(c.name, c.args, c.call_id) for c in parse_calls([{"type": "function", "id": "c1", "function": {
    ...     "name": "book_hotel", "arguments": '{"city": "Lisbon"}'}}])]
    [('book_hotel', {'city': 'Lisbon'}, 'c1')]
    """
    view = view_turn({"id": "-", "role": "assistant", "content": "", "tool_calls": list(tool_calls)}, 0)
    return view.calls if view is not None else []


def _value(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= ARG_MAX_CHARS else text[:ARG_MAX_CHARS - 1] + "…"


def format_call(name: str, args: Mapping[str, Any] | None) -> str:
    """``name(key=value, …)`` with JSON values, each cut at :data:`ARG_MAX_CHARS`, all at :data:`CALL_MAX_CHARS`.

    >>> format_call("search_flights", {"from": "LIS", "date": "2026-04-14", "flexible": True})
    'search_flights(from="LIS", date="2026-04-14", flexible=true)'
    """
    inner = ", ".join(f"{k}={_value(v)}" for k, v in (args or {}).items())
    if len(inner) > CALL_MAX_CHARS:
        inner = inner[:CALL_MAX_CHARS - 1] + "…"
    return f"{name}({inner})"


def calls_text(tool_calls: Sequence[Mapping[str, Any]]) -> str:
    """The calls of a turn as text (``name(key=value, …)``, ``; ``-joined): what a search item of a turn that
    only calls tools shows as its ``text``, so it never reads empty.

    >>> calls_text([{"name": "book_hotel", "args": {"check_in": "2026-04-14"}}])
    'book_hotel(check_in="2026-04-14")'
    """
    return "; ".join(format_call(c.name, c.args) for c in parse_calls(tool_calls))


def spoken_text(text: str, tool_calls: Sequence[Mapping[str, Any]]) -> str:
    """A search item's own words: ``""`` for an item of a turn that only calls tools (its ``text`` is
    :func:`calls_text`), else ``text``. Renderers that show the calls themselves use it, so a call is shown once.

    >>> calls = [{"name": "book_hotel", "args": {"nights": 2}}]
    >>> spoken_text("book_hotel(nights=2)", calls), spoken_text("On it.", calls)
    ('', 'On it.')
    """
    return "" if tool_calls and text == calls_text(tool_calls) else text


def turn_line(role: str, speaker: str | None, content: str, tool_calls: Sequence[Mapping[str, Any]],
              metadata: Mapping[str, Any] | None = None) -> str:
    """One turn as a readable line without its time: ``who: text``; a turn's tool calls follow ``→``; a tool
    turn names its tool (``metadata["tool_name"]``, else the speaker) and says ``(error)`` when its result is
    flagged as one (``metadata["is_error"]``, as :meth:`memory_ext.Turn.stored_metadata` stores it)."""
    meta = metadata or {}
    text = content  # as stored: the context shows a turn's text verbatim
    if role == "tool":
        name = meta.get("tool_name") if isinstance(meta.get("tool_name"), str) else None
        name = name or speaker
        label = "tool" + (f" {name}" if name and name != "tool" else "") + (" (error)" if meta.get("is_error")
                                                                             is True else "")
        return f"{label}: {text}"
    who = speaker or role or "memory"
    calls = parse_calls(tool_calls) if tool_calls else []
    if not calls:
        return f"{who}: {text}"
    shown = "; ".join(format_call(c.name, c.args) for c in calls)
    return f"{who}: {text} → {shown}" if text.strip() else f"{who} → {shown}"
