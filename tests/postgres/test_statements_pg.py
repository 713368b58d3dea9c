"""Every statement of the truth-store families, as PostgreSQL's text writes it, is accepted by PostgreSQL against
the store's own schema (tables, columns, conflict targets, types): ``EXPLAIN`` plans each one without running it."""

from __future__ import annotations

import dataclasses

import pytest

from memory_ext.store.pg.statements import POSTGRES
from memory_ext.store.pg.truth import PgTruthStore
from memory_ext.store.statements import split_literals

pytestmark = pytest.mark.postgres

FAMILIES = ("turns", "records", "versions", "queue", "files", "tiers", "claims", "forget", "portable", "items")


def _marks(sql: str) -> int:
    return sum(piece.count("%s") for literal, piece in split_literals(sql) if not literal)


def test_every_postgres_statement_plans_against_the_schema(postgres_dsn: str, pg_schema: str) -> None:
    store = PgTruthStore(postgres_dsn, schema=pg_schema)
    try:
        store.add_schema(store.create_queue_schema)
        planned = 0
        with store.transaction("plan the statement families") as conn:
            for family in FAMILIES:
                texts = getattr(POSTGRES, family)
                for field in dataclasses.fields(texts):
                    text = getattr(texts, field.name)
                    if not text.lstrip().upper().startswith(("SELECT", "INSERT", "UPDATE", "DELETE")):
                        continue  # DDL (run by the schema step) or a fragment appended by its repository
                    sql = text.format(marks="%s,%s", kinds="%s", where="TRUE", table="turns")
                    try:
                        conn.execute("EXPLAIN " + sql, [None] * _marks(sql))
                    except Exception as exc:  # noqa: BLE001  reported with the statement's name
                        pytest.fail(f"{family}.{field.name} is not accepted by PostgreSQL ({exc}): {sql}")
                    planned += 1
        assert planned > 100
    finally:
        store.close()
