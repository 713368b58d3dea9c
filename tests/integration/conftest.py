"""Servers the integration tests start themselves: a real ``chroma run`` on a free loopback port.

The server runs once per test session in a temporary folder and is terminated at the end. The tests are skipped
when chromadb or the ``chroma`` executable (next to this Python first, then on PATH) is missing, unless
``MEMORY_EXT_REQUIRE_SERVERS=1`` (CI), which turns that skip into a failure. A server that does not come up is a
failure, with the end of its log.
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
from dataclasses import dataclass
from pathlib import Path

import pytest

HOST = "127.0.0.1"
REQUIRE_SERVERS = os.environ.get("MEMORY_EXT_REQUIRE_SERVERS") == "1"
STARTUP_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class ChromaServer:
    host: str
    port: int
    path: Path
    log: Path
    startup_s: float


def chroma_executable() -> str | None:
    """The ``chroma`` CLI of this interpreter's environment, else the one on PATH."""
    bindir = Path(sys.executable).parent
    for name in ("chroma", "chroma.exe"):
        candidate = bindir / name
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return shutil.which("chroma")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def _heartbeat(url: str) -> bool:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback: never via a proxy
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


@pytest.fixture(scope="session")
def chroma_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ChromaServer]:
    exe = chroma_executable()
    try:
        import chromadb  # noqa: F401
    except ImportError:
        exe = None
    if exe is None:
        why = "chromadb or the `chroma` executable (next to this Python or on PATH) is missing: " \
              "pip install 'memory-ext[chroma]'"
        if REQUIRE_SERVERS:
            pytest.fail(f"MEMORY_EXT_REQUIRE_SERVERS=1 but {why}")
        pytest.skip(why)
    path = tmp_path_factory.mktemp("chroma-server")
    log = path.parent / f"{path.name}.log"
    port = free_port()
    env = dict(os.environ, ANONYMIZED_TELEMETRY="False")
    saved_no_proxy = {key: os.environ.get(key) for key in ("NO_PROXY", "no_proxy")}
    for key in saved_no_proxy:  # HttpClient (httpx) honours proxy variables: keep loopback traffic local
        os.environ[key] = ",".join(filter(None, [os.environ.get(key), HOST, "localhost"]))
    started = time.monotonic()
    with log.open("wb") as out:
        proc = subprocess.Popen([exe, "run", "--path", str(path), "--host", HOST, "--port", str(port)],
                                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env)
    try:
        url = f"http://{HOST}:{port}/api/v2/heartbeat"
        while not _heartbeat(url):
            if proc.poll() is not None:
                pytest.fail(f"`chroma run` exited with code {proc.returncode} before answering:\n{_tail(log)}")
            if time.monotonic() - started > STARTUP_TIMEOUT_S:
                pytest.fail(f"`chroma run` did not answer {url} within {STARTUP_TIMEOUT_S:.0f}s:\n{_tail(log)}")
            time.sleep(0.05)
        yield ChromaServer(HOST, port, path, log, time.monotonic() - started)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=15)
        for key, value in saved_no_proxy.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
