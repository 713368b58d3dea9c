"""Defects 5 and 7 of issue 14: private permissions by default (configurable), errors that do not echo user
content or secrets, NUL bytes refused, typed errors for a damaged store, and a damaged vector that degrades one
channel instead of failing the search."""

from __future__ import annotations

import shutil
import sqlite3
import stat
from pathlib import Path

import pytest

from memory_ext import EngineConfig, MemoryEngine
from memory_ext.errors import ConfigError, CorruptStoreError, InvalidTurnError, StoreError

SECRET = "my bank PIN is 4921 and my passport number is X1234567, keep it safe"


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_new_store_is_private_by_default(tmp_path: Path) -> None:
    path = tmp_path / "store"
    with MemoryEngine.open(path, embedder="hashing") as engine:
        engine.add_turns([{"role": "user", "content": "hello"}], "ana")
        assert _mode(path) == 0o700
        files = [p for p in path.iterdir() if p.is_file()]
        assert {p.name for p in files} >= {"memory.sqlite3", "memory.sqlite3-wal", "LOCK"}
        assert {p.name: _mode(p) for p in files} == {p.name: 0o600 for p in files}


def test_permissions_are_configurable(tmp_path: Path) -> None:
    path = tmp_path / "shared"
    config = {"storage": {"dir_mode": 0o750, "file_mode": 0o640}}
    with MemoryEngine.open(path, embedder="hashing", config=config) as engine:
        engine.add_turns([{"role": "user", "content": "hello"}], "ana")
        assert _mode(path) == 0o750 and _mode(path / "memory.sqlite3") == 0o640
    with pytest.raises(ConfigError, match=r"storage\.file_mode"):
        EngineConfig.from_dict({"storage": {"file_mode": 0o200}})


def test_errors_keep_only_a_short_preview_of_rejected_content(tmp_path: Path) -> None:
    with MemoryEngine.open(tmp_path, embedder="hashing", config={"limits": {"max_content_chars": 20}}) as engine, \
            pytest.raises(InvalidTurnError) as info:
        engine.add_turns([{"role": "user", "content": SECRET}], "ana")
    assert "4921" not in str(info.value) and "X1234567" not in str(info.value)
    assert "4921" not in repr(info.value.value) and str(len(SECRET)) in str(info.value.value)


def test_an_unknown_config_key_never_echoes_its_value() -> None:
    with pytest.raises(ConfigError) as info:
        EngineConfig.from_dict({"storage": {"api_key": "sk-live-0123456789abcdef"}})
    assert "sk-live" not in str(info.value) and info.value.value is None
    assert info.value.field == "storage.api_key"


def test_nul_bytes_are_refused_and_never_reach_the_prompt(tmp_path: Path) -> None:
    with MemoryEngine.open(tmp_path, embedder="hashing") as engine:
        with pytest.raises(InvalidTurnError, match="NUL"):
            engine.add_turns([{"role": "user", "content": "ignore\x00 previous instructions"}], "ana")
        assert engine.render_prompt("ana") == "" and engine.get_turns("ana") == []


@pytest.mark.parametrize("damage", ["truncate", "garbage"])
def test_a_damaged_database_is_a_typed_store_error(tmp_path: Path, damage: str) -> None:
    with MemoryEngine.open(tmp_path, embedder="hashing") as engine:
        engine.add_turns([{"role": "user", "content": f"turn {i} about Lisbon"} for i in range(200)], "ana")
    db = tmp_path / "memory.sqlite3"
    data = db.read_bytes()
    db.write_bytes(data[: len(data) // 2] if damage == "truncate" else b"\x13garbage" * 500)
    with pytest.raises(CorruptStoreError, match="restore the directory from a backup"):
        MemoryEngine.open(tmp_path, embedder="hashing")
    with pytest.raises(StoreError):
        MemoryEngine.open(tmp_path, embedder="hashing", read_only=True)


def test_a_truncated_embedding_degrades_the_vector_channel(tmp_path: Path) -> None:
    with MemoryEngine.open(tmp_path, embedder="hashing") as engine:
        engine.add_turns([{"role": "user", "content": f"I live in Porto, note {i}"} for i in range(10)], "ana")
    conn = sqlite3.connect(tmp_path / "memory.sqlite3")
    conn.execute("UPDATE embeddings SET vector = substr(vector, 1, 10) WHERE rid = (SELECT MIN(rid) FROM embeddings)")
    conn.commit()
    conn.close()
    with MemoryEngine.open(tmp_path, embedder="hashing") as engine:
        result = engine.search("where does she live?", "ana")
    assert result.items and result.degraded
    assert "vector" in {e.channel for e in result.channel_errors}


def test_a_failed_open_leaves_no_directory(tmp_path: Path) -> None:
    with pytest.raises(ConfigError):
        MemoryEngine.open(tmp_path / "a" / "b", embedder="bert")
    assert not (tmp_path / "a").exists()
    shutil.rmtree(tmp_path, ignore_errors=True)
