"""pgvector's HNSW indexes: one partial index per namespace past ``storage.pgvector_exact_max``, and the older
layout (one HNSW index over every namespace's vectors) upgraded when a writer opens it."""

from __future__ import annotations

from typing import Any

import pytest

from memory_ext import MemoryEngine
from tests.conftest import CONVERSATIONS, make_turns

pytestmark = pytest.mark.postgres

TABLE = "pgvector_d256"  # the hashing embedder's dimension


def _open(dsn: str, schema: str, exact_max: int) -> MemoryEngine:
    return MemoryEngine.open(dsn, embedder="hashing", config={"storage": {
        "backend": "postgres", "postgres_schema": schema, "pgvector_exact_max": exact_max}})


def _vector_indexes(dsn: str, schema: str) -> dict[str, str]:
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        rows = conn.execute("SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = %s AND tablename = %s"
                            " AND indexdef LIKE '%%hnsw%%'", (schema, TABLE)).fetchall()
    return {str(name): str(definition) for name, definition in rows}


def _ns_ids(dsn: str, schema: str) -> dict[str, int]:
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        rows = conn.execute(f"SELECT user_id, ns_id FROM {schema}.namespaces").fetchall()
    return {str(user): int(ns) for user, ns in rows}


def _ranked(engine: MemoryEngine) -> list[list[tuple[str, float]]]:
    queries = [("ana", "beagle"), ("ana", "Lena Porto"), ("ben", "marathon training")]
    return [[(item.id, round(item.score, 6)) for item in engine.search(q, user, k=5).items] for user, q in queries]


def _fill(engine: MemoryEngine, users: list[str]) -> None:
    for user in users:
        engine.add_turns(make_turns(user), user)
    engine.flush()


def test_only_a_namespace_past_exact_max_gets_an_hnsw_index_of_its_own(postgres_dsn: str, pg_schema: str) -> None:
    users = sorted(CONVERSATIONS)[:2]
    sizes = {user: len(CONVERSATIONS[user]) for user in users}
    big, small = sorted(users, key=lambda u: -sizes[u])
    with _open(postgres_dsn, pg_schema, 0) as engine:  # every namespace is past 0 vectors
        _fill(engine, users)
    ids = _ns_ids(postgres_dsn, pg_schema)
    found = _vector_indexes(postgres_dsn, pg_schema)
    assert set(found) == {f"{TABLE}_hnsw_ns{ids[u]}" for u in users}, found
    assert all(f"WHERE (ns_id = {ids[u]})" in found[f"{TABLE}_hnsw_ns{ids[u]}"] for u in users), found

    other = pg_schema + "_b"
    try:
        with _open(postgres_dsn, other, 0) as engine:
            _fill(engine, [small])
        with _open(postgres_dsn, other, 10_000) as engine:  # a default-sized store: nothing past exact_max
            _fill(engine, [big])
        ids = _ns_ids(postgres_dsn, other)
        assert set(_vector_indexes(postgres_dsn, other)) == {f"{TABLE}_hnsw_ns{ids[small]}"}
    finally:
        import psycopg

        with psycopg.connect(postgres_dsn, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA IF EXISTS {other} CASCADE")


def test_an_older_store_with_one_shared_hnsw_index_is_upgraded_when_opened(postgres_dsn: str,
                                                                           pg_schema: str) -> None:
    import psycopg

    users = sorted(CONVERSATIONS)
    with _open(postgres_dsn, pg_schema, 0) as engine:
        _fill(engine, users)
        before = _ranked(engine)
    # the older layout: no index per namespace, one HNSW index over the whole table
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        for name in _vector_indexes(postgres_dsn, pg_schema):
            conn.execute(f"DROP INDEX {pg_schema}.{name}")
        conn.execute(f"CREATE INDEX {TABLE}_hnsw ON {pg_schema}.{TABLE} USING hnsw (embedding vector_cosine_ops)")
    assert set(_vector_indexes(postgres_dsn, pg_schema)) == {f"{TABLE}_hnsw"}

    with _open(postgres_dsn, pg_schema, 0) as engine:
        ids = _ns_ids(postgres_dsn, pg_schema)
        assert set(_vector_indexes(postgres_dsn, pg_schema)) == {f"{TABLE}_hnsw_ns{ids[u]}" for u in users}
        assert _ranked(engine) == before
        engine.add_turns(make_turns("ana"), "ana")  # and it goes on writing (a re-add: same ids)
        engine.flush()
        assert _ranked(engine) == before


def test_a_large_namespace_without_its_index_is_still_searched_correctly(postgres_dsn: str, pg_schema: str) -> None:
    """A reader never builds an index: a namespace past a lowered exact_max is scored exactly until a write."""
    users = sorted(CONVERSATIONS)
    with _open(postgres_dsn, pg_schema, 10_000) as engine:
        _fill(engine, users)
        exact = _ranked(engine)
    assert _vector_indexes(postgres_dsn, pg_schema) == {}
    config: dict[str, Any] = {"storage": {"backend": "postgres", "postgres_schema": pg_schema,
                                          "pgvector_exact_max": 0}}
    with MemoryEngine.open(postgres_dsn, embedder="hashing", config=config, read_only=True) as engine:
        assert _ranked(engine) == exact
