"""MemoryStore specifics (beyond InMemoryStore parity) and a LangGraph graph that reads and writes it."""

from __future__ import annotations

import asyncio
import doctest
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langgraph.store.base")

from langgraph.store.base import BaseStore, SearchOp

import langchain_memory_ext.store
from langchain_memory_ext import MemoryRetriever, MemoryStore
from memory_ext import MemoryEngine, Namespace
from memory_ext.errors import InvalidQueryError

NS = ("users", "ana", "memories")


@pytest.fixture
def store(engine: MemoryEngine) -> Iterator[MemoryStore]:
    st = MemoryStore(engine=engine)
    try:
        yield st
    finally:
        st.close()


def _engine_texts(engine: MemoryEngine, ns: tuple[str, ...] = NS) -> list[str]:
    return [t.content for t in engine.get_turns(Namespace("langgraph-store", session_id=".".join(ns)))]


def test_docstring_tour_runs() -> None:
    result = doctest.testmod(langchain_memory_ext.store, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0 and result.attempted > 0


def test_puts_are_archived_as_turns_of_the_mapped_namespace(engine: MemoryEngine, store: MemoryStore) -> None:
    store.put(NS, "m1", {"text": "Lena lives in Porto", "n": 3, "nested": {"note": "sister"}})
    turns = engine.get_turns(Namespace("langgraph-store", session_id="users.ana.memories"))
    assert [t.content for t in turns] == ["Lena lives in Porto\nsister"]
    assert turns[0].external_id == "m1"
    assert turns[0].metadata["langgraph_store"] == {"namespace": list(NS), "key": "m1"}


def test_index_fields_and_index_false(engine: MemoryEngine, tmp_path: Path) -> None:
    st = MemoryStore(engine=engine, index_fields=["title"])
    st.put(NS, "a", {"title": "Cello lessons", "body": "every evening"})
    st.put(NS, "b", {"title": "Secret", "body": "Porto"}, index=False)
    st.put(NS, "c", {"title": "x", "body": "Porto trip"}, index=["body"])
    assert _engine_texts(engine) == ["Cello lessons", "Porto trip"]
    hits = st.search(NS, query="Porto")
    assert [h.key for h in hits][-1] == "b" and hits[-1].score is None  # not indexed: listed last, unscored
    assert hits[0].key == "c" and isinstance(hits[0].score, float)
    st.close()


def test_query_scores_are_ranked_and_skip_superseded_versions(store: MemoryStore) -> None:
    store.put(NS, "m1", {"text": "Lena lives in Porto"})
    store.put(NS, "m2", {"text": "Toby the beagle loves long walks"})
    store.put(NS, "m1", {"text": "Lena moved to Lisbon"})  # the Porto version is history, never returned
    hits = store.search(NS, query="Lena Porto")
    assert sorted(h.key for h in hits) == ["m1", "m2"]
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    assert store.search(NS, query="Lena Porto", limit=1)[0].value == {"text": "Lena moved to Lisbon"}


def test_created_at_survives_updates(store: MemoryStore) -> None:
    store.put(NS, "m1", {"v": 1})
    first = store.get(NS, "m1")
    store.put(NS, "m1", {"v": 2})
    second = store.get(NS, "m1")
    assert second.created_at == first.created_at and second.updated_at > first.updated_at
    assert second.created_at.tzinfo is not None


def test_delete_erases_the_text_from_the_engine(engine: MemoryEngine, store: MemoryStore) -> None:
    store.put(NS, "keep", {"text": "Toby the beagle"})
    store.put(NS, "gone", {"text": "my bank PIN is 4242"})
    store.delete(NS, "gone")
    assert _engine_texts(engine) == ["Toby the beagle"]
    assert [h.key for h in store.search(NS, query="bank PIN 4242")] == ["keep"]
    store.delete(NS, "keep")
    assert _engine_texts(engine) == [] and store.list_namespaces() == []  # emptied namespaces are not listed


def test_items_persist_across_reopen(tmp_path: Path) -> None:
    with MemoryEngine.open(tmp_path / "s", embedder="hashing") as eng:
        st = MemoryStore(engine=eng)
        st.put(NS, "m1", {"text": "Lena lives in Porto"})
        st.close()
    with MemoryEngine.open(tmp_path / "s", embedder="hashing") as eng:
        st = MemoryStore(engine=eng)
        assert st.get(NS, "m1").value == {"text": "Lena lives in Porto"}
        assert st.search(("users",), query="Porto")[0].key == "m1"
        st.close()


def test_partitions_are_separate_and_a_user_partition_is_retrievable(engine: MemoryEngine) -> None:
    ana = MemoryStore(engine=engine, user_id="ana")
    other = MemoryStore(engine=engine, user_id="ben")
    ana.put(("memories",), "m1", {"text": "I'm allergic to peanuts"})
    assert other.get(("memories",), "m1") is None and other.list_namespaces() == []
    docs = MemoryRetriever(engine=engine, user_id="ana", k=1).invoke("allergies")
    assert docs[0].page_content == "I'm allergic to peanuts" and docs[0].metadata["external_ids"] == ["m1"]
    ana.close()
    other.close()


def test_bad_input_is_a_typed_error(store: MemoryStore) -> None:
    store.put(NS, "m1", {"n": 1})
    with pytest.raises(InvalidQueryError, match=r"\$regex"):
        store.search(NS, filter={"n": {"$regex": "x"}})
    with pytest.raises(ValueError, match="label"):
        store.batch([SearchOp(("a.b",))])
    with pytest.raises(InvalidQueryError, match="ttl"):
        store.put(NS, "m2", {"n": 2}, ttl=-5)
    with pytest.raises(InvalidQueryError, match="convert other objects"):
        store.put(NS, "m2", {"n": object()})  # not data: refused before anything is written
    assert store.get(NS, "m2") is None


def test_abatch_never_runs_on_the_event_loop(store: MemoryStore, monkeypatch: pytest.MonkeyPatch) -> None:
    real = store.batch

    def off_loop(ops: Any) -> Any:
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return real(ops)
        raise AssertionError("batch ran on the event loop thread")

    monkeypatch.setattr(store, "batch", off_loop)

    async def run() -> Any:
        await store.aput(NS, "m1", {"text": "Lena lives in Porto"})
        return await store.asearch(("users",), query="Porto")

    assert [h.key for h in asyncio.run(run())] == ["m1"]


# -- a LangGraph graph using the store --------------------------------------------------------------------------
def test_langgraph_graph_reads_and_writes_the_store(store: MemoryStore) -> None:
    pytest.importorskip("langgraph.graph")
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
    from langgraph.config import get_store
    from langgraph.graph import START, MessagesState, StateGraph

    seen_prompts: list[str] = []
    model = GenericFakeChatModel(messages=iter([AIMessage("Noted."), AIMessage("Lena lives in Porto.")]))

    def remember(state: MessagesState, *, store: BaseStore) -> dict[str, Any]:
        text = state["messages"][-1].text
        if text.startswith("remember:"):
            store.put(("users", "ana", "memories"), f"m{len(store.search(('users', 'ana')))}",
                      {"text": text.removeprefix("remember:").strip()})
        return {}

    def answer(state: MessagesState) -> dict[str, Any]:
        hits = get_store().search(("users", "ana"), query=state["messages"][-1].text, limit=2)
        context = "\n".join(h.value["text"] for h in hits)
        seen_prompts.append(context)
        return {"messages": [model.invoke([SystemMessage(f"Memories:\n{context}"), *state["messages"]])]}

    builder = StateGraph(MessagesState)
    builder.add_node("remember", remember)
    builder.add_node("answer", answer)
    builder.add_edge(START, "remember")
    builder.add_edge("remember", "answer")
    graph = builder.compile(store=store)

    graph.invoke({"messages": [HumanMessage("remember: my sister Lena lives in Porto")]})
    out = asyncio.run(graph.ainvoke({"messages": [HumanMessage("where does Lena live?")]}))
    assert out["messages"][-1].text == "Lena lives in Porto."
    assert "my sister Lena lives in Porto" in seen_prompts[-1]
    assert [i.value for i in store.search(("users", "ana"))] == [{"text": "my sister Lena lives in Porto"}]
