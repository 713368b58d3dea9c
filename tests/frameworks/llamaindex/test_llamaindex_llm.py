"""LlamaIndexLLM: any LlamaIndex LLM as a memory-ext LLM, and through it the LLM planner."""

from __future__ import annotations

import asyncio
import doctest
import json
import time
from collections.abc import Sequence
from typing import Any

import pytest

pytest.importorskip("llama_index.core")

from llama_index.core.base.llms.types import (
    ChatMessage,
    ChatResponse,
    CompletionResponse,
    CompletionResponseGen,
    LLMMetadata,
)
from llama_index.core.llms import CustomLLM, MockLLM

import llamaindex_memory_ext.llm
from llamaindex_memory_ext.llm import LlamaIndexLLM
from memory_ext.errors import ConfigError
from memory_ext.llm import LLM, acomplete
from memory_ext.plan.llm_planner import LLMPlanner
from tests.conftest import Gate

PLAN = {"question_type": "aggregate", "routes": [{"goal": "query", "queries": ["pets names"]}]}


class EchoLLM(CustomLLM):
    """Replies with the chat messages it received as JSON ([[role, text], ...]), or with ``answer`` when set;
    sleeps ``delay`` first (waits on ``gate`` first, when given). Its sync path refuses to run inside an event
    loop."""

    delay: float = 0.0
    gate: Any = None  # a tests.conftest.Gate (pydantic does not validate arbitrary classes)
    answer: str | None = None
    fail: bool = False

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(model_name="echo-1", is_chat_model=True)

    def _reply(self, messages: Sequence[ChatMessage]) -> ChatResponse:
        if self.fail:
            raise ConnectionError("provider unreachable")
        text = self.answer or json.dumps([[str(m.role.value), m.content] for m in messages])
        return ChatResponse(message=ChatMessage(role="assistant", content=text))

    def chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            if self.gate is not None:
                self.gate.wait()
            time.sleep(self.delay)
            return self._reply(messages)
        raise AssertionError("the sync path was called from async code")

    async def achat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        await asyncio.sleep(self.delay)
        return self._reply(messages)

    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        raise AssertionError("the adapter uses chat, not complete")

    def stream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponseGen:
        raise AssertionError("not used")


def test_it_is_an_llm_and_sends_system_and_prompt() -> None:
    llm = LlamaIndexLLM(EchoLLM())
    assert isinstance(llm, LLM) and llm.id == "llamaindex:EchoLLM:echo-1"
    assert json.loads(llm.complete("hello", system="be brief")) == [["system", "be brief"], ["user", "hello"]]
    assert json.loads(llm.complete("hello")) == [["user", "hello"]]
    assert LlamaIndexLLM(EchoLLM(), id="mine").id == "mine"
    assert LlamaIndexLLM(MockLLM()).id == "llamaindex:MockLLM"


def test_the_llm_planner_runs_on_a_llamaindex_model() -> None:
    llm = LlamaIndexLLM(EchoLLM(answer="Plan:\n" + json.dumps(PLAN) + "\nDone."))
    plan, error = LLMPlanner(llm).plan("Which pets do I have?", now=None)
    assert error is None and plan.planner == "llm:llamaindex:EchoLLM:echo-1"
    assert plan.question_type == "aggregate" and plan.routes[0].queries == ("pets names",)


def test_an_echoing_model_is_invalid_twice_and_degrades_with_a_reason() -> None:
    plan, error = LLMPlanner(LlamaIndexLLM(MockLLM())).plan("Where does Lena live?", now=None)
    assert plan.planner == "heuristic" and error.error_type == "InvalidPlan"


def test_a_failing_or_slow_model_degrades_the_planner_with_a_reason(gate: Gate) -> None:
    plan, error = LLMPlanner(LlamaIndexLLM(EchoLLM(fail=True))).plan("Where does Lena live?", now=None)
    assert plan.planner == "heuristic" and error.error_type == "ConnectionError"
    plan, error = LLMPlanner(LlamaIndexLLM(EchoLLM(gate=gate)), timeout_s=0.2).plan("Where?", now=None)
    assert gate.entered and not gate.finished  # the planner came back without waiting for the model
    assert plan.planner == "heuristic" and error.error_type == "TimeoutError"


def test_complete_enforces_its_timeout() -> None:
    with pytest.raises(TimeoutError, match="echo-1"):
        LlamaIndexLLM(EchoLLM(delay=1.0)).complete("x", timeout=0.05)


async def test_acomplete_uses_the_async_path_and_its_timeout() -> None:
    llm = LlamaIndexLLM(EchoLLM())
    assert json.loads(await llm.acomplete("hi", system="s")) == [["system", "s"], ["user", "hi"]]
    assert json.loads(await acomplete(llm, "hi")) == [["user", "hi"]]
    with pytest.raises(TimeoutError):
        await LlamaIndexLLM(EchoLLM(delay=1.0)).acomplete("x", timeout=0.05)


def test_a_non_llm_is_rejected() -> None:
    with pytest.raises(ConfigError, match="llama_index"):
        LlamaIndexLLM("gpt-4")  # type: ignore[arg-type]


def test_docstring_examples() -> None:
    result = doctest.testmod(llamaindex_memory_ext.llm, optionflags=doctest.ELLIPSIS)
    assert result.attempted and result.failed == 0
