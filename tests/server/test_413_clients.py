"""The 413 reaches every client: bodies over ``server.max_body_bytes`` sent the way ``urllib``, ``http.client``,
``requests`` and ``httpx`` send them (the whole body first, then the response is read) get the 413 JSON, not a
connection reset; ``RemoteEngine`` refuses a body it knows is too large before sending it."""

from __future__ import annotations

import asyncio
import http.client
import json
import socket
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from memory_ext.client import RemoteEngine
from memory_ext.errors import RequestTooLargeError
from memory_ext.server import TokenTable
from memory_ext.server.guards import DRAIN_MAX_BYTES, DrainMiddleware

from .conftest import ADMIN, ANA, LiveServer, _serving

LIMIT = 64 * 1024
BIG = 32 * 1024 * 1024
"""Far more than the kernel's socket buffers hold (a client still sending when the server closes got a reset),
less than what the server drains (DRAIN_MAX_BYTES)."""
assert LIMIT < BIG < DRAIN_MAX_BYTES


@pytest.fixture(scope="module")
def small_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    store = tmp_path_factory.mktemp("s413") / "store"
    yield from _serving(store, TokenTable.parse([ADMIN, f"{ANA}:ana"]), max_body_bytes=LIMIT)


def _turns_body(size: int, user: str = "ana") -> bytes:
    """A real add_turns body of about ``size`` bytes: one long pasted document."""
    text = ("Ana pasted the whole meeting transcript into the chat. " * (size // 55 + 1))[:size]
    return json.dumps({"user_id": user, "turns": [{"role": "user", "content": text}]}).encode()


def _assert_413(status: int, payload: bytes) -> None:
    assert status == 413
    error = json.loads(payload)["error"]
    assert error["type"] == "RequestTooLargeError" and error["field"] == "body"
    assert error["limit"] == LIMIT and "max_body_bytes" in error["fix"]


def _headers(token: str | None = ANA) -> dict[str, str]:
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    return headers


@pytest.mark.parametrize("path", ["/v1/turns", "/mcp"])
def test_urllib_reads_the_413(small_server: LiveServer, path: str) -> None:
    request = urllib.request.Request(small_server.url + path, data=_turns_body(BIG), headers=_headers(),
                                     method="POST")
    with pytest.raises(urllib.error.HTTPError) as info:
        urllib.request.urlopen(request, timeout=120)
    _assert_413(info.value.code, info.value.read())


def test_http_client_reads_the_413_then_the_server_serves_on(small_server: LiveServer) -> None:
    port = int(small_server.url.rsplit(":", 1)[1])
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    try:
        conn.request("POST", "/v1/turns", body=_turns_body(BIG), headers=_headers())
        response = conn.getresponse()
        _assert_413(response.status, response.read())
        assert response.getheader("connection") == "close"  # a refused body's connection is not reused
    finally:
        conn.close()
    with small_server.client(ANA) as client:
        fine = client.post("/v1/turns", content=_turns_body(1000), headers=_headers())
        assert fine.status_code == 200, fine.text


def test_requests_reads_the_413(small_server: LiveServer) -> None:
    requests = pytest.importorskip("requests")
    response = requests.post(small_server.url + "/v1/turns", data=_turns_body(BIG), headers=_headers(), timeout=120)
    _assert_413(response.status_code, response.content)


def test_httpx_reads_the_413_sync_and_async(small_server: LiveServer) -> None:
    response = httpx.post(small_server.url + "/v1/turns", content=_turns_body(BIG), headers=_headers(), timeout=120)
    _assert_413(response.status_code, response.content)

    async def post() -> httpx.Response:
        async with httpx.AsyncClient(timeout=120) as client:
            return await client.post(small_server.url + "/mcp", content=_turns_body(BIG), headers=_headers())

    response = asyncio.run(post())
    _assert_413(response.status_code, response.content)


def test_a_refusal_before_the_body_reaches_urllib_too(small_server: LiveServer) -> None:
    """Not only the 413: a missing token (401) is answered before the body is read, and read all the same."""
    request = urllib.request.Request(small_server.url + "/v1/turns", data=_turns_body(4 * 1024 * 1024),
                                     headers=_headers(token=None), method="POST")
    with pytest.raises(urllib.error.HTTPError) as info:
        urllib.request.urlopen(request, timeout=120)
    assert info.value.code == 401
    assert json.loads(info.value.read())["error"]["type"]


def test_a_client_that_waits_for_100_continue_is_answered_without_sending(small_server: LiveServer) -> None:
    port = int(small_server.url.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=60) as conn:  # a hang guard, not a deadline
        conn.sendall((f"POST /v1/turns HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {ANA}\r\n"
                      f"Content-Type: application/json\r\nContent-Length: {BIG}\r\nExpect: 100-continue\r\n\r\n"
                      ).encode())
        data = b""
        while b"\r\n\r\n" not in data or not data.rstrip().endswith(b"}"):
            chunk = conn.recv(65536)
            assert chunk, data
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    assert not head.startswith(b"HTTP/1.1 100")
    _assert_413(int(head.split()[1]), body)


# -- RemoteEngine -------------------------------------------------------------------------------------------------
class RecordingTransport(httpx.HTTPTransport):
    """The real transport, keeping the method and path of every request that goes out."""

    def __init__(self) -> None:
        super().__init__()
        self.sent: list[str] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.sent.append(f"{request.method} {request.url.path}")
        return super().handle_request(request)


def test_remote_engine_refuses_a_body_it_knows_is_too_large_before_sending(small_server: LiveServer) -> None:
    transport = RecordingTransport()
    pasted = [{"role": "user", "content": "Ana's notes from the trip to Lisbon. " * 3000}]  # ~110 kB
    with RemoteEngine(small_server.url, token=ANA, transport=transport) as engine:
        assert engine.max_body_bytes == LIMIT  # announced by /v1/info
        with pytest.raises(RequestTooLargeError) as info:
            engine.add_turns(pasted, "ana")
        assert transport.sent == ["GET /v1/info"]  # nothing else went out
        error = info.value
        assert error.limit == LIMIT and error.size is not None and error.size > LIMIT and error.field == "body"
        assert f"{error.size} bytes" in str(error) and str(LIMIT) in str(error) and "max_body_bytes" in str(error)
        with pytest.raises(RequestTooLargeError):
            asyncio.run(engine.aadd_turns(pasted, "ana"))
        added = engine.add_turns([{"role": "user", "content": "Ana booked the Lisbon flight."}], "ana")
        assert len(added.turn_ids) == 1 and transport.sent[-1] == "POST /v1/turns"


def test_remote_engine_maps_a_server_413_to_request_too_large(small_server: LiveServer) -> None:
    """A client that does not know the limit (an older server's /v1/info) gets the server's 413 as the same
    typed error, with the limit the server names."""
    with RemoteEngine(small_server.url, token=ANA) as engine:
        engine.max_body_bytes = None
        with pytest.raises(RequestTooLargeError) as info:
            engine.add_turns([{"role": "user", "content": "x" * (2 * LIMIT)}], "ana")
    assert info.value.limit == LIMIT and info.value.size is None and "max_body_bytes" in (info.value.fix or "")


# -- the drain's bounds (the ASGI layer alone) --------------------------------------------------------------------
def _refusing_app() -> Any:
    """An app that answers 401 without reading the body (what the token check does)."""
    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 401, "headers": [(b"content-length", b"2")]})
        await send({"type": "http.response.body", "body": b"{}"})
    return app


def _scope(**headers: str) -> dict[str, Any]:
    return {"type": "http", "method": "POST", "path": "/v1/turns",
            "headers": [(k.replace("_", "-").encode(), v.encode()) for k, v in headers.items()]}


def test_the_drain_stops_at_its_byte_bound() -> None:
    """A client that never stops sending: the server reads at most max_bytes, then completes and closes."""
    received = []

    async def endless() -> dict[str, Any]:
        received.append(1)
        return {"type": "http.request", "body": b"x" * 1000, "more_body": True}

    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    asyncio.run(DrainMiddleware(_refusing_app(), max_bytes=10_000)(_scope(transfer_encoding="chunked"), endless, send))
    assert 10 <= len(received) <= 11  # ~10 kB read, then no more
    assert sent[0]["status"] == 401 and (b"connection", b"close") in sent[0]["headers"]
    assert [m.get("more_body", False) for m in sent[1:]] == [True, False] and sent[1]["body"] == b"{}"


def test_the_drain_stops_at_its_time_bound() -> None:
    """A client that stops sending and never closes: the drain gives up after max_seconds."""
    async def silent() -> dict[str, Any]:
        await asyncio.Event().wait()  # nothing ever arrives
        raise AssertionError("unreachable")

    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    asyncio.run(DrainMiddleware(_refusing_app(), max_seconds=0.05)(_scope(content_length="5000"), silent, send))
    assert [m.get("more_body", False) for m in sent[1:]] == [True, False]


def test_a_body_the_app_read_whole_is_answered_as_usual() -> None:
    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        assert (await receive())["more_body"] is False
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})

    async def once() -> dict[str, Any]:
        return {"type": "http.request", "body": b"{}", "more_body": False}

    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    asyncio.run(DrainMiddleware(app)(_scope(content_length="2"), once, send))
    assert sent == [{"type": "http.response.start", "status": 200, "headers": []},
                    {"type": "http.response.body", "body": b"ok"}]
