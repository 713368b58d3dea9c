"""One ASGI application: REST under ``/v1``, MCP (streamable HTTP) at ``/mcp``, ``/healthz``, ``/readyz``,
OpenAPI at ``/openapi.json`` (``/docs`` renders it).

The process that builds it owns the engine (the store's single writer). Engine calls run in worker threads, so
a slow search never blocks the event loop; reads run in parallel and the engine serialises writes. Shutting
down (SIGINT / SIGTERM to uvicorn) lets requests in flight finish, then closes the engine.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Route
from starlette.types import ASGIApp

from .. import __version__
from ..engine import MemoryEngine
from ..errors import MemoryExtError
from .auth import AuthMiddleware, PermissionDenied
from .mcp_tools import build_mcp
from .rest import build_router
from .rest_items import build_items_router
from .schemas import error_payload, plain_error
from .settings import TokenTable

__all__ = ["build_app"]

logger = logging.getLogger("memory_ext.server")
WORKER_THREADS = 16
"""Threads that run engine calls (searches in parallel; the engine serialises writes)."""


def _validation_field(loc: tuple[Any, ...]) -> str:
    parts = [str(p) for p in (loc[1:] if loc and loc[0] in ("body", "query", "path", "header") else loc)]
    return ".".join(parts) or "body"


def build_app(engine: MemoryEngine, *, tokens: TokenTable | None = None, host: str = "127.0.0.1",
              close_engine: bool = True) -> ASGIApp:
    """The ASGI app serving ``engine``; with ``tokens``, every call but health and OpenAPI needs a bearer token.

    ``close_engine`` closes the engine when the app shuts down. ``host`` is the bind address (the MCP transport
    turns on DNS-rebinding protection for loopback).
    """
    mcp = build_mcp(lambda: app.state.engine)
    mcp.streamable_http_app(streamable_http_path="/mcp", host=host)  # creates the session manager

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        asyncio.get_running_loop().set_default_executor(
            ThreadPoolExecutor(max_workers=WORKER_THREADS, thread_name_prefix="memory-ext-serve"))
        app.state.ready = True
        try:
            async with mcp.session_manager.run():
                yield
        finally:
            app.state.ready = False
            if close_engine:
                await asyncio.to_thread(engine.close)
            logger.info("memory-ext server stopped; engine closed")

    app = FastAPI(title="memory-ext", version=__version__, lifespan=lifespan,
                  description="Long-term memory for LLM agents: one store shared by many clients. Every call "
                              "names a user (user_id); errors are {\"error\": {type, field, message, fix}}.")
    app.state.engine = engine
    app.state.ready = False
    app.include_router(build_router())
    app.include_router(build_items_router())
    app.router.routes.append(Route("/mcp", endpoint=StreamableHTTPASGIApp(mcp.session_manager),
                                   methods=["GET", "POST", "DELETE"]))

    @app.get("/healthz", tags=["health"], summary="Liveness: the process answers")
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/readyz", tags=["health"], summary="Readiness: the engine is open and answers")
    async def readyz() -> JSONResponse:
        try:
            if not app.state.ready:
                raise RuntimeError("not started")
            await asyncio.to_thread(app.state.engine.namespaces)
        except Exception:  # noqa: BLE001 - any failure means "not ready"
            return JSONResponse(plain_error("ServerUnavailableError", "the engine is not ready",
                                            fix="retry in a moment"), status_code=503)
        return JSONResponse({"status": "ready"})

    @app.exception_handler(MemoryExtError)
    async def engine_error(_: Request, exc: MemoryExtError) -> JSONResponse:
        status, body = error_payload(exc)
        if status >= 500:
            logger.warning("engine error %s (status %d)", type(exc).__name__, status)
        return JSONResponse(body, status_code=status)

    @app.exception_handler(PermissionDenied)
    async def permission_denied(_: Request, exc: PermissionDenied) -> JSONResponse:
        return JSONResponse(plain_error("PermissionDeniedError", exc.message, field=exc.field,
                                        fix="use a token pinned to this user, or one that is not pinned"),
                            status_code=403)

    @app.exception_handler(RequestValidationError)
    async def bad_body(_: Request, exc: RequestValidationError) -> JSONResponse:
        first = exc.errors()[0] if exc.errors() else {"loc": (), "msg": "invalid request"}
        field = _validation_field(tuple(first.get("loc", ())))
        return JSONResponse(plain_error("ValidationError", f"{field}: {first.get('msg')}", field=field,
                                        fix="send the body the OpenAPI document (/openapi.json) describes"),
                            status_code=422)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        kind = "NotFoundError" if exc.status_code == 404 else "HTTPError"
        return JSONResponse(plain_error(kind, str(exc.detail), fix="see /openapi.json for the routes"),
                            status_code=exc.status_code)

    @app.exception_handler(Exception)
    async def unexpected(_: Request, exc: Exception) -> JSONResponse:
        logger.error("unexpected %s while serving a request", type(exc).__name__,
                     exc_info=logger.isEnabledFor(logging.DEBUG))
        status, body = error_payload(exc)
        return JSONResponse(body, status_code=status)

    return AuthMiddleware(app, tokens or TokenTable())
