"""The scrub of a SQLite file's unallocated space (memory_ext.store.sqlite_scrub) and the store's durability."""

from __future__ import annotations

import os
import random
import sqlite3
from pathlib import Path

import pytest

from memory_ext import MemoryEngine
from memory_ext.errors import ConfigError
from memory_ext.store.sqlite import TruthStore
from memory_ext.store.sqlite_scrub import scrub


def _db(path: Path) -> tuple[sqlite3.Connection, list[str]]:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA secure_delete=ON")
    conn.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, key TEXT NOT NULL UNIQUE, body TEXT)")
    rng = random.Random(3)
    keys = [f"key-{i:05d}-" + "".join(rng.choice("abcdef") for _ in range(30)) for i in range(800)]
    order = keys[:]
    rng.shuffle(order)
    for k in order:
        conn.execute("INSERT INTO t(key, body) VALUES(?, ?)", (k, k * 4))
    for k in rng.sample(keys, 300):
        conn.execute("DELETE FROM t WHERE key=?", (k,))
    return conn, keys


def _roots(conn: sqlite3.Connection) -> list[int]:
    return [int(r[0]) for r in conn.execute("SELECT rootpage FROM sqlite_schema WHERE rootpage > 0")]


def _gaps_dirty(path: Path) -> None:
    """Put non-zero bytes in the gap of every leaf page (stale cell copies, as a balance leaves them)."""
    raw = bytearray(path.read_bytes())
    for base in range(4096, len(raw), 4096):
        if raw[base] in (10, 13):
            ncell = int.from_bytes(raw[base + 3:base + 5], "big")
            content = int.from_bytes(raw[base + 5:base + 7], "big")
            start = base + 8 + 2 * ncell
            raw[start:base + content] = b"\xab" * (base + content - start)
    path.write_bytes(bytes(raw))


def test_scrub_zeroes_free_space_and_changes_no_row(tmp_path: Path) -> None:
    path = tmp_path / "db.sqlite3"
    conn, _ = _db(path)
    dump, roots = list(conn.iterdump()), _roots(conn)
    conn.close()
    _gaps_dirty(path)
    assert b"\xab" * 64 in path.read_bytes()
    fd = os.open(path, os.O_RDWR)
    try:
        first = scrub(fd, roots)
        assert first.problems == [] and first.pages_written > 0 and first.bytes_zeroed > 0
        again = scrub(fd, roots)  # nothing left to zero
        assert again.problems == [] and again.pages_written == 0 and again.pages == first.pages
    finally:
        os.close(fd)
    assert b"\xab" * 16 not in path.read_bytes()
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert list(conn.iterdump()) == dump
    conn.close()


def test_a_page_that_does_not_parse_is_reported_and_nothing_is_written(tmp_path: Path) -> None:
    path = tmp_path / "db.sqlite3"
    conn, _ = _db(path)
    roots = _roots(conn)
    conn.close()
    _gaps_dirty(path)
    before = path.read_bytes()
    fd = os.open(path, os.O_RDWR)
    try:
        result = scrub(fd, [*roots, 10_000])  # a root beyond the file
    finally:
        os.close(fd)
    assert result.problems and "beyond" in result.problems[0] and result.bytes_zeroed == 0
    assert path.read_bytes() == before


def test_durability_full_is_the_default_and_normal_the_opt_out(tmp_path: Path) -> None:
    with MemoryEngine.open(tmp_path / "a", embedder="hashing") as engine:
        assert engine._store._writer.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
    with MemoryEngine.open(tmp_path / "b", embedder="hashing", config={"storage": {"durability": "normal"}}) as eng:
        assert eng._store._writer.execute("PRAGMA synchronous").fetchone()[0] == 1  # NORMAL
    with pytest.raises(ConfigError, match="durability"):
        MemoryEngine.open(tmp_path / "c", embedder="hashing", config={"storage": {"durability": "off"}})
    with pytest.raises(ConfigError, match="durability"):
        TruthStore(tmp_path / "d", durability="off")
    assert not (tmp_path / "c").exists() and not (tmp_path / "d").exists()


def test_a_read_after_close_is_a_store_error(tmp_path: Path) -> None:
    from memory_ext.errors import StoreError

    store = TruthStore(tmp_path / "s")
    conn = store.reader()
    cursor = conn.execute("SELECT key FROM meta")
    store.close()
    with pytest.raises(StoreError, match="closed"):
        conn.execute("SELECT 1")
    with pytest.raises(StoreError, match="closed"):
        cursor.fetchall()


def test_only_the_indexers_derived_commits_skip_the_fsync(tmp_path: Path) -> None:
    store = TruthStore(tmp_path / "s")
    try:
        with store.transaction("index vectors") as conn:  # the durable queue makes them again if lost
            assert conn.execute("PRAGMA synchronous").fetchone()[0] == 1
        with store.transaction("add_turns") as conn:
            assert conn.execute("PRAGMA synchronous").fetchone()[0] == 2
        with pytest.raises(RuntimeError), store.transaction("index vectors"):
            raise RuntimeError("rolled back")
        assert store._writer is not None and store._writer.execute("PRAGMA synchronous").fetchone()[0] == 2
    finally:
        store.close()
