"""The truth store on PostgreSQL: the tables of the SQLite store, their statements written for PostgreSQL, many writer
processes.

:class:`PgTruthStore` implements :class:`memory_ext.store.interface.TruthStore`: it composes the repositories of
``store/repos`` (which run the PostgreSQL text of their statement families, :mod:`memory_ext.store.pg.statements`)
with what is its own here — connections (a psycopg pool of per-thread readers, one writer connection), the write
transaction, the schema (``store/pg/schema.py``, in the PostgreSQL schema ``storage.postgres_schema``), concurrency and
purging. It imports nothing from the SQLite backend.

Concurrency: any number of engine processes on any number of hosts open the same schema; there is no process
lock. A write holds a PostgreSQL advisory lock from its first read of the stored tail to its commit: a write of
one namespace (``add_turns``, the indexer's batch) holds the schema's lock *shared* and that namespace's lock
exclusively, a store-wide step (forget, an update, compaction, reindex, migrations) the schema's lock exclusively
— the exclusion SQLite's ``BEGIN IMMEDIATE`` gives one directory, now per namespace and across hosts. Within a
namespace, sequence numbers and row ids therefore grow in commit order, and every in-process snapshot (keyword,
graph, time, evidence, catalog, sparse, vectors) keeps syncing by its counters exactly as on SQLite. Each
process's indexer claims one namespace at a time (:meth:`PgTruthStore.claimed_work`). Readers never take a lock:
a search runs on its thread's connection, each snapshot load in one repeatable-read transaction.

Forgetting deletes the rows in one transaction, which also records what is left to purge (its transaction id
and the tables it changed, in ``meta``); :meth:`PgTruthStore.purge` then rewrites the tables among them that can
hold text (``VACUUM (FULL, ANALYZE)``: a plain ``VACUUM`` frees the dead row versions but leaves their bytes in
the pages until the space is reused); the others (numbers: postings, statistics, the pgvector table) are left to
autovacuum. A session holding a snapshot older than the forget
keeps the rows alive: the purge is then reported pending and retried, as on SQLite — by any process of the
store. What PostgreSQL itself keeps beyond that (the write-ahead log until its segments are recycled, backups,
replicas, statistics) is described in ``docs/operations.md``.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import threading
import time
import warnings
import weakref
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ...errors import ConfigError, MissingDependencyError, ReadOnlyStoreError, SchemaVersionError, StoreError
from ..filters import RecordFilter
from ..interface import StoreOperationError
from ..locate import DSN_ENV, dsn_from
from ..repos import MetaRepo, QueueRepo, RecordRepo, TurnRepo, VersionRepo
from ..rows import TurnRow
from ..rows import turn_row as _turn_row
from .connection import PgConnection, as_store_error
from .schema import MIGRATIONS, SCHEMA_VERSION
from .statements import POSTGRES

__all__ = ["DSN_ENV", "NewSchema", "PgTruthStore", "dsn_from"]

PURGE_META = "pg_purge_pending"
"""``meta`` key of a forget whose purge has not completed: ``{"xid": <its transaction>, "tables": [...]}``."""
_TEXT_TYPES = {"text", "character varying", "character", "bytea", "json", "jsonb"}
"""Column types that can hold a copy of a memory's text: tables with one are rewritten by a purge."""
_COMMIT = "COMMIT"
_ROLLBACK = "ROLLBACK"
_QUEUED_NAMESPACES = "SELECT ns_id FROM index_queue GROUP BY ns_id ORDER BY MIN(rid)"
_HAS_META = "SELECT to_regclass('meta') IS NOT NULL"
_SCHEMA_VERSION = "SELECT value FROM meta WHERE key='schema_version'"
_SET_VERSION = ("INSERT INTO meta(key, value) VALUES('schema_version', %s)"
                " ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value")
_SET_STORE_ID = "INSERT INTO meta(key, value) VALUES('store_id', %s) ON CONFLICT DO NOTHING"


def store_exists(dsn: str, schema: str) -> bool:
    """Whether ``schema`` of the database at ``dsn`` holds a memory-ext store (True when the server cannot be
    asked: the open that follows reports why)."""
    try:
        import psycopg

        with psycopg.connect(dsn, connect_timeout=10) as conn:
            row = conn.execute("SELECT to_regclass(%s) IS NOT NULL", (f"{schema}.meta",)).fetchone()
            return bool(row and row[0])
    except Exception:  # noqa: BLE001  unreachable or no psycopg: the open that follows reports why
        return True


def _lock_key(schema: str) -> int:
    """The advisory-lock key of a schema's write lock (a signed 64-bit number)."""
    return int.from_bytes(hashlib.blake2b(f"memory_ext:write:{schema}".encode(), digest_size=8).digest(),
                          "big", signed=True)


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
    """The store's write lock. In this process, threads queue on one RLock (they share the writer connection);
    across processes it is a PostgreSQL advisory lock on the schema — exclusive for a store-wide write (forget,
    lifecycle steps, migrations), or, for a write of one namespace (:meth:`namespace`: ``add_turns``, the
    indexer's batch), shared on the schema plus exclusive on that namespace: writers of different namespaces run
    side by side, writers of one namespace one after another (so its sequence numbers and row ids grow in commit
    order, which the in-memory snapshots sync by). Nested acquisitions take nothing more. A wait longer than
    ``storage.postgres_lock_timeout_s`` fails with a StoreError; a writer connection lost while holding the lock
    takes it again on its new connection."""

    def __init__(self, store: PgTruthStore) -> None:
        self._store = store
        self._rlock = threading.RLock()
        self._depth = 0
        self._held: list[tuple[str, tuple[Any, ...]]] = []

    @property
    def held(self) -> bool:
        """True while this process holds the advisory lock(s)."""
        return bool(self._held)

    def retake(self, raw: Any) -> None:
        """Take the held advisory locks again on a new writer connection (the lost session's went with it)."""
        for sql, args in self._held:
            raw.execute(sql, args)

    def _take(self, *statements: tuple[str, tuple[Any, ...]]) -> None:
        self._rlock.acquire()
        self._depth += 1
        if self._depth == 1:
            try:
                psycopg = self._store._psycopg
                for attempt in (0, 1):
                    raw = self._store._raw_writer()  # (a lost connection is replaced here)
                    done: list[tuple[str, tuple[Any, ...]]] = []
                    try:
                        for sql, args in statements:
                            raw.execute(sql, args)
                            done.append((sql, args))
                        break
                    except psycopg.errors.LockNotAvailable:
                        for sql, args in reversed(done):
                            with contextlib.suppress(psycopg.Error):
                                raw.execute(_unlock(sql), args)
                        store = self._store
                        raise StoreError(
                            f"another engine held the write lock of PostgreSQL schema {store.schema!r} for more "
                            f"than {store.lock_timeout_s:g} s (storage.postgres_lock_timeout_s); retry, or look for "
                            "a stuck writer: SELECT pid, client_addr, state FROM pg_stat_activity JOIN pg_locks "
                            "USING (pid) WHERE locktype = 'advisory'") from None
                    except psycopg.Error as exc:
                        if attempt == 0 and raw.closed:
                            continue  # lost since the last write: once more, on a new connection
                        raise as_store_error(exc) from exc
                self._held = list(statements)
            except BaseException:
                self._depth -= 1
                self._rlock.release()
                raise

    def acquire(self) -> bool:
        self._take(("SELECT pg_advisory_lock(%s)", (self._store.lock_key,)))
        return True

    def release(self) -> None:
        try:
            if self._depth == 1:
                held, self._held = self._held, []
                writer = self._store._raw_writer_or_none()
                if writer is not None and not writer.closed:  # (a lost session's locks went with it)
                    with contextlib.suppress(self._store._psycopg.Error):
                        for sql, args in reversed(held):
                            writer.execute(_unlock(sql), args)
        finally:
            self._depth -= 1
            self._rlock.release()

    def __enter__(self) -> _WriteLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    @contextmanager
    def namespace(self, key: tuple[str, str]) -> Iterator[None]:
        """Hold the lock for a write of namespace ``key`` only."""
        self._take(("SELECT pg_advisory_lock_shared(%s)", (self._store.lock_key,)),
                   ("SELECT pg_advisory_lock(%s)", (_lock_key(f"{self._store.schema}:ns:{key[0]}\x00{key[1]}"),)))
        try:
            yield
        finally:
            self.release()


def _unlock(lock_sql: str) -> str:
    """The statement releasing what ``lock_sql`` took (``pg_advisory_lock[_shared]`` -> ``..._unlock...``)."""
    return lock_sql.replace("pg_advisory_lock", "pg_advisory_unlock")


class PgTruthStore(QueueRepo, VersionRepo, RecordRepo, TurnRepo, MetaRepo):
    """The truth store in a PostgreSQL schema. Use through :class:`memory_ext.MemoryEngine`::

        engine = MemoryEngine.open("postgresql://memory@db-host/memory")   # or storage.backend: postgres
    """

    dialect = "postgres"
    _missing_table = (StoreOperationError,)
    PURGE_TARGET = "postgres:dead-row-versions"

    def __init__(self, dsn: str, *, schema: str = "memory_ext", read_only: bool = False, pool_size: int = 16,
                 rls: bool = False, lock_timeout_s: float = 30.0) -> None:
        try:
            import psycopg
            from psycopg_pool import ConnectionPool
        except ImportError:
            raise MissingDependencyError("psycopg", "postgres", "the PostgreSQL backend") from None
        if not (schema.isidentifier() and schema.isascii() and schema == schema.lower()):
            raise ConfigError("storage.postgres_schema", schema, "use a lower-case ASCII identifier such as "
                              "memory_ext (PostgreSQL folds unquoted names to lower case)")
        self.dsn = dsn
        self.schema = schema
        self.directory = Path(f"postgres-{schema}")
        self.file_mode = 0o600
        self.read_only = read_only
        self.rls = rls
        self.lock_key = _lock_key(schema)
        self.claim_key = _lock_key(schema) & 0x7FFFFFFF  # int4: the first half of (schema, namespace) claims
        self._claim_lock = threading.Lock()
        self._claim_conn: Any = None
        self.lock_timeout_s = lock_timeout_s
        self._lock_fd = None
        self._local = threading.local()
        self._leases: weakref.WeakSet[_Lease] = weakref.WeakSet()
        self._readers_lock = threading.Lock()
        self._closed = False
        self._purge_pending = False
        self._after_commit: list[Callable[[], None]] | None = None
        self._raw: Any = None
        self._writer: Any = None
        self._lock = _WriteLock(self)
        self.write_lock = self._lock
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
            self._writer = None if read_only else PgConnection(self._raw,
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
        if self._writer is not None and self._pending_record(self._writer) is not None:
            self._purge_pending = True  # a forget of an earlier process could not finish its purge: try now
            self.purge()

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
        self._lock.retake(raw)
        self._raw = raw
        if self._writer is not None:
            self._writer.raw = raw
        return raw

    def _raw_writer_or_none(self) -> Any:
        return self._raw

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
            lease = _Lease(self, PgConnection(raw,
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
            if self.rls:  # the index's new tables get their policies before anyone can read them
                from .rls import enable_rls

                enable_rls(conn, self.schema)

    def namespace_lock(self, key: tuple[str, str]) -> Any:
        """The write lock for a write of one namespace (``add_turns``, an indexer batch): writers of other
        namespaces, in other processes, go on meanwhile."""
        return self.write_lock.namespace(key)

    # -- the indexers of several processes ----------------------------------------------------------------------
    @contextmanager
    def claimed_work(self, limit: int) -> Iterator[list[tuple[int, int, int, int]]]:
        """The next batch for this process's indexer: the oldest ``limit`` queued items of the first namespace
        (oldest work first) that no other indexer holds. The claim is a session advisory lock on
        ``(schema, namespace)``, held while the batch is embedded and written: two processes never embed the same
        records, a namespace's vectors land in rid order (what the in-memory snapshots sync by), and a process
        that dies releases its claim with its connection."""
        with self._claim_lock:
            held: int | None = None
            claim: Any = None
            try:
                for (ns_id,) in self.reader().execute(_QUEUED_NAMESPACES).fetchall():
                    for attempt in (0, 1):
                        if self._claim_conn is None or self._claim_conn.closed:  # (a lost one is replaced)
                            self._claim_conn = self._psycopg.connect(self.dsn, autocommit=True)
                        claim = self._claim_conn
                        try:
                            got = claim.execute("SELECT pg_try_advisory_lock(%s, %s)",
                                                (self.claim_key, int(ns_id))).fetchone()[0]
                            break
                        except self._psycopg.Error as exc:
                            if attempt == 0 and claim.closed:
                                continue  # the connection was lost (its claims went with it): once more
                            raise as_store_error(exc) from exc
                    if got:
                        held = int(ns_id)
                        break
                yield [] if held is None else self.queued(self.reader(), limit, ns_id=held)
            finally:
                if held is not None and claim is not None and not claim.closed:
                    with contextlib.suppress(self._psycopg.Error):  # (a lost session's claims went with it)
                        claim.execute("SELECT pg_advisory_unlock(%s, %s)", (self.claim_key, held))

    # -- schema ------------------------------------------------------------------------------------------------
    def _schema_version(self, conn: Any) -> int:
        row = conn.execute(_HAS_META).fetchone()
        if not row or not row[0]:
            return 0
        row = conn.execute(_SCHEMA_VERSION).fetchone()
        return int(row[0]) if row else 0

    def _migrate(self, conn: Any) -> None:
        current = self._schema_version(conn)
        for version in range(current, SCHEMA_VERSION):
            with self.transaction(f"migrate to schema version {version + 1}") as tx:
                MIGRATIONS[version](tx)
                tx.execute(_SET_VERSION, (str(version + 1),))
                tx.execute(_SET_STORE_ID, (os.urandom(16).hex(),))
        from .rls import enable_rls, rls_enabled

        self.rls = self.rls or rls_enabled(conn, self.schema)  # once on, on for every process (disable_rls)
        if self.rls:
            with self.transaction("row-level security") as tx:
                enable_rls(tx, self.schema)

    # -- purge -------------------------------------------------------------------------------------------------
    @contextmanager
    def transaction(self, operation: str) -> Iterator[Any]:
        """One write transaction on the writer connection (under the advisory write lock); rolled back whole on
        any error. A forget records, in its own transaction, what :meth:`purge` must finish."""
        if self._writer is None:
            raise ReadOnlyStoreError(operation)
        with self.write_lock:
            conn = self._writer
            conn.execute("BEGIN")
            self._after_commit = []
            try:
                yield conn
                if operation == "forget":
                    self._note_forget(conn)
            except BaseException:
                self._after_commit = None
                conn.execute(_ROLLBACK)
                raise
            conn.execute(_COMMIT)
            self._run_after_commit(operation)
            if self.purge_pending:  # an earlier forget could not finish its purge: try again
                self.purge()

    def _note_forget(self, conn: Any) -> None:
        """Record, in the forget's own transaction, what :meth:`purge` must finish: the forget's transaction id
        and the tables it deleted from or updated (merged with a pending earlier forget, of any process)."""
        raw = conn.raw
        xid = int(raw.execute("SELECT pg_current_xact_id()::text").fetchone()[0])
        if raw.execute("SELECT current_setting('track_counts')::bool").fetchone()[0]:
            tables = {t for (t,) in raw.execute(
                "SELECT relname FROM pg_stat_xact_user_tables WHERE schemaname = %s AND n_tup_del + n_tup_upd > 0",
                (self.schema,)).fetchall()}
        else:  # no per-transaction counts on this server: every table of the store
            tables = {t for (t,) in raw.execute("SELECT tablename FROM pg_tables WHERE schemaname = %s",
                                                (self.schema,)).fetchall()}
        earlier = self._pending_record(conn)
        if earlier is not None:
            xid, tables = max(xid, earlier[0]), tables | earlier[1]
        conn.execute(POSTGRES.meta.set_meta,
                     (PURGE_META, json.dumps({"xid": xid, "tables": sorted(tables)})))

    def _pending_record(self, conn: Any) -> tuple[int, set[str]] | None:
        row = conn.execute(POSTGRES.meta.get_meta, (PURGE_META,)).fetchone()
        if row is None:
            return None
        data = json.loads(row[0])
        return int(data["xid"]), set(data["tables"])

    def purge(self, *, wait_s: float = 0.0) -> bool:
        """Remove forgotten rows from the data files; True when complete (nothing of a forget left to purge).

        A forget records its transaction id and the tables it changed (``meta``, key ``pg_purge_pending``: any
        process's purge finishes it). Once no session can still see the forgotten rows — none holds a snapshot
        or runs a transaction older than the forget (waiting at most ``wait_s``) — the tables with a text, bytea
        or json column are rewritten (``VACUUM (FULL, ANALYZE)``: a plain ``VACUUM`` frees dead row versions but
        leaves their bytes in the page until the space is reused); the others hold numbers only (postings,
        statistics, the pgvector table, whose HNSW index is slow to vacuum) and are left to autovacuum. A
        rewrite waits for its table's lock at most ``max(wait_s, 0.2)`` seconds. Else the purge stays pending and
        is retried after later writes, at close, at the next open and by ``engine.purge``.
        """
        if self._writer is None or self._raw is None:
            return not self._purge_pending
        with self.write_lock:
            raw = self._raw_writer()
            pending = self._pending_record(self._writer)
            if pending is None:
                self._purge_pending = False
                return True
            xid, touched = pending
            deadline = time.monotonic() + wait_s
            while (blocked := bool(self._holders(raw, xid))) and time.monotonic() < deadline:
                time.sleep(0.02)
            if not blocked:
                blocked = not self._vacuum(raw, touched, max(0.2, deadline - time.monotonic()))
            if not blocked:
                raw.execute(f"DELETE FROM {self.schema}.meta WHERE key = %s", (PURGE_META,))
            self._purge_pending = blocked
            return not blocked

    def _vacuum(self, raw: Any, touched: set[str], lock_wait_s: float) -> bool:
        """Rewrite the touched tables that can hold text; False when a table's lock was not granted in time
        (nothing is lost: the purge is retried)."""
        columns: dict[str, set[str]] = {}
        for table, kind in raw.execute(
                "SELECT c.relname, format_type(a.atttypid, NULL) FROM pg_class c"
                " JOIN pg_namespace n ON n.oid = c.relnamespace JOIN pg_attribute a ON a.attrelid = c.oid"
                " AND a.attnum > 0 AND NOT a.attisdropped WHERE n.nspname = %s AND c.relkind = 'r'",
                (self.schema,)).fetchall():
            columns.setdefault(table, set()).add(kind)
        rewrite = sorted(t for t in touched & set(columns) if columns[t] & _TEXT_TYPES)
        try:
            raw.execute(f"SET lock_timeout = {int(lock_wait_s * 1000)}")
            for table in rewrite:  # one at a time: each holds its table's lock only for its own rewrite
                raw.execute(f"VACUUM (FULL, ANALYZE) {self.schema}.{table}")
        except self._psycopg.errors.LockNotAvailable:
            return False
        except self._psycopg.Error as exc:  # the forget has committed: report, retry later
            warnings.warn(f"purge of forgotten rows failed ({type(exc).__name__}: {str(exc).strip()}); it stays "
                          "pending and is retried", RuntimeWarning, stacklevel=4)
            return False
        finally:
            raw.execute(f"SET lock_timeout = {max(1, round(self.lock_timeout_s * 1000))}")  # the write lock's
        return True

    @staticmethod
    def _holders(raw: Any, xid: int) -> int:
        """Sessions, prepared transactions and replication slots that keep rows deleted by transaction ``xid``
        alive: a snapshot (or a running transaction) at least as old as it.

        ``backend_xmin`` and ``backend_xid`` are shown for every session, but ``backend_type`` only for the
        engine's own role's (unless it has ``pg_read_all_stats``): another role's session of this database
        counts whatever its type (an autovacuum worker too, which only delays the purge)."""
        return int(raw.execute(
            "WITH f AS (SELECT age(xid(%s::text::xid8)) AS a)"
            " SELECT (SELECT count(*) FROM pg_stat_activity, f WHERE pid <> pg_backend_pid()"
            "         AND (datname = current_database() OR datname IS NULL)"
            "         AND (backend_type IN ('client backend', 'walsender')"
            "              OR (backend_type IS NULL AND datname = current_database()))"
            "         AND (age(backend_xmin) >= f.a OR age(backend_xid) > f.a))"
            " + (SELECT count(*) FROM pg_prepared_xacts, f WHERE database = current_database()"
            "    AND age(transaction) > f.a)"
            " + (SELECT count(*) FROM pg_replication_slots, f WHERE age(xmin) >= f.a)",
            (str(xid),)).fetchone()[0])

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
        if self._claim_conn is not None:
            self._claim_conn.close()
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
        sql = POSTGRES.turns.list_turns
        args: list[Any] = [ns_id]
        if session_id is not None:
            sql += " AND session_id=%s"
            args.append(session_id)
        sql += " ORDER BY seq" + ("" if limit is None else " LIMIT %s") + " OFFSET %s"
        args += ([] if limit is None else [limit]) + [offset]
        return [_turn_row(r) for r in self.reader().execute(sql, args)]

    @staticmethod
    def insert_records(conn: Any, ns_id: int, rows: Sequence[dict[str, Any]],
                       anchor_rids: Sequence[int | None] | None = None) -> list[int]:
        """:meth:`TruthStore.insert_records` in three statements, not three per record (a round trip to the
        server costs what SQLite's whole insert does): one multi-row insert returning the rids, then the turn
        records' anchors and the turns' record rids."""
        if not rows:
            return []
        now = time.time()
        anchors = anchor_rids if anchor_rids is not None else [None] * len(rows)
        rids: list[int] = []
        for start in range(0, len(rows), 500):
            part = list(zip(rows[start:start + 500], anchors[start:start + 500], strict=True))
            values = [(r["id"], ns_id, r["kind"], r["text"], r["index_text"], r.get("l0"), r.get("l1"),
                       json.dumps(r.get("entities", [])), json.dumps(r.get("tags", [])), r.get("ref_ts"),
                       json.dumps(r["turn_ids"]), r.get("source_role"), r.get("speaker"), r.get("session_id"),
                       r.get("importance", 0.5), anchor, now, now) for r, anchor in part]
            got = {str(i): int(rid) for rid, i in conn.execute(
                "INSERT INTO records(id, ns_id, kind, text, index_text, l0, l1, entities, tags, ref_ts, turn_ids,"
                " source_role, speaker, session_id, importance, anchor_rid, created_at, updated_at) VALUES "
                + ",".join([f"({POSTGRES.marks(18)})"] * len(values)) + " RETURNING rid, id",
                [v for row in values for v in row]).fetchall()}
            rids += [got[r["id"]] for r, _ in part]
        own = [rid for rid, r in zip(rids, rows, strict=True) if r["kind"] == "turn"]
        if own:
            conn.execute("UPDATE records SET anchor_rid = rid WHERE rid = ANY(%s)", (own,))
        turns = [(rid, r["turn_ids"][0]) for rid, r in zip(rids, rows, strict=True)
                 if r["kind"] == "turn" and r["turn_ids"]]
        if turns:
            conn.execute("UPDATE turns SET record_rid = v.rid FROM unnest(%s::bigint[], %s::text[]) AS v(rid, id)"
                         " WHERE turns.ns_id = %s AND turns.id = v.id",
                         ([t[0] for t in turns], [t[1] for t in turns], ns_id))
        return rids

    def turns_by_seq_ranges(self, ns_id: int, ranges: Sequence[tuple[int, int]]) -> list[TurnRow]:
        """Turns whose seq falls in any of the inclusive ``ranges``, in seq order, each once — in one round trip
        (:meth:`TruthStore.turns_by_seq_ranges` reads one range per statement)."""
        out: dict[int, TurnRow] = {}
        for part in (ranges[i:i + 200] for i in range(0, len(ranges), 200)):
            where = " OR ".join("seq BETWEEN %s AND %s" for _ in part)
            out.update((row.seq, row) for row in (_turn_row(r) for r in self.reader().execute(
                f"{POSTGRES.turns.list_turns} AND ({where})",
                (ns_id, *(v for lo_hi in part for v in lo_hi)))))
        return [out[seq] for seq in sorted(out)]

    def rids_matching(self, ns_id: int, record_filter: RecordFilter) -> set[int]:
        from ..filters import filter_sql

        where, args = filter_sql(record_filter, dialect="postgres")
        return self.filter_rids(ns_id, where or "TRUE", args)

    def disk_bytes(self) -> int:
        row = self.reader().execute(
            "SELECT COALESCE(SUM(pg_total_relation_size(quote_ident(schemaname) || '.' || quote_ident(tablename))),"
            " 0) FROM pg_tables WHERE schemaname=%s", (self.schema,)).fetchone()
        return int(row[0]) if row else 0


class NewSchema:
    """What an open on PostgreSQL created — the schema, when it did not exist before — for the open to undo if it
    fails after the store was opened (a bad embedder, say): :meth:`undo` drops the schema again unless a turn was
    written to it meanwhile. What a new SQLite directory is to the SQLite backend."""

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

