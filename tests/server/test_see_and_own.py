"""See and own a memory through the server: REST list / get / overview / export / import, ``GET /v1/turns``'s
current flag, the same through ``RemoteEngine``, MCP ``list_memories`` / ``get_memory`` / ``save_memory`` with
metadata, and a token pinned to one user seeing, exporting and importing only that user."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from memory_ext import Turn
from memory_ext.client import PermissionDeniedError, RemoteEngine
from tests.conftest import RULES_CHAT, rules_turns

from .conftest import ADMIN, ANA, LiveServer
from .test_mcp import _data, _http_session


def _fill(remote: RemoteEngine) -> None:
    remote.add_turns(rules_turns(), "maya", wait=True)
    remote.update("maya", "rules:3", content="My Nordea card is a green Mastercard now.")
    remote.add_turns([Turn(role="user", content="Ana plays the cello.", external_id="cello")], "ana", wait=True)


def test_rest_lists_gets_and_flags_versions(live_server: LiveServer) -> None:
    with RemoteEngine(live_server.url, token=ADMIN) as remote:
        _fill(remote)
        page = remote.list_memories("maya", limit=3)
        assert page.items[0].content == "My Nordea card is a green Mastercard now."
        assert page.items[0].version_count == 2 and page.next_cursor is not None
        rest = remote.list_memories("maya", limit=100, cursor=page.next_cursor)
        assert len(page.items) + len(rest.items) == len(RULES_CHAT) and rest.next_cursor is None
        private = remote.list_memories("maya", filters={"metadata": {"private": True}})
        assert {m.content for m in private.items} == {RULES_CHAT[1][3], RULES_CHAT[5][3]}
        memory = remote.get_memory("maya", "rules:3")
        assert [v.operation for v in memory.history] == ["add", "update"]
        assert [(s.user_id, s.memories, s.turns) for s in remote.overview()] == [
            ("maya", len(RULES_CHAT), len(RULES_CHAT) + 1), ("ana", 1, 1)]
        replaced = remote.replaced_turns("maya")
        assert len(replaced) == 1
        old = next(t for t in remote.get_turns("maya") if t.id in replaced)
        assert old.content == RULES_CHAT[3][3]
    with live_server.client() as client:
        turns = client.get("/v1/turns", params={"user_id": "maya"}).json()
        assert [t["content"] for t in turns if not t["current"]] == [RULES_CHAT[3][3]]
        got = client.get("/v1/memories", params={"user_id": "maya", "limit": 2,
                                                 "filters": json.dumps({"speaker": "Tom"})}).json()
        assert [m["content"] for m in got["items"]] == [RULES_CHAT[5][3]]
        bad = client.get("/v1/memories", params={"user_id": "maya", "filters": "{not json"})
        assert bad.status_code == 400 and bad.json()["error"]["field"] == "filters"
        assert client.get("/v1/memories/rules:3", params={"user_id": "maya"}).json()["version_count"] == 2
        missing = client.get("/v1/memories/nothing-here", params={"user_id": "maya"})
        assert missing.status_code == 400 and missing.json()["error"]["type"] == "InvalidQueryError"


def test_export_then_import_restores_a_user(live_server: LiveServer) -> None:
    with RemoteEngine(live_server.url, token=ADMIN) as remote:
        _fill(remote)
        lines = remote.export("maya")
        assert lines[0]["type"] == "header" and {line["type"] for line in lines} >= {"turn", "history", "file"}
        assert all(line.get("user_id") in (None, "maya") for line in lines)
        before = [m.model_dump() for m in remote.list_memories("maya", limit=100).items]
        remote.forget("maya")
        assert remote.list_memories("maya").items == ()
        report = remote.import_records(lines, wait=True)
        assert report.turns == len(RULES_CHAT) + 1
        assert [m.model_dump() for m in remote.list_memories("maya", limit=100).items] == before
        assert remote.search("What is my Nordea card?", "maya", k=1).items[0].text.startswith("My Nordea card")
        assert remote.import_records(lines).turns == 0  # idempotent
        mem0 = {"results": [{"id": "m-1", "memory": "Prefers aisle seats", "user_id": "maya", "metadata": None,
                             "created_at": "2024-07-26T10:29:36-07:00", "updated_at": None}]}
        assert remote.import_records(mem0, format="mem0", wait=True).turns == 1
    with live_server.client() as client:
        streamed = client.get("/v1/export", params={"user_id": "ana"})
        assert streamed.headers["content-type"].startswith("application/x-ndjson")
        assert "attachment" in streamed.headers["content-disposition"]
        assert [json.loads(line)["type"] for line in streamed.text.splitlines()][:2] == ["header", "namespace"]
        broken = client.post("/v1/import", content=b'{"type": "header", "format": "memory-ext", "version": 1}\n{oops')
        assert broken.status_code == 400 and broken.json()["error"]["type"] == "InvalidImportError"
        assert "line 2" in broken.json()["error"]["field"]


def test_a_pinned_token_sees_exports_and_imports_only_its_user(live_server: LiveServer) -> None:
    with RemoteEngine(live_server.url, token=ADMIN) as admin:
        _fill(admin)
        maya_lines = admin.export("maya")
    with RemoteEngine(live_server.url, token=ANA) as ana:
        assert [s.user_id for s in ana.overview()] == ["ana"]
        assert [m.content for m in ana.list_memories("ana").items] == ["Ana plays the cello."]
        for call in (lambda: ana.list_memories("maya"), lambda: ana.get_memory("maya", "rules:3"),
                     lambda: ana.export("maya"), lambda: ana.import_records(maya_lines)):
            try:
                call()
            except PermissionDeniedError:
                continue
            raise AssertionError("a pinned token reached another user")
        own = ana.export()  # no user named: the token's own
        assert {line["user_id"] for line in own if line["type"] == "namespace"} == {"ana"}
    with RemoteEngine(live_server.url, token=ADMIN) as admin:
        assert len(admin.list_memories("maya", limit=100).items) == len(RULES_CHAT), "the refused import wrote nothing"


def test_mcp_lists_gets_and_saves_with_metadata(live_server: LiveServer) -> None:
    with RemoteEngine(live_server.url, token=ADMIN) as remote:
        _fill(remote)

    async def run() -> dict[str, Any]:
        async with _http_session(live_server.url, ADMIN) as http, \
                streamable_http_client(live_server.url + "/mcp", http_client=http) as (read, write), \
                ClientSession(read, write) as session:
            await session.initialize()
            saved = _data(await session.call_tool("save_memory", {
                "user_id": "maya", "content": "Maya's gym locker is number 12.", "external_id": "locker",
                "metadata": {"topic": "gym", "private": False}}))
            again = _data(await session.call_tool("save_memory", {
                "user_id": "maya", "content": "Maya's gym locker is number 12.", "external_id": "locker"}))
            listed = _data(await session.call_tool("list_memories", {"user_id": "maya", "limit": 2}))
            more = _data(await session.call_tool("list_memories", {"user_id": "maya", "limit": 50,
                                                                   "cursor": listed["next_cursor"]}))
            detail = _data(await session.call_tool("get_memory", {"user_id": "maya", "id": "rules:3"}))
            found = _data(await session.call_tool("search_memory", {
                "user_id": "maya", "query": "which locker?", "filters": {"metadata": {"topic": "gym"}}}))
            then = _data(await session.call_tool("search_memory", {
                "user_id": "maya", "query": "What is my Nordea card?", "as_of": "2026-03-02T12:00:00"}))
            return {"saved": saved, "again": again, "listed": listed, "more": more, "detail": detail,
                    "found": found, "then": then}

    out = asyncio.run(run())
    assert out["saved"]["saved"] == 1
    assert out["listed"]["memories"][0] == {**out["listed"]["memories"][0], "id": "locker", "versions": 1}
    assert out["listed"]["memories"][0]["metadata"]["topic"] == "gym"
    assert len(out["listed"]["memories"]) + len(out["more"]["memories"]) == len(RULES_CHAT) + 1
    assert [h["operation"] for h in out["detail"]["history"]] == ["add", "update"]
    assert out["detail"]["memory"]["content"] == "My Nordea card is a green Mastercard now."
    assert [i["text"] for i in out["found"]["items"]] == ["Maya's gym locker is number 12."]
    assert out["found"]["items"][0]["metadata"]["topic"] == "gym"
    assert RULES_CHAT[3][3] in [i["text"] for i in out["then"]["items"]], "as_of reaches the replaced version"
