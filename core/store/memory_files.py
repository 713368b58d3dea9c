"""The SQL of the memory files (tables ``files`` and ``file_turns``): rows, members, hooks, archiving and
compaction steps.

What a file is, when a daily file closes or is cut, what a merge keeps and what an eviction scores are decided in
:mod:`memory_ext.lifecycle.files` and :mod:`memory_ext.lifecycle.compact`; this module only reads and writes the
rows they decide on. Each backend writes the statements in its own dialect (:class:`FilesSql`,
:mod:`memory_ext.store.statements`); every one runs on the connection it is given (the caller's transaction).
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
from .snapshots import chunks
from .statements import sql_of

__all__ = [
    "FILE_COLS",
    "FileRow",
    "FilesSql",
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

FILE_COLS = ("fid, id, ns_id, period, period_key, part, status, truncated, token_count, start_ts, end_ts, sources,"
              " merged_into, meta, title, abstract, key_facts, entities, tags, importance, importance_set,"
              " access_count, summary_source, hook_stale, created_at, archived_at")
"""The columns a :class:`FileRow` is read from."""


@dataclass(frozen=True)
class FilesSql:
    """The statements of ``files`` and ``file_turns``, as each backend writes them
    (:mod:`memory_ext.store.statements`). ``{marks}``: a template's ``IN`` list (``sql.marks(n)``);
    FILE_COLS: :data:`FILE_COLS`."""

    insert_file: str
    """``(id, ns_id, period, period_key, part, status, sources, raw, meta, created_at)`` -> the new ``fid``
    (``RETURNING``)."""
    file_by_fid: str
    """``(fid,)`` -> FILE_COLS."""
    file_by_id: str
    """``(id,)`` -> FILE_COLS."""
    list_files: str
    """``(ns_id,)`` -> FILE_COLS (a prefix: :func:`list_files` adds conditions and the order)."""
    ids_like: str
    """``(pattern,)`` -> ids matching a ``LIKE`` pattern (``\\`` escapes; any letter case), a prefix."""
    count_access: str
    """``(when, fid)``: one more access."""
    file_raw: str
    """``(fid,)`` -> ``raw``."""
    set_importance: str
    """``(importance, fid)``: a user-set importance."""
    write_hook: str
    """``(title, abstract, key_facts, entities, tags, importance, summary_source, meta, fid)``: a fresh hook."""
    members: str
    """``(fid,)`` -> TURN_COLS of ``turns t``, ``start, stop`` of the file's members in order."""
    replaced_members: str
    """``(fid,)`` -> ``tid`` of the file's members an update replaced (``MemoryEngine.update``)."""
    delete_members: str
    """``(fid,)``: the file's membership."""
    insert_member: str
    """``(fid, pos, tid, start, stop)``."""
    member_span: str
    """``(fid,)`` -> first and last ``ts`` of the file's members."""
    set_span: str
    """``(token_count, start_ts, end_ts, fid)``: the hook goes stale."""
    files_of_turns: str
    """``{marks}`` template, ``(ns_id, *turn ids)`` -> ``file id, turn id``."""
    open_daily: str
    """``(ns_id, day)`` -> ``fid, token_count`` of the day's open daily file (its last part)."""
    close_earlier: str
    """``(when, ns_id, day)``: close the open daily files of earlier days."""
    next_part: str
    """``(ns_id, day)`` -> the part number of the day's next daily file."""
    next_position: str
    """``(fid,)`` -> the position of the file's next member."""
    close_file: str
    """``(truncated, when, fid)``."""
    grow_span: str
    """``(token_count, first ts, first ts, last ts, last ts, fid)``: the span widened, the hook stale."""
    set_sources: str
    """``(sources, fid)``."""
    set_sources_closed: str
    """``(sources, fid)``, and the file is ``closed`` again."""
    set_compaction: str
    """``(access_count, archived_at, meta, fid)``."""
    mark_merged: str
    """``(into, when, fid)``: a daily file merged (its first archive time kept)."""
    merge_source: str
    """``(status, into, fid)``."""


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
        sql_of(conn).files.insert_file,
        (file_id or new_file_id(), ns_id, period, period_key, part, status, json.dumps(list(sources)), raw,
         json.dumps(meta or {}, default=str), now)).fetchone()[0]
    row = get_file(conn, fid=int(fid))
    assert row is not None
    return row


def get_file(conn: Connection, *, fid: int | None = None, file_id: str | None = None,
             ns_id: int | None = None) -> FileRow | None:
    sql = sql_of(conn).files
    if fid is not None:
        r = conn.execute(sql.file_by_fid, (fid,)).fetchone()
    else:
        r = conn.execute(sql.file_by_id, (file_id,)).fetchone()
    row = _file_row(r) if r else None
    if row is not None and ns_id is not None and row.ns_id != ns_id:
        return None
    return row


def list_files(conn: Connection, ns_id: int, *, period: str | None = None,
               statuses: Iterable[str] | None = None, period_key: str | None = None) -> list[FileRow]:
    statements = sql_of(conn)
    sql = statements.files.list_files
    args: list[Any] = [ns_id]
    if period is not None:
        sql += f" AND period={statements.mark}"
        args.append(period)
    if period_key is not None:
        sql += f" AND period_key={statements.mark}"
        args.append(period_key)
    if statuses is not None:
        st = list(statuses)
        sql += f" AND status IN ({statements.marks(len(st))})" if st else " AND 1=0"
        args += st
    sql += " ORDER BY period_key, part, fid"
    return [_file_row(r) for r in conn.execute(sql, args)]


def resolve_file(conn: Connection, hook_id: str, ns_id: int | None = None) -> tuple[FileRow | None, list[str]]:
    """The file a hook id (or a unique prefix of at least 6 characters) names; (None, candidates) otherwise."""
    row = get_file(conn, file_id=hook_id, ns_id=ns_id)
    if row is not None or len(hook_id) < 6:
        return row, []
    escaped = hook_id.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    statements = sql_of(conn)
    sql = statements.files.ids_like
    args: list[Any] = [escaped + "%"]
    if ns_id is not None:
        sql += f" AND ns_id={statements.mark}"
        args.append(ns_id)
    ids = [r[0] for r in conn.execute(sql + " LIMIT 20", args)]
    if len(ids) == 1:
        return get_file(conn, file_id=ids[0]), []
    return None, ids


def count_access(conn: Connection, fid: int, when: float) -> None:
    """One more access of a file (the monthly eviction counts them)."""
    conn.execute(sql_of(conn).files.count_access, (when, fid))


def file_raw(conn: Connection, fid: int) -> str | None:
    """The verbatim context a ``pre_compress`` file keeps (None for other files)."""
    row = conn.execute(sql_of(conn).files.file_raw, (fid,)).fetchone()
    return None if row is None else row[0]


def set_file_importance(conn: Connection, fid: int, importance: int) -> None:
    """A user-set importance (kept by merges)."""
    conn.execute(sql_of(conn).files.set_importance, (importance, fid))


def write_hook(conn: Connection, fid: int, *, title: str, abstract: str, key_facts: Sequence[str],
               entities: Sequence[str], tags: Sequence[str], importance: int, source: str,
               meta: Mapping[str, Any]) -> None:
    """Store a recomputed hook (the hook is fresh again)."""
    conn.execute(sql_of(conn).files.write_hook,
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
    from .rows import TURN_NCOLS
    from .rows import turn_row as _turn_row

    rows = conn.execute(sql_of(conn).files.members, (fid,)).fetchall()
    return [Member(_turn_row(r[:TURN_NCOLS]), int(r[TURN_NCOLS]), r[TURN_NCOLS + 1]) for r in rows]


def replaced_members(conn: Connection, fid: int) -> set[int]:
    """The tids of a file's members that an update replaced: kept in the file, left out of its hook."""
    return {int(r[0]) for r in conn.execute(sql_of(conn).files.replaced_members, (fid,)).fetchall()}


def set_members(conn: Connection, fid: int, members: Sequence[tuple[int, int, int | None]],
                token_count: int) -> None:
    """Replace a file's membership with ``(tid, start, stop)`` rows and update its span and token count."""
    sql = sql_of(conn).files
    conn.execute(sql.delete_members, (fid,))
    conn.executemany(sql.insert_member, [(fid, i, tid, start, stop) for i, (tid, start, stop) in enumerate(members)])
    span = conn.execute(sql.member_span, (fid,)).fetchone()
    conn.execute(sql.set_span, (token_count, span[0], span[1], fid))


def files_of_turns(conn: Connection, ns_id: int, turn_ids: Sequence[str]) -> list[tuple[str, str]]:
    """``(file id, turn id)`` of every file of the namespace holding one of the turns."""
    out: list[tuple[str, str]] = []
    sql = sql_of(conn)
    for part in chunks(list(turn_ids)):
        out += conn.execute(sql.files.files_of_turns.format(marks=sql.marks(len(part))), (ns_id, *part)).fetchall()
    return out


# -- archiving (the statements of lifecycle.files.archive_turns) ------------------------------------------------
def open_daily_file(conn: Connection, ns_id: int, day: str) -> tuple[int, int] | None:
    """``(fid, token_count)`` of the namespace's open daily file of ``day`` (its last part), if any."""
    row = conn.execute(sql_of(conn).files.open_daily, (ns_id, day)).fetchone()
    return None if row is None else (int(row[0]), int(row[1]))


def close_earlier_dailies(conn: Connection, ns_id: int, day: str, when: float) -> None:
    """Close the namespace's daily files of days before ``day`` that are still open."""
    conn.execute(sql_of(conn).files.close_earlier, (when, ns_id, day))


def next_daily_part(conn: Connection, ns_id: int, day: str) -> int:
    """The part number a new daily file of ``day`` gets (1 for the day's first file)."""
    return int(conn.execute(sql_of(conn).files.next_part, (ns_id, day)).fetchone()[0])


def next_position(conn: Connection, fid: int) -> int:
    """The position the next member of a file takes."""
    return int(conn.execute(sql_of(conn).files.next_position, (fid,)).fetchone()[0])


def close_file(conn: Connection, fid: int, *, truncated: bool, when: float) -> None:
    """Close a daily file (``truncated``: it was cut at its hard threshold)."""
    conn.execute(sql_of(conn).files.close_file, (int(truncated), when, fid))


def append_members(conn: Connection, rows: Sequence[tuple[int, int, int, int, int | None]]) -> None:
    """Add ``(fid, pos, tid, start, stop)`` member rows (one statement for the whole batch)."""
    conn.executemany(sql_of(conn).files.insert_member, rows)


def grow_spans(conn: Connection, spans: Mapping[int, Sequence[Any]]) -> None:
    """Per fid ``[token_count, first ts, last ts]`` of what was appended: the new size, the span widened, the hook
    stale."""
    conn.executemany(sql_of(conn).files.grow_span,
                     [(used, lo, lo, hi, hi, fid) for fid, (used, lo, hi) in spans.items()])


# -- compaction (the statements of lifecycle.compact) ----------------------------------------------------------
def set_sources(conn: Connection, fid: int, sources: Sequence[str], *, close: bool = False) -> None:
    """A merged file's sources (``close``: and it is ``closed`` again, so its month is due again)."""
    sql = sql_of(conn).files
    conn.execute(sql.set_sources_closed if close else sql.set_sources, (json.dumps(list(sources)), fid))


def set_compaction(conn: Connection, fid: int, *, access_count: int, archived_at: float,
                   meta: Mapping[str, Any]) -> None:
    """What a merge or an eviction gives the file it writes: access count, archive time, its report."""
    conn.execute(sql_of(conn).files.set_compaction,
                 (access_count, archived_at, json.dumps(meta), fid))


def mark_merged(conn: Connection, fids: Sequence[int], into: str, when: float) -> None:
    """Daily files merged into the weekly file ``into`` (their first archive time kept)."""
    conn.executemany(sql_of(conn).files.mark_merged, [(into, when, fid) for fid in fids])


def merge_sources(conn: Connection, statuses: Mapping[int, str], into: str) -> None:
    """Weekly files given to the monthly file ``into``: each its status (``merged`` or ``evicted``)."""
    conn.executemany(sql_of(conn).files.merge_source,
                     [(status, into, fid) for fid, status in statuses.items()])
