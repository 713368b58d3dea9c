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

from typing import TYPE_CHECKING, Any

from .settings import Principal, ServerSettings, TokenTable, is_loopback

if TYPE_CHECKING:
    from starlette.types import ASGIApp

    from ..engine import MemoryEngine

__all__ = ["Principal", "ServerSettings", "TokenTable", "build_app", "is_loopback", "require_server"]


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
