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
"""

from __future__ import annotations

import json
import math
import sqlite3
import time
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from typing import Any

from ..models import IndexHook, Namespace, Turn
from ..store.snapshots import chunks, marks
from ..store.sqlite import TurnRow
from ..text import estimate_tokens

__all__ = [
    "HARD_FACTOR",
    "FileRow",
    "archive_turns",
    "day_key",
    "file_turns",
    "get_file",
    "hook_model",
    "insert_file",
    "iso_week_key",
    "list_files",
    "month_key_of_week",
    "new_file_id",
    "resolve_file",
    "set_members",
    "week_bounds",
]

HARD_FACTOR = 1.5
"""The hard threshold of a daily file is ``HARD_FACTOR`` x the soft one."""

_FILE_COLS = ("fid, id, ns_id, period, period_key, part, status, truncated, token_count, start_ts, end_ts, sources,"
              " merged_into, meta, title, abstract, key_facts, entities, tags, importance, importance_set,"
              " access_count, summary_source, hook_stale, created_at, archived_at")


@dataclass
class FileRow:
    """One row of ``files`` (the file and its hook)."""

    fid: int
    id: str
    ns_id: int
    period: str
    period_key: str
    part: int
    status: str
    truncated: bool
    token_count: int
    start_ts: float | None
    end_ts: float | None
    sources: list[str]
    merged_into: str | None
    meta: dict[str, Any]
    title: str
    abstract: str
    key_facts: list[str]
    entities: list[str]
    tags: list[str]
    importance: int
    importance_set: bool
    access_count: int
    summary_source: str
    hook_stale: bool
    created_at: float
    archived_at: float | None
    extra: dict[str, Any] = field(default_factory=dict)


def _file_row(r: Sequence[Any]) -> FileRow:
    return FileRow(int(r[0]), r[1], int(r[2]), r[3], r[4], int(r[5]), r[6], bool(r[7]), int(r[8]), r[9], r[10],
                   json.loads(r[11]), r[12], json.loads(r[13]), r[14], r[15], json.loads(r[16]), json.loads(r[17]),
                   json.loads(r[18]), int(r[19]), bool(r[20]), int(r[21]), r[22], bool(r[23]), float(r[24]), r[25])


def new_file_id() -> str:
    """A fresh hook/file id: 16 hex digits (a 6-character prefix is almost always unique)."""
    return uuid.uuid4().hex[:16]


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


# -- rows ----------------------------------------------------------------------------------------------------
def insert_file(conn: sqlite3.Connection, ns_id: int, *, period: str, period_key: str, status: str, part: int = 1,
                sources: Sequence[str] = (), raw: str | None = None, meta: dict[str, Any] | None = None,
                file_id: str | None = None) -> FileRow:
    now = time.time()
    fid = conn.execute(
        "INSERT INTO files(id, ns_id, period, period_key, part, status, sources, raw, meta, created_at)"
        " VALUES(?,?,?,?,?,?,?,?,?,?)",
        (file_id or new_file_id(), ns_id, period, period_key, part, status, json.dumps(list(sources)), raw,
         json.dumps(meta or {}, default=str), now)).lastrowid
    assert fid is not None  # an INSERT always sets lastrowid
    row = get_file(conn, fid=int(fid))
    assert row is not None
    return row


def get_file(conn: sqlite3.Connection, *, fid: int | None = None, file_id: str | None = None,
             ns_id: int | None = None) -> FileRow | None:
    if fid is not None:
        r = conn.execute(f"SELECT {_FILE_COLS} FROM files WHERE fid=?", (fid,)).fetchone()
    else:
        r = conn.execute(f"SELECT {_FILE_COLS} FROM files WHERE id=?", (file_id,)).fetchone()
    row = _file_row(r) if r else None
    if row is not None and ns_id is not None and row.ns_id != ns_id:
        return None
    return row


def list_files(conn: sqlite3.Connection, ns_id: int, *, period: str | None = None,
               statuses: Iterable[str] | None = None, period_key: str | None = None) -> list[FileRow]:
    sql = f"SELECT {_FILE_COLS} FROM files WHERE ns_id=?"
    args: list[Any] = [ns_id]
    if period is not None:
        sql += " AND period=?"
        args.append(period)
    if period_key is not None:
        sql += " AND period_key=?"
        args.append(period_key)
    if statuses is not None:
        st = list(statuses)
        sql += f" AND status IN ({','.join('?' * len(st))})"
        args += st
    sql += " ORDER BY period_key, part, fid"
    return [_file_row(r) for r in conn.execute(sql, args)]


def resolve_file(conn: sqlite3.Connection, hook_id: str, ns_id: int | None = None) -> tuple[FileRow | None, list[str]]:
    """The file a hook id (or a unique prefix of at least 6 characters) names; (None, candidates) otherwise."""
    row = get_file(conn, file_id=hook_id, ns_id=ns_id)
    if row is not None or len(hook_id) < 6:
        return row, []
    escaped = hook_id.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    sql = "SELECT id FROM files WHERE id LIKE ? ESCAPE '\\'"
    args: list[Any] = [escaped + "%"]
    if ns_id is not None:
        sql += " AND ns_id=?"
        args.append(ns_id)
    ids = [r[0] for r in conn.execute(sql + " LIMIT 20", args)]
    if len(ids) == 1:
        return get_file(conn, file_id=ids[0]), []
    return None, ids


@dataclass(frozen=True)
class Member:
    """One turn (or the part of a cut turn) in a file."""

    turn: TurnRow
    start: int
    stop: int | None

    @property
    def text(self) -> str:
        return self.turn.content[self.start:self.stop]

    @property
    def whole(self) -> bool:
        return self.start == 0 and (self.stop is None or self.stop >= len(self.turn.content))


def file_turns(conn: sqlite3.Connection, fid: int) -> list[Member]:
    """The members of a file, in order."""
    from ..store.sqlite import _TURN_COLS, TURN_NCOLS, _turn_row

    cols = ", ".join(f"t.{c.strip()}" for c in _TURN_COLS.split(","))
    rows = conn.execute(
        f"SELECT {cols}, ft.start, ft.stop FROM file_turns ft JOIN turns t ON t.tid = ft.tid"
        " WHERE ft.fid=? ORDER BY ft.pos", (fid,)).fetchall()
    return [Member(_turn_row(r[:TURN_NCOLS]), int(r[TURN_NCOLS]), r[TURN_NCOLS + 1]) for r in rows]


def set_members(conn: sqlite3.Connection, fid: int, members: Sequence[tuple[int, int, int | None]],
                token_count: int) -> None:
    """Replace a file's membership with ``(tid, start, stop)`` rows and update its span and token count."""
    conn.execute("DELETE FROM file_turns WHERE fid=?", (fid,))
    conn.executemany("INSERT INTO file_turns(fid, pos, tid, start, stop) VALUES(?,?,?,?,?)",
                     [(fid, i, tid, start, stop) for i, (tid, start, stop) in enumerate(members)])
    span = conn.execute("SELECT MIN(t.ts), MAX(t.ts) FROM file_turns ft JOIN turns t ON t.tid = ft.tid"
                        " WHERE ft.fid=?", (fid,)).fetchone()
    conn.execute("UPDATE files SET token_count=?, start_ts=?, end_ts=?, hook_stale=1 WHERE fid=?",
                 (token_count, span[0], span[1], fid))


# -- archiving -----------------------------------------------------------------------------------------------
def files_of_turns(conn: sqlite3.Connection, ns_id: int, turn_ids: Sequence[str]) -> list[tuple[str, str]]:
    """``(file id, turn id)`` of every file of the namespace holding one of the turns."""
    out: list[tuple[str, str]] = []
    for part in chunks(list(turn_ids)):
        out += conn.execute(
            "SELECT f.id, t.id FROM file_turns ft JOIN files f ON f.fid = ft.fid JOIN turns t ON t.tid = ft.tid"
            f" WHERE f.ns_id=? AND t.id IN {marks(len(part))}", (ns_id, *part)).fetchall()
    return out


def count_access(conn: sqlite3.Connection, fid: int, when: float) -> None:
    """One more access of a file (the monthly eviction counts them)."""
    conn.execute("UPDATE files SET access_count = access_count + 1, last_access=? WHERE fid=?", (when, fid))


def file_raw(conn: sqlite3.Connection, fid: int) -> str | None:
    """The verbatim context a ``pre_compress`` file keeps (None for other files)."""
    row = conn.execute("SELECT raw FROM files WHERE fid=?", (fid,)).fetchone()
    return None if row is None else row[0]


def set_file_importance(conn: sqlite3.Connection, fid: int, importance: int) -> None:
    """A user-set importance (kept by merges)."""
    conn.execute("UPDATE files SET importance=?, importance_set=1 WHERE fid=?", (importance, fid))


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


def archive_turns(conn: sqlite3.Connection, ns_id: int, turns: Sequence[tuple[int, float, str]], *,
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
                row = conn.execute(
                    "SELECT fid, token_count FROM files WHERE ns_id=? AND period='daily' AND period_key=?"
                    " AND status='open' ORDER BY part DESC LIMIT 1", (ns_id, day)).fetchone()
                if row is None:
                    # a turn of a later day closes the daily files of earlier days that are still open
                    conn.execute("UPDATE files SET status='closed', archived_at=? WHERE ns_id=? AND period='daily'"
                                 " AND status='open' AND period_key < ?", (time.time(), ns_id, day))
                    part = conn.execute("SELECT COALESCE(MAX(part), 0) + 1 FROM files WHERE ns_id=?"
                                        " AND period='daily' AND period_key=?", (ns_id, day)).fetchone()[0]
                    f = insert_file(conn, ns_id, period="daily", period_key=day, status="open", part=int(part))
                    row = (f.fid, 0)
                pos = conn.execute("SELECT COALESCE(MAX(pos), -1) + 1 FROM file_turns WHERE fid=?",
                                   (row[0],)).fetchone()[0]
                state = current[day] = [int(row[0]), int(row[1]), int(pos)]
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
                conn.execute("UPDATE files SET status='closed', truncated=?, archived_at=? WHERE fid=?",
                             (int(truncated), time.time(), fid))
                del current[day]
            start = len(content) if stop is None else stop
    # one statement per table, not per turn (what a file gained: its members, its size and time span)
    conn.executemany("INSERT INTO file_turns(fid, pos, tid, start, stop) VALUES(?,?,?,?,?)", members)
    conn.executemany("UPDATE files SET token_count=?, start_ts=MIN(COALESCE(start_ts, ?), ?),"
                     " end_ts=MAX(COALESCE(end_ts, ?), ?), hook_stale=1 WHERE fid=?",
                     [(used, lo, lo, hi, hi, fid) for fid, (used, lo, hi) in spans.items()])
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
