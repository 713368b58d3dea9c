"""The framework faces, unchanged, against a server through RemoteEngine: LangChain retriever, chat history,
tools and LangGraph store; LlamaIndex retriever, agent memory and memory block."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from memory_ext.client import RemoteEngine

from .conftest import ADMIN, LiveServer

FACTS = [{"role": "user", "speaker": "Maya", "content": "I'm allergic to shellfish."},
         {"role": "assistant", "content": "Noted: no shellfish in restaurant suggestions."},
         {"role": "user", "speaker": "Maya", "content": "My sister Lena lives in Porto."}]


@pytest.fixture
def remote(live_server: LiveServer, tmp_path: Path) -> Iterator[RemoteEngine]:
    engine = RemoteEngine(live_server.url, token=ADMIN, path=tmp_path / "client-state")
    engine.add_turns(FACTS, "maya")
    try:
        yield engine
    finally:
        engine.close()


def test_langchain_faces(remote: RemoteEngine, live_server: LiveServer) -> None:
    pytest.importorskip("langchain_core")
    from langchain_core.messages import AIMessage, HumanMessage

    from langchain_memory_ext import (
        MemoryChatMessageHistory,
        MemoryRetriever,
        create_memory_tools,
    )

    retriever = MemoryRetriever(engine=remote, user_id="maya", k=2)
    docs = retriever.invoke("where does Lena live?")
    assert docs[0].page_content == "My sister Lena lives in Porto." and docs[0].metadata["speaker"] == "Maya"
    assert asyncio.run(retriever.ainvoke("shellfish allergy", k=1))[0].page_content == "I'm allergic to shellfish."

    history = MemoryChatMessageHistory(engine=remote, user_id="maya", session_id="chat-1")
    history.add_messages([HumanMessage("I started learning the cello."), AIMessage("Lovely!")])
    assert [m.type for m in history.messages] == ["human", "ai"]
    assert asyncio.run(history.aget_messages())[0].content == "I started learning the cello."
    # written through the server: a second client (the embedded engine behind it) sees the messages
    assert "cello" in " ".join(t.content for t in live_server.engine.get_turns("maya"))
    history.clear()
    assert history.messages == []

    search, save, fetch = create_memory_tools(remote, user_id="maya", k=1)
    assert "shellfish" in search.invoke({"query": "allergy"})
    save.invoke({"content": "Maya prefers window seats."})
    hook_id = remote.hooks("maya")[0].id
    assert "window seats" in fetch.invoke({"hook_id": hook_id})


def test_langgraph_store(remote: RemoteEngine) -> None:
    pytest.importorskip("langgraph")
    from langchain_memory_ext import MemoryStore

    store = MemoryStore(engine=remote, user_id="maya")
    store.put(("users", "maya", "memories"), "m1", {"text": "Maya prefers window seats"})
    store.put(("users", "maya", "memories"), "m2", {"text": "Maya collects vinyl records"})
    assert store.get(("users", "maya", "memories"), "m1").value == {"text": "Maya prefers window seats"}  # type: ignore[union-attr]
    hits = store.search(("users", "maya"), query="seat preference", limit=1)
    assert hits[0].key == "m1" and hits[0].score is not None
    store.delete(("users", "maya", "memories"), "m1")
    assert [h.key for h in store.search(("users", "maya"), query="seat preference", limit=5)] == ["m2"]
    assert asyncio.run(store.asearch(("users",), query="vinyl", limit=1))[0].key == "m2"
    store.close()


def test_llamaindex_faces(remote: RemoteEngine) -> None:
    pytest.importorskip("llama_index.core")
    from llama_index.core.llms import ChatMessage

    from llamaindex_memory_ext import (
        ArchivingMemory,
        MemoryBlock,
        MemoryEngineMemory,
        MemoryRetriever,
    )

    retriever = MemoryRetriever(engine=remote, user_id="maya", similarity_top_k=2)
    nodes = retriever.retrieve("where does Lena live?")
    assert nodes[0].node.get_content() == "My sister Lena lives in Porto."
    assert len(asyncio.run(retriever.aretrieve("shellfish"))) >= 1

    monday = MemoryEngineMemory(engine=remote, user_id="maya", session_id="monday")
    monday.put(ChatMessage(role="user", content="I'm training for the Berlin marathon."))
    friday = MemoryEngineMemory(engine=remote, user_id="maya", session_id="friday")
    messages = friday.get(input="What am I training for?")
    assert messages[0].role.value == "system" and "marathon" in messages[0].content
    assert asyncio.run(friday.aget(input="Any food I must avoid?"))[0].content.count("shellfish") >= 1

    block = MemoryBlock(engine=remote, user_id="maya")
    memory = ArchivingMemory.from_defaults(session_id="s9", memory_blocks=[block])
    memory.put_messages([ChatMessage(role="user", content="My cat is called Miso.")])
    assert "Miso" in " ".join(t.content for t in remote.get_turns("maya"))


def test_a_face_refuses_what_is_not_an_engine() -> None:
    pytest.importorskip("llama_index.core")
    from llamaindex_memory_ext import MemoryRetriever

    with pytest.raises(TypeError, match="RemoteEngine"):
        MemoryRetriever(engine=object(), user_id="maya")  # type: ignore[arg-type]
