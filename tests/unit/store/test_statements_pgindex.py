"""The derived indexes' statement families (issue 23, part 2): each backend writes every statement in its own
dialect, and the two texts of a statement take the same parameters."""

from __future__ import annotations

import dataclasses
import re
import sqlite3

import pytest

from memory_ext.store.pg.statements import POSTGRES
from memory_ext.store.sqlite.statements import SQLITE
from memory_ext.store.statements import Statements, sql_of

FAMILIES = ("snapshots", "keyword", "graph", "timeindex", "evidence", "sparse", "catalog", "vector", "chroma")
"""The families of the derived indexes (``store/keyword.py``, ``graph.py``...)."""

_LITERAL = re.compile(r"'(?:[^']|'')*'")
_TEMPLATE = re.compile(r"\{(\w+)\}")


def _code(sql: str) -> str:
    """``sql`` without its string literals."""
    return _LITERAL.sub("''", sql)


def _texts(family: object) -> list[tuple[str, str]]:
    """``(field, text)`` of every statement of a family (a DDL tuple gives one per statement)."""
    out: list[tuple[str, str]] = []
    for f in dataclasses.fields(family):  # type: ignore[arg-type]
        value = getattr(family, f.name)
        if isinstance(value, tuple):
            out += [(f"{f.name}[{i}]", text) for i, text in enumerate(value)]
        else:
            out.append((f.name, value))
    return out


def _pairs(name: str) -> list[tuple[str, str, str]]:
    lite, pg = getattr(SQLITE, name), getattr(POSTGRES, name)
    assert type(lite) is type(pg)
    return [(field, a, b) for (field, a), (_, b) in zip(_texts(lite), _texts(pg), strict=True)]


@pytest.mark.parametrize("name", FAMILIES)
def test_both_backends_write_every_field(name: str) -> None:
    lite, pg = getattr(SQLITE, name), getattr(POSTGRES, name)
    assert dataclasses.is_dataclass(lite) and type(lite) is type(pg)
    for f in dataclasses.fields(lite):
        for value in (getattr(lite, f.name), getattr(pg, f.name)):
            assert isinstance(value, (str, tuple)), f.name
            if isinstance(value, tuple):  # DDL: PostgreSQL's schema.py does not create the index tables
                assert value and all(isinstance(t, str) for t in value), f.name
        if isinstance(getattr(lite, f.name), tuple):
            assert len(getattr(lite, f.name)) == len(getattr(pg, f.name)), f.name


@pytest.mark.parametrize("name", FAMILIES)
def test_texts_are_non_empty_and_in_their_dialect(name: str) -> None:
    for field, lite, pg in _pairs(name):
        assert lite.strip() and pg.strip(), field
        assert "%s" not in lite, f"{name}.{field}: a PostgreSQL mark in SQLite text"
        code = _code(pg)
        assert "?" not in code, f"{name}.{field}: a SQLite mark in PostgreSQL text"
        for sqlite_only in (r"\bINSERT\s+OR\b", r"\bIFNULL\s*\(", r"\bjson_each\b", r"\bjson_extract\b",
                            r"\bWITHOUT\s+ROWID\b", r"\bAUTOINCREMENT\b", r"\bBLOB\b", r"\bREAL\b",
                            r"[=(,]\s*\+\w", r"\bAND\s+\+\w"):
            assert not re.search(sqlite_only, code, re.I), f"{name}.{field}: {sqlite_only} in {pg!r}"


@pytest.mark.parametrize("name", FAMILIES)
def test_the_two_texts_take_the_same_parameters(name: str) -> None:
    for field, lite, pg in _pairs(name):
        assert _code(lite).count("?") == _code(pg).count("%s"), f"{name}.{field}"
        assert _TEMPLATE.findall(lite) == _TEMPLATE.findall(pg), f"{name}.{field}: template fields differ"


def test_scalar_max_is_greatest_on_postgres() -> None:
    """SQLite's two-argument ``max(a, b)`` is PostgreSQL's ``GREATEST`` (``max`` there is only the aggregate)."""
    assert "max(last_eid, ?)" in SQLITE.graph.add_stats
    assert "GREATEST(last_eid, %s)" in POSTGRES.graph.add_stats
    assert "max(" not in POSTGRES.timeindex.remove_stats.lower()


def test_postgres_upserts_name_their_conflict_key() -> None:
    assert SQLITE.sparse.upsert.startswith("INSERT OR REPLACE INTO sparse_vectors")
    assert "ON CONFLICT (rid) DO UPDATE SET" in POSTGRES.sparse.upsert


@pytest.mark.parametrize("statements", [SQLITE, POSTGRES], ids=["sqlite", "postgres"])
def test_templates_take_the_dialects_marks(statements: Statements) -> None:
    text = statements.graph.delete_entity_edges.format(ids=statements.marks(3))
    assert _code(text).count(statements.mark) == 1 + 2 * 3
    text = statements.snapshots.indexed_rids.format(table="kw_docs", ids=statements.marks(2))
    assert "FROM kw_docs" in text and _code(text).count(statements.mark) == 3


def test_a_plain_sqlite_connection_runs_sqlite_statements() -> None:
    """What the doctests and unit tests of the indexes open: ``sqlite3.connect`` gets SQLite's families."""
    conn = sqlite3.connect(":memory:")
    assert sql_of(conn).keyword is SQLITE.keyword
    for statement in sql_of(conn).keyword.schema + sql_of(conn).graph.schema:
        conn.execute(statement)
    assert conn.execute(sql_of(conn).keyword.stats, (1,)).fetchone() is None
