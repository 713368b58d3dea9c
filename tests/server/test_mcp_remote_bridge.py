"""The Claude Desktop bridge docs/server.md documents (``npx -y mcp-remote URL --header "Authorization:${VAR}"``
with the token in ``env``): its arguments, read from the doc, name this server's ``/mcp`` and a header that —
once the bridge substitutes the variable and splits it at the first colon, as mcp-remote does — authenticates
with the server. The official MCP client stands in for the bridge here; test_mcp_clients.py runs the bridge itself."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

import httpx2
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from .conftest import ANA, LiveServer

DOC = Path(__file__).resolve().parents[2] / "docs" / "server.md"


def bridge_config() -> dict[str, object]:
    blocks = re.findall(r"```json\n(.*?)```", DOC.read_text(encoding="utf-8"), flags=re.S)
    configs = [json.loads(b) for b in blocks if "mcp-remote" in b and "--header" in b]
    assert len(configs) == 1, "docs/server.md shows one mcp-remote configuration with a header token"
    (entry,) = configs[0]["mcpServers"].values()
    return dict(entry)


def test_the_documented_bridge_arguments_reach_the_server(live_server: LiveServer) -> None:
    entry = bridge_config()
    assert entry["command"] == "npx"
    args = list(entry["args"])  # type: ignore[call-overload]
    assert args[:2] == ["-y", "mcp-remote"] and args[2].endswith("/mcp") and "--header" in args
    header = args[args.index("--header") + 1]
    env = dict(entry["env"])  # type: ignore[call-overload]
    (variable,) = re.findall(r"\$\{(\w+)\}", header)
    assert " " not in header, "no space in an argument (Claude Desktop on Windows splits at spaces)"
    assert env[variable].startswith("Bearer ")
    expanded = header.replace("${" + variable + "}", f"Bearer {ANA}")  # what the bridge does with env
    name, value = expanded.split(":", 1)
    url = live_server.url + "/" + args[2].split("/", 3)[3]  # the documented path, on this test's server

    async def run() -> list[str]:
        async with httpx2.AsyncClient(headers={name.strip(): value.strip()}, timeout=60) as http, \
                streamable_http_client(url, http_client=http) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            saved = await session.call_tool("save_memory", {"user_id": "ana", "content": "Ana plays the cello."})
            assert not saved.is_error, saved.content
            return [t.name for t in (await session.list_tools()).tools]

    tools = asyncio.run(run())
    assert {"search_memory", "list_memories", "get_memory"} <= set(tools)
