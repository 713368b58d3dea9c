"""PostgreSQL's text of every statement family (:mod:`memory_ext.store.statements`): ``%s`` marks,
``ON CONFLICT … DO UPDATE``, JSONB, identity columns returned with ``RETURNING``.

>>> POSTGRES.meta.set_meta
'INSERT INTO meta(key, value) VALUES(%s, %s) ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value'
"""

from __future__ import annotations

import dataclasses
from functools import cached_property
from typing import Any, TypeVar

from ..repos.meta import MetaSql
from ..statements import Statements

__all__ = ["NATIVE", "POSTGRES", "PgStatements"]

NATIVE: set[str] = set()
"""Every statement text of the families read so far (while the derived indexes still hand SQLite text to
:class:`~memory_ext.store.pg.connection.PgConnection`, it runs these as they are)."""

_F = TypeVar("_F")


def _native(family: _F) -> _F:
    NATIVE.update(v for v in dataclasses.asdict(family).values() if isinstance(v, str))  # type: ignore[call-overload]
    return family


class PgStatements(Statements):
    """The PostgreSQL dialect."""

    dialect = "postgres"
    mark = "%s"

    @cached_property
    def meta(self) -> MetaSql:
        return _native(MetaSql(
            get_meta="SELECT value FROM meta WHERE key=%s",
            set_meta=("INSERT INTO meta(key, value) VALUES(%s, %s)"
                      " ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value"),
            delete_meta="DELETE FROM meta WHERE key=%s",
            namespace_id="SELECT ns_id FROM namespaces WHERE user_id=%s AND agent_id=%s",
            insert_namespace=("INSERT INTO namespaces(user_id, agent_id, created_at) VALUES(%s, %s, %s)"
                              " RETURNING ns_id"),
            namespaces="SELECT ns_id, user_id, agent_id FROM namespaces ORDER BY ns_id",
            namespace_key="SELECT user_id, agent_id FROM namespaces WHERE ns_id=%s",
            namespace_counts=(
                "SELECT n.user_id, n.agent_id,"
                " (SELECT COUNT(*) FROM turns t LEFT JOIN records r ON r.rid = t.record_rid"
                "  WHERE t.ns_id = n.ns_id AND COALESCE(r.replaced, 0) = 0),"
                " (SELECT COUNT(*) FROM turns t WHERE t.ns_id = n.ns_id)"
                " FROM namespaces n ORDER BY n.ns_id"),
            count_all="SELECT COUNT(*) FROM {table}",
            count_ns="SELECT COUNT(*) FROM {table} WHERE ns_id=%s",
        ))


POSTGRES = PgStatements()
"""The statements every PostgreSQL connection of the store runs."""


def is_native(sql: str, _registry: Any = NATIVE) -> bool:
    """True for PostgreSQL text (a family's statement or one built with ``%s`` marks): run as written."""
    return "%s" in sql or sql in _registry
