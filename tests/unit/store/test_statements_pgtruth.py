"""The truth-store statement families (issue 23): each backend writes every statement of every family in its
own dialect — SQLite with ``?`` marks, PostgreSQL with ``%s`` marks and none of SQLite's syntax — and the two
texts of a statement take the same parameters."""

from __future__ import annotations

import dataclasses
import re
import sqlite3
import string

import pytest

from memory_ext.store.pg.statements import POSTGRES
from memory_ext.store.sqlite.schema import MIGRATIONS
from memory_ext.store.sqlite.statements import SQLITE
from memory_ext.store.statements import Statements, split_literals

FAMILIES = ("turns", "records", "versions", "queue", "files", "tiers", "claims", "forget", "portable", "items")
SQLITE_ONLY = ("INSERT OR", "IFNULL", "JSON_EACH", "JSON_EXTRACT", "WITHOUT ROWID")


def _texts(statements: Statements, family: str) -> dict[str, str]:
    return {f.name: getattr(getattr(statements, family), f.name)
            for f in dataclasses.fields(getattr(statements, family))}


def _code(text: str) -> str:
    """``text`` without its string literals."""
    return "".join(piece for literal, piece in split_literals(text) if not literal)


def _fields(text: str) -> list[str]:
    """The template fields (``{marks}``, ``{where}``...) of a statement text."""
    return sorted(name for _, name, _, _ in string.Formatter().parse(text) if name)


@pytest.mark.parametrize("family", FAMILIES)
def test_both_backends_write_every_statement_of_the_family(family: str) -> None:
    lite, pg = getattr(SQLITE, family), getattr(POSTGRES, family)
    assert type(lite) is type(pg)
    for name, text in {**_texts(SQLITE, family), **_texts(POSTGRES, family)}.items():
        assert isinstance(text, str) and text.strip(), f"{family}.{name} is empty"


@pytest.mark.parametrize("family", FAMILIES)
def test_postgres_text_has_no_sqlite_syntax(family: str) -> None:
    for name, text in _texts(POSTGRES, family).items():
        code = _code(text)
        assert "?" not in code, f"{family}.{name}: a ? mark in PostgreSQL text: {text}"
        assert not [w for w in SQLITE_ONLY if w in code.upper()], f"{family}.{name}: SQLite syntax: {text}"
        assert not re.search(r"(^|[\s=(,])\+[A-Za-z_]", code), f"{family}.{name}: SQLite's +column hint: {text}"


@pytest.mark.parametrize("family", FAMILIES)
def test_sqlite_text_has_no_postgres_marks(family: str) -> None:
    for name, text in _texts(SQLITE, family).items():
        assert "%s" not in text, f"{family}.{name}: a %s mark in SQLite text: {text}"


@pytest.mark.parametrize("family", FAMILIES)
def test_the_two_texts_take_the_same_parameters(family: str) -> None:
    lite, pg = _texts(SQLITE, family), _texts(POSTGRES, family)
    for name in lite:
        assert _code(lite[name]).count("?") == _code(pg[name]).count("%s"), f"{family}.{name}"
        assert _fields(lite[name]) == _fields(pg[name]), f"{family}.{name}: other template fields"


def _store() -> sqlite3.Connection:
    conn = sqlite3.connect(":memory:")
    for migrate in MIGRATIONS:
        migrate(conn)
    conn.execute(SQLITE.queue.create_table)
    conn.execute(SQLITE.queue.create_quarantine)
    return conn


@pytest.mark.parametrize("family", FAMILIES)
def test_every_sqlite_statement_compiles_against_the_schema(family: str) -> None:
    conn = _store()
    for name, text in _texts(SQLITE, family).items():
        if not text.lstrip().upper().startswith(("SELECT", "INSERT", "UPDATE", "DELETE", "CREATE")):
            continue  # a fragment (" AND ..."), appended to a statement by its repository
        sql = text.format(marks="?,?", kinds="?", where="1", table="turns")
        try:
            conn.execute("EXPLAIN " + sql, [None] * _code(sql).count("?"))
        except sqlite3.Error as exc:  # a wrong table, column or syntax
            pytest.fail(f"{family}.{name} does not compile on SQLite ({exc}): {sql}")


def test_a_template_is_filled_with_the_marks_of_its_dialect() -> None:
    assert SQLITE.turns.tids_by_id.format(marks=SQLITE.marks(2)).endswith("id IN (?,?)")
    assert POSTGRES.turns.tids_by_id.format(marks=POSTGRES.marks(2)).endswith("id IN (%s,%s)")
