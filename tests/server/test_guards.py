"""The guards in front of every route attack-tested on live servers: DNS rebinding (a foreign ``Host``), cross-site
calls (a foreign ``Origin``), oversized bodies (declared and chunked), and the OpenAPI bearer scheme."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp.server.transport_security import TransportSecurityMiddleware

from memory_ext.client import RemoteEngine
from memory_ext.errors import ConfigError, RequestTooLargeError
from memory_ext.server import ServerSettings, TokenTable
from memory_ext.server.guards import DEFAULT_MAX_BODY_BYTES, HostPolicy

from .conftest import ADMIN, ANA, LiveServer, _serving

ATTACKER = "attacker.example"
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "content-type": "application/json"}
INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
              "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                         "clientInfo": {"name": "t", "version": "1"}}}
SMALL_LIMIT = 64 * 1024


def _port(live: LiveServer) -> int:
    return int(live.url.rsplit(":", 1)[1])


def _remember(live: LiveServer, token: str | None = None) -> None:
    with live.client(token) as client:
        added = client.post("/v1/turns", json={"user_id": "maya", "turns": [{"role": "user",
                                                                             "content": "Maya keeps bees."}]})
        assert added.status_code == 200, added.text


def _contents(live: LiveServer, token: str | None = None) -> list[str]:
    with live.client(token) as client:
        return [t["content"] for t in client.get("/v1/turns", params={"user_id": "maya"}).json()]


def _refusal(response: httpx.Response, status: int, type_: str, field: str, setting: str) -> None:
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert (error["type"], error["field"]) == (type_, field)
    assert setting in error["fix"] and error["message"]


# -- Host (DNS rebinding) -----------------------------------------------------------------------------------------
def test_a_rebinding_page_cannot_forget_on_a_desktop_server(open_server: LiveServer) -> None:
    """The issue's attack: a loopback server without tokens, a page of attacker.example re-pointed at 127.0.0.1."""
    _remember(open_server)
    port = _port(open_server)
    forged = {"Host": f"{ATTACKER}:{port}", "Origin": f"http://{ATTACKER}:{port}"}
    with httpx.Client(base_url=open_server.url, timeout=60) as client:
        response = client.post("/v1/forget", json={"user_id": "maya"}, headers=forged)
        _refusal(response, 421, "HostNotAllowedError", "Host", "server.allowed_hosts")
        for method, path in (("GET", "/healthz"), ("GET", "/readyz"), ("GET", "/openapi.json"), ("GET", "/docs"),
                             ("GET", "/v1/namespaces"), ("POST", "/v1/search")):
            assert client.request(method, path, headers=forged).status_code == 421, path
        mcp = client.post("/mcp", json=INITIALIZE, headers={**MCP_HEADERS, **forged})
        _refusal(mcp, 421, "HostNotAllowedError", "Host", "server.allowed_hosts")
        without_port = client.post("/v1/forget", json={"user_id": "maya"}, headers={"Host": ATTACKER})
        assert without_port.status_code == 421
    assert _contents(open_server) == ["Maya keeps bees."]  # nothing was forgotten


def test_loopback_names_are_answered(open_server: LiveServer) -> None:
    port = _port(open_server)
    with httpx.Client(base_url=open_server.url, timeout=60) as client:
        for host in (f"127.0.0.1:{port}", "127.0.0.1", f"localhost:{port}", "LOCALHOST", f"[::1]:{port}"):
            assert client.get("/v1/namespaces", headers={"Host": host}).status_code == 200, host
            assert client.post("/mcp", json=INITIALIZE, headers={**MCP_HEADERS, "Host": host}).status_code == 200, host
        for host in ("127.0.0.2", "0.0.0.0", "localhost.attacker.example", "", "a b"):
            assert client.get("/healthz", headers={"Host": host}).status_code == 421, host


def test_a_token_does_not_open_a_foreign_host(live_server: LiveServer) -> None:
    headers = {"Host": f"{ATTACKER}:{_port(live_server)}", "Authorization": f"Bearer {ADMIN}"}
    with httpx.Client(base_url=live_server.url, timeout=60) as client:
        assert client.get("/v1/stats", headers=headers).status_code == 421


@pytest.fixture
def named_server(tmp_path: Path) -> Iterator[LiveServer]:
    """A loopback server behind a proxy named memory.example.com, called by pages of https://app.example.com."""
    yield from _serving(tmp_path / "store", None, allowed_hosts=["memory.example.com"],
                        allowed_origins=["https://app.example.com"])


def test_allowed_hosts_and_origins_open_rest_and_mcp_alike(named_server: LiveServer) -> None:
    with httpx.Client(base_url=named_server.url, timeout=60) as client:
        for headers in ({"Host": "memory.example.com"}, {"Host": "memory.example.com:443"},
                        {"Host": "memory.example.com", "Origin": "http://memory.example.com"},
                        # TLS ends at a proxy on loopback, which says so (uvicorn trusts it for the scheme)
                        {"Host": "memory.example.com", "Origin": "https://memory.example.com",
                         "X-Forwarded-Proto": "https"},
                        {"Host": "memory.example.com", "Origin": "https://app.example.com"},
                        {"Host": "localhost:9", "Origin": "https://app.example.com:443"}):
            assert client.get("/v1/namespaces", headers=headers).status_code == 200, headers
            # the MCP SDK's own check on /mcp agrees with the guard (it is given the same lists)
            assert client.post("/mcp", json=INITIALIZE, headers={**MCP_HEADERS, **headers}).status_code == 200, headers
        assert client.get("/v1/namespaces", headers={"Host": "other.example.com"}).status_code == 421
        refused = client.get("/v1/namespaces", headers={"Host": "memory.example.com", "Origin": "https://x.example"})
        _refusal(refused, 403, "OriginNotAllowedError", "Origin", "server.allowed_origins")


# -- Origin (cross-site calls) ------------------------------------------------------------------------------------
def test_a_cross_site_page_cannot_call_a_loopback_server(open_server: LiveServer) -> None:
    _remember(open_server)
    port = _port(open_server)
    with httpx.Client(base_url=open_server.url, timeout=60) as client:
        for origin in ("http://attacker.example", f"http://localhost:{port + 1}", "null", f"https://127.0.0.1:{port}"):
            response = client.post("/v1/forget", json={"user_id": "maya"}, headers={"Origin": origin})
            _refusal(response, 403, "OriginNotAllowedError", "Origin", "server.allowed_origins")
            mcp = client.post("/mcp", json=INITIALIZE, headers={**MCP_HEADERS, "Origin": origin})
            assert mcp.status_code == 403, origin
        same = client.get("/v1/namespaces", headers={"Origin": f"http://127.0.0.1:{port}"})  # the server's own page
        assert same.status_code == 200
    assert _contents(open_server) == ["Maya keeps bees."]


# -- the policy, and the MCP SDK's check it configures --------------------------------------------------------------
HOSTS = ["127.0.0.1", "127.0.0.1:8765", "localhost", "localhost:1", "[::1]", "[::1]:8765", "10.0.0.5", "10.0.0.5:80",
         "memory.example.com", "memory.example.com:8443", "attacker.example:8765", "127.0.0.2:8765", ""]


@pytest.mark.parametrize(("bound", "options", "answered"), [
    ("127.0.0.1", {}, {"127.0.0.1", "127.0.0.1:8765", "localhost", "localhost:1", "[::1]", "[::1]:8765"}),
    ("10.0.0.5", {"tokens_required": True}, {"127.0.0.1", "127.0.0.1:8765", "localhost", "localhost:1", "[::1]",
                                             "[::1]:8765", "10.0.0.5", "10.0.0.5:80"}),
    ("127.0.0.1", {"allowed_hosts": ["memory.example.com:8443"]},
     {"127.0.0.1", "127.0.0.1:8765", "localhost", "localhost:1", "[::1]", "[::1]:8765", "memory.example.com:8443"}),
    # a wildcard bind needs tokens (a rebinding page has none): any name, unless allowed_hosts narrows it
    ("0.0.0.0", {"tokens_required": True}, set(HOSTS) - {""}),
    ("::", {"tokens_required": True, "allowed_hosts": ["memory.example.com"]},
     {"127.0.0.1", "127.0.0.1:8765", "localhost", "localhost:1", "[::1]", "[::1]:8765", "memory.example.com",
      "memory.example.com:8443"}),
    ("0.0.0.0", {}, {"127.0.0.1", "127.0.0.1:8765", "localhost", "localhost:1", "[::1]", "[::1]:8765"}),
    ("127.0.0.1", {"allowed_hosts": ["*"]}, set(HOSTS) - {""}),
])
def test_host_policy(bound: str, options: dict[str, Any], answered: set[str]) -> None:
    policy = HostPolicy.build(bound, **options)
    assert {h for h in HOSTS if policy.host_allowed(h)} == answered
    sdk = TransportSecurityMiddleware(policy.mcp_transport_security())
    if sdk.settings.enable_dns_rebinding_protection:  # the SDK's own /mcp check never refuses what the guard allows
        assert all(sdk._validate_host(h) for h in answered)
        own = [f"{scheme}://{h}" for h in answered for scheme in ("http", "https")
               if policy.origin_allowed(f"{scheme}://{h}", h, scheme)]
        assert own and all(sdk._validate_origin(o) for o in own)


def test_origin_policy() -> None:
    policy = HostPolicy.build("127.0.0.1", allowed_origins=["https://app.example.com", "http://localhost:*"])
    assert policy.origin_allowed(None, "127.0.0.1:8765")  # not a browser's cross-site call
    assert policy.origin_allowed("http://127.0.0.1:8765", "127.0.0.1:8765")
    assert policy.origin_allowed("https://memory.example.com", "memory.example.com", "https")  # TLS at a proxy
    assert policy.origin_allowed("http://memory.example.com", "memory.example.com:80")
    assert not policy.origin_allowed("https://127.0.0.1:8765", "127.0.0.1:8765")  # another scheme: another origin
    assert policy.origin_allowed("https://app.example.com:443", "127.0.0.1:8765")
    assert policy.origin_allowed("http://localhost:3000", "127.0.0.1:8765")
    for origin in ("http://attacker.example:8765", "http://127.0.0.1:8766", "https://app.example.com:8443", "null",
                   "file://", "http://127.0.0.1:8765/path", "garbage"):
        assert not policy.origin_allowed(origin, "127.0.0.1:8765"), origin
    assert HostPolicy.build("127.0.0.1", allowed_origins=["*"]).origin_allowed("http://attacker.example", "x")


def test_guard_settings_resolve_and_reject_bad_values(tmp_path: Path) -> None:
    defaults = ServerSettings.resolve(path=str(tmp_path), env={})
    assert (defaults.allowed_hosts, defaults.allowed_origins) == ((), ())
    assert defaults.max_body_bytes == DEFAULT_MAX_BODY_BYTES <= 16 * 1024 * 1024
    config = tmp_path / "memext.yaml"
    config.write_text("server:\n  allowed_hosts: [memory.example.com]\n  allowed_origins: [https://app.example.com]\n"
                      "  max_body_bytes: 1000\n")
    from_file = ServerSettings.resolve(path=str(tmp_path), config=str(config), env={})
    assert (from_file.allowed_hosts, from_file.allowed_origins, from_file.max_body_bytes) == (
        ("memory.example.com",), ("https://app.example.com",), 1000)
    env = {"MEMORY_EXT_ALLOWED_HOSTS": "a.example.com,b.example.com:8443", "MEMORY_EXT_MAX_BODY_BYTES": "2000",
           "MEMORY_EXT_ALLOWED_ORIGINS": "http://localhost:*"}
    from_env = ServerSettings.resolve(path=str(tmp_path), config=str(config), env=env)
    assert (from_env.allowed_hosts, from_env.allowed_origins, from_env.max_body_bytes) == (
        ("a.example.com", "b.example.com:8443"), ("http://localhost:*",), 2000)
    flags = ServerSettings.resolve(path=str(tmp_path), config=str(config), env=env, allowed_hosts=["*"],
                                   allowed_origins=["https://c.example.com"], max_body_bytes=3000)
    assert (flags.allowed_hosts, flags.allowed_origins, flags.max_body_bytes) == (
        ("*",), ("https://c.example.com",), 3000)
    for key, value in (("allowed_hosts", ["https://memory.example.com"]), ("allowed_hosts", ["a/b"]),
                       ("allowed_origins", ["app.example.com"]), ("allowed_origins", ["ftp://x.example"]),
                       ("allowed_origins", ["https://x.example/path"]), ("max_body_bytes", 0),
                       ("max_body_bytes", "lots")):
        with pytest.raises(ConfigError) as info:
            ServerSettings.resolve(path=str(tmp_path), env={}, **{key: value})
        assert info.value.field == f"server.{key}" and info.value.fix


# -- body size --------------------------------------------------------------------------------------------------
@pytest.fixture
def small_server(tmp_path: Path) -> Iterator[LiveServer]:
    """A server with tokens and a 64 KiB body limit (small, so the attacks are quick)."""
    yield from _serving(tmp_path / "store", TokenTable.parse([ADMIN, f"{ANA}:ana"]), max_body_bytes=SMALL_LIMIT)


def _connect(live: LiveServer) -> socket.socket:
    conn = socket.create_connection(("127.0.0.1", _port(live)), timeout=60)  # a hang guard, not a deadline
    return conn


def _read_response(conn: socket.socket) -> tuple[int, dict[str, Any]]:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        assert chunk, f"connection closed before a response: {data!r}"
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = dict(line.lower().split(": ", 1) for line in lines[1:])
    while len(body) < int(headers["content-length"]):
        chunk = conn.recv(65536)
        assert chunk
        body += chunk
    return int(lines[0].split()[1]), json.loads(body)


def _head(live: LiveServer, path: str, token: str, extra: str) -> bytes:
    return (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{_port(live)}\r\nAuthorization: Bearer {token}\r\n"
            f"Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n{extra}\r\n").encode()


@pytest.mark.parametrize("path", ["/v1/turns", "/mcp"])
def test_a_declared_oversize_body_is_413_before_it_is_read(small_server: LiveServer, path: str) -> None:
    """500 MB announced, not one byte sent: the answer comes from Content-Length alone (also with a pinned token)."""
    with _connect(small_server) as conn:
        conn.sendall(_head(small_server, path, ANA, "Content-Length: 500000000\r\n"))
        status, body = _read_response(conn)
    assert status == 413
    assert body["error"]["type"] == "RequestTooLargeError" and "server.max_body_bytes" in body["error"]["fix"]
    with small_server.client() as client:  # the server keeps serving
        assert client.get("/healthz").status_code == 200


def test_a_chunked_oversize_body_is_cut_off_at_the_limit(small_server: LiveServer) -> None:
    """No Content-Length: the server counts the chunks as they arrive and answers 413 while the body is still
    coming (it never waits for, nor keeps, the whole body)."""
    chunk = b"x" * 8192
    with _connect(small_server) as conn:
        conn.sendall(_head(small_server, "/v1/turns", ANA, "Transfer-Encoding: chunked\r\n"))
        for _ in range(SMALL_LIMIT // len(chunk) + 1):
            conn.sendall(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
        status, body = _read_response(conn)  # the terminating chunk was never sent
    assert status == 413 and body["error"]["field"] == "body"
    _remember(small_server, ADMIN)
    assert _contents(small_server, ADMIN) == ["Maya keeps bees."]


def test_clients_get_a_typed_413_and_bodies_under_the_limit_pass(small_server: LiveServer) -> None:
    with small_server.client(ANA) as client:
        big = client.post("/v1/turns", json={"user_id": "ana", "turns": [{"role": "user", "content": "x" * 100_000}]})
        assert big.status_code == 413, big.text
        fine = client.post("/v1/turns", json={"user_id": "ana", "turns": [{"role": "user", "content": "y" * 10_000}]})
        assert fine.status_code == 200, fine.text
    with RemoteEngine(small_server.url, token=ANA) as engine:  # the client keeps working through the guards
        with pytest.raises(RequestTooLargeError) as info:  # refused before sending (test_413_clients.py)
            engine.add_turns([{"role": "user", "content": "z" * 100_000}], "ana")
        assert info.value.limit == SMALL_LIMIT and "max_body_bytes" in (info.value.fix or "")
        assert [t.content for t in engine.get_turns("ana")] == ["y" * 10_000]


# -- OpenAPI --------------------------------------------------------------------------------------------------------
def test_openapi_declares_the_bearer_scheme(live_server: LiveServer) -> None:
    with live_server.client(None) as client:
        schema = client.get("/openapi.json").json()
    assert schema["components"]["securitySchemes"]["bearerAuth"] == {
        "type": "http", "scheme": "bearer", "description": schema["components"]["securitySchemes"]["bearerAuth"][
            "description"]}
    operations = [(path, op) for path, ops in schema["paths"].items() for op in ops.values()]
    v1 = [op for path, op in operations if path.startswith("/v1/")]
    assert len(v1) >= 15 and all(op.get("security") == [{"bearerAuth": []}] for op in v1)
    health = [op for path, op in operations if path in ("/healthz", "/readyz")]
    assert len(health) == 2 and all("security" not in op for op in health)
    assert "security" not in schema  # no global requirement


def test_a_websocket_handshake_from_a_foreign_host_is_closed() -> None:
    """No route speaks WebSocket, but the guard stands in front of them too: a refused handshake is closed (1008)."""
    from memory_ext.server.guards import HostGuardMiddleware

    reached: list[str] = []
    sent: list[dict[str, Any]] = []

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        reached.append(scope["type"])

    async def receive() -> dict[str, Any]:
        return {"type": "websocket.connect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    guard = HostGuardMiddleware(app, HostPolicy.build("127.0.0.1"))
    for host, origin in ((b"attacker.example:8765", None), (b"127.0.0.1:8765", b"http://attacker.example")):
        headers = [(b"host", host)] + ([(b"origin", origin)] if origin else [])
        asyncio.run(guard({"type": "websocket", "scheme": "ws", "headers": headers}, receive, send))
    assert sent == [{"type": "websocket.close", "code": 1008}] * 2 and reached == []
    asyncio.run(guard({"type": "websocket", "scheme": "ws", "headers": [(b"host", b"localhost:8765")]}, receive, send))
    assert reached == ["websocket"]
