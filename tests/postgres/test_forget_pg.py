"""Forgetting on PostgreSQL leaves no copy of the text in any table or index the engine owns: not in a row (every
text, bytea and json column of every table of the schema is searched), and not in the relation files on disk
(after a ``CHECKPOINT``, the files of every table, index, TOAST table and TOAST index of the schema are scanned for
the marker's bytes — found there before the forget, which proves the scan sees them, and gone after it)."""

from __future__ import annotations

import base64
import os
import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from memory_ext import MemoryEngine, Namespace, Turn
from tests.conftest import CONVERSATIONS, make_turns

pytestmark = pytest.mark.postgres

psycopg = pytest.importorskip("psycopg")


@dataclass(frozen=True)
class Marks:
    short: str
    """In a short turn (stored inline), in its session id and its external id (so in index keys too)."""
    toasted: str
    """In a long, incompressible turn (stored out of line, in the table's TOAST relation)."""
    session: str

    @property
    def all(self) -> tuple[str, str]:
        return self.short, self.toasted


def _fill(engine: MemoryEngine) -> Marks:
    marks = Marks(short="qzv" + secrets.token_hex(8), toasted="tqx" + secrets.token_hex(8),
                  session="s-" + secrets.token_hex(4))
    noise = base64.b64encode(secrets.token_bytes(6000)).decode()  # pglz cannot shrink it: stored as written
    for user in CONVERSATIONS:
        engine.add_turns(make_turns(user), user)
    engine.add_turns([
        Turn(role="user", speaker="Ana", content=f"My locker code at the gym is {marks.short}, keep it safe",
             session_id=f"{marks.session}-{marks.short}", external_id=f"ext-{marks.short}"),
        Turn(role="user", speaker="Ana", content=f"{noise[:3000]} {marks.toasted} {noise[3000:]}",
             session_id=f"{marks.session}-{marks.short}", external_id=f"ext2-{marks.short}"),
    ], "ana")
    engine.add_turns([Turn(role="user", speaker="Ben", content="Ben keeps his bike in the hallway")], "ben")
    engine.flush()
    return marks


@pytest.fixture
def engine(postgres_dsn: str, pg_schema: str) -> Iterator[MemoryEngine]:
    eng = MemoryEngine.open(postgres_dsn, config={"storage": {"backend": "postgres", "postgres_schema": pg_schema}},
                            embedder="hashing")
    try:
        yield eng
    finally:
        eng.close()


@pytest.fixture
def admin(postgres_dsn: str) -> Iterator[Any]:
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        if not conn.execute("SELECT rolsuper FROM pg_roles WHERE rolname = current_user").fetchone()[0]:
            pytest.skip("the disk scan needs a superuser (CHECKPOINT, data_directory)")
        data_dir = Path(conn.execute("SHOW data_directory").fetchone()[0])
        if not os.access(data_dir, os.R_OK | os.X_OK):
            pytest.skip(f"the server's data directory {data_dir} is not readable here (a remote server?)")
        yield conn


def rows_with(conn: Any, schema: str, marker: str) -> list[str]:
    """``table.column`` of every row of the schema whose text, bytea or json value contains ``marker``."""
    found = []
    for table, column, kind in conn.execute(
            "SELECT c.table_name, c.column_name, c.data_type FROM information_schema.columns c"
            " JOIN information_schema.tables t ON t.table_schema = c.table_schema AND t.table_name = c.table_name"
            " WHERE c.table_schema = %s AND t.table_type = 'BASE TABLE' AND c.data_type IN ('text',"
            " 'character varying', 'character', 'bytea', 'json', 'jsonb')", (schema,)).fetchall():
        test = (f'position(%s::bytea in "{column}") > 0' if kind == "bytea" else f'strpos("{column}"::text, %s) > 0')
        value = marker.encode() if kind == "bytea" else marker
        if conn.execute(f'SELECT count(*) FROM {schema}."{table}" WHERE {test}', (value,)).fetchone()[0]:
            found.append(f"{table}.{column}")
    return found


def relation_files(conn: Any, schema: str) -> dict[str, list[Path]]:
    """Every relation of the schema — tables, their indexes, their TOAST tables and TOAST indexes — -> its files."""
    data_dir = Path(conn.execute("SHOW data_directory").fetchone()[0])
    rels = conn.execute(
        "WITH own AS (SELECT c.oid FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
        "             WHERE n.nspname = %s AND c.relkind IN ('r', 'm', 'p')),"
        " toast AS (SELECT c.reltoastrelid AS oid FROM pg_class c JOIN own ON own.oid = c.oid"
        "           WHERE c.reltoastrelid <> 0),"
        " tabs AS (SELECT oid FROM own UNION SELECT oid FROM toast)"
        " SELECT c.relname, pg_relation_filepath(c.oid) FROM pg_class c JOIN tabs ON tabs.oid = c.oid"
        " UNION ALL SELECT i.relname, pg_relation_filepath(i.oid) FROM pg_index x JOIN tabs ON tabs.oid = x.indrelid"
        " JOIN pg_class i ON i.oid = x.indexrelid", (schema,)).fetchall()
    out: dict[str, list[Path]] = {}
    for name, path in rels:
        if path is None:
            continue
        base = data_dir / path
        out[name] = [base, *sorted(base.parent.glob(base.name + ".[0-9]*"))]  # 1 GB segments
    assert any(name.startswith("pg_toast_") for name in out) and "turns" in out and "turns_ns_session" in out
    return out


def files_with(conn: Any, schema: str, marker: str) -> list[str]:
    """The relations of the schema whose files hold ``marker``'s bytes, after a checkpoint wrote every page."""
    conn.execute("CHECKPOINT")
    needle = marker.encode()
    return sorted({name for name, paths in relation_files(conn, schema).items()
                   for path in paths if path.exists() and needle in path.read_bytes()})


def _forget(engine: MemoryEngine, how: str, marks: Marks) -> Any:
    if how == "namespace":
        return engine.forget("ana")
    if how == "session":
        return engine.forget(Namespace("ana", session_id=f"{marks.session}-{marks.short}"))
    if how == "delete":  # by external id (issue 22 §4)
        return engine.delete("ana", [f"ext-{marks.short}", f"ext2-{marks.short}"])
    ids = {item.id for mark in marks.all for item in engine.search(mark, "ana", k=20).items if mark in item.text}
    assert ids
    return engine.forget("ana", record_ids=sorted(ids))


@pytest.mark.parametrize("how", ["namespace", "session", "records", "delete"])
def test_forget_leaves_no_copy_in_rows_or_files(engine: MemoryEngine, admin: Any, pg_schema: str, how: str) -> None:
    marks = _fill(engine)
    before = {mark: files_with(admin, pg_schema, mark) for mark in marks.all}
    assert {"turns", "turns_ns_session", "turns_ns_external"} <= set(before[marks.short])
    assert any(name.startswith("pg_toast_") for name in before[marks.toasted])
    assert rows_with(admin, pg_schema, marks.short) and rows_with(admin, pg_schema, marks.toasted)

    receipt = _forget(engine, how, marks)
    assert receipt.turns >= 2 and receipt.purge_complete and receipt.pending_purge == ()

    # a delete keeps the memory's history: its key (the external id) and session id, no text (here both hold
    # the short mark, to put it in index keys)
    kept = {"memory_history.memory_key", "memory_history.session_id"} if how == "delete" else set()
    for mark in marks.all:
        assert set(rows_with(admin, pg_schema, mark)) - kept == set()
        assert [f for f in files_with(admin, pg_schema, mark) if not (kept and f.startswith("memory_history"))] == []
    # what was not forgotten is still there
    assert engine.search("marathon Berlin", "ben", k=1).items
    assert bool(engine.search("beagle Toby", "ana", k=1).items) is (how != "namespace")


def test_a_snapshot_held_elsewhere_leaves_the_purge_pending_until_it_ends(engine: MemoryEngine, admin: Any,
                                                                           postgres_dsn: str, pg_schema: str) -> None:
    marks = _fill(engine)
    with psycopg.connect(postgres_dsn, autocommit=True) as other:  # e.g. a report in another process, mid-read
        other.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
        assert other.execute(f"SELECT count(*) FROM {pg_schema}.turns").fetchone()[0] > 0

        receipt = engine.forget("ana")
        assert receipt.turns == len(CONVERSATIONS["ana"]) + 2
        assert not receipt.purge_complete and receipt.pending_purge == ("postgres:dead-row-versions",)
        assert engine._store.purge_pending
        assert rows_with(admin, pg_schema, marks.short) == []  # gone for every new reader at once
        assert engine.purge() == ("postgres:dead-row-versions",)  # still held
        engine.add_turns([Turn(role="user", speaker="Ben", content="Ben repaired the bike's brakes")], "ben")
        assert engine._store.purge_pending  # the retry after that write could not finish either

        # the old snapshot still reads the forgotten rows: PostgreSQL must keep them
        assert other.execute(f"SELECT count(*) FROM {pg_schema}.turns WHERE strpos(content, %s) > 0",
                             (marks.short,)).fetchone()[0] == 1
        other.execute("COMMIT")

    assert engine.purge() == ()
    assert not engine._store.purge_pending
    for mark in marks.all:
        assert rows_with(admin, pg_schema, mark) == []
        assert files_with(admin, pg_schema, mark) == []


def test_a_snapshot_taken_after_the_forget_does_not_hold_it(engine: MemoryEngine, admin: Any, postgres_dsn: str,
                                                             pg_schema: str) -> None:
    """Only sessions that may still see the forgotten rows delay the purge; later readers do not."""
    marks = _fill(engine)
    with psycopg.connect(postgres_dsn, autocommit=True) as other:
        engine.forget("ben")  # an earlier forget: the snapshot below is newer than it
        other.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
        other.execute(f"SELECT count(*) FROM {pg_schema}.records").fetchone()
        receipt = engine.forget(Namespace("ana", session_id=f"{marks.session}-{marks.short}"))
        assert not receipt.purge_complete  # this snapshot predates this forget
        other.execute("COMMIT")
        other.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
        other.execute("SELECT 1").fetchone()
        assert engine.purge() == ()  # a snapshot taken after the forget cannot see the forgotten rows
        other.execute("COMMIT")
    for mark in marks.all:
        assert files_with(admin, pg_schema, mark) == []


def test_a_lock_held_elsewhere_delays_the_rewrite_without_stalling_forget(engine: MemoryEngine, admin: Any,
                                                                         postgres_dsn: str, pg_schema: str) -> None:
    """A transaction that holds a table's lock (but no old snapshot) makes the rewrite wait at most its bounded
    lock wait: forget returns, the purge stays pending, and completes once the lock is gone."""
    marks = _fill(engine)
    with psycopg.connect(postgres_dsn, autocommit=True) as other:
        other.execute("BEGIN")  # read committed: no snapshot is kept between statements, the lock is
        other.execute(f"LOCK TABLE {pg_schema}.turns IN ACCESS SHARE MODE")
        receipt = engine.forget(Namespace("ana", session_id=f"{marks.session}-{marks.short}"))
        assert receipt.turns == 2 and not receipt.purge_complete
        assert engine.search("beagle Toby", "ana", k=1).items  # readers are not queued behind the rewrite
        other.execute("COMMIT")
    assert engine.purge() == ()
    for mark in marks.all:
        assert files_with(admin, pg_schema, mark) == []


def test_any_process_of_the_store_finishes_a_pending_purge(engine: MemoryEngine, admin: Any, postgres_dsn: str,
                                                           pg_schema: str) -> None:
    marks = _fill(engine)
    with psycopg.connect(postgres_dsn, autocommit=True) as other:
        other.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
        other.execute(f"SELECT count(*) FROM {pg_schema}.turns").fetchone()
        assert not engine.forget("ana").purge_complete
        other.execute("COMMIT")
    assert admin.execute(f"SELECT count(*) FROM {pg_schema}.meta WHERE key = 'pg_purge_pending'").fetchone()[0] == 1
    # another engine on the same schema (another host, or the next start) finishes it when it opens
    with MemoryEngine.open(postgres_dsn, config={"storage": {"backend": "postgres", "postgres_schema": pg_schema}},
                           embedder="hashing") as second:
        assert not second._store.purge_pending
    assert admin.execute(f"SELECT count(*) FROM {pg_schema}.meta WHERE key = 'pg_purge_pending'").fetchone()[0] == 0
    for mark in marks.all:
        assert files_with(admin, pg_schema, mark) == []
    assert engine.purge() == ()


@pytest.fixture
def plain_owner(postgres_dsn: str) -> Iterator[str]:
    """The DSN of a new login role that is no superuser but may create schemas: the engine's role in production."""
    import uuid

    name = "eng_" + uuid.uuid4().hex[:10]
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute(f"CREATE ROLE {name} LOGIN NOSUPERUSER")
        conn.execute(f"GRANT CREATE ON DATABASE {conn.info.dbname} TO {name}")
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
    yield psycopg.conninfo.make_conninfo(postgres_dsn, user=name)
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute(f"DROP OWNED BY {name} CASCADE")
        conn.execute(f"DROP ROLE {name}")


def test_a_plain_engine_role_sees_the_snapshots_of_other_roles(plain_owner: str, admin: Any, postgres_dsn: str,
                                                                pg_schema: str) -> None:
    """PostgreSQL hides most of another role's session from a role without ``pg_read_all_stats``; the purge
    must still see that the session holds an old snapshot."""
    with MemoryEngine.open(config={"storage": {"backend": "postgres", "postgres_schema": pg_schema,
                                               "postgres_dsn": plain_owner}}, embedder="hashing") as engine:
        marks = _fill(engine)
        with psycopg.connect(postgres_dsn, autocommit=True) as other:  # the superuser: another role
            other.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
            other.execute("SELECT 1").fetchone()  # a snapshot, and no lock on any table of the store
            receipt = engine.forget("ana")
            assert not receipt.purge_complete
            assert other.execute(f"SELECT count(*) FROM {pg_schema}.turns WHERE strpos(content, %s) > 0",
                                 (marks.short,)).fetchone()[0] == 1  # why the rows had to stay
            other.execute("COMMIT")
        assert engine.purge() == ()
    for mark in marks.all:
        assert rows_with(admin, pg_schema, mark) == []
        assert files_with(admin, pg_schema, mark) == []
