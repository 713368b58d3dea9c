"""Use any LangChain chat model as a memory-ext :class:`~memory_ext.llm.LLM` (for the LLM planner)."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage

from memory_ext.errors import ConfigError
from memory_ext.llm import call_with_timeout

__all__ = ["LangChainLLM"]


class LangChainLLM:
    """A LangChain ``BaseChatModel`` as a :class:`memory_ext.llm.LLM`.

    ``complete`` sends the ``system`` text (if any) and the prompt as two messages and returns the reply's text.
    ``timeout`` is enforced here (a call past it raises ``TimeoutError``; set the model's own timeout too so the
    abandoned request ends). ``json_schema`` is not sent: callers state the shape in the prompt and validate the
    answer. ``acomplete`` uses the model's native ``ainvoke``. ``id`` defaults to
    ``"langchain:<class>[:<model>]"``.

    >>> from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    >>> from memory_ext.llm import LLM
    >>> from memory_ext.plan.llm_planner import LLMPlanner
    >>> chat = GenericFakeChatModel(messages=iter(['{"question_type": "single", "routes": '
    ...                                            '[{"goal": "query", "queries": ["Lena city"]}]}']))
    >>> llm = LangChainLLM(chat)
    >>> isinstance(llm, LLM), llm.id
    (True, 'langchain:GenericFakeChatModel')
    >>> plan, error = LLMPlanner(llm).plan("where does Lena live?", now=None)
    >>> plan.planner, plan.routes[0].queries, error
    ('llm:langchain:GenericFakeChatModel', ('Lena city',), None)
    """

    def __init__(self, chat_model: BaseChatModel, *, id: str | None = None) -> None:
        if not isinstance(chat_model, BaseChatModel):
            raise ConfigError("chat_model", chat_model, "pass a langchain_core BaseChatModel instance "
                                                        "(e.g. ChatOpenAI(), ChatAnthropic(), ChatOllama())")
        self.chat_model = chat_model
        if id is None:
            model = getattr(chat_model, "model_name", None) or getattr(chat_model, "model", None)
            id = f"langchain:{type(chat_model).__name__}" + (f":{model}" if isinstance(model, str) and model else "")
        self.id: str = id

    def complete(self, prompt: str, *, system: str | None = None, json_schema: Mapping[str, Any] | None = None,
                 timeout: float | None = None) -> str:
        """The model's reply to ``prompt`` as text."""
        messages = _messages(prompt, system)
        reply = call_with_timeout(lambda: self.chat_model.invoke(messages), timeout, f"LLM {self.id!r}")
        return _text(reply)

    async def acomplete(self, prompt: str, *, system: str | None = None,
                        json_schema: Mapping[str, Any] | None = None, timeout: float | None = None) -> str:
        """Async twin of :meth:`complete` (the model's ``ainvoke``; never blocks the event loop)."""
        try:
            reply = await asyncio.wait_for(self.chat_model.ainvoke(_messages(prompt, system)), timeout)
        except TimeoutError:
            raise TimeoutError(f"LLM {self.id!r}: no answer within {timeout:g} s") from None
        return _text(reply)

    def __repr__(self) -> str:
        return f"LangChainLLM(id={self.id!r})"


def _messages(prompt: str, system: str | None) -> list[BaseMessage]:
    return ([SystemMessage(content=system)] if system else []) + [HumanMessage(content=prompt)]


def _text(reply: Any) -> str:
    if isinstance(reply, BaseMessage):
        return reply.text if isinstance(reply.text, str) else reply.text()
    return str(reply)
