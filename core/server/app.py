"""One ASGI application: REST under ``/v1``, MCP (streamable HTTP) at ``/mcp``, ``/healthz``, ``/readyz``,
OpenAPI at ``/openapi.json`` (``/docs`` renders it), the inspector page at ``/`` (:mod:`memory_ext.server.inspector`).

Every route sits behind the same guards (:mod:`memory_ext.server.guards`): the ``Host`` and browser ``Origin``
headers (421 / 403), then the bearer token (401), then the body size (413); a refusal sent before the body was
read still reaches clients that send the whole body first (``DrainMiddleware``).

The process that builds it owns the engine (the store's single writer). Engine calls run in worker threads, so
a slow search never blocks the event loop; reads run in parallel and the engine serialises writes. Shutting
down (SIGINT / SIGTERM to uvicorn) lets requests in flight finish, then closes the engine; SIGHUP calls
``on_sighup`` (``memext serve`` re-reads its tokens files) and the server keeps serving.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import threading
from collections.abc import AsyncIterator, Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from .. import __version__
from ..engine import MemoryEngine
from ..errors import MemoryExtError
from ..telemetry import face
from . import inspector
from .auth import AuthMiddleware, PermissionDenied
from .guards import DEFAULT_MAX_BODY_BYTES, BodyLimitMiddleware, DrainMiddleware, HostGuardMiddleware, HostPolicy
from .mcp_tools import build_mcp
from .rest import build_router
from .rest_items import build_items_router
from .schemas import error_payload, plain_error
from .settings import TokenTable

if TYPE_CHECKING:
    from .oauth_config import OAuthConfig

__all__ = ["build_app"]

logger = logging.getLogger("memory_ext.server")
WORKER_THREADS = 16
"""Threads that run engine calls (searches in parallel; the engine serialises writes)."""
BEARER_SCHEME = "bearerAuth"
"""The OpenAPI security scheme of the ``/v1`` operations (``Authorization: Bearer <token>``)."""


def _validation_field(loc: tuple[Any, ...]) -> str:
    parts = [str(p) for p in (loc[1:] if loc and loc[0] in ("body", "query", "path", "header") else loc)]
    return ".".join(parts) or "body"


def _with_bearer_scheme(schema: dict[str, Any]) -> dict[str, Any]:
    """Declare the bearer scheme and make every ``/v1`` operation reference it (Swagger's Authorize button)."""
    schema.setdefault("components", {}).setdefault("securitySchemes", {})[BEARER_SCHEME] = {
        "type": "http", "scheme": "bearer",
        "description": "A token the server was started with (--token, --tokens-file, MEMORY_EXT_TOKENS); "
                       "a loopback server without tokens needs none."}
    for path, operations in schema.get("paths", {}).items():
        if path.startswith("/v1/") and isinstance(operations, dict):
            for operation in operations.values():
                if isinstance(operation, dict):
                    operation["security"] = [{BEARER_SCHEME: []}]
    return schema


def build_app(engine: MemoryEngine, *, tokens: TokenTable | None = None, host: str = "127.0.0.1",
              close_engine: bool = True, allowed_hosts: Iterable[str] = (), allowed_origins: Iterable[str] = (),
              max_body_bytes: int = DEFAULT_MAX_BODY_BYTES, require_tokens: bool | None = None,
              on_sighup: Callable[[], object] | None = None, oauth: OAuthConfig | None = None) -> ASGIApp:
    """The ASGI app serving ``engine``; with ``tokens``, every call but health and OpenAPI needs a bearer token.

    ``close_engine`` closes the engine when the app shuts down. ``host`` is the bind address: with
    ``allowed_hosts`` and ``allowed_origins`` it decides which ``Host`` and ``Origin`` headers are answered (see
    :class:`~memory_ext.server.guards.HostPolicy`; the MCP transport gets the same lists). A body larger than
    ``max_body_bytes`` is 413. ``require_tokens`` (default: whether ``tokens`` has any) keeps tokens required
    even when the table is empty. ``on_sighup`` is called on SIGHUP while the app runs (POSIX, when it runs in
    the main thread). ``oauth`` makes the server an OAuth 2.1 resource server (and with ``mode="builtin"`` its
    authorization server too; the static ``tokens`` are the owner's, see :mod:`memory_ext.server.oauth`).
    """
    required = (bool(tokens) or oauth is not None) if require_tokens is None else require_tokens
    oauth_server = None
    if oauth is not None:
        from .oauth import OAuthServer

        oauth_server = OAuthServer(oauth, tokens if tokens is not None else TokenTable())
    policy = HostPolicy.build(host, allowed_hosts=allowed_hosts, allowed_origins=allowed_origins,
                              tokens_required=required)
    mcp = build_mcp(lambda: app.state.engine)
    mcp.streamable_http_app(streamable_http_path="/mcp", host=host,  # creates the session manager
                            transport_security=policy.mcp_transport_security(), max_request_body_size=max_body_bytes)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        asyncio.get_running_loop().set_default_executor(
            ThreadPoolExecutor(max_workers=WORKER_THREADS, thread_name_prefix="memory-ext-serve"))
        hangup = _install_sighup(on_sighup)
        app.state.ready = True
        try:
            async with mcp.session_manager.run():
                yield
        finally:
            app.state.ready = False
            if hangup:
                asyncio.get_running_loop().remove_signal_handler(signal.SIGHUP)
            if oauth_server is not None:
                oauth_server.close()
            if close_engine:
                await asyncio.to_thread(engine.close)
            logger.info("memory-ext server stopped; engine closed")

    app = FastAPI(title="memory-ext", version=__version__, lifespan=lifespan,
                  description="Long-term memory for LLM agents: one store shared by many clients. Every call "
                              "names a user (user_id); errors are {\"error\": {type, field, message, fix}}.")
    app.state.engine = engine
    app.state.ready = False
    app.state.max_body_bytes = max_body_bytes
    default_openapi = app.openapi
    app.openapi = lambda: app.openapi_schema or _with_bearer_scheme(default_openapi())  # type: ignore[method-assign]
    if oauth_server is not None:
        with_bearer = app.openapi
        app.openapi = lambda: oauth_server.openapi(with_bearer(), BEARER_SCHEME)  # type: ignore[method-assign]
        app.router.routes.extend(oauth_server.routes())
    app.include_router(build_router())
    app.include_router(build_items_router())
    app.router.routes.append(Route("/mcp", endpoint=StreamableHTTPASGIApp(mcp.session_manager),
                                   methods=["GET", "POST", "DELETE"]))
    app.router.routes.extend(inspector.routes())

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
        if exc.status_code == 400:  # FastAPI could not read the body (e.g. JSON nested past its parser's limit)
            return JSONResponse(plain_error("InvalidArgumentError", f"body: {exc.detail}", field="body",
                                            fix="send one JSON document, nested at most 100 levels deep"),
                                status_code=400)
        kind = "NotFoundError" if exc.status_code == 404 else "HTTPError"
        return JSONResponse(plain_error(kind, str(exc.detail), fix="see /openapi.json for the routes"),
                            status_code=exc.status_code)

    @app.exception_handler(Exception)
    async def unexpected(_: Request, exc: Exception) -> JSONResponse:
        logger.error("unexpected %s while serving a request", type(exc).__name__,
                     exc_info=logger.isEnabledFor(logging.DEBUG))
        status, body = error_payload(exc)
        return JSONResponse(body, status_code=status)

    authenticated = AuthMiddleware(BodyLimitMiddleware(_FaceMiddleware(app), max_body_bytes),
                                   tokens if tokens is not None else TokenTable(), required=required,
                                   oauth=oauth_server)
    return DrainMiddleware(HostGuardMiddleware(authenticated, policy))


class _FaceMiddleware:
    """The face engine calls of a request show in their telemetry (:mod:`memory_ext.telemetry`): ``rest`` for
    ``/v1`` (the inspector page calls it too), ``mcp`` for ``/mcp`` (its tools run in the session's own task and
    set it themselves), ``http`` for the rest (``/readyz``)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = str(scope.get("path") or "") if scope["type"] == "http" else ""
        name = "rest" if path.startswith("/v1/") else "mcp" if path.startswith("/mcp") else "http"
        with face(name):
            await self.app(scope, receive, send)


def _install_sighup(on_sighup: Callable[[], object] | None) -> bool:
    """Call ``on_sighup`` on SIGHUP instead of dying (the default action); True when the handler is installed."""
    if on_sighup is None or not hasattr(signal, "SIGHUP") or threading.current_thread() is not threading.main_thread():
        return False

    def hangup() -> None:
        try:
            on_sighup()
        except Exception:  # a failed reload must not stop the server
            logger.exception("SIGHUP handler failed; the server keeps serving as before")

    asyncio.get_running_loop().add_signal_handler(signal.SIGHUP, hangup)
    return True
