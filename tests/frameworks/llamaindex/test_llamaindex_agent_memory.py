"""End to end: a LlamaIndex ``FunctionAgent`` (:class:`MemoryFunctionAgent`) fails a tool call and recovers; the
memory sees the call and its failure before the next model call and searches with the derived action state; a new
session gets the experience before its first call of the tool and succeeds at once — with ``MemoryEngineMemory``
and with ``ArchivingMemory`` + ``MemoryBlock``. The LLM is scripted (a ``MockFunctionCallingLLM``): it writes dates
as DD/MM/YYYY unless its prompt shows that book_hotel failed on such a date and succeeded with an ISO one."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Iterator, Sequence
from datetime import date
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("llama_index.core")

from llama_index.core.base.llms.types import ChatMessage, MessageRole, ToolCallBlock
from llama_index.core.bridge.pydantic import Field
from llama_index.core.llms import MockFunctionCallingLLM
from llama_index.core.memory import BaseMemory

from llamaindex_memory_ext import ArchivingMemory, MemoryBlock, MemoryEngineMemory, MemoryFunctionAgent
from llamaindex_memory_ext._convert import message_text
from memory_ext import ActionState, MemoryEngine, Namespace, SearchResult

ISO = re.compile(r"\d{4}-\d{2}-\d{2}")
FAILED_ON_DATE = re.compile(r'tool output book_hotel, error\] "HTTP 422[^\n]*check_in')  # the middleware's lines
ISO_CALL = re.compile(r'book_hotel\([^\n]*check_in="\d{4}-\d{2}-\d{2}"')


def book_hotel(city: str, check_in: str, check_out: str) -> str:
    """Book a hotel room in a city from the check_in date to the check_out date."""
    for name, value in (("check_in", check_in), ("check_out", check_out)):
        if not ISO.fullmatch(value):
            raise ValueError(f"HTTP 422 Unprocessable Entity: invalid {name} {value!r}")
    return json.dumps({"booking_id": f"H-{city[:3].upper()}-{check_in}", "status": "confirmed"})


def lesson_in(prompt: str) -> bool:
    return bool(FAILED_ON_DATE.search(prompt) and ISO_CALL.search(prompt))


class ScriptedBooker(MockFunctionCallingLLM):
    """Books one stay: DD/MM/YYYY dates unless the prompt holds the lesson; ISO after a tool error."""

    stay: tuple[str, date, date]
    prompts: list[list[ChatMessage]] = Field(default_factory=list)

    def __init__(self, city: str, check_in: date, check_out: date) -> None:
        super().__init__(stay=(city, check_in, check_out))
        self.response_generator = self._respond

    def _call(self, iso: bool) -> ChatMessage:
        city, check_in, check_out = self.stay
        fmt = "%Y-%m-%d" if iso else "%d/%m/%Y"
        return ChatMessage(role=MessageRole.ASSISTANT, blocks=[ToolCallBlock(
            tool_call_id=f"call_{len(self.prompts)}", tool_name="book_hotel",
            tool_kwargs={"city": city, "check_in": check_in.strftime(fmt), "check_out": check_out.strftime(fmt)})])

    def _respond(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatMessage:
        self.prompts.append(list(messages))
        last = messages[-1]
        if last.role == MessageRole.TOOL:
            failed = message_text(last).startswith("HTTP 422")
            return self._call(iso=True) if failed else ChatMessage(role="assistant", content=f"Booked: "
                                                                                             f"{message_text(last)}")
        system = "\n".join(message_text(m) for m in messages if m.role == MessageRole.SYSTEM)
        return self._call(iso=lesson_in(system))


class RecordingEngine(MemoryEngine):
    """The real engine; it also keeps the action state of each search (what the memory searched with)."""

    states: list[ActionState | None]

    async def asearch(self, query: str, namespace: Namespace | str, **kwargs: Any) -> SearchResult:
        self.states.append(kwargs.get("action_state"))
        return await super().asearch(query, namespace, **kwargs)


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[RecordingEngine]:
    eng = RecordingEngine.open(tmp_path / "store", embedder="hashing")
    assert isinstance(eng, RecordingEngine)
    eng.states = []
    try:
        yield eng
    finally:
        eng.close()


ASK_LISBON = "Please book me a hotel in Lisbon, arriving April 14 and leaving April 16."
ASK_PORTO = "Book me a hotel in Porto from May 3 to May 5, please."


def engine_memory(engine: MemoryEngine, session: str) -> BaseMemory:
    return MemoryEngineMemory(engine=engine, user_id="ana", session_id=session, similarity_top_k=8)


def archiving_memory(engine: MemoryEngine, session: str) -> BaseMemory:
    return ArchivingMemory.from_defaults(session_id=session, memory_blocks=[
        MemoryBlock(engine=engine, user_id="ana", similarity_top_k=8)])


async def _run(llm: ScriptedBooker, ask: str, memory: BaseMemory) -> Any:
    agent = MemoryFunctionAgent(llm=llm, tools=[book_hotel], streaming=False)
    return await agent.run(ask, memory=memory)


@pytest.mark.parametrize("make_memory", [engine_memory, archiving_memory], ids=["engine_memory", "archiving"])
def test_function_agent_learns_from_a_failed_call_across_sessions(engine: RecordingEngine, make_memory: Any) -> None:
    first = ScriptedBooker("Lisbon", date(2026, 4, 14), date(2026, 4, 16))
    out = asyncio.run(_run(first, ASK_LISBON, make_memory(engine, "trip-1")))
    assert [r.tool_output.is_error for r in out.tool_calls] == [True, False]  # failed, then recovered

    # before the model's second call the memory had seen the failed call: it searched with that action state
    seen = [s for s in engine.states if s is not None and s.last_tool_name == "book_hotel"]
    assert seen and seen[0].last_tool_args == {"city": "Lisbon", "check_in": "14/04/2026",
                                               "check_out": "16/04/2026"}
    assert "HTTP 422" in (seen[0].failure_signal or "") and seen[0].available_tools == ("book_hotel",)

    stored = engine.get_turns("ana")
    tool_turns = [(t.tool_name, t.is_error, t.session_id) for t in stored if t.role == "tool"]
    assert tool_turns == [("book_hotel", True, "trip-1"), ("book_hotel", False, "trip-1")]
    engine.flush()

    second = ScriptedBooker("Porto", date(2026, 5, 3), date(2026, 5, 5))
    out = asyncio.run(_run(second, ASK_PORTO, make_memory(engine, "trip-2")))
    first_prompt = "\n".join(message_text(m) for m in second.prompts[0] if m.role == MessageRole.SYSTEM)
    assert lesson_in(first_prompt)  # before its first book_hotel call
    assert [(r.tool_kwargs["check_in"], r.tool_output.is_error) for r in out.tool_calls] == [("2026-05-03", False)]


def test_without_the_memory_the_new_session_fails_first(engine: RecordingEngine) -> None:
    second = ScriptedBooker("Porto", date(2026, 5, 3), date(2026, 5, 5))
    out = asyncio.run(_run(second, ASK_PORTO, engine_memory(engine, "trip-2")))
    assert [(r.tool_kwargs["check_in"], r.tool_output.is_error) for r in out.tool_calls] == [
        ("03/05/2026", True), ("2026-05-03", False)]


def test_a_plain_chat_searches_with_the_question_alone(engine: RecordingEngine) -> None:
    memory = MemoryEngineMemory(engine=engine, user_id="ana", session_id="chat")
    memory.put(ChatMessage(role="user", content="I'm allergic to shellfish."))
    asyncio.run(memory.aget(input="Any dinner ideas?"))
    assert engine.states == [None]  # no tools, no tool calls: no action state


def test_the_tools_given_to_a_memory_make_its_first_search_action_aware(engine: RecordingEngine) -> None:
    memory = MemoryEngineMemory(engine=engine, user_id="ana", session_id="trip-9", tools=[book_hotel])
    block = MemoryBlock(engine=engine, user_id="ana", tools=[book_hotel])
    asyncio.run(memory.aget(input="Book me a hotel in Porto"))
    asyncio.run(block.aget([ChatMessage(role="user", content="Book me a hotel in Porto")]))
    for state in engine.states:
        assert state is not None and state.available_tools == ("book_hotel",)
        assert state.last_tool_name is None and state.current_subgoal == "Book me a hotel in Porto"
        assert "check_in" in state.missing_slots  # the user named the city, not the dates
