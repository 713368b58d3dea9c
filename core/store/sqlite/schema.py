"""The SQLite schema of the truth store: ``MIGRATIONS[i]`` upgrades a store from schema version i to i + 1
(the PostgreSQL twin, with the same tables and columns, is ``store/pg/schema.py``)."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

from ..interface import Connection

__all__ = ["MIGRATIONS", "SCHEMA_VERSION"]


def _run_script(conn: Connection, script: str) -> None:
    """Execute ``;``-separated DDL inside the caller's transaction (``executescript`` would commit it)."""
    for statement in script.split(";"):
        if statement.strip():
            conn.execute(statement)


def _v1(conn: Connection) -> None:
    _run_script(
        conn,
        """
        CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
        CREATE TABLE IF NOT EXISTS namespaces(
            ns_id INTEGER PRIMARY KEY,
            user_id TEXT NOT NULL,
            agent_id TEXT NOT NULL DEFAULT '',
            created_at REAL NOT NULL,
            generation INTEGER NOT NULL DEFAULT 0,
            UNIQUE(user_id, agent_id)
        );
        CREATE TABLE IF NOT EXISTS turns(
            tid INTEGER PRIMARY KEY,
            id TEXT NOT NULL UNIQUE,
            ns_id INTEGER NOT NULL REFERENCES namespaces(ns_id),
            seq INTEGER NOT NULL,
            session_id TEXT,
            role TEXT NOT NULL,
            speaker TEXT,
            content TEXT NOT NULL,
            ts REAL,
            external_id TEXT,
            tool_calls TEXT NOT NULL DEFAULT '[]',
            attachments TEXT NOT NULL DEFAULT '[]',
            metadata TEXT NOT NULL DEFAULT '{}',
            token_count INTEGER NOT NULL DEFAULT 0,
            created_at REAL NOT NULL
        );
        CREATE INDEX IF NOT EXISTS turns_ns_seq ON turns(ns_id, seq);
        CREATE INDEX IF NOT EXISTS turns_ns_session ON turns(ns_id, session_id);
        CREATE INDEX IF NOT EXISTS turns_ns_external ON turns(ns_id, external_id);
        CREATE TABLE IF NOT EXISTS records(
            rid INTEGER PRIMARY KEY,
            id TEXT NOT NULL UNIQUE,
            ns_id INTEGER NOT NULL REFERENCES namespaces(ns_id),
            kind TEXT NOT NULL,
            text TEXT NOT NULL,
            index_text TEXT NOT NULL,
            l0 TEXT,
            l1 TEXT,
            entities TEXT NOT NULL DEFAULT '[]',
            tags TEXT NOT NULL DEFAULT '[]',
            ref_ts REAL,
            valid_from REAL,
            valid_to REAL,
            turn_ids TEXT NOT NULL DEFAULT '[]',
            source_role TEXT,
            speaker TEXT,
            session_id TEXT,
            importance REAL NOT NULL DEFAULT 0.5,
            access_count INTEGER NOT NULL DEFAULT 0,
            superseded_by TEXT,
            created_at REAL NOT NULL,
            updated_at REAL NOT NULL
        );
        CREATE INDEX IF NOT EXISTS records_ns_kind ON records(ns_id, kind);
        CREATE INDEX IF NOT EXISTS records_ns_session ON records(ns_id, session_id);
        CREATE TABLE IF NOT EXISTS embeddings(
            rid INTEGER PRIMARY KEY REFERENCES records(rid),
            ns_id INTEGER NOT NULL,
            embedder_id TEXT NOT NULL,
            dim INTEGER NOT NULL,
            vector BLOB NOT NULL
        );
        CREATE INDEX IF NOT EXISTS embeddings_ns_rid ON embeddings(ns_id, rid);
        """
    )


def _v2(conn: Connection) -> None:
    """Records point at the turn record they are anchored to (a window at its centre turn)."""
    conn.execute("ALTER TABLE records ADD COLUMN anchor_rid INTEGER")
    conn.execute("UPDATE records SET anchor_rid = rid WHERE kind = 'turn'")
    conn.execute("ALTER TABLE turns ADD COLUMN record_rid INTEGER")
    conn.execute("UPDATE turns SET record_rid = (SELECT r.rid FROM records r WHERE r.ns_id = turns.ns_id"
                 " AND r.kind = 'turn' AND r.turn_ids = json_array(turns.id))")


def _v3(conn: Connection) -> None:
    """The lifecycle: memory files with their index hooks, file membership, cold tier, claims for supersession."""
    _run_script(
        conn,
        """
        CREATE TABLE IF NOT EXISTS files(
            fid INTEGER PRIMARY KEY,
            id TEXT NOT NULL UNIQUE,
            ns_id INTEGER NOT NULL REFERENCES namespaces(ns_id),
            period TEXT NOT NULL,
            period_key TEXT NOT NULL,
            part INTEGER NOT NULL DEFAULT 1,
            status TEXT NOT NULL,
            truncated INTEGER NOT NULL DEFAULT 0,
            token_count INTEGER NOT NULL DEFAULT 0,
            start_ts REAL,
            end_ts REAL,
            sources TEXT NOT NULL DEFAULT '[]',
            merged_into TEXT,
            raw TEXT,
            meta TEXT NOT NULL DEFAULT '{}',
            title TEXT NOT NULL DEFAULT '',
            abstract TEXT NOT NULL DEFAULT '',
            key_facts TEXT NOT NULL DEFAULT '[]',
            entities TEXT NOT NULL DEFAULT '[]',
            tags TEXT NOT NULL DEFAULT '[]',
            importance INTEGER NOT NULL DEFAULT 50,
            importance_set INTEGER NOT NULL DEFAULT 0,
            access_count INTEGER NOT NULL DEFAULT 0,
            last_access REAL,
            summary_source TEXT NOT NULL DEFAULT '',
            hook_stale INTEGER NOT NULL DEFAULT 1,
            created_at REAL NOT NULL,
            archived_at REAL
        );
        CREATE INDEX IF NOT EXISTS files_ns_period ON files(ns_id, period, period_key);
        CREATE TABLE IF NOT EXISTS file_turns(
            fid INTEGER NOT NULL REFERENCES files(fid),
            pos INTEGER NOT NULL,
            tid INTEGER NOT NULL,
            start INTEGER NOT NULL DEFAULT 0,
            stop INTEGER,
            PRIMARY KEY(fid, pos)
        );
        CREATE INDEX IF NOT EXISTS file_turns_tid ON file_turns(tid);
        ALTER TABLE records ADD COLUMN cold INTEGER NOT NULL DEFAULT 0;
        ALTER TABLE namespaces ADD COLUMN flags_generation INTEGER NOT NULL DEFAULT 0;
        CREATE TABLE IF NOT EXISTS claims(
            ns_id INTEGER NOT NULL,
            rid INTEGER NOT NULL,
            holder TEXT NOT NULL,
            subject TEXT NOT NULL,
            attribute TEXT NOT NULL,
            value TEXT NOT NULL,
            negated INTEGER NOT NULL DEFAULT 0,
            ts REAL
        );
        CREATE INDEX IF NOT EXISTS claims_key ON claims(ns_id, holder, subject, attribute);
        CREATE INDEX IF NOT EXISTS claims_rid ON claims(rid)
        """,
    )


def _v4(conn: Connection) -> None:
    """Memory versions: records replaced by an update (hidden from default searches, reachable with ``as_of``),
    the history of updates and deletes, dedup lookups by (namespace, external id), and the indexes that keep a
    delete proportional to what it removes (records by anchor, by what superseded them)."""
    _run_script(
        conn,
        """
        ALTER TABLE records ADD COLUMN replaced INTEGER NOT NULL DEFAULT 0;
        CREATE TABLE IF NOT EXISTS memory_history(
            hid INTEGER PRIMARY KEY,
            ns_id INTEGER NOT NULL,
            memory_key TEXT NOT NULL,
            session_id TEXT,
            op TEXT NOT NULL,
            turn_id TEXT,
            ts REAL NOT NULL
        );
        CREATE INDEX IF NOT EXISTS memory_history_key ON memory_history(ns_id, memory_key);
        CREATE INDEX IF NOT EXISTS memory_history_turn ON memory_history(turn_id);
        CREATE INDEX IF NOT EXISTS turns_ns_external ON turns(ns_id, external_id);
        CREATE INDEX IF NOT EXISTS records_anchor ON records(anchor_rid);
        CREATE INDEX IF NOT EXISTS records_superseded_by ON records(superseded_by)
        """,
    )


def _v5(conn: Connection) -> None:
    """Key/value items (the LangGraph store's) in the truth store (:mod:`memory_ext.store.items`), idempotent;
    the forget hook earlier versions recorded is dropped."""
    from ..items import drop_legacy_face

    for statement in (
        "CREATE TABLE IF NOT EXISTS store_items(iid INTEGER PRIMARY KEY, ns_id INTEGER NOT NULL, ns TEXT NOT NULL,"
        " key TEXT NOT NULL, value TEXT NOT NULL, created_at TEXT NOT NULL, updated_at TEXT NOT NULL, turn_id TEXT,"
        " record_id TEXT, expires_at REAL, ttl_minutes REAL, UNIQUE(ns_id, ns, key))",
        "CREATE INDEX IF NOT EXISTS store_items_turn ON store_items(ns_id, turn_id)",
        "CREATE INDEX IF NOT EXISTS store_items_expiry ON store_items(expires_at)",
        "CREATE TABLE IF NOT EXISTS store_namespaces(seq INTEGER PRIMARY KEY, ns_id INTEGER NOT NULL,"
        " ns TEXT NOT NULL, UNIQUE(ns_id, ns))",
        "CREATE TABLE IF NOT EXISTS store_vectors(vid INTEGER PRIMARY KEY, ns_id INTEGER NOT NULL, ns TEXT NOT NULL,"
        " key TEXT NOT NULL, path TEXT NOT NULL, vector BLOB NOT NULL, UNIQUE(ns_id, ns, key, path))",
    ):
        conn.execute(statement)
    drop_legacy_face(conn)


MIGRATIONS: list[Callable[[sqlite3.Connection], None]] = [_v1, _v2, _v3, _v4, _v5]
"""MIGRATIONS[i] upgrades a store from schema version i to i + 1. Append, never edit."""
SCHEMA_VERSION = len(MIGRATIONS)
