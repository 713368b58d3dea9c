"""MemoryEngineMemory against LlamaIndex's own memories: the same messages come back.

References: ``Memory`` (LlamaIndex's current memory, which serialises messages into its SQL store) and
``ChatMemoryBuffer`` over a ``SimpleChatStore``. Each sequence is put into all three (one by one, as a batch,
through ``set`` and through the async twins) and read back with ``get_all`` side by side. An empty message is
kept (issue 13, observation 8); a message that cannot be stored raises before anything is written.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

pytest.importorskip("llama_index.core")

from llama_index.core.base.llms.types import ImageBlock, TextBlock, ToolCallBlock
from llama_index.core.llms import ChatMessage
from llama_index.core.memory import ChatMemoryBuffer, Memory
from llama_index.core.storage.chat_store import SimpleChatStore

from llamaindex_memory_ext import MemoryEngineMemory
from llamaindex_memory_ext._convert import EMPTY_MESSAGE
from memory_ext import MemoryEngine, Namespace
from memory_ext.errors import InvalidTurnError


def _m(role: str, content: Any = None, **kw: Any) -> ChatMessage:
    return ChatMessage(role=role, content=content, **kw)


SEQUENCES: dict[str, list[ChatMessage]] = {
    "plain exchange": [_m("system", "You are a travel assistant."), _m("user", "Hi, I'm Maya."),
                       _m("assistant", "Hello Maya!")],
    "empty reply": [_m("user", "Are you there?"), _m("assistant", "")],
    "no content at all": [_m("user", ""), _m("assistant", None), _m("assistant", "   "), _m("user", "still here")],
    "tool call round": [
        _m("user", "What's the weather in Lisbon?"),
        ChatMessage(role="assistant", blocks=[ToolCallBlock(tool_call_id="c1", tool_name="get_weather",
                                                            tool_kwargs={"city": "Lisbon"})]),
        _m("tool", "Sunny, 24C", additional_kwargs={"tool_call_id": "c1", "name": "get_weather"}),
        _m("assistant", "It's sunny and 24C in Lisbon."),
    ],
    "tool result that is empty": [_m("tool", "", additional_kwargs={"tool_call_id": "c9"})],
    "additional kwargs": [_m("user", "hello", additional_kwargs={"name": "Maya", "nested": {"k": [1, None, True]}}),
                          _m("assistant", "", additional_kwargs={"refusal": None, "finish": "length"})],
    "unicode": [_m("user", "我下周要去杭州出差 🙂, Zoë’s café — naïve"), _m("assistant", "好的！🚄 Olá, ça va?")],
    "blocks": [ChatMessage(role="user", blocks=[TextBlock(text="What is in this picture?"),
                                                ImageBlock(url="https://example.org/cat.png")]),
               ChatMessage(role="assistant", blocks=[])],
    "repeated identical messages": [_m("user", "ok"), _m("assistant", ""), _m("user", "ok"), _m("assistant", "")],
}


def _references() -> list[Any]:
    return [Memory.from_defaults(session_id="s1", token_limit=100_000),
            ChatMemoryBuffer.from_defaults(chat_store=SimpleChatStore(), chat_store_key="s1", token_limit=100_000)]


def _ours(engine: MemoryEngine) -> MemoryEngineMemory:
    return MemoryEngineMemory(engine=engine, user_id="maya", session_id="s1", similarity_top_k=0)


def _write(memory: Any, sequence: list[ChatMessage], mode: str) -> None:
    if mode == "put":
        for message in sequence:
            memory.put(message)
    elif mode == "put_messages":
        memory.put_messages(sequence)
    elif mode == "set":
        memory.put(_m("user", "replaced"))
        memory.set(sequence)
    else:
        async def run() -> None:
            for message in sequence:
                await memory.aput(message)

        asyncio.run(run())


@pytest.mark.parametrize("name", list(SEQUENCES))
@pytest.mark.parametrize("mode", ["put", "put_messages", "set", "aput"])
def test_round_trips_what_llamaindex_memories_round_trip(engine: MemoryEngine, name: str, mode: str) -> None:
    sequence = SEQUENCES[name]
    memories = [*_references(), _ours(engine)]
    for memory in memories:
        _write(memory, sequence, mode)
    got = [m.get_all() for m in memories]
    assert got[0] == got[1] == got[2] == sequence
    assert _ours(engine).get() == sequence  # get() without memories to inject: the history itself
    assert asyncio.run(_ours(engine).aget_all()) == sequence


def test_empty_messages_are_turns_with_the_marker_and_never_injected_as_memories(engine: MemoryEngine) -> None:
    _ours(engine).put_messages(SEQUENCES["empty reply"] + SEQUENCES["tool call round"])
    turns = engine.get_turns(Namespace("maya", session_id="s1"))
    assert [(t.role.value, t.content, t.attachments) for t in turns][:2] == [
        ("user", "Are you there?", ()), ("assistant", "", (EMPTY_MESSAGE,))]
    assert turns[3].attachments == ()  # a tool-call message has content of its own
    other = MemoryEngineMemory(engine=engine, user_id="maya", session_id="s2", similarity_top_k=10)
    injected = other.get(input="Are you there? weather in Lisbon")[0]
    assert injected.role.value == "system"
    assert all(line.split(": ", 1)[-1].strip() for line in (injected.content or "").splitlines()[1:])  # no empty lines


def test_a_message_that_cannot_be_stored_raises_before_anything_is_written(engine: MemoryEngine) -> None:
    class ProviderObject:
        """Something a provider SDK might leave in additional_kwargs."""

    memory = _ours(engine)
    memory.put(_m("user", "first"))
    odd = _m("assistant", "answer", additional_kwargs={"raw": ProviderObject()})
    with pytest.raises(Exception) as reference_error:  # LlamaIndex's Memory refuses it too
        _references()[0].put(odd)
    assert "serialize" in str(reference_error.value)
    with pytest.raises(InvalidTurnError, match="additional_kwargs"):
        memory.put_messages([_m("user", "question"), odd])
    with pytest.raises(InvalidTurnError):
        memory.set([_m("user", "question"), odd])  # set checks before it forgets the session
    too_long = _m("assistant", "x" * (engine.config.limits.max_content_chars + 1))
    with pytest.raises(InvalidTurnError, match="content"):
        memory.put_messages([_m("user", "question"), too_long])
    assert memory.get_all() == [_m("user", "first")]
