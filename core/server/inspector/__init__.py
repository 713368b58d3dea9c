"""The inspector: a single-page view of the store at ``/``, served by ``memext serve`` from the package itself.

The page (``index.html``, ``inspector.js``, ``inspector.css``, ``icon.svg`` in this directory: plain HTML and
vanilla JavaScript, no framework, nothing fetched from another origin, so it works offline) holds no data; it
calls the REST API under ``/v1`` with ``fetch`` on the same origin. ``/`` and the assets are the only paths the
token check lets through (:data:`PAGE_PATHS`); every data call needs the token the page asks for (kept in the
tab's ``sessionStorage``). Every answer carries a strict Content-Security-Policy (``default-src 'self'``, no
inline script or style, no framing), ``X-Frame-Options: DENY``, ``Referrer-Policy: no-referrer`` and
``X-Content-Type-Options: nosniff``; stored memories are shown with ``textContent`` only, never parsed as HTML.
"""

from __future__ import annotations

from functools import cache
from importlib.resources import files

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

__all__ = ["ASSETS", "PAGE_PATHS", "SECURITY_HEADERS", "routes"]

ASSETS: dict[str, str] = {
    "inspector.js": "text/javascript; charset=utf-8",
    "inspector.css": "text/css; charset=utf-8",
    "icon.svg": "image/svg+xml",
}
"""The files under ``/inspector/`` and their content types (anything else there is 404)."""
PAGE = "index.html"
PAGE_PATHS = frozenset({"/", *(f"/inspector/{name}" for name in ASSETS)})
"""The paths that need no token: the page and its assets (they hold no data)."""

CONTENT_SECURITY_POLICY = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; "
                           "connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; "
                           "frame-ancestors 'none'")
SECURITY_HEADERS: dict[str, str] = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "X-Content-Type-Options": "nosniff",
    "Cache-Control": "no-cache",
}
"""Sent with the page and every asset."""


@cache
def _read(name: str) -> bytes:
    return files(__name__).joinpath(name).read_bytes()


def _response(name: str, media_type: str) -> Response:
    return Response(_read(name), media_type=media_type, headers=SECURITY_HEADERS)


async def _page(_: Request) -> Response:
    return _response(PAGE, "text/html; charset=utf-8")


async def _asset(request: Request) -> Response:
    name = request.path_params["name"]
    media_type = ASSETS.get(name)
    if media_type is None:
        return Response(b"not found", status_code=404, media_type="text/plain; charset=utf-8",
                        headers=SECURITY_HEADERS)
    return _response(name, media_type)


def routes() -> list[Route]:
    """``GET /`` (the page, whatever its query string: the views' deep links) and ``GET /inspector/{name}``."""
    return [Route("/", _page, methods=["GET", "HEAD"], include_in_schema=False),
            Route("/inspector/{name}", _asset, methods=["GET", "HEAD"], include_in_schema=False)]
