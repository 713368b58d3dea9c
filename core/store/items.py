"""Key/value items (the LangGraph store's) in the truth store: their tables and every statement on them.

An *item* belongs to one engine namespace (``ns_id``: a ``(user_id, agent_id)`` partition) and is named by a
LangGraph namespace — its labels joined by ``"."`` (``ns``; LangGraph forbids ``"."`` inside a label) — and a
``key``. Three tables, created by schema step 5 on both backends; each backend writes the statements on them in
its own dialect (:class:`ItemsSql`):

* ``store_items``: ``iid`` (insertion order: an update keeps it, a delete and re-put takes a new one), the JSON
  ``value``, ISO ``created_at`` / ``updated_at``, the archived turn (``turn_id``, ``record_id``: None when the
  item is not indexed), ``expires_at`` (epoch seconds) and ``ttl_minutes``;
* ``store_namespaces``: the order in which each LangGraph namespace first appeared (``seq``);
* ``store_vectors``: client-side embeddings of an item's fields (``path``), float64 blobs.

:func:`import_legacy_file` moves the rows of the separate ``langgraph_store.sqlite3`` file that earlier versions
kept beside a SQLite store into these tables (one transaction), then overwrites and removes the file.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .interface import Connection
from .metadata_filter import MetadataFilter, metadata_sql
from .statements import sql_of

if TYPE_CHECKING:
    from .interface import TruthStore

__all__ = ["ITEM_COLS", "LEGACY_FILE", "ItemRow", "ItemTables", "ItemsSql", "drop_legacy_face", "import_legacy_file"]

LEGACY_FILE = "langgraph_store.sqlite3"
"""The item file of earlier versions, beside a SQLite store; imported and removed at open."""
ITEM_COLS = ("i.ns, i.key, i.value, i.created_at, i.updated_at, i.turn_id, i.record_id, i.ttl_minutes, i.expires_at,"
             " i.iid")
"""The columns of ``store_items i`` an :class:`ItemRow` is read from."""


@dataclass(frozen=True)
class ItemsSql:
    """The statements on the item tables, as each backend writes them (:mod:`memory_ext.store.statements`).
    ``{marks}``: a template's ``IN`` list (``sql.marks(n)``); ITEM_COLS: :data:`ITEM_COLS`."""

    live_rows: str
    """``(ns_id, now)`` -> ITEM_COLS of the live items (a prefix: :meth:`ItemTables.rows` adds conditions)."""
    under_prefix: str
    """``(prefix, len(prefix) + 1, prefix + ".")``: `` AND`` the item's namespace is ``prefix`` or under it."""
    exact_key: str
    """``(ns, key)``: one alternative of a list of named items."""
    stored: str
    """``(ns_id, ns, key)`` -> ITEM_COLS, expired or not."""
    live_namespaces: str
    """``(ns_id, now)`` -> the distinct namespaces of the live items."""
    vectors: str
    """``(ns_id,)`` -> ``ns, key, vector`` in write order."""
    expired: str
    """``(now,)`` -> ``ns_id, ns, key, turn_id`` of the expired items (a prefix: `` AND ns_id=`` may follow)."""
    note_namespace: str
    """``(ns_id, ns)``: the namespace's first use (kept when already noted)."""
    upsert: str
    """``(ns_id, ns, key, value, created_at, updated_at, turn_id, record_id, expires_at, ttl_minutes)``: insert,
    or update all but ``created_at`` (and the ``iid``)."""
    delete_vectors: str
    """``(ns_id, ns, key)``."""
    insert_vector: str
    """``(ns_id, ns, key, path, vector)``."""
    delete_item: str
    """``(ns_id, ns, key)``."""
    refresh: str
    """``(now, ns_id, ns, key)``: restart the TTL of an item that has one."""
    items_of_turns: str
    """``{marks}`` template, ``(ns_id, *turn ids)`` -> ``ns, key`` of the items archived as those turns."""
    delete_session_vectors: str
    """``(ns_id, ns)``."""
    delete_session_namespace: str
    """``(ns_id, ns)``."""
    delete_session_items: str
    """``(ns_id, ns)``."""
    delete_ns_vectors: str
    """``(ns_id,)``."""
    delete_ns_namespaces: str
    """``(ns_id,)``."""
    delete_ns_items: str
    """``(ns_id,)``."""
    import_item: str
    """``(ns_id, ns, key, value, created_at, updated_at, turn_id, record_id, expires_at, ttl_minutes)``: kept
    when the item is stored already."""
    import_vector: str
    """``(ns_id, ns, key, path, vector)``: kept when stored already."""


@dataclass(frozen=True, slots=True)
class ItemRow:
    """A stored item as the engine reads it back (``value`` is JSON text)."""

    ns: str
    key: str
    value: str
    created_at: str
    updated_at: str
    turn_id: str | None
    record_id: str | None
    ttl_minutes: float | None
    expires_at: float | None
    iid: int


class ItemTables:
    """The statements on the item tables; ``dialect`` (``"sqlite"`` | ``"postgres"``) selects the SQL of filters."""

    def __init__(self, dialect: str = "sqlite") -> None:
        self.dialect = dialect

    # -- reads ---------------------------------------------------------------------------------------------------
    def rows(self, conn: Connection, ns_id: int, now: float, *, prefix: str | None = None,
             exact: Sequence[tuple[str, str]] | None = None, where: MetadataFilter | None = None) -> list[ItemRow]:
        """Live items of a namespace, LangGraph namespace by namespace in the order they first appeared, then by
        insertion: all, those under ``prefix`` (a joined namespace), or those named by ``exact`` ``(ns, key)``;
        ``where`` is a parsed filter on the value (SQL over the JSON column)."""
        statements = sql_of(conn).items
        sql = statements.live_rows
        args: list[Any] = [ns_id, now]
        if prefix:
            sql += statements.under_prefix
            args += [prefix, len(prefix) + 1, prefix + "."]
        if exact is not None:
            if not exact:
                return []
            sql += " AND (" + " OR ".join(statements.exact_key for _ in exact) + ")"
            args += [v for pair in exact for v in pair]
        if where is not None:
            condition, extra = metadata_sql(where, "i.value", self.dialect)
            sql += f" AND {condition}"
            args += extra
        return [_row(r) for r in conn.execute(sql + " ORDER BY n.seq, i.iid", args)]

    @staticmethod
    def stored(conn: Connection, ns_id: int, keys: Sequence[tuple[str, str]]) -> dict[tuple[str, str], ItemRow]:
        """The rows of these ``(ns, key)``, expired or not."""
        out: dict[tuple[str, str], ItemRow] = {}
        sql = sql_of(conn).items
        for ns, key in keys:
            r = conn.execute(sql.stored, (ns_id, ns, key)).fetchone()
            if r is not None:
                out[(ns, key)] = _row(r)
        return out

    @staticmethod
    def live_namespaces(conn: Connection, ns_id: int, now: float) -> list[str]:
        return [r[0] for r in conn.execute(sql_of(conn).items.live_namespaces, (ns_id, now))]

    @staticmethod
    def vectors(conn: Connection, ns_id: int) -> list[tuple[str, str, bytes]]:
        """``(ns, key, float64 blob)`` of every stored vector of the namespace, in the order they were written."""
        return [(r[0], r[1], bytes(r[2])) for r in conn.execute(sql_of(conn).items.vectors, (ns_id,))]

    @staticmethod
    def expired(conn: Connection, now: float, ns_id: int | None = None
                ) -> list[tuple[int, str, str, str | None]]:
        """``(ns_id, ns, key, turn_id)`` of the expired items (of one namespace, or of the store)."""
        statements = sql_of(conn)
        sql = statements.items.expired
        args: list[Any] = [now]
        if ns_id is not None:
            sql += f" AND ns_id = {statements.mark}"
            args.append(ns_id)
        return [(int(r[0]), r[1], r[2], r[3]) for r in conn.execute(sql + " ORDER BY iid", args)]

    # -- writes (inside a transaction) ---------------------------------------------------------------------------
    @staticmethod
    def upsert(conn: Connection, ns_id: int, ns: str, key: str, value: str, stamp: str,
               turn_id: str | None, record_id: str | None, expires_at: float | None, ttl: float | None) -> None:
        """Write an item (an update keeps its ``created_at`` and its place) and note its namespace's first use."""
        sql = sql_of(conn).items
        conn.execute(sql.note_namespace, (ns_id, ns))
        conn.execute(
            sql.upsert,
            (ns_id, ns, key, value, stamp, stamp, turn_id, record_id, expires_at, ttl))

    @staticmethod
    def set_vectors(conn: Connection, ns_id: int, ns: str, key: str,
                    vectors: Sequence[tuple[str, bytes]]) -> None:
        sql = sql_of(conn).items
        conn.execute(sql.delete_vectors, (ns_id, ns, key))
        conn.executemany(sql.insert_vector,
                         [(ns_id, ns, key, path, blob) for path, blob in vectors])

    @staticmethod
    def delete(conn: Connection, ns_id: int, keys: Sequence[tuple[str, str]]) -> int:
        removed = 0
        sql = sql_of(conn).items
        for ns, key in keys:
            removed += conn.execute(sql.delete_item, (ns_id, ns, key)).rowcount
            conn.execute(sql.delete_vectors, (ns_id, ns, key))
        return removed

    @staticmethod
    def refresh(conn: Connection, ns_id: int, now: float, keys: Sequence[tuple[str, str]]) -> None:
        """Restart the TTL of these items (those that have one)."""
        conn.executemany(sql_of(conn).items.refresh, [(now, ns_id, ns, key) for ns, key in keys])

    @staticmethod
    def forget(conn: Connection, ns_id: int, *, session: str | None = None,
               turn_ids: Sequence[str] | None = None) -> int:
        """Forget's part: the whole namespace's items, one LangGraph namespace's (``session``: the engine session
        its items are archived in), or the items archived as ``turn_ids``. Returns the items removed."""
        statements = sql_of(conn)
        sql = statements.items
        if turn_ids is not None:
            keys: list[tuple[str, str]] = []
            ids = list(turn_ids)
            for chunk in (ids[i:i + 500] for i in range(0, len(ids), 500)):
                keys += [(r[0], r[1]) for r in conn.execute(
                    sql.items_of_turns.format(marks=statements.marks(len(chunk))), (ns_id, *chunk))]
            return ItemTables.delete(conn, ns_id, keys)
        if session is not None:
            conn.execute(sql.delete_session_vectors, (ns_id, session))
            conn.execute(sql.delete_session_namespace, (ns_id, session))
            return int(conn.execute(sql.delete_session_items, (ns_id, session)).rowcount)
        conn.execute(sql.delete_ns_vectors, (ns_id,))
        conn.execute(sql.delete_ns_namespaces, (ns_id,))
        return int(conn.execute(sql.delete_ns_items, (ns_id,)).rowcount)


def _row(r: Sequence[Any]) -> ItemRow:
    return ItemRow(r[0], r[1], r[2], r[3], r[4], r[5], r[6], None if r[7] is None else float(r[7]),
                   None if r[8] is None else float(r[8]), int(r[9]))


# -- the item file of earlier versions -----------------------------------------------------------------------------
def import_legacy_file(store: TruthStore) -> int:
    """Move the rows of ``langgraph_store.sqlite3`` (items, namespace order, vectors, TTL) into the item tables in
    one transaction, then overwrite and remove the file, so no item is left in two places (forget reaches the
    truth store only). Idempotent: a crash before the removal imports again (rows already there are kept) and a
    crash after the commit leaves ``*.migrated``, removed at the next open. Returns the items imported."""
    directory = Path(store.directory)
    path = directory / LEGACY_FILE
    if store.read_only or not directory.is_dir():
        return 0
    for leftover in (directory / (LEGACY_FILE + ".migrated"), *(directory / (LEGACY_FILE + s) for s in ("-wal",
                                                                                                       "-shm"))):
        if leftover.exists() and not path.exists():
            _shred(leftover)
    if not path.exists():
        return 0
    old = sqlite3.connect(path)
    try:
        tables = {r[0] for r in old.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        have = {r[1] for r in old.execute("PRAGMA table_info(items)")} if "items" in tables else set()
        cols = [c if c in have else f"NULL AS {c}" for c in ("record_id", "expires_at", "ttl_minutes")]
        items = old.execute("SELECT part, ns, key, value, created_at, updated_at, turn_id, " + ", ".join(cols)
                            + " FROM items ORDER BY rowid").fetchall() if have else []
        order = old.execute("SELECT part, ns FROM namespaces ORDER BY seq").fetchall() \
            if "namespaces" in tables else []
        vectors = old.execute("SELECT part, ns, key, path, vector FROM vectors ORDER BY rowid").fetchall() \
            if "vectors" in tables else []
    finally:
        old.close()
    with store.transaction("import the LangGraph store file") as conn:
        ids: dict[str, int] = {}
        sql = sql_of(conn).items

        def ns_id(part: str) -> int:
            if part not in ids:
                user_id, agent_id = json.loads(part)
                ids[part] = store.ensure_namespace(conn, (str(user_id), str(agent_id or "")))
            return ids[part]

        for part, ns in [*order, *((r[0], r[1]) for r in items)]:  # first-seen order, then any the table lacks
            conn.execute(sql.note_namespace, (ns_id(part), ns))
        for part, ns, key, value, created, updated, turn_id, record_id, expires, ttl in items:
            conn.execute(
                sql.import_item,
                (ns_id(part), ns, key, json.dumps(json.loads(value)), created, updated, turn_id, record_id, expires,
                 ttl))
        conn.executemany(sql.import_vector,
                         [(ns_id(part), ns, key, vpath, bytes(blob)) for part, ns, key, vpath, blob in vectors])
        drop_legacy_face(conn)
    moved = directory / (LEGACY_FILE + ".migrated")
    os.replace(path, moved)
    _shred(moved)
    for suffix in ("-wal", "-shm"):
        if (directory / (LEGACY_FILE + suffix)).exists():
            _shred(directory / (LEGACY_FILE + suffix))
    return len(items)


def drop_legacy_face(conn: Connection) -> None:
    """Earlier versions recorded the LangGraph store's forget hook (``meta`` key ``faces``); its items are rows
    of the truth store now, which forget reaches directly."""
    sql = sql_of(conn).meta
    row = conn.execute(sql.get_meta, ("faces",)).fetchone()
    if row is None:
        return
    faces = dict(json.loads(row[0]))
    if faces.pop("langgraph_store", None) is not None:
        conn.execute(sql.delete_meta, ("faces",))
        if faces:
            conn.execute(sql.set_meta, ("faces", json.dumps(faces, sort_keys=True)))


def _shred(path: Path) -> None:
    """Overwrite a file with zeros, then remove it."""
    with contextlib.suppress(FileNotFoundError):
        size = path.stat().st_size
        with open(path, "r+b") as fh:
            fh.write(b"\0" * size)
            fh.flush()
            os.fsync(fh.fileno())
        path.unlink()
