"""The REST API through httpx against a live uvicorn on loopback: every route, structured errors, status codes."""

from __future__ import annotations

from typing import Any

import httpx

from memory_ext import IndexHook, MemoryFile, SearchResult
from memory_ext.server.schemas import StoredTurn

from .conftest import LiveServer

TURNS = [
    {"role": "user", "speaker": "Ana", "content": "My sister Lena lives in Porto.", "external_id": "d1:1",
     "timestamp": "2026-03-02T09:00:00", "session_id": "s1"},
    {"role": "assistant", "content": "Porto is lovely in spring.", "external_id": "d1:2",
     "timestamp": "2026-03-02T09:01:00", "session_id": "s1"},
    {"role": "user", "speaker": "Ana", "content": "I adopted a beagle called Toby.", "external_id": "d2:1",
     "timestamp": "2026-03-09T10:00:00", "session_id": "s2"},
]


def _add(client: httpx.Client, user: str = "ana") -> dict[str, Any]:
    response = client.post("/v1/turns", json={"user_id": user, "turns": TURNS})
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def _error(response: httpx.Response, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.text
    error: dict[str, Any] = response.json()["error"]
    assert set(error) >= {"type", "field", "message", "fix"}
    return error


def test_health_readiness_and_openapi(live_server: LiveServer) -> None:
    with httpx.Client(base_url=live_server.url) as anonymous:  # no token needed for these
        assert anonymous.get("/healthz").json() == {"status": "ok"}
        assert anonymous.get("/readyz").json() == {"status": "ready"}
        spec = anonymous.get("/openapi.json").json()
    paths = set(spec["paths"])
    assert {"/v1/search", "/v1/turns", "/v1/hooks", "/v1/prompt", "/v1/files/{hook_id}",
            "/v1/files/{hook_id}/importance", "/v1/compact", "/v1/maybe_compact", "/v1/pre_compress", "/v1/forget",
            "/v1/stats", "/v1/namespaces", "/v1/info"} <= paths
    assert "SearchResult" in spec["components"]["schemas"]


def test_write_search_and_read_back(live_server: LiveServer) -> None:
    with live_server.client() as client:
        added = _add(client)
        assert len(added["turn_ids"]) == 3
        response = client.post("/v1/search", json={"user_id": "ana", "query": "where does Lena live?", "k": 2})
        result = SearchResult.model_validate(response.json())
        assert result.items[0].text == "My sister Lena lives in Porto."
        assert result.items[0].timestamp is not None and result.items[0].timestamp.tzinfo is not None
        narrowed = client.post("/v1/search", json={"user_id": "ana", "session_id": "s2", "query": "Lena Porto",
                                                   "k": 5}).json()
        assert all(item["session_id"] == "s2" for item in narrowed["items"])
        filtered = client.post("/v1/search", json={"user_id": "ana", "query": "dog", "k": 3,
                                                   "filters": {"speaker": "Ana", "since": "2026-03-05T00:00:00"},
                                                   "action_state": {"current_subgoal": "buy dog food"}}).json()
        assert [i["text"] for i in filtered["items"]] == ["I adopted a beagle called Toby."]
        turns = [StoredTurn.model_validate(t) for t in client.get("/v1/turns", params={"user_id": "ana"}).json()]
        assert [t.content for t in turns] == [t["content"] for t in TURNS]
        assert all(t.current for t in turns), "no version was replaced"
        page = client.get("/v1/turns", params={"user_id": "ana", "limit": 1, "offset": 1}).json()
        assert [t["content"] for t in page] == ["Porto is lovely in spring."]
        assert client.get("/v1/turns", params={"user_id": "ana", "session_id": "s2"}).json()[0]["external_id"] == "d2:1"
        assert client.post("/v1/search", json={"user_id": "ben", "query": "Lena", "k": 3}).json()["items"] == []


def test_files_prompt_retrieve_importance_compaction(live_server: LiveServer) -> None:
    with live_server.client() as client:
        _add(client)
        hooks = [IndexHook.model_validate(h) for h in client.get("/v1/hooks", params={"user_id": "ana"}).json()]
        assert len(hooks) == 2 and all(h.period == "daily" for h in hooks)
        prompt = client.post("/v1/prompt", json={"user_id": "ana", "budget_tokens": 400}).json()["prompt"]
        assert all(h.id in prompt for h in hooks)
        memory_file = MemoryFile.model_validate(client.get(f"/v1/files/{hooks[-1].id[:8]}",
                                                           params={"user_id": "ana"}).json())
        assert [t.content for t in memory_file.turns] == ["My sister Lena lives in Porto.",
                                                          "Porto is lovely in spring."]
        hook = client.put(f"/v1/files/{hooks[0].id}/importance", json={"importance": 90, "user_id": "ana"}).json()
        assert hook["importance"] == 90
        weekly = client.post("/v1/compact", json={"user_id": "ana", "period": "weekly", "key": "2026-W10",
                                                  "now": "2026-04-01T00:00:00"}).json()
        assert [s["period"] for s in weekly["steps"]] == ["2026-W10"]
        due = client.post("/v1/maybe_compact", json={"user_id": "ana", "now": "2026-05-01T00:00:00"}).json()
        assert {s["period"] for s in due["steps"]} >= {"2026-W11"}
        saved = client.post("/v1/pre_compress", json={
            "user_id": "ana", "full_context": "User: renew my passport before June\nAssistant: noted",
            "task_state": {"goal": "travel"}}).json()["hook_id"]
        assert "passport" in client.get(f"/v1/files/{saved}", params={"user_id": "ana"}).json()["text"]


def test_forget_stats_and_namespaces(live_server: LiveServer) -> None:
    with live_server.client() as client:
        _add(client)
        _add(client, "ben")
        assert client.get("/v1/stats").json()["turns"] == 6
        assert sorted(n["user_id"] for n in client.get("/v1/namespaces").json()) == ["ana", "ben"]
        hit = client.post("/v1/search", json={"user_id": "ana", "query": "beagle Toby", "k": 1}).json()["items"][0]
        receipt = client.post("/v1/forget", json={"user_id": "ana", "record_ids": [hit["id"]]}).json()
        assert receipt["turns"] == 1
        remaining = client.get("/v1/turns", params={"user_id": "ana"}).json()
        assert "Toby" not in " ".join(t["content"] for t in remaining)
        whole = client.post("/v1/forget", json={"user_id": "ben"}).json()
        assert whole["turns"] == 3
        assert client.get("/v1/stats").json()["turns"] == 2


def test_structured_errors_and_status_codes(live_server: LiveServer) -> None:
    with live_server.client() as client:
        _add(client)
        error = _error(client.post("/v1/search", json={"user_id": "ana", "query": "x", "k": 0}), 400)
        assert (error["type"], error["field"]) == ("InvalidQueryError", "k")
        assert "between 1 and" in error["fix"]
        error = _error(client.post("/v1/turns", json={"user_id": "ana", "turns": [{"role": "robot", "content": "x"}]}),
                       400)
        assert (error["type"], error["field"]) == ("InvalidTurnError", "turns[0].role")
        assert "valid roles" in error["fix"]
        error = _error(client.post("/v1/search", json={"user_id": "", "query": "x"}), 400)
        assert error["type"] == "InvalidNamespaceError"
        error = _error(client.get("/v1/files/ffffffffffff", params={"user_id": "ana"}), 404)
        assert error["type"] == "HookNotFoundError"
        error = _error(client.post("/v1/search", json={"user_id": "ana"}), 422)  # no query: the body schema
        assert error["field"] == "query"
        error = _error(client.post("/v1/search", json={"user_id": "ana", "query": "x", "colour": "red"}), 422)
        assert error["field"] == "colour"
        error = _error(client.put("/v1/files/abcdef/importance", json={"importance": 300, "user_id": "ana"}), 400)
        assert (error["type"], error["field"]) == ("InvalidArgumentError", "importance")
        _error(client.get("/v1/nothing-here"), 404)
