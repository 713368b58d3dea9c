"""MemoryChatMessageHistory against LangChain's InMemoryChatMessageHistory: the same messages come back.

Every sequence is written to both histories (in one batch, one by one, and through the async twins) and read
back side by side. An empty model reply keeps the exchange (issue 13, observation 8); a message the engine
cannot store exactly raises before anything of the exchange is written.
"""

from __future__ import annotations

import asyncio
import warnings
from collections.abc import Callable
from datetime import datetime
from typing import Any

import pytest

pytest.importorskip("langchain_core")

from langchain_core.chat_history import BaseChatMessageHistory, InMemoryChatMessageHistory
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    ChatMessage,
    FunctionMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from langchain_core.runnables.history import RunnableWithMessageHistory

from langchain_memory_ext import MemoryChatMessageHistory
from langchain_memory_ext.chat_history import EMPTY_MESSAGE
from memory_ext import MemoryEngine, Namespace
from memory_ext.errors import InvalidTurnError

pytestmark = pytest.mark.filterwarnings("ignore:The class `InMemoryChatMessageHistory`:DeprecationWarning")

SEQUENCES: dict[str, list[BaseMessage]] = {
    "plain exchange": [SystemMessage("You are a travel assistant."), HumanMessage("Hi, I'm Maya."),
                       AIMessage("Hello Maya!")],
    "empty reply": [HumanMessage("Are you there?"), AIMessage("")],
    "whitespace and empty everywhere": [HumanMessage(""), AIMessage("   "), SystemMessage("\n"),
                                        HumanMessage("still here", id="h2")],
    "tool call round": [
        HumanMessage("What's the weather in Lisbon?", id="u1"),
        AIMessage("", id="a1", tool_calls=[{"id": "c1", "name": "get_weather", "args": {"city": "Lisbon"}}]),
        ToolMessage("Sunny, 24C", tool_call_id="c1", name="get_weather", id="t1"),
        AIMessage("It's sunny and 24C in Lisbon.", id="a2"),
    ],
    "two parallel tool calls and a text": [
        AIMessage("Checking both.", tool_calls=[{"id": "c1", "name": "a", "args": {}},
                                                {"id": "c2", "name": "b", "args": {"x": [1, 2]}}]),
        ToolMessage("", tool_call_id="c1"),  # a tool that returned nothing
        ToolMessage("done", tool_call_id="c2", status="error", artifact={"raw": [1, 2, 3]}),
    ],
    "kwargs and metadata": [
        HumanMessage("hello", additional_kwargs={"lang": "en", "nested": {"k": [1, None, True]}}, name="Maya"),
        AIMessage("hi", response_metadata={"model_name": "fake", "finish_reason": "stop"},
                  usage_metadata={"input_tokens": 3, "output_tokens": 1, "total_tokens": 4}),
        AIMessage("", additional_kwargs={"refusal": None}, response_metadata={"finish_reason": "length"}),
    ],
    "unicode": [HumanMessage("我下周要去杭州出差 🙂, Zoë’s café — naïve"), AIMessage("好的！🚄 Olá, ça va?"),
                HumanMessage("emoji only: 🎉🎉")],
    "content blocks": [
        HumanMessage(content=[{"type": "text", "text": "What is in this picture?"},
                              {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}]),
        AIMessage(content=[{"type": "text", "text": "A cat."}]),
        AIMessage(content=[]),
    ],
    "other message types": [ChatMessage(content="a note", role="critic"), FunctionMessage(content="42", name="calc"),
                            ChatMessage(content="", role="assistant")],
    "repeated identical messages": [HumanMessage("ok"), AIMessage(""), HumanMessage("ok"), AIMessage("")],
}


def _ours(engine: MemoryEngine, session: str = "s1") -> MemoryChatMessageHistory:
    return MemoryChatMessageHistory(engine=engine, user_id="maya", session_id=session)


@pytest.mark.parametrize("name", list(SEQUENCES))
@pytest.mark.parametrize("mode", ["batch", "one_by_one", "async"])
def test_round_trips_what_the_in_memory_history_round_trips(engine: MemoryEngine, name: str, mode: str) -> None:
    sequence = SEQUENCES[name]
    histories: list[BaseChatMessageHistory] = [InMemoryChatMessageHistory(), _ours(engine)]
    for history in histories:
        if mode == "batch":
            history.add_messages(sequence)
        elif mode == "one_by_one":
            for message in sequence:
                history.add_message(message)
        else:
            asyncio.run(history.aadd_messages(sequence))
    reference, ours = histories
    assert ours.messages == reference.messages == sequence
    assert asyncio.run(ours.aget_messages()) == reference.messages
    assert _ours(engine).messages == reference.messages  # a fresh face over the same store reads the same


def test_every_message_is_a_turn_and_empty_ones_carry_the_marker(engine: MemoryEngine) -> None:
    _ours(engine).add_messages(SEQUENCES["tool call round"] + SEQUENCES["empty reply"])
    turns = engine.get_turns(Namespace("maya", session_id="s1"))
    assert [(t.role.value, t.content, t.attachments) for t in turns] == [
        ("user", "What's the weather in Lisbon?", ()),
        ("assistant", "", ()),  # tool calls are content of their own: no marker
        ("tool", "Sunny, 24C", ()),
        ("assistant", "It's sunny and 24C in Lisbon.", ()),
        ("user", "Are you there?", ()),
        ("assistant", "", (EMPTY_MESSAGE,)),
    ]


def _chain(history_of: Callable[[str], BaseChatMessageHistory], replies: list[str]) -> RunnableWithMessageHistory:
    prompt = ChatPromptTemplate.from_messages(
        [("system", "You remember things."), MessagesPlaceholder("history"), ("human", "{question}")])
    model = GenericFakeChatModel(messages=iter(AIMessage(r) for r in replies))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return RunnableWithMessageHistory(prompt | model, history_of, input_messages_key="question",
                                          history_messages_key="history")


def _contents(messages: list[BaseMessage]) -> list[tuple[str, Any]]:
    return [(m.type, m.content) for m in messages]


@pytest.mark.parametrize("use_async", [False, True])
def test_an_empty_model_reply_keeps_the_exchange(engine: MemoryEngine, use_async: bool) -> None:
    """Observation 8: the model answers "" and the history keeps the question and the empty reply."""
    reference = InMemoryChatMessageHistory()
    outcomes = []
    for history_of in (lambda _sid: reference, lambda sid: _ours(engine, sid)):
        chain = _chain(history_of, ["", "Lisbon."])
        cfg: Any = {"configurable": {"session_id": "s1"}}
        for question in ("Are you there?", "Where do I live?"):
            if use_async:
                asyncio.run(chain.ainvoke({"question": question}, config=cfg))
            else:
                chain.invoke({"question": question}, config=cfg)
        outcomes.append(_contents(history_of("s1").messages))
    assert outcomes[0] == outcomes[1] == [("human", "Are you there?"), ("ai", ""),
                                          ("human", "Where do I live?"), ("ai", "Lisbon.")]


def test_a_message_that_cannot_be_stored_raises_before_the_exchange_is_written(engine: MemoryEngine) -> None:
    history = _ours(engine)
    history.add_messages([HumanMessage("first")])
    odd = AIMessage("answer", additional_kwargs={"at": datetime(2026, 3, 1, 9, 0)})  # not JSON: not exact
    with pytest.raises(InvalidTurnError, match="additional_kwargs") as info:
        history.add_messages([HumanMessage("question"), odd])
    assert "JSON" in info.value.fix
    too_long = AIMessage("x" * (engine.config.limits.max_content_chars + 1))
    with pytest.raises(InvalidTurnError, match="content"):
        history.add_messages([HumanMessage("question"), too_long])
    assert _contents(history.messages) == [("human", "first")]



@pytest.mark.skip(reason="needs the engine not to index turns without text: no vector, no window centred on them "
                         "(issue 13, write pipeline derive step)")
def test_an_empty_reply_is_never_a_search_result(engine: MemoryEngine) -> None:
    """Wanted: an empty message is kept in the history but search has nothing to find in it. Today its turn
    record is embedded ("" has a vector) and the window centred on it carries its neighbours' text, so it comes
    back as an item with empty text, ranked second for "what am I allergic to?"."""
    from langchain_memory_ext import MemoryRetriever

    _ours(engine).add_messages([HumanMessage("Are you there?"), AIMessage(""),
                                HumanMessage("I am allergic to shellfish."), AIMessage("Noted.")])
    docs = MemoryRetriever(engine=engine, user_id="maya", k=4).invoke("what am I allergic to?")
    assert docs and all(d.page_content.strip() for d in docs)
