"""What every truth-store backend shares above its connections: after-commit steps, the purge flags, the item
statements. The repositories of ``store/repos`` build on it; a backend supplies :meth:`CommonStore.reader`,
``transaction``, :meth:`CommonStore.purge` and ``dialect``.

The repositories declare the statements they run as families of texts (``TurnsSql``, ``RecordsSql``, ...) and
read each one from the connection they run on (``sql_of(conn)``): each backend writes every family in its own
dialect (``store/sqlite/statements.py``, ``store/pg/statements.py``), so nothing is rewritten at run time.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable
from pathlib import Path

from ...errors import StoreError
from ..interface import Connection
from ..items import ItemTables

__all__ = ["CommonStore"]


class CommonStore:
    """The part of a truth store every backend shares (see the module docstring)."""

    dialect: str
    directory: Path
    """``"sqlite"`` | ``"postgres"``: the SQL dialect of statements built per backend (metadata filters)."""
    _after_commit: list[Callable[[], None]] | None
    _missing_table: tuple[type[Exception], ...] = ()
    """What the backend's connections raise for a table that does not exist (an old store opened read-only)."""
    _purge_pending: bool

    def reader(self) -> Connection:
        """This thread's read connection (each backend makes its own)."""
        raise NotImplementedError

    def purge(self, *, wait_s: float = 0.0) -> bool:
        """Remove forgotten bytes from the backend's files; True when complete (each backend its own way)."""
        raise NotImplementedError

    def _run_after_commit(self, operation: str) -> None:
        """Run the after-commit steps of the transaction that just committed (a failed step warns: the commit
        stands, and the next open repairs the derived index)."""
        callbacks, self._after_commit = self._after_commit or [], None
        for callback in callbacks:  # e.g. Chroma deletions: only once the truth store has committed
            try:
                callback()
            except Exception as exc:  # noqa: BLE001  the commit stands; the index is repaired at the next open
                warnings.warn(f"after-commit step of {operation!r} failed ({type(exc).__name__}: {exc}); "
                              "the next open repairs the derived index", RuntimeWarning, stacklevel=4)

    def after_commit(self, callback: Callable[[], None]) -> None:
        """Run ``callback`` once the current write transaction has committed (dropped if it rolls back).

        Derived stores outside SQLite (Chroma) delete through this: a crash before the commit leaves them
        untouched, a crash after it leaves extra entries that the next open removes — never a record whose
        vector is gone.
        """
        if self._after_commit is None:
            raise StoreError("after_commit: no write transaction is open")
        self._after_commit.append(callback)

    @property
    def purge_pending(self) -> bool:
        """True while forgotten bytes may still be in the write-ahead log or in unallocated database space."""
        return self._purge_pending

    @property
    def pending_targets(self) -> tuple[str, ...]:
        """The files that may still hold forgotten bytes while :attr:`purge_pending` (relative to the store)."""
        return getattr(self, "_pending_targets", ()) if self._purge_pending else ()

    def checkpoint(self) -> bool:
        """Alias of :meth:`purge` (non-blocking); True when the log was truncated."""
        return self.purge()

    @functools.cached_property
    def items(self) -> ItemTables:
        """The statements on key/value items (:mod:`memory_ext.store.items`)."""
        return ItemTables(self.dialect)
