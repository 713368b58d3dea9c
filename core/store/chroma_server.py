"""Start a local ``chroma run`` server for tests, benchmarks and trying the server stack.

>>> from memory_ext.store.chroma_server import run_chroma_server
>>> with run_chroma_server("/tmp/chroma-data") as server:  # doctest: +SKIP
...     config = {"storage": {"vector_backend": "chroma", "chroma_mode": "http",
...                           "chroma_host": server.host, "chroma_port": server.port}}

It binds to loopback only and stops the server when the block ends. Production servers are run by the
operator (docs/operations.md), not by this helper.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from ..errors import StoreError

__all__ = ["ChromaServer", "find_chroma_executable", "free_port", "run_chroma_server"]

HOST = "127.0.0.1"


@dataclass(frozen=True)
class ChromaServer:
    """A running server: where it listens, its data folder and log, its process, and how long it took to start."""

    host: str
    port: int
    path: Path
    log: Path
    process: subprocess.Popen[bytes]
    startup_s: float


def find_chroma_executable() -> str | None:
    """The ``chroma`` CLI of this interpreter's environment, else the one on PATH, else None."""
    bindir = Path(sys.executable).parent
    for name in ("chroma", "chroma.exe"):
        candidate = bindir / name
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return shutil.which("chroma")


def free_port(host: str = HOST) -> int:
    """A TCP port that is free on ``host`` right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def _answers(url: str) -> bool:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback: never through a proxy
    try:
        with opener.open(url, timeout=1) as resp:
            return resp.status == 200
    except (urllib.error.URLError, OSError):
        return False


def _tail(log: Path, lines: int = 30) -> str:
    try:
        return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


@contextmanager
def run_chroma_server(path: str | Path, *, port: int | None = None, startup_timeout_s: float = 60.0,
                      log: str | Path | None = None) -> Iterator[ChromaServer]:
    """Run ``chroma run --path PATH`` on loopback until the block ends.

    Raises :class:`~memory_ext.errors.StoreError` (with the end of the server's log) when the executable is missing,
    the server exits, or it does not answer its heartbeat within ``startup_timeout_s``.
    """
    exe = find_chroma_executable()
    if exe is None:
        raise StoreError('the `chroma` command is not installed: pip install "memory-ext[chroma]"')
    data = Path(path)
    data.mkdir(parents=True, exist_ok=True)
    log_path = Path(log) if log is not None else data.with_suffix(".log")
    port = port or free_port()
    started = time.monotonic()
    with log_path.open("wb") as out:
        process = subprocess.Popen([exe, "run", "--path", str(data), "--host", HOST, "--port", str(port)],
                                   stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                   env={**os.environ, "ANONYMIZED_TELEMETRY": "False"})
    try:
        url = f"http://{HOST}:{port}/api/v2/heartbeat"
        while not _answers(url):
            if process.poll() is not None:
                raise StoreError(f"`chroma run` exited with code {process.returncode} before answering:\n"
                                 f"{_tail(log_path)}")
            if time.monotonic() - started > startup_timeout_s:
                raise StoreError(f"`chroma run` did not answer {url} within {startup_timeout_s:.0f}s:\n"
                                 f"{_tail(log_path)}")
            time.sleep(0.05)
        yield ChromaServer(HOST, port, data, log_path, process, time.monotonic() - started)
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)
