"""The MCP clients people connect, each run for real against a `memext serve` the test starts on loopback:

- `mcp-remote` (npm), the stdio bridge of Claude Desktop, driven by the `mcp` SDK's stdio client — with a header
  token, and with OAuth against `--oauth` (the owner approves on the consent page the bridge sends the browser to);
- `@modelcontextprotocol/sdk`'s TypeScript client (tests/server/js/client.mjs) listing tools and searching;
- `llama-index-tools-mcp` loading our tools into a LlamaIndex agent with a scripted LLM;
- `langchain-mcp-adapters` loading them into a LangGraph agent with a scripted chat model (in its own virtual
  environment, tests/server/clients/.venv: it needs an `mcp` SDK older than the server's).

The npm packages are installed by `.ci/run` (`npm ci --prefix tests/server/js`) and the LangChain client's environment
too; without them the tests skip saying so, unless MEMORY_EXT_REQUIRE_SERVERS=1 (CI), where they fail.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from memory_ext.store.chroma_server import free_port

from .conftest import ANA, LiveServer
from .test_oauth import approve, oauth_server

HERE = Path(__file__).resolve().parent
JS = HERE / "js"
CLIENTS_VENV = HERE / "clients" / ".venv"


def _missing(what: str, fix: str) -> None:
    message = f"{what} is not installed ({fix})"
    if os.environ.get("MEMORY_EXT_REQUIRE_SERVERS") == "1":
        pytest.fail(message + "; MEMORY_EXT_REQUIRE_SERVERS=1 requires it")
    pytest.skip(message)


def node_package(name: str) -> Path:
    """The installed npm package ``name`` of tests/server/js (skips, or fails in CI, without node or the package)."""
    if shutil.which("node") is None:
        _missing("node", "install Node.js 20+")
    package = JS / "node_modules" / name
    if not (package / "package.json").is_file():
        _missing(f"the npm package {name}", "run: npm ci --prefix tests/server/js")
    return package


def mcp_remote() -> list[str]:
    package = node_package("mcp-remote")
    return [shutil.which("node") or "node", str(package / "dist" / "proxy.js")]


def no_browser(tmp_path: Path) -> dict[str, str]:
    """An environment whose ``xdg-open`` does nothing: the bridge prints the authorization URL, the test visits it."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    opener = bin_dir / "xdg-open"
    opener.write_text("#!/bin/sh\nexit 0\n")
    opener.chmod(0o755)
    return {"PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}", "HOME": str(tmp_path),
            "MCP_REMOTE_CONFIG_DIR": str(tmp_path / "auth"), "BROWSER": str(opener)}


async def bridge_session(command: list[str], env: dict[str, str], errlog: Path,
                         calls: list[tuple[str, dict[str, Any]]]) -> tuple[list[str], list[Any]]:
    params = StdioServerParameters(command=command[0], args=command[1:], env={**os.environ, **env})
    with errlog.open("w") as err:
        async with stdio_client(params, errlog=err) as (read, write), ClientSession(read, write) as session:
            await asyncio.wait_for(session.initialize(), timeout=100)
            tools = [t.name for t in (await session.list_tools()).tools]
            return tools, [await session.call_tool(name, arguments) for name, arguments in calls]


@pytest.mark.timeout(300)
def test_mcp_remote_bridges_stdio_with_a_header_token(live_server: LiveServer, tmp_path: Path) -> None:
    """Claude Desktop's set-up of docs/server.md: `mcp-remote URL --header Authorization:${AUTH}` with AUTH in env."""
    command = [*mcp_remote(), live_server.url + "/mcp", "--header", "Authorization:${MEMEXT_AUTH}"]
    env = {**no_browser(tmp_path), "MEMEXT_AUTH": f"Bearer {ANA}"}
    tools, (saved, found, other) = asyncio.run(bridge_session(command, env, tmp_path / "bridge.log", [
        ("save_memory", {"user_id": "ana", "content": "Ana's violin is in the blue case."}),
        ("search_memory", {"user_id": "ana", "query": "where is the violin?", "k": 3}),
        ("search_memory", {"user_id": "ben", "query": "anything"})]))
    assert {"search_memory", "save_memory", "forget"} <= set(tools)
    assert not saved.is_error
    assert "blue case" in json.dumps(found.structured_content)
    assert other.is_error and "PermissionDenied" in other.content[0].text  # the token is pinned to Ana


@pytest.mark.timeout(300)
def test_mcp_remote_does_the_oauth_flow_against_the_builtin_server(tmp_path: Path) -> None:
    """The bridge without a token: discovery, dynamic registration, PKCE; the owner approves in the 'browser' (the
    test visits the URL the bridge prints, then the bridge's own callback); then tools are called with the token."""
    bridge = mcp_remote()
    callback_port = free_port()
    errlog = tmp_path / "bridge.log"
    with oauth_server(tmp_path / "store") as live:
        approved: list[str] = []
        failures: list[BaseException] = []

        def owner_in_the_browser() -> None:
            try:
                deadline = time.monotonic() + 90
                while time.monotonic() < deadline:
                    text = errlog.read_text() if errlog.exists() else ""
                    # the whole line (the log may be read while the bridge is still writing it)
                    found = re.search(r"Please authorize this client by visiting:\s*(http\S+)\n", text)
                    if found:
                        answer = approve(found.group(1), user="ana")
                        location = answer.headers["location"]  # the bridge's loopback callback, with the code
                        approved.append(location)
                        httpx.get(location, timeout=30)
                        return
                    time.sleep(0.1)
                raise AssertionError("the bridge printed no authorization URL:\n" + text[-2000:])
            except Exception as exc:  # noqa: BLE001 - reported by the test, not lost in the thread
                failures.append(exc)

        owner = threading.Thread(target=owner_in_the_browser, daemon=True)
        owner.start()
        command = [*bridge, live.mcp_url, str(callback_port)]
        tools, (saved, found, other) = asyncio.run(bridge_session(command, no_browser(tmp_path), errlog, [
            ("save_memory", {"user_id": "ana", "content": "Ana's bow needs rehairing."}),
            ("search_memory", {"user_id": "ana", "query": "what does the bow need?", "k": 3}),
            ("list_memories", {"user_id": "ben"})]))
        owner.join(timeout=30)
    assert not failures, failures
    assert approved and approved[0].startswith(f"http://localhost:{callback_port}/")
    assert {"search_memory", "save_memory"} <= set(tools)
    assert not saved.is_error and "rehairing" in json.dumps(found.structured_content)
    assert other.is_error and "PermissionDenied" in other.content[0].text  # the owner granted Ana's memory only
    stored = json.dumps([p.read_text() for p in (tmp_path / "auth").rglob("*.json")])
    assert "refresh_token" in stored  # the bridge keeps its refresh token (it refreshes by itself)


def test_the_typescript_sdk_client_lists_tools_and_searches(live_server: LiveServer) -> None:
    node_package("@modelcontextprotocol/sdk")
    done = subprocess.run(["node", str(JS / "client.mjs"), live_server.url + "/mcp", ANA, "ana", "Which cello?"],
                          capture_output=True, text=True, timeout=120, cwd=JS)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert {"search_memory", "save_memory", "list_memories"} <= set(result["tools"])
    assert not result["isError"] and "Mirecourt" in json.dumps(result["search"])


def test_llamaindex_agent_calls_our_tools(live_server: LiveServer) -> None:
    from llama_index.core.agent.workflow import FunctionAgent
    from llama_index.core.llms import ChatMessage
    from llama_index.core.llms.mock import MockFunctionCallingLLM
    from llama_index.core.tools import ToolSelection
    from llama_index.tools.mcp import BasicMCPClient, McpToolSpec

    with live_server.client(ANA) as http:
        http.post("/v1/turns", json={"user_id": "ana", "turns": [{"role": "user",
                                                                  "content": "My cello lesson is on Thursdays."}]})
    seen: list[str] = []

    def script(messages: list[ChatMessage], **_: Any) -> ChatMessage:
        """First turn: call search_memory; then answer from what the tool returned."""
        tool_results = [m for m in messages if m.role.value == "tool"]
        if not tool_results:
            return ChatMessage(role="assistant", content="", additional_kwargs={"tool_calls": [ToolSelection(
                tool_id="call-1", tool_name="search_memory",
                tool_kwargs={"user_id": "ana", "query": "when is the cello lesson?", "k": 3})]})
        seen.append(str(tool_results[-1].content))
        return ChatMessage(role="assistant", content="Thursdays" if "Thursdays" in seen[-1] else "I don't know")

    async def run() -> str:
        client = BasicMCPClient(live_server.url + "/mcp", headers={"Authorization": f"Bearer {ANA}"})
        tools = await McpToolSpec(client=client, allowed_tools=["search_memory", "list_memories"]).to_tool_list_async()
        assert {t.metadata.name for t in tools} == {"search_memory", "list_memories"}
        agent = FunctionAgent(tools=tools, llm=MockFunctionCallingLLM(response_generator=script))
        return str(await agent.run("When is my cello lesson?"))

    assert asyncio.run(run()) == "Thursdays"
    assert seen and "Thursdays" in seen[0]


def test_langgraph_agent_calls_our_tools_through_langchain_mcp_adapters(live_server: LiveServer) -> None:
    python = CLIENTS_VENV / "bin" / "python"
    if not python.is_file():
        _missing("the LangChain MCP client's environment", "run: python3 -m venv tests/server/clients/.venv && "
                 "tests/server/clients/.venv/bin/pip install -r tests/server/clients/requirements.txt")
    with live_server.client(ANA) as http:
        http.post("/v1/turns", json={"user_id": "ana", "turns": [{"role": "user",
                                                                  "content": "My cello lesson is on Thursdays."}]})
    done = subprocess.run([str(python), str(HERE / "clients" / "langgraph_agent.py"), live_server.url + "/mcp", ANA],
                          capture_output=True, text=True, timeout=180, env={"PATH": os.environ.get("PATH", "")})
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert {"search_memory", "save_memory"} <= set(result["tools"])
    assert result["tool_called"] == "search_memory" and "Thursdays" in result["tool_output"]
    assert result["answer"] == "Thursdays"
