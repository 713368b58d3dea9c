"""Property test (issue 22, section 3): arbitrary JSON — lone surrogates, NUL, NaN, huge integers, deep nesting — at
every REST route and every MCP tool of a live server on loopback. Never a 500 (nor a crash inside an MCP tool),
never a half-write (a refused call leaves the store's counts as they were), and the server keeps serving."""

from __future__ import annotations

import asyncio
import json
import re
import threading
from collections.abc import Callable, Coroutine, Iterator
from typing import Any
from urllib.parse import quote

import httpx
import httpx2
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from memory_ext.server import TokenTable

from .conftest import ADMIN, LiveServer, _serving

EXAMPLES = settings(max_examples=60, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.filter_too_much])

NASTY_TEXT = ["", " ", "\x00", "a\x00b", "\ud800", "x\udfff", "\ud83d\ude00", "😀", "ana", "s1", "\u202e", "\n",
              "2026-03-02T09:00:00", "weekly", "monthly", "user", "assistant", "1e30", "x" * 300]


def nested(value: Any, depth: int) -> Any:
    for i in range(depth):
        value = {"a": value} if i % 2 else [value]
    return value


poison = st.sampled_from(["\x00", "a\x00b", "\ud800", "x\udfff", float("nan"), float("inf"), 10**30, 2**64, -1,
                          True, "", "x" * 5000])
scalars = st.one_of(
    poison, poison,
    st.none(), st.booleans(),
    st.integers(min_value=-(10**40), max_value=10**40), st.sampled_from([0, 1, -1, 5, 2**63, 2**64, 10**30]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(NASTY_TEXT),
    st.text(alphabet=st.characters(codec=None, exclude_categories=()), max_size=12),  # incl. lone surrogates
)
json_values = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4),
                            st.dictionaries(st.one_of(st.sampled_from(NASTY_TEXT), st.text(max_size=6)), inner,
                                            max_size=4)),
    max_leaves=20,
)
deep_values = st.builds(nested, scalars, st.integers(min_value=30, max_value=1_500))
any_json = st.one_of(json_values, json_values, json_values, deep_values)
turn_like = st.fixed_dictionaries(
    {"role": st.sampled_from(["user", "assistant"]) | any_json,
     "content": st.sampled_from(["I moved to Lisbon", "hello"]) | any_json},
    optional={k: any_json for k in ("speaker", "timestamp", "session_id", "external_id", "tool_calls",
                                    "attachments", "metadata", "id")})


def body_of(fields: dict[str, st.SearchStrategy[Any]]) -> st.SearchStrategy[Any]:
    """Bodies that look like the route's (a valid user most of the time, so the engine is reached) or anything."""
    shaped = st.fixed_dictionaries({"user_id": st.just("ana") | any_json},
                                   optional={**{k: any_json for k in ("agent_id", "session_id", "bogus")}, **fields})
    return st.one_of(shaped, shaped, shaped, any_json)


TURN = {"role": "user", "content": "I moved to Lisbon", "speaker": "Ana", "session_id": "s1", "external_id": "e1",
        "timestamp": "2026-03-02T09:00:00", "metadata": {"topic": "moving", "tags": ["a"]},
        "tool_calls": [{"name": "f", "args": {"q": "x"}}], "attachments": [{"url": "u"}]}
VALID: dict[str, dict[str, Any]] = {  # a body each route accepts; the property test poisons one place of it
    "search": {"user_id": "ana", "agent_id": "a1", "session_id": "s1", "query": "Lisbon", "k": 3,
               "filters": {"speaker": "Ana", "role": "user", "session_id": ["s1"], "since": "2020-01-01",
                           "metadata": {"topic": "moving"}},
               "action_state": {"current_subgoal": "book", "missing_slots": ["date"]}, "now": "2026-03-02",
               "explain": True, "trace": True, "include_cold": False, "as_of": 1_800_000_000},
    "turns": {"user_id": "ana", "session_id": "s1", "turns": [TURN, {"role": "assistant", "content": "ok"}],
              "wait": False},
    "prompt": {"user_id": "ana", "budget_tokens": 200, "query": "Lisbon"},
    "compact": {"user_id": "ana", "period": "weekly", "key": "2026-W10", "now": "2026-03-30"},
    "maybe_compact": {"user_id": "ana", "now": "2026-03-30"},
    "pre_compress": {"user_id": "ana", "full_context": [{"role": "user", "content": "hi"}], "estimated_tokens": 10,
                     "task_state": {"goal": "x", "steps": [1, 2]}, "now": "2026-03-02"},
    "forget": {"user_id": "ana", "record_ids": ["rec_x"], "hook_ids": ["abcdef12"]},
    "update": {"user_id": "ana", "id": "home", "content": "I live in Porto", "metadata": {"k": "v"},
               "timestamp": "2026-03-03"},
    "history": {"user_id": "ana", "id": "home"},
    "delete": {"user_id": "ana", "ids": ["home"]},
}


def places(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every place of a JSON value (each container and each leaf), as a path of keys and indexes."""
    out = [path]
    if isinstance(value, dict):
        out += [p for k, v in value.items() for p in places(v, (*path, k))]
    elif isinstance(value, list):
        out += [p for i, v in enumerate(value) for p in places(v, (*path, i))]
    return out


def poisoned(body: dict[str, Any], path: tuple[Any, ...], value: Any, rename: bool) -> Any:
    """``body`` with the value at ``path`` replaced (or, with ``rename`` and a key path, its key replaced)."""
    if not path:
        return value
    copy = json.loads(json.dumps(body))
    parent = copy
    for key in path[:-1]:
        parent = parent[key]
    if rename and isinstance(parent, dict) and isinstance(value, str):
        parent[value] = parent.pop(path[-1])
    else:
        parent[path[-1]] = value
    return copy


def one_poisoned_place(route: str) -> st.SearchStrategy[Any]:
    body = VALID[route]
    return st.builds(poisoned, st.just(body), st.sampled_from(places(body)[1:]), any_json, st.booleans())


ROUTES: dict[str, tuple[str, st.SearchStrategy[Any]]] = {
    "search": ("/v1/search", body_of({"query": st.just("Lisbon") | any_json, **{
        k: any_json for k in ("k", "filters", "action_state", "explain", "now", "trace", "include_cold", "as_of")}})),
    "turns": ("/v1/turns", body_of({"turns": st.lists(turn_like | any_json, max_size=3) | any_json,
                                    "wait": any_json})),
    "prompt": ("/v1/prompt", body_of({"budget_tokens": any_json, "query": any_json})),
    "compact": ("/v1/compact", body_of({"period": st.sampled_from(["weekly", "monthly"]) | any_json,
                                        "key": any_json, "now": any_json})),
    "maybe_compact": ("/v1/maybe_compact", body_of({"now": any_json})),
    "pre_compress": ("/v1/pre_compress", body_of({
        "full_context": st.just("User: hi\nAssistant: hello") | st.lists(turn_like, max_size=2) | any_json,
        **{k: any_json for k in ("estimated_tokens", "task_state", "now")}})),
    "forget": ("/v1/forget", body_of({"record_ids": any_json, "hook_ids": any_json})),
    "update": ("/v1/memories/update", body_of({"id": st.just("home") | any_json, "content": any_json,
                                               "metadata": any_json, "timestamp": any_json})),
    "history": ("/v1/memories/history", body_of({"id": st.just("home") | any_json})),
    "delete": ("/v1/memories/delete", body_of({"ids": st.just(["home"]) | any_json})),
}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    yield from _serving(tmp_path_factory.mktemp("prop") / "store", TokenTable.parse([ADMIN]))


@pytest.fixture(scope="module")
def client(server: LiveServer) -> Iterator[httpx.Client]:
    with server.client() as c:
        seed(c)
        yield c


def seed(client: httpx.Client) -> None:
    """A memory the bodies can name (external id "home"), so update, history and delete reach the store."""
    client.post("/v1/turns", json={"user_id": "ana", "turns": [
        {"role": "user", "content": "I live in Lisbon", "external_id": "home"}]}).raise_for_status()


def counts(server: LiveServer) -> tuple[int, int]:
    stats = server.engine.stats()
    return stats.turns, stats.records


def encode(body: Any) -> bytes:
    """JSON as a careless client writes it: lone surrogates as ``\\ud800`` escapes, NaN and Infinity as tokens."""
    try:
        return json.dumps(body, allow_nan=True).encode("ascii")
    except (RecursionError, ValueError):  # deeper than json can write: the raw text of it
        return b"[" * 5000 + b"]" * 5000


def check(server: LiveServer, response: httpx.Response, before: tuple[int, int]) -> None:
    assert response.status_code < 500, response.text
    payload = response.json()  # every answer is JSON, errors included
    if response.status_code >= 400:
        assert set(payload["error"]) >= {"type", "field", "message", "fix"}
        assert counts(server) == before, "a refused call changed the store"


@pytest.mark.parametrize("route", sorted(ROUTES))
def test_no_body_makes_a_route_fail(server: LiveServer, client: httpx.Client, route: str) -> None:
    path, bodies = ROUTES[route]

    @EXAMPLES
    @given(body=st.one_of(one_poisoned_place(route), one_poisoned_place(route), bodies))
    def run(body: Any) -> None:
        before = counts(server)
        check(server, client.post(path, content=encode(body), headers={"content-type": "application/json"}),
              before)

    run()
    assert client.get("/healthz").status_code == 200
    if route in ("forget", "delete"):
        seed(client)


query_values = st.one_of(st.sampled_from(NASTY_TEXT), st.text(max_size=8),
                         st.integers(min_value=-(10**40), max_value=10**40).map(str),
                         st.floats().map(str), st.sampled_from(["%ED%A0%80", "%FF", "%00"]))


def escaped(text: str) -> str:
    """Percent-encoded as a careless client would: a lone surrogate as its (invalid) UTF-8 bytes."""
    return quote(text.encode("utf-8", "surrogatepass"), safe="")


def test_no_query_string_or_path_makes_a_read_fail(server: LiveServer, client: httpx.Client) -> None:
    @EXAMPLES
    @given(params=st.dictionaries(st.sampled_from(["user_id", "agent_id", "session_id", "limit", "offset",
                                                   "include_merged", "bogus"]), query_values, max_size=4),
           hook=query_values, importance=any_json)
    def run(params: dict[str, str], hook: str, importance: Any) -> None:
        before = counts(server)
        safe_hook = escaped(hook)
        query = "&".join(f"{k}={escaped(v)}" for k, v in params.items())
        for path in ("/v1/turns", "/v1/hooks", f"/v1/files/{safe_hook}", "/v1/stats", "/v1/namespaces",
                     "/v1/info"):
            check(server, client.get(f"{path}?{query}"), before)
        body = encode({"importance": importance, "user_id": params.get("user_id", "ana")})
        check(server, client.put(f"/v1/files/{safe_hook}/importance", content=body,
                                 headers={"content-type": "application/json"}), before)

    run()
    assert client.get("/healthz").status_code == 200


# -- MCP ---------------------------------------------------------------------------------------------------------
TOOL_ARGS: dict[str, dict[str, st.SearchStrategy[Any]]] = {
    "search_memory": {"query": st.just("Lisbon") | any_json, "k": any_json, "filters": any_json,
                      "action_state": any_json, "include_cold": any_json},
    "save_memory": {"content": any_json, "turns": st.lists(turn_like, max_size=2) | any_json, "speaker": any_json},
    "memory_index": {"budget_tokens": any_json, "query": any_json},
    "open_memory_file": {"hook_id": any_json},
    "pre_compress": {"context": st.just("User: hi\nAssistant: hello") | any_json, "task_state": any_json,
                     "estimated_tokens": any_json},
    "forget": {"record_ids": any_json, "hook_ids": any_json, "everything": st.just(False) | any_json},
    "update_memory": {"id": st.just("home") | any_json, "content": any_json},
    "memory_history": {"id": st.just("home") | any_json},
    "delete_memory": {"ids": any_json},
    "compact": {"period": any_json, "key": any_json},
}


def sendable(value: Any) -> bool:
    """What the SDK client can put on the wire at all: no lone surrogate (it cannot encode one; the server's JSON
    reader refuses the escape too) and no nesting beyond its JSON reader's limit."""
    try:
        text = json.dumps(value, ensure_ascii=False)
        text.encode("utf-8")
    except (UnicodeEncodeError, RecursionError, ValueError):
        return False
    depth = max_depth = 0
    for ch in text:  # brackets inside strings count too: an overestimate is fine here
        depth += ch in "[{"
        depth -= ch in "]}"
        max_depth = max(max_depth, depth)
    return max_depth < 120


class LoopThread:
    """One MCP client session on an event loop in its own thread, so synchronous hypothesis examples can use it."""

    def __init__(self, url: str) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="mcp-prop-client", daemon=True)
        self.thread.start()
        self.url = url
        self.closed = asyncio.Event()
        self.ready: asyncio.Future[ClientSession] = self.loop.create_future()
        self.task = asyncio.run_coroutine_threadsafe(self._hold(), self.loop)

    async def _hold(self) -> None:
        async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {ADMIN}"}, timeout=60) as http, \
                streamable_http_client(self.url + "/mcp", http_client=http) as (read, write), \
                ClientSession(read, write) as session:
            await session.initialize()
            self.ready.set_result(session)
            await self.closed.wait()

    def run(self, make: Callable[[ClientSession], Coroutine[Any, Any, Any]]) -> Any:
        async def call() -> Any:
            return await make(await self.ready)
        return asyncio.run_coroutine_threadsafe(call(), self.loop).result(timeout=120)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.closed.set)
        self.task.result(timeout=60)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=30)
        self.loop.close()


@pytest.fixture(scope="module")
def mcp_session(server: LiveServer, client: httpx.Client) -> Iterator[LoopThread]:
    held = LoopThread(server.url)
    try:
        yield held
    finally:
        held.close()


CLEAN_TOOL_ERROR = re.compile(r"^([A-Z][A-Za-z]*Error: |Error executing tool \w+: )")
"""A tool error a model can act on: our typed errors, or the SDK's argument validation (a crash inside a tool is the
bare "Error executing tool <name>")."""


@pytest.mark.parametrize("tool", sorted(TOOL_ARGS))
def test_no_arguments_make_a_tool_crash(server: LiveServer, client: httpx.Client, mcp_session: LoopThread,
                                        tool: str) -> None:
    shaped = st.fixed_dictionaries({"user_id": st.just("ana") | any_json},
                                   optional={**TOOL_ARGS[tool], "agent_id": any_json, "session_id": any_json})
    arguments = st.one_of(shaped, shaped, shaped, st.dictionaries(st.text(max_size=8), any_json, max_size=3))

    @EXAMPLES
    @given(args=arguments.filter(sendable))
    def run(args: dict[str, Any]) -> None:
        before = counts(server)
        try:
            result = mcp_session.run(lambda s: s.call_tool(tool, args))
        except MCPError as exc:  # a protocol error is acceptable only as "invalid parameters"
            assert exc.code == -32602, exc.message
            assert counts(server) == before
            return
        if result.is_error:
            text = result.content[0].text
            assert CLEAN_TOOL_ERROR.match(text), text
            assert counts(server) == before, "a refused call changed the store"

    run()
    assert client.get("/healthz").status_code == 200
    assert not mcp_session.run(lambda s: s.call_tool("search_memory", {"user_id": "ana", "query": "x"})).is_error
    if tool in ("forget", "delete_memory"):
        seed(client)
