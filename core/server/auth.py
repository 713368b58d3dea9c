"""Bearer-token authentication for the HTTP server (REST and MCP share it), and request logging without secrets.

:class:`AuthMiddleware` is plain ASGI: it resolves the ``Authorization`` header to a
:class:`~memory_ext.server.settings.Principal` and stores it in the request scope's state, where the REST routes
and the MCP tools read it. Health endpoints, the OpenAPI document and the inspector page with its assets (which hold
no data) need no token. The table is read on every
request, so tokens re-read on SIGHUP take effect at once. The log line of a request
holds its method, path (never the query string), status, duration and the token's short hash — never a token,
never a body.

A bearer token that is not one of the static tokens goes to the ``oauth`` verifier when there is one
(:class:`~memory_ext.server.oauth.OAuthServer`: the built-in authorization server's tokens or an identity
provider's JWTs); its refusals carry ``WWW-Authenticate: Bearer resource_metadata="…"``. Once verified, the
``Authorization`` header is removed from the request: no route or tool can pass a token on.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass
from typing import Any, Protocol

from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .inspector import PAGE_PATHS
from .schemas import plain_error
from .settings import LOCAL, Principal, TokenTable

__all__ = ["STATE_KEY", "AuthMiddleware", "AuthRefusal", "BearerVerifier", "PermissionDenied", "principal_of"]

STATE_KEY = "memext_principal"
PUBLIC_PATHS = frozenset({"/healthz", "/readyz", "/openapi.json", "/docs", "/docs/oauth2-redirect", "/redoc",
                          *PAGE_PATHS})

logger = logging.getLogger("memory_ext.server")


class PermissionDenied(Exception):
    """The caller's token may not do this (HTTP 403; an MCP tool error)."""

    def __init__(self, field: str | None, message: str) -> None:
        self.field, self.message = field, message
        super().__init__(message)


@dataclass(frozen=True)
class AuthRefusal:
    """Why a bearer token is refused: the status (401 or 403), the error body's parts and ``WWW-Authenticate``."""

    status: int
    error_type: str
    message: str
    fix: str
    www_authenticate: str


class BearerVerifier(Protocol):
    """Verifies bearer tokens that are not static ones (OAuth); ``public_paths`` need no token."""

    public_paths: frozenset[str]

    def challenge(self, path: str, error: str | None = None, description: str | None = None) -> str:
        """The ``WWW-Authenticate`` value of a request to ``path`` without a usable token."""

    async def authenticate(self, authorization: str, path: str) -> Principal | AuthRefusal:
        """The principal of an ``Authorization`` header value, or why it is refused."""


def principal_of(request: Request) -> Principal:
    """The caller of a request (set by :class:`AuthMiddleware`; the local principal when there is none)."""
    state = request.scope.get("state") or {}
    principal = state.get(STATE_KEY)
    return principal if isinstance(principal, Principal) else LOCAL


async def _send_json(send: Send, status: int, body: dict[str, Any], headers: list[tuple[bytes, bytes]]) -> None:
    payload = json.dumps(body).encode("utf-8")
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode()),
                            *headers]})
    await send({"type": "http.response.body", "body": payload})


class AuthMiddleware:
    """Authenticate every HTTP request (when tokens are required) and log it without secrets.

    ``required`` (default: whether ``tokens`` has any) stays as built: a table emptied by a reload refuses every
    call, it never opens the server.
    """

    def __init__(self, app: ASGIApp, tokens: TokenTable, *, required: bool | None = None,
                 oauth: BearerVerifier | None = None) -> None:
        self.app = app
        self.tokens = tokens
        self.oauth = oauth
        self.required = (bool(tokens) or oauth is not None) if required is None else required

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        path = scope.get("path", "")
        status_box = [0]

        async def logged_send(message: Message) -> None:
            if message["type"] == "http.response.start":
                status_box[0] = message["status"]
            await send(message)

        principal: Principal | None = LOCAL
        if self.required and path not in PUBLIC_PATHS and not (self.oauth and path in self.oauth.public_paths):
            headers = dict(scope.get("headers") or [])
            raw = headers.get(b"authorization")
            value = raw.decode("latin-1") if raw else None
            principal = self.tokens.authenticate(value)
            if principal is None and self.oauth is not None and value:
                outcome = await self.oauth.authenticate(value, path)
                if isinstance(outcome, AuthRefusal):
                    await _send_json(logged_send, outcome.status, plain_error(
                        outcome.error_type, outcome.message, field="Authorization", fix=outcome.fix),
                        [(b"www-authenticate", outcome.www_authenticate.encode("latin-1", "replace"))])
                    self._log(scope, status_box[0], started, None)
                    return
                principal = outcome
            if principal is None:
                message = ("missing bearer token" if raw is None else "unknown bearer token")
                challenge = (self.oauth.challenge(path) if self.oauth is not None and raw is None
                             else self.oauth.challenge(path, "invalid_token", message) if self.oauth is not None
                             else 'Bearer realm="memory-ext"')
                await _send_json(logged_send, 401, plain_error(
                    "AuthenticationError", message, field="Authorization",
                    fix="send the header 'Authorization: Bearer <token>' with a token the server was started with"
                        + (" or one its authorization server issued" if self.oauth is not None else "")),
                    [(b"www-authenticate", challenge.encode("latin-1", "replace"))])
                self._log(scope, status_box[0], started, None)
                return
            if raw is not None:  # verified: the token goes no further than this middleware
                scope["headers"] = [(k, v) for k, v in scope.get("headers") or [] if k != b"authorization"]
        scope.setdefault("state", {})[STATE_KEY] = principal
        try:
            await self.app(scope, receive, logged_send)
        finally:
            self._log(scope, status_box[0], started, principal)

    @staticmethod
    def _log(scope: Scope, status: int, started: float, principal: Principal | None) -> None:
        client = principal.client if principal is not None else "-"
        logger.info("%s %s %s %.1f ms client=%s", scope.get("method"), scope.get("path"), status,
                    (time.perf_counter() - started) * 1000, client)
