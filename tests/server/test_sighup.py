"""``kill -HUP`` a running ``memext serve``: it re-reads its tokens file and keeps serving — a removed token stops
working at once, a new one works, a broken file keeps the tokens in use — and ``MEMORY_EXT_TOKENS`` stays."""

from __future__ import annotations

import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from .conftest import free_port, serve_command, subprocess_env, wait_ready

pytestmark = pytest.mark.skipif(sys.platform == "win32" or not hasattr(signal, "SIGHUP"), reason="POSIX signals")

OLD, NEW, ENV_TOKEN = "old-file-token-0123", "new-file-token-0123", "env-token-0123456789"


@dataclass
class Served:
    url: str
    proc: subprocess.Popen[str]
    lines: queue.Queue[str]

    def status(self, token: str) -> int:
        return httpx.get(self.url + "/v1/namespaces", headers={"Authorization": f"Bearer {token}"},
                         timeout=30).status_code

    def hangup(self) -> None:
        self.proc.send_signal(signal.SIGHUP)

    def until(self, token: str, status: int) -> None:
        """Poll until ``token`` gets ``status`` (pytest-timeout ends a wait that never ends)."""
        while self.status(token) != status:
            assert self.proc.poll() is None, "the server died"
            time.sleep(0.05)

    def wait_line(self, text: str) -> str:
        while True:
            line = self.lines.get()  # the reader thread puts "" at the end of the stream
            assert line, f"the server's log ended before {text!r}"
            if text in line:
                return line


@contextmanager
def _serve(tmp_path: Path, *args: str, **env: str) -> Iterator[Served]:
    port = free_port()
    proc = subprocess.Popen(serve_command("--path", str(tmp_path / "store"), "--create", "--embedder", "hashing",
                                          "--port", str(port), *args),
                            env=subprocess_env(**env), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    url = f"http://127.0.0.1:{port}"
    lines: queue.Queue[str] = queue.Queue()
    try:
        wait_ready(url, proc)

        def read() -> None:
            assert proc.stderr is not None
            for line in proc.stderr:
                lines.put(line)
            lines.put("")

        threading.Thread(target=read, daemon=True).start()
        yield Served(url, proc, lines)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)


def test_sighup_rereads_the_tokens_file(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens"
    tokens.write_text(f"{OLD}\n")
    with _serve(tmp_path, "--tokens-file", str(tokens), MEMORY_EXT_TOKENS=ENV_TOKEN) as served:
        assert (served.status(OLD), served.status(NEW), served.status(ENV_TOKEN)) == (200, 401, 200)

        tokens.write_text(f"# rotated\n{NEW} ana\n")
        served.hangup()
        served.until(OLD, 401)  # the removed token stops working, without a restart
        assert served.proc.poll() is None
        assert (served.status(NEW), served.status(ENV_TOKEN)) == (200, 200)  # the env's token stays as started
        pinned = httpx.get(served.url + "/v1/turns", params={"user_id": "ben"},
                           headers={"Authorization": f"Bearer {NEW}"}, timeout=30)
        assert pinned.status_code == 403  # the file's pin holds

        tokens.write_text("short\n")  # a bad line: the tokens in use stay
        served.hangup()
        served.wait_line("could not re-read the tokens file")
        assert (served.status(NEW), served.status(OLD)) == (200, 401)
        tokens.unlink()  # a missing file: the same
        served.hangup()
        served.wait_line("could not re-read the tokens file")
        assert served.status(NEW) == 200

        tokens.write_text("")  # every file token removed: nothing opens, the env's token still works
        served.hangup()
        served.until(NEW, 401)
        assert served.status(ENV_TOKEN) == 200
        assert httpx.get(served.url + "/v1/namespaces", timeout=30).status_code == 401
        assert served.proc.poll() is None


def test_sighup_without_a_tokens_file_keeps_serving(tmp_path: Path) -> None:
    with _serve(tmp_path) as served:
        served.hangup()
        served.wait_line("no tokens file to re-read")
        assert served.proc.poll() is None
        assert httpx.get(served.url + "/healthz", timeout=30).status_code == 200


def test_a_sighup_while_the_server_starts_does_not_kill_it(tmp_path: Path) -> None:
    """Hangups sent from the moment the store starts opening until the server answers: it comes up and lives."""
    port = free_port()
    proc = subprocess.Popen(serve_command("--path", str(tmp_path / "store"), "--create", "--embedder", "hashing",
                                          "--port", str(port), "--log-level", "info"),
                            env=subprocess_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    url = f"http://127.0.0.1:{port}"
    try:
        assert proc.stderr is not None
        for line in proc.stderr:  # the handler is in place before this line is logged
            if "opening the store" in line:
                break
        else:
            raise AssertionError("the server never logged that it opens the store")
        threading.Thread(target=lambda: [None for _ in proc.stderr or ()], daemon=True).start()  # drain the log
        sent = 0
        while True:  # (pytest-timeout ends a server that never answers)
            proc.send_signal(signal.SIGHUP)
            sent += 1
            assert proc.poll() is None, f"the server died after {sent} hangup(s) during its start"
            try:
                if httpx.get(url + "/healthz", timeout=5).status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.01)
        proc.send_signal(signal.SIGHUP)
        assert httpx.get(url + "/healthz", timeout=30).status_code == 200 and proc.poll() is None
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
