"""``meta`` and ``namespaces`` (:class:`memory_ext.store.interface.MetaRepository`)."""

from __future__ import annotations

import time

from ...errors import EmbedderMismatchError, StoreError
from ..interface import Connection
from .base import CommonStore

__all__ = ["MetaRepo"]


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
        row = self.reader().execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
        return row[0] if row else None

    def check_embedder(self, embedder_id: str) -> bool:
        """Raise if the store was indexed with another embedder; True when the store has no vectors yet."""
        stored = self.get_meta("embedder_id")
        if stored is not None and stored != embedder_id:
            raise EmbedderMismatchError(stored, embedder_id)
        return stored is None

    @staticmethod
    def set_meta(conn: Connection, key: str, value: str) -> None:
        conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES(?, ?)", (key, value))

    @staticmethod
    def delete_meta(conn: Connection, key: str) -> None:
        conn.execute("DELETE FROM meta WHERE key=?", (key,))

    def find_namespace(self, key: tuple[str, str]) -> int | None:
        return self.namespace_id(self.reader(), key)

    @staticmethod
    def namespace_id(conn: Connection, key: tuple[str, str]) -> int | None:
        """The row id of namespace ``(user_id, agent_id)`` as ``conn`` sees it (None: not stored)."""
        row = conn.execute("SELECT ns_id FROM namespaces WHERE user_id=? AND agent_id=?", key).fetchone()
        return int(row[0]) if row else None

    @staticmethod
    def ensure_namespace(conn: Connection, key: tuple[str, str]) -> int:
        row = conn.execute("SELECT ns_id FROM namespaces WHERE user_id=? AND agent_id=?", key).fetchone()
        if row:
            return int(row[0])
        cur = conn.execute("INSERT INTO namespaces(user_id, agent_id, created_at) VALUES(?, ?, ?)",
                           (*key, time.time()))
        assert cur.lastrowid is not None
        return cur.lastrowid

    def namespaces(self) -> list[tuple[int, str, str]]:
        return [(int(r[0]), r[1], r[2]) for r in
                self.reader().execute("SELECT ns_id, user_id, agent_id FROM namespaces ORDER BY ns_id")]

    def namespace_key(self, ns_id: int) -> tuple[str, str]:
        """``(user_id, agent_id)`` of a namespace row (agent_id '' when none)."""
        row = self.reader().execute("SELECT user_id, agent_id FROM namespaces WHERE ns_id=?", (ns_id,)).fetchone()
        return row[0], row[1]

    def namespace_counts(self) -> list[tuple[str, str, int, int]]:
        """``(user_id, agent_id, current memories, turns)`` of every namespace, in creation order."""
        return [(str(r[0]), str(r[1]), int(r[2]), int(r[3])) for r in self.reader().execute(
            "SELECT n.user_id, n.agent_id,"
            " (SELECT COUNT(*) FROM turns t LEFT JOIN records r ON r.rid = t.record_rid"
            "  WHERE t.ns_id = n.ns_id AND COALESCE(r.replaced, 0) = 0),"
            " (SELECT COUNT(*) FROM turns t WHERE t.ns_id = n.ns_id)"
            " FROM namespaces n ORDER BY n.ns_id")]

    def count(self, table: str, ns_id: int | None = None) -> int:
        if table not in ("turns", "records", "embeddings"):
            raise ValueError(table)
        if ns_id is None:
            return int(self.reader().execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0])
        return int(self.reader().execute(f"SELECT COUNT(*) FROM {table} WHERE ns_id=?", (ns_id,)).fetchone()[0])
