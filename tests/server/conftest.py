"""Live servers for the server tests: each starts its own ``memext serve`` on a free loopback port in a temporary
store (hashing embedder) and stops it — in a thread of the test process (uvicorn, the real ASGI app) or as a
subprocess (the real command line)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

import memory_ext.bench.serve as serve_bench
from memory_ext.store.chroma_server import free_port

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
pytest.importorskip("mcp")

import uvicorn

from memory_ext import MemoryEngine
from memory_ext.server import TokenTable, build_app

ADMIN = "admin-token-0123456789"
ANA = "ana-token-0123456789"
"""ADMIN reaches every user; ANA is pinned to the user "ana"."""


@dataclass
class LiveServer:
    url: str
    engine: MemoryEngine
    path: Path

    def client(self, token: str | None = ADMIN) -> httpx.Client:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return httpx.Client(base_url=self.url, headers=headers, timeout=60)


def start_thread_server(path: Path, tokens: TokenTable | None,
                        **app_options: Any) -> tuple[LiveServer, uvicorn.Server, threading.Thread]:
    """``app_options`` go to ``build_app`` (``allowed_hosts``, ``allowed_origins``, ``max_body_bytes``, ...)."""
    engine = MemoryEngine.open(path, embedder="hashing")
    port = free_port()
    app = build_app(engine, tokens=tokens, host="127.0.0.1", **app_options)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", access_log=False))
    thread = threading.Thread(target=server.run, name=f"memext-serve-{port}", daemon=True)
    thread.start()
    while not server.started:  # (a server that never starts: pytest-timeout ends the test)
        if not thread.is_alive():
            engine.close()
            raise RuntimeError("the test server did not start")
        time.sleep(0.02)
    return LiveServer(f"http://127.0.0.1:{port}", engine, path), server, thread


def _serving(store: Path, tokens: TokenTable | None, **app_options: Any) -> Iterator[LiveServer]:
    live, server, thread = start_thread_server(store, tokens, **app_options)
    try:
        yield live
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        live.engine.close()


@pytest.fixture
def live_server(tmp_path: Path) -> Iterator[LiveServer]:
    """A uvicorn server (REST + MCP) in a thread, with an admin token and a token pinned to "ana"."""
    yield from _serving(tmp_path / "store", TokenTable.parse([ADMIN, f"{ANA}:ana"]))


@pytest.fixture
def open_server(tmp_path: Path) -> Iterator[LiveServer]:
    """A loopback server without tokens (what a single-user desktop setup runs)."""
    yield from _serving(tmp_path / "store", None)


def serve_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "memory_ext.cli", "serve", *args]


def subprocess_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORY_EXT_")}
    root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (env.get("PYTHONPATH"), root) if p)
    env.update(extra)
    return env


def wait_ready(url: str, proc: subprocess.Popen[str], timeout: float = 60) -> None:
    serve_bench.wait_ready(url, proc, timeout)
