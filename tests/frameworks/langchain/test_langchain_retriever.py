"""MemoryRetriever: arguments at construction and per call, Documents, async path, LCEL chains."""

from __future__ import annotations

import asyncio
import doctest
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langchain_core")

from langchain_core.documents import Document
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.output_parsers import StrOutputParser
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.runnables import RunnablePassthrough
from pydantic import ValidationError as PydanticValidationError

import langchain_memory_ext.retrievers
from langchain_memory_ext import MemoryRetriever
from memory_ext import ActionState, MemoryEngine, Turn
from memory_ext.errors import InvalidQueryError


class EchoChatModel(BaseChatModel):
    """A fake chat model that answers with the text of the last prompt message (so tests see the prompt)."""

    @property
    def _llm_type(self) -> str:
        return "echo"

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None,
                  **kwargs: Any) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=AIMessage(content=messages[-1].text))])


def test_docstring_tour_runs() -> None:
    result = doctest.testmod(langchain_memory_ext.retrievers, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0 and result.attempted > 0


def test_documents_carry_id_and_metadata(filled: MemoryEngine) -> None:
    docs = MemoryRetriever(engine=filled, user_id="ana").invoke("Where is Lena moving for her job?")
    assert 0 < len(docs) <= 4
    top = docs[0]
    assert isinstance(top, Document)
    assert "Porto" in top.page_content
    assert top.id == filled.search("Where is Lena moving for her job?", "ana", k=4).items[0].id
    md = top.metadata
    assert md["speaker"] == "Ana" and md["role"] == "user" and md["session_id"] == "ana-s1"
    assert md["external_ids"] == ["ana:2"] and len(md["turn_ids"]) == 1
    assert md["timestamp"].startswith("2026-03-01T09:02")
    assert isinstance(md["score"], float) and md["channels"]
    assert [d.metadata["score"] for d in docs] == sorted((d.metadata["score"] for d in docs), reverse=True)


def test_user_partition_is_respected(filled: MemoryEngine) -> None:
    docs = MemoryRetriever(engine=filled, user_id="ben", k=10).invoke("Porto sister bakery")
    assert docs and all(d.metadata["speaker"] in ("Ben", "Assistant") for d in docs)
    assert not any("Porto" in d.page_content for d in docs)


def test_k_filters_and_threshold_per_call_override_fields(filled: MemoryEngine) -> None:
    r = MemoryRetriever(engine=filled, user_id="ana", k=5, filters={"role": "assistant"})
    assert len(r.invoke("Toby Porto cello", k=2)) == 2
    assert all(d.metadata["role"] == "assistant" for d in r.invoke("Toby Porto cello"))
    # per-call filters are merged over the field's
    speakers = {d.metadata["speaker"] for d in r.invoke("Toby Porto cello", filters={"role": "user"})}
    assert speakers == {"Ana"}
    all_docs = r.invoke("Toby Porto cello", k=5, filters={"role": ["user", "assistant"]})
    cut = all_docs[1].metadata["score"]
    kept = r.invoke("Toby Porto cello", k=5, filters={"role": ["user", "assistant"]}, score_threshold=cut)
    assert [d.id for d in kept] == [d.id for d in all_docs[:2]]
    high = MemoryRetriever(engine=filled, user_id="ana", score_threshold=1e9)
    assert high.invoke("Toby") == []


def test_session_narrowing(engine: MemoryEngine) -> None:
    engine.add_turns([{"role": "user", "content": "The wifi password is swordfish", "session_id": "a"},
                      {"role": "user", "content": "The door code is 4321 not the wifi", "session_id": "b"}], "u")
    docs = MemoryRetriever(engine=engine, user_id="u", session_id="b", k=5).invoke("wifi password")
    assert [d.metadata["session_id"] for d in docs] == ["b"]


def test_action_state_is_accepted_at_construction_and_per_call(filled: MemoryEngine) -> None:
    state = ActionState(current_subgoal="suggest a recipe", known_constraints=("peanut allergy",))
    r = MemoryRetriever(engine=filled, user_id="chen", action_state={"current_subgoal": "book a flat"})
    assert isinstance(r.action_state, ActionState)
    assert r.invoke("what should I cook?", action_state=state)
    assert r.invoke("what should I cook?")


def test_misspelt_arguments_are_errors(filled: MemoryEngine) -> None:
    with pytest.raises(PydanticValidationError):
        MemoryRetriever(engine=filled, user_id="ana", top_k=3)  # type: ignore[call-arg]
    r = MemoryRetriever(engine=filled, user_id="ana")
    with pytest.raises(InvalidQueryError, match="top_k"):
        r.invoke("Toby", top_k=3)
    with pytest.raises(InvalidQueryError, match="filters"):
        r.invoke("Toby", filters={"speeker": "Ana"})
    with pytest.raises(InvalidQueryError, match="k"):
        r.invoke("Toby", k=0)


def test_from_path_opens_the_store(tmp_path: Path) -> None:
    with MemoryEngine.open(tmp_path / "s", embedder="hashing") as eng:
        eng.add_turns([{"role": "user", "content": "I keep bees in the garden"}], "zoe")
    r = MemoryRetriever.from_path(tmp_path / "s", user_id="zoe", embedder="hashing", k=1)
    try:
        assert r.invoke("bees")[0].page_content == "I keep bees in the garden"
    finally:
        r.engine.close()


def test_async_path_never_searches_on_the_event_loop(filled: MemoryEngine, monkeypatch: pytest.MonkeyPatch) -> None:
    real_search = filled.search

    def search_off_loop(*args: Any, **kwargs: Any) -> Any:
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return real_search(*args, **kwargs)
        raise AssertionError("engine.search was called on the event loop thread")

    monkeypatch.setattr(filled, "search", search_off_loop)
    r = MemoryRetriever(engine=filled, user_id="ana", k=2)
    docs = asyncio.run(r.ainvoke("Lena Porto", filters={"role": "user"}))
    assert len(docs) == 2 and all(d.metadata["role"] == "user" for d in docs)
    assert [d.id for d in docs] == [d.id for d in r.invoke("Lena Porto", filters={"role": "user"})]


def _chain(retriever: MemoryRetriever) -> Any:
    def format_docs(docs: list[Document]) -> str:
        return "\n".join(d.page_content for d in docs)

    prompt = ChatPromptTemplate.from_template("Context:\n{context}\n\nQuestion: {question}")
    return ({"context": retriever | format_docs, "question": RunnablePassthrough()}
            | prompt | EchoChatModel() | StrOutputParser())


def test_lcel_chain_sync_and_async(filled: MemoryEngine) -> None:
    chain = _chain(MemoryRetriever(engine=filled, user_id="ana", k=2))
    out = chain.invoke("Where is Lena moving?")
    assert "Porto" in out and out.endswith("Question: Where is Lena moving?")
    assert asyncio.run(chain.ainvoke("Where is Lena moving?")) == out
    assert chain.batch(["Lena Porto", "beagle Toby"])[1].count("Toby") >= 1


def test_a_turn_that_only_calls_tools_is_a_document_of_its_calls(engine: MemoryEngine) -> None:
    engine.add_turns([
        Turn(role="user", content="Book a hotel in Porto for 14/04/2026", session_id="t1"),
        Turn(role="assistant", content="", session_id="t1", tool_calls=[
            {"id": "c1", "name": "book_hotel", "args": {"city": "Porto", "check_in": "14/04/2026"}}]),
    ], "maya", wait=True)
    docs = MemoryRetriever(engine=engine, user_id="maya", k=5).invoke("book_hotel Porto check_in")
    assert 'book_hotel(city="Porto", check_in="14/04/2026")' in [d.page_content for d in docs]
    assert all(d.page_content.strip() for d in docs)
