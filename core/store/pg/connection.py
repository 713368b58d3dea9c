"""A psycopg 3 connection as the store's :class:`memory_ext.store.interface.Connection`.

The truth store and the derived indexes run the PostgreSQL text of their statement families
(:mod:`memory_ext.store.pg.statements`, carried as ``conn.sql``) with ``execute`` / ``executemany``, read
``fetchone`` / ``fetchall`` / iterate, ``rowcount`` after an update and ``in_transaction``. Statements run as
written — nothing is rewritten here; an insert whose id is read says ``RETURNING``. Values are bound client-side
(``ClientCursor``), numpy scalars and booleans become plain numbers, a lost connection is reopened between
transactions, and a bare ``BEGIN`` opens the connection's kind of transaction (a reader's repeatable-read
snapshot).

Errors are the store's own (:mod:`memory_ext.store.interface`): a unique violation is a
:class:`~memory_ext.store.interface.StoreConflict`, any other failure (a missing table, a lost server) a
:class:`~memory_ext.store.interface.StoreOperationError`; the psycopg error is chained as the cause.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import numpy as np

from ..interface import StoreConflict, StoreError, StoreOperationError
from .statements import POSTGRES, PgStatements

__all__ = ["PgConnection", "PgCursor", "as_store_error"]


def as_store_error(exc: Exception) -> StoreError:
    """The store's exception for a psycopg error: :class:`StoreConflict` for a unique (integrity) violation,
    else :class:`StoreOperationError`."""
    import psycopg

    if isinstance(exc, psycopg.errors.IntegrityError):
        return StoreConflict("PostgreSQL", str(exc).strip(), "the row is stored already")
    return StoreOperationError(f"PostgreSQL: {str(exc).strip()}")


def _value(v: Any) -> Any:
    if isinstance(v, (bool, np.bool_, np.integer)):
        return int(v)
    if isinstance(v, np.floating):
        return float(v)
    if isinstance(v, memoryview):
        return bytes(v)
    return v


def _params(params: Sequence[Any] | None) -> tuple[Any, ...]:
    return tuple(_value(v) for v in (params or ()))


class PgCursor:
    """The rows of one statement (read eagerly), with ``rowcount``."""

    __slots__ = ("_i", "_rows", "rowcount")

    def __init__(self, rows: list[tuple[Any, ...]], rowcount: int = -1) -> None:
        self._rows = rows
        self._i = 0
        self.rowcount = rowcount

    def fetchone(self) -> tuple[Any, ...] | None:
        if self._i >= len(self._rows):
            return None
        row = self._rows[self._i]
        self._i += 1
        return row

    def fetchall(self) -> list[tuple[Any, ...]]:
        rows, self._i = self._rows[self._i:], len(self._rows)
        return rows

    def __iter__(self) -> Iterator[tuple[Any, ...]]:
        while (row := self.fetchone()) is not None:
            yield row


class PgConnection:
    """The store's connection surface over one psycopg connection (autocommit; ``BEGIN``/``COMMIT`` explicit).

    ``begin``: what a bare ``BEGIN`` becomes (readers open a repeatable-read snapshot, like a SQLite reader).
    """

    sql: PgStatements = POSTGRES
    """The statements this connection runs (:mod:`memory_ext.store.pg.statements`)."""

    def __init__(self, raw: Any, *, begin: str = "BEGIN", reopen: Callable[[Any], Any] | None = None) -> None:
        self.raw = raw
        self._begin = begin
        self.reopen = reopen
        """``reopen(lost_raw) -> new_raw``: a fresh connection for one that was lost (a server restart, an idle
        timeout, an administrator's kill). None: a lost connection stays lost."""
        self._tx = False  # inside a BEGIN ... COMMIT/ROLLBACK this object issued

    def _usable(self, head: str) -> bool:
        """Get the connection ready for a statement starting with ``head``; False: nothing to run (the ROLLBACK
        of a transaction whose connection was lost — the server rolled it back already)."""
        if not self.raw.closed or self.reopen is None:
            return True
        if self._tx:
            self._tx = False
            if head.startswith("ROLLBACK"):
                return False
            raise StoreOperationError("the connection to PostgreSQL was lost inside a transaction; the "
                                           "transaction was rolled back")
        self.raw = self.reopen(self.raw)
        return True

    def _track(self, head: str) -> None:
        if head.startswith("BEGIN"):
            self._tx = True
        elif head.startswith(("COMMIT", "ROLLBACK", "END")):
            self._tx = False

    @property
    def in_transaction(self) -> bool:
        from psycopg.pq import TransactionStatus

        return bool(self.raw.info.transaction_status in (TransactionStatus.INTRANS, TransactionStatus.INERROR))

    def _sql(self, sql: str) -> str:
        return self._begin if sql.lstrip()[:5].upper() == "BEGIN" else sql

    def execute(self, sql: str, params: Sequence[Any] | None = ()) -> PgCursor:
        text = self._sql(sql)
        head = sql.lstrip()[:16].upper()
        if not self._usable(head):
            return PgCursor([])
        standalone = not self._tx and not head.startswith(("COMMIT", "ROLLBACK", "END"))
        for attempt in (0, 1):
            try:
                with self.raw.cursor() as cur:
                    cur.execute(text, _params(params))
                    rows = cur.fetchall() if cur.description is not None else []
                    count = cur.rowcount
                break
            except Exception as exc:
                if not _is_pg_error(exc):
                    raise
                if head.startswith(("COMMIT", "ROLLBACK", "END")):
                    self._tx = False  # a failed COMMIT ends the transaction too (the server rolled it back)
                if attempt == 0 and standalone and self.raw.closed and self.reopen is not None:
                    self.raw = self.reopen(self.raw)  # the connection was lost before this statement ran: again
                    continue
                raise as_store_error(exc) from exc
        self._track(head)
        return PgCursor(rows, count)

    def executemany(self, sql: str, seq: Iterable[Sequence[Any]]) -> PgCursor:
        text = self._sql(sql)
        self._usable(sql.lstrip()[:16].upper())
        batch = [_params(p) for p in seq]
        if not batch:
            return PgCursor([], 0)
        try:
            with self.raw.cursor() as cur:
                cur.executemany(text, batch)
                count = cur.rowcount
        except Exception as exc:
            if _is_pg_error(exc):
                raise as_store_error(exc) from exc
            raise
        return PgCursor([], count)

    def close(self) -> None:
        self.raw.close()


def _is_pg_error(exc: Exception) -> bool:
    import psycopg

    return isinstance(exc, psycopg.Error)
