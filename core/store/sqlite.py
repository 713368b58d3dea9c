"""The truth store: one SQLite database (WAL) in the store directory.

It holds namespaces, turns, records and embeddings (float32 blobs tagged with the embedder id and dimension);
the keyword index keeps its postings in the same database. Every query that touches user data carries a
namespace id (``ns_id``), so one namespace can never read another's rows.

Concurrency: one *writer process* per directory, enforced by an exclusive ``flock`` on ``LOCK`` (a second writer
fails fast with :class:`~memory_ext.errors.StoreLockedError`); any number of read-only processes. Inside a
process, writes are serialised by a lock on the single write connection, and every thread reads through its own
connection, so searches run in parallel with each other and with a write. :meth:`TruthStore.close` closes a
thread's read connection only while no statement of it runs (a channel call abandoned at its timeout may still be
reading): it waits for one at most ``READER_CLOSE_WAIT_S`` in all, then leaves it to close itself when its
statement ends; a later read on it raises :class:`~memory_ext.errors.StoreError` instead of touching a closed
connection.

Durability (``storage.durability``): ``full`` (the default) commits with ``PRAGMA synchronous=FULL``, so a write
that returned survives a power loss; ``normal`` (``synchronous=NORMAL``) survives a killed process but may lose
the last commits on power loss, for a cheaper commit.

Forgetting: ``secure_delete`` overwrites deleted cells and freed pages, and a forget's purge checkpoints and
truncates the write-ahead log, then zeroes the unallocated space of every page
(:mod:`memory_ext.store.sqlite_scrub`), where b-tree balances leave old copies of cells.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import shutil
import sqlite3
import threading
import time
import uuid
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import (
    ConfigError,
    CorruptStoreError,
    EmbedderMismatchError,
    ReadOnlyStoreError,
    SchemaVersionError,
    StoreError,
    StoreLockedError,
)
from ..models import Turn
from ..validate import stored_json
from .filters import RecordFilter, filter_sql
from .items import ItemTables
from .snapshots import chunks, marks
from .sqlite_scrub import scrub

__all__ = ["DB_FILE", "DURABILITY", "SCHEMA_VERSION", "RecordRow", "TruthStore", "TurnRow"]

DB_FILE = "memory.sqlite3"
BUSY_TIMEOUT_MS = 30_000
LOCK_FILE = "LOCK"
DURABILITY = {"full": "FULL", "normal": "NORMAL"}
"""``storage.durability`` -> the write connection's ``PRAGMA synchronous``."""
SCRUB_META = "sqlite_scrub_pending"
"""``meta`` key a forget sets in its own transaction and the purge clears once the database file's unallocated
space is zeroed (so a purge cut short by a crash or a reader is finished by the next open)."""
DERIVED_OPERATIONS = frozenset({"index vectors"})
"""Transactions that write only what the durable queue can make again (vectors, sparse encodings, and the queue
items they finish): with ``durability: full`` they commit with ``synchronous=NORMAL`` — still atomic, and a power
loss that drops one leaves its queue items to be done again — so the background indexer's commits do not hold
the write lock through an ``fsync`` a chat message then waits behind."""
READER_CLOSE_WAIT_S = 2.0
"""How long :meth:`TruthStore.close` waits, in all, for read connections whose statement is still running (a
channel call abandoned at ``recall.channel_timeout_s``) before it leaves them to close themselves."""

_CLOSED_MESSAGE = "the store is closed (a read that outlived MemoryEngine.close); open a new engine to read it"


class _ReaderConnection(sqlite3.Connection):
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


def _run_script(conn: sqlite3.Connection, script: str) -> None:
    """Execute ``;``-separated DDL inside the caller's transaction (``executescript`` would commit it)."""
    for statement in script.split(";"):
        if statement.strip():
            conn.execute(statement)


def _v1(conn: sqlite3.Connection) -> None:
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


def _v2(conn: sqlite3.Connection) -> None:
    """Records point at the turn record they are anchored to (a window at its centre turn)."""
    conn.execute("ALTER TABLE records ADD COLUMN anchor_rid INTEGER")
    conn.execute("UPDATE records SET anchor_rid = rid WHERE kind = 'turn'")
    conn.execute("ALTER TABLE turns ADD COLUMN record_rid INTEGER")
    conn.execute("UPDATE turns SET record_rid = (SELECT r.rid FROM records r WHERE r.ns_id = turns.ns_id"
                 " AND r.kind = 'turn' AND r.turn_ids = json_array(turns.id))")


def _v3(conn: sqlite3.Connection) -> None:
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


def _v4(conn: sqlite3.Connection) -> None:
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


def _v5(conn: sqlite3.Connection) -> None:
    """Key/value items (the LangGraph store's) in the truth store: :mod:`memory_ext.store.items`."""
    from .items import create_item_schema

    create_item_schema(conn)


MIGRATIONS: list[Callable[[sqlite3.Connection], None]] = [_v1, _v2, _v3, _v4, _v5]
"""MIGRATIONS[i] upgrades a store from schema version i to i + 1. Append, never edit."""
SCHEMA_VERSION = len(MIGRATIONS)


@dataclass(frozen=True, slots=True)
class TurnRow:
    """A stored turn, as the engine reads it back."""

    tid: int
    id: str
    seq: int
    session_id: str | None
    role: str
    speaker: str | None
    content: str
    ts: float | None
    external_id: str | None
    tool_calls: list[dict[str, Any]]
    attachments: list[dict[str, Any]]
    metadata: dict[str, Any]
    token_count: int
    record_rid: int | None = None
    """The rid of the turn's own record (its position in the catalog decides whether a search may show it)."""

    def to_turn(self) -> Turn:
        """The public :class:`~memory_ext.models.Turn` of this row."""
        return Turn(role=self.role, content=self.content, speaker=self.speaker, session_id=self.session_id,
                    timestamp=datetime.fromtimestamp(self.ts, UTC) if self.ts is not None else None,
                    external_id=self.external_id, tool_calls=tuple(self.tool_calls),
                    attachments=tuple(self.attachments), metadata=self.metadata, id=self.id)


@dataclass(frozen=True, slots=True)
class RecordRow:
    """A stored record, as the read path needs it."""

    rid: int
    id: str
    kind: str
    text: str
    turn_ids: list[str]
    source_role: str | None
    speaker: str | None
    session_id: str | None
    ref_ts: float | None


def _lock_holder(path: Path) -> str:
    try:
        return f"pid {path.read_text().strip() or '?'}"
    except OSError:
        return "unknown process"


def _header_problem(db_path: Path) -> str | None:
    """Why a database file cannot be a sound SQLite database, from its 100-byte header (None: it may be).

    Catches a file that is not SQLite at all and one cut short (a partial copy): the header records the page
    count, and a file shorter than that lost pages — unless a write-ahead log is beside it (a checkpoint that a
    crash interrupted leaves the database short; the log still holds the pages and SQLite recovers them). Cheap;
    deeper damage surfaces as CorruptStoreError on use.
    """
    try:
        size = db_path.stat().st_size
    except (FileNotFoundError, NotADirectoryError):
        return None
    if size == 0:
        return None  # created, never written: SQLite initialises it
    with db_path.open("rb") as f:
        header = f.read(100)
    if len(header) < 100 or not header.startswith(b"SQLite format 3\x00"):
        return "not a SQLite database (bad header)"
    page_size = int.from_bytes(header[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    pages = int.from_bytes(header[28:32], "big")
    counter_valid = header[24:28] == header[92:96]
    wal = db_path.with_name(db_path.name + "-wal")
    if wal.exists() and wal.stat().st_size > 0:
        return None
    if counter_valid and pages and size < pages * page_size:
        return f"truncated: {size} bytes, the header counts {pages} pages of {page_size} bytes"
    return None


class NewDirectory:
    """The part of a store path that does not exist yet; :meth:`undo` removes it again (a failed open leaves
    nothing behind)."""

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        path = Path(directory).expanduser().absolute()
        self.top: Path | None = None
        while not path.exists() and path != path.parent:
            self.top, path = path, path.parent

    def undo(self) -> None:
        if self.top is not None and self.top.is_dir():
            shutil.rmtree(self.top, ignore_errors=True)


def check_embedder_shape(embedder: Any) -> None:
    """Refuse an embedder whose ``dim`` is not a positive integer (it would store empty vectors)."""
    dim = getattr(embedder, "dim", None)
    if isinstance(dim, bool) or not isinstance(dim, int) or dim <= 0:
        raise ConfigError("embedder.dim", dim, f"the embedder {getattr(embedder, 'id', '?')!r} must report its "
                                               "vector dimension as a positive integer")


class TruthStore:
    """SQLite truth store of one directory. Use through :class:`memory_ext.MemoryEngine`.

    A directory it creates gets ``dir_mode`` (default ``0o700``) and the database ``file_mode`` (``0o600``).
    ``durability`` is ``storage.durability`` (``full``: ``synchronous=FULL``; ``normal``: ``synchronous=NORMAL``).
    """

    dialect = "sqlite"
    """The SQL dialect of statements built per backend (metadata filters)."""
    PURGE_TARGET = DB_FILE + "-wal"
    """What a forget's receipt names in ``pending_purge`` while :meth:`purge` has not completed."""

    def __init__(self, directory: str | os.PathLike[str], *, read_only: bool = False, dir_mode: int = 0o700,
                 file_mode: int = 0o600, durability: str = "full") -> None:
        if durability not in DURABILITY:
            raise ConfigError("storage.durability", durability, f"choose one of {sorted(DURABILITY)}: full (the "
                                                                "default, survives a power loss) or normal")
        self.durability = durability
        self.directory = Path(directory).expanduser()
        if self.directory.exists() and not self.directory.is_dir():
            raise StoreError(f"store path {str(self.directory)!r} is a file, not a directory; give the path of a "
                             f"directory (it is created if missing), e.g. {str(self.directory) + '.d'!r}")
        self.file_mode = file_mode
        self.read_only = read_only
        self._lock_fd: int | None = None
        self.write_lock = threading.RLock()
        self._local = threading.local()
        self._readers: list[sqlite3.Connection] = []
        self._readers_lock = threading.Lock()
        self._abandoned: set[int] = set()  # ids of read connections left to close themselves (see close)
        self._closed = False
        self._purge_pending = False
        self._scrub_pending = False  # a forget committed; the database file's free space is not zeroed yet
        self._scrub_mark_done = False  # scrubbed, but the forget's mark in meta is not cleared yet (next write)
        self._pending_targets: tuple[str, ...] = ()
        self._db_fd: int | None = None  # kept open until every connection is closed (see _scrub)
        self._after_commit: list[Callable[[], None]] | None = None
        db_path = self.directory / DB_FILE
        problem = _header_problem(db_path)
        if problem is not None:
            raise CorruptStoreError(str(self.directory), f"{DB_FILE}: {problem}")
        if read_only:
            if not db_path.exists():
                raise StoreError(f"no store at {str(self.directory)!r}: open it once without read_only to create it")
            self._writer: sqlite3.Connection | None = None
        else:
            try:
                if not self.directory.exists():
                    self.directory.mkdir(parents=True, mode=dir_mode)
                    os.chmod(self.directory, dir_mode)  # mkdir's mode is filtered by the umask
            except (FileExistsError, NotADirectoryError) as exc:
                raise StoreError(f"store path {str(self.directory)!r} cannot be a directory ({exc.strerror}: a "
                                 f"file is in the way); give another path") from None
            except PermissionError as exc:
                raise StoreError(f"cannot create the store directory {str(self.directory)!r} ({exc.strerror}); "
                                 f"choose a writable path") from None
            self._acquire_lock()
            try:
                if not db_path.exists():  # SQLite gives -wal and -shm the database file's permissions
                    os.close(os.open(db_path, os.O_RDWR | os.O_CREAT, file_mode))
                self._writer = self._open_writer(db_path)
                self._migrate(self._writer)
                self._scrub_pending = self._writer.execute("SELECT 1 FROM meta WHERE key=?",
                                                           (SCRUB_META,)).fetchone() is not None
                self.purge()  # a purge left pending by a previous process (crash, reader at close) ends here
            except sqlite3.DatabaseError as exc:
                self._release_writer()
                raise CorruptStoreError(str(self.directory), f"{DB_FILE}: {exc}") from None
            except BaseException:
                self._release_writer()
                raise
        self._db_path = db_path
        try:
            version = self._schema_version(self.reader())
        except sqlite3.DatabaseError as exc:
            self.close()
            raise CorruptStoreError(str(self.directory), f"{DB_FILE}: {exc}") from None
        if version > SCHEMA_VERSION:
            raise SchemaVersionError(
                f"store {str(self.directory)!r} has schema version {version}, newer than this memory-ext "
                f"understands ({SCHEMA_VERSION}); upgrade memory-ext"
            )

    # -- connections -------------------------------------------------------------------------------------
    @staticmethod
    def _connect(db_path: Path, *, read_only: bool,
                 factory: type[sqlite3.Connection] = sqlite3.Connection) -> sqlite3.Connection:
        if read_only:
            conn = sqlite3.connect(f"{db_path.as_uri()}?mode=ro", uri=True, check_same_thread=False,
                                   isolation_level=None, timeout=BUSY_TIMEOUT_MS / 1000, factory=factory)
        else:
            conn = sqlite3.connect(db_path, check_same_thread=False, isolation_level=None,
                                   timeout=BUSY_TIMEOUT_MS / 1000, factory=factory)
        conn.execute("PRAGMA foreign_keys=ON")
        return conn

    def _open_writer(self, db_path: Path) -> sqlite3.Connection:
        """The write connection: WAL, ``synchronous`` by ``durability``, ``secure_delete``."""
        conn = self._connect(db_path, read_only=False)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute(f"PRAGMA synchronous={DURABILITY[self.durability]}")
        if self.durability == "full":
            conn.execute("PRAGMA fullfsync=ON")  # macOS: F_FULLFSYNC, so the drive's cache is flushed too
        conn.execute("PRAGMA secure_delete=ON")  # forgotten text is overwritten, not left in free pages
        return conn

    def _release_writer(self) -> None:
        """A failed open: close the write connection (if made) and release the lock."""
        writer, self._writer = getattr(self, "_writer", None), None
        if writer is not None:
            writer.close()
        self._release_lock()

    def _acquire_lock(self) -> None:
        path = self.directory / LOCK_FILE
        fd = os.open(path, os.O_RDWR | os.O_CREAT, self.file_mode)
        try:
            import fcntl

            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except ImportError:  # pragma: no cover - not POSIX: no cross-process lock
            pass
        except BlockingIOError:
            os.close(fd)
            raise StoreLockedError(str(self.directory), _lock_holder(path)) from None
        os.ftruncate(fd, 0)
        os.write(fd, str(os.getpid()).encode())
        self._lock_fd = fd

    def _release_lock(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)  # closing the descriptor releases the flock
            self._lock_fd = None

    def reader(self) -> sqlite3.Connection:
        """This thread's read connection (created on first use)."""
        if self._closed:
            raise StoreError("the store is closed")
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._connect(self.directory / DB_FILE, read_only=self.read_only, factory=_ReaderConnection)
            conn.execute("PRAGMA query_only=ON")
            self._local.conn = conn
            with self._readers_lock:
                self._readers.append(conn)
        return conn

    @contextmanager
    def transaction(self, operation: str) -> Iterator[sqlite3.Connection]:
        """One write transaction on the writer connection; rolled back whole on any error."""
        if self._writer is None:
            raise ReadOnlyStoreError(operation)
        with self.write_lock:
            conn = self._writer
            scrubs = isinstance(conn, sqlite3.Connection)  # the file's free space (not PostgreSQL's, see purge)
            relaxed = scrubs and self.durability == "full" and operation in DERIVED_OPERATIONS
            if relaxed:
                conn.execute("PRAGMA synchronous=NORMAL")
            try:
                conn.execute("BEGIN IMMEDIATE")
            except BaseException:
                if relaxed:
                    conn.execute("PRAGMA synchronous=FULL")
                raise
            self._after_commit = []
            try:
                if scrubs and operation == "forget":  # what purge must finish, in the forget's own transaction
                    self.set_meta(conn, SCRUB_META, "1")
                elif scrubs and self._scrub_mark_done:  # the last forget's purge finished: its mark goes now
                    self.delete_meta(conn, SCRUB_META)
                yield conn
            except BaseException:
                self._after_commit = None
                conn.execute("ROLLBACK")
                if relaxed:
                    conn.execute("PRAGMA synchronous=FULL")
                raise
            else:
                conn.execute("COMMIT")
                if relaxed:
                    conn.execute("PRAGMA synchronous=FULL")
                if scrubs:
                    if operation == "forget":
                        self._scrub_pending = self._purge_pending = True
                    self._scrub_mark_done = False
                callbacks, self._after_commit = self._after_commit, None
                for callback in callbacks:  # e.g. Chroma deletions: only once the truth store has committed
                    try:
                        callback()
                    except Exception as exc:  # noqa: BLE001  the commit stands; the index is repaired at the next open
                        warnings.warn(f"after-commit step of {operation!r} failed ({type(exc).__name__}: {exc}); "
                                      "the next open repairs the derived index", RuntimeWarning, stacklevel=3)
                if self.purge_pending:  # an earlier forget could not finish its on-disk purge: try again
                    self.purge()

    def namespace_lock(self, key: tuple[str, str]) -> Any:
        """The write lock for a write of one namespace: on SQLite the store's one write lock (a PostgreSQL store
        lets writers of different namespaces proceed side by side)."""
        return self.write_lock

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

    def purge(self, *, wait_s: float = 0.0) -> bool:
        """Remove every byte of forgotten data from the store's files; True when that completed.

        First ``PRAGMA wal_checkpoint(TRUNCATE)``, which returns ``(busy, log frames, checkpointed frames)``: it
        completes only when no other connection (of any process) holds an older read snapshot. It never waits
        longer than ``wait_s`` (default: not at all), so a reader in another process cannot stall ``forget`` or
        the writers behind it. Then, after a forget, the unallocated space of every page of the database file is
        zeroed (:func:`memory_ext.store.sqlite_scrub.scrub`: ``secure_delete`` does not reach the old copies of
        cells a b-tree balance left in live pages), or, if a page does not parse, the database is rebuilt
        (``VACUUM``). An incomplete purge stays pending (:attr:`pending_targets` names the file) and is retried
        after every later write, at ``close`` and at the next open, until it completes.
        """
        if self._writer is None:
            return not self._purge_pending
        with self.write_lock:
            if not self._checkpoint(wait_s):
                self._purge_pending, self._pending_targets = True, (self.PURGE_TARGET,)
                return False
            if self._scrub_pending and not self._scrub(wait_s):
                self._purge_pending, self._pending_targets = True, (DB_FILE,)
                return False
            self._purge_pending, self._pending_targets = False, ()
            return True

    def _checkpoint(self, wait_s: float) -> bool:
        """Checkpoint the write-ahead log into the database and truncate it (waiting at most ``wait_s`` for
        readers); True when the log is empty."""
        assert self._writer is not None
        conn = self._writer
        conn.execute(f"PRAGMA busy_timeout={max(0, int(wait_s * 1000))}")
        try:
            busy, log, done = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        except sqlite3.OperationalError:  # SQLITE_BUSY/LOCKED reported as an error
            busy, log, done = 1, -1, -1
        finally:
            conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
        wal = self.directory / (DB_FILE + "-wal")
        return bool(busy == 0 and log == done and (not wal.exists() or wal.stat().st_size == 0))

    def _scrub(self, wait_s: float) -> bool:
        """Zero the unallocated space of the database file (the log is empty: the file is the whole database);
        True when done. The forget's mark in ``meta`` is cleared by the next write (or at close): until then a
        crash only costs the next open one more scrub."""
        assert self._writer is not None
        if self._db_fd is None:
            # one descriptor for the store's lifetime: closing any descriptor of the file drops the POSIX locks
            # SQLite holds on it, so it is closed only after every connection (see close)
            self._db_fd = os.open(self.directory / DB_FILE, os.O_RDWR)
        roots = [int(r[0]) for r in self._writer.execute("SELECT rootpage FROM sqlite_schema WHERE rootpage > 0")]
        result = scrub(self._db_fd, roots)
        if result.problems:
            why = "; ".join(result.problems[:3])
            warnings.warn(f"{DB_FILE}: the free space of some pages could not be zeroed ({why}); rebuilding the "
                          "database (VACUUM) instead", RuntimeWarning, stacklevel=3)
            try:
                self._writer.execute("VACUUM")
            except sqlite3.OperationalError:
                return False
            if not self._checkpoint(wait_s):
                return False
        elif result.bytes_zeroed:
            # its page cache still holds the old bytes, which its next write of such a page would copy back
            self._writer.close()
            self._writer = self._open_writer(self.directory / DB_FILE)
        self._scrub_pending, self._scrub_mark_done = False, True
        return True

    def checkpoint(self) -> bool:
        """Alias of :meth:`purge` (non-blocking); True when the log was truncated."""
        return self.purge()

    def close(self) -> None:
        """Close every connection and release the writer lock. A read connection whose statement is still
        running (a channel call abandoned at its timeout) is waited for at most ``READER_CLOSE_WAIT_S`` in all,
        then left to close itself when the statement ends; reading on it afterwards raises ``StoreError``."""
        if self._closed:
            return
        self._closed = True
        deadline = time.monotonic() + READER_CLOSE_WAIT_S
        with self._readers_lock:
            readers, self._readers = list(self._readers), []
        for conn in readers:
            if not isinstance(conn, _ReaderConnection):
                conn.close()
            elif not conn.shut_down(wait_s=max(0.0, deadline - time.monotonic())):
                self._abandon(conn)
        if self._writer is not None:
            with self.write_lock:
                if self._purge_pending:
                    self.purge()
                if self._scrub_mark_done:
                    with contextlib.suppress(sqlite3.Error):  # else the next open scrubs once more
                        self._writer.execute("DELETE FROM meta WHERE key=?", (SCRUB_META,))
                    self._checkpoint(0.0)
                self._writer.close()  # the last connection's close checkpoints and removes the log too
        with self._readers_lock:
            if not self._abandoned:
                self._close_db_fd()
        self._release_lock()

    def _abandon(self, conn: _ReaderConnection) -> None:
        """Leave ``conn`` to close itself once its running statement ends (the database descriptor stays open
        until then)."""
        with self._readers_lock:
            self._abandoned.add(id(conn))

        def shut() -> None:
            with self._readers_lock:
                self._abandoned.discard(id(conn))
                if self._closed and not self._abandoned:
                    self._close_db_fd()

        conn.on_shut = shut
        conn.abandoned = True
        conn.shut_down(wait_s=0.0)  # it may have ended in between

    def _close_db_fd(self) -> None:
        if self._db_fd is not None:
            os.close(self._db_fd)
            self._db_fd = None

    # -- schema --------------------------------------------------------------------------------------------
    @staticmethod
    def _schema_version(conn: sqlite3.Connection) -> int:
        row = conn.execute("SELECT name FROM sqlite_master WHERE type='table' AND name='meta'").fetchone()
        if row is None:
            return 0
        row = conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
        return int(row[0]) if row else 0

    def _migrate(self, conn: sqlite3.Connection) -> None:
        current = self._schema_version(conn)
        if current > SCHEMA_VERSION:
            return  # reported by __init__
        for version in range(current, SCHEMA_VERSION):
            conn.execute("BEGIN IMMEDIATE")
            try:
                MIGRATIONS[version](conn)
                conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES('schema_version', ?)",
                             (str(version + 1),))
                conn.execute("INSERT OR IGNORE INTO meta(key, value) VALUES('store_id', ?)", (uuid.uuid4().hex,))
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")

    def add_schema(self, create: Callable[[sqlite3.Connection], None]) -> None:
        """Let an index create its own tables (idempotent ``CREATE ... IF NOT EXISTS``)."""
        if self._writer is None:
            return
        with self.transaction("create index schema") as conn:
            create(conn)

    @functools.cached_property
    def items(self) -> ItemTables:
        """The statements on key/value items (:mod:`memory_ext.store.items`)."""
        return ItemTables(self.dialect)

    # -- meta ------------------------------------------------------------------------------------------------
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
    def set_meta(conn: sqlite3.Connection, key: str, value: str) -> None:
        conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES(?, ?)", (key, value))

    @staticmethod
    def delete_meta(conn: sqlite3.Connection, key: str) -> None:
        conn.execute("DELETE FROM meta WHERE key=?", (key,))

    # -- namespaces ----------------------------------------------------------------------------------------
    def find_namespace(self, key: tuple[str, str]) -> int | None:
        return self.namespace_id(self.reader(), key)

    @staticmethod
    def namespace_id(conn: sqlite3.Connection, key: tuple[str, str]) -> int | None:
        """The row id of namespace ``(user_id, agent_id)`` as ``conn`` sees it (None: not stored)."""
        row = conn.execute("SELECT ns_id FROM namespaces WHERE user_id=? AND agent_id=?", key).fetchone()
        return int(row[0]) if row else None

    @staticmethod
    def ensure_namespace(conn: sqlite3.Connection, key: tuple[str, str]) -> int:
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

    # -- writes (inside a transaction) ---------------------------------------------------------------------
    @staticmethod
    def next_seq(conn: sqlite3.Connection, ns_id: int) -> int:
        row = conn.execute("SELECT COALESCE(MAX(seq), -1) FROM turns WHERE ns_id=?", (ns_id,)).fetchone()
        return int(row[0]) + 1

    @staticmethod
    def insert_turns(conn: sqlite3.Connection, ns_id: int, rows: Sequence[dict[str, Any]]) -> None:
        now = time.time()
        conn.executemany(
            "INSERT INTO turns(id, ns_id, seq, session_id, role, speaker, content, ts, external_id, tool_calls,"
            " attachments, metadata, token_count, created_at) VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            [(r["id"], ns_id, r["seq"], r["session_id"], r["role"], r["speaker"], r["content"], r["ts"],
              r["external_id"], json.dumps(r["tool_calls"], default=str),
              json.dumps(r["attachments"], default=str), json.dumps(r["metadata"], default=str),
              r["token_count"], now) for r in rows],
        )

    @staticmethod
    def insert_records(conn: sqlite3.Connection, ns_id: int, rows: Sequence[dict[str, Any]],
                       anchor_rids: Sequence[int | None] | None = None) -> list[int]:
        """Insert records; returns their rids in order. ``anchor_rids``: the turn record each row is evidence for
        (a turn record is its own anchor)."""
        now = time.time()
        rids = []
        anchors = anchor_rids if anchor_rids is not None else [None] * len(rows)
        for r, anchor in zip(rows, anchors, strict=True):
            cur = conn.execute(
                "INSERT INTO records(id, ns_id, kind, text, index_text, l0, l1, entities, tags, ref_ts, turn_ids,"
                " source_role, speaker, session_id, importance, anchor_rid, created_at, updated_at)"
                " VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                (r["id"], ns_id, r["kind"], r["text"], r["index_text"], r.get("l0"), r.get("l1"),
                 json.dumps(r.get("entities", [])), json.dumps(r.get("tags", [])), r.get("ref_ts"),
                 json.dumps(r["turn_ids"]), r.get("source_role"), r.get("speaker"), r.get("session_id"),
                 r.get("importance", 0.5), anchor, now, now),
            )
            assert cur.lastrowid is not None
            rid = cur.lastrowid
            if r["kind"] == "turn":
                conn.execute("UPDATE records SET anchor_rid=? WHERE rid=?", (rid, rid))
            if r["kind"] == "turn" and r["turn_ids"]:
                conn.execute("UPDATE turns SET record_rid=? WHERE ns_id=? AND id=?", (rid, ns_id, r["turn_ids"][0]))
            rids.append(rid)
        return rids

    def insert_embeddings(self, conn: sqlite3.Connection, ns_id: int, rids: Sequence[int], vectors: np.ndarray,
                          embedder_id: str) -> None:
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        dim = int(vectors.shape[1])
        if self.get_meta("embedder_id") is None:
            self.set_meta(conn, "embedder_id", embedder_id)
            self.set_meta(conn, "embedder_dim", str(dim))
        conn.executemany(
            "INSERT OR REPLACE INTO embeddings(rid, ns_id, embedder_id, dim, vector) VALUES(?,?,?,?,?)",
            [(rid, ns_id, embedder_id, dim, vectors[i].tobytes()) for i, rid in enumerate(rids)],
        )

    @staticmethod
    def tail_turns(conn: sqlite3.Connection, ns_id: int, n: int = 2) -> list[dict[str, Any]]:
        """The namespace's last ``n`` turns (oldest first), with the rid of each one's turn record."""
        rows = conn.execute(
            "SELECT id, session_id, speaker, content, ts, tool_calls, record_rid, role, attachments, metadata"
            " FROM turns"
            " WHERE ns_id=? ORDER BY seq DESC LIMIT ?", (ns_id, n)).fetchall()
        return [{"id": r[0], "session_id": r[1], "speaker": r[2], "content": r[3], "ts": r[4],
                 "tool_calls": stored_json(r[5], list), "rid": int(r[6]), "role": r[7],
                 "attachments": stored_json(r[8], list), "metadata": stored_json(r[9], dict)} for r in reversed(rows)]

    # -- reads -------------------------------------------------------------------------------------------------
    def records_by_rid(self, ns_id: int, rids: Sequence[int]) -> dict[int, RecordRow]:
        out: dict[int, RecordRow] = {}
        conn = self.reader()
        for chunk in chunks(list(rids)):
            for r in conn.execute(
                f"SELECT rid, id, kind, text, turn_ids, source_role, speaker, session_id, ref_ts FROM records"
                f" WHERE +ns_id=? AND rid IN {marks(len(chunk))}", (ns_id, *chunk)):
                out[int(r[0])] = RecordRow(int(r[0]), r[1], r[2], r[3], json.loads(r[4]), r[5], r[6], r[7], r[8])
        return out

    def vectors_by_rid(self, ns_id: int, rids: Sequence[int]) -> dict[int, np.ndarray]:
        """Stored vectors of the given records of one namespace (damaged blobs are left out)."""
        out: dict[int, np.ndarray] = {}
        for chunk in chunks(list(rids)):
            rows = self.reader().execute(
                f"SELECT rid, vector, dim FROM embeddings WHERE +ns_id=? AND rid IN {marks(len(chunk))}",
                (ns_id, *chunk))
            # a damaged blob (not dim float32 values) is skipped: callers fall back as for a missing vector
            out.update((int(r[0]), np.frombuffer(r[1], dtype=np.float32)) for r in rows
                       if isinstance(r[1], bytes) and len(r[1]) == 4 * int(r[2]))
        return out

    def turns_by_id(self, ns_id: int, turn_ids: Iterable[str]) -> dict[str, TurnRow]:
        out: dict[str, TurnRow] = {}
        conn = self.reader()
        for chunk in chunks(list(dict.fromkeys(turn_ids))):
            for r in conn.execute(f"SELECT {_TURN_COLS} FROM turns WHERE +ns_id=? AND id IN {marks(len(chunk))}",
                                  (ns_id, *chunk)):
                row = _turn_row(r)
                out[row.id] = row
        return out

    def list_turns(self, ns_id: int, session_id: str | None = None, limit: int | None = None,
                   offset: int = 0) -> list[TurnRow]:
        sql = f"SELECT {_TURN_COLS} FROM turns WHERE ns_id=?"
        args: list[Any] = [ns_id]
        if session_id is not None:
            sql += " AND session_id=?"
            args.append(session_id)
        sql += " ORDER BY seq LIMIT ? OFFSET ?"
        args += [-1 if limit is None else limit, offset]
        return [_turn_row(r) for r in self.reader().execute(sql, args)]

    def turns_by_seq_ranges(self, ns_id: int, ranges: Sequence[tuple[int, int]]) -> list[TurnRow]:
        """Turns whose seq falls in any of the inclusive ``ranges``, in seq order."""
        out: list[TurnRow] = []
        conn = self.reader()
        for lo, hi in ranges:
            out += [_turn_row(r) for r in conn.execute(
                f"SELECT {_TURN_COLS} FROM turns WHERE ns_id=? AND seq BETWEEN ? AND ? ORDER BY seq", (ns_id, lo, hi))]
        return out

    def filter_rids(self, ns_id: int, where: str, args: Sequence[Any]) -> set[int]:
        """rids of the namespace matching a SQL condition built by the engine from validated filters."""
        sql = f"SELECT rid FROM records WHERE ns_id=? AND ({where})"
        return {int(r[0]) for r in self.reader().execute(sql, (ns_id, *args))}

    def namespace_key(self, ns_id: int) -> tuple[str, str]:
        """``(user_id, agent_id)`` of a namespace row (agent_id '' when none)."""
        row = self.reader().execute("SELECT user_id, agent_id FROM namespaces WHERE ns_id=?", (ns_id,)).fetchone()
        return row[0], row[1]

    def recent_turns(self, ns_id: int, limit: int) -> list[tuple[str, str, int]]:
        """``(role, content, tid)`` of the namespace's last ``limit`` turns, newest first."""
        return [(r[0], r[1], int(r[2])) for r in self.reader().execute(
            "SELECT role, content, tid FROM turns WHERE ns_id=? ORDER BY seq DESC LIMIT ?", (ns_id, limit))]

    # -- what a forget selects ----------------------------------------------------------------------------------
    def turn_tids(self, ns_id: int, session_id: str | None = None) -> list[int]:
        """Row ids of every turn of the namespace (of one session when given)."""
        sql, args = "SELECT tid FROM turns WHERE ns_id=?", [ns_id]
        args_: list[Any] = list(args)
        if session_id is not None:
            sql += " AND session_id=?"
            args_.append(session_id)
        return [int(r[0]) for r in self.reader().execute(sql, args_)]

    def file_fids(self, ns_id: int) -> list[int]:
        """Row ids of every memory file of the namespace."""
        return [int(r[0]) for r in self.reader().execute("SELECT fid FROM files WHERE ns_id=?", (ns_id,))]

    def tids_of_record(self, ns_id: int, record_id: str) -> list[int] | None:
        """Row ids of the turns a record was built from (None: no record of the namespace has this id)."""
        conn = self.reader()
        row = conn.execute("SELECT turn_ids FROM records WHERE ns_id=? AND id=?", (ns_id, record_id)).fetchone()
        if row is None:
            return None
        ids = json.loads(row[0])
        return [int(r[0]) for part in chunks(ids) for r in conn.execute(
            f"SELECT tid FROM turns WHERE ns_id=? AND id IN {marks(len(part))}", (ns_id, *part))]

    def tids_of_file(self, fid: int) -> list[int]:
        """Row ids of the turns of one memory file."""
        return [int(r[0]) for r in self.reader().execute("SELECT tid FROM file_turns WHERE fid=?", (fid,))]

    def neighbour_tids(self, ns_id: int, tids: Sequence[int]) -> list[int]:
        """Turns of the same session right before or after the given ones (and not among them), sorted."""
        conn = self.reader()
        gone = set(tids)
        out: set[int] = set()
        for tid in tids:
            row = conn.execute("SELECT seq, session_id FROM turns WHERE tid=? AND ns_id=?", (tid, ns_id)).fetchone()
            if row is None:
                continue
            for r in conn.execute("SELECT tid, session_id FROM turns WHERE ns_id=? AND seq IN (?, ?)",
                                  (ns_id, row[0] - 1, row[0] + 1)):
                if r[1] == row[1] and r[0] not in gone:
                    out.add(int(r[0]))
        return sorted(out)

    @staticmethod
    def turn_records_with_neighbours(conn: sqlite3.Connection, ns_id: int,
                                     tids: Sequence[int]) -> list[dict[str, Any]]:
        """The turn records of ``tids`` (rid, text, speaker, ref_ts, session_id) with the contents of their
        current +-1 neighbours of the same session (``neighbours``), as ``conn`` sees them."""
        items = []
        for tid in tids:
            row = conn.execute("SELECT t.seq, t.session_id, t.record_rid, r.text, r.speaker, r.ref_ts FROM turns t"
                               " JOIN records r ON r.rid = t.record_rid WHERE t.tid=? AND t.ns_id=?",
                               (tid, ns_id)).fetchone()
            if row is None:
                continue
            seq, session, rid, text, speaker, ref_ts = row
            near = [r[0] for r in conn.execute(
                "SELECT content FROM turns WHERE ns_id=? AND session_id IS ? AND seq IN"
                " ((SELECT MAX(seq) FROM turns WHERE ns_id=? AND seq<?),"
                "  (SELECT MIN(seq) FROM turns WHERE ns_id=? AND seq>?))", (ns_id, session, ns_id, seq, ns_id, seq))]
            items.append({"rid": int(rid), "text": text, "speaker": speaker, "ref_ts": ref_ts, "session_id": session,
                          "neighbours": near})
        return items

    @staticmethod
    def turns_from_seq(conn: sqlite3.Connection, ns_id: int, seq: int) -> list[tuple[int, float, str]]:
        """``(tid, ts, content)`` of the namespace's turns from ``seq`` on, in order (what a write archives)."""
        return conn.execute("SELECT tid, ts, content FROM turns WHERE ns_id=? AND seq>=? ORDER BY seq",
                            (ns_id, seq)).fetchall()

    # -- memory versions: dedup, update, history (memory_ext.lifecycle.versions) ----------------------------------
    @staticmethod
    def turns_with_external_ids(conn: sqlite3.Connection, ns_id: int, external_ids: Sequence[str]
                                ) -> dict[tuple[str, str | None], str]:
        """``(external id, session id)`` -> id of its latest stored turn, for those of ``external_ids`` the
        namespace holds (an index lookup on ``turns(ns_id, external_id)``)."""
        out: dict[tuple[str, str | None], str] = {}
        for part in chunks(list(dict.fromkeys(external_ids))):
            for ext, session, turn_id in conn.execute(
                    f"SELECT external_id, session_id, id FROM turns WHERE ns_id=? AND external_id IN"
                    f" {marks(len(part))} ORDER BY seq", (ns_id, *part)):
                out[(ext, session)] = turn_id
        return out

    @staticmethod
    def turn_lookup(conn: sqlite3.Connection, ns_id: int, ident: str, session_id: str | None) -> TurnRow | None:
        """The turn of a namespace with this id, else the one whose record has this id, else the latest one with
        this external id (in ``session_id`` when given) (None: no such turn)."""
        row = conn.execute(f"SELECT {_TURN_COLS} FROM turns WHERE id=? AND +ns_id=?", (ident, ns_id)).fetchone()
        if row is None:
            rec = conn.execute("SELECT anchor_rid FROM records WHERE id=? AND +ns_id=?", (ident, ns_id)).fetchone()
            if rec is not None and rec[0] is not None:
                row = conn.execute(f"SELECT {_TURN_COLS} FROM turns WHERE record_rid=? AND +ns_id=?",
                                   (int(rec[0]), ns_id)).fetchone()
        if row is None:
            row = conn.execute(f"SELECT {_TURN_COLS} FROM turns WHERE ns_id=? AND external_id=? AND (? IS NULL OR"
                               " session_id=?) ORDER BY seq DESC LIMIT 1",
                               (ns_id, ident, session_id, session_id)).fetchone()
        return None if row is None else _turn_row(row)

    @staticmethod
    def turns_of_memory(conn: sqlite3.Connection, ns_id: int, key: str, session_id: str | None
                        ) -> list[tuple[TurnRow, float | None, int]]:
        """Every stored version of a memory (its key: an external id, within ``session_id``, or its first turn's
        id), oldest first, each with its turn record's ``valid_to`` and ``replaced`` flag."""
        rows = conn.execute(
            f"SELECT {', '.join('t.' + c.strip() for c in _TURN_COLS.split(','))}, r.valid_to, r.replaced"
            " FROM turns t LEFT JOIN records r ON r.rid = t.record_rid WHERE t.ns_id=? AND ((t.external_id=? AND"
            " t.session_id IS ?) OR t.id=? OR t.id IN (SELECT turn_id FROM memory_history WHERE ns_id=? AND"
            " memory_key=? AND session_id IS ?)) ORDER BY t.seq",
            (ns_id, key, session_id, key, ns_id, key, session_id)).fetchall()
        return [(_turn_row(r[:TURN_NCOLS]), r[TURN_NCOLS], int(r[TURN_NCOLS + 1] or 0)) for r in rows]

    @staticmethod
    def turn_record_ids(conn: sqlite3.Connection, ns_id: int, turn_ids: Sequence[str]) -> list[str]:
        """Ids of the turn records of these turns (what ``forget(record_ids=...)`` takes)."""
        out: list[str] = []
        for part in chunks(list(turn_ids)):
            out += [r[0] for r in conn.execute(
                f"SELECT r.id FROM turns t JOIN records r ON r.rid = t.record_rid WHERE t.id IN {marks(len(part))}"
                " AND t.ns_id=?", (*part, ns_id))]
        return out

    @staticmethod
    def memory_key_of(conn: sqlite3.Connection, ns_id: int, turn_id: str) -> str | None:
        """The memory key an update recorded for this turn (None: the turn was not written by an update)."""
        row = conn.execute("SELECT memory_key FROM memory_history WHERE turn_id=? AND ns_id=? LIMIT 1",
                           (turn_id, ns_id)).fetchone()
        return None if row is None else str(row[0])

    @staticmethod
    def mark_replaced(conn: sqlite3.Connection, ns_id: int, turn_id: str, ts: float, by_record_id: str) -> None:
        """An update replaced this turn: its turn record and the records anchored to it end at ``ts``."""
        conn.execute("UPDATE records SET valid_to=?, superseded_by=?, replaced=1 WHERE ns_id=? AND rid IN"
                     " (SELECT r.rid FROM turns t JOIN records r ON r.rid = t.record_rid OR r.anchor_rid = t.record_rid"
                     " WHERE t.id=? AND t.ns_id=?)", (ts, by_record_id, ns_id, turn_id, ns_id))
        conn.execute("UPDATE namespaces SET flags_generation = flags_generation + 1 WHERE ns_id=?", (ns_id,))

    @staticmethod
    def add_history(conn: sqlite3.Connection, ns_id: int, key: str, session_id: str | None, op: str,
                    turn_id: str | None, ts: float) -> None:
        """Record an operation (``update`` with the new version's turn id; ``delete`` with none)."""
        conn.execute("INSERT INTO memory_history(ns_id, memory_key, session_id, op, turn_id, ts)"
                     " VALUES(?,?,?,?,?,?)", (ns_id, key, session_id, op, turn_id, ts))

    @staticmethod
    def history_ops(conn: sqlite3.Connection, ns_id: int, key: str, session_id: str | None
                    ) -> list[tuple[str, str | None, float, str | None]]:
        """``(op, turn id, ts, session id)`` of the operations recorded for a memory (in ``session_id`` when
        given), oldest first."""
        return [(r[0], r[1], float(r[2]), r[3]) for r in conn.execute(
            "SELECT op, turn_id, ts, session_id FROM memory_history WHERE ns_id=? AND memory_key=? AND (? IS NULL OR"
            " session_id IS ?) ORDER BY hid", (ns_id, key, session_id, session_id))]

    def current_turns(self, conn: sqlite3.Connection, ns_id: int, record_filter: RecordFilter, *,
                      before_seq: int | None, limit: int) -> list[TurnRow]:
        """The namespace's turns whose version is current (their turn record not replaced by an update) and that
        pass ``record_filter``, most recently written first, ``limit`` of them, below ``before_seq`` when given."""
        where, args = filter_sql(record_filter, self.dialect)
        sql = (f"SELECT {', '.join('t.' + c.strip() for c in _TURN_COLS.split(','))} FROM turns t"
               " LEFT JOIN records r ON r.rid = t.record_rid WHERE t.ns_id=? AND COALESCE(r.replaced, 0) = 0")
        params: list[Any] = [ns_id]
        if where:
            sql += f" AND t.record_rid IN (SELECT rid FROM records WHERE ns_id=? AND kind='turn' AND ({where}))"
            params += [ns_id, *args]
        if before_seq is not None:
            sql += " AND t.seq < ?"
            params.append(before_seq)
        sql += " ORDER BY t.seq DESC LIMIT ?"
        return [_turn_row(r) for r in conn.execute(sql, (*params, limit))]

    def replaced_turn_ids(self, ns_id: int) -> set[str]:
        """Ids of the namespace's turns whose version an update replaced."""
        return {str(r[0]) for r in self.reader().execute(
            "SELECT t.id FROM turns t JOIN records r ON r.rid = t.record_rid WHERE t.ns_id=? AND r.replaced=1",
            (ns_id,))}

    def namespace_counts(self) -> list[tuple[str, str, int, int]]:
        """``(user_id, agent_id, current memories, turns)`` of every namespace, in creation order."""
        return [(str(r[0]), str(r[1]), int(r[2]), int(r[3])) for r in self.reader().execute(
            "SELECT n.user_id, n.agent_id,"
            " (SELECT COUNT(*) FROM turns t LEFT JOIN records r ON r.rid = t.record_rid"
            "  WHERE t.ns_id = n.ns_id AND COALESCE(r.replaced, 0) = 0),"
            " (SELECT COUNT(*) FROM turns t WHERE t.ns_id = n.ns_id)"
            " FROM namespaces n ORDER BY n.ns_id")]

    @staticmethod
    def live_update_counts(conn: sqlite3.Connection, ns_id: int, keys: Sequence[str]
                           ) -> dict[tuple[str, str | None], int]:
        """Per ``(memory key, session)``: how many versions written by an update are still stored (a memory's
        version count is one more), one query per 500 keys."""
        out: dict[tuple[str, str | None], int] = {}
        for part in chunks(list(dict.fromkeys(keys))):
            for key, session, n in conn.execute(
                    "SELECT h.memory_key, h.session_id, COUNT(*) FROM memory_history h JOIN turns t ON t.id = h.turn_id"
                    f" AND t.ns_id = h.ns_id WHERE h.ns_id=? AND h.op='update' AND h.memory_key IN {marks(len(part))}"
                    " GROUP BY h.memory_key, h.session_id", (ns_id, *part)):
                out[(str(key), session)] = int(n)
        return out

    @staticmethod
    def memory_keys_of(conn: sqlite3.Connection, ns_id: int, turn_ids: Sequence[str]) -> dict[str, str]:
        """The memory key an update recorded for each of these turns (turns not written by an update are left
        out): one query per 500 turns, for a page of :meth:`current_turns`."""
        out: dict[str, str] = {}
        for part in chunks(list(turn_ids)):
            out.update((str(r[0]), str(r[1])) for r in conn.execute(
                f"SELECT turn_id, memory_key FROM memory_history WHERE ns_id=? AND turn_id IN {marks(len(part))}",
                (ns_id, *part)))
        return out

    @staticmethod
    def record_ids_by_rid(conn: sqlite3.Connection, ns_id: int, rids: Sequence[int]) -> dict[int, str]:
        """The public ids of these records."""
        out: dict[int, str] = {}
        for part in chunks(list(rids)):
            out.update((int(r[0]), str(r[1])) for r in conn.execute(
                f"SELECT rid, id FROM records WHERE ns_id=? AND rid IN {marks(len(part))}", (ns_id, *part)))
        return out

    @staticmethod
    def delete_history(conn: sqlite3.Connection, ns_id: int) -> None:
        """Forget a whole namespace's history."""
        conn.execute("DELETE FROM memory_history WHERE ns_id=?", (ns_id,))

    # -- reindex (memory_ext.ingest.reindex) --------------------------------------------------------------------
    @staticmethod
    def reindex_state(conn: sqlite3.Connection, ns_id: int) -> dict[str, Any]:
        """What a reindex of a namespace keeps of its records: each turn's record id, the turns whose version
        an update replaced (``(turn id, valid_to, superseded_by)``) and the turns (tids) in the cold tier."""
        rows = conn.execute("SELECT t.id, r.id, r.replaced, r.valid_to, r.superseded_by, r.cold, t.tid FROM turns t"
                            " JOIN records r ON r.rid = t.record_rid WHERE t.ns_id=?", (ns_id,)).fetchall()
        return {"record_ids": {r[0]: r[1] for r in rows},
                "replaced": [(r[0], float(r[3]), r[4]) for r in rows if r[2] and r[3] is not None and r[4]],
                "cold": [int(r[6]) for r in rows if r[5]]}

    @staticmethod
    def clear_records(conn: sqlite3.Connection, ns_id: int) -> None:
        """Delete every record of a namespace with its vectors and claims (the turns and files stay)."""
        conn.execute("DELETE FROM embeddings WHERE ns_id=?", (ns_id,))
        conn.execute("DELETE FROM claims WHERE ns_id=?", (ns_id,))
        conn.execute("DELETE FROM records WHERE ns_id=?", (ns_id,))
        conn.execute("UPDATE turns SET record_rid=NULL WHERE ns_id=?", (ns_id,))
        conn.execute("UPDATE namespaces SET generation = generation + 1 WHERE ns_id=?", (ns_id,))

    @staticmethod
    def stored_turn_rows(conn: sqlite3.Connection, ns_id: int) -> list[dict[str, Any]]:
        """Every turn of a namespace in seq order, as the write pipeline's rows."""
        return [{"id": t.id, "seq": t.seq, "session_id": t.session_id, "role": t.role, "speaker": t.speaker,
                 "content": t.content, "ts": t.ts, "external_id": t.external_id, "tool_calls": t.tool_calls,
                 "attachments": t.attachments, "metadata": t.metadata, "token_count": t.token_count}
                for t in (_turn_row(r) for r in conn.execute(
                    f"SELECT {_TURN_COLS} FROM turns WHERE ns_id=? ORDER BY seq", (ns_id,)))]

    @staticmethod
    def delete_claims(conn: sqlite3.Connection, ns_id: int) -> None:
        """Every supersession claim of the namespace (when it is forgotten whole)."""
        conn.execute("DELETE FROM claims WHERE ns_id=?", (ns_id,))
    def rids_matching(self, ns_id: int, record_filter: RecordFilter) -> set[int]:
        """rids of the namespace's records that pass ``record_filter`` (every rid when it is empty)."""
        where, args = filter_sql(record_filter, self.dialect)
        return self.filter_rids(ns_id, where or "1", args)

    # -- the durable queue of model work (see memory_ext.ingest.indexer) ------------------------------------
    @staticmethod
    def create_queue_schema(conn: sqlite3.Connection) -> None:
        """``index_queue``: one row per record whose dense vector (``dense``: 1 embed its text, 2 the mean of
        its turns' vectors, 3 its turn's vector) or sparse encoding (``sparse`` = 1) is still to be made."""
        conn.execute("CREATE TABLE IF NOT EXISTS index_queue(rid INTEGER PRIMARY KEY, ns_id INTEGER NOT NULL,"
                     " dense INTEGER NOT NULL DEFAULT 0, sparse INTEGER NOT NULL DEFAULT 0)")
        conn.execute("CREATE INDEX IF NOT EXISTS index_queue_ns ON index_queue(ns_id)")

    @staticmethod
    def enqueue(conn: sqlite3.Connection, ns_id: int, items: Sequence[tuple[int, int, int]]) -> None:
        """Queue ``(rid, dense, sparse)`` work items of the namespace (inside the write transaction)."""
        conn.executemany("INSERT OR REPLACE INTO index_queue(rid, ns_id, dense, sparse) VALUES(?,?,?,?)",
                         [(int(r), ns_id, int(d), int(s)) for r, d, s in items if d or s])

    @staticmethod
    def dequeue(conn: sqlite3.Connection, rids: Sequence[int], ns_id: int | None = None) -> None:
        """Remove work items (done, or their records forgotten); with ``ns_id``, only that namespace's."""
        for part in chunks([int(r) for r in rids]):
            if ns_id is None:
                conn.execute(f"DELETE FROM index_queue WHERE rid IN {marks(len(part))}", part)
            else:
                conn.execute(f"DELETE FROM index_queue WHERE ns_id=? AND rid IN {marks(len(part))}", (ns_id, *part))

    @staticmethod
    def drop_queue(conn: sqlite3.Connection, ns_id: int) -> None:
        conn.execute("DELETE FROM index_queue WHERE ns_id=?", (ns_id,))

    @staticmethod
    def queued(conn: sqlite3.Connection, limit: int, rids: Sequence[int] | None = None,
               ns_id: int | None = None) -> list[tuple[int, int, int, int]]:
        """``(rid, ns_id, dense, sparse)`` of the oldest ``limit`` work items (of ``rids`` only when given; of
        namespace ``ns_id`` only when given)."""
        if rids is None:
            where, args = ("", (limit,)) if ns_id is None else (" WHERE ns_id=?", (ns_id, limit))
            return [(int(r[0]), int(r[1]), int(r[2]), int(r[3])) for r in conn.execute(
                f"SELECT rid, ns_id, dense, sparse FROM index_queue{where} ORDER BY rid LIMIT ?", args)]
        out = []
        for part in chunks(sorted(int(r) for r in rids)):
            out += [(int(r[0]), int(r[1]), int(r[2]), int(r[3])) for r in conn.execute(
                f"SELECT rid, ns_id, dense, sparse FROM index_queue WHERE rid IN {marks(len(part))}", part)]
        return out

    @staticmethod
    def queued_windows(conn: sqlite3.Connection, turn_rids: Sequence[int]) -> list[tuple[int, int, int, int]]:
        """Work items (as :meth:`queued`) of the queued windows anchored to these turn records: the indexer
        encodes a turn and its window in one pass of the run of turns around them."""
        out = []
        for part in chunks(sorted(int(r) for r in turn_rids)):
            out += [(int(r[0]), int(r[1]), int(r[2]), int(r[3])) for r in conn.execute(
                "SELECT q.rid, q.ns_id, q.dense, q.sparse FROM index_queue q JOIN records r ON r.rid = q.rid"
                f" WHERE r.anchor_rid IN {marks(len(part))} AND r.kind = 'window'", part)]
        return out

    @contextmanager
    def claimed_work(self, limit: int) -> Iterator[list[tuple[int, int, int, int]]]:
        """The next batch of queued work for this process's indexer: the oldest ``limit`` items. Only one
        process writes a SQLite store, so nothing else claims work; the PostgreSQL store hands each indexer one
        namespace at a time (see :meth:`memory_ext.store.pg.truth.PgTruthStore.claimed_work`)."""
        yield self.queued(self.reader(), limit)

    def pending(self, ns_id: int | None = None) -> int:
        """Records (of ``ns_id``, or of the store) whose vectors or sparse encodings are not written yet."""
        sql, args = ("SELECT COUNT(*) FROM index_queue", ()) if ns_id is None else \
            ("SELECT COUNT(*) FROM index_queue WHERE ns_id=?", (ns_id,))
        try:
            return int(self.reader().execute(sql, args).fetchone()[0])
        except sqlite3.OperationalError:  # a store written before the queue existed (read-only opener)
            return 0

    def work_sources(self, rids: Sequence[int]) -> dict[int, tuple[str, str, list[int], int | None]]:
        """``rid -> (index_text, text, rids of its turns' turn records, anchor rid)`` of queued records."""
        conn = self.reader()
        rows: list[tuple[int, int, str, str, list[str], int | None]] = []
        for part in chunks(sorted(int(r) for r in rids)):
            rows += [(int(rid), int(ns_id), index_text, text, json.loads(turn_ids), anchor) for
                     rid, ns_id, index_text, text, turn_ids, anchor in conn.execute(
                         f"SELECT rid, ns_id, index_text, text, turn_ids, anchor_rid FROM records"
                         f" WHERE rid IN {marks(len(part))}", part).fetchall()]
        # the turns of every record at once, per namespace: (seq, turn record rid) by turn id
        turn_of: dict[tuple[int, str], tuple[int, int]] = {}
        wanted: dict[int, set[str]] = {}
        for _, ns_id, _, _, ids, _ in rows:
            wanted.setdefault(ns_id, set()).update(ids)
        for ns_id, turn_ids in wanted.items():
            for part in chunks(sorted(turn_ids)):
                # "+ns_id": SQLite must use the id index, not scan the namespace by seq
                for turn_id, seq, record_rid in conn.execute(
                        f"SELECT id, seq, record_rid FROM turns WHERE +ns_id=? AND id IN {marks(len(part))}"
                        " AND record_rid IS NOT NULL", (ns_id, *part)):
                    turn_of[(ns_id, turn_id)] = (int(seq), int(record_rid))
        out: dict[int, tuple[str, str, list[int], int | None]] = {}
        for rid, ns_id, index_text, text, ids, anchor in rows:
            members = [m[1] for m in sorted(turn_of[(ns_id, i)] for i in ids if (ns_id, i) in turn_of)]
            out[rid] = (index_text, text, members, None if anchor is None else int(anchor))
        return out

    @staticmethod
    def stored_vectors(conn: sqlite3.Connection, rids: Sequence[int]) -> dict[int, np.ndarray]:
        """Stored vectors of the given records, as ``conn`` sees them (any namespace: rids are global)."""
        out: dict[int, np.ndarray] = {}
        for part in chunks(sorted({int(r) for r in rids})):
            out.update((int(r[0]), np.frombuffer(r[1], dtype=np.float32)) for r in conn.execute(
                f"SELECT rid, vector FROM embeddings WHERE rid IN {marks(len(part))}", part))
        return out

    def count(self, table: str, ns_id: int | None = None) -> int:
        if table not in ("turns", "records", "embeddings"):
            raise ValueError(table)
        if ns_id is None:
            return int(self.reader().execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0])
        return int(self.reader().execute(f"SELECT COUNT(*) FROM {table} WHERE ns_id=?", (ns_id,)).fetchone()[0])

    def disk_bytes(self) -> int:
        return sum(p.stat().st_size for p in self.directory.rglob("*") if p.is_file())


# "+ns_id" keeps the namespace check but stops SQLite from scanning the namespace's index instead of using the
# primary key: a lookup of k rows stays O(k) however large the namespace is.
_TURN_COLS = ("tid, id, seq, session_id, role, speaker, content, ts, external_id, tool_calls, attachments, metadata,"
              " token_count, record_rid")
TURN_NCOLS = len(_TURN_COLS.split(","))
"""How many columns :data:`_TURN_COLS` selects (a query that selects more reads its own after them)."""


def _turn_row(r: Sequence[Any]) -> TurnRow:
    # the JSON columns are repaired as they are read (memory_ext.validate.stored_json): a row an older version
    # stored with a lone surrogate, NaN or deep nesting reads back as values every face can serialise
    return TurnRow(int(r[0]), r[1], int(r[2]), r[3], r[4], r[5], r[6], r[7], r[8], stored_json(r[9], list),
                   stored_json(r[10], list), stored_json(r[11], dict), int(r[12]),
                   int(r[13]) if r[13] is not None else None)

