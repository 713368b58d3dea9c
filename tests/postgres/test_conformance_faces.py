"""Conformance, the framework faces that live on the engine's API (no tables of their own): LangChain's chat
history and retriever, LlamaIndex's memory and retriever — the same messages back and the same documents on
SQLite and on PostgreSQL. (The LangGraph ``MemoryStore``'s items are tested in ``test_conformance_items.py``.)"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

pytest.importorskip("langchain_core")
pytest.importorskip("llama_index.core")

from langchain_core.chat_history import InMemoryChatMessageHistory
from llama_index.core.base.llms.types import ChatMessage
from llama_index.core.vector_stores.types import FilterOperator, MetadataFilter, MetadataFilters

from langchain_memory_ext import MemoryChatMessageHistory, MemoryRetriever
from llamaindex_memory_ext import MemoryEngineMemory
from llamaindex_memory_ext import MemoryRetriever as LlamaRetriever
from tests.conftest import CONVERSATIONS, StoreTarget, make_turns
from tests.frameworks.langchain.test_langchain_history_parity import SEQUENCES

pytestmark = [pytest.mark.postgres,
              pytest.mark.filterwarnings("ignore:The class `InMemoryChatMessageHistory`:DeprecationWarning")]


@pytest.mark.parametrize("mode", ["batch", "one_by_one", "async"])
def test_chat_histories_round_trip_every_sequence(store_target: StoreTarget, mode: str) -> None:
    with store_target.open() as engine:
        for i, (name, sequence) in enumerate(SEQUENCES.items()):
            reference = InMemoryChatMessageHistory()
            ours = MemoryChatMessageHistory(engine=engine, user_id="maya", session_id=f"s{i}")
            for history in (reference, ours):
                if mode == "batch":
                    history.add_messages(sequence)
                elif mode == "one_by_one":
                    for message in sequence:
                        history.add_message(message)
                else:
                    asyncio.run(history.aadd_messages(sequence))
            assert ours.messages == reference.messages == sequence, name
            fresh = MemoryChatMessageHistory(engine=engine, user_id="maya", session_id=f"s{i}")
            assert fresh.messages == sequence, name
        other = MemoryChatMessageHistory(engine=engine, user_id="maya", session_id="s0")
        other.clear()
        assert other.messages == [] and MemoryChatMessageHistory(engine=engine, user_id="maya",
                                                                 session_id="s1").messages == SEQUENCES["empty reply"]


def _documents(store_target: StoreTarget) -> list[Any]:
    with store_target.open() as engine:
        for user in CONVERSATIONS:
            engine.add_turns(make_turns(user), user, wait=True)
        out: list[Any] = []
        for kwargs, query in (({"user_id": "ana", "k": 4}, "Where is Lena moving for her job?"),
                              ({"user_id": "ana", "k": 5, "filters": {"role": "assistant"}}, "Toby walks Porto"),
                              ({"user_id": "ben", "k": 10}, "Porto sister bakery"),
                              ({"user_id": "chen", "k": 3, "session_id": "chen-s1"}, "peanuts recipes")):
            docs = MemoryRetriever(engine=engine, **kwargs).invoke(query)
            out.append([(d.page_content, round(d.metadata["score"], 4), d.metadata["external_ids"],
                         d.metadata["role"]) for d in docs])
        llama = LlamaRetriever(engine, "ana", similarity_top_k=4).retrieve("Ana's dog and the cello")
        out.append([(n.node.get_content(), round(n.score or 0.0, 4)) for n in llama])
        filters = MetadataFilters(filters=[MetadataFilter(key="role", value="user", operator=FilterOperator.EQ)])
        llama = LlamaRetriever(engine, "ana", similarity_top_k=6, filters=filters).retrieve("Porto Lena")
        out.append([n.node.get_content() for n in llama])
        memory = MemoryEngineMemory(engine=engine, user_id="maya", session_id="trip")
        memory.put(ChatMessage(role="user", content="I'm allergic to shellfish, remember it for the Lisbon trip."))
        memory.put(ChatMessage(role="assistant", content="Noted: no shellfish in Lisbon."))
        out.append([(str(m.role), m.content) for m in memory.get("What should I avoid eating in Lisbon?")])
        out.append([(str(m.role), m.content) for m in memory.get_all()])
        return out


def test_retrievers_and_memories_return_the_same_on_both(both_targets: tuple[StoreTarget, StoreTarget]) -> None:
    lite, pg = (_documents(t) for t in both_targets)
    assert lite[0] and "Porto" in lite[0][0][0]
    assert all(role == "assistant" for *_, role in lite[1]) and lite[1]
    assert not any("Porto" in text for text, *_ in lite[2])  # ben's partition
    assert len(lite) == len(pg)
    for i, (a, b) in enumerate(zip(lite, pg, strict=True)):
        assert a == b, f"call {i}:\n{a}\n{b}"
