"""``meta`` and ``namespaces`` (:class:`memory_ext.store.interface.MetaRepository`)."""

from __future__ import annotations

import time
from dataclasses import dataclass

from ...errors import EmbedderMismatchError, StoreError
from ..interface import Connection
from ..statements import sql_of
from .base import CommonStore

__all__ = ["TURN_VECTORS_KEY", "MetaRepo", "MetaSql"]

TURN_VECTORS_KEY = "turn_vectors"
"""The ``meta`` key that records how the store's turn vectors were made (``sentence-mixed`` or ``turn``,
:func:`memory_ext.ingest.contextual.vector_kind`): written with the first vectors and by a whole-store reindex, so
item scores and the keyword weight follow the vectors the store holds."""


@dataclass(frozen=True)
class MetaSql:
    """The statements of ``meta`` and ``namespaces``, as each backend writes them
    (:mod:`memory_ext.store.statements`)."""

    get_meta: str
    """``(key,)`` -> ``value``."""
    set_meta: str
    """``(key, value)``: insert or overwrite."""
    delete_meta: str
    """``(key,)``."""
    namespace_id: str
    """``(user_id, agent_id)`` -> ``ns_id``."""
    insert_namespace: str
    """``(user_id, agent_id, created_at)`` -> the new ``ns_id`` (``RETURNING``)."""
    namespaces: str
    """-> ``ns_id, user_id, agent_id`` of every namespace, by ``ns_id``."""
    namespace_key: str
    """``(ns_id,)`` -> ``user_id, agent_id``."""
    namespace_counts: str
    """-> ``user_id, agent_id, current memories, turns`` per namespace."""
    count_all: str
    """``{table}`` template -> row count."""
    count_ns: str
    """``{table}`` template, ``(ns_id,)`` -> row count of one namespace."""


class MetaRepo(CommonStore):
    """The statements of this table family, shared by the backends."""

    @property
    def store_id(self) -> str:
        """A random id made when the store was created; it keys derived indexes shared between stores."""
        value = self.get_meta("store_id")
        if value is None:
            raise StoreError(f"store {str(self.directory)!r} has no store_id: open it once without read_only")
        return value

    def get_meta(self, key: str) -> str | None:
        conn = self.reader()
        row = conn.execute(sql_of(conn).meta.get_meta, (key,)).fetchone()
        return row[0] if row else None

    def check_embedder(self, embedder_id: str) -> bool:
        """Raise if the store was indexed with another embedder; True when the store has no vectors yet."""
        stored = self.get_meta("embedder_id")
        if stored is not None and stored != embedder_id:
            raise EmbedderMismatchError(stored, embedder_id)
        return stored is None

    @staticmethod
    def set_meta(conn: Connection, key: str, value: str) -> None:
        conn.execute(sql_of(conn).meta.set_meta, (key, value))

    @staticmethod
    def delete_meta(conn: Connection, key: str) -> None:
        conn.execute(sql_of(conn).meta.delete_meta, (key,))

    def find_namespace(self, key: tuple[str, str]) -> int | None:
        return self.namespace_id(self.reader(), key)

    @staticmethod
    def namespace_id(conn: Connection, key: tuple[str, str]) -> int | None:
        """The row id of namespace ``(user_id, agent_id)`` as ``conn`` sees it (None: not stored)."""
        row = conn.execute(sql_of(conn).meta.namespace_id, key).fetchone()
        return int(row[0]) if row else None

    @staticmethod
    def ensure_namespace(conn: Connection, key: tuple[str, str]) -> int:
        sql = sql_of(conn).meta
        row = conn.execute(sql.namespace_id, key).fetchone()
        if row:
            return int(row[0])
        return int(conn.execute(sql.insert_namespace, (*key, time.time())).fetchone()[0])

    def namespaces(self) -> list[tuple[int, str, str]]:
        conn = self.reader()
        return [(int(r[0]), r[1], r[2]) for r in conn.execute(sql_of(conn).meta.namespaces)]

    def namespace_key(self, ns_id: int) -> tuple[str, str]:
        """``(user_id, agent_id)`` of a namespace row (agent_id '' when none)."""
        conn = self.reader()
        row = conn.execute(sql_of(conn).meta.namespace_key, (ns_id,)).fetchone()
        return row[0], row[1]

    def namespace_counts(self) -> list[tuple[str, str, int, int]]:
        """``(user_id, agent_id, current memories, turns)`` of every namespace, in creation order."""
        conn = self.reader()
        return [(str(r[0]), str(r[1]), int(r[2]), int(r[3])) for r in conn.execute(sql_of(conn).meta.namespace_counts)]

    def count(self, table: str, ns_id: int | None = None) -> int:
        if table not in ("turns", "records", "embeddings"):
            raise ValueError(table)
        conn = self.reader()
        sql = sql_of(conn).meta
        if ns_id is None:
            return int(conn.execute(sql.count_all.format(table=table)).fetchone()[0])
        return int(conn.execute(sql.count_ns.format(table=table), (ns_id,)).fetchone()[0])
