"""The truth store on PostgreSQL: the same tables and statements as the SQLite store, many writer processes.

:class:`PgTruthStore` is :class:`~memory_ext.store.sqlite.TruthStore` with PostgreSQL underneath: every method
that reads or writes the truth tables is inherited (their SQL goes through
:mod:`memory_ext.store.pg.dialect`), and what differs is here — connections (a psycopg pool of per-thread
readers, one writer connection), the schema (a PostgreSQL schema, ``storage.postgres_schema``, holds the tables),
concurrency and purging.

Concurrency: any number of engine processes on any number of hosts open the same schema; there is no process
lock. A write (``add_turns``, ``forget``, an update, the indexer's batch) holds the schema's *write lock*, a
PostgreSQL advisory lock, from its first read of the stored tail to its commit — the same exclusion SQLite's
``BEGIN IMMEDIATE`` gives one directory, now across hosts — so sequence numbers and row ids grow in commit order
and every in-process snapshot (keyword, graph, time, evidence, catalog, sparse, vectors) keeps syncing by its
counters exactly as on SQLite. Readers never take it: a search runs on its thread's connection, each snapshot
load in one repeatable-read transaction.

Forgetting deletes the rows in one transaction; :meth:`PgTruthStore.purge` then runs ``VACUUM`` on the engine's
tables so the dead row versions (and their index entries) are removed from the data files. A session of another
process holding an older snapshot keeps them alive: the purge is then reported pending and retried, as on
SQLite. What PostgreSQL itself keeps beyond that (the write-ahead log until its segments are recycled, backups,
replicas) is described in ``docs/operations.md``.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import threading
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ...errors import ConfigError, MissingDependencyError, SchemaVersionError, StoreError
from ..filters import RecordFilter
from ..sqlite import _TURN_COLS, MIGRATIONS, SCHEMA_VERSION, NewDirectory, TruthStore, TurnRow, _turn_row
from .connection import PgConnection, as_sqlite_error

__all__ = ["DSN_ENV", "NewSchema", "PgTruthStore", "dsn_from"]

DSN_ENV = "MEMORY_EXT_POSTGRES_DSN"
"""Environment variable read when ``storage.postgres_dsn`` is not set."""


def dsn_from(path: str | os.PathLike[str] | None, dsn: str | None) -> str | None:
    """The DSN a store opens: a ``postgresql://`` path, else ``storage.postgres_dsn``, else :data:`DSN_ENV`."""
    if path is not None and str(path).startswith(("postgresql://", "postgres://")):
        return str(path)
    return dsn or os.environ.get(DSN_ENV) or None


def is_dsn(path: str | os.PathLike[str] | None) -> bool:
    return path is not None and str(path).startswith(("postgresql://", "postgres://"))


def _lock_key(schema: str) -> int:
    """The advisory-lock key of a schema's write lock (a signed 64-bit number)."""
    return int.from_bytes(hashlib.blake2b(f"memory_ext:write:{schema}".encode(), digest_size=8).digest(),
                          "big", signed=True)


def _v2_pg(conn: Any) -> None:
    """Schema version 2 on PostgreSQL (the SQLite step fills ``record_rid`` with ``json_array``)."""
    conn.execute("ALTER TABLE records ADD COLUMN anchor_rid INTEGER")
    conn.execute("UPDATE records SET anchor_rid = rid WHERE kind = 'turn'")
    conn.execute("ALTER TABLE turns ADD COLUMN record_rid INTEGER")


_PG_MIGRATIONS: list[Callable[[Any], None]] = [MIGRATIONS[0], _v2_pg, *MIGRATIONS[2:]]


POOL_WAIT_S = 0.5
"""How long a thread's first read waits for a pooled connection before it opens one beside the pool."""


class _Lease:
    """One thread's reader connection. The thread-local slot holding it is cleared when the thread ends, and
    the connection goes back then (the store's set of leases holds them weakly), or at the store's close."""

    __slots__ = ("__weakref__", "conn", "done", "pooled", "store")

    def __init__(self, store: PgTruthStore, conn: PgConnection, pooled: bool) -> None:
        self.store, self.conn, self.pooled, self.done = store, conn, pooled, False

    def __del__(self) -> None:
        self.store._give_back(self)

    def reopener(self) -> Callable[[Any], Any]:
        """``reopen`` of this lease's connection (it holds the lease weakly: the thread's end still frees it)."""
        ref = weakref.ref(self)

        def reopen(lost: Any) -> Any:
            lease = ref()
            if lease is None:
                raise StoreError("the connection was given back")
            store = lease.store
            if lease.pooled:  # the pool discards a lost connection it is given back
                lease.pooled = False
                with contextlib.suppress(Exception):  # a broken connection is dropped either way
                    store._pool.putconn(lost)
            return store._psycopg.connect(store.dsn, **store._conn_kwargs)

        return reopen


class _WriteLock:
    """The schema's write lock: this process's threads queue on an RLock, processes on an advisory lock."""

    def __init__(self, store: PgTruthStore) -> None:
        self._store = store
        self._rlock = threading.RLock()
        self._depth = 0

    held = False
    """True while this process holds the advisory lock (a reconnected writer takes it again)."""

    def acquire(self) -> bool:
        self._rlock.acquire()
        self._depth += 1
        if self._depth == 1:
            try:
                for attempt in (0, 1):
                    raw = self._store._raw_writer()  # (a lost connection is replaced here)
                    try:
                        raw.execute("SELECT pg_advisory_lock(%s)", (self._store.lock_key,))
                        break
                    except self._store._psycopg.errors.LockNotAvailable:
                        store = self._store
                        raise StoreError(
                            f"another engine held the write lock of PostgreSQL schema {store.schema!r} for more "
                            f"than {store.lock_timeout_s:g} s (storage.postgres_lock_timeout_s); retry, or look for "
                            "a stuck writer: SELECT pid, client_addr, state FROM pg_stat_activity JOIN pg_locks "
                            "USING (pid) WHERE locktype = 'advisory'") from None
                    except self._store._psycopg.Error as exc:
                        if attempt == 0 and raw.closed:
                            continue  # lost since the last write: once more, on a new connection
                        raise as_sqlite_error(exc) from exc
                self.held = True
            except BaseException:
                self._depth -= 1
                self._rlock.release()
                raise
        return True

    def release(self) -> None:
        try:
            if self._depth == 1:
                self.held = False
                writer = self._store._raw_writer_or_none()
                if writer is not None and not writer.closed:  # (a lost session's locks went with it)
                    with contextlib.suppress(self._store._psycopg.Error):
                        writer.execute("SELECT pg_advisory_unlock(%s)", (self._store.lock_key,))
        finally:
            self._depth -= 1
            self._rlock.release()

    def __enter__(self) -> _WriteLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


class PgTruthStore(TruthStore):
    """The truth store in a PostgreSQL schema. Use through :class:`memory_ext.MemoryEngine`::

        engine = MemoryEngine.open("postgresql://memory@db-host/memory")   # or storage.backend: postgres
    """

    PURGE_TARGET = "postgres:dead-row-versions"

    def __init__(self, dsn: str, *, schema: str = "memory_ext", read_only: bool = False, pool_size: int = 16,
                 rls: bool = False, lock_timeout_s: float = 30.0) -> None:
        try:
            import psycopg
            from psycopg_pool import ConnectionPool
        except ImportError:
            raise MissingDependencyError("psycopg", "postgres", "the PostgreSQL backend") from None
        if not schema.isidentifier():
            raise ConfigError("storage.postgres_schema", schema, "use a plain identifier such as memory_ext")
        self.dsn = dsn
        self.schema = schema
        self.directory = Path(f"postgres-{schema}")
        self.file_mode = 0o600
        self.read_only = read_only
        self.rls = rls
        self.lock_key = _lock_key(schema)
        self.lock_timeout_s = lock_timeout_s
        self._lock_fd = None
        self._local = threading.local()
        self._leases: weakref.WeakSet[_Lease] = weakref.WeakSet()
        self._readers_lock = threading.Lock()
        self._closed = False
        self._purge_pending = False
        self._after_commit: list[Callable[[], None]] | None = None
        self._identity: dict[str, str] = {}
        self._keys: dict[str, tuple[str, ...]] = {}
        self._raw: Any = None
        self._writer: Any = None
        self._lock = _WriteLock(self)
        self.write_lock = self._lock  # type: ignore[assignment]
        self._psycopg = psycopg
        try:
            self._raw = psycopg.connect(dsn, autocommit=True, cursor_factory=psycopg.ClientCursor)
        except psycopg.Error as exc:
            raise StoreError(f"cannot connect to PostgreSQL ({_redact(dsn)}): {str(exc).strip()}; check "
                             f"storage.postgres_dsn / {DSN_ENV} and that the server runs") from None
        self.created_schema = False
        """True when this open created the schema (a failed open drops it again: :class:`NewSchema`)."""
        try:
            if not read_only:
                with self._raw.transaction():
                    self._raw.execute("SELECT pg_advisory_xact_lock(%s)", (self.lock_key,))
                    self.created_schema = self._raw.execute(
                        "SELECT NOT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = %s)", (schema,)).fetchone()[0]
                    self._raw.execute(f"CREATE SCHEMA IF NOT EXISTS {schema}")
                    self._raw.execute("CREATE EXTENSION IF NOT EXISTS vector")
            self._raw.execute(f"SET search_path TO {schema}, public")
            self._raw.execute(f"SET lock_timeout = {max(1, round(lock_timeout_s * 1000))}")
            self._refresh_catalog()
            self._writer = None if read_only else PgConnection(self._raw, identity=self._identity, keys=self._keys,
                                                               reopen=self._reconnect)
            self._conn_kwargs: dict[str, Any] = {
                "autocommit": True, "cursor_factory": psycopg.ClientCursor,
                "options": f"-c search_path={schema},public -c lock_timeout={max(1, round(lock_timeout_s * 1000))}"}
            self._pool = ConnectionPool(dsn, min_size=0, max_size=max(2, pool_size), open=True,
                                        kwargs=self._conn_kwargs)
            if not read_only:
                with self.write_lock:
                    self._migrate(self._writer)
            version = self._schema_version(self.reader())
            if version == 0 and read_only:
                raise StoreError(f"no store in PostgreSQL schema {schema!r}: open it once without read_only")
        except BaseException:
            self.close()
            NewSchema(dsn, schema, self.created_schema).undo()
            raise
        if version > SCHEMA_VERSION:
            self.close()
            raise SchemaVersionError(f"PostgreSQL schema {schema!r} has schema version {version}, newer than this "
                                     f"memory-ext understands ({SCHEMA_VERSION}); upgrade memory-ext")

    # -- connections -------------------------------------------------------------------------------------
    def _raw_writer(self) -> Any:
        if self._raw is None:
            raise StoreError("the store is closed")
        if self._raw.closed and not self._closed:
            self._reconnect()
        return self._raw

    def _reconnect(self, lost: Any = None) -> Any:
        """A new writer connection for one that was lost (a server restart, an idle timeout, an administrator's
        kill); the advisory write lock is taken again when this process held it."""
        try:
            raw = self._psycopg.connect(self.dsn, **self._conn_kwargs)
        except self._psycopg.Error as exc:
            raise StoreError(f"lost the connection to PostgreSQL and cannot reconnect ({_redact(self.dsn)}): "
                             f"{str(exc).strip()}") from None
        if self._lock.held:
            raw.execute("SELECT pg_advisory_lock(%s)", (self.lock_key,))
        self._raw = raw
        if self._writer is not None:
            self._writer.raw = raw
        return raw

    def _raw_writer_or_none(self) -> Any:
        return self._raw

    def _refresh_catalog(self, conn: Any = None) -> None:
        """Learn the tables' identity columns and primary keys (for ``lastrowid`` and ``INSERT OR REPLACE``)."""
        raw = conn.raw if isinstance(conn, PgConnection) else self._raw
        identity = {t: c for t, c in raw.execute(
            "SELECT table_name, column_name FROM information_schema.columns WHERE table_schema=%s"
            " AND is_identity='YES'", (self.schema,)).fetchall()}
        keys: dict[str, list[str]] = {}
        for table, column in raw.execute(
                "SELECT tc.table_name, k.column_name FROM information_schema.table_constraints tc"
                " JOIN information_schema.key_column_usage k ON k.constraint_name = tc.constraint_name"
                " AND k.constraint_schema = tc.constraint_schema"
                " WHERE tc.constraint_type='PRIMARY KEY' AND tc.table_schema=%s"
                " ORDER BY tc.table_name, k.ordinal_position", (self.schema,)).fetchall():
            keys.setdefault(table, []).append(column)
        self._identity.clear()
        self._identity.update(identity)
        self._keys.clear()
        self._keys.update({t: tuple(c) for t, c in keys.items()})

    def reader(self) -> Any:
        """This thread's read connection: taken from the pool on first use — or, when every pooled connection is
        held by another thread, opened beside it (a thread never waits for another one to end) — and given back
        when the thread ends, or at close."""
        if self._closed:
            raise StoreError("the store is closed")
        lease = getattr(self._local, "lease", None)
        if lease is None or lease.conn.raw.closed:
            from psycopg_pool import PoolTimeout

            pooled = True
            try:
                raw = self._pool.getconn(timeout=POOL_WAIT_S)
            except PoolTimeout:
                pooled = False
                raw = self._psycopg.connect(self.dsn, **self._conn_kwargs)
            lease = _Lease(self, PgConnection(raw, identity=self._identity, keys=self._keys,
                                              begin="BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"), pooled)
            lease.conn.reopen = lease.reopener()
            self._local.lease = lease
            with self._readers_lock:
                self._leases.add(lease)
        return lease.conn

    def _give_back(self, lease: _Lease) -> None:
        """Return a reader connection to the pool (close it if it was opened beside the pool). Idempotent."""
        with self._readers_lock:
            if lease.done:
                return
            lease.done = True
            self._leases.discard(lease)
        pool = getattr(self, "_pool", None)
        try:
            if lease.pooled and pool is not None and not pool.closed:
                pool.putconn(lease.conn.raw)
            else:
                lease.conn.raw.close()
        except Exception:  # noqa: BLE001  giving back: a broken connection is dropped
            pass

    def add_schema(self, create: Callable[[Any], None]) -> None:
        if self._writer is None:
            return
        with self.transaction("create index schema") as conn:
            create(conn)
            self._refresh_catalog(conn)

    # -- schema ------------------------------------------------------------------------------------------------
    def _schema_version(self, conn: Any) -> int:  # type: ignore[override]
        row = conn.execute("SELECT to_regclass('meta') IS NOT NULL").fetchone()
        if not row or not row[0]:
            return 0
        row = conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
        return int(row[0]) if row else 0

    def _migrate(self, conn: Any) -> None:
        current = self._schema_version(conn)
        for version in range(current, SCHEMA_VERSION):
            with self.transaction(f"migrate to schema version {version + 1}") as tx:
                _PG_MIGRATIONS[version](tx)
                self._refresh_catalog(tx)
                tx.execute("INSERT OR REPLACE INTO meta(key, value) VALUES('schema_version', ?)", (str(version + 1),))
                tx.execute("INSERT OR IGNORE INTO meta(key, value) VALUES('store_id', ?)", (os.urandom(16).hex(),))
        if self.rls:
            from .rls import enable_rls

            with self.transaction("row-level security") as tx:
                enable_rls(tx, self.schema)

    # -- purge -------------------------------------------------------------------------------------------------
    def purge(self, *, wait_s: float = 0.0) -> bool:
        """``VACUUM`` the engine's tables so forgotten row versions leave the data files; True when no other
        session held a snapshot that could keep them (else the purge stays pending and is retried)."""
        if self._writer is None or self._raw is None:
            return not self._purge_pending
        with self.write_lock:
            raw = self._raw_writer()
            tables = [r[0] for r in raw.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname=%s ORDER BY tablename", (self.schema,)).fetchall()]
            blocked = self._other_snapshots(raw)
            if blocked and wait_s > 0:
                import time

                deadline = time.monotonic() + wait_s
                while blocked and time.monotonic() < deadline:
                    time.sleep(0.02)
                    blocked = self._other_snapshots(raw)
            if tables:
                raw.execute("VACUUM " + ", ".join(f"{self.schema}.{t}" for t in tables))
            self._purge_pending = bool(blocked)
            return not self._purge_pending

    @staticmethod
    def _other_snapshots(raw: Any) -> int:
        """Sessions of other clients holding a snapshot (they may still see forgotten row versions)."""
        return int(raw.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE backend_xmin IS NOT NULL AND pid <> pg_backend_pid()"
            " AND datname = current_database() AND backend_type = 'client backend'").fetchone()[0])

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        with self._readers_lock:
            leases = list(self._leases)
        for lease in leases:
            self._give_back(lease)
        pool = getattr(self, "_pool", None)
        if pool is not None:
            pool.close()
        if self._raw is not None:
            if self._purge_pending and self._writer is not None:
                try:
                    self._closed = False
                    self.purge()
                finally:
                    self._closed = True
            self._raw.close()
            self._raw = None

    # -- what differs in SQL ------------------------------------------------------------------------------------
    def list_turns(self, ns_id: int, session_id: str | None = None, limit: int | None = None,
                   offset: int = 0) -> list[TurnRow]:
        sql = f"SELECT {_TURN_COLS} FROM turns WHERE ns_id=?"
        args: list[Any] = [ns_id]
        if session_id is not None:
            sql += " AND session_id=?"
            args.append(session_id)
        sql += " ORDER BY seq" + ("" if limit is None else " LIMIT ?") + " OFFSET ?"
        args += ([] if limit is None else [limit]) + [offset]
        return [_turn_row(r) for r in self.reader().execute(sql, args)]

    def rids_matching(self, ns_id: int, record_filter: RecordFilter) -> set[int]:
        from ..filters import filter_sql

        where, args = filter_sql(record_filter, dialect="postgres")
        return self.filter_rids(ns_id, where or "TRUE", args)

    def disk_bytes(self) -> int:
        row = self.reader().execute(
            "SELECT COALESCE(SUM(pg_total_relation_size(quote_ident(schemaname) || '.' || quote_ident(tablename))),"
            " 0) FROM pg_tables WHERE schemaname=?", (self.schema,)).fetchone()
        return int(row[0]) if row else 0

    def drop_schema(self) -> None:
        """Delete the whole schema (every namespace, every index) — what removing a SQLite store directory is."""
        with self.write_lock:
            self._raw.execute(f"DROP SCHEMA IF EXISTS {self.schema} CASCADE")


class NewSchema(NewDirectory):
    """What an open on PostgreSQL created — the schema, when it did not exist before — for the open to undo if it
    fails after the store was opened (a bad embedder, say): :meth:`undo` drops the schema again unless a turn was
    written to it meanwhile. The PostgreSQL twin of :class:`~memory_ext.store.sqlite.NewDirectory`."""

    def __init__(self, dsn: str, schema: str, created: bool) -> None:
        self.top = None
        self.dsn, self.schema, self.created = dsn, schema, created

    def undo(self) -> None:
        if not self.created:
            return
        self.created = False
        import psycopg

        try:
            with psycopg.connect(self.dsn, autocommit=True) as conn, conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (_lock_key(self.schema),))
                table = conn.execute("SELECT to_regclass(%s)", (f"{self.schema}.turns",)).fetchone()
                used = table is not None and table[0] is not None and \
                    conn.execute(f"SELECT EXISTS (SELECT 1 FROM {self.schema}.turns)").fetchone() == (True,)
                if used:
                    return  # another engine opened the new store and wrote to it: it is not ours to remove
                conn.execute(f"DROP SCHEMA IF EXISTS {self.schema} CASCADE")
        except psycopg.Error:  # the open already failed: its error is the one to report
            pass


def _redact(dsn: str) -> str:
    """A DSN without its password, for messages."""
    import re

    return re.sub(r"(://[^:/@]+:)[^@]*@", r"\1***@", re.sub(r"password=\S+", "password=***", dsn))

