"""Fixtures of the backend conformance suite: both backends at once, for tests that compare them."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import StoreTarget


@pytest.fixture
def both_targets(tmp_path: Path, request: pytest.FixtureRequest) -> tuple[StoreTarget, StoreTarget]:
    """A SQLite store and a PostgreSQL store (fresh schema), to write the same turns into and compare."""
    dsn = request.getfixturevalue("postgres_dsn")
    schema = request.getfixturevalue("pg_schema")
    return (StoreTarget("sqlite", str(tmp_path / "store"), {}),
            StoreTarget("postgres", dsn, {"storage": {"backend": "postgres", "postgres_schema": schema}}))
