"""LangChainLLM: any LangChain chat model as a memory-ext LLM, and through it the LLM planner."""

from __future__ import annotations

import asyncio
import doctest
import json
import time
from datetime import UTC, datetime
from typing import Any

import pytest

pytest.importorskip("langchain_core")

from langchain_core.language_models import BaseChatModel
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult

import langchain_memory_ext.llm
from langchain_memory_ext.llm import LangChainLLM
from memory_ext.errors import ConfigError
from memory_ext.llm import LLM, acomplete
from memory_ext.plan.llm_planner import LLMPlanner
from tests.conftest import Gate

PLAN = {"question_type": "comparison", "routes": [
    {"goal": "query", "queries": ["Caroline hobbies"], "constraints": ["speaker:Caroline"]},
    {"goal": "Melanie", "queries": ["Melanie hobbies"], "constraints": ["speaker:Melanie"]}]}


class EchoChat(BaseChatModel):
    """Replies with the messages it received as JSON ([[type, text], ...]); sleeps ``delay`` first (waits on
    ``gate`` first, when given). Its sync path refuses to run inside an event loop, so async code must use the
    async path."""

    delay: float = 0.0
    gate: Any = None  # a tests.conftest.Gate (pydantic does not validate arbitrary classes)

    @property
    def _llm_type(self) -> str:
        return "echo"

    def _reply(self, messages: list[BaseMessage]) -> ChatResult:
        text = json.dumps([[m.type, m.content] for m in messages])
        return ChatResult(generations=[ChatGeneration(message=AIMessage(content=text))])

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None,
                  **kwargs: Any) -> ChatResult:
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            if self.gate is not None:
                self.gate.wait()
            time.sleep(self.delay)
            return self._reply(messages)
        raise AssertionError("the sync path was called from async code")

    async def _agenerate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None,
                         **kwargs: Any) -> ChatResult:
        await asyncio.sleep(self.delay)
        return self._reply(messages)


class BrokenChat(EchoChat):
    def _generate(self, *args: Any, **kwargs: Any) -> ChatResult:
        raise ConnectionError("provider unreachable")


def test_it_is_an_llm_and_sends_system_and_prompt() -> None:
    llm = LangChainLLM(EchoChat())
    assert isinstance(llm, LLM) and llm.id == "langchain:EchoChat"
    assert json.loads(llm.complete("hello", system="be brief")) == [["system", "be brief"], ["human", "hello"]]
    assert json.loads(llm.complete("hello")) == [["human", "hello"]]
    assert LangChainLLM(EchoChat(), id="my-model").id == "my-model"


def test_the_model_name_is_in_the_default_id() -> None:
    class Named(EchoChat):
        model_name: str = "gpt-x"

    assert LangChainLLM(Named()).id == "langchain:Named:gpt-x"


def test_the_llm_planner_runs_on_a_langchain_model() -> None:
    chat = GenericFakeChatModel(messages=iter(["```json\n" + json.dumps(PLAN) + "\n```"]))
    plan, error = LLMPlanner(LangChainLLM(chat)).plan("Compare Caroline's and Melanie's hobbies", now=None,
                                                      speakers=["Caroline", "Melanie"])
    assert error is None and plan.planner == "llm:langchain:GenericFakeChatModel"
    assert plan.question_type == "comparison"
    assert [r.speakers for r in plan.routes] == [("Caroline",), ("Melanie",)]


def test_a_failing_or_slow_model_degrades_the_planner_with_a_reason(gate: Gate) -> None:
    plan, error = LLMPlanner(LangChainLLM(BrokenChat())).plan("Where does Lena live?", now=None)
    assert plan.planner == "heuristic" and error.error_type == "ConnectionError"
    assert "provider unreachable" in error.message
    plan, error = LLMPlanner(LangChainLLM(EchoChat(gate=gate)), timeout_s=0.2).plan("Where?", now=None)
    assert gate.entered and not gate.finished  # the planner came back without waiting for the model
    assert plan.planner == "heuristic" and error.error_type == "TimeoutError"


def test_complete_enforces_its_timeout() -> None:
    with pytest.raises(TimeoutError, match="langchain:EchoChat"):
        LangChainLLM(EchoChat(delay=1.0)).complete("x", timeout=0.05)


async def test_acomplete_uses_the_async_path_and_its_timeout() -> None:
    llm = LangChainLLM(EchoChat())
    assert json.loads(await llm.acomplete("hi", system="s")) == [["system", "s"], ["human", "hi"]]
    assert json.loads(await acomplete(llm, "hi")) == [["human", "hi"]]
    with pytest.raises(TimeoutError):
        await LangChainLLM(EchoChat(delay=1.0)).acomplete("x", timeout=0.05)


def test_a_non_chat_model_is_rejected() -> None:
    with pytest.raises(ConfigError, match="BaseChatModel"):
        LangChainLLM(object())  # type: ignore[arg-type]


def test_docstring_examples() -> None:
    result = doctest.testmod(langchain_memory_ext.llm, optionflags=doctest.ELLIPSIS)
    assert result.attempted and result.failed == 0


def test_time_filters_survive_the_adapter() -> None:
    answer = {"question_type": "temporal", "routes": [
        {"goal": "query", "queries": ["trip"], "time_filter": {"start": "2023-05-01", "end": "2023-05-01"}}]}
    chat = GenericFakeChatModel(messages=iter([json.dumps(answer)]))
    plan, error = LLMPlanner(LangChainLLM(chat)).plan("What did I do on May 1?", now=datetime(2023, 5, 8,
                                                                                         tzinfo=UTC))
    assert error is None
    assert plan.routes[0].time_filter == (datetime(2023, 5, 1, tzinfo=UTC), datetime(2023, 5, 2, tzinfo=UTC))
