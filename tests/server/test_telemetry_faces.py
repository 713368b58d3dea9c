"""OpenTelemetry on the server's faces: a REST call, an MCP tool call (streamable HTTP, the SDK's client) and a
``RemoteEngine`` call each make one engine span saying which face it came from, with the same GenAI attributes
as in process; read back with the SDK's in-memory exporter from a live server in this process."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import httpx2
import pytest

pytest.importorskip("opentelemetry.sdk")

from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from memory_ext.client import RemoteEngine
from tests.otel_kit import Collected, collect

from .conftest import ADMIN, LiveServer


@pytest.fixture
def otel() -> Iterator[Collected]:
    yield from collect()


def _engine_spans(otel: Collected) -> list[tuple[str, str, str]]:
    return [(s.name, str((s.attributes or {})["memory_ext.face"]), str((s.attributes or {})["memory_ext.operation"]))
            for s in otel.finished() if "memory_ext.operation" in (s.attributes or {})]


def test_rest_calls_make_engine_spans_of_the_rest_face(live_server: LiveServer, otel: Collected) -> None:
    with live_server.client() as client:
        added = client.post("/v1/turns", json={"user_id": "maya", "wait": True, "turns": [
            {"role": "user", "content": "Maya is allergic to shellfish."}]})
        assert added.status_code == 200, added.text
        found = client.post("/v1/search", json={"user_id": "maya", "query": "shellfish", "k": 3}).json()
    assert _engine_spans(otel) == [("create_memory", "rest", "add_turns"), ("search_memory", "rest", "search")]
    search = otel.finished()[-1]
    assert (search.attributes or {})["gen_ai.memory.record.count"] == len(found["items"]) == 1
    assert {e.name for e in search.events} == {"memory_ext.search.stage"}
    counted = {(p.attributes["memory_ext.operation"], p.attributes["memory_ext.face"]): p.value
               for p in otel.points("memory_ext.operations")}
    assert counted[("search", "rest")] == 1


def test_mcp_tool_calls_make_engine_spans_of_the_mcp_face(live_server: LiveServer, otel: Collected) -> None:
    async def run() -> None:
        async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {ADMIN}"}, timeout=60) as http, \
                streamable_http_client(live_server.url + "/mcp", http_client=http) as (read, write), \
                ClientSession(read, write) as session:
            await session.initialize()
            saved = await session.call_tool("save_memory", {"user_id": "maya", "content": "Maya keeps bees."})
            assert not saved.is_error
            found = await session.call_tool("search_memory", {"user_id": "maya", "query": "bees"})
            assert not found.is_error
            refused = await session.call_tool("search_memory", {"user_id": "maya", "query": ""})
            assert refused.is_error

    asyncio.run(run())
    spans = _engine_spans(otel)
    assert spans == [("create_memory", "mcp", "add_turns"), ("search_memory", "mcp", "search"),
                     ("search_memory", "mcp", "search")]
    assert (otel.finished()[-1].attributes or {})["error.type"] == "InvalidQueryError"


def test_remote_engine_calls_are_rest_spans_on_the_server(live_server: LiveServer, otel: Collected) -> None:
    with RemoteEngine(live_server.url, token=ADMIN) as engine:
        engine.add_turns([{"role": "user", "content": "Ana plays the cello."}], "ana", wait=True)
        engine.forget("ana")
    assert _engine_spans(otel) == [("create_memory", "rest", "add_turns"), ("delete_memory", "rest", "forget")]
