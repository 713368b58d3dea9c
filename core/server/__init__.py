"""``memext serve``: one process owns a store and serves it to many clients.

- **MCP** (the official ``mcp`` SDK) over stdio (``memext serve --stdio``: what Claude Desktop, Cursor and Claude
  Code launch) and over streamable HTTP at ``/mcp``;
- **REST** under ``/v1`` (FastAPI; OpenAPI at ``/openapi.json``), health at ``/healthz`` and ``/readyz``;
- bearer tokens, optionally pinned to a user (required when binding anything but loopback).

:class:`memory_ext.client.RemoteEngine` speaks the REST API with the engine's own methods. Needs the ``server``
extra: ``pip install "memory-ext[server]"``.

>>> from memory_ext.server import ServerSettings
>>> ServerSettings.resolve(path="/tmp/store", env={}).port
8765
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .settings import Principal, ServerSettings, TokenTable, is_loopback

if TYPE_CHECKING:
    from starlette.types import ASGIApp

    from ..engine import MemoryEngine

__all__ = ["BackgroundServer", "Principal", "ServerSettings", "TokenTable", "background_server", "build_app",
           "is_loopback", "require_server"]


def require_server(purpose: str) -> None:
    """Raise :class:`~memory_ext.errors.MissingDependencyError` naming the ``server`` extra if a package is missing."""
    import importlib.util

    from ..errors import MissingDependencyError

    for package in ("fastapi", "uvicorn", "mcp", "httpx"):
        if importlib.util.find_spec(package) is None:
            raise MissingDependencyError(package, "server", purpose)


def build_app(engine: MemoryEngine, **kwargs: Any) -> ASGIApp:
    """The ASGI app (REST + MCP) over ``engine``; see :func:`memory_ext.server.app.build_app`."""
    require_server("memory_ext.server.build_app")
    from .app import build_app as _build

    return _build(engine, **kwargs)


@dataclass(frozen=True)
class BackgroundServer:
    """A server running in a thread of this process: its base ``url`` and the ``engine`` it owns."""

    url: str
    engine: MemoryEngine


@contextmanager
def background_server(path: str | os.PathLike[str], *, embedder: Any = None, config: Any = None,
                      host: str = "127.0.0.1", port: int = 0,
                      tokens: Iterable[str] = ()) -> Iterator[BackgroundServer]:
    """Serve the store at ``path`` from a thread of this process (REST + MCP) until the block ends.

    For tests, notebooks and examples; a deployment runs ``memext serve``. ``port=0`` picks a free port;
    ``tokens`` are ``TOKEN[:USER_ID]`` strings. The engine is closed when the block ends.

    >>> import tempfile
    >>> from memory_ext.client import RemoteEngine
    >>> with background_server(tempfile.mkdtemp(), embedder="hashing") as server:
    ...     with RemoteEngine(server.url) as engine:
    ...         _ = engine.add_turns([{"role": "user", "content": "I keep bees"}], "zoe")
    ...         engine.search("bees", "zoe", k=1).items[0].text
    'I keep bees'
    """
    require_server("memory_ext.server.background_server")
    import uvicorn

    from ..engine import MemoryEngine
    from .app import build_app as _build

    table = TokenTable.parse(tokens)
    settings = ServerSettings(path=str(path), host=host, port=port, tokens=table)
    settings.check_binding()
    engine = MemoryEngine.open(path, embedder=embedder, config=config)
    try:
        app = _build(engine, tokens=table, host=host, close_engine=False)
        server = uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="warning", access_log=False))
        thread = threading.Thread(target=server.run, name="memext-serve", daemon=True)
        thread.start()
        try:
            while not server.started:
                if not thread.is_alive():
                    raise RuntimeError(f"the server could not start on {host}:{port}")
                time.sleep(0.01)
            bound = server.servers[0].sockets[0].getsockname()[1]
            yield BackgroundServer(url=f"http://{host}:{bound}", engine=engine)
        finally:
            server.should_exit = True
            thread.join(timeout=30)
    finally:
        engine.close()
