"""``min_score`` on every face of ``search``: the engine (sync and async), REST, RemoteEngine (sync and async) and
the MCP tool. Off by default: a nonsense query lists its nearest (weak) turns; at the documented 0.5 line it lists
nothing, and a real question keeps its matches and their context."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from memory_ext.client import RemoteEngine
from memory_ext.errors import InvalidQueryError
from tests.conftest import RULES_CHAT

from .conftest import ADMIN, LiveServer
from .test_mcp import _data, _http_session

NONSENSE = "quantum zebra xylophone"
REAL = "Lisbon flight"


def _store(server: LiveServer) -> None:
    turns = [{"role": role, "speaker": speaker, "content": content, "session_id": session}
             for session, role, speaker, content, _ in RULES_CHAT]
    with server.client() as c:
        c.post("/v1/turns", json={"user_id": "maya", "turns": turns, "wait": True}).raise_for_status()


def _scores(items: Any) -> list[float]:
    return [item["score"] if isinstance(item, dict) else item.score for item in items]


def test_engine_sync_and_async(live_server: LiveServer) -> None:
    _store(live_server)
    engine = live_server.engine
    weak = engine.search(NONSENSE, "maya", k=5)
    assert weak.items and max(_scores(weak.items)) < 0.5, "the default keeps the nearest turns, however weak"
    assert engine.search(NONSENSE, "maya", k=5, min_score=0.5).items == ()
    assert engine.search(NONSENSE, "maya", k=5, min_score=0.5).context == ""
    strong = engine.search(REAL, "maya", k=5, min_score=0.5)
    assert strong.items and min(_scores(strong.items)) >= 0.5 and "Lisbon" in strong.context
    assert asyncio.run(engine.asearch(NONSENSE, "maya", k=5, min_score=0.5)).items == ()
    assert _scores(asyncio.run(engine.asearch(REAL, "maya", k=5, min_score=0.5)).items) == _scores(strong.items)
    for bad in (1.5, -0.1, True, "0.5"):
        with pytest.raises(InvalidQueryError, match="min_score"):
            engine.search(REAL, "maya", min_score=bad)  # type: ignore[arg-type]


def test_rest(live_server: LiveServer) -> None:
    _store(live_server)
    with live_server.client() as c:
        off = c.post("/v1/search", json={"user_id": "maya", "query": NONSENSE, "k": 5}).json()
        on = c.post("/v1/search", json={"user_id": "maya", "query": NONSENSE, "k": 5, "min_score": 0.5}).json()
        real = c.post("/v1/search", json={"user_id": "maya", "query": REAL, "min_score": 0.5}).json()
        bad = c.post("/v1/search", json={"user_id": "maya", "query": REAL, "min_score": 2})
        text = c.post("/v1/search", json={"user_id": "maya", "query": REAL, "min_score": "0.5"})
    assert off["items"] and on["items"] == [] and on["context"] == ""
    assert real["items"] and min(_scores(real["items"])) >= 0.5
    assert bad.status_code == 400 and bad.json()["error"]["field"] == "min_score"
    assert text.status_code == 422  # a JSON number, not a string


def test_remote_engine_sync_and_async(live_server: LiveServer) -> None:
    _store(live_server)
    with RemoteEngine(live_server.url, token=ADMIN) as remote:
        assert remote.search(NONSENSE, "maya", k=5).items
        assert remote.search(NONSENSE, "maya", k=5, min_score=0.5).items == ()
        kept = remote.search(REAL, "maya", k=5, min_score=0.5)
        assert kept.items and min(_scores(kept.items)) >= 0.5
        assert asyncio.run(remote.asearch(NONSENSE, "maya", k=5, min_score=0.5)).items == ()
        with pytest.raises(InvalidQueryError, match="min_score"):
            remote.search(REAL, "maya", min_score=3.0)


def test_mcp_tool(live_server: LiveServer) -> None:
    _store(live_server)

    async def run() -> None:
        async with _http_session(live_server.url, ADMIN) as http, \
                streamable_http_client(live_server.url + "/mcp", http_client=http) as (read, write), \
                ClientSession(read, write) as session:
            await session.initialize()
            tools = {t.name: t for t in (await session.list_tools()).tools}
            search = tools["search_memory"]
            assert "min_score" in search.input_schema["properties"]
            assert "min_score" in (search.description or "") and "0.5" in (search.description or "")
            weak = _data(await session.call_tool("search_memory", {"user_id": "maya", "query": NONSENSE}))
            none = _data(await session.call_tool("search_memory", {"user_id": "maya", "query": NONSENSE,
                                                                   "min_score": 0.5}))
            real = _data(await session.call_tool("search_memory", {"user_id": "maya", "query": REAL,
                                                                   "min_score": 0.5}))
            bad = await session.call_tool("search_memory", {"user_id": "maya", "query": REAL, "min_score": 7})
            assert weak["items"] and none["items"] == [] and none["context"] == ""
            assert real["items"] and min(_scores(real["items"])) >= 0.5
            assert bad.is_error and "min_score" in json.dumps([c.model_dump() for c in bad.content])

    asyncio.run(run())
