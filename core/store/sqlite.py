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
import os
import shutil
import sqlite3
import threading
import time
import uuid
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ..errors import (
    ConfigError,
    CorruptStoreError,
    ReadOnlyStoreError,
    SchemaVersionError,
    StoreError,
    StoreLockedError,
)
from .interface import Connection
from .repos import MetaRepo, QueueRepo, RecordRepo, TurnRepo, VersionRepo
from .rows import RecordRow, TurnRow
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
    """Key/value items (the LangGraph store's) in the truth store: :mod:`memory_ext.store.items`."""
    from .items import create_item_schema

    create_item_schema(conn)


MIGRATIONS: list[Callable[[sqlite3.Connection], None]] = [_v1, _v2, _v3, _v4, _v5]
"""MIGRATIONS[i] upgrades a store from schema version i to i + 1. Append, never edit."""
SCHEMA_VERSION = len(MIGRATIONS)


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


class TruthStore(QueueRepo, VersionRepo, RecordRepo, TurnRepo, MetaRepo):
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
    def transaction(self, operation: str) -> Iterator[Connection]:
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
                self._run_after_commit(operation)
                if self.purge_pending:  # an earlier forget could not finish its on-disk purge: try again
                    self.purge()

    def namespace_lock(self, key: tuple[str, str]) -> Any:
        """The write lock for a write of one namespace: on SQLite the store's one write lock (a PostgreSQL store
        lets writers of different namespaces proceed side by side)."""
        return self.write_lock

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
    def _schema_version(conn: Connection) -> int:
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

    def add_schema(self, create: Callable[[Connection], None]) -> None:
        """Let an index create its own tables (idempotent ``CREATE ... IF NOT EXISTS``)."""
        if self._writer is None:
            return
        with self.transaction("create index schema") as conn:
            create(conn)

    def disk_bytes(self) -> int:
        return sum(p.stat().st_size for p in self.directory.rglob("*") if p.is_file())

