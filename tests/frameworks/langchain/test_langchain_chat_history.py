"""MemoryChatMessageHistory: lossless messages, bulk adds, per-session clear, RunnableWithMessageHistory."""

from __future__ import annotations

import asyncio
import doctest
import warnings
from typing import Any

import pytest

pytest.importorskip("langchain_core")

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import (
    AIMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from langchain_core.runnables.history import RunnableWithMessageHistory

import langchain_memory_ext.chat_history
from langchain_memory_ext import MemoryChatMessageHistory, MemoryRetriever
from memory_ext import MemoryEngine
from memory_ext.errors import InvalidNamespaceError, InvalidTurnError

CONVERSATION = [
    SystemMessage("You are a travel assistant."),
    HumanMessage("I'm allergic to shellfish, remember that.", name="Maya", id="m1"),
    AIMessage("", tool_calls=[{"id": "c1", "name": "save_note", "args": {"note": "shellfish allergy"}}], id="m2"),
    ToolMessage("saved", tool_call_id="c1", id="m3"),
    AIMessage("Noted: no shellfish in restaurant suggestions.", id="m4"),
]


def test_docstring_tour_runs() -> None:
    result = doctest.testmod(langchain_memory_ext.chat_history, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0 and result.attempted > 0


def test_messages_round_trip_losslessly_and_are_turns(engine: MemoryEngine) -> None:
    history = MemoryChatMessageHistory(engine=engine, user_id="maya", session_id="s1")
    history.add_messages(CONVERSATION)
    assert history.messages == CONVERSATION
    turns = engine.get_turns("maya")
    assert [str(t.role) for t in turns] == ["system", "user", "assistant", "tool", "assistant"]
    assert turns[1].speaker == "Maya" and turns[1].external_id == "m1" and turns[1].session_id == "s1"
    assert turns[2].tool_calls == ({"id": "c1", "name": "save_note", "args": {"note": "shellfish allergy"}},)
    assert all(t.timestamp is not None for t in turns)
    docs = MemoryRetriever(engine=engine, user_id="maya", k=1).invoke("what is Maya allergic to?")
    assert docs[0].metadata["external_ids"] == ["m1"]


def test_bulk_add_is_all_or_nothing(engine: MemoryEngine) -> None:
    history = MemoryChatMessageHistory(engine=engine, user_id="maya", session_id="s1")
    too_long = AIMessage("x" * (engine.config.limits.max_content_chars + 1))  # the engine cannot store it
    with pytest.raises(InvalidTurnError):
        history.add_messages([HumanMessage("fine"), too_long])
    assert history.messages == []


def test_sessions_are_separate_and_clear_forgets_only_its_own(engine: MemoryEngine) -> None:
    h1 = MemoryChatMessageHistory(engine=engine, user_id="maya", session_id="s1")
    h2 = MemoryChatMessageHistory(engine=engine, user_id="maya", session_id="s2")
    h1.add_messages([HumanMessage("The gate code is 1234.")])
    h2.add_messages([HumanMessage("My gate code changed to 9876.")])
    assert [m.text for m in h1.messages] == ["The gate code is 1234."]
    h1.clear()
    assert h1.messages == [] and len(h2.messages) == 1
    texts = [d.page_content for d in MemoryRetriever(engine=engine, user_id="maya", k=5).invoke("gate code")]
    assert texts == ["My gate code changed to 9876."]


def test_agent_id_partitions(engine: MemoryEngine) -> None:
    a = MemoryChatMessageHistory(engine=engine, user_id="maya", session_id="s1", agent_id="travel")
    b = MemoryChatMessageHistory(engine=engine, user_id="maya", session_id="s1", agent_id="cooking")
    a.add_message(HumanMessage("Book me a window seat."))
    assert b.messages == [] and len(a.messages) == 1


def test_bad_ids_fail_at_construction(engine: MemoryEngine) -> None:
    with pytest.raises(InvalidNamespaceError):
        MemoryChatMessageHistory(engine=engine, user_id="", session_id="s1")
    with pytest.raises(InvalidNamespaceError):
        MemoryChatMessageHistory(engine=engine, user_id="maya", session_id=None)  # type: ignore[arg-type]


def test_async_twins(engine: MemoryEngine) -> None:
    history = MemoryChatMessageHistory(engine=engine, user_id="maya", session_id="s1")

    async def run() -> tuple[list[Any], list[Any]]:
        await history.aadd_messages(CONVERSATION[:2])
        got = await history.aget_messages()
        await history.aclear()
        return got, await history.aget_messages()

    got, after = asyncio.run(run())
    assert got == CONVERSATION[:2] and after == []


def _with_history(engine: MemoryEngine, replies: list[str]) -> RunnableWithMessageHistory:
    prompt = ChatPromptTemplate.from_messages(
        [("system", "You remember things."), MessagesPlaceholder("history"), ("human", "{question}")])
    model = GenericFakeChatModel(messages=iter(AIMessage(r) for r in replies))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return RunnableWithMessageHistory(
            prompt | model,
            lambda session_id: MemoryChatMessageHistory(engine=engine, user_id="maya", session_id=session_id),
            input_messages_key="question", history_messages_key="history")


def test_runnable_with_message_history_sync(engine: MemoryEngine) -> None:
    chain = _with_history(engine, ["Hello Maya!", "You are allergic to shellfish."])
    cfg = {"configurable": {"session_id": "s1"}}
    assert chain.invoke({"question": "Hi, I'm Maya and I'm allergic to shellfish."}, config=cfg).text == "Hello Maya!"
    chain.invoke({"question": "What am I allergic to?"}, config=cfg)
    history = MemoryChatMessageHistory(engine=engine, user_id="maya", session_id="s1")
    assert [(m.type, m.text) for m in history.messages] == [
        ("human", "Hi, I'm Maya and I'm allergic to shellfish."), ("ai", "Hello Maya!"),
        ("human", "What am I allergic to?"), ("ai", "You are allergic to shellfish.")]
    top = MemoryRetriever(engine=engine, user_id="maya", k=1).invoke("shellfish allergy")[0]
    assert top.metadata["session_id"] == "s1"


def test_runnable_with_message_history_async(engine: MemoryEngine) -> None:
    chain = _with_history(engine, ["One.", "Two."])

    async def run() -> None:
        await chain.ainvoke({"question": "first"}, config={"configurable": {"session_id": "a"}})
        await chain.ainvoke({"question": "second"}, config={"configurable": {"session_id": "b"}})

    asyncio.run(run())
    a = MemoryChatMessageHistory(engine=engine, user_id="maya", session_id="a").messages
    b = MemoryChatMessageHistory(engine=engine, user_id="maya", session_id="b").messages
    assert [m.text for m in a] == ["first", "One."] and [m.text for m in b] == ["second", "Two."]
