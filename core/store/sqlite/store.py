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
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ...errors import (
    ConfigError,
    CorruptStoreError,
    ReadOnlyStoreError,
    SchemaVersionError,
    StoreError,
    StoreLockedError,
)
from ..interface import Connection, StoreConflict
from ..repos import MetaRepo, QueueRepo, RecordRepo, TurnRepo, VersionRepo
from ..repos.turns import TURN_ID_FIX
from ..sqlite_scrub import scrub
from .connection import READER_CLOSE_WAIT_S, _ReaderConnection
from .schema import MIGRATIONS, SCHEMA_VERSION
from .statements import SqliteConnection

__all__ = ["DB_FILE", "DURABILITY", "LOCK_FILE", "NewDirectory", "TruthStore", "check_embedder_shape"]

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
    _missing_table = (sqlite3.OperationalError,)
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
                 factory: type[sqlite3.Connection] = SqliteConnection) -> sqlite3.Connection:
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

    @staticmethod
    def insert_turns(conn: Connection, ns_id: int, rows: Sequence[dict[str, Any]]) -> None:
        """:meth:`TurnRepo.insert_turns`, with SQLite's unique violation as :class:`StoreConflict`."""
        try:
            TurnRepo.insert_turns(conn, ns_id, rows)
        except sqlite3.IntegrityError as exc:
            raise StoreConflict("turns.id", str(exc), TURN_ID_FIX) from None

    def disk_bytes(self) -> int:
        return sum(p.stat().st_size for p in self.directory.rglob("*") if p.is_file())

