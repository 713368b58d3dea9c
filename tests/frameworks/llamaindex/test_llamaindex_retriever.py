"""MemoryRetriever: a LlamaIndex BaseRetriever over the engine, in query engines and fusion, sync and async."""

from __future__ import annotations

import asyncio
import logging
import threading
from datetime import datetime
from pathlib import Path

import pytest

pytest.importorskip("llama_index.core")

from llama_index.core import Document, VectorStoreIndex
from llama_index.core.llms import MockLLM
from llama_index.core.query_engine import RetrieverQueryEngine
from llama_index.core.retrievers import QueryFusionRetriever
from llama_index.core.schema import MetadataMode

from llamaindex_memory_ext import MemoryExtEmbedding, MemoryRetriever
from memory_ext import HashingEmbedder, MemoryEngine
from memory_ext.errors import InvalidNamespaceError, InvalidQueryError

TURNS = [
    {"role": "user", "speaker": "Ana", "content": "My sister Lena lives in Porto.", "session_id": "s1",
     "timestamp": datetime(2026, 3, 2, 9, 15)},
    {"role": "assistant", "content": "Porto is lovely in spring.", "session_id": "s1"},
    {"role": "user", "speaker": "Ana", "content": "I adopted a cat called Miso.", "session_id": "s2"},
    {"role": "assistant", "content": "Miso is a great name for a cat.", "session_id": "s2"},
    {"role": "user", "speaker": "Ben", "content": "Lena and I went hiking near Porto.", "session_id": "s3"},
]


class ThreadRecordingEngine(MemoryEngine):
    """Records the thread every search runs in: a search on the event loop thread would block the loop."""

    search_threads: list[threading.Thread]

    def search(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        self.search_threads.append(threading.current_thread())
        return super().search(*args, **kwargs)


@pytest.fixture
def engine(tmp_path):
    eng = ThreadRecordingEngine.open(tmp_path / "store", embedder="hashing")
    eng.search_threads = []
    eng.add_turns(TURNS, "ana")
    eng.add_turns([{"role": "user", "content": "Lena lives in Porto, says Zoe.", "session_id": "z1"}], "zoe")
    yield eng
    eng.close()


def test_nodes_carry_memory_ids_text_score_and_metadata(engine: MemoryEngine) -> None:
    nodes = MemoryRetriever(engine=engine, user_id="ana", similarity_top_k=3).retrieve("where does Lena live?")
    assert nodes[0].node.get_content() == "My sister Lena lives in Porto."
    ids = [n.node.node_id for n in nodes]
    assert len(ids) == len(set(ids)) == 3
    result = engine.search("where does Lena live?", "ana", k=3)
    assert ids == [item.id for item in result.items]
    assert [n.score for n in nodes] == [item.score for item in result.items]
    meta = nodes[0].node.metadata
    assert meta["memory_id"] == ids[0]
    assert meta["speaker"] == "Ana" and meta["session_id"] == "s1" and meta["role"] == "user"
    assert meta["timestamp"].startswith("2026-03-02T09:15")
    assert meta["turn_ids"] and {c.split("@")[0] for c in meta["channels"]} <= {"keyword", "vector"} \
        and meta["channels"]  # (``keyword@feedback``: the same channel in the second hop)
    llm_view = nodes[0].node.get_content(metadata_mode=MetadataMode.LLM)
    assert "speaker: Ana" in llm_view and "channels" not in llm_view and "turn_ids" not in llm_view


def test_only_the_users_memories_are_searched(engine: MemoryEngine) -> None:
    texts = [n.node.get_content() for n in MemoryRetriever(engine=engine, user_id="zoe").retrieve("Lena Porto")]
    assert texts == ["Lena lives in Porto, says Zoe."]


def test_top_k_session_and_filters_change_the_result(engine: MemoryEngine) -> None:
    query = "Lena Porto cat Miso"
    assert len(MemoryRetriever(engine=engine, user_id="ana", similarity_top_k=1).retrieve(query)) == 1
    in_s2 = MemoryRetriever(engine=engine, user_id="ana", session_id="s2").retrieve(query)
    assert in_s2 and {n.node.metadata["session_id"] for n in in_s2} == {"s2"}
    bens = MemoryRetriever(engine=engine, user_id="ana", filters={"speaker": "Ben"}).retrieve(query)
    assert [n.node.get_content() for n in bens] == ["Lena and I went hiking near Porto."]


def test_action_state_is_passed_to_the_engine(engine: MemoryEngine) -> None:
    state = {"current_subgoal": "plan a visit to Lena", "last_tool_name": "search_flights"}
    nodes = MemoryRetriever(engine=engine, user_id="ana", action_state=state).retrieve("Porto")
    expected = engine.search("Porto", "ana", k=4, action_state=state)
    assert [n.node.node_id for n in nodes] == [item.id for item in expected.items]


def test_bad_arguments_raise_typed_errors(engine: MemoryEngine) -> None:
    with pytest.raises(InvalidQueryError):
        MemoryRetriever(engine=engine, user_id="ana", similarity_top_k=0)
    with pytest.raises(InvalidQueryError, match=r"limits\.max_k"):
        MemoryRetriever(engine=engine, user_id="ana", similarity_top_k=engine.config.limits.max_k + 1)
    with pytest.raises(InvalidNamespaceError):
        MemoryRetriever(engine=engine, user_id="  ")
    with pytest.raises(TypeError, match="MemoryEngine"):
        MemoryRetriever(engine="./store", user_id="ana")  # type: ignore[arg-type]


def test_aretrieve_searches_off_the_event_loop(engine: ThreadRecordingEngine) -> None:
    retriever = MemoryRetriever(engine=engine, user_id="ana")

    async def run() -> tuple[list, threading.Thread]:
        return await retriever.aretrieve("where does Lena live?"), threading.current_thread()

    nodes, loop_thread = asyncio.run(run())
    assert nodes[0].node.get_content() == "My sister Lena lives in Porto."
    assert engine.search_threads and loop_thread not in engine.search_threads


def test_in_a_retriever_query_engine_sync_and_async(engine: MemoryEngine) -> None:
    qe = RetrieverQueryEngine.from_args(MemoryRetriever(engine=engine, user_id="ana"), llm=MockLLM())
    response = qe.query("where does Lena live?")
    assert response.source_nodes[0].node.get_content() == "My sister Lena lives in Porto."
    assert "My sister Lena lives in Porto." in str(response)  # MockLLM echoes the prompt it was given
    aresponse = asyncio.run(qe.aquery("where does Lena live?"))
    assert [n.node.node_id for n in aresponse.source_nodes] == [n.node.node_id for n in response.source_nodes]


@pytest.mark.parametrize("use_async", [False, True])
def test_as_a_query_fusion_member(engine: MemoryEngine, use_async: bool) -> None:
    docs = VectorStoreIndex.from_documents(
        [Document(text="The old town of Porto is a UNESCO site.", id_="doc-porto"),
         Document(text="Cats sleep sixteen hours a day.", id_="doc-cats")],
        embed_model=MemoryExtEmbedding("hashing"))
    memories = MemoryRetriever(engine=engine, user_id="ana", similarity_top_k=2)
    fusion = QueryFusionRetriever([memories, docs.as_retriever(similarity_top_k=1)], llm=MockLLM(), num_queries=1,
                                  mode="reciprocal_rerank", similarity_top_k=3, use_async=use_async)
    nodes = fusion.retrieve("where does Lena live in Porto?")
    memory_ids = [n.node.node_id for n in memories.retrieve("where does Lena live in Porto?")]
    got = [n.node.node_id for n in nodes]
    assert set(memory_ids) <= set(got) and len(got) == len(set(got)) == 3
    assert any(n.node.get_content() == "The old town of Porto is a UNESCO site." for n in nodes)


def test_same_memory_from_two_members_is_fused_not_duplicated(engine: MemoryEngine) -> None:
    a = MemoryRetriever(engine=engine, user_id="ana", similarity_top_k=3)
    b = MemoryRetriever(engine=engine, user_id="ana", similarity_top_k=3)
    fusion = QueryFusionRetriever([a, b], llm=MockLLM(), num_queries=1, mode="reciprocal_rerank",
                                  similarity_top_k=10, use_async=True)
    got = [n.node.node_id for n in asyncio.run(fusion.aretrieve("Lena Porto"))]
    assert sorted(got) == sorted(n.node.node_id for n in a.retrieve("Lena Porto"))


class QueryFailsEmbedder(HashingEmbedder):
    """Embeds documents, fails every query: the vector channel breaks, the keyword channel still answers."""

    def embed_query(self, text: str):  # type: ignore[no-untyped-def]
        raise RuntimeError("embedding service down")


def test_a_degraded_search_returns_what_it_found_and_says_so(tmp_path, caplog: pytest.LogCaptureFixture) -> None:
    with MemoryEngine.open(tmp_path / "s", embedder=QueryFailsEmbedder()) as eng:
        eng.add_turns(TURNS, "ana")
        with caplog.at_level(logging.WARNING, logger="llamaindex_memory_ext.retriever"):
            nodes = MemoryRetriever(engine=eng, user_id="ana").retrieve("where does Lena live?")
    assert nodes[0].node.get_content() == "My sister Lena lives in Porto."
    assert not any("vector" in n.node.metadata["channels"] for n in nodes)
    assert "degraded" in caplog.text and "vector" in caplog.text and "embedding service down" in caplog.text


def test_what_the_llm_reads_of_the_nodes_obeys_the_metadata_filters(tmp_path: Path) -> None:
    """Each node's LLM text (content + the metadata an LLM sees) comes from a turn the filters keep: the private
    neighbour of a found turn never reaches the model, by node or by metadata."""
    from llama_index.core.vector_stores import FilterOperator, MetadataFilter, MetadataFilters

    from tests.conftest import RULES_CHAT, rules_turns

    with MemoryEngine.open(tmp_path / "store", embedder="hashing") as engine:
        engine.add_turns(rules_turns(), "maya", wait=True)
        filters = MetadataFilters(filters=[MetadataFilter(key="scope", value="public", operator=FilterOperator.EQ)])
        nodes = MemoryRetriever(engine=engine, user_id="maya", filters=filters,
                                similarity_top_k=4).retrieve("What is my Nordea PIN and card?")
        assert nodes
        llm_text = "\n".join(n.node.get_content(metadata_mode=MetadataMode.LLM) for n in nodes)
        public = {content for *_, content, meta in RULES_CHAT if meta.get("private") is False}
        assert {n.node.get_content() for n in nodes} <= public
        assert "4711" not in llm_text and "X1234567" not in llm_text
