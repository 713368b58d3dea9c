"""The declared truth-store interface: what the pipelines above ``store/`` may ask of a storage backend.

Code above ``store/`` (the engine, assembly's callers, ``ingest/``, ``retrieval/``, ``recall/``, ``lifecycle/``,
the server, the bench) types against :class:`TruthStore` and :class:`Connection` from this module only; the
backends are :class:`memory_ext.store.sqlite.TruthStore` (one SQLite database in a directory) and
:class:`memory_ext.store.pg.truth.PgTruthStore` (one PostgreSQL schema), and only ``assembly.py`` names them.
This module imports no database driver.

The interface is a composition of small repositories, one per family of tables, so that a reader (or a new
backend) sees what each part of the store owns:

============================  ==============================================================================
repository                    tables and what it answers
============================  ==============================================================================
:class:`Connections`          connections, transactions, write locks, after-commit steps, schema, close
:class:`MetaRepository`       ``meta`` (store id, embedder id), ``namespaces``; row counts and size
:class:`TurnRepository`       ``turns``: insert, look up, list, neighbours, what a forget selects
:class:`RecordRepository`     ``records`` and ``embeddings``: insert, read back, filter
:class:`VersionRepository`    ``memory_history`` and the version flags of ``records`` (update, history, delete,
                              listing current memories, reindex state, ``claims`` of a namespace)
:class:`QueueRepository`      ``index_queue``: the durable queue of model work and the indexers' claims
:class:`PurgeRepository`      removing forgotten bytes from the backend's files
============================  ==============================================================================

The memory files (``files``, ``file_turns``, hooks), the cold tier, supersession claims, forget's row deletions,
export and key/value items are statements in ``store/memory_files.py``, ``tiers.py``, ``claims.py``,
``forget_rows.py``, ``portable.py`` and ``items.py`` that run on a :class:`Connection` given by
:meth:`Connections.transaction` or :meth:`Connections.reader`. Every statement is read from the connection's
statement families (:mod:`memory_ext.store.statements`: each backend writes them in its own dialect); the store's
:attr:`TruthStore.dialect` selects the SQL of metadata filters.

Every method that takes ``ns_id`` reads or writes only that namespace's rows. Methods taking a ``conn`` run on
that connection (inside the caller's transaction, or on a reader); the others read through this thread's reader.

A third backend implements every method of :class:`TruthStore` (the list is :data:`TRUTH_STORE_METHODS`) in a
package of its own under ``store/`` and adds one line to ``assembly.open_store``; the conformance suite
(``tests/postgres``) then runs on it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np

from ..errors import StoreError

if TYPE_CHECKING:
    from .filters import RecordFilter
    from .items import ItemTables
    from .repos.queue import QuarantinedWork
    from .rows import RecordRow, TurnRow

__all__ = ["TRUTH_STORE_METHODS", "Connection", "Connections", "Cursor", "MetaRepository", "PurgeRepository",
           "QueueRepository", "RecordRepository", "StoreConflict", "StoreOperationError", "TruthStore",
           "TurnRepository",
           "VersionRepository", "WorkItem"]

WorkItem = tuple[int, int, int, int]
"""A queued piece of model work: ``(rid, ns_id, dense, sparse)`` (``dense``: 1 embed the record's text, 2 the
mean of its turns' vectors, 3 its turn's vector; ``sparse``: 1 encode it)."""


class StoreConflict(StoreError):
    """A write would break a uniqueness rule of the store (a turn id already stored, say).

    Raised by every backend for its own driver's integrity error, so callers handle one class whatever the
    backend: ``what`` names the table and key, ``fix`` how to write instead.
    """

    def __init__(self, what: str, detail: str, fix: str) -> None:
        super().__init__(f"{what}: {detail}; {fix}")
        self.what, self.detail, self.fix = what, detail, fix


class StoreOperationError(StoreError):
    """A statement could not run in the backend (a lost connection, a missing table, a failed transaction).

    The PostgreSQL backend raises it for its driver's errors (the driver's error is chained as the cause).
    """


@runtime_checkable
class Cursor(Protocol):
    """The result of :meth:`Connection.execute` (the DB-API subset both ``sqlite3`` and the PostgreSQL backend
    give)."""

    @property
    def rowcount(self) -> int:
        """Rows the statement changed (-1 when not known)."""

    def fetchone(self) -> Any:
        """The next row as a tuple, or None."""

    def fetchall(self) -> list[Any]:
        """The remaining rows as tuples."""

    def __iter__(self) -> Iterator[Any]:
        """The remaining rows, one tuple at a time."""


@runtime_checkable
class Connection(Protocol):
    """A connection of the truth store: one statement at a time, parameters by position, in the connection's own
    dialect — the statements come from its statement families (``sql_of(conn)``,
    :mod:`memory_ext.store.statements`), which each backend's connections carry as ``conn.sql``."""

    def execute(self, sql: str, parameters: Any = (), /) -> Any:
        """Run one statement; returns a :class:`Cursor`."""

    def executemany(self, sql: str, parameters: Any, /) -> Any:
        """Run one statement once per parameter tuple."""

    @property
    def in_transaction(self) -> bool:
        """True inside a transaction this connection opened."""


class Connections(Protocol):
    """Connections, transactions and locks. Attributes: ``dialect`` (``"sqlite"`` | ``"postgres"``: which SQL
    the per-dialect statements use), ``directory`` (where the store lives, or a name for it), ``read_only``,
    ``write_lock`` (held by a writer for the whole of one write)."""

    dialect: str
    directory: Path
    PURGE_TARGET: str
    """What a forget's receipt names in ``pending_purge`` while :meth:`PurgeRepository.purge` has not
    completed."""
    read_only: bool
    write_lock: Any

    def reader(self) -> Connection:
        """This thread's read connection (made on first use; never blocks a writer)."""

    def transaction(self, operation: str) -> AbstractContextManager[Connection]:
        """One write transaction, committed when the block ends, rolled back whole on any error; ``operation``
        names it in errors (a read-only store raises :class:`~memory_ext.errors.ReadOnlyStoreError`), and
        ``"forget"`` marks it for :meth:`PurgeRepository.purge`."""

    def namespace_lock(self, key: tuple[str, str]) -> Any:
        """The lock a write of namespace ``(user_id, agent_id)`` holds (a context manager)."""

    def after_commit(self, callback: Callable[[], None]) -> None:
        """Run ``callback`` once the open write transaction commits (dropped if it rolls back)."""

    def add_schema(self, create: Callable[[Any], None]) -> None:
        """Let a derived index create its tables: ``create(conn)`` in a transaction (idempotent DDL)."""

    @property
    def items(self) -> ItemTables:
        """The statements on key/value items (the LangGraph store's tables)."""

    def close(self) -> None:
        """Close every connection and release the store; idempotent."""


class MetaRepository(Protocol):
    """``meta`` and ``namespaces``; counts and size."""

    @property
    def store_id(self) -> str:
        """A random id made when the store was created (keys derived indexes shared between stores)."""

    def get_meta(self, key: str) -> str | None:
        """The value of a ``meta`` key (None: unset)."""

    @staticmethod
    def set_meta(conn: Connection, key: str, value: str) -> None:
        """Set a ``meta`` key (inside a transaction)."""

    @staticmethod
    def delete_meta(conn: Connection, key: str) -> None:
        """Remove a ``meta`` key (inside a transaction)."""

    def check_embedder(self, embedder_id: str) -> bool:
        """Raise :class:`~memory_ext.errors.EmbedderMismatchError` if the store's vectors were made by another
        embedder; True when the store has no vectors yet."""

    def find_namespace(self, key: tuple[str, str]) -> int | None:
        """The ns_id of ``(user_id, agent_id)`` as this thread's reader sees it (None: not stored)."""

    @staticmethod
    def namespace_id(conn: Connection, key: tuple[str, str]) -> int | None:
        """The ns_id of ``(user_id, agent_id)`` as ``conn`` sees it (None: not stored)."""

    @staticmethod
    def ensure_namespace(conn: Connection, key: tuple[str, str]) -> int:
        """The ns_id of ``(user_id, agent_id)``, created when missing (inside a transaction)."""

    def namespaces(self) -> list[tuple[int, str, str]]:
        """``(ns_id, user_id, agent_id)`` of every namespace, in creation order."""

    def namespace_key(self, ns_id: int) -> tuple[str, str]:
        """``(user_id, agent_id)`` of a namespace row (agent_id ``''`` when none)."""

    def namespace_counts(self) -> list[tuple[str, str, int, int]]:
        """``(user_id, agent_id, current memories, turns)`` of every namespace, in creation order."""

    def count(self, table: str, ns_id: int | None = None) -> int:
        """Rows of ``turns``, ``records`` or ``embeddings`` (of one namespace when given)."""

    def disk_bytes(self) -> int:
        """What the store occupies on disk, in bytes."""


class TurnRepository(Protocol):
    """``turns``: the lossless conversation turns."""

    @staticmethod
    def next_seq(conn: Connection, ns_id: int) -> int:
        """The seq the namespace's next turn gets."""

    @staticmethod
    def insert_turns(conn: Connection, ns_id: int, rows: Sequence[dict[str, Any]]) -> None:
        """Insert the write pipeline's turn rows; a turn id already stored raises :class:`StoreConflict`."""

    @staticmethod
    def tail_turns(conn: Connection, ns_id: int, n: int = 2) -> list[dict[str, Any]]:
        """The namespace's last ``n`` turns (oldest first), with the rid of each one's turn record."""

    def turns_by_id(self, ns_id: int, turn_ids: Iterable[str]) -> dict[str, TurnRow]:
        """The stored turns with these ids, by id."""

    def list_turns(self, ns_id: int, session_id: str | None = None, limit: int | None = None,
                   offset: int = 0) -> list[TurnRow]:
        """The namespace's turns (of one session when given) in seq order, a page of them."""

    def turns_by_seq_ranges(self, ns_id: int, ranges: Sequence[tuple[int, int]]) -> list[TurnRow]:
        """Turns whose seq falls in any of the inclusive ``ranges``, in seq order, each once."""

    def recent_turns(self, ns_id: int, limit: int) -> list[tuple[str, str, int]]:
        """``(role, content, tid)`` of the namespace's last ``limit`` turns, newest first."""

    @staticmethod
    def turns_from_seq(conn: Connection, ns_id: int, seq: int) -> list[tuple[int, float, str]]:
        """``(tid, ts, content)`` of the namespace's turns from ``seq`` on, in order (what a write archives)."""

    @staticmethod
    def turns_with_external_ids(conn: Connection, ns_id: int, external_ids: Sequence[str]
                                ) -> dict[tuple[str, str | None], str]:
        """``(external id, session id)`` -> id of its latest stored turn, for the ids the namespace holds."""

    @staticmethod
    def turn_lookup(conn: Connection, ns_id: int, ident: str, session_id: str | None) -> TurnRow | None:
        """The turn with this id, else the one whose record has it, else the latest with this external id."""

    @staticmethod
    def stored_turn_rows(conn: Connection, ns_id: int) -> list[dict[str, Any]]:
        """Every turn of a namespace in seq order, as the write pipeline's rows (what a reindex re-derives)."""

    def turn_tids(self, ns_id: int, session_id: str | None = None) -> list[int]:
        """Row ids of every turn of the namespace (of one session when given): what a forget selects."""

    def file_fids(self, ns_id: int) -> list[int]:
        """Row ids of every memory file of the namespace."""

    def tids_of_record(self, ns_id: int, record_id: str) -> list[int] | None:
        """Row ids of the turns a record was built from (None: no record of the namespace has this id)."""

    def tids_of_file(self, fid: int) -> list[int]:
        """Row ids of the turns of one memory file."""

    def neighbour_tids(self, ns_id: int, tids: Sequence[int]) -> list[int]:
        """Turns of the same session right before or after the given ones (and not among them), sorted."""

    @staticmethod
    def turn_records_with_neighbours(conn: Connection, ns_id: int, tids: Sequence[int]
                                     ) -> list[dict[str, Any]]:
        """The turn records of ``tids`` with the contents of their current +-1 neighbours of the same session."""


class RecordRepository(Protocol):
    """``records`` (what retrieval returns) and ``embeddings`` (their dense vectors)."""

    @staticmethod
    def insert_records(conn: Connection, ns_id: int, rows: Sequence[dict[str, Any]],
                       anchor_rids: Sequence[int | None] | None = None) -> list[int]:
        """Insert records; returns their rids in order. ``anchor_rids``: the turn record each row is evidence
        for (a turn record is its own anchor, and becomes its turn's ``record_rid``)."""

    def insert_embeddings(self, conn: Connection, ns_id: int, rids: Sequence[int], vectors: np.ndarray,
                          embedder_id: str, vector_kind: str | None = None) -> None:
        """Store (replace) the dense vectors of these records; the first ones fix the store's embedder and record
        ``vector_kind`` (how the turn vectors were made, :data:`memory_ext.ingest.contextual.TURN_VECTORS_KEY`)."""

    def records_by_rid(self, ns_id: int, rids: Sequence[int]) -> dict[int, RecordRow]:
        """The stored records with these rids, by rid."""

    @staticmethod
    def record_ids_by_rid(conn: Connection, ns_id: int, rids: Sequence[int]) -> dict[int, str]:
        """The public ids of these records."""

    def vectors_by_rid(self, ns_id: int, rids: Sequence[int]) -> dict[int, np.ndarray]:
        """Stored vectors of these records of one namespace (damaged ones left out)."""

    @staticmethod
    def stored_vectors(conn: Connection, rids: Sequence[int]) -> dict[int, np.ndarray]:
        """Stored vectors of these records as ``conn`` sees them (any namespace: rids are global)."""

    def filter_rids(self, ns_id: int, where: str, args: Sequence[Any]) -> set[int]:
        """rids of the namespace matching a condition built by ``store/filters.py`` for this dialect."""

    def rids_matching(self, ns_id: int, record_filter: RecordFilter) -> set[int]:
        """rids of the namespace's records that pass ``record_filter`` (every rid when it is empty)."""


class VersionRepository(Protocol):
    """Memory versions: ``memory_history`` and the ``replaced`` / ``valid_to`` flags of ``records``."""

    @staticmethod
    def turns_of_memory(conn: Connection, ns_id: int, key: str, session_id: str | None
                        ) -> list[tuple[TurnRow, float | None, int]]:
        """Every stored version of a memory, oldest first, with its record's ``valid_to`` and ``replaced``."""

    @staticmethod
    def turn_record_ids(conn: Connection, ns_id: int, turn_ids: Sequence[str]) -> list[str]:
        """Ids of the turn records of these turns (what ``forget(record_ids=...)`` takes)."""

    @staticmethod
    def memory_key_of(conn: Connection, ns_id: int, turn_id: str) -> str | None:
        """The memory key an update recorded for this turn (None: not written by an update)."""

    @staticmethod
    def memory_keys_of(conn: Connection, ns_id: int, turn_ids: Sequence[str]) -> dict[str, str]:
        """The memory key an update recorded for each of these turns (others left out)."""

    @staticmethod
    def mark_replaced(conn: Connection, ns_id: int, turn_id: str, ts: float, by_record_id: str) -> None:
        """An update replaced this turn: its turn record and the records anchored to it end at ``ts``."""

    @staticmethod
    def add_history(conn: Connection, ns_id: int, key: str, session_id: str | None, op: str,
                    turn_id: str | None, ts: float) -> None:
        """Record an operation (``update`` with the new version's turn id; ``delete`` with none)."""

    @staticmethod
    def history_ops(conn: Connection, ns_id: int, key: str, session_id: str | None
                    ) -> list[tuple[str, str | None, float, str | None]]:
        """``(op, turn id, ts, session id)`` of the operations recorded for a memory, oldest first."""

    @staticmethod
    def delete_history(conn: Connection, ns_id: int) -> None:
        """Forget a whole namespace's history."""

    def current_turns(self, conn: Connection, ns_id: int, record_filter: RecordFilter, *,
                      before_seq: int | None, limit: int) -> list[TurnRow]:
        """The namespace's current versions passing ``record_filter``, newest first, a page below
        ``before_seq``."""

    def replaced_turn_ids(self, ns_id: int) -> set[str]:
        """Ids of the namespace's turns whose version an update replaced."""

    @staticmethod
    def live_update_counts(conn: Connection, ns_id: int, keys: Sequence[str]
                           ) -> dict[tuple[str, str | None], int]:
        """Per ``(memory key, session)``: the versions written by an update that are still stored."""

    @staticmethod
    def reindex_state(conn: Connection, ns_id: int) -> dict[str, Any]:
        """What a reindex keeps of a namespace's records: record ids, replaced versions, cold turns."""

    @staticmethod
    def clear_records(conn: Connection, ns_id: int) -> None:
        """Delete every record of a namespace with its vectors and claims (the turns and files stay)."""

    @staticmethod
    def delete_claims(conn: Connection, ns_id: int) -> None:
        """Every supersession claim of the namespace (when it is forgotten whole)."""


class QueueRepository(Protocol):
    """``index_queue``: the durable queue of model work (see ``memory_ext.ingest.indexer``)."""

    @staticmethod
    def create_queue_schema(conn: Connection) -> None:
        """Create ``index_queue`` (idempotent)."""

    @staticmethod
    def enqueue(conn: Connection, ns_id: int, items: Sequence[tuple[int, int, int]]) -> None:
        """Queue ``(rid, dense, sparse)`` work items of the namespace (inside the write transaction)."""

    @staticmethod
    def sparse_queued(conn: Connection, ns_id: int) -> bool:
        """True when a queued item of the namespace asks for a sparse encoding."""

    def queue_sparse(self, conn: Connection, ns_id: int, rids: Sequence[int]) -> None:
        """Queue a sparse encoding of these turn records (flag those queued already)."""

    @staticmethod
    def dequeue(conn: Connection, rids: Sequence[int], ns_id: int | None = None) -> None:
        """Remove work items (done, or their records forgotten); with ``ns_id``, only that namespace's."""

    @staticmethod
    def drop_queue(conn: Connection, ns_id: int) -> None:
        """Remove every work item of a namespace (queued or quarantined)."""

    @staticmethod
    def quarantine(conn: Connection, items: Sequence[WorkItem], errors: Mapping[int, str],
                   attempts: Mapping[int, int]) -> None:
        """Move work items the indexer gave up on from the queue into quarantine, with their last error."""

    def quarantined(self, ns_id: int | None = None) -> list[QuarantinedWork]:
        """The quarantined work items (of ``ns_id`` only, when given), oldest first."""

    def release_quarantined(self, conn: Connection, ns_id: int | None = None) -> int:
        """Queue the quarantined work items (of ``ns_id`` only, when given) again; returns how many."""

    @staticmethod
    def queued(conn: Connection, limit: int, rids: Sequence[int] | None = None,
               ns_id: int | None = None) -> list[WorkItem]:
        """The oldest ``limit`` work items (of ``rids`` / of ``ns_id`` only, when given)."""

    @staticmethod
    def queued_windows(conn: Connection, turn_rids: Sequence[int]) -> list[WorkItem]:
        """Work items of the queued windows anchored to these turn records."""

    def claimed_work(self, limit: int) -> AbstractContextManager[list[WorkItem]]:
        """The next batch for this process's indexer, claimed against other processes while the block runs."""

    def pending(self, ns_id: int | None = None, *, dense_only: bool = False) -> int:
        """Records (of ``ns_id``, or of the store) whose model work is not written yet; ``dense_only``: those
        whose vector is not written yet (of ``ns_id``; not those waiting only for a sparse encoding)."""

    def work_sources(self, rids: Sequence[int]) -> dict[int, tuple[str, str, list[int], int | None]]:
        """``rid -> (index_text, text, rids of its turns' turn records, anchor rid)`` of queued records."""


class PurgeRepository(Protocol):
    """Removing forgotten bytes from the backend's files after a forget has committed."""

    @property
    def purge_pending(self) -> bool:
        """True while forgotten bytes may still be on disk."""

    @property
    def pending_targets(self) -> tuple[str, ...]:
        """What still holds forgotten bytes while :attr:`purge_pending` (a forget's receipt names them)."""

    def purge(self, *, wait_s: float = 0.0) -> bool:
        """Remove forgotten bytes, waiting at most ``wait_s`` for readers; True when complete."""

    def checkpoint(self) -> bool:
        """:meth:`purge` without waiting."""


class TruthStore(Connections, MetaRepository, TurnRepository, RecordRepository, VersionRepository,
                 QueueRepository, PurgeRepository, Protocol):
    """The truth store: every repository of this module. Implemented by ``store/sqlite`` and ``store/pg``."""


def _methods(protocol: type) -> frozenset[str]:
    names: set[str] = set()
    for klass in protocol.__mro__:
        if klass in (object, Protocol) or klass.__name__ in ("Generic",):
            continue
        names.update(n for n in vars(klass) if not n.startswith("_") and n not in ("dialect", "directory",
                                                                                    "read_only", "write_lock",
                                                                                    "PURGE_TARGET"))
    return frozenset(names)


TRUTH_STORE_METHODS: frozenset[str] = _methods(TruthStore)
"""Every method and property a truth-store backend implements (what the conformance suite must cover)."""
