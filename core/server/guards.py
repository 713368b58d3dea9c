"""Guards in front of every HTTP route (REST ``/v1``, ``/mcp``, health, OpenAPI): the ``Host`` and ``Origin``
headers, and the size of request bodies.

- **Host** (DNS rebinding): a page on ``http://attacker.example:8765`` whose name the attacker re-points at
  127.0.0.1 reaches a loopback server from the victim's browser, with ``Host: attacker.example:8765``. Only the
  names of this server are answered: the bound host, the loopback names (``127.0.0.1``, ``localhost``, ``::1``),
  and ``server.allowed_hosts``; anything else is ``421``. On a wildcard bind (``0.0.0.0``, ``::``) the server
  needs tokens, which a rebinding page cannot send, so any ``Host`` is answered unless ``server.allowed_hosts``
  narrows it.
- **Origin** (cross-site requests): a browser sends ``Origin`` with every cross-site call; a request whose
  ``Origin`` is not the server's own (the scheme, host and port of its ``Host``) is ``403`` unless the origin is
  listed in ``server.allowed_origins`` (empty by default). Clients that are not browsers send no ``Origin``.
- **Body size**: a body larger than ``server.max_body_bytes`` is ``413`` — from ``Content-Length`` before a byte
  of it is read; a chunked body is counted as it arrives and cut off at the limit, never buffered whole.
- **Early answers reach the client** (:class:`DrainMiddleware`): ``urllib``, ``http.client`` and most HTTP
  libraries send the whole body before they read a byte of the answer. A refusal sent before the body was read
  (413, 401, 421, ...) is written at once, then the rest of the body is read and discarded — at most
  :data:`DRAIN_MAX_BYTES`, for at most :data:`DRAIN_MAX_SECONDS` — before the connection is closed, so the client
  reads the refusal instead of a connection reset. Nothing of the discarded body is kept.

>>> policy = HostPolicy.build("127.0.0.1", allowed_hosts=["memory.example.com"])
>>> [policy.host_allowed(h) for h in ("127.0.0.1:8765", "localhost", "[::1]:8765", "memory.example.com:443")]
[True, True, True, True]
>>> policy.host_allowed("attacker.example:8765")
False
>>> policy.origin_allowed("http://localhost:8765", "localhost:8765"), policy.origin_allowed(
...     "http://attacker.example", "localhost:8765")
(True, False)
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import ConfigError, RequestTooLargeError
from .schemas import plain_error

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["DEFAULT_MAX_BODY_BYTES", "DRAIN_MAX_BYTES", "DRAIN_MAX_SECONDS", "LOOPBACK_NAMES", "BodyLimitMiddleware",
           "DrainMiddleware", "HostGuardMiddleware", "HostPolicy", "parse_allowed_hosts", "parse_allowed_origins",
           "parse_max_body_bytes"]

logger = logging.getLogger("memory_ext.server")

DEFAULT_MAX_BODY_BYTES = 8 * 1024 * 1024
"""The default largest request body (8 MiB): far above any real call, far below what hurts the server."""
DRAIN_MAX_BYTES = 64 * 1024 * 1024
"""The most of a refused body the server reads (and discards) so the client gets to read the refusal; a larger
one (declared, or counted as it comes) is cut off: the client may then see the connection reset."""
DRAIN_MAX_SECONDS = 30.0
"""The longest the server keeps reading a refused body (a client that trickles it is cut off)."""
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "::1")
"""Names a loopback client uses; always answered."""
WILDCARD_HOSTS = frozenset({"0.0.0.0", "::", ""})
_DEFAULT_PORTS = {"http": 80, "https": 443}

HOSTS_FIX = ("if clients reach this server under that name, add it to server.allowed_hosts (--allowed-host, "
             "MEMORY_EXT_ALLOWED_HOSTS); '*' allows any name, for a server behind a proxy that checks Host")
ORIGINS_FIX = ("to let pages of that origin call this server, add the origin to server.allowed_origins "
               "(--allowed-origin, MEMORY_EXT_ALLOWED_ORIGINS), e.g. https://app.example.com")
BODY_FIX = RequestTooLargeError.FIX


# -- parsing ------------------------------------------------------------------------------------------------------
def split_host(value: str) -> tuple[str, int | None] | None:
    """``(hostname, port)`` of a ``Host`` header value (``name``, ``name:port``, ``[v6]``, ``[v6]:port``), lower
    case and without brackets; None when it is not one.

    >>> split_host("LocalHost:8765"), split_host("[::1]"), split_host("a b"), split_host("x:99999")
    (('localhost', 8765), ('::1', None), None, None)
    """
    value = value.strip().lower()
    if value.startswith("["):
        name, sep, rest = value[1:].partition("]")
        if not sep or (rest and not rest.startswith(":")):
            return None
        port_text = rest[1:] if rest else None
        try:
            name = str(ipaddress.IPv6Address(name))
        except ValueError:
            return None
    else:
        if value.count(":") > 1:  # a bare IPv6 address (not valid in Host, valid as a bind address)
            try:
                return str(ipaddress.IPv6Address(value)), None
            except ValueError:
                return None
        name, sep, port_text_ = value.partition(":")
        port_text = port_text_ if sep else None
    name = name.rstrip(".")
    if not name or any(c.isspace() or c in "/\\@?#" for c in name):
        return None
    if port_text is None:
        return name, None
    if not port_text.isdigit() or not 0 < int(port_text) <= 65535:
        return None
    return name, int(port_text)


def _host_text(name: str) -> str:
    return f"[{name}]" if ":" in name else name


def _as_strings(setting: str, value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [v.strip() for v in value.split(",") if v.strip()]
    if isinstance(value, Iterable):
        items = list(value)
        if all(isinstance(v, str) for v in items):
            return [v.strip() for v in items if v.strip()]
    raise ConfigError(setting, value, "give a list of strings (or one comma-separated string)")


def parse_allowed_hosts(value: Any) -> tuple[str, ...]:
    """``server.allowed_hosts``: host names, ``name:port``, or ``*`` (any); lower case.

    >>> parse_allowed_hosts("Memory.example.com, 10.0.0.5:8765")
    ('memory.example.com', '10.0.0.5:8765')
    """
    hosts: list[str] = []
    for item in _as_strings("server.allowed_hosts", value):
        if item == "*":
            hosts.append("*")
            continue
        wildcard_port = item.endswith(":*")
        parsed = split_host(item[:-2] if wildcard_port else item)
        if "://" in item or parsed is None:
            raise ConfigError("server.allowed_hosts", item, "give a host name as clients send it in the Host header, "
                                                            "like memory.example.com or memory.example.com:8443 "
                                                            "(no scheme, no path), or '*' for any")
        name, port = parsed
        hosts.append(_host_text(name) if port is None else f"{_host_text(name)}:{port}")
    return tuple(dict.fromkeys(hosts))


def _split_origin(value: str) -> tuple[str, str, int | None] | None:
    """``(scheme, hostname, port or None for any)`` of an origin; None when it is not one."""
    scheme, sep, rest = value.strip().lower().partition("://")
    if not sep or scheme not in _DEFAULT_PORTS or "/" in rest.rstrip("/"):
        return None
    rest = rest.rstrip("/")
    if rest.endswith(":*"):
        parsed = split_host(rest[:-2])
        return None if parsed is None or parsed[1] is not None else (scheme, parsed[0], None)
    parsed = split_host(rest)
    if parsed is None:
        return None
    return scheme, parsed[0], parsed[1] if parsed[1] is not None else _DEFAULT_PORTS[scheme]


def parse_allowed_origins(value: Any) -> tuple[str, ...]:
    """``server.allowed_origins``: ``scheme://host[:port]`` (``:*`` for any port), ``null``, or ``*`` (any).

    >>> parse_allowed_origins(["https://App.example.com/", "http://localhost:*"])
    ('https://app.example.com', 'http://localhost:*')
    """
    origins: list[str] = []
    for item in _as_strings("server.allowed_origins", value):
        if item in ("*", "null"):
            origins.append(item)
            continue
        if _split_origin(item) is None:
            raise ConfigError("server.allowed_origins", item, "give origins as a browser sends them: "
                                                              "scheme://host[:port] (http or https, no path; "
                                                              "':*' for any port), 'null', or '*' for any")
        origins.append(item.strip().lower().rstrip("/"))
    return tuple(dict.fromkeys(origins))


def parse_max_body_bytes(value: Any) -> int:
    """``server.max_body_bytes``: a positive number of bytes."""
    try:
        number = int(value)
        if isinstance(value, bool) or (isinstance(value, float) and value != number):
            raise ValueError
    except (TypeError, ValueError):
        number = 0
    if number < 1:
        raise ConfigError("server.max_body_bytes", value,
                          f"give a positive number of bytes (default {DEFAULT_MAX_BODY_BYTES}, 8 MiB)")
    return number


# -- the policy ---------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class HostPolicy:
    """Which ``Host`` and ``Origin`` values the server answers; build it with :meth:`build`."""

    names: frozenset[tuple[str, int | None]]
    """Allowed ``(hostname, port)``; port None: any port."""
    any_host: bool
    origins: tuple[str, ...]
    any_origin: bool

    @classmethod
    def build(cls, bound_host: str, *, allowed_hosts: Iterable[str] = (), allowed_origins: Iterable[str] = (),
              tokens_required: bool = False) -> HostPolicy:
        """The policy of a server bound to ``bound_host``.

        ``allowed_hosts`` adds names (``*``: any); on a wildcard bind with ``tokens_required`` and no
        ``allowed_hosts``, any name is answered (clients reach the machine by any of its names, and a rebinding
        page cannot send a token).
        """
        hosts = parse_allowed_hosts(list(allowed_hosts))
        origins = parse_allowed_origins(list(allowed_origins))
        names: set[tuple[str, int | None]] = {(n, None) for n in LOOPBACK_NAMES}
        bound = split_host(bound_host if bound_host.count(":") < 2 else f"[{bound_host.strip('[]')}]")
        if bound is not None and bound_host.strip("[]") not in WILDCARD_HOSTS:
            names.add((bound[0], None))
        for entry in hosts:
            if entry != "*":
                parsed = split_host(entry[:-2] if entry.endswith(":*") else entry)
                if parsed is not None:
                    names.add(parsed)
        wildcard_bind = bound_host.strip("[]") in WILDCARD_HOSTS
        any_host = "*" in hosts or (wildcard_bind and tokens_required and not hosts)
        return cls(names=frozenset(names), any_host=any_host, origins=tuple(o for o in origins if o != "*"),
                   any_origin="*" in origins)

    def host_allowed(self, host: str | None) -> bool:
        """Whether a request with this ``Host`` header is answered (a request without one is not)."""
        parsed = split_host(host) if host else None
        if parsed is None:
            return False
        if self.any_host:
            return True
        name, port = parsed
        return (name, None) in self.names or (port is not None and (name, port) in self.names)

    def origin_allowed(self, origin: str | None, host: str | None, scheme: str = "http") -> bool:
        """Whether a request with this ``Origin`` (None: not a browser's cross-site call) is answered: the
        server's own origin (the request's ``scheme``, the host and port of its ``Host``) or a listed one."""
        if origin is None or self.any_origin:
            return True
        text = origin.strip().lower().rstrip("/")
        if text == "null":  # a sandboxed page or a local file
            return "null" in self.origins
        parsed = _split_origin(text)
        if parsed is None or parsed[2] is None:
            return False
        for allowed in self.origins:
            listed = _split_origin(allowed) if allowed != "null" else None
            if listed is not None and listed[:2] == parsed[:2] and listed[2] in (None, parsed[2]):
                return True
        own = split_host(host) if host else None
        if own is None or scheme not in _DEFAULT_PORTS:
            return False
        return parsed == (scheme, own[0], own[1] if own[1] is not None else _DEFAULT_PORTS[scheme])

    def mcp_transport_security(self) -> Any:
        """The same policy for the MCP SDK's own check on ``/mcp`` (``TransportSecuritySettings``).

        This guard runs first, on every route; the SDK's check is a second line that allows at least as much.
        """
        from mcp.server.transport_security import TransportSecuritySettings

        if self.any_host or self.any_origin:  # the SDK cannot say "any"; this guard still checks
            return TransportSecuritySettings(enable_dns_rebinding_protection=False)
        hosts: list[str] = []
        origins: list[str] = []
        for allowed in self.origins:  # the SDK compares strings: both spellings of a default port
            listed = _split_origin(allowed) if allowed != "null" else None
            if listed is not None and listed[2] == _DEFAULT_PORTS[listed[0]]:
                origins += [f"{listed[0]}://{_host_text(listed[1])}", f"{listed[0]}://{_host_text(listed[1])}:{listed[2]}"]
            else:
                origins.append(allowed)
        for name, port in sorted(self.names, key=lambda p: (p[0], p[1] or 0)):
            text = _host_text(name)
            hosts += [text, f"{text}:*"] if port is None else [f"{text}:{port}"]
            for scheme in ("http", "https"):
                origins += [f"{scheme}://{text}", f"{scheme}://{text}:*"] if port is None else \
                    [f"{scheme}://{text}:{port}"]
        return TransportSecuritySettings(enable_dns_rebinding_protection=True, allowed_hosts=hosts,
                                         allowed_origins=origins)


# -- the middlewares ----------------------------------------------------------------------------------------------
def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers") or ():
        if key == name:
            return bytes(value).decode("latin-1")
    return None


def _shown(value: str) -> str:
    return value if len(value) <= 100 else value[:100] + "..."


async def send_error(send: Send, status: int, body: dict[str, Any]) -> None:
    """Send a JSON error response."""
    payload = json.dumps(body).encode("utf-8")
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode())]})
    await send({"type": "http.response.body", "body": payload})


class HostGuardMiddleware:
    """Answer only the ``Host`` names and browser ``Origin`` values of :class:`HostPolicy` (421 / 403)."""

    def __init__(self, app: ASGIApp, policy: HostPolicy) -> None:
        self.app = app
        self.policy = policy

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        host, origin = _header(scope, b"host"), _header(scope, b"origin")
        if scope["type"] == "websocket":  # no route speaks it; a refused handshake is closed, not answered
            if not (self.policy.host_allowed(host)
                    and self.policy.origin_allowed(origin, host, "https" if scope.get("scheme") == "wss" else "http")):
                await send({"type": "websocket.close", "code": 1008})
                return
            await self.app(scope, receive, send)
            return
        if not self.policy.host_allowed(host):
            logger.warning("refused %s %s: Host %r is not a name of this server", scope.get("method"),
                           scope.get("path"), _shown(host or ""))
            shown = repr(_shown(host)) if host else "missing"
            await send_error(send, 421, plain_error(
                "HostNotAllowedError", f"Host {shown} is not a name of this server (DNS rebinding protection)",
                field="Host", fix=HOSTS_FIX))
            return
        if not self.policy.origin_allowed(origin, host, str(scope.get("scheme") or "http")):
            logger.warning("refused %s %s: Origin %r is not this server's", scope.get("method"), scope.get("path"),
                           _shown(origin or ""))
            await send_error(send, 403, plain_error(
                "OriginNotAllowedError", f"Origin {_shown(origin or '')!r} is not this server's own origin; pages "
                                         "of other sites may not call it", field="Origin", fix=ORIGINS_FIX))
            return
        if host is not None and host != host.lower():  # names are case-insensitive; the MCP SDK compares strings
            scope = {**scope, "headers": [(k, v.lower() if k == b"host" else v) for k, v in scope["headers"]]}
        await self.app(scope, receive, send)


class BodyLimitMiddleware:
    """Refuse request bodies larger than ``max_body_bytes`` (413) without reading or buffering them."""

    def __init__(self, app: ASGIApp, max_body_bytes: int) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes

    def _refusal(self) -> dict[str, Any]:
        body = plain_error("RequestTooLargeError", f"the request body is larger than the server's limit of "
                                                   f"{self.max_body_bytes} bytes", field="body", fix=BODY_FIX)
        body["error"]["limit"] = self.max_body_bytes  # what RequestTooLargeError.limit becomes in a client
        return body

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = _header(scope, b"content-length")
        if declared is not None and declared.strip().isdigit() and int(declared) > self.max_body_bytes:
            await send_error(send, 413, self._refusal())  # before a byte of the body is read
            return
        limit = self.max_body_bytes
        state = {"received": 0, "started": False, "cut": False}

        async def counted_receive() -> Message:
            if state["cut"]:
                return {"type": "http.disconnect"}
            message = await receive()
            if message["type"] == "http.request":
                state["received"] += len(message.get("body", b""))
                if state["received"] > limit:  # a chunked (or lying) body: cut it off here
                    state["cut"] = True
                    if not state["started"]:
                        state["started"] = True
                        await send_error(send, 413, self._refusal())
                    return {"type": "http.disconnect"}  # the app sees a client that went away
            return message

        async def guarded_send(message: Message) -> None:
            if state["cut"]:
                return  # the 413 is the answer; whatever the app makes of the "disconnect" is dropped
            if message["type"] == "http.response.start":
                state["started"] = True
            await send(message)

        await self.app(scope, counted_receive, guarded_send)


class DrainMiddleware:
    """Let clients that send their whole body before reading read an early answer (see the module docstring).

    When the app completes a response while the request body is still arriving, the response goes out at once
    (marked ``Connection: close``), then the rest of the body is read and dropped (:data:`DRAIN_MAX_BYTES`,
    :data:`DRAIN_MAX_SECONDS`), then the response is completed and the server closes the connection. A client
    that waits for ``100 Continue`` has sent nothing: it is answered without waiting for a body.
    """

    def __init__(self, app: ASGIApp, *, max_bytes: int = DRAIN_MAX_BYTES,
                 max_seconds: float = DRAIN_MAX_SECONDS) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.max_seconds = max_seconds

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        declared = _header(scope, b"content-length") if scope["type"] == "http" else None
        chunked = "chunked" in (_header(scope, b"transfer-encoding") or "").lower() if scope["type"] == "http" \
            else False
        length = int(declared) if declared is not None and declared.strip().isdigit() else None
        if scope["type"] != "http" or not (chunked or (length or 0) > 0):
            await self.app(scope, receive, send)  # no body: nothing to drain
            return
        waits_for_continue = (_header(scope, b"expect") or "").lower() == "100-continue"
        state = {"received": 0, "done": False}

        async def tracked_receive() -> Message:
            message = await receive()
            if message["type"] == "http.request":
                state["received"] += len(message.get("body", b""))
                state["done"] = not message.get("more_body", False)
            else:  # http.disconnect
                state["done"] = True
            return message

        async def drain() -> None:
            """Read and drop the rest of the body, within the bounds."""
            try:
                async with asyncio.timeout(self.max_seconds):
                    while not state["done"] and state["received"] <= self.max_bytes:
                        await tracked_receive()
            except TimeoutError:
                logger.info("stopped reading a refused request body after %.0f s", self.max_seconds)

        def unread() -> bool:
            if state["done"] or (waits_for_continue and not state["received"]):
                return False  # read to its end; or a client that waits for 100 Continue and sends nothing
            return length is None or length <= self.max_bytes  # else: too large to read through

        async def draining_send(message: Message) -> None:
            if message["type"] == "http.response.start" and not state["done"]:
                headers = [(k, v) for k, v in message.get("headers", ()) if k.lower() != b"connection"]
                message = {**message, "headers": [*headers, (b"connection", b"close")]}
            elif message["type"] == "http.response.body" and not message.get("more_body") and unread():
                await send({**message, "more_body": True})  # the answer goes out now,
                await drain()  # the client finishes sending its body,
                await send({"type": "http.response.body", "body": b"", "more_body": False})  # then it is closed
                return
            await send(message)

        await self.app(scope, tracked_receive, draining_send)
