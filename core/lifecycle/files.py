"""Memory files and their index hooks, in the truth store (SQLite tables ``files`` and ``file_turns``).

A *memory file* is a run of a namespace's turns frozen together: ``daily`` files as turns arrive, ``weekly``
files merged from the daily files of one ISO week, ``monthly`` files kept by the monthly eviction, and
``context`` files saved by ``pre_compress``. Files never live on the file system: ids (of namespaces, sessions,
hooks) never become paths. A file lists its turns by reference (``file_turns``: position, turn, character range),
so merging copies no text and a turn is stored once however many files hold it.

Archiving (``archive_turns``) follows the namespace's current daily file of the turn's UTC day: a turn is
appended whole, and the file closes when it reaches the soft token threshold (after the turn: the soft threshold
waits for a turn to finish). A turn that would push the file past the hard threshold (1.5 x soft) is cut there:
the file keeps the first part, is marked ``truncated`` and closes, and the rest continues in the next file.

The hook of a file (title, abstract, key facts, entities, tags, importance, access count) lives in the same row.
Hooks are refreshed lazily: a write marks the file's hook stale and the next reader that needs it recomputes it.

This module decides; the rows are read and written by :mod:`memory_ext.store.memory_files`.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Sequence
from datetime import UTC, date, datetime
from typing import Any

from ..models import IndexHook, Namespace, Turn
from ..store.interface import Connection
from ..store.memory_files import (
    FileRow,
    Member,
    append_members,
    close_earlier_dailies,
    close_file,
    get_file,
    grow_spans,
    insert_file,
    next_daily_part,
    next_position,
    open_daily_file,
)
from ..text import estimate_tokens

__all__ = [
    "HARD_FACTOR",
    "FileRow",
    "archive_turns",
    "day_key",
    "get_file",
    "hook_model",
    "iso_week_key",
    "member_turn",
    "month_key_of_week",
    "render_file",
    "week_bounds",
]
# FileRow and get_file are re-exported for lifecycle/forget.py and lifecycle/forgetting.py until their SQL moves
# to store/ too; everything else imports them from store.memory_files.

HARD_FACTOR = 1.5
"""The hard threshold of a daily file is ``HARD_FACTOR`` x the soft one."""


# -- periods -----------------------------------------------------------------------------------------------------
def _utc_date(ts: float) -> date:
    return datetime.fromtimestamp(ts, UTC).date()


def day_key(ts: float) -> str:
    """``YYYY-MM-DD`` of a POSIX time, in UTC.

    >>> day_key(0.0)
    '1970-01-01'
    """
    return _utc_date(ts).isoformat()


def iso_week_key(d: date) -> str:
    """``YYYY-Www`` (ISO 8601 week) of a date.

    >>> iso_week_key(date(2026, 1, 1))
    '2026-W01'
    >>> iso_week_key(date(2027, 1, 1))
    '2026-W53'
    """
    year, week, _ = d.isocalendar()
    return f"{year}-W{week:02d}"


def week_bounds(week: str) -> tuple[date, date]:
    """Monday and Sunday of an ISO week key; raises ValueError for a malformed key."""
    year, _, w = week.partition("-W")
    monday = date.fromisocalendar(int(year), int(w), 1)
    return monday, date.fromisocalendar(int(year), int(w), 7)


def month_key_of_week(week: str) -> str:
    """The month an ISO week belongs to: the month of its Thursday (so every week has exactly one month).

    >>> month_key_of_week("2026-W05")
    '2026-01'
    """
    year, _, w = week.partition("-W")
    thursday = date.fromisocalendar(int(year), int(w), 4)
    return f"{thursday.year:04d}-{thursday.month:02d}"


# -- archiving -----------------------------------------------------------------------------------------------
def _cut_point(text: str, start: int, n: int) -> int:
    """``start + n``, moved back to a whitespace or sentence boundary when one lies in the last 20 %."""
    end = min(len(text), start + max(1, n))
    if end >= len(text):
        return end
    floor = start + max(1, int(n * 0.8))
    for i in range(end, floor, -1):
        if text[i - 1] in " \n\t。！？；.!?;,，":
            return i
    return end


def archive_turns(conn: Connection, ns_id: int, turns: Sequence[tuple[int, float, str]], *,
                  soft_tokens: int) -> set[int]:
    """Append turns ``(tid, ts, content)`` (in order) to the namespace's daily files; returns the touched fids."""
    hard = max(1, math.floor(soft_tokens * HARD_FACTOR))
    touched: set[int] = set()
    current: dict[str, list[Any]] = {}  # day -> [fid, token_count, next_pos]
    members: list[tuple[int, int, int, int, int | None]] = []  # file_turns rows to insert
    spans: dict[int, list[Any]] = {}  # fid -> [token_count, first ts, last ts] of what this call added
    for tid, ts, content in turns:
        day = day_key(ts)
        start = 0
        first = True
        while first or start < len(content):
            first = False
            state = current.get(day)
            if state is None:
                row = open_daily_file(conn, ns_id, day)
                if row is None:
                    # a turn of a later day closes the daily files of earlier days that are still open
                    close_earlier_dailies(conn, ns_id, day, time.time())
                    part = next_daily_part(conn, ns_id, day)
                    f = insert_file(conn, ns_id, period="daily", period_key=day, status="open", part=part)
                    row = (f.fid, 0)
                state = current[day] = [row[0], row[1], next_position(conn, row[0])]
            fid, used, pos = state
            rest = content[start:]
            need = estimate_tokens(rest)
            truncated = False
            if used + need <= hard:
                stop = None
                used += need
            else:
                room = max(1, hard - used)
                stop = _cut_point(content, start, max(1, len(rest) * room // max(need, 1)))
                used += estimate_tokens(content[start:stop])
                truncated = True
            members.append((fid, pos, tid, start, stop))
            span = spans.setdefault(fid, [used, None, None])
            span[0] = used
            if ts is not None:
                span[1] = ts if span[1] is None else min(span[1], ts)
                span[2] = ts if span[2] is None else max(span[2], ts)
            touched.add(fid)
            state[1], state[2] = used, pos + 1
            if truncated or used >= soft_tokens:
                close_file(conn, fid, truncated=truncated, when=time.time())
                del current[day]
            start = len(content) if stop is None else stop
    # one statement per table, not per turn (what a file gained: its members, its size and time span)
    append_members(conn, members)
    grow_spans(conn, spans)
    return touched


# -- hooks ---------------------------------------------------------------------------------------------------
def _dt(ts: float | None) -> datetime | None:
    return datetime.fromtimestamp(ts, UTC) if ts is not None else None


def hook_model(row: FileRow, namespace: Namespace) -> IndexHook:
    return IndexHook(
        id=row.id, namespace=namespace, period=row.period, period_key=row.period_key,  # type: ignore[arg-type]
        status=row.status, title=row.title, abstract=row.abstract, key_facts=tuple(row.key_facts),
        entities=tuple(row.entities), tags=tuple(row.tags), importance=row.importance,
        access_count=row.access_count, token_count=row.token_count, truncated=row.truncated,
        start=_dt(row.start_ts), end=_dt(row.end_ts), archived_at=_dt(row.archived_at), sources=tuple(row.sources),
        merged_into=row.merged_into, summary_source=row.summary_source or "heuristic")


def member_turn(m: Member) -> Turn:
    """A file member as a public :class:`Turn` (a cut part says which characters it holds)."""
    t = m.turn
    meta = dict(t.metadata)
    if not m.whole:
        meta["part"] = {"start": m.start, "stop": m.stop if m.stop is not None else len(t.content),
                        "of": len(t.content)}
    return Turn(role=t.role, content=m.text, speaker=t.speaker, session_id=t.session_id,
                timestamp=_dt(t.ts), external_id=t.external_id, tool_calls=tuple(t.tool_calls),
                attachments=tuple(t.attachments), metadata=meta, id=t.id)


def render_file(row: FileRow, members: Sequence[Member]) -> str:
    """A file as Markdown: its hook, then every turn with time, speaker, tool calls and attachments."""
    lines = [f"# {row.title or row.period_key} ({row.period} {row.period_key}, hook {row.id})"]
    if row.abstract:
        lines += ["", row.abstract]
    if row.key_facts:
        lines += [""] + [f"- {f}" for f in row.key_facts]
    lines.append("")
    for m in members:
        t = m.turn
        stamp = datetime.fromtimestamp(t.ts, UTC).strftime("%Y-%m-%d %H:%M") if t.ts is not None else "undated"
        who = t.speaker or t.role
        cut = "" if m.whole else f" [part {m.start}-{m.stop if m.stop is not None else len(t.content)}]"
        lines.append(f"## {stamp} {who} ({t.role}){cut}")
        lines.append(m.text)
        for call in t.tool_calls:
            lines.append("tool call: " + json.dumps(call, ensure_ascii=False, default=str))
        for att in t.attachments:
            lines.append("attachment: " + json.dumps(att, ensure_ascii=False, default=str))
        lines.append("")
    if row.truncated:
        lines.append("(this file was cut at its hard token threshold; the turn continues in the next file)")
    return "\n".join(lines).rstrip() + "\n"
