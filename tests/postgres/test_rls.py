"""Row-level security (``storage.postgres_rls``): a connection scoped to one user reads only that user's rows, even
with hand-written SQL; unscoped it reads nothing; the engine (the tables' owner) works as before."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from memory_ext import MemoryEngine, Turn
from memory_ext.errors import ConfigError
from tests.conftest import CONVERSATIONS, make_turns

pytestmark = pytest.mark.postgres

psycopg = pytest.importorskip("psycopg")


def _open(dsn: str, schema: str, **storage: Any) -> MemoryEngine:
    return MemoryEngine.open(config={"storage": {"backend": "postgres", "postgres_dsn": dsn, "postgres_schema": schema,
                                                 "postgres_rls": True, **storage}}, embedder="hashing")


@pytest.fixture
def filled_rls(postgres_dsn: str, pg_schema: str) -> Iterator[MemoryEngine]:
    engine = _open(postgres_dsn, pg_schema)
    try:
        for user in CONVERSATIONS:
            engine.add_turns(make_turns(user), user)
        engine.flush()
        yield engine
    finally:
        engine.close()


@pytest.fixture
def make_role(postgres_dsn: str) -> Iterator[Any]:
    """``make_role()`` -> a new LOGIN role (no superuser, no BYPASSRLS), dropped after the test."""
    made: list[str] = []

    def make() -> str:
        name = "r_" + uuid.uuid4().hex[:10]
        with psycopg.connect(postgres_dsn, autocommit=True) as conn:
            conn.execute(f"CREATE ROLE {name} LOGIN NOSUPERUSER NOBYPASSRLS")
        made.append(name)
        return name

    yield make
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        for name in reversed(made):
            conn.execute(f"DROP OWNED BY {name} CASCADE")
            conn.execute(f"DROP ROLE {name}")


def _as(dsn: str, role: str, schema: str) -> Any:
    conn = psycopg.connect(psycopg.conninfo.make_conninfo(dsn, user=role), autocommit=True)
    conn.execute(f"SET search_path TO {schema}, public")
    return conn


def _ns_tables(conn: Any, schema: str) -> list[str]:
    return [t for (t,) in conn.execute(
        "SELECT table_name FROM information_schema.columns WHERE table_schema = %s AND column_name = 'ns_id'"
        " ORDER BY table_name", (schema,)).fetchall()]


def _ns_ids(conn: Any, schema: str, user: str) -> list[int]:
    return [r for (r,) in conn.execute(f"SELECT ns_id FROM {schema}.namespaces WHERE user_id = %s", (user,))]


def _owner_counts(dsn: str, schema: str, user: str) -> dict[str, int]:
    """Rows of ``user`` in every table with a namespace column, counted by the owner (no policy applies)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        ns = _ns_ids(conn, schema, user)
        return {t: conn.execute(f"SELECT count(*) FROM {schema}.{t} WHERE ns_id = ANY(%s)", (ns,)).fetchone()[0]
                for t in _ns_tables(conn, schema)}


def _visible_counts(conn: Any, tables: list[str]) -> dict[str, int]:
    return {t: conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in tables}


def test_every_user_table_has_row_level_security(filled_rls: MemoryEngine, postgres_dsn: str,
                                                 pg_schema: str) -> None:
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        tables = _ns_tables(conn, pg_schema)
        # the truth store and every derived index: the check below covers them all
        for expected in ("namespaces", "turns", "records", "embeddings", "files", "claims", "memory_history",
                         "kw_docs", "kw_stats", "graph_entities", "graph_postings", "graph_edges", "time_spans",
                         "evidence_nodes", "sparse_vectors", "index_queue", "pgvector_d256", "pgvector_d256_counts"):
            assert expected in tables
        secured = {t for (t,) in conn.execute(
            "SELECT c.relname FROM pg_class c JOIN pg_namespace s ON s.oid = c.relnamespace"
            " WHERE s.nspname = %s AND c.relrowsecurity", (pg_schema,))}
        with_policy = {t for (t,) in conn.execute(
            "SELECT tablename FROM pg_policies WHERE schemaname = %s", (pg_schema,))}
        assert set(tables) | {"file_turns"} <= secured & with_policy
        unsecured = {t for (t,) in conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = %s",
                                                (pg_schema,))} - secured
        assert unsecured == {"meta"}  # schema version, store id, embedder id: no user's data


def test_a_reader_sees_only_the_user_it_names(filled_rls: MemoryEngine, postgres_dsn: str, pg_schema: str,
                                              make_role: Any) -> None:
    from memory_ext.store.pg.rls import grant_reader

    role = make_role()
    with psycopg.connect(postgres_dsn, autocommit=True) as owner:
        grant_reader(owner, pg_schema, role)
        tables = _ns_tables(owner, pg_schema)
        ns_of = {u: set(_ns_ids(owner, pg_schema, u)) for u in CONVERSATIONS}
    expected = {u: _owner_counts(postgres_dsn, pg_schema, u) for u in ("ana", "ben")}
    assert expected["ana"]["turns"] == len(CONVERSATIONS["ana"]) and expected["ana"]["pgvector_d256"] > 0
    with _as(postgres_dsn, role, pg_schema) as conn:
        # unset: nothing, in any table
        assert sum(_visible_counts(conn, [*tables, "file_turns"]).values()) == 0
        for user, other in (("ana", "ben"), ("ben", "ana")):
            conn.execute(f"SET memory_ext.user_id = '{user}'")
            assert _visible_counts(conn, tables) == expected[user]  # every row of the user, none of another
            contents = {c for (c,) in conn.execute("SELECT content FROM turns")}
            assert contents == {c for _, _, c in CONVERSATIONS[user]}
            assert [u for (u,) in conn.execute("SELECT user_id FROM namespaces")] == [user]
            # hand-written SQL that forgets the namespace: joins, the vectors, the keyword and graph indexes
            joined = conn.execute("SELECT DISTINCT t.ns_id FROM turns t JOIN records r ON r.ns_id = t.ns_id"
                                  " JOIN embeddings e ON e.rid = r.rid").fetchall()
            assert {n for (n,) in joined} == ns_of[user]
            for table in ("records", "pgvector_d256", "kw_docs", "graph_entities", "time_spans", "files"):
                seen = {n for (n,) in conn.execute(f"SELECT DISTINCT ns_id FROM {table}")}
                assert seen <= ns_of[user] and not seen & ns_of[other], table
            assert conn.execute("SELECT count(*) FROM turns WHERE ns_id = ANY(%s)",
                                (sorted(ns_of[other]),)).fetchone()[0] == 0
            near = conn.execute("SELECT ns_id FROM pgvector_d256 ORDER BY embedding <=> (SELECT embedding FROM"
                                " pgvector_d256 LIMIT 1) LIMIT 100").fetchall()
            assert {n for (n,) in near} <= ns_of[user]
            members = conn.execute("SELECT count(*) FROM file_turns ft JOIN turns t ON t.tid = ft.tid").fetchone()
            assert members[0] == conn.execute("SELECT count(*) FROM file_turns").fetchone()[0] > 0
        conn.execute("RESET memory_ext.user_id")
        assert sum(_visible_counts(conn, [*tables, "file_turns"]).values()) == 0
        conn.execute("SET memory_ext.user_id = ''")
        assert conn.execute("SELECT count(*) FROM turns").fetchone()[0] == 0
        # per transaction: set_config(..., true) ends with the transaction
        with conn.transaction():
            conn.execute("SELECT set_config('memory_ext.user_id', 'chen', true)")
            assert [u for (u,) in conn.execute("SELECT user_id FROM namespaces")] == ["chen"]
        assert conn.execute("SELECT count(*) FROM turns").fetchone()[0] == 0
        # read only: no write, not even into its own namespace
        conn.execute("SET memory_ext.user_id = 'ana'")
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("DELETE FROM turns")
    with _as(postgres_dsn, role, pg_schema) as fresh:  # a new session starts unscoped
        assert fresh.execute("SELECT count(*) FROM records").fetchone()[0] == 0


def test_a_pinned_reader_cannot_name_another_user(filled_rls: MemoryEngine, postgres_dsn: str, pg_schema: str,
                                                  make_role: Any) -> None:
    from memory_ext.store.pg.rls import grant_reader, revoke_reader

    role = make_role()
    with psycopg.connect(postgres_dsn, autocommit=True) as owner:
        grant_reader(owner, pg_schema, role, user_id="chen")
    chen = _owner_counts(postgres_dsn, pg_schema, "chen")
    with _as(postgres_dsn, role, pg_schema) as conn:
        tables = list(chen)
        assert _visible_counts(conn, tables) == chen
        conn.execute("SET memory_ext.user_id = 'ana'")
        assert _visible_counts(conn, tables) == chen
        assert conn.execute("SELECT role_name, user_id FROM rls_roles").fetchall() == [(role, "chen")]
    with psycopg.connect(postgres_dsn, autocommit=True) as owner:
        revoke_reader(owner, pg_schema, role)
    with _as(postgres_dsn, role, pg_schema) as conn, \
            pytest.raises((psycopg.errors.InsufficientPrivilege, psycopg.errors.UndefinedTable)):
        conn.execute("SELECT count(*) FROM turns")  # no USAGE on the schema: its tables are not even found


def test_tables_an_index_creates_later_are_covered(filled_rls: MemoryEngine, postgres_dsn: str, pg_schema: str,
                                                   make_role: Any) -> None:
    from memory_ext.store.pg.rls import grant_reader

    role = make_role()
    with psycopg.connect(postgres_dsn, autocommit=True) as owner:
        grant_reader(owner, pg_schema, role)
    store = filled_rls._store
    store.add_schema(lambda conn: conn.execute("CREATE TABLE IF NOT EXISTS later_index(ns_id INTEGER NOT NULL,"
                                               " note TEXT NOT NULL)"))
    with psycopg.connect(postgres_dsn, autocommit=True) as owner:
        for user in CONVERSATIONS:
            for ns in _ns_ids(owner, pg_schema, user):
                owner.execute(f"INSERT INTO {pg_schema}.later_index VALUES(%s, %s)", (ns, f"note of {user}"))
    with _as(postgres_dsn, role, pg_schema) as conn:  # granted by default privileges, filtered by its policy
        assert conn.execute("SELECT count(*) FROM later_index").fetchone()[0] == 0
        conn.execute("SET memory_ext.user_id = 'ben'")
        assert [n for (n,) in conn.execute("SELECT note FROM later_index")] == ["note of ben"]


def test_the_engine_works_with_rls_on(filled_rls: MemoryEngine, postgres_dsn: str, pg_schema: str) -> None:
    engine = filled_rls
    assert engine.search("beagle Toby", "ana", k=3).items
    engine.add_turns([Turn(role="user", speaker="Ana", content="I repainted my kitchen a bright yellow")], "ana")
    engine.flush()
    hits = engine.search("kitchen yellow", "ana", k=2)
    assert hits.items and "kitchen" in hits.items[0].text
    assert all("kitchen" not in i.text for i in engine.search("kitchen yellow", "ben", k=5).items)
    receipt = engine.forget("ana", record_ids=[hits.items[0].id])
    assert receipt.turns == 1
    assert all("kitchen" not in i.text for i in engine.search("kitchen yellow", "ana", k=5).items)
    receipt = engine.forget("ben")
    assert receipt.turns == len(CONVERSATIONS["ben"]) and not engine.search("marathon", "ben", k=3).items
    engine.close()
    # reopened without the setting: row-level security stays on (it is removed only by disable_rls)
    with MemoryEngine.open(postgres_dsn, config={"storage": {"backend": "postgres", "postgres_schema": pg_schema}},
                           embedder="hashing") as again:
        assert again._store.rls
        assert again.search("Porto bakery", "ana", k=2).items


def test_grant_reader_refuses_roles_that_bypass_policies(filled_rls: MemoryEngine, postgres_dsn: str,
                                                         pg_schema: str, make_role: Any) -> None:
    from memory_ext.store.pg.rls import disable_rls, grant_reader, rls_enabled

    with psycopg.connect(postgres_dsn, autocommit=True) as owner:
        superuser = owner.execute("SELECT current_user").fetchone()[0]
        with pytest.raises(ConfigError, match="superuser or BYPASSRLS"):
            grant_reader(owner, pg_schema, superuser)
        with pytest.raises(ConfigError, match="create it first"):
            grant_reader(owner, pg_schema, "no_such_role_" + uuid.uuid4().hex[:6])
        with pytest.raises(ConfigError):
            grant_reader(owner, pg_schema, "bad name; DROP TABLE turns")
        bypass = make_role()
        owner.execute(f"ALTER ROLE {bypass} BYPASSRLS")
        with pytest.raises(ConfigError):
            grant_reader(owner, pg_schema, bypass)
        with owner.transaction():
            disable_rls(owner, pg_schema)
        assert not rls_enabled(owner, pg_schema)
        assert not owner.execute("SELECT count(*) FROM pg_policies WHERE schemaname = %s",
                                 (pg_schema,)).fetchone()[0]


def test_an_engine_role_without_superuser_is_exempt_as_the_owner(postgres_dsn: str, pg_schema: str,
                                                                 make_role: Any) -> None:
    """In production the engine is a plain role that owns the schema: the policies must not hide its own rows."""
    from memory_ext.store.pg.rls import grant_reader

    owner = make_role()
    with psycopg.connect(postgres_dsn, autocommit=True) as admin:
        admin.execute(f"GRANT CREATE ON DATABASE {admin.info.dbname} TO {owner}")
        admin.execute("CREATE EXTENSION IF NOT EXISTS vector")
    dsn = psycopg.conninfo.make_conninfo(postgres_dsn, user=owner)
    with _open(dsn, pg_schema) as engine:
        for user in CONVERSATIONS:
            engine.add_turns(make_turns(user), user)
        engine.flush()
        assert engine.search("beagle Toby", "ana", k=2).items
        assert engine.forget("ben").turns == len(CONVERSATIONS["ben"])
        assert engine.search("Porto bakery", "ana", k=2).items
        reader = make_role()
        with psycopg.connect(dsn, autocommit=True) as conn:
            grant_reader(conn, pg_schema, reader, user_id="ana")   # the engine's role runs it, as the owner
        engine.add_turns([Turn(role="user", speaker="Ana", content="Toby learned to sit")], "ana")
        engine.flush()
    with _as(postgres_dsn, reader, pg_schema) as conn:
        assert conn.execute("SELECT count(*) FROM turns").fetchone()[0] == len(CONVERSATIONS["ana"]) + 1
        assert {u for (u,) in conn.execute("SELECT user_id FROM namespaces")} == {"ana"}
