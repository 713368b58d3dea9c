"""What a model reads through the server faces obeys the search's rules: ``RemoteEngine.search(...).context`` and
MCP ``search_memory``'s ``context`` never show a neighbour the filters exclude, nor a version ``update`` replaced
(the engine-side cases, every filter key on both backends, are in tests/postgres/test_conformance_context.py)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from memory_ext import Turn
from memory_ext.client import RemoteEngine
from tests.conftest import RULES_CHAT, assert_context_obeys, context_texts, rules_turns

from .conftest import ADMIN, LiveServer
from .test_mcp import _http_session

TEXTS = [content for _, _, _, content, _ in RULES_CHAT]
PUBLIC = {content for _, _, _, content, meta in RULES_CHAT if meta.get("private") is False}
QUERY = "What is my Nordea card?"


def test_remote_engine_context_obeys_filters_and_updates(live_server: LiveServer) -> None:
    with RemoteEngine(live_server.url, token=ADMIN) as remote:
        remote.add_turns(rules_turns(), "maya", wait=True)
        assert "4711" in remote.search(QUERY, "maya", k=2).context  # unfiltered, the neighbour shows
        filtered = remote.search(QUERY, "maya", k=2, filters={"metadata": {"private": False}})
        assert_context_obeys(filtered.context, PUBLIC, set(TEXTS) - PUBLIC)
        by_speaker = remote.search("Who flies to Lisbon with which passport?", "maya", filters={"speaker": "Maya"})
        assert "X1234567" not in by_speaker.context and context_texts(by_speaker.context)

        remote.add_turns([Turn(role="user", content="My locker code is zebra-31.", external_id="locker"),
                          Turn(role="user", content="The gym locker room is open till ten.")], "ben", wait=True)
        remote.update("ben", "locker", content="My locker code is lynx-77.")
        for query in ("What is my locker code?", "When is the locker room open?"):
            assert "zebra-31" not in remote.search(query, "ben", k=3).context, query


def test_mcp_search_memory_context_obeys_filters(live_server: LiveServer) -> None:
    with RemoteEngine(live_server.url, token=ADMIN) as remote:
        remote.add_turns(rules_turns(), "maya", wait=True)

    async def run() -> dict[str, Any]:
        async with _http_session(live_server.url, ADMIN) as http, \
                streamable_http_client(live_server.url + "/mcp", http_client=http) as (read, write), \
                ClientSession(read, write) as session:
            await session.initialize()
            result = await session.call_tool("search_memory", {"user_id": "maya", "query": QUERY, "k": 2,
                                                               "filters": {"metadata": {"private": False}}})
            assert not result.is_error, result.content
            data = result.structured_content or json.loads(result.content[0].text)
            return dict(data)

    found = asyncio.run(run())
    assert {item["text"] for item in found["items"]} <= PUBLIC
    assert_context_obeys(found["context"], PUBLIC, set(TEXTS) - PUBLIC)
