"""The SQL of the memory files (tables ``files`` and ``file_turns``): rows, members, hooks, archiving and
compaction steps.

What a file is, when a daily file closes or is cut, what a merge keeps and what an eviction scores are decided in
:mod:`memory_ext.lifecycle.files` and :mod:`memory_ext.lifecycle.compact`; this module only reads and writes the
rows they decide on. Every statement is accepted by SQLite and by the PostgreSQL store's connection
(:mod:`memory_ext.store.pg.dialect`), and runs on the connection it is given (the caller's transaction).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .interface import Connection
from .rows import TurnRow
from .snapshots import chunks, marks

__all__ = [
    "FileRow",
    "Member",
    "append_members",
    "close_earlier_dailies",
    "close_file",
    "count_access",
    "file_raw",
    "file_turns",
    "files_of_turns",
    "get_file",
    "grow_spans",
    "insert_file",
    "list_files",
    "mark_merged",
    "merge_sources",
    "new_file_id",
    "next_daily_part",
    "next_position",
    "open_daily_file",
    "resolve_file",
    "set_compaction",
    "set_file_importance",
    "set_members",
    "set_sources",
    "write_hook",
]

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


# -- rows ----------------------------------------------------------------------------------------------------
def insert_file(conn: Connection, ns_id: int, *, period: str, period_key: str, status: str, part: int = 1,
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


def get_file(conn: Connection, *, fid: int | None = None, file_id: str | None = None,
             ns_id: int | None = None) -> FileRow | None:
    if fid is not None:
        r = conn.execute(f"SELECT {_FILE_COLS} FROM files WHERE fid=?", (fid,)).fetchone()
    else:
        r = conn.execute(f"SELECT {_FILE_COLS} FROM files WHERE id=?", (file_id,)).fetchone()
    row = _file_row(r) if r else None
    if row is not None and ns_id is not None and row.ns_id != ns_id:
        return None
    return row


def list_files(conn: Connection, ns_id: int, *, period: str | None = None,
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


def resolve_file(conn: Connection, hook_id: str, ns_id: int | None = None) -> tuple[FileRow | None, list[str]]:
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


def count_access(conn: Connection, fid: int, when: float) -> None:
    """One more access of a file (the monthly eviction counts them)."""
    conn.execute("UPDATE files SET access_count = access_count + 1, last_access=? WHERE fid=?", (when, fid))


def file_raw(conn: Connection, fid: int) -> str | None:
    """The verbatim context a ``pre_compress`` file keeps (None for other files)."""
    row = conn.execute("SELECT raw FROM files WHERE fid=?", (fid,)).fetchone()
    return None if row is None else row[0]


def set_file_importance(conn: Connection, fid: int, importance: int) -> None:
    """A user-set importance (kept by merges)."""
    conn.execute("UPDATE files SET importance=?, importance_set=1 WHERE fid=?", (importance, fid))


def write_hook(conn: Connection, fid: int, *, title: str, abstract: str, key_facts: Sequence[str],
               entities: Sequence[str], tags: Sequence[str], importance: int, source: str,
               meta: Mapping[str, Any]) -> None:
    """Store a recomputed hook (the hook is fresh again)."""
    conn.execute("UPDATE files SET title=?, abstract=?, key_facts=?, entities=?, tags=?, importance=?,"
                 " summary_source=?, meta=?, hook_stale=0 WHERE fid=?",
                 (title, abstract, json.dumps(list(key_facts), ensure_ascii=False),
                  json.dumps(list(entities), ensure_ascii=False), json.dumps(list(tags)), int(importance), source,
                  json.dumps(dict(meta), default=str), fid))


# -- members -------------------------------------------------------------------------------------------------
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


def file_turns(conn: Connection, fid: int) -> list[Member]:
    """The members of a file, in order."""
    from .rows import TURN_COLS as _TURN_COLS
    from .rows import TURN_NCOLS
    from .rows import turn_row as _turn_row

    cols = ", ".join(f"t.{c.strip()}" for c in _TURN_COLS.split(","))
    rows = conn.execute(
        f"SELECT {cols}, ft.start, ft.stop FROM file_turns ft JOIN turns t ON t.tid = ft.tid"
        " WHERE ft.fid=? ORDER BY ft.pos", (fid,)).fetchall()
    return [Member(_turn_row(r[:TURN_NCOLS]), int(r[TURN_NCOLS]), r[TURN_NCOLS + 1]) for r in rows]


def set_members(conn: Connection, fid: int, members: Sequence[tuple[int, int, int | None]],
                token_count: int) -> None:
    """Replace a file's membership with ``(tid, start, stop)`` rows and update its span and token count."""
    conn.execute("DELETE FROM file_turns WHERE fid=?", (fid,))
    conn.executemany("INSERT INTO file_turns(fid, pos, tid, start, stop) VALUES(?,?,?,?,?)",
                     [(fid, i, tid, start, stop) for i, (tid, start, stop) in enumerate(members)])
    span = conn.execute("SELECT MIN(t.ts), MAX(t.ts) FROM file_turns ft JOIN turns t ON t.tid = ft.tid"
                        " WHERE ft.fid=?", (fid,)).fetchone()
    conn.execute("UPDATE files SET token_count=?, start_ts=?, end_ts=?, hook_stale=1 WHERE fid=?",
                 (token_count, span[0], span[1], fid))


def files_of_turns(conn: Connection, ns_id: int, turn_ids: Sequence[str]) -> list[tuple[str, str]]:
    """``(file id, turn id)`` of every file of the namespace holding one of the turns."""
    out: list[tuple[str, str]] = []
    for part in chunks(list(turn_ids)):
        out += conn.execute(
            "SELECT f.id, t.id FROM file_turns ft JOIN files f ON f.fid = ft.fid JOIN turns t ON t.tid = ft.tid"
            f" WHERE f.ns_id=? AND t.id IN {marks(len(part))}", (ns_id, *part)).fetchall()
    return out


# -- archiving (the statements of lifecycle.files.archive_turns) ------------------------------------------------
def open_daily_file(conn: Connection, ns_id: int, day: str) -> tuple[int, int] | None:
    """``(fid, token_count)`` of the namespace's open daily file of ``day`` (its last part), if any."""
    row = conn.execute(
        "SELECT fid, token_count FROM files WHERE ns_id=? AND period='daily' AND period_key=?"
        " AND status='open' ORDER BY part DESC LIMIT 1", (ns_id, day)).fetchone()
    return None if row is None else (int(row[0]), int(row[1]))


def close_earlier_dailies(conn: Connection, ns_id: int, day: str, when: float) -> None:
    """Close the namespace's daily files of days before ``day`` that are still open."""
    conn.execute("UPDATE files SET status='closed', archived_at=? WHERE ns_id=? AND period='daily'"
                 " AND status='open' AND period_key < ?", (when, ns_id, day))


def next_daily_part(conn: Connection, ns_id: int, day: str) -> int:
    """The part number a new daily file of ``day`` gets (1 for the day's first file)."""
    return int(conn.execute("SELECT COALESCE(MAX(part), 0) + 1 FROM files WHERE ns_id=?"
                            " AND period='daily' AND period_key=?", (ns_id, day)).fetchone()[0])


def next_position(conn: Connection, fid: int) -> int:
    """The position the next member of a file takes."""
    return int(conn.execute("SELECT COALESCE(MAX(pos), -1) + 1 FROM file_turns WHERE fid=?",
                            (fid,)).fetchone()[0])


def close_file(conn: Connection, fid: int, *, truncated: bool, when: float) -> None:
    """Close a daily file (``truncated``: it was cut at its hard threshold)."""
    conn.execute("UPDATE files SET status='closed', truncated=?, archived_at=? WHERE fid=?",
                 (int(truncated), when, fid))


def append_members(conn: Connection, rows: Sequence[tuple[int, int, int, int, int | None]]) -> None:
    """Add ``(fid, pos, tid, start, stop)`` member rows (one statement for the whole batch)."""
    conn.executemany("INSERT INTO file_turns(fid, pos, tid, start, stop) VALUES(?,?,?,?,?)", rows)


def grow_spans(conn: Connection, spans: Mapping[int, Sequence[Any]]) -> None:
    """Per fid ``[token_count, first ts, last ts]`` of what was appended: the new size, the span widened, the hook
    stale."""
    conn.executemany("UPDATE files SET token_count=?, start_ts=MIN(COALESCE(start_ts, ?), ?),"
                     " end_ts=MAX(COALESCE(end_ts, ?), ?), hook_stale=1 WHERE fid=?",
                     [(used, lo, lo, hi, hi, fid) for fid, (used, lo, hi) in spans.items()])


# -- compaction (the statements of lifecycle.compact) ----------------------------------------------------------
def set_sources(conn: Connection, fid: int, sources: Sequence[str], *, close: bool = False) -> None:
    """A merged file's sources (``close``: and it is ``closed`` again, so its month is due again)."""
    if close:
        conn.execute("UPDATE files SET sources=?, status='closed' WHERE fid=?", (json.dumps(list(sources)), fid))
    else:
        conn.execute("UPDATE files SET sources=? WHERE fid=?", (json.dumps(list(sources)), fid))


def set_compaction(conn: Connection, fid: int, *, access_count: int, archived_at: float,
                   meta: Mapping[str, Any]) -> None:
    """What a merge or an eviction gives the file it writes: access count, archive time, its report."""
    conn.execute("UPDATE files SET access_count=?, archived_at=?, meta=? WHERE fid=?",
                 (access_count, archived_at, json.dumps(meta), fid))


def mark_merged(conn: Connection, fids: Sequence[int], into: str, when: float) -> None:
    """Daily files merged into the weekly file ``into`` (their first archive time kept)."""
    conn.executemany("UPDATE files SET status='merged', merged_into=?, archived_at=COALESCE(archived_at, ?)"
                     " WHERE fid=?", [(into, when, fid) for fid in fids])


def merge_sources(conn: Connection, statuses: Mapping[int, str], into: str) -> None:
    """Weekly files given to the monthly file ``into``: each its status (``merged`` or ``evicted``)."""
    conn.executemany("UPDATE files SET status=?, merged_into=? WHERE fid=?",
                     [(status, into, fid) for fid, status in statuses.items()])
