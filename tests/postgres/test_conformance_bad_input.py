"""Conformance, bad input: the fault suite's table of wrong arguments (``tests/fault/test_bad_inputs.py``, over 200
calls) run against a SQLite store and a PostgreSQL store — each raises a typed ``memory_ext.errors`` error naming
the field, and nothing is half-written: every row of every table of the store is the same before and after.
Plus writes that fail inside their transaction (a bad turn after good ones, a face of the same batch)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memory_ext import MemoryEngine, Turn
from memory_ext.errors import MemoryExtError, ValidationError
from tests.conftest import CONVERSATIONS, StoreTarget, make_turns
from tests.fault.test_bad_inputs import CASES, OPEN_CASES, Call, _error_names, turn
from tests.postgres.conformance_kit import store_rows

pytestmark = pytest.mark.postgres


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def filled(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[MemoryEngine]:
    """One store per backend for the whole table (written once, fully indexed, with a pre-compressed file)."""
    schema = None
    if request.param == "sqlite":
        target = StoreTarget("sqlite", str(tmp_path_factory.mktemp("bad-input") / "store"), {})
    else:
        dsn = request.getfixturevalue("postgres_dsn")
        schema = "t_" + uuid.uuid4().hex[:12]
        target = StoreTarget("postgres", dsn, {"storage": {"backend": "postgres", "postgres_schema": schema}})
    engine = target.open()
    try:
        engine.add_turns([turn(), {"role": "assistant", "content": "Lisbon is lovely in spring"}], "ana", wait=True)
        engine.pre_compress("ana", "User: remind me of the flight\nAssistant: TAP 123 at 9:40")
        engine.hooks("ana")  # an open file's hook is refreshed on read: once, before the table runs
        engine.flush()
        yield engine
    finally:
        engine.close()
        if schema is not None:
            import psycopg

            with psycopg.connect(request.getfixturevalue("postgres_dsn"), autocommit=True) as conn:
                conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


@pytest.mark.parametrize(("name", "call", "field"), CASES, ids=[c[0] for c in CASES])
def test_bad_input_is_a_typed_error_and_writes_nothing(filled: MemoryEngine, name: str, call: Call,
                                                       field: str) -> None:
    before = store_rows(filled)
    with pytest.raises(MemoryExtError) as info:
        call(filled)
    assert _error_names(info.value, field), f"{name}: {type(info.value).__name__}: {info.value}"
    assert store_rows(filled) == before
    assert "secret words secret words" not in str(info.value)


MORE_CASES: list[tuple[str, Call, str]] = [  # found by this suite: accepted before, then broke later reads
    *((f"metadata-{name}", lambda e, m=meta: e.add_turns([turn(metadata=m)], "ana"), "metadata")
      for name, meta in (("nan", {"score": float("nan")}), ("inf", {"ratio": float("inf")}),
                         ("nested-nan", {"usage": {"cost": [1.0, float("-inf")]}}))),
    ("tool_calls-nan", lambda e: e.add_turns([turn(tool_calls=({"name": "f", "args": {"x": float("nan")}},))],
                                             "ana"), "tool_calls"),
    ("attachments-inf", lambda e: e.add_turns([turn(attachments=({"type": "file", "size": float("inf")},))],
                                              "ana"), "attachments"),
    ("update-metadata-nan", lambda e: e.update("ana", e.get_turns("ana")[0].id, metadata={"x": float("nan")}),
     "metadata"),
    *((f"filter-{name}", lambda e, f=flt: e.search("Lisbon", "ana", filters={"metadata": f}), field)
      for name, flt, field in (("huge-int", {"n": 10**30}, "filters.metadata.n"),
                               ("huge-int-gt", {"n": {"$gt": -(10**20)}}, "filters.metadata.n.$gt"),
                               ("huge-int-in", {"n": {"$in": [1, 2**64]}}, "filters.metadata.n.$in"),
                               ("nan-gt", {"n": {"$gt": float("nan")}}, "filters.metadata.n.$gt"),
                               ("inf-eq", {"n": float("inf")}, "filters.metadata.n"))),
]


@pytest.mark.parametrize(("name", "call", "field"), MORE_CASES, ids=[c[0] for c in MORE_CASES])
def test_more_bad_input_is_a_typed_error_and_writes_nothing(filled: MemoryEngine, name: str, call: Call,
                                                            field: str) -> None:
    before = store_rows(filled)
    with pytest.raises(MemoryExtError) as info:
        call(filled)
    assert _error_names(info.value, field), f"{name}: {type(info.value).__name__}: {info.value}"
    assert store_rows(filled) == before
    # every metadata filter of the namespace still runs (no stored row it cannot read)
    result = filled.search("Lisbon", "ana", k=5, filters={"metadata": {"topic": {"$ne": "x"}}})
    assert result.items and not result.channel_errors


def test_a_bad_turn_after_good_ones_writes_none_of_them(store_target: StoreTarget) -> None:
    with store_target.open() as engine:
        engine.add_turns(make_turns("ben"), "ben", wait=True)
        before = store_rows(engine)
        batch: list[Any] = [*make_turns("ana"), {"role": "user", "content": "a\x00b"}]
        with pytest.raises(ValidationError) as info:
            engine.add_turns(batch, "ana")
        assert "content" in info.value.field
        with pytest.raises(ValidationError):
            engine.add_turns([*make_turns("ana"), Turn(role="user", content="x", id="dup"),
                              Turn(role="user", content="y", id="dup")], "ana")
        assert store_rows(engine) == before
        assert engine.get_turns("ana") == [] and engine.search("beagle", "ana", k=3).items == ()
        # the store still takes good writes afterwards
        engine.add_turns(make_turns("ana"), "ana", wait=True)
        assert len(engine.get_turns("ana")) == len(CONVERSATIONS["ana"])


def test_a_write_failing_inside_its_transaction_leaves_nothing(store_target: StoreTarget,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """An index that fails in the middle of ``add_turns`` (after the turns and records were inserted in the
    transaction) rolls the whole write back, on both backends; the next write works."""
    with store_target.open() as engine:
        engine.add_turns(make_turns("ben"), "ben", wait=True)
        before = store_rows(engine)
        graph = next(i for i in engine._indexes if type(i).__name__ == "EntityGraph")

        def broken(*args: Any, **kwargs: Any) -> None:
            raise RuntimeError("disk full")

        monkeypatch.setattr(graph, "index", broken)
        with pytest.raises(RuntimeError, match="disk full"):
            engine.add_turns(make_turns("ana"), "ana")
        assert store_rows(engine) == before
        monkeypatch.undo()
        result = engine.add_turns(make_turns("ana"), "ana", wait=True)
        assert result.existing_ids == () and len(engine.get_turns("ana")) == len(CONVERSATIONS["ana"])
        assert "beagle" in engine.search("What dog did Ana adopt?", "ana", k=1).items[0].text


# -- opens that fail leave nothing behind --------------------------------------------------------------------------
def _exists(target: StoreTarget) -> bool:
    """Whether the store's directory (SQLite) or schema (PostgreSQL) exists."""
    if target.backend == "sqlite":
        return Path(target.path).exists()
    import psycopg

    with psycopg.connect(target.path, autocommit=True) as conn:
        row = conn.execute("SELECT count(*) FROM pg_namespace WHERE nspname = %s",
                           (target.config["storage"]["postgres_schema"],)).fetchone()
    return bool(row and row[0])


@pytest.mark.parametrize(("name", "kwargs", "field"), [c for c in OPEN_CASES if c[0] != "read-only-missing"],
                         ids=[c[0] for c in OPEN_CASES if c[0] != "read-only-missing"])
def test_a_failed_open_creates_nothing(store_target: StoreTarget, name: str, kwargs: dict[str, Any],
                                       field: str) -> None:
    kwargs = dict(kwargs)
    config = kwargs.pop("config", None)
    with pytest.raises(MemoryExtError) as info:
        if isinstance(config, dict) or config is None:
            store_target.open(config=config, **kwargs)
        else:  # a config file or a wrong type, instead of the backend's mapping
            MemoryEngine.open(store_target.path, config=config, embedder="hashing", **kwargs)
    assert _error_names(info.value, field), str(info.value)
    assert "sk-live" not in str(info.value)
    assert not _exists(store_target), f"{name}: the failed open left the store behind"


def test_a_read_only_open_of_a_missing_store_is_a_typed_error(store_target: StoreTarget) -> None:
    with pytest.raises(MemoryExtError):
        store_target.open(read_only=True)
    assert not _exists(store_target)


def test_a_failed_open_of_an_existing_store_keeps_it(store_target: StoreTarget) -> None:
    with store_target.open() as engine:
        engine.add_turns(make_turns("chen"), "chen", wait=True)
    with pytest.raises(MemoryExtError):
        store_target.open(embedder="bert")
    with store_target.open() as engine:
        assert len(engine.get_turns("chen")) == len(CONVERSATIONS["chen"])
        assert "peanuts" in engine.search("peanut allergy", "chen", k=1).items[0].text
