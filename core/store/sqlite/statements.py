"""SQLite's text of every statement family (:mod:`memory_ext.store.statements`): ``?`` marks,
``INSERT OR REPLACE``, ``json_each``.

>>> SQLITE.meta.set_meta
'INSERT OR REPLACE INTO meta(key, value) VALUES(?, ?)'
"""

from __future__ import annotations

import sqlite3
from functools import cached_property

from ..repos.meta import MetaSql
from ..statements import Statements

__all__ = ["SQLITE", "SqliteConnection", "SqliteStatements"]


class SqliteStatements(Statements):
    """The SQLite dialect."""

    dialect = "sqlite"
    mark = "?"

    @cached_property
    def meta(self) -> MetaSql:
        return MetaSql(
            get_meta="SELECT value FROM meta WHERE key=?",
            set_meta="INSERT OR REPLACE INTO meta(key, value) VALUES(?, ?)",
            delete_meta="DELETE FROM meta WHERE key=?",
            namespace_id="SELECT ns_id FROM namespaces WHERE user_id=? AND agent_id=?",
            insert_namespace="INSERT INTO namespaces(user_id, agent_id, created_at) VALUES(?, ?, ?) RETURNING ns_id",
            namespaces="SELECT ns_id, user_id, agent_id FROM namespaces ORDER BY ns_id",
            namespace_key="SELECT user_id, agent_id FROM namespaces WHERE ns_id=?",
            namespace_counts=(
                "SELECT n.user_id, n.agent_id,"
                " (SELECT COUNT(*) FROM turns t LEFT JOIN records r ON r.rid = t.record_rid"
                "  WHERE t.ns_id = n.ns_id AND COALESCE(r.replaced, 0) = 0),"
                " (SELECT COUNT(*) FROM turns t WHERE t.ns_id = n.ns_id)"
                " FROM namespaces n ORDER BY n.ns_id"),
            count_all="SELECT COUNT(*) FROM {table}",
            count_ns="SELECT COUNT(*) FROM {table} WHERE ns_id=?",
        )


SQLITE = SqliteStatements()
"""The statements every SQLite connection of the store runs."""


class SqliteConnection(sqlite3.Connection):
    """A ``sqlite3`` connection that carries SQLite's statements (``conn.sql``): the store opens every connection
    with this factory."""

    sql: Statements = SQLITE
