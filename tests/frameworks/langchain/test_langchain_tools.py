"""create_memory_tools (search with an optional action state, save), create_retriever_tool, LangChainEmbedder."""

from __future__ import annotations

import asyncio
import doctest
from pathlib import Path

import pytest

pytest.importorskip("langchain_core")

import numpy as np
from langchain_core.embeddings import DeterministicFakeEmbedding, Embeddings
from langchain_core.messages import ToolMessage
from langchain_core.tools import create_retriever_tool
from pydantic import ValidationError as PydanticValidationError

import langchain_memory_ext.embeddings
import langchain_memory_ext.tools
from langchain_memory_ext import LangChainEmbedder, MemoryRetriever, create_memory_tools
from memory_ext import MemoryEngine
from memory_ext.errors import (
    EmbedderError,
    EmbedderMismatchError,
    InvalidNamespaceError,
    InvalidQueryError,
)


@pytest.mark.parametrize("module", [langchain_memory_ext.tools, langchain_memory_ext.embeddings])
def test_docstring_examples(module: object) -> None:
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)  # type: ignore[arg-type]
    assert result.failed == 0 and result.attempted > 0


def _call(tool: object, args: dict[str, object], call_id: str = "c1") -> ToolMessage:
    msg = tool.invoke({"type": "tool_call", "id": call_id, "name": tool.name, "args": args})  # type: ignore[attr-defined]
    assert isinstance(msg, ToolMessage)
    return msg


def test_search_tool_returns_context_and_documents(filled: MemoryEngine) -> None:
    search, _, _ = create_memory_tools(filled, user_id="chen", k=2)
    msg = _call(search, {"query": "what food allergy does Chen have?"})
    assert "peanuts" in msg.content and msg.tool_call_id == "c1"
    assert len(msg.artifact) == 2 and "peanuts" in msg.artifact[0].page_content
    assert set(search.args) == {"query", "action_state"}


def test_action_state_argument_adds_the_action_route(filled: MemoryEngine) -> None:
    search, _, _ = create_memory_tools(filled, user_id="chen", k=3)
    plain = _call(search, {"query": "any news about school?"}).artifact
    acting = _call(search, {"query": "any news about school?",
                            "action_state": {"current_subgoal": "find a flat near the river in Lisbon",
                                             "missing_slots": ["budget"]}}).artifact
    assert not any("@action" in ch for d in plain for ch in d.metadata["channels"])
    assert any("@action" in ch for d in acting for ch in d.metadata["channels"])


def test_tool_arguments_are_validated(filled: MemoryEngine) -> None:
    search, save, _ = create_memory_tools(filled, user_id="chen")
    with pytest.raises(PydanticValidationError):
        search.invoke({"query": "x", "action_state": {"subgoal": "typo"}})
    with pytest.raises(PydanticValidationError):
        save.invoke({"text": "wrong field"})
    with pytest.raises(InvalidNamespaceError):
        create_memory_tools(filled, user_id="")


def test_save_then_search_sync_and_async(engine: MemoryEngine) -> None:
    search, save, _ = create_memory_tools(engine, user_id="ana", session_id="s9", speaker="agent", k=1)
    assert save.invoke({"content": "Ana prefers aisle seats on flights."}) == "Saved."
    turn = engine.get_turns("ana")[0]
    assert (str(turn.role), turn.speaker, turn.session_id, turn.metadata) == \
        ("assistant", "agent", "s9", {"saved_by": "save_memory"})

    async def run() -> str:
        await save.ainvoke({"content": "Ana's passport expires in May."})
        return (await search.ainvoke({"query": "when does the passport expire?"}))

    assert "passport" in asyncio.run(run())


def test_create_retriever_tool_works_with_our_retriever(filled: MemoryEngine) -> None:
    tool = create_retriever_tool(MemoryRetriever(engine=filled, user_id="ben", k=1), "recall",
                                 "Search what Ben told us.")
    assert "marathon" in tool.invoke({"query": "Which race is Ben training for?"})
    assert "marathon" in asyncio.run(tool.ainvoke({"query": "Which race is Ben training for?"}))


# -- LangChainEmbedder --------------------------------------------------------------------------------------------
class CountingEmbeddings(Embeddings):
    """A deterministic fake that records how often it was asked (to check dim probing and batching)."""

    def __init__(self) -> None:
        self.inner = DeterministicFakeEmbedding(size=16)
        self.documents_calls = 0

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.documents_calls += 1
        return self.inner.embed_documents(texts)

    def embed_query(self, text: str) -> list[float]:
        return self.inner.embed_query(text)


def test_embedder_protocol_and_shapes() -> None:
    from memory_ext import Embedder

    emb = LangChainEmbedder(CountingEmbeddings())
    assert isinstance(emb, Embedder)
    assert (emb.id, emb.dim) == ("langchain:CountingEmbeddings", 16)
    assert emb.embed_documents(["a", "b", "c"]).shape == (3, 16)
    assert emb.embed_documents([]).shape == (0, 16)
    q = emb.embed_query("a")
    assert q.shape == (16,) and q.dtype == np.float32
    assert np.allclose(q, emb.embed_query("a"))


def test_engine_runs_on_a_langchain_embeddings(tmp_path: Path) -> None:
    fake = CountingEmbeddings()
    with MemoryEngine.open(tmp_path / "s", embedder=LangChainEmbedder(fake, id="fake16")) as eng:
        eng.add_turns([{"role": "user", "content": f"note {i} about bees"} for i in range(5)], "zoe")
        assert fake.documents_calls >= 1
        assert eng.search("note 3 about bees", "zoe", k=5).items
    with pytest.raises(EmbedderMismatchError):
        MemoryEngine.open(tmp_path / "s", embedder=LangChainEmbedder(fake, id="another-model"))


def test_bad_embedder_arguments() -> None:
    with pytest.raises(EmbedderError):
        LangChainEmbedder(object())  # type: ignore[arg-type]
    with pytest.raises(EmbedderError):
        LangChainEmbedder(DeterministicFakeEmbedding(size=4), dim=0)


# -- packaging ----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("blocked", ["langchain_core", "langgraph"])
def test_a_missing_dependency_names_the_extra(blocked: str) -> None:
    import subprocess
    import sys

    code = (f"import sys; sys.modules[{blocked!r}] = None\n"
            "try:\n    import langchain_memory_ext\nexcept ImportError as e:\n"
            "    print(type(e).__name__, e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.startswith("MissingDependencyError"), out.stderr
    assert 'pip install "memory-ext[langchain]"' in out.stdout


def test_tools_run_in_a_langgraph_tool_node(engine: MemoryEngine) -> None:
    prebuilt = pytest.importorskip("langgraph.prebuilt")
    from langchain_core.messages import AIMessage
    from langgraph.graph import START, MessagesState, StateGraph

    builder = StateGraph(MessagesState)
    builder.add_node("tools", prebuilt.ToolNode(create_memory_tools(engine, user_id="ana", k=1)))
    builder.add_edge(START, "tools")
    node = builder.compile()
    calls = [{"id": "1", "name": "save_memory", "args": {"content": "Ana's flight is on Friday."}}]
    asyncio.run(node.ainvoke({"messages": [AIMessage("", tool_calls=calls)]}))
    calls = [{"id": "2", "name": "search_memory",
              "args": {"query": "when is the flight?", "action_state": {"tentative_action": "book a taxi"}}}]
    out = node.invoke({"messages": [AIMessage("", tool_calls=calls)]})
    msg = out["messages"][-1]
    assert msg.tool_call_id == "2" and "Friday" in msg.content and msg.artifact[0].page_content.startswith("Ana's")


def test_fetch_tool_opens_the_memory_file_of_a_hook(engine: MemoryEngine) -> None:
    _, save, fetch = create_memory_tools(engine, user_id="ana", k=1)
    save.invoke({"content": "Ana's locker code is 4471."})
    hook = engine.hooks("ana")[0]
    assert hook.id in engine.render_prompt("ana")
    msg = _call(fetch, {"hook_id": hook.id[:8]})
    assert "locker code is 4471" in msg.content and msg.status == "success"
    missing = _call(fetch, {"hook_id": "ffffffffffff"})  # an unknown id is an error message for the model
    assert missing.status == "error" and "hook" in missing.content.lower()
    _, _, fetch_bob = create_memory_tools(engine, user_id="bob")
    assert _call(fetch_bob, {"hook_id": hook.id}).status == "error"  # another user's file is not reachable


async def test_fetch_tool_async(engine: MemoryEngine) -> None:
    _, save, fetch = create_memory_tools(engine, user_id="ana")
    await save.ainvoke({"content": "Ana parks on level 3."})
    text = await fetch.ainvoke({"hook_id": engine.hooks("ana")[0].id})
    assert "level 3" in text


def test_the_search_tool_shows_the_model_only_what_its_filters_allow(tmp_path: Path) -> None:
    """The tool's text (what the model reads) leaves out a neighbour by another speaker, as its items do; a bad
    filter fails when the tool is made."""
    from tests.conftest import RULES_CHAT, assert_context_obeys, rules_turns

    with MemoryEngine.open(tmp_path / "store", embedder="hashing") as engine:
        engine.add_turns(rules_turns(), "maya", wait=True)
        with pytest.raises(InvalidQueryError, match=r"filters\.colour"):
            create_memory_tools(engine, user_id="maya", filters={"colour": "red"})
        search = create_memory_tools(engine, user_id="maya", filters={"speaker": "Maya"}, k=3)[0]
        text = search.invoke({"query": "Who flies to Lisbon and with which passport?"})
        maya = {content for _, _, speaker, content, _ in RULES_CHAT if speaker == "Maya"}
        assert_context_obeys(text, maya, {content for *_, content, _ in RULES_CHAT} - maya)
