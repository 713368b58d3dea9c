"""Copy a whole store from one backend to another: SQLite -> PostgreSQL and back (``memext migrate``).

:func:`migrate_store` copies every table of the source store — the truth tables (``meta``, ``namespaces``,
``turns``, ``records``, ``embeddings``, ``files``, ``file_turns``, ``claims``, ``memory_history``, ``index_queue``)
and every derived index table (keyword, graph, time, evidence, sparse) — row for row, with the same row ids (rids,
tids, seqs...), so every cross reference, the in-process snapshots' counters and the hook ids stay valid. The
``meta`` rows are copied too: the target keeps the source's ``store_id`` (derived Chroma collections are named
after it) and embedder.

* **Vectors.** The ``embeddings`` rows are the truth. A PostgreSQL target gets its pgvector table
  (``pgvector_d<dim>`` and ``pgvector_d<dim>_counts``) built from them in the same transaction; going to SQLite the
  pgvector tables are left behind (numpy reads the ``embeddings`` rows; a Chroma collection is rebuilt from them by
  the first engine that opens the store with ``vector_backend: chroma``).
* **All or nothing.** The whole copy is one transaction on the target, in batches (a tqdm bar on stderr); the
  identity sequences of a PostgreSQL target are set past the highest id copied (and past the source's own
  high-water mark). A failure rolls everything back and removes the directory or schema the migration created.
  A target that already holds data is refused (:class:`~memory_ext.errors.InvalidArgumentError` naming
  ``target``); so is a source that is the target, a source that is no store, one mid-reindex, one written by
  another schema version, and an embedder other than the source's
  (:class:`~memory_ext.errors.EmbedderMismatchError`).
* **Nobody writes meanwhile.** The source is read in one read-only snapshot while the migration holds its write
  lock (the ``LOCK`` file of a SQLite store: a running writer makes the migration fail with
  :class:`~memory_ext.errors.StoreLockedError`; the advisory write lock of a PostgreSQL schema: writers of other
  processes wait until the migration ends). The target's write lock is held from its creation to the end of the
  verification.
* **Verified.** Inside the transaction, the rows of every table are counted on both sides (a difference rolls
  back). After the commit, a sample of searches — queries made from stored turns, spread over the namespaces —
  runs on a read-only engine over each side: :attr:`MigrationReport.verified` is True when every table's count is
  equal and every search returned the same record ids in the same order (``memext migrate`` exits 1 otherwise).

>>> import tempfile
>>> from memory_ext import MemoryEngine, Turn
>>> source, target = tempfile.mkdtemp(), tempfile.mkdtemp()
>>> with MemoryEngine.open(source, embedder="hashing") as engine:
...     _ = engine.add_turns([Turn(role="user", content="I adopted a beagle called Toby")], "ana")
...     _ = engine.flush()
>>> report = migrate_store(source, target, progress=False)   # a directory, or a postgresql:// DSN
>>> report.verified, report.rows["turns"], report.searches
(True, 1, 1)
"""

from __future__ import annotations

import os
import re
import sqlite3
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, cast

from pydantic import BaseModel, ConfigDict

from ..config import EngineConfig
from ..errors import InvalidArgumentError, SchemaVersionError, StoreError, StoreLockedError
from .interface import TruthStore
from .sqlite import DB_FILE, LOCK_FILE, SCHEMA_VERSION, NewDirectory
from .sqlite import TruthStore as SqliteTruthStore

if TYPE_CHECKING:
    from ..embed import Embedder
    from ..engine import MemoryEngine

__all__ = ["BATCH_ROWS", "MigrationReport", "StoreLocation", "locate", "migrate_store"]

BATCH_ROWS = 2000
"""Rows read and written per batch."""
SEARCH_K = 10
"""Results per verification search."""
LOCK_WAIT_S = 30.0
"""How long the migration waits for a PostgreSQL source's running write transaction to finish."""

_INTERNAL = ("sqlite_sequence", "sqlite_stat1", "sqlite_stat2", "sqlite_stat3", "sqlite_stat4")
_META_KEYS_OF_AN_EMPTY_STORE = {"schema_version", "store_id"}


def _derived_vector_table(table: str) -> bool:
    """pgvector's tables: built from the ``embeddings`` rows, never copied."""
    return bool(re.fullmatch(r"pgvector_d\d+(_counts)?", table))


# -- where a store is -------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class StoreLocation:
    """A store: a SQLite directory, or a schema of a PostgreSQL database."""

    backend: Literal["sqlite", "postgres"]
    path: str
    """The store directory (absolute), or the DSN."""
    schema: str | None = None
    """The PostgreSQL schema (``storage.postgres_schema``)."""

    def __str__(self) -> str:
        if self.backend == "sqlite":
            return self.path
        from .pg.truth import _redact

        return f"{_redact(self.path)} (schema {self.schema})"

    def identity(self) -> tuple[Any, ...]:
        """What makes two locations the same store."""
        if self.backend == "sqlite":
            return ("sqlite", str(Path(self.path).resolve()))
        try:
            from psycopg.conninfo import conninfo_to_dict

            info = conninfo_to_dict(self.path)
        except Exception:  # noqa: BLE001  an unparsable DSN is compared as written (connecting reports it)
            return ("postgres", self.path, self.schema)
        return ("postgres", str(info.get("host") or "localhost"), str(info.get("port") or "5432"),
                str(info.get("dbname") or info.get("user") or ""), self.schema)

    def engine_config(self, base: EngineConfig) -> EngineConfig:
        """``base`` with the storage keys that open this location (numpy vectors on SQLite, pgvector on
        PostgreSQL: what the verification searches compare)."""
        data = base.model_dump(exclude_unset=True)  # unset: the defaults that follow the embedder stay defaults
        storage = dict(data.get("storage", {}))
        if self.backend == "sqlite":
            storage.update(backend="sqlite", vector_backend="numpy")
        else:
            storage.update(backend="postgres", vector_backend="pgvector" if base.globals.vector_enabled else "numpy",
                           postgres_dsn=self.path, postgres_schema=self.schema)
        data["storage"] = storage
        return EngineConfig.coerce(data)


def locate(spec: str | os.PathLike[str], schema: str | None = None, *, field: str = "source",
           config: EngineConfig | None = None) -> StoreLocation:
    """The store named by ``spec``: a ``postgresql://`` DSN (schema ``schema``, else ``storage.postgres_schema``),
    else a directory."""
    from .locate import is_dsn

    text = os.fspath(spec)
    if not text.strip():
        raise InvalidArgumentError(field, text, "give a store directory or a postgresql:// DSN")
    if is_dsn(text):
        name = schema or (config.storage.postgres_schema if config is not None else "memory_ext")
        if not name.isidentifier() or name != name.lower():
            raise InvalidArgumentError(f"{field}_schema", name, "use a plain lower-case identifier such as "
                                                               "memory_ext (PostgreSQL folds unquoted names)")
        return StoreLocation("postgres", text, name)
    if schema is not None:
        raise InvalidArgumentError(f"{field}_schema", schema, f"a schema names a PostgreSQL store; the {field} "
                                                              f"{text!r} is a directory (give a postgresql:// DSN)")
    return StoreLocation("sqlite", str(Path(text).expanduser().absolute()))


# -- the report -------------------------------------------------------------------------------------------------
class MigrationReport(BaseModel):
    """What :func:`migrate_store` copied and how it checked the copy."""

    model_config = ConfigDict(frozen=True)
    source: str
    """The source store (a directory, or a DSN without its password and the schema)."""
    target: str
    """The target store."""
    store_id: str
    """The store id both sides now share."""
    rows: dict[str, int]
    """Rows copied per table (equal to the source's count, checked in the transaction)."""
    vectors_built: dict[str, int]
    """Derived vector tables built on the target from the ``embeddings`` rows (pgvector), rows per table."""
    sequences: dict[str, int]
    """PostgreSQL target: the next id of each identity column (``table.column``) after the copy."""
    namespaces_searched: int
    """Namespaces the verification searches ran in."""
    searches: int
    """Verification searches run on both sides."""
    searches_same: int
    """Searches that returned the same record ids in the same order on both sides."""
    mismatches: list[str]
    """What differed (a table's count, a search's ids)."""
    warnings: list[str]
    """What was not migrated, with the reason (files of faces beside a SQLite store, vectors of another
    dimension)."""
    seconds: float
    """Wall-clock time of the whole migration."""

    @property
    def verified(self) -> bool:
        """Every count equal and every verification search the same on both sides."""
        return not self.mismatches and self.searches_same == self.searches


# -- one side of the copy: a SQLite or PostgreSQL connection, its catalog, its rows ------------------------------
class _Side:
    """Catalog and rows of one store through one raw connection (``sqlite3`` or psycopg)."""

    def __init__(self, backend: str, conn: Any, schema: str | None = None) -> None:
        self.backend = backend
        self.conn = conn
        self.schema = schema

    # catalog
    def tables(self) -> list[str]:
        if self.backend == "sqlite":
            rows = self.conn.execute("SELECT name FROM sqlite_master WHERE type='table' ORDER BY name").fetchall()
        else:
            rows = self.conn.execute("SELECT tablename FROM pg_tables WHERE schemaname=%s ORDER BY tablename",
                                     (self.schema,)).fetchall()
        return [r[0] for r in rows if r[0] not in _INTERNAL]

    def columns(self, table: str) -> dict[str, str]:
        """Column -> declared type (lower case), in table order."""
        if self.backend == "sqlite":
            return {r[1]: str(r[2]).lower() for r in self.conn.execute(f"PRAGMA table_info({table})").fetchall()}
        return {r[0]: str(r[1]).lower() for r in self.conn.execute(
            "SELECT column_name, data_type FROM information_schema.columns WHERE table_schema=%s AND table_name=%s"
            " ORDER BY ordinal_position", (self.schema, table)).fetchall()}

    def primary_key(self, table: str) -> list[str]:
        if self.backend == "sqlite":
            rows = sorted((r[5], r[1]) for r in self.conn.execute(f"PRAGMA table_info({table})") if r[5])
            return [name for _, name in rows]
        return [r[0] for r in self.conn.execute(
            "SELECT k.column_name FROM information_schema.table_constraints tc JOIN information_schema.key_column_usage"
            " k ON k.constraint_name = tc.constraint_name AND k.constraint_schema = tc.constraint_schema"
            " WHERE tc.constraint_type='PRIMARY KEY' AND tc.table_schema=%s AND tc.table_name=%s"
            " ORDER BY k.ordinal_position", (self.schema, table)).fetchall()]

    def id_column(self, table: str) -> str | None:
        """The column that hands out new ids: SQLite's ``INTEGER PRIMARY KEY`` (the rowid), PostgreSQL's
        identity column."""
        if self.backend == "sqlite":
            key = self.primary_key(table)
            return key[0] if len(key) == 1 and self.columns(table).get(key[0]) == "integer" else None
        row = self.conn.execute("SELECT column_name FROM information_schema.columns WHERE table_schema=%s AND"
                                " table_name=%s AND is_identity='YES'", (self.schema, table)).fetchone()
        return row[0] if row else None

    def parents(self, table: str) -> set[str]:
        """Tables ``table`` has foreign keys to."""
        if self.backend == "sqlite":
            return {r[2] for r in self.conn.execute(f"PRAGMA foreign_key_list({table})")} - {table}
        return {r[0] for r in self.conn.execute(
            "SELECT DISTINCT ccu.table_name FROM information_schema.table_constraints tc"
            " JOIN information_schema.constraint_column_usage ccu ON ccu.constraint_name = tc.constraint_name"
            " AND ccu.constraint_schema = tc.constraint_schema WHERE tc.constraint_type='FOREIGN KEY'"
            " AND tc.table_schema=%s AND tc.table_name=%s", (self.schema, table)).fetchall()} - {table}

    def _q(self, table: str) -> str:
        return table if self.backend == "sqlite" else f"{self.schema}.{table}"

    # rows
    def count(self, table: str) -> int:
        return int(self.conn.execute(f"SELECT count(*) FROM {self._q(table)}").fetchone()[0])

    def max_id(self, table: str, column: str) -> int:
        row = self.conn.execute(f"SELECT max({column}) FROM {self._q(table)}").fetchone()
        return int(row[0]) if row and row[0] is not None else 0

    def next_id(self, table: str, column: str) -> int:
        """The next id the store would hand out in ``table`` (past deleted rows where the engine remembers them:
        SQLite's ``AUTOINCREMENT`` counter, a PostgreSQL sequence)."""
        high = self.max_id(table, column)
        if self.backend == "sqlite":
            try:
                row = self.conn.execute("SELECT seq FROM sqlite_sequence WHERE name=?", (table,)).fetchone()
            except sqlite3.OperationalError:  # no AUTOINCREMENT table in this store
                row = None
            return max(high, int(row[0]) if row and row[0] is not None else 0) + 1
        seq = self.conn.execute("SELECT pg_get_serial_sequence(%s, %s)", (self._q(table), column)).fetchone()[0]
        if seq is None:
            return high + 1
        last, called = self.conn.execute(f"SELECT last_value, is_called FROM {seq}").fetchone()
        return max(high + 1, int(last) + 1 if called else int(last))

    def read(self, table: str, columns: Sequence[str], batch: int) -> Iterator[list[tuple[Any, ...]]]:
        """The rows of ``table`` in primary-key order, ``batch`` at a time (inside the caller's snapshot)."""
        key = self.primary_key(table)
        order = f" ORDER BY {', '.join(key)}" if key else ""
        sql = f"SELECT {', '.join(columns)} FROM {self._q(table)}{order}"
        if self.backend == "sqlite":
            cur = self.conn.execute(sql)
            while rows := cur.fetchmany(batch):
                yield rows
            return
        with self.conn.cursor(name=f"memext_migrate_{table}") as cur:
            cur.itersize = batch
            cur.execute(sql)
            while rows := cur.fetchmany(batch):
                yield rows

    def write(self, table: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
        if not rows:
            return
        cols = ", ".join(columns)
        if self.backend == "sqlite":
            self.conn.executemany(f"INSERT INTO {table}({cols}) VALUES({', '.join('?' * len(columns))})", rows)
            return
        with self.conn.cursor() as cur, cur.copy(f"COPY {self._q(table)} ({cols}) FROM STDIN") as copy:
            for row in rows:
                copy.write_row(row)


def _psycopg() -> Any:
    try:
        import psycopg
    except ImportError:
        from ..errors import MissingDependencyError

        raise MissingDependencyError("psycopg", "postgres", "the PostgreSQL backend") from None
    return psycopg


def _converter(pg_type: str, table: str, column: str) -> Callable[[Any], Any] | None:
    """How a SQLite value becomes a value of a PostgreSQL column (None: as it is). SQLite types loosely: an
    integral float in an INTEGER column is an integer; anything else that does not fit is an error."""
    def bad(v: Any) -> StoreError:
        return StoreError(f"cannot copy {table}.{column}: the source holds a {type(v).__name__} where PostgreSQL "
                          f"has {pg_type}; the source store is damaged or was written by a foreign tool")

    if pg_type in ("bigint", "integer", "smallint"):
        def to_int(v: Any) -> Any:
            if v is None or type(v) is int:
                return v
            if isinstance(v, float) and v.is_integer():
                return int(v)
            raise bad(v)
        return to_int
    if pg_type in ("double precision", "real", "numeric"):
        def to_float(v: Any) -> Any:
            if v is None or isinstance(v, float):
                return v
            if isinstance(v, int):
                return float(v)
            raise bad(v)
        return to_float
    if pg_type == "bytea":
        def to_bytes(v: Any) -> Any:
            if v is None or isinstance(v, bytes):
                return v
            if isinstance(v, (memoryview, bytearray)):
                return bytes(v)
            if isinstance(v, str):
                return v.encode("utf-8")
            raise bad(v)
        return to_bytes
    if pg_type == "text":
        def to_text(v: Any) -> Any:
            if v is None or isinstance(v, str):
                return v
            if isinstance(v, (int, float)):
                return str(v)
            raise bad(v)
        return to_text
    return None


def _topological(tables: Sequence[str], parents: Mapping[str, set[str]]) -> list[str]:
    """``tables`` with every table after the tables it references (``meta`` first, else by name)."""
    out: list[str] = []
    done: set[str] = set()
    pending = sorted(tables, key=lambda t: (t != "meta", t))
    while pending:
        ready = [t for t in pending if not (parents.get(t, set()) & set(pending)) - {t}]
        if not ready:  # a cycle: keep the name order (foreign keys are checked at the end on SQLite anyway)
            ready = pending[:1]
        for t in ready:
            out.append(t)
            done.add(t)
        pending = [t for t in pending if t not in done]
    return out


# -- the source: locked against writers, read in one snapshot --------------------------------------------------------
class _Source:
    def __init__(self, loc: StoreLocation) -> None:
        self.loc = loc
        self._lock_fd: int | None = None
        self.conn: Any = None
        self._tx: Any = None
        if loc.backend == "sqlite":
            self._open_sqlite()
        else:
            self._open_postgres()

    def _open_sqlite(self) -> None:
        directory = Path(self.loc.path)
        db = directory / DB_FILE
        if not db.is_file():
            raise InvalidArgumentError("source", self.loc.path, f"no memory-ext store in {self.loc.path} (no "
                                       f"{DB_FILE}); give a store directory or a postgresql:// DSN")
        lock = directory / LOCK_FILE
        if lock.exists():
            import fcntl

            fd = os.open(lock, os.O_RDONLY)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                from .sqlite import _lock_holder

                err = StoreLockedError(self.loc.path, _lock_holder(lock))
                err.args = (f"source store {self.loc.path!r} is open for writing in another process "
                            f"({_lock_holder(lock)}); stop it (close its engine) and run the migration again",)
                raise err from None
            self._lock_fd = fd
        self.conn = sqlite3.connect(f"{db.as_uri()}?mode=ro", uri=True, isolation_level=None,
                                    check_same_thread=False)
        self.conn.execute("BEGIN")  # one snapshot for every read (established by the first SELECT)

    def _open_postgres(self) -> None:
        psycopg = _psycopg()
        from .pg.truth import _lock_key, _redact

        try:
            self.conn = psycopg.connect(self.loc.path, autocommit=True)
        except psycopg.Error as exc:
            raise StoreError(f"cannot connect to PostgreSQL ({_redact(self.loc.path)}): {str(exc).strip()}"
                             ) from None
        has_meta = self.conn.execute("SELECT to_regclass(%s) IS NOT NULL", (f"{self.loc.schema}.meta",)).fetchone()
        if not has_meta or not has_meta[0]:
            self.close()
            raise InvalidArgumentError("source_schema", self.loc.schema, f"no memory-ext store in this schema of "
                                       f"{_redact(self.loc.path)}; give the schema the store was opened with "
                                       "(storage.postgres_schema, default memory_ext)")
        key = _lock_key(str(self.loc.schema))
        deadline = time.monotonic() + LOCK_WAIT_S
        while not self.conn.execute("SELECT pg_try_advisory_lock(%s)", (key,)).fetchone()[0]:
            if time.monotonic() > deadline:
                self.close()
                raise StoreError(f"source schema {self.loc.schema!r} stayed locked by a writer for "
                                 f"{LOCK_WAIT_S:.0f} s; stop the processes writing it and run the migration again")
            time.sleep(0.05)
        # held (session level) to the end: writers of other processes wait; then one repeatable-read snapshot
        from psycopg import IsolationLevel

        self.conn.isolation_level = IsolationLevel.REPEATABLE_READ
        self.conn.read_only = True
        self._tx = self.conn.transaction()
        self._tx.__enter__()

    def side(self) -> _Side:
        return _Side(self.loc.backend, self.conn, self.loc.schema)

    def end_snapshot(self) -> None:
        if self.loc.backend == "sqlite":
            self.conn.execute("COMMIT")
        elif self._tx is not None:
            self._tx.__exit__(None, None, None)
            self._tx = None

    def close(self) -> None:
        if self.conn is not None:
            try:
                if self._tx is not None:
                    self._tx.__exit__(None, None, None)
                self.conn.close()  # ends the session: its advisory lock goes with it
            finally:
                self.conn = None
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None


def _meta(side: _Side) -> dict[str, str]:
    return {str(k): str(v) for k, v in side.conn.execute(f"SELECT key, value FROM {side._q('meta')}").fetchall()}


def _data_rows(side: _Side) -> dict[str, int]:
    """Tables (other than ``meta``) that hold rows, with their counts; plus ``meta`` when it holds more than an
    empty store's keys."""
    out = {t: n for t in side.tables() if t != "meta" and (n := side.count(t))}
    extra = set(_meta(side)) - _META_KEYS_OF_AN_EMPTY_STORE if "meta" in side.tables() else set()
    if extra:
        out["meta"] = len(extra)
    return out


def _not_empty(loc: StoreLocation, rows: Mapping[str, int]) -> InvalidArgumentError:
    held = ", ".join(f"{t}: {n}" for t, n in sorted(rows.items())[:6])
    where = ("another directory (a new one is created)" if loc.backend == "sqlite"
             else "another schema (--to-schema NAME; a new one is created)")
    return InvalidArgumentError("target", str(loc), f"the target store {loc} is not empty ({held}); migrate "
                                f"into {where}, or remove this store first")


def _precheck_target(loc: StoreLocation) -> bool:
    """Refuse a target that holds data before anything is created; True when the PostgreSQL schema (or the
    SQLite directory) exists already."""
    if loc.backend == "sqlite":
        directory = Path(loc.path)
        if not directory.exists():
            return False
        if not directory.is_dir():
            raise InvalidArgumentError("target", loc.path, f"{loc.path} is a file; give a new directory")
        db = directory / DB_FILE
        if not db.is_file():
            if any(directory.iterdir()):
                raise InvalidArgumentError("target", loc.path, f"{loc.path} holds other files and no store; give "
                                           "a new or empty directory")
            return True
        conn = sqlite3.connect(f"{db.as_uri()}?mode=ro", uri=True)
        try:
            rows = _data_rows(_Side("sqlite", conn))
        finally:
            conn.close()
        if rows:
            raise _not_empty(loc, rows)
        return True
    psycopg = _psycopg()
    try:
        with psycopg.connect(loc.path, autocommit=True) as raw:
            pg = cast(Any, raw)
            exists = pg.execute("SELECT to_regnamespace(%s) IS NOT NULL", (loc.schema,)).fetchone()[0]
            side = _Side("postgres", pg, loc.schema)
            if exists and pg.execute("SELECT to_regclass(%s) IS NOT NULL", (f"{loc.schema}.meta",)).fetchone()[0]:
                rows = _data_rows(side)
                if rows:
                    raise _not_empty(loc, rows)
            elif exists and side.tables():
                raise InvalidArgumentError("target_schema", loc.schema, "the schema holds other tables and no "
                                           "memory-ext store; give a new schema (--to-schema NAME)")
            return bool(exists)
    except psycopg.Error as exc:
        from .pg.truth import _redact

        raise StoreError(f"cannot connect to PostgreSQL ({_redact(loc.path)}): {str(exc).strip()}") from None


def _open_target(loc: StoreLocation, cfg: EngineConfig) -> TruthStore:
    if loc.backend == "sqlite":
        return SqliteTruthStore(loc.path, dir_mode=cfg.storage.dir_mode, file_mode=cfg.storage.file_mode)
    from .pg.truth import PgTruthStore

    return PgTruthStore(loc.path, schema=str(loc.schema), pool_size=2)


def _drop_schema(loc: StoreLocation) -> None:
    import psycopg

    with psycopg.connect(loc.path, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA IF EXISTS {loc.schema} CASCADE")


# -- verification searches ---------------------------------------------------------------------------------------------
def _sample_queries(side: _Side, n: int) -> list[tuple[str, str, str]]:
    """``n`` queries ``(user_id, agent_id, text)`` made from stored turns, spread over the namespaces (round robin
    over at most ``n`` of them, turns evenly spaced in each)."""
    if n <= 0:
        return []
    spaces = side.conn.execute(
        f"SELECT n.ns_id, n.user_id, n.agent_id, count(t.tid) FROM {side._q('namespaces')} n JOIN {side._q('turns')} t"
        " ON t.ns_id = n.ns_id GROUP BY n.ns_id, n.user_id, n.agent_id ORDER BY n.ns_id").fetchall()
    if not spaces:
        return []
    step = max(1, len(spaces) / n)
    chosen = [spaces[int(i * step)] for i in range(min(n, len(spaces)))]
    per = {int(ns[0]): 0 for ns in chosen}
    total = 0
    while total < n:  # round robin; a namespace gives at most one query per turn
        grew = False
        for ns_id, _, _, turns in chosen:
            if total < n and per[int(ns_id)] < int(turns):
                per[int(ns_id)] += 1
                total += 1
                grew = True
        if not grew:
            break
    mark = "?" if side.backend == "sqlite" else "%s"
    out: list[tuple[str, str, str]] = []
    for ns_id, user, agent, turns in chosen:
        want = per[int(ns_id)]
        for j in range(want):
            offset = (j * int(turns)) // want + int(turns) // (2 * want)
            row = side.conn.execute(f"SELECT content FROM {side._q('turns')} WHERE ns_id={mark} ORDER BY seq"
                                    f" LIMIT 1 OFFSET {mark}", (ns_id, min(offset, int(turns) - 1))).fetchone()
            text = _query_text(str(row[0])) if row else ""
            if text:
                out.append((str(user), str(agent), text))
    return out


def _query_text(content: str) -> str:
    """A search query from a turn's text: its first words (or first characters of unspaced text)."""
    words = content.split()
    text = " ".join(words[:12]) if len(words) > 3 else content.strip()[:48]
    return text[:200]


def _compare_searches(source: MemoryEngine, target: MemoryEngine, queries: Sequence[tuple[str, str, str]]
                      ) -> tuple[int, list[str]]:
    from ..models import Namespace

    same, mismatches = 0, []
    for user, agent, text in queries:
        ns = Namespace(user, agent_id=agent or None)
        a = [item.id for item in source.search(text, ns, k=SEARCH_K).items]
        b = [item.id for item in target.search(text, ns, k=SEARCH_K).items]
        if a == b:
            same += 1
        else:
            mismatches.append(f"search {text[:32]!r} in {user}/{agent or '-'}: source {a}, target {b}")
    return same, mismatches


def _face_files(loc: StoreLocation) -> list[str]:
    """Files of faces beside a SQLite store (the LangGraph store's), which a migration does not carry."""
    if loc.backend != "sqlite":
        return []
    own = {DB_FILE, DB_FILE + "-wal", DB_FILE + "-shm", LOCK_FILE, "chroma"}
    return sorted(p.name for p in Path(loc.path).iterdir() if p.name not in own and not p.name.startswith("."))


# -- the migration -----------------------------------------------------------------------------------------------------
def migrate_store(source: str | os.PathLike[str] | StoreLocation, target: str | os.PathLike[str] | StoreLocation, *,
                  source_schema: str | None = None, target_schema: str | None = None,
                  config: EngineConfig | Mapping[str, Any] | str | os.PathLike[str] | None = None,
                  embedder: Embedder | str | None = None, samples: int = 20, batch_rows: int = BATCH_ROWS,
                  progress: bool | None = None) -> MigrationReport:
    """Copy the store at ``source`` into the empty store ``target`` (each a directory or a ``postgresql://`` DSN,
    with ``source_schema`` / ``target_schema`` for PostgreSQL) and verify the copy; see the module docstring.

    ``config``: an EngineConfig (or mapping / file) for both sides' engines — its storage keys other than the
    location apply (``dir_mode``, ``file_mode``, ``postgres_schema`` as the default schema). ``embedder``: the
    embedder of the verification searches (default: the store's own built-in; another than the one that built the
    store raises :class:`~memory_ext.errors.EmbedderMismatchError`). ``samples``: verification searches (0: counts
    only). ``progress``: the tqdm bar on stderr (None: only when stderr is a terminal).
    """
    from tqdm import tqdm

    from ..engine import MemoryEngine

    started = time.monotonic()
    cfg = EngineConfig.coerce(config if not isinstance(config, os.PathLike) else Path(config))
    src = source if isinstance(source, StoreLocation) else locate(source, source_schema, field="source", config=cfg)
    dst = target if isinstance(target, StoreLocation) else locate(target, target_schema, field="target", config=cfg)
    if src.identity() == dst.identity():
        raise InvalidArgumentError("target", str(dst), f"the target is the source store ({src}); give another "
                                   "directory or PostgreSQL schema (--to / --to-schema)")
    if batch_rows <= 0:
        raise InvalidArgumentError("batch_rows", batch_rows, "give a positive number of rows per batch")
    if samples < 0:
        raise InvalidArgumentError("samples", samples, "give 0 (counts only) or more verification searches")
    show = sys.stderr.isatty() if progress is None else progress
    warnings: list[str] = []
    with ExitStack() as stack:
        reader = _Source(src)
        stack.callback(reader.close)
        side = reader.side()
        meta = _meta(side)
        version = int(meta.get("schema_version", "0"))
        if version > SCHEMA_VERSION:
            raise SchemaVersionError(f"source {src} has schema version {version}, newer than this memory-ext "
                                     f"understands ({SCHEMA_VERSION}); upgrade memory-ext")
        if version < SCHEMA_VERSION:
            raise InvalidArgumentError("source", str(src), f"{src} has schema version {version}, older than this "
                                       f"memory-ext's ({SCHEMA_VERSION}); open it once for writing with this "
                                       "memory-ext (that upgrades it), then migrate")
        if "reindex_progress" in meta:
            raise InvalidArgumentError("source", str(src), f"a reindex of {src} has not finished; run "
                                       "`memext reindex` on it to the end, then migrate")
        source_engine: MemoryEngine | None = None
        if samples:  # opened before anything is written: a wrong embedder or a broken config fails here
            source_engine = MemoryEngine.open(src.path, config=src.engine_config(cfg), embedder=embedder,
                                              read_only=True)
            stack.callback(source_engine.close)
        elif embedder is not None and cfg.globals.vector_enabled and meta.get("embedder_id"):
            from ..embed import resolve_embedder
            from ..errors import EmbedderMismatchError

            given = resolve_embedder(embedder)[0].id
            if given != meta["embedder_id"]:
                raise EmbedderMismatchError(meta["embedder_id"], given)
        warnings += [f"{name}: a face's file beside the source store, not migrated (the face keeps its own data; "
                     "copy or rebuild it by hand)" for name in _face_files(src)]

        existed = _precheck_target(dst)
        new_dir = NewDirectory(dst.path) if dst.backend == "sqlite" else None
        made = [] if dst.backend != "sqlite" or (Path(dst.path) / DB_FILE).exists() else \
            [Path(dst.path) / name for name in (DB_FILE, DB_FILE + "-wal", DB_FILE + "-shm", LOCK_FILE)]
        try:
            store = _open_target(dst, cfg)
        except BaseException:
            if new_dir is not None:
                new_dir.undo()
            raise
        committed = False

        def cleanup() -> None:
            store.close()
            if committed:
                return
            if new_dir is not None:
                new_dir.undo()
                for path in made:  # the files it created in an existing empty directory
                    path.unlink(missing_ok=True)
            elif not existed:
                _drop_schema(dst)

        stack.callback(cleanup)
        _create_index_tables(store, dst, cfg)
        stack.enter_context(store.write_lock)  # held to the end of the verification

        tables = [t for t in side.tables() if not _derived_vector_table(t)]
        counts = {t: side.count(t) for t in tables}
        queries = _sample_queries(side, samples)
        mismatches: list[str] = []
        vectors_built: dict[str, int] = {}
        sequences: dict[str, int] = {}
        with store.transaction("migrate") as tconn, \
                tqdm(total=sum(counts.values()), unit="row", desc="migrate", file=sys.stderr, disable=not show) as bar:
            out = _Side(dst.backend, cast(Any, tconn).raw if dst.backend == "postgres" else tconn, dst.schema)
            held = _data_rows(out)
            if held:
                raise _not_empty(dst, held)
            target_tables = set(out.tables())
            missing = [t for t in tables if t not in target_tables]
            if missing:
                raise StoreError(f"the target has no table {', '.join(missing)}: the source holds tables this "
                                 "memory-ext does not create; migrate with the memory-ext version that wrote it")
            order = _topological(tables, {t: out.parents(t) for t in tables})
            out.conn.execute(f"DELETE FROM {out._q('meta')}")  # the source's schema_version, store_id, embedder
            vectors = _VectorFill(tconn, cfg, meta) if dst.backend == "postgres" else None
            for table in order:
                columns = list(side.columns(table))
                theirs = out.columns(table)
                unknown = [c for c in columns if c not in theirs]
                if unknown:
                    raise StoreError(f"the target's table {table} has no column {', '.join(unknown)}; migrate with "
                                     "the memory-ext version that wrote the source")
                convert = ([_converter(theirs[c], table, c) for c in columns] if dst.backend == "postgres"
                           else [None] * len(columns))
                bar.set_postfix_str(table)
                for rows in side.read(table, columns, batch_rows):
                    if any(convert):
                        rows = [tuple(v if f is None else f(v) for f, v in zip(convert, row, strict=True))
                                for row in rows]
                    out.write(table, columns, rows)
                    if vectors is not None and table == "embeddings":
                        vectors.add(columns, rows)
                    bar.update(len(rows))
            if vectors is not None:
                vectors_built = vectors.finish()
                warnings += vectors.warnings
            sequences = _reset_ids(side, out, tables)
            for table in order:
                got = out.count(table)
                if got != counts[table]:
                    mismatches.append(f"table {table}: {counts[table]} rows in the source, {got} in the target")
            if mismatches:
                raise StoreError("the copy is incomplete (" + "; ".join(mismatches) + "); nothing was written")
            if dst.backend == "sqlite":
                problems = out.conn.execute("PRAGMA foreign_key_check").fetchall()
                if problems:
                    raise StoreError(f"the copy breaks {len(problems)} foreign key(s) (first: {problems[0]}); "
                                     "nothing was written")
        committed = True
        reader.end_snapshot()

        same, namespaces = 0, len({(u, a) for u, a, _ in queries})
        if queries and source_engine is not None:
            target_engine = MemoryEngine.open(dst.path, config=dst.engine_config(cfg), embedder=source_engine.embedder,
                                              read_only=True)
            with target_engine:
                same, differ = _compare_searches(source_engine, target_engine, queries)
            mismatches += differ
        return MigrationReport(source=str(src), target=str(dst), store_id=meta.get("store_id", ""),
                               rows={t: counts[t] for t in order}, vectors_built=vectors_built, sequences=sequences,
                               namespaces_searched=namespaces, searches=len(queries), searches_same=same,
                               mismatches=mismatches, warnings=warnings,
                               seconds=round(time.monotonic() - started, 3))
    raise AssertionError("unreachable")  # pragma: no cover


def _create_index_tables(store: TruthStore, loc: StoreLocation, cfg: EngineConfig) -> None:
    """Every derived index's tables on the new target (as an engine's open makes them; vectors apart)."""
    from ..assembly import build_indexes

    target_cfg = loc.engine_config(cfg).model_dump(exclude_unset=True)
    target_cfg["globals"] = {**target_cfg.get("globals", {}), "vector_enabled": False}
    target_cfg["storage"]["vector_backend"] = "numpy"
    build_indexes(EngineConfig.coerce(target_cfg), store, None)


def _reset_ids(source: _Side, target: _Side, tables: Sequence[str]) -> dict[str, int]:
    """Make the target hand out new ids past the copied ones (and past the source's own high-water mark): a
    PostgreSQL identity sequence is set with ``setval``, a SQLite ``AUTOINCREMENT`` counter in ``sqlite_sequence``.
    Returns ``table.column -> next id`` of the PostgreSQL sequences."""
    out: dict[str, int] = {}
    for table in tables:
        column = target.id_column(table)
        if column is None:
            continue
        own = source.id_column(table)
        nxt = max(target.max_id(table, column) + 1, source.next_id(table, own) if own == column else 1)
        if target.backend == "postgres":
            seq = target.conn.execute("SELECT pg_get_serial_sequence(%s, %s)",
                                      (f"{target.schema}.{table}", column)).fetchone()[0]
            if seq is not None:
                target.conn.execute("SELECT setval(%s, %s, false)", (seq, nxt))
                out[f"{table}.{column}"] = nxt
        else:
            ddl = target.conn.execute("SELECT sql FROM sqlite_master WHERE type='table' AND name=?",
                                      (table,)).fetchone()
            if ddl and "AUTOINCREMENT" in str(ddl[0]).upper() and nxt > 1:
                target.conn.execute("DELETE FROM sqlite_sequence WHERE name=?", (table,))
                target.conn.execute("INSERT INTO sqlite_sequence(name, seq) VALUES(?, ?)", (table, nxt - 1))
    return out


class _VectorFill:
    """The pgvector table of a PostgreSQL target, filled from the ``embeddings`` rows as they are copied."""

    def __init__(self, conn: Any, cfg: EngineConfig, meta: Mapping[str, str]) -> None:
        self.conn = conn
        self.embedder_id = meta.get("embedder_id")
        self.dim = int(meta["embedder_dim"]) if meta.get("embedder_dim", "").isdigit() else None
        self.skipped = 0
        self.warnings: list[str] = []
        self.index: Any = None
        if self.embedder_id is not None and self.dim:
            from .pg.vector import PgVectorIndex

            storage = cfg.storage.model_copy(update={"backend": "postgres"})
            self.index = PgVectorIndex(storage=storage, dim=self.dim)
            self.index.create_schema(conn)  # the table; the HNSW indexes are built at the end (far faster than
            # row by row), one per namespace past exact_max

    def add(self, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
        import numpy as np

        from .pg.vector import vector_literal

        at = {c: i for i, c in enumerate(columns)}
        keep = []
        for row in rows:
            if self.index is None or row[at["dim"]] != self.dim or row[at["embedder_id"]] != self.embedder_id:
                self.skipped += 1
                continue
            keep.append((row[at["rid"]], row[at["ns_id"]],
                         vector_literal(np.frombuffer(row[at["vector"]], dtype=np.float32))))
        if keep:
            with self.conn.raw.cursor() as cur, cur.copy(f"COPY {self.index.table} (rid, ns_id, embedding) FROM STDIN"
                                                         ) as copy:
                for row in keep:
                    copy.write_row(row)

    def finish(self) -> dict[str, int]:
        if self.skipped:
            self.warnings.append(f"{self.skipped} embeddings of another embedder or dimension than the store's "
                                 f"({self.embedder_id}, {self.dim}) were copied but not put in the pgvector index")
        if self.index is None:
            return {}
        table = self.index.table
        self.conn.raw.execute("SET LOCAL maintenance_work_mem = '256MB'")
        self.conn.raw.execute(f"INSERT INTO {self.index.counts}(ns_id, n) SELECT ns_id, count(*) FROM {table}"
                              " GROUP BY ns_id")
        self.index.create_schema(self.conn)  # builds the HNSW index of every namespace past exact_max
        n = self.conn.raw.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
        return {table: int(n)}
