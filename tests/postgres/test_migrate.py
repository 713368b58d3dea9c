"""``memext migrate``: a whole store SQLite -> PostgreSQL -> SQLite, the same searches at every step; refusals;
all or nothing. ``memext postgres start|dsn|stop`` through the command line."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memory_ext import MemoryEngine, Namespace, Turn
from memory_ext.cli import main
from memory_ext.embed import HashingEmbedder
from memory_ext.errors import EmbedderMismatchError, InvalidArgumentError, StoreLockedError
from memory_ext.store import migrate as migrate_module
from memory_ext.store.migrate import migrate_store
from tests.conftest import CONVERSATIONS, fresh_schema, make_turns

pytestmark = pytest.mark.postgres

QUERIES = [
    (Namespace("ana"), "beagle puppy Toby"),
    (Namespace("ana"), "Lena moving to Porto for a bakery job"),
    (Namespace("ana"), "cello practice"),
    (Namespace("ana"), "杭州西湖"),
    (Namespace("ana", agent_id="travel-bot"), "Porto in summer"),
    (Namespace("ben"), "marathon training kilometres"),
    (Namespace("ben"), "cat Miso coffee laptop"),
    (Namespace("chen"), "flat in Lisbon near the river"),
    (Namespace("chen"), "peanut allergy recipes"),
    (Namespace("dora"), "garden tomatoes"),
]


def build_store(path: Path) -> str:
    """A store with several namespaces (one with an agent), an update, forgotten turns and a forgotten namespace,
    and memory files made by a weekly and a monthly compaction."""
    with MemoryEngine.open(path, embedder="hashing") as engine:
        for user in CONVERSATIONS:
            engine.add_turns(make_turns(user), user)
        engine.add_turns(make_turns("ana"), Namespace("ana", agent_id="travel-bot"))
        engine.add_turns([Turn(role="user", content="I grow tomatoes in my garden")], "dora")
        engine.flush()
        engine.forget("dora")  # a whole namespace
        miso = engine.search("cat Miso coffee laptop", "ben", k=1).items[0]
        engine.forget("ben", record_ids=[miso.id])  # one turn
        engine.update("chen", "chen:1", content="We sold the flat in Lisbon and moved to a house in Sintra.")
        engine.compact("ana", "weekly", now="2026-04-01T00:00:00")
        engine.compact("ana", "monthly", now="2026-05-01T00:00:00")
        engine.flush()
        return miso.text


def searches(engine: MemoryEngine) -> list[list[str]]:
    return [[item.id for item in engine.search(q, ns, k=10).items] for ns, q in QUERIES]


def table_rows(db: Path) -> dict[str, list[str]]:
    """Every row of every table of a SQLite store (as sorted reprs), the engine's internal counters aside."""
    conn = sqlite3.connect(db)
    try:
        names = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")
                 if r[0] != "sqlite_sequence"]
        return {t: sorted(repr(r) for r in conn.execute(f"SELECT * FROM {t}")) for t in names}
    finally:
        conn.close()


@pytest.fixture
def other_schema(postgres_dsn: str) -> Iterator[str]:
    """A second fresh schema name (dropped afterwards)."""
    yield from fresh_schema(postgres_dsn)


def pg_config(dsn: str, schema: str) -> dict[str, object]:
    return {"storage": {"backend": "postgres", "postgres_dsn": dsn, "postgres_schema": schema}}


def test_sqlite_to_postgres_to_sqlite_keeps_every_row_and_every_search(
        tmp_path: Path, postgres_dsn: str, pg_schema: str, capsys: pytest.CaptureFixture[str]) -> None:
    source = tmp_path / "source"
    forgotten = build_store(source)
    with MemoryEngine.open(source, embedder="hashing", read_only=True) as engine:
        expected = searches(engine)
        stats = engine.stats()
        history = engine.history("chen", "chen:1")
    assert all(expected[:-1]) and expected[-1] == []  # dora was forgotten
    before = table_rows(source / "memory.sqlite3")

    report = migrate_store(source, postgres_dsn, target_schema=pg_schema, progress=False)
    assert report.verified, report.mismatches
    assert report.searches == 20 and report.searches_same == 20 and report.namespaces_searched == 4
    assert report.rows == {t: len(rows) for t, rows in before.items() if t in report.rows}
    assert set(before) - set(report.rows) == set()
    assert report.vectors_built == {"pgvector_d256": len(before["embeddings"])} and report.warnings == []
    assert report.rows["files"] > 0 and report.rows["memory_history"] > 0 and report.rows["claims"] > 0

    with MemoryEngine.open(postgres_dsn, config=pg_config(postgres_dsn, pg_schema), embedder="hashing",
                           read_only=True) as engine:
        assert searches(engine) == expected
        assert forgotten not in {i.text for i in engine.search("cat Miso coffee laptop", "ben", k=10).items}
        assert engine.stats().model_dump(include={"namespaces", "turns", "records", "vectors", "embedder_id"}) == \
            stats.model_dump(include={"namespaces", "turns", "records", "vectors", "embedder_id"})
        assert [v.model_dump() for v in engine.history("chen", "chen:1")] == [v.model_dump() for v in history]

    back = tmp_path / "back"
    code = main(["migrate", "--from", postgres_dsn, "--from-schema", pg_schema, "--to", str(back), "--no-progress"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "20/20 searches in 4 namespace(s) returned the same ids in the same order" in out
    assert table_rows(back / "memory.sqlite3") == before  # every row of every table, ids and all
    with MemoryEngine.open(back, embedder="hashing", read_only=True) as engine:
        assert searches(engine) == expected


def test_a_migrated_store_goes_on_writing_after_the_copied_ids(tmp_path: Path, postgres_dsn: str,
                                                              pg_schema: str) -> None:
    source = tmp_path / "source"
    build_store(source)
    assert migrate_store(source, postgres_dsn, target_schema=pg_schema, progress=False).verified
    with MemoryEngine.open(postgres_dsn, config=pg_config(postgres_dsn, pg_schema), embedder="hashing") as engine:
        engine.add_turns([Turn(role="user", content="I bought a red kayak for the Douro river")], "ana")
        engine.add_turns([Turn(role="user", content="I planted basil on the balcony")], "erin")  # a new namespace
        engine.flush()
        assert "kayak" in engine.search("red kayak", "ana", k=1).items[0].text
        assert "basil" in engine.search("basil balcony", "erin", k=1).items[0].text
        assert engine.search("beagle puppy Toby", "ana", k=1).items  # the copied rows are still found
    back = tmp_path / "back"
    report = migrate_store(postgres_dsn, back, source_schema=pg_schema, progress=False)
    assert report.verified, report.mismatches
    with MemoryEngine.open(back, embedder="hashing") as engine:
        engine.add_turns([Turn(role="user", content="The kayak has a small leak")], "ana")
        engine.flush()
        assert {i.text for i in engine.search("kayak", "ana", k=2).items} == {
            "The kayak has a small leak", "I bought a red kayak for the Douro river"}


def test_a_non_empty_target_is_refused_and_left_as_it_was(tmp_path: Path, postgres_dsn: str, pg_schema: str,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    source = tmp_path / "source"
    build_store(source)
    first = migrate_store(source, postgres_dsn, target_schema=pg_schema, progress=False)
    with pytest.raises(InvalidArgumentError) as err:
        migrate_store(source, postgres_dsn, target_schema=pg_schema, progress=False)
    assert err.value.field == "target" and "not empty" in str(err.value) and "--to-schema" in str(err.value)
    code = main(["migrate", "--from", str(source), "--to", postgres_dsn, "--to-schema", pg_schema, "--no-progress"])
    assert code == 2 and "not empty" in capsys.readouterr().err
    with MemoryEngine.open(postgres_dsn, config=pg_config(postgres_dsn, pg_schema), embedder="hashing",
                           read_only=True) as engine:
        assert engine.stats().turns == first.rows["turns"]  # nothing added twice

    copy = tmp_path / "copy"
    assert migrate_store(source, copy, samples=0, progress=False).verified
    with pytest.raises(InvalidArgumentError, match="not empty"):
        migrate_store(postgres_dsn, copy, source_schema=pg_schema, progress=False)
    with pytest.raises(InvalidArgumentError, match="holds other files"):
        (tmp_path / "notes").mkdir()
        (tmp_path / "notes" / "todo.txt").write_text("x")
        migrate_store(source, tmp_path / "notes", progress=False)


def test_bad_sources_and_targets_are_typed_errors(tmp_path: Path, postgres_dsn: str, pg_schema: str,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    source = tmp_path / "source"
    build_store(source)
    with pytest.raises(InvalidArgumentError) as err:
        migrate_store(tmp_path / "missing", tmp_path / "t1", progress=False)
    assert err.value.field == "source" and "no memory-ext store" in str(err.value)
    assert not (tmp_path / "t1").exists()
    with pytest.raises(InvalidArgumentError, match="the target is the source"):
        migrate_store(source, str(source) + "/", progress=False)
    with pytest.raises(InvalidArgumentError) as err:
        migrate_store(postgres_dsn, tmp_path / "t2", source_schema=pg_schema, progress=False)
    assert err.value.field == "source_schema"
    with pytest.raises(EmbedderMismatchError):
        migrate_store(source, tmp_path / "t3", embedder=HashingEmbedder(dim=64), progress=False)
    assert not (tmp_path / "t3").exists()
    with MemoryEngine.open(source, embedder="hashing"), pytest.raises(StoreLockedError, match="stop it"):
        migrate_store(source, tmp_path / "t4", progress=False)  # a writer is open on the source
    assert main(["migrate", "--from", str(tmp_path / "missing"), "--to", str(tmp_path / "t5")]) == 2
    assert "no memory-ext store" in capsys.readouterr().err


@pytest.mark.parametrize("to", ["sqlite", "postgres"])
def test_a_failed_copy_leaves_no_target_behind(tmp_path: Path, postgres_dsn: str, pg_schema: str, other_schema: str,
                                               to: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """All or nothing: a failure in the middle of the copy rolls it back and removes what the migration made."""
    import psycopg

    source = tmp_path / "source"
    build_store(source)
    if to == "postgres":  # the source on PostgreSQL too: PostgreSQL -> PostgreSQL in another schema
        assert migrate_store(source, postgres_dsn, target_schema=pg_schema, progress=False, samples=0).verified
    write = migrate_module._Side.write

    def failing(self: migrate_module._Side, table: str, columns: list[str], rows: list[tuple[object, ...]]) -> None:
        if table == "turns":
            raise OSError("disk full")
        write(self, table, columns, rows)

    monkeypatch.setattr(migrate_module._Side, "write", failing)
    target = tmp_path / "target"
    with pytest.raises(OSError, match="disk full"):
        if to == "sqlite":
            migrate_store(source, target, progress=False)
        else:
            migrate_store(postgres_dsn, postgres_dsn, source_schema=pg_schema, target_schema=other_schema,
                          progress=False)
    assert not target.exists()
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        assert conn.execute("SELECT to_regnamespace(%s)", (other_schema,)).fetchone()[0] is None
    monkeypatch.undo()
    if to == "postgres":  # the failed attempt did not get in the way of a good one
        report = migrate_store(postgres_dsn, postgres_dsn, source_schema=pg_schema, target_schema=other_schema,
                               progress=False)
        assert report.verified and report.searches == 20, report.mismatches


def test_json_report_and_counts_only(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = tmp_path / "source"
    build_store(source)
    (source / "langgraph_store.sqlite3").write_bytes(b"")  # a face's own file beside the store
    code = main(["migrate", "--from", str(source), "--to", str(tmp_path / "copy"), "--samples", "0", "--json",
                 "--no-progress"])
    report = json.loads(capsys.readouterr().out)
    assert code == 0 and report["verified"] and report["searches"] == 0 and report["rows"]["turns"] > 0
    assert len(report["warnings"]) == 1 and "langgraph_store.sqlite3" in report["warnings"][0]


def _memext(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    return subprocess.run([sys.executable, "-m", "memory_ext.cli", *args], capture_output=True, text=True,
                          env=env, timeout=180, check=False)


def test_memext_postgres_start_dsn_stop(tmp_path: Path, postgres_dsn: str) -> None:
    """The server outlives the command that started it; ``dsn`` and ``stop`` find it by its data directory.
    (``postgres_dsn``: skipped, with the reason, where no server can be started.)"""
    import psycopg

    data = tmp_path / "pg"
    started = _memext("postgres", "start", "--dir", str(data))
    try:
        assert started.returncode == 0, started.stderr
        assert "export MEMORY_EXT_POSTGRES_DSN=postgresql://" in started.stdout
        dsn = _memext("postgres", "dsn", "--dir", str(data))
        assert dsn.returncode == 0 and f"DSN: {dsn.stdout.strip()}" in started.stdout
        again = _memext("postgres", "start", "--dir", str(data))  # idempotent
        assert again.returncode == 0 and "already running" in again.stdout and dsn.stdout.strip() in again.stdout
        with psycopg.connect(dsn.stdout.strip(), autocommit=True) as conn:  # the starting process has exited
            assert conn.execute("SELECT extname FROM pg_extension WHERE extname='vector'").fetchone()
        with MemoryEngine.open(dsn.stdout.strip(), embedder="hashing") as engine:
            engine.add_turns([Turn(role="user", content="I adopted a beagle called Toby")], "ana")
            engine.flush()
            assert engine.search("beagle", "ana", k=1).items
    finally:
        stopped = _memext("postgres", "stop", "--dir", str(data))
    assert stopped.returncode == 0 and "stopped" in stopped.stdout, stopped.stderr
    gone = _memext("postgres", "dsn", "--dir", str(data))
    assert gone.returncode == 2 and "memext postgres start" in gone.stderr
    assert _memext("postgres", "stop", "--dir", str(tmp_path / "nothing")).returncode == 2


def test_the_module_example_runs() -> None:
    import doctest

    assert doctest.testmod(migrate_module, raise_on_error=False).failed == 0


def test_without_vectors_the_other_channels_are_compared(tmp_path: Path, postgres_dsn: str, pg_schema: str) -> None:
    source = tmp_path / "source"
    build_store(source)
    config = {"globals": {"vector_enabled": False}}
    report = migrate_store(source, postgres_dsn, target_schema=pg_schema, config=config, progress=False)
    assert report.verified and report.searches == 20, report.mismatches
    assert report.rows["embeddings"] > 0 and report.vectors_built  # the vectors are copied all the same


def test_a_postgres_source_being_written_is_waited_for_then_refused(tmp_path: Path, postgres_dsn: str,
                                                                    pg_schema: str,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    import psycopg

    from memory_ext.errors import StoreError
    from memory_ext.store.pg.truth import _lock_key

    source = tmp_path / "source"
    build_store(source)
    assert migrate_store(source, postgres_dsn, target_schema=pg_schema, samples=0, progress=False).verified
    monkeypatch.setattr(migrate_module, "LOCK_WAIT_S", 0.2)
    with psycopg.connect(postgres_dsn, autocommit=True) as writer:  # a writer of another process mid-transaction
        writer.execute("SELECT pg_advisory_lock(%s)", (_lock_key(pg_schema),))
        with pytest.raises(StoreError, match="stayed locked by a writer"):
            migrate_store(postgres_dsn, tmp_path / "copy", source_schema=pg_schema, progress=False)
    assert not (tmp_path / "copy").exists()


def test_a_search_that_differs_fails_the_command(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    source = tmp_path / "source"
    build_store(source)
    compare = migrate_module._compare_searches

    def one_differs(*args: Any) -> tuple[int, list[str]]:
        same, mismatches = compare(*args)
        return same - 1, [*mismatches, "search 'x' in ana/-: source ['a'], target ['b']"]

    monkeypatch.setattr(migrate_module, "_compare_searches", one_differs)
    code = main(["migrate", "--from", str(source), "--to", str(tmp_path / "copy"), "--no-progress"])
    captured = capsys.readouterr()
    assert code == 1
    assert "19/20 searches" in captured.out and "differs: search 'x'" in captured.err
