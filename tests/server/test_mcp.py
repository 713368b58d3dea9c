"""The MCP face with the SDK's own ClientSession: over stdio against ``memext serve --stdio`` (a subprocess) and
over streamable HTTP against a live server — list the tools, call each, check results and errors."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any, TextIO

import httpx2
import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from .conftest import ADMIN, ANA, LiveServer, serve_command, subprocess_env

TOOLS = {"search_memory", "save_memory", "memory_index", "open_memory_file", "pre_compress", "forget", "compact",
         "update_memory", "memory_history", "delete_memory", "list_memories", "get_memory"}


def _data(result: Any) -> Any:
    assert not result.is_error, result.content
    if result.structured_content is not None:
        data = result.structured_content
        return data.get("result", data) if set(data) == {"result"} else data
    return json.loads(result.content[0].text)


async def exercise(session: ClientSession) -> None:
    """Every tool, in the order an agent would use them."""
    await session.initialize()
    listed = await session.list_tools()
    tools = {t.name: t for t in listed.tools}
    assert set(tools) == TOOLS
    for tool in tools.values():
        assert tool.description and len(tool.description) > 40
        assert "user_id" in tool.input_schema["properties"] and "user_id" in tool.input_schema["required"]
    assert "query" in tools["search_memory"].input_schema["required"]

    saved = _data(await session.call_tool("save_memory",
                                          {"user_id": "maya", "content": "Maya is allergic to shellfish."}))
    assert saved["saved"] == 1
    turns = [{"role": "user", "content": "We are planning a trip to Kyoto in April.", "speaker": "Maya"},
             {"role": "assistant", "content": "Kyoto in April means cherry blossoms; book early."}]
    assert _data(await session.call_tool("save_memory", {"user_id": "maya", "turns": turns,
                                                         "session_id": "trip"}))["saved"] == 2

    found = _data(await session.call_tool("search_memory", {"user_id": "maya", "query": "what can't Maya eat?",
                                                            "k": 2}))
    assert found["items"][0]["text"] == "Maya is allergic to shellfish."
    assert found["items"][0]["id"] and found["items"][0]["time"]
    narrowed = _data(await session.call_tool("search_memory", {"user_id": "maya", "query": "trip", "session_id": "trip",
                                                               "action_state": {"current_subgoal": "book hotel"}}))
    assert {i["session_id"] for i in narrowed["items"]} == {"trip"}

    index = (await session.call_tool("memory_index", {"user_id": "maya"})).content[0].text
    assert index.startswith("Memory index")
    hook_id = index.split("[", 1)[1].split("]", 1)[0]
    opened = _data(await session.call_tool("open_memory_file", {"user_id": "maya", "hook_id": hook_id[:8]}))
    assert opened["hook_id"] == hook_id and "shellfish" in opened["text"]

    templates = await session.list_resource_templates()
    assert [t.uri_template for t in templates.resource_templates] == ["memory://{user_id}/index"]
    resource = await session.read_resource("memory://maya/index")
    assert hook_id in resource.contents[0].text
    prompts = await session.list_prompts()
    assert [p.name for p in prompts.prompts] == ["with_memory"]
    prompt = await session.get_prompt("with_memory", {"user_id": "maya"})
    assert "search_memory" in prompt.messages[0].content.text and hook_id in prompt.messages[0].content.text

    kept = _data(await session.call_tool("pre_compress", {
        "user_id": "maya", "context": "User: renew my passport before the trip\nAssistant: I'll remind you.",
        "task_state": {"goal": "trip paperwork"}}))
    assert _data(await session.call_tool("open_memory_file", {"user_id": "maya", "hook_id": kept["hook_id"]}))

    compacted = _data(await session.call_tool("compact", {"user_id": "maya"}))
    assert compacted["changed"] is False  # nothing is due in a fresh store

    refused = await session.call_tool("forget", {"user_id": "maya"})
    assert refused.is_error and "everything" in refused.content[0].text
    forgotten = _data(await session.call_tool("forget", {"user_id": "maya", "record_ids": [found["items"][0]["id"]]}))
    assert forgotten["turns"] == 1
    again = _data(await session.call_tool("search_memory", {"user_id": "maya", "query": "shellfish allergy"}))
    assert all("shellfish" not in i["text"] for i in again["items"])

    kyoto = _data(await session.call_tool("search_memory", {"user_id": "maya", "query": "Kyoto trip", "k": 1}))
    updated = _data(await session.call_tool("update_memory", {"user_id": "maya", "id": kyoto["items"][0]["id"],
                                                              "content": "We are planning a trip to Osaka in May."}))
    history = _data(await session.call_tool("memory_history", {"user_id": "maya", "id": updated["turn_id"]}))
    assert [(h["operation"], h["current"]) for h in history] == [("add", False), ("update", True)]
    deleted = _data(await session.call_tool("delete_memory", {"user_id": "maya", "ids": [updated["id"]]}))
    assert deleted["turns"] == 2
    gone = _data(await session.call_tool("search_memory", {"user_id": "maya", "query": "Kyoto Osaka trip"}))
    assert not any("Osaka" in i["text"] or "planning a trip" in i["text"] for i in gone["items"])

    bad = await session.call_tool("search_memory", {"user_id": "maya", "query": "x", "k": 0})
    assert bad.is_error
    message = bad.content[0].text
    assert "InvalidQueryError" in message and "'k'" in message and "between 1 and" in message
    missing = await session.call_tool("open_memory_file", {"user_id": "maya", "hook_id": "ffffffffffff"})
    assert missing.is_error and "HookNotFoundError" in missing.content[0].text
    both = await session.call_tool("save_memory", {"user_id": "maya"})
    assert both.is_error and "content" in both.content[0].text


def test_stdio_subprocess(tmp_path: Path) -> None:
    params = StdioServerParameters(command=sys.executable,
                                   args=serve_command("--stdio", "--create", "--path", str(tmp_path / "store"),
                                                      "--embedder", "hashing")[1:],
                                   env=subprocess_env(), cwd=str(tmp_path))

    async def run(errlog: TextIO) -> None:
        async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as session:
            await exercise(session)

    with open(tmp_path / "stderr.log", "w") as errlog:  # the server's log (never stdout: that is the protocol)
        asyncio.run(run(errlog))


def test_stdio_limited_to_one_user(tmp_path: Path) -> None:
    params = StdioServerParameters(command=sys.executable,
                                   args=serve_command("--stdio", "--create", "--user", "maya", "--path",
                                                      str(tmp_path / "store"),
                                                      "--embedder", "hashing")[1:],
                                   env=subprocess_env(), cwd=str(tmp_path))

    async def run(errlog: TextIO) -> None:
        async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            assert not (await session.call_tool("save_memory", {"user_id": "maya", "content": "Maya sings."})).is_error
            other = await session.call_tool("search_memory", {"user_id": "ben", "query": "sings"})
            assert other.is_error and "PermissionDeniedError" in other.content[0].text

    with open(tmp_path / "stderr.log", "w") as errlog:
        asyncio.run(run(errlog))


def _http_session(url: str, token: str | None) -> Any:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx2.AsyncClient(headers=headers, timeout=60)


def test_streamable_http(live_server: LiveServer) -> None:
    async def run() -> None:
        async with _http_session(live_server.url, ADMIN) as http, \
                streamable_http_client(live_server.url + "/mcp", http_client=http) as (read, write), \
                ClientSession(read, write) as session:
            await exercise(session)

    asyncio.run(run())
    # the HTTP face and the REST face share the store
    with live_server.client() as client:
        assert client.post("/v1/search", json={"user_id": "maya", "query": "Kyoto"}).json()["items"]


def test_streamable_http_pinned_token(live_server: LiveServer) -> None:
    async def run() -> None:
        async with _http_session(live_server.url, ANA) as http, \
                streamable_http_client(live_server.url + "/mcp", http_client=http) as (read, write), \
                ClientSession(read, write) as session:
            await session.initialize()
            own = await session.call_tool("save_memory", {"user_id": "ana", "content": "Ana plays the cello."})
            assert not own.is_error
            other = await session.call_tool("search_memory", {"user_id": "ben", "query": "cello"})
            assert other.is_error and "PermissionDeniedError" in other.content[0].text
            with pytest.raises(MCPError):
                await session.read_resource("memory://ben/index")

    asyncio.run(run())


def test_streamable_http_refuses_a_missing_token(live_server: LiveServer) -> None:
    response = httpx2.post(live_server.url + "/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
                           headers={"Accept": "application/json, text/event-stream"})
    assert response.status_code == 401
    assert response.json()["error"]["type"] == "AuthenticationError"
