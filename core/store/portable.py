"""The SQL of export and import (:mod:`memory_ext.portability`): a namespace's truth read whole, and the rows an
import writes beside the turns the write pipeline derives again.

Each backend writes the statements in its own dialect (:class:`PortableSql`). Nothing here decides what is
exported or how an import resolves what is already there: that is :mod:`memory_ext.portability`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from .interface import Connection
from .snapshots import chunks
from .statements import sql_of

__all__ = ["FILE_FIELDS", "ITEM_FIELDS", "PortableSql", "existing", "file_rows", "history_rows", "insert_files",
           "insert_history", "insert_items", "item_rows", "tids_of", "turn_states"]

FILE_FIELDS = ("id", "period", "period_key", "part", "status", "truncated", "token_count", "start_ts", "end_ts",
               "sources", "merged_into", "raw", "meta", "title", "abstract", "key_facts", "entities", "tags",
               "importance", "importance_set", "access_count", "last_access", "summary_source", "hook_stale",
               "created_at", "archived_at")
"""The columns of a memory file an export carries (everything but the store's own row ids)."""
ITEM_FIELDS = ("ns", "key", "value", "created_at", "updated_at", "turn_id", "record_id", "expires_at", "ttl_minutes")
"""The columns of a LangGraph store item an export carries (``value`` as its JSON text)."""
_JSON_FIELDS = {"sources", "meta", "key_facts", "entities", "tags"}
_BOOL_FIELDS = {"truncated", "importance_set", "hook_stale"}


@dataclass(frozen=True)
class PortableSql:
    """The statements of export and import, as each backend writes them (:mod:`memory_ext.store.statements`).
    ``{marks}``: a template's ``IN`` list (``sql.marks(n)``)."""

    turn_states: str
    """``(ns_id,)`` -> ``turn id, record id, replaced, valid_to, superseded_by, cold`` of every turn."""
    history_rows: str
    """``(ns_id,)`` -> ``memory_key, session_id, op, turn_id, ts`` in order."""
    file_rows: str
    """``(ns_id,)`` -> ``fid`` and :data:`FILE_FIELDS` of every file, oldest first."""
    file_members: str
    """``(fid,)`` -> ``turn id, start, stop`` in file order."""
    existing: str
    """``{table}``/``{marks}`` template, ``(ns_id, *ids)`` -> those ids the table holds."""
    tids_of: str
    """``{marks}`` template, ``(ns_id, *turn ids)`` -> ``id, tid``."""
    insert_history: str
    """``(ns_id, memory_key, session_id, op, turn_id, ts)``."""
    insert_file: str
    """``(ns_id, *FILE_FIELDS)`` -> the new ``fid`` (``RETURNING``)."""
    item_vectors: str
    """``(ns_id,)`` -> ``ns, key, path, vector`` in write order."""
    item_rows: str
    """``(ns_id, now)`` -> :data:`ITEM_FIELDS` of the live items, in namespace then insertion order."""
    item_exists: str
    """``(ns_id, ns, key)`` -> a row when the item is stored."""
    insert_item: str
    """``(ns_id, *ITEM_FIELDS)``."""


def turn_states(conn: Connection, ns_id: int) -> dict[str, tuple[str | None, float | None, str | None, bool]]:
    """Per turn id: its turn record's id, and — for a version an update replaced — ``valid_to`` and the record
    that replaced it, and whether it is in the cold tier."""
    out: dict[str, tuple[str | None, float | None, str | None, bool]] = {}
    for tid, rid, replaced, valid_to, by, cold in conn.execute(sql_of(conn).portable.turn_states, (ns_id,)):
        out[str(tid)] = (rid, float(valid_to) if replaced and valid_to is not None else None,
                         by if replaced else None, bool(cold))
    return out


def history_rows(conn: Connection, ns_id: int) -> list[tuple[str, str | None, str, str | None, float]]:
    """``(memory_key, session_id, op, turn_id, ts)`` of the namespace's recorded operations, oldest first."""
    return [(str(r[0]), r[1], str(r[2]), r[3], float(r[4])) for r in conn.execute(
        sql_of(conn).portable.history_rows, (ns_id,))]


def file_rows(conn: Connection, ns_id: int) -> Iterator[dict[str, Any]]:
    """Every memory file of the namespace (:data:`FILE_FIELDS`, JSON columns decoded), oldest first, each with
    ``members``: ``[turn id, start, stop]`` in file order."""
    sql = sql_of(conn).portable
    files = conn.execute(sql.file_rows, (ns_id,)).fetchall()
    for row in files:
        out: dict[str, Any] = {}
        for name, value in zip(FILE_FIELDS, row[1:], strict=True):
            out[name] = json.loads(value) if name in _JSON_FIELDS else bool(value) if name in _BOOL_FIELDS else value
        out["members"] = [[str(t), int(start), stop] for t, start, stop in conn.execute(
            sql.file_members, (int(row[0]),))]
        yield out


def existing(conn: Connection, table: str, ns_id: int, ids: Sequence[str]) -> set[str]:
    """Which of ``ids`` the namespace's ``turns`` or ``files`` already hold (an import skips them)."""
    if table not in ("turns", "files"):
        raise ValueError(f"existing: no id lookup for table {table!r}")
    found: set[str] = set()
    sql = sql_of(conn)
    for part in chunks(list(ids)):
        found.update(str(r[0]) for r in conn.execute(
            sql.portable.existing.format(table=table, marks=sql.marks(len(part))), (ns_id, *part)))
    return found


def tids_of(conn: Connection, ns_id: int, turn_ids: Sequence[str]) -> dict[str, int]:
    """The store's row ids of these turns."""
    out: dict[str, int] = {}
    sql = sql_of(conn)
    for part in chunks(list(turn_ids)):
        out.update((str(r[0]), int(r[1])) for r in conn.execute(
            sql.portable.tids_of.format(marks=sql.marks(len(part))), (ns_id, *part)))
    return out


def insert_history(conn: Connection, ns_id: int,
                   rows: Sequence[tuple[str, str | None, str, str | None, float]]) -> int:
    """Add the operations the namespace does not record yet (same key, session, operation, turn and time);
    returns how many were added."""
    have = set(history_rows(conn, ns_id))
    fresh = [r for r in rows if r not in have]
    conn.executemany(sql_of(conn).portable.insert_history, [(ns_id, *r) for r in fresh])
    return len(fresh)


def insert_files(conn: Connection, ns_id: int, files: Sequence[dict[str, Any]],
                 tids: dict[str, int]) -> None:
    """Insert memory files (:data:`FILE_FIELDS` and ``members``, whose turns ``tids`` maps to row ids)."""
    sql = sql_of(conn)
    for f in files:
        values = [json.dumps(f[name]) if name in _JSON_FIELDS else int(f[name]) if name in _BOOL_FIELDS else f[name]
                  for name in FILE_FIELDS]
        fid = conn.execute(sql.portable.insert_file, (ns_id, *values)).fetchone()[0]
        conn.executemany(sql.files.insert_member,
                         [(int(fid), pos, tids[turn_id], int(start), stop)
                          for pos, (turn_id, start, stop) in enumerate(f["members"])])


def item_rows(conn: Connection, ns_id: int, now: float) -> Iterator[dict[str, Any]]:
    """The namespace's live LangGraph store items (:data:`ITEM_FIELDS`), in the order their namespaces first
    appeared, then by insertion, each with its client-side ``vectors``: ``[path, float64 blob as hex]``."""
    vectors: dict[tuple[str, str], list[list[str]]] = {}
    sql = sql_of(conn).portable
    for ns, key, path, blob in conn.execute(sql.item_vectors, (ns_id,)):
        vectors.setdefault((str(ns), str(key)), []).append([str(path), bytes(blob).hex()])
    for row in conn.execute(sql.item_rows, (ns_id, now)):
        item = dict(zip(ITEM_FIELDS, row, strict=True))
        item["vectors"] = vectors.get((item["ns"], item["key"]), [])
        yield item


def insert_items(conn: Connection, ns_id: int, items: Sequence[dict[str, Any]]) -> int:
    """Add the items whose ``(ns, key)`` the namespace does not hold yet (with their vectors, and their
    namespaces' first-use order); returns how many were added."""
    added = 0
    sql = sql_of(conn)
    for item in items:
        if conn.execute(sql.portable.item_exists, (ns_id, item["ns"], item["key"])).fetchone() is not None:
            continue
        conn.execute(sql.items.note_namespace, (ns_id, item["ns"]))
        conn.execute(sql.portable.insert_item, (ns_id, *(item[f] for f in ITEM_FIELDS)))
        conn.executemany(sql.items.insert_vector,
                         [(ns_id, item["ns"], item["key"], path, bytes.fromhex(blob))
                          for path, blob in item["vectors"]])
        added += 1
    return added
