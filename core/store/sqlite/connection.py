"""SQLite's read connections: a thread's reader that :meth:`memory_ext.store.sqlite.TruthStore.close` closes
only between statements (a channel call abandoned at its timeout may still be reading on it)."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Iterator
from typing import Any

from ...errors import StoreError
from .statements import SqliteConnection

__all__ = ["READER_CLOSE_WAIT_S", "ReaderConnection"]

READER_CLOSE_WAIT_S = 2.0
"""How long :meth:`TruthStore.close` waits, in all, for read connections whose statement is still running (a
channel call abandoned at ``recall.channel_timeout_s``) before it leaves them to close themselves."""

_CLOSED_MESSAGE = "the store is closed (a read that outlived MemoryEngine.close); open a new engine to read it"


class _ReaderConnection(SqliteConnection):
    """A thread's read connection that :meth:`TruthStore.close` closes only between statements.

    Every statement step (``execute``, each ``fetch``, iteration in batches) runs holding ``gate``; the store
    closes the connection holding it too, so it never frees a connection a statement is running on (which
    crashes the process). A connection whose statement outlives the close's wait is *abandoned*: the statement
    finishes, then the connection closes itself. Any later use raises :class:`StoreError`.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.gate = threading.Lock()
        self.shut = False
        self.abandoned = False
        self.on_shut: Callable[[], None] | None = None

    def enter(self) -> None:
        self.gate.acquire()
        if self.shut:
            self.gate.release()
            raise StoreError(_CLOSED_MESSAGE)

    def leave(self) -> None:
        self.gate.release()
        if self.abandoned:
            self.shut_down(wait_s=0.0)

    def shut_down(self, wait_s: float) -> bool:
        """Close now if no statement runs (waiting at most ``wait_s``); True when closed (or already)."""
        got = self.gate.acquire(timeout=wait_s) if wait_s > 0 else self.gate.acquire(blocking=False)
        if not got:
            return False
        try:
            if self.shut:
                return True
            self.shut = True
            super().close()
        finally:
            self.gate.release()
        if self.on_shut is not None:
            self.on_shut()
        return True

    def close(self) -> None:
        self.shut_down(wait_s=READER_CLOSE_WAIT_S)

    def cursor(self, factory: Any = None) -> Any:
        if self.shut:
            raise StoreError(_CLOSED_MESSAGE)
        return super().cursor(factory or _ReaderCursor)

    def execute(self, sql: str, parameters: Any = (), /) -> Any:
        return self.cursor().execute(sql, parameters)

    def executemany(self, sql: str, parameters: Any, /) -> Any:
        return self.cursor().executemany(sql, parameters)


class _ReaderCursor(sqlite3.Cursor):
    """A cursor of a :class:`_ReaderConnection`: each call into SQLite holds the connection's gate."""

    def execute(self, sql: str, parameters: Any = (), /) -> Any:
        conn: _ReaderConnection = self.connection  # type: ignore[assignment]
        conn.enter()
        try:
            super().execute(sql, parameters)
        finally:
            conn.leave()
        return self

    def executemany(self, sql: str, parameters: Any, /) -> Any:
        conn: _ReaderConnection = self.connection  # type: ignore[assignment]
        conn.enter()
        try:
            super().executemany(sql, parameters)
        finally:
            conn.leave()
        return self

    def fetchone(self) -> Any:
        conn: _ReaderConnection = self.connection  # type: ignore[assignment]
        conn.enter()
        try:
            return super().fetchone()
        finally:
            conn.leave()

    def fetchmany(self, size: int | None = None) -> list[Any]:
        conn: _ReaderConnection = self.connection  # type: ignore[assignment]
        conn.enter()
        try:
            return super().fetchmany(self.arraysize if size is None else size)
        finally:
            conn.leave()

    def fetchall(self) -> list[Any]:
        conn: _ReaderConnection = self.connection  # type: ignore[assignment]
        conn.enter()
        try:
            return super().fetchall()
        finally:
            conn.leave()

    def __iter__(self) -> Iterator[Any]:  # type: ignore[override]
        while rows := self.fetchmany(256):
            yield from rows

    def __next__(self) -> Any:
        row = self.fetchone()
        if row is None:
            raise StopIteration
        return row


ReaderConnection = _ReaderConnection
