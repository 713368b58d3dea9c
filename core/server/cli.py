"""``memext serve``: the command line of the server.

::

    memext serve [--path DIR] [--create] [--embedder e5|hashing] [--config FILE]  # HTTP on 127.0.0.1:8765
                 [--host HOST] [--port PORT] [--token TOKEN[:USER]] [--tokens-file FILE] [--log-level LEVEL]
                 [--allowed-host HOST] [--allowed-origin ORIGIN] [--max-body-bytes N]
    memext serve --stdio [--user USER]                                          # MCP over stdio

Every option has a ``MEMORY_EXT_*`` environment variable (``MEMORY_EXT_PATH``, ``MEMORY_EXT_EMBEDDER``,
``MEMORY_EXT_CONFIG``, ``MEMORY_EXT_HOST``, ``MEMORY_EXT_PORT``, ``MEMORY_EXT_TOKENS``, ``MEMORY_EXT_TOKENS_FILE``,
``MEMORY_EXT_LOG_LEVEL``, ``MEMORY_EXT_ALLOWED_HOSTS``, ``MEMORY_EXT_ALLOWED_ORIGINS``, ``MEMORY_EXT_MAX_BODY_BYTES``)
and a key in the config file's ``server:`` section; the command line wins, then the environment, then the file. A
store that another process writes is refused with one line and exit status 2. SIGHUP re-reads the tokens files.

A path with no store is refused (:class:`~memory_ext.errors.StoreNotFoundError`, exit status 2): a mistyped
``--path`` in a desktop client's configuration must not become an empty memory. ``--create`` (a command-line flag
only) makes a new, empty store there when there is none, and opens the existing one otherwise.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
from typing import Any

__all__ = ["add_serve_parser", "cmd_serve"]

logger = logging.getLogger("memory_ext.server")


def add_serve_parser(sub: Any) -> None:
    """Register ``serve`` on the ``memext`` sub-command parser."""
    from .oauth_config import add_oauth_arguments
    p = sub.add_parser("serve", help="serve one store to many clients: MCP (stdio or HTTP /mcp) and REST (/v1)",
                       description="One process owns the store and serves it: MCP over stdio (--stdio) or streamable "
                                   "HTTP (/mcp), and a REST API (/v1, OpenAPI at /openapi.json).")
    p.add_argument("--path", default=None, help="store directory (default ~/.memory_ext; env MEMORY_EXT_PATH)")
    p.add_argument("--embedder", default=None, help="e5 (default) or hashing (env MEMORY_EXT_EMBEDDER)")
    p.add_argument("--config", default=None,
                   help="EngineConfig file (YAML, TOML or JSON), optionally with a server: section "
                        "(env MEMORY_EXT_CONFIG)")
    p.add_argument("--host", default=None, help="bind address (default 127.0.0.1; anything else needs tokens)")
    p.add_argument("--port", type=int, default=None, help="TCP port (default 8765)")
    p.add_argument("--create", action="store_true",
                   help="make a new, empty store at --path if there is none (without it, a path with no store is "
                        "an error: a mistyped path must not become an empty memory)")
    p.add_argument("--stdio", action="store_true", help="speak MCP over stdin/stdout instead of HTTP")
    p.add_argument("--token", action="append", default=[], metavar="TOKEN[:USER]",
                   help="a bearer token, optionally pinned to a user id (repeatable; env MEMORY_EXT_TOKENS)")
    p.add_argument("--tokens-file", default=None, help="a file of 'TOKEN [USER_ID]' lines (env MEMORY_EXT_TOKENS_FILE)")
    p.add_argument("--user", default=None, help="with --stdio: serve only this user's memory")
    p.add_argument("--log-level", default=None, choices=("debug", "info", "warning", "error"),
                   help="server log level (default info; logs never hold tokens or memory text)")
    p.add_argument("--allowed-host", action="append", default=None, metavar="HOST",
                   help="a Host name clients use besides the bound host and loopback, e.g. memory.example.com "
                        "('*': any, behind a proxy that checks Host; repeatable; env MEMORY_EXT_ALLOWED_HOSTS)")
    p.add_argument("--allowed-origin", action="append", default=None, metavar="ORIGIN",
                   help="a browser origin allowed besides the server's own, e.g. https://app.example.com "
                        "(repeatable; env MEMORY_EXT_ALLOWED_ORIGINS)")
    p.add_argument("--max-body-bytes", type=int, default=None, metavar="N",
                   help="largest request body in bytes; larger is 413 (default 8388608, 8 MiB; "
                        "env MEMORY_EXT_MAX_BODY_BYTES)")
    add_oauth_arguments(p)
    p.set_defaults(func=cmd_serve)


def _configure_logging(level: str) -> None:
    logging.basicConfig(stream=sys.stderr, level=getattr(logging, level.upper(), logging.INFO),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    for noisy in ("mcp", "httpx", "httpx2", "uvicorn.access"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


def cmd_serve(args: argparse.Namespace) -> int:
    from ..engine import MemoryEngine
    from . import require_server
    from .settings import Principal, ServerSettings

    settings = ServerSettings.resolve(path=args.path if getattr(args, "path_given", True) else None,
                                      embedder=args.embedder, config=args.config, host=args.host, port=args.port,
                                      tokens=args.token, tokens_file=args.tokens_file, log_level=args.log_level,
                                      allowed_hosts=getattr(args, "allowed_host", None),
                                      allowed_origins=getattr(args, "allowed_origin", None),
                                      max_body_bytes=getattr(args, "max_body_bytes", None))
    _configure_logging(settings.log_level)
    require_server("memext serve")
    if not args.stdio:
        from .oauth_config import resolve_oauth

        settings.oauth = resolve_oauth(args, settings)
        settings.check_binding()
        if hasattr(signal, "SIGHUP"):  # until the app's own handler takes over: a SIGHUP while the store and the
            signal.signal(signal.SIGHUP, lambda *_: settings.reload_tokens())  # model load must not kill us
        logger.info("memext serve: opening the store %s", settings.path)
    if not getattr(args, "create", False):
        from ..cli import require_store

        require_store(settings.path, settings.engine_config, fix="pass --create to make a new, empty store there")
    engine = MemoryEngine.open(settings.path, config=settings.engine_config, embedder=settings.embedder)
    try:
        if args.stdio:
            import anyio

            from .mcp_tools import build_mcp

            principal = Principal(user_id=args.user, client="stdio")
            server = build_mcp(lambda: engine, stdio_principal=principal)
            logger.info("memext serve: MCP over stdio, store %s", settings.path)
            anyio.run(server.run_stdio_async)
            return 0
        import uvicorn

        from .app import build_app

        app = build_app(engine, tokens=settings.tokens, host=settings.host, allowed_hosts=settings.allowed_hosts,
                        allowed_origins=settings.allowed_origins, max_body_bytes=settings.max_body_bytes,
                        require_tokens=settings.tokens_required, on_sighup=settings.reload_tokens,
                        oauth=settings.oauth)
        config = uvicorn.Config(app, host=settings.host, port=settings.port, log_level=settings.log_level,
                                access_log=False, lifespan="on", timeout_graceful_shutdown=30)
        logger.info("memext serve: store %s on http://%s:%d (REST /v1, MCP /mcp, %d token(s))", settings.path,
                    settings.host, settings.port, len(settings.tokens))
        try:
            uvicorn.Server(config).run()
        except SystemExit as exc:  # uvicorn exits when it cannot bind
            print(f"memext: error: could not serve on {settings.host}:{settings.port} (is the port in use?)",
                  file=sys.stderr)
            return int(exc.code or 1) if isinstance(exc.code, int) else 1
        return 0
    finally:
        engine.close()
