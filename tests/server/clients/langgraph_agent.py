"""langchain-mcp-adapters loading memext serve's MCP tools into a LangGraph agent whose chat model is scripted: it
calls search_memory, then answers from the tool's output. Run by tests/server/test_mcp_clients.py with the Python of
tests/server/clients/.venv (this client needs an mcp SDK older than the server's). Prints one JSON line.

Usage: python langgraph_agent.py MCP_URL TOKEN
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_mcp_adapters.client import MultiServerMCPClient
from langgraph.prebuilt import create_react_agent


class ScriptedChatModel(BaseChatModel):
    """First turn: a tool call to search_memory; next turn: 'Thursdays' if the tool's output says so."""

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Any, **kwargs: Any) -> ScriptedChatModel:
        return self

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None,
                  **kwargs: Any) -> ChatResult:
        outputs = [m for m in messages if isinstance(m, ToolMessage)]
        if not outputs:
            message = AIMessage(content="", tool_calls=[{"id": "call-1", "name": "search_memory", "args": {
                "user_id": "ana", "query": "when is the cello lesson?", "k": 3}}])
        else:
            message = AIMessage(content="Thursdays" if "Thursdays" in str(outputs[-1].content) else "I don't know")
        return ChatResult(generations=[ChatGeneration(message=message)])


async def main(url: str, token: str) -> dict[str, Any]:
    client = MultiServerMCPClient({"memory": {"transport": "streamable_http", "url": url,
                                              "headers": {"Authorization": f"Bearer {token}"}}})
    tools = await client.get_tools()
    agent = create_react_agent(ScriptedChatModel(), tools)
    state = await agent.ainvoke({"messages": [("user", "When is my cello lesson?")]})
    calls = [m for m in state["messages"] if isinstance(m, ToolMessage)]
    return {"tools": [t.name for t in tools], "tool_called": calls[0].name if calls else None,
            "tool_output": str(calls[0].content) if calls else "", "answer": state["messages"][-1].content}


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main(sys.argv[1], sys.argv[2]))))
