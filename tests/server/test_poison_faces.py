"""No input poisons a namespace (issue 22, section 3), the server faces against a live server on loopback: bodies
that used to be stored and then broke every read, or answered 500, are typed 400/422 errors; a store holding rows an
older version wrote unchecked still answers every read; the MCP face refuses unknown tool arguments and answers a
prompt for another user with a PermissionDeniedError instead of a traceback."""

from __future__ import annotations

import asyncio
import json
import logging
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from memory_ext import MemoryEngine
from memory_ext.server import TokenTable
from memory_ext.store.sqlite import DB_FILE

from .conftest import ADMIN, ANA, LiveServer, _serving


def nested(depth: int) -> dict[str, Any]:
    value: Any = 1
    for _ in range(depth):
        value = {"a": value}
    return value  # type: ignore[no-any-return]


def raw_post(client: httpx.Client, path: str, body: str) -> httpx.Response:
    """POST a JSON text as it is: ``"\\ud800"`` escapes reach the server (httpx would refuse to encode the str)."""
    return client.post(path, content=body.encode("ascii"), headers={"content-type": "application/json"})


def typed(response: httpx.Response, status: int, type_: str, field: str | None = None) -> dict[str, Any]:
    assert response.status_code == status, response.text
    error: dict[str, Any] = response.json()["error"]
    assert error["type"] == type_, error
    assert error["fix"] and error["message"]
    if field is not None:
        assert error["field"] == field, error
    return error


TURN = '{"role": "user", "content": "I moved to Lisbon", %s}'
BAD_TURNS: list[tuple[str, str, str]] = [  # (id, extra turn fields, the field the error names)
    ("metadata-surrogate", '"metadata": {"k": "\\ud800"}', "turns[0].metadata.k"),
    ("metadata-key-surrogate", '"metadata": {"\\udfff": 1}', "turns[0].metadata.<key>"),
    ("metadata-nul-key", '"metadata": {"k\\u0000": 1}', "turns[0].metadata.<key>"),
    ("metadata-nul-value", '"metadata": {"k": "a\\u0000b"}', "turns[0].metadata.k"),
    ("metadata-nan", '"metadata": {"k": NaN}', "turns[0].metadata.k"),
    ("metadata-300-deep", '"metadata": ' + json.dumps(nested(300)), ""),
    ("metadata-33-deep", '"metadata": ' + json.dumps(nested(33)), ""),
    ("metadata-too-big", '"metadata": {"k": "%s"}' % ("x" * 70_000), "turns[0].metadata"),
    ("tool_calls-surrogate", '"tool_calls": [{"name": "f", "args": {"q": "\\ud800"}}]',
     "turns[0].tool_calls[0].args.q"),
    ("speaker-surrogate", '"speaker": "An\\ud800a"', "turns[0].speaker"),
    ("external_id-surrogate", '"external_id": "\\udfff"', "turns[0].external_id"),
]


@pytest.mark.parametrize(("extra", "field"), [(e, f) for _, e, f in BAD_TURNS], ids=[i for i, _, _ in BAD_TURNS])
def test_poisoned_turns_are_refused_and_the_namespace_keeps_serving(live_server: LiveServer, extra: str,
                                                                    field: str) -> None:
    with live_server.client() as client:
        assert client.post("/v1/turns", json={"user_id": "ana", "turns": [
            {"role": "user", "content": "an earlier turn"}]}).status_code == 200
        body = '{"user_id": "ana", "turns": [%s]}' % (TURN % extra)
        error = typed(raw_post(client, "/v1/turns", body), 400, "InvalidTurnError")
        assert error["field"].startswith(field or "turns[0].metadata.a.a")
        turns = client.get("/v1/turns", params={"user_id": "ana"})
        assert turns.status_code == 200 and [t["content"] for t in turns.json()] == ["an earlier turn"]
        found = client.post("/v1/search", json={"user_id": "ana", "query": "earlier turn"})
        assert found.status_code == 200 and found.json()["items"]
    assert live_server.engine.stats().turns == 1


@pytest.mark.parametrize(("path", "body", "status", "type_", "field"), [
    ("/v1/turns", '{"user_id": "a\\ud800", "turns": [{"role": "user", "content": "hi"}]}', 400,
     "InvalidNamespaceError", "user_id"),
    ("/v1/search", '{"user_id": "ana", "agent_id": "\\udfff", "query": "hi"}', 400, "InvalidNamespaceError",
     "agent_id"),
    ("/v1/search", '{"user_id": "ana", "query": "where \\ud800"}', 400, "InvalidQueryError", "query"),
    ("/v1/search", '{"user_id": "ana", "query": "where\\u0000"}', 400, "InvalidQueryError", "query"),
    ("/v1/search", '{"user_id": "ana", "query": "hi", "filters": {"speaker": "\\ud800"}}', 400, "InvalidQueryError",
     "filters.speaker"),
    ("/v1/search", '{"user_id": "ana", "query": "hi", "filters": {"metadata": {"k": "\\ud800"}}}', 400,
     "InvalidQueryError", "filters.metadata.k"),
    ("/v1/search", '{"user_id": "ana", "query": "hi", "k": true}', 422, "ValidationError", "k"),
    ("/v1/search", '{"user_id": "ana", "query": "hi", "k": 1e30}', 422, "ValidationError", "k"),
    ("/v1/search", '{"user_id": "ana", "query": "hi", "k": 100000000000000000000000000000}', 400,
     "InvalidQueryError", "k"),
    ("/v1/search", '{"user_id": "ana", "query": "hi", "explain": "yes"}', 422, "ValidationError", "explain"),
    ("/v1/search", '{"user_id": "ana", "query": "hi", "now": true}', 422, "ValidationError", "now"),
    ("/v1/search", '{"user_id": "ana", "query": "hi", "as_of": false}', 422, "ValidationError", "as_of"),
    ("/v1/search", '{"user_id": "ana", "query": "hi", "\\ud800": 1}', 400, "InvalidArgumentError", None),
    ("/v1/turns", '{"user_id": "ana", "turns": [], "wait": 1}', 422, "ValidationError", "wait"),
    ("/v1/prompt", '{"user_id": "ana", "budget_tokens": true}', 422, "ValidationError", "budget_tokens"),
    ("/v1/memories/update", '{"user_id": "ana", "id": "home", "content": "now \\ud800"}', 400, "InvalidTurnError",
     "content"),
    ("/v1/memories/update", '{"user_id": "ana", "id": "home", "metadata": {"k": "\\ud800"}}', 400,
     "InvalidTurnError", "metadata.k"),
    ("/v1/memories/update", '{"user_id": "ana", "id": "home", "metadata": {"k\\u0000": 1}}', 400,
     "InvalidTurnError", "metadata.<key>"),
    ("/v1/forget", '{"user_id": "ana", "record_ids": ["\\ud800"]}', 400, "InvalidArgumentError", "record_ids[0]"),
    ("/v1/compact", '{"user_id": "ana", "period": "\\ud800"}', 400, "InvalidArgumentError", "period"),
    ("/v1/pre_compress", '{"user_id": "ana", "full_context": "ok", "task_state": {"a": "\\ud800"}}', 400,
     "InvalidArgumentError", "task_state.a"),
    ("/v1/search", '{"user_id": "ana", "query": "hi", "filters": ' + "[" * 5000 + "]" * 5000 + "}", 400,
     "InvalidArgumentError", "body"),  # past the JSON parser's own nesting limit
    ("/v1/pre_compress", '{"user_id": "ana", "full_context": ' + json.dumps(nested(200)) + "}", 400,
     "InvalidArgumentError", None),
])
def test_bad_bodies_are_typed_errors(live_server: LiveServer, path: str, body: str, status: int, type_: str,
                                     field: str | None) -> None:
    with live_server.client() as client:
        client.post("/v1/turns", json={"user_id": "ana", "turns": [
            {"role": "user", "content": "I live in Lisbon", "external_id": "home"}]}).raise_for_status()
        typed(raw_post(client, path, body), status, type_, field)
        assert client.get("/healthz").status_code == 200
    assert live_server.engine.stats().turns == 1
    assert [v.operation for v in live_server.engine.history("ana", "home")] == ["add"]


@pytest.mark.parametrize(("params", "status"), [({"offset": "1e30"}, 422), ({"offset": str(10**30)}, 400),
                                                ({"offset": "-1"}, 422), ({"limit": str(2**64)}, 400),
                                                ({"offset": "1.5"}, 422)])
def test_absurd_pages_are_typed_errors(live_server: LiveServer, params: dict[str, str], status: int) -> None:
    with live_server.client() as client:
        response = client.get("/v1/turns", params={"user_id": "ana", **params})
        typed(response, status, "InvalidArgumentError" if status == 400 else "ValidationError", next(iter(params)))


# -- a store an older version wrote unchecked --------------------------------------------------------------------
POISON = {"k": "\ud800", "\udfff": "key", "n": float("nan"), "deep": nested(300)}


@pytest.fixture
def poisoned_server(tmp_path: Path) -> Iterator[LiveServer]:
    store = tmp_path / "store"
    with MemoryEngine.open(store, embedder="hashing") as engine:
        engine.add_turns([{"role": "user", "content": "I moved to Lisbon last spring", "external_id": "home"},
                          {"role": "assistant", "content": "Lisbon is sunny."}], "ana", wait=True)
    conn = sqlite3.connect(store / DB_FILE)
    with conn:  # what an older version stored: json.dumps escapes the lone surrogates, writes NaN
        conn.execute("UPDATE turns SET metadata = ?, tool_calls = ?",
                     (json.dumps(POISON), json.dumps([{"name": "f\ud800", "args": {"x": "\udfff"}}])))
    conn.close()
    yield from _serving(store, TokenTable.parse([ADMIN, f"{ANA}:ana"]))


def test_a_poisoned_store_still_answers_every_read(poisoned_server: LiveServer) -> None:
    with poisoned_server.client() as client:
        turns = client.get("/v1/turns", params={"user_id": "ana"})
        assert turns.status_code == 200, turns.text
        meta = turns.json()[0]["metadata"]
        assert meta["k"] == "\ufffd" and meta["\ufffd"] == "key" and meta["n"] is None
        found = client.post("/v1/search", json={"user_id": "ana", "query": "where did I move? Lisbon",
                                                "explain": True, "trace": True})
        assert found.status_code == 200, found.text
        assert found.json()["items"][0]["metadata"]["k"] == "\ufffd"
        hooks = client.get("/v1/hooks", params={"user_id": "ana"})
        assert hooks.status_code == 200
        opened = client.get(f"/v1/files/{hooks.json()[0]['id']}", params={"user_id": "ana"})
        assert opened.status_code == 200, opened.text
        history = client.post("/v1/memories/history", json={"user_id": "ana", "id": "home"})
        assert history.status_code == 200, history.text
        added = client.post("/v1/turns", json={"user_id": "ana", "turns": [{"role": "user", "content": "more"}]})
        assert added.status_code == 200, added.text  # the window over the poisoned tail turn is written too

    async def run() -> None:
        async with _mcp(poisoned_server, ADMIN) as session:
            result = await session.call_tool("search_memory", {"user_id": "ana", "query": "Lisbon"})
            assert not result.is_error, result.content
            assert "Lisbon" in result.content[0].text

    asyncio.run(run())


# -- MCP ---------------------------------------------------------------------------------------------------------
class _mcp:
    """An MCP client session (the official SDK) over streamable HTTP with a token."""

    def __init__(self, live: LiveServer, token: str) -> None:
        self.live, self.token = live, token

    async def __aenter__(self) -> ClientSession:
        self.http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {self.token}"}, timeout=60)
        await self.http.__aenter__()
        self.transport = streamable_http_client(self.live.url + "/mcp", http_client=self.http)
        read, write = await self.transport.__aenter__()
        self.session = ClientSession(read, write)
        await self.session.__aenter__()
        await self.session.initialize()
        return self.session

    async def __aexit__(self, *exc: Any) -> None:
        await self.session.__aexit__(*exc)
        await self.transport.__aexit__(*exc)
        await self.http.__aexit__(*exc)


def test_mcp_refuses_unknown_arguments_and_poisoned_values(live_server: LiveServer) -> None:
    async def run() -> None:
        async with _mcp(live_server, ADMIN) as session:
            saved = await session.call_tool("save_memory", {"user_id": "maya", "content": "Maya sings."})
            assert not saved.is_error
            misspelt = await session.call_tool("forget", {"user_id": "maya", "sesion_id": "s1", "everything": True})
            assert misspelt.is_error
            text = misspelt.content[0].text
            assert "InvalidArgumentError" in text and "'sesion_id'" in text and "session_id" in text
            extra = await session.call_tool("search_memory", {"user_id": "maya", "query": "sings", "limit": 3})
            assert extra.is_error and "'limit'" in extra.content[0].text
            for turn, field in [({"role": "user", "content": "x", "metadata": {"k\x00": 1}}, "metadata.<key>"),
                                ({"role": "user", "content": "x", "metadata": nested(40)}, "metadata.a"),
                                ({"role": "user", "content": "x", "tool_calls": [{"name": "f\x00"}]}, "tool_calls")]:
                bad = await session.call_tool("save_memory", {"user_id": "maya", "turns": [turn]})
                assert bad.is_error and "InvalidTurnError" in bad.content[0].text and field in bad.content[0].text
            bad_query = await session.call_tool("search_memory", {"user_id": "maya", "query": "nul\x00"})
            assert bad_query.is_error and "InvalidQueryError" in bad_query.content[0].text
            found = await session.call_tool("search_memory", {"user_id": "maya", "query": "sings"})
            assert not found.is_error

    asyncio.run(run())
    assert live_server.engine.stats().turns == 1  # only the note: the refused calls wrote nothing


def test_mcp_prompt_for_another_user_is_a_permission_error(live_server: LiveServer,
                                                           caplog: pytest.LogCaptureFixture) -> None:
    async def run() -> None:
        async with _mcp(live_server, ANA) as session:
            own = await session.get_prompt("with_memory", {"user_id": "ana"})
            assert "search_memory" in own.messages[0].content.text
            with pytest.raises(MCPError) as info:
                await session.get_prompt("with_memory", {"user_id": "ben"})
            assert "PermissionDeniedError" in info.value.message and "'user_id'" in info.value.message

    with caplog.at_level(logging.INFO):
        asyncio.run(run())
    assert not [r for r in caplog.records if r.exc_info or "Error rendering prompt" in r.getMessage()]


def test_mcp_wire_refuses_what_the_sdk_client_cannot_send(open_server: LiveServer) -> None:
    """Raw JSON-RPC, as a careless client writes it: a lone-surrogate escape is a parse error (the SDK's reader),
    a NaN a typed tool error (our door), and the server keeps serving."""
    headers = {"Accept": "application/json, text/event-stream", "content-type": "application/json"}
    with httpx.Client(base_url=open_server.url, timeout=60) as client:
        init = client.post("/mcp", headers=headers, json={
            "jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                       "clientInfo": {"name": "t", "version": "1"}}})
        assert init.status_code == 200
        if init.headers.get("mcp-session-id"):
            headers["mcp-session-id"] = init.headers["mcp-session-id"]
        client.post("/mcp", headers=headers, json={"jsonrpc": "2.0", "method": "notifications/initialized"})

        def call(arguments: str) -> httpx.Response:
            return raw_post_headers(client, headers, '{"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": '
                                    '{"name": "search_memory", "arguments": ' + arguments + "}}")

        surrogate = call('{"user_id": "ana", "query": "\\ud800"}')
        assert surrogate.status_code == 400 and '"code":-32700' in surrogate.text.replace(" ", "")
        nan = call('{"user_id": "ana", "query": "x", "k": NaN}')
        assert nan.status_code == 200 and "InvalidQueryError" in nan.text and "'k'" in nan.text
        assert client.get("/healthz").status_code == 200


def raw_post_headers(client: httpx.Client, headers: dict[str, str], body: str) -> httpx.Response:
    return client.post("/mcp", content=body.encode("ascii"), headers=headers)
