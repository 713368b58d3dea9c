"""``memext serve`` as a process: it owns the store, a second one gets a one-line error, it refuses to bind
beyond loopback without tokens, it reads MEMORY_EXT_*, it shuts down gracefully (the store is released), and a
path with no store is refused unless --create."""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path

import httpx
import pytest

from memory_ext import MemoryEngine

from .conftest import free_port, serve_command, subprocess_env, wait_ready


def test_one_process_owns_the_store(tmp_path: Path) -> None:
    store, port = tmp_path / "store", free_port()
    env = subprocess_env(MEMORY_EXT_PATH=str(store), MEMORY_EXT_EMBEDDER="hashing", MEMORY_EXT_PORT=str(port),
                         MEMORY_EXT_TOKENS="env-token-0123456789")
    first = subprocess.Popen(serve_command("--create"), env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
    try:
        url = f"http://127.0.0.1:{port}"
        wait_ready(url, first)
        headers = {"Authorization": "Bearer env-token-0123456789"}
        added = httpx.post(url + "/v1/turns", headers=headers, timeout=30,
                           json={"user_id": "ana", "turns": [{"role": "user", "content": "I keep bees."}]})
        assert added.status_code == 200
        second = subprocess.run(serve_command("--path", str(store), "--embedder", "hashing", "--port",
                                              str(free_port())),
                                env=subprocess_env(), capture_output=True, text=True, timeout=120, check=False)
        assert second.returncode == 2
        lines = second.stderr.strip().splitlines()
        assert lines[-1].startswith("memext: error: store") and "locked by another writer process" in lines[-1]
        assert "Traceback" not in second.stderr
        stdio = subprocess.run(serve_command("--stdio", "--path", str(store), "--embedder", "hashing"),
                               env=subprocess_env(), capture_output=True, text=True, timeout=120, check=False, input="")
        assert stdio.returncode == 2 and "locked by another writer process" in stdio.stderr
        assert stdio.stdout == ""  # nothing but MCP ever goes to stdout
    finally:
        first.send_signal(signal.SIGTERM)
        _, stderr = first.communicate(timeout=60)
    # uvicorn finishes the requests in flight, runs the shutdown (which closes the engine), then lets SIGTERM end it
    assert first.returncode in (0, -signal.SIGTERM)
    assert "engine closed" in stderr and "env-token-0123456789" not in stderr and "bees" not in stderr
    with MemoryEngine.open(store, embedder="hashing") as engine:  # released, and the write is there
        assert [t.content for t in engine.get_turns("ana")] == ["I keep bees."]


def test_refuses_to_bind_beyond_loopback_without_tokens(tmp_path: Path) -> None:
    out = subprocess.run(serve_command("--path", str(tmp_path / "store"), "--embedder", "hashing", "--host", "0.0.0.0",
                                       "--port", str(free_port())),
                         env=subprocess_env(), capture_output=True, text=True, timeout=120, check=False)
    assert out.returncode == 2
    assert "needs bearer tokens" in out.stderr and "Traceback" not in out.stderr
    assert not (tmp_path / "store").exists()  # refused before the store was opened


@pytest.mark.parametrize("mode", [(), ("--stdio",)], ids=["http", "stdio"])
def test_a_path_with_no_store_is_refused_unless_create(tmp_path: Path, mode: tuple[str, ...]) -> None:
    """A typo in a desktop client's configuration (``memroy`` for ``memory``) must not serve an empty memory."""
    with MemoryEngine.open(tmp_path / "memory", embedder="hashing") as engine:
        engine.add_turns([{"role": "user", "content": "Maya keeps bees."}], "maya")
    typo = tmp_path / "memroy"
    out = subprocess.run(serve_command(*mode, "--path", str(typo), "--embedder", "hashing", "--port",
                                       str(free_port())),
                         env=subprocess_env(), capture_output=True, text=True, timeout=120, check=False, input="")
    assert out.returncode == 2 and "Traceback" not in out.stderr and out.stdout == ""
    last = out.stderr.strip().splitlines()[-1]
    assert last == f"memext: error: no memory-ext store at {str(typo)!r}; check the path, or pass --create to make " \
                   "a new, empty store there"
    assert not typo.exists()  # nothing was created
    created = subprocess.run(serve_command("--stdio", "--create", "--path", str(typo), "--embedder", "hashing"),
                             env=subprocess_env(), capture_output=True, text=True, timeout=120, check=False, input="")
    assert created.returncode == 0, created.stderr
    with MemoryEngine.open(typo, embedder="hashing", read_only=True) as engine:  # a new, empty store
        assert engine.namespaces() == []
