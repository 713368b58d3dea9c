"""One id language on every tool and route: ``forget(record_ids=...)`` takes the ids ``get_memory`` and
``delete_memory`` take — a search result's id, a turn id, an ``external_id`` — over MCP, REST and in process."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from memory_ext import InvalidQueryError, MemoryEngine, Turn

from .conftest import ADMIN, LiveServer


def _data(result: Any) -> Any:
    assert not result.is_error, result.content
    data = result.structured_content if result.structured_content is not None else json.loads(
        result.content[0].text)
    return data.get("result", data) if set(data) == {"result"} else data


def test_mcp_forget_takes_the_external_id_get_memory_takes(live_server: LiveServer) -> None:
    async def run() -> None:
        async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {ADMIN}"}, timeout=60) as http, \
                streamable_http_client(live_server.url + "/mcp", http_client=http) as (read, write), \
                ClientSession(read, write) as session:
            await session.initialize()
            for external_id, content in (("allergy", "Maya is allergic to shellfish."),
                                         ("city", "Maya lives in Porto.")):
                _data(await session.call_tool("save_memory", {"user_id": "maya", "content": content,
                                                              "external_id": external_id}))
            _data(await session.call_tool("update_memory", {"user_id": "maya", "id": "allergy",
                                                            "content": "Maya is allergic to shellfish and peanuts."}))
            shown = _data(await session.call_tool("get_memory", {"user_id": "maya", "id": "allergy"}))
            assert len(shown["history"]) == 2
            forgotten = _data(await session.call_tool("forget", {"user_id": "maya", "record_ids": ["allergy"]}))
            assert forgotten["turns"] == 2  # every version of the memory
            gone = await session.call_tool("get_memory", {"user_id": "maya", "id": "allergy"})
            assert gone.is_error and "InvalidQueryError" in gone.content[0].text
            unknown = await session.call_tool("forget", {"user_id": "maya", "record_ids": ["alergy"]})
            assert unknown.is_error and "external_id" in unknown.content[0].text
            left = _data(await session.call_tool("list_memories", {"user_id": "maya"}))
            assert [m["content"] for m in left["memories"]] == ["Maya lives in Porto."]

    asyncio.run(run())


def test_rest_forget_takes_external_and_turn_ids(live_server: LiveServer) -> None:
    with live_server.client() as client:
        added = client.post("/v1/turns", json={"user_id": "ana", "turns": [
            {"role": "user", "content": "Ana plays the cello.", "external_id": "msg-17"},
            {"role": "user", "content": "Ana's sister is called Lena."}]}).json()
        turn_id = added["turn_ids"][1]
        for ident in ("msg-17", turn_id):
            receipt = client.post("/v1/forget", json={"user_id": "ana", "record_ids": [ident]})
            assert receipt.status_code == 200, receipt.text
            assert receipt.json()["turns"] == 1
        assert client.get("/v1/turns", params={"user_id": "ana"}).json() == []


def test_engine_forget_takes_every_id_and_still_refuses_unknown_ones(tmp_path: Path) -> None:
    with MemoryEngine.open(tmp_path / "store", embedder="hashing") as engine:
        engine.add_turns([Turn(role="user", content="Ben keeps two cats.", external_id="pets"),
                          Turn(role="user", content="Ben runs on Sundays.")], "ben")
        record_id = engine.search("Sundays", "ben", k=1).items[0].id
        with pytest.raises(InvalidQueryError) as info:
            engine.forget("ben", record_ids=["pets", "no-such-id"])
        assert info.value.field == "record_ids" and "external_id" in str(info.value)
        assert len(engine.get_turns("ben")) == 2  # nothing was removed
        assert engine.forget("ben", record_ids=["pets", record_id]).turns == 2
        assert engine.get_turns("ben") == []
