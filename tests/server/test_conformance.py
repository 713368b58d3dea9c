"""One conformance suite, run against an embedded MemoryEngine and a RemoteEngine talking to a live server:
same calls, same results, same typed errors."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest

from memory_ext import (
    AddResult,
    CompactionReport,
    EngineLike,
    ForgetReceipt,
    HookNotFoundError,
    IndexHook,
    InvalidArgumentError,
    InvalidNamespaceError,
    InvalidQueryError,
    InvalidTurnError,
    MemoryEngine,
    MemoryFile,
    Namespace,
    SearchResult,
    StoreStats,
    Turn,
)
from memory_ext.client import RemoteEngine

from .conftest import ADMIN, start_thread_server

STORY = [
    Turn(role="user", speaker="Maya", content="I'm allergic to shellfish.", timestamp=datetime(2026, 3, 2, 9, 15),
         session_id="s1", external_id="m:1", metadata={"channel": "web"}),
    Turn(role="assistant", content="Noted: no shellfish in restaurant suggestions.",
         timestamp=datetime(2026, 3, 2, 9, 16), session_id="s1", external_id="m:2"),
    Turn(role="user", speaker="Maya", content="We moved to Lisbon near the river.",
         timestamp=datetime(2026, 3, 10, 18, 0), session_id="s2", external_id="m:3"),
    Turn(role="tool", content="", tool_calls=({"name": "book_table", "args": {"city": "Lisbon"}},),
         timestamp=datetime(2026, 3, 10, 18, 1), session_id="s2", external_id="m:4"),
]


@pytest.fixture(params=["embedded", "remote"])
def any_engine(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[EngineLike]:
    if request.param == "embedded":
        with MemoryEngine.open(tmp_path / "store", embedder="hashing") as engine:
            yield engine
        return
    live, server, thread = start_thread_server(tmp_path / "store", None)
    remote = RemoteEngine(live.url, token=ADMIN, path=tmp_path / "client")
    try:
        yield remote
    finally:
        remote.close()
        server.should_exit = True
        thread.join(timeout=30)
        live.engine.close()


def test_it_is_engine_like(any_engine: EngineLike) -> None:
    assert isinstance(any_engine, EngineLike)
    assert any_engine.config.limits.max_k >= 10
    assert any_engine.path.is_dir()


def test_add_search_and_read_back(any_engine: EngineLike) -> None:
    added = any_engine.add_turns(STORY, "maya")
    assert isinstance(added, AddResult) and len(added.turn_ids) == 4
    result = any_engine.search("what can't Maya eat?", "maya", k=3)
    assert isinstance(result, SearchResult)
    assert result.items[0].text == "I'm allergic to shellfish."
    assert result.items[0].speaker == "Maya" and result.items[0].timestamp == datetime.fromisoformat(
        "2026-03-02T09:15:00+00:00")
    assert result.items[0].channels and result.items[0].score > 0
    assert "shellfish" in result.context and not result.degraded
    turns = any_engine.get_turns("maya")
    assert [t.external_id for t in turns] == ["m:1", "m:2", "m:3", "m:4"]
    assert turns[0].metadata == {"channel": "web"} and turns[3].tool_calls[0]["name"] == "book_table"
    assert any_engine.get_turns(Namespace("maya", session_id="s2"))[0].content == STORY[2].content
    assert len(any_engine.get_turns("maya", limit=2, offset=1)) == 2
    only_s2 = any_engine.search("Lisbon", Namespace("maya", session_id="s2"), k=5)
    assert {i.session_id for i in only_s2.items} == {"s2"}
    since = any_engine.search("shellfish Lisbon", "maya", k=5, filters={"since": datetime(2026, 3, 5)})
    assert all(i.timestamp and i.timestamp >= datetime.fromisoformat("2026-03-05T00:00:00+00:00")
               for i in since.items)
    explained = any_engine.search("allergic", "maya", k=1, explain=True, trace=True,
                                  action_state={"current_subgoal": "book a restaurant"})
    assert explained.items[0].explanation is not None and explained.trace is not None
    assert any_engine.search("allergic", "someone-else", k=3).items == ()
    assert [n.user_id for n in any_engine.namespaces()] == ["maya"]
    stats = any_engine.stats()
    assert isinstance(stats, StoreStats) and stats.turns == 4


def test_memory_files_and_lifecycle(any_engine: EngineLike) -> None:
    any_engine.add_turns(STORY, "maya")
    hooks = any_engine.hooks("maya")
    assert len(hooks) == 2 and all(isinstance(h, IndexHook) for h in hooks)
    prompt = any_engine.render_prompt("maya", budget_tokens=300)
    assert prompt.startswith("Memory index") and hooks[0].id in prompt
    assert any_engine.render_prompt("maya", query="allergy") != ""
    memory_file = any_engine.retrieve(hooks[-1].id[:8], "maya")
    assert isinstance(memory_file, MemoryFile) and memory_file.turns[0].content == STORY[0].content
    assert any_engine.set_importance(hooks[0].id, 80).importance == 80
    report = any_engine.compact("maya", "weekly", key="2026-W10", now="2026-04-01T00:00:00")
    assert isinstance(report, CompactionReport) and [s["period"] for s in report.steps] == ["2026-W10"]
    due = any_engine.maybe_compact("maya", now=datetime(2026, 6, 1))
    assert {s["period"] for s in due.steps} >= {"2026-W11", "2026-03"}
    saved = any_engine.pre_compress("maya", [{"role": "user", "content": "Remind me to renew my passport."}],
                                    task_state={"goal": "travel paperwork"})
    assert any_engine.retrieve(saved).meta["task_state"] == {"goal": "travel paperwork"}
    receipt = any_engine.forget("maya", hook_ids=[saved])
    assert isinstance(receipt, ForgetReceipt) and saved in receipt.files_deleted


def test_forget(any_engine: EngineLike) -> None:
    any_engine.add_turns(STORY, "maya")
    hit = any_engine.search("Lisbon river", "maya", k=1).items[0]
    receipt = any_engine.forget("maya", record_ids=[hit.id])
    assert receipt.turns == 1 and hit.turn_ids[0] in receipt.turn_ids
    assert "Lisbon" not in " ".join(t.content for t in any_engine.get_turns("maya"))
    assert any_engine.forget(Namespace("maya", session_id="s1")).turns == 2
    assert any_engine.forget("maya").turns == 1
    assert any_engine.get_turns("maya") == []


def test_typed_errors(any_engine: EngineLike) -> None:
    any_engine.add_turns(STORY, "maya")
    with pytest.raises(InvalidQueryError) as info:
        any_engine.search("x", "maya", k=0)
    assert info.value.field == "k" and "between 1 and" in info.value.fix
    with pytest.raises(InvalidQueryError) as info:
        any_engine.search("   ", "maya")
    assert info.value.field == "query"
    with pytest.raises(InvalidQueryError) as info:
        any_engine.search("x", "maya", filters={"colour": "red"})
    assert info.value.field == "filters.colour"
    with pytest.raises(InvalidTurnError) as info:
        any_engine.add_turns([{"role": "robot", "content": "beep"}], "maya")
    assert info.value.field == "turns[0].role"
    with pytest.raises(InvalidNamespaceError):
        any_engine.add_turns(STORY, "")
    with pytest.raises(HookNotFoundError) as info:
        any_engine.retrieve("ffffffffffff", "maya")
    assert info.value.field == "hook_id"
    with pytest.raises(InvalidArgumentError) as info:
        any_engine.set_importance(any_engine.hooks("maya")[0].id, 101)
    assert info.value.field == "importance"
    with pytest.raises(InvalidArgumentError) as info:
        any_engine.compact("maya", "daily")  # type: ignore[arg-type]
    assert info.value.field == "period"
    with pytest.raises(InvalidQueryError) as info:
        any_engine.forget("maya", record_ids=["rec_unknown"])
    assert info.value.field == "record_ids"
    assert len(any_engine.get_turns("maya")) == 4  # nothing was written or removed by the failed calls


def test_async_twins(any_engine: EngineLike) -> None:
    async def run() -> None:
        added = await any_engine.aadd_turns(STORY, "maya")
        assert len(added.turn_ids) == 4
        results = await asyncio.gather(*(any_engine.asearch(q, "maya", k=1) for q in ("shellfish", "Lisbon")))
        assert [r.items[0].text for r in results] == [STORY[0].content, STORY[2].content]
        assert len(await any_engine.aget_turns("maya")) == 4
        hooks = await any_engine.ahooks("maya")
        assert (await any_engine.aretrieve(hooks[0].id)).hook.id == hooks[0].id
        assert (await any_engine.arender_prompt("maya")).startswith("Memory index")
        assert (await any_engine.aset_importance(hooks[0].id, 10)).importance == 10
        assert isinstance(await any_engine.amaybe_compact("maya"), CompactionReport)
        assert isinstance(await any_engine.acompact("maya", "weekly"), CompactionReport)
        hook_id = await any_engine.apre_compress("maya", "User: call mum on Sunday\nAssistant: ok")
        assert hook_id in (await any_engine.arender_prompt("maya", budget_tokens=2000))
        assert (await any_engine.astats()).turns >= 4
        assert [n.user_id for n in await any_engine.anamespaces()] == ["maya"]
        with pytest.raises(InvalidQueryError):
            await any_engine.asearch("x", "maya", k=-1)
        assert (await any_engine.aforget("maya")).turns >= 4

    asyncio.run(run())


def test_update_history_delete(any_engine: EngineLike) -> None:
    """Issue 13's memory-level CRUD, embedded and over REST (``/v1/memories/*``)."""
    any_engine.add_turns(STORY, "maya")
    new = any_engine.update("maya", "m:3", content="We moved to Porto near the river.",
                            timestamp=datetime(2026, 5, 1, 12, 0))
    assert isinstance(new, AddResult) and len(new.turn_ids) == 1
    items = any_engine.search("where did we move?", "maya", k=3).items
    assert items[0].text == "We moved to Porto near the river."
    assert not any(i.text == "We moved to Lisbon near the river." for i in items)
    history = any_engine.history("maya", "m:3")
    assert [(v.operation, v.current) for v in history] == [("add", False), ("update", True)]
    receipt = any_engine.delete("maya", ["m:3"])
    assert isinstance(receipt, ForgetReceipt) and receipt.turns == 2
    assert [(v.operation, v.content) for v in any_engine.history("maya", "m:3")] == \
        [("add", None), ("update", None), ("delete", None)]
    with pytest.raises(InvalidQueryError):
        any_engine.update("maya", "no-such-memory", content="x")

    async def run() -> list[str]:
        await any_engine.aupdate("maya", "m:1", content="I'm allergic to shellfish and peanuts.")
        ops = [v.operation for v in await any_engine.ahistory("maya", "m:1")]
        await any_engine.adelete("maya", ["m:1"])
        return ops

    assert asyncio.run(run()) == ["add", "update"]
    assert [t.external_id for t in any_engine.get_turns("maya")] == ["m:2", "m:4"]
