"""Use any LlamaIndex LLM as a memory-ext :class:`~memory_ext.llm.LLM` (for the LLM planner)."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from ._deps import require

require("llama_index.core", "llamaindex_memory_ext.LlamaIndexLLM")

from llama_index.core.base.llms.types import ChatMessage, MessageRole  # noqa: E402
from llama_index.core.llms import LLM as LlamaLLM  # noqa: E402

from memory_ext.errors import ConfigError  # noqa: E402
from memory_ext.llm import call_with_timeout  # noqa: E402

__all__ = ["LlamaIndexLLM"]


class LlamaIndexLLM:
    """A LlamaIndex ``LLM`` (``llama_index.core.llms.LLM``: OpenAI, Ollama, ``CustomLLM``, ...) as a
    :class:`memory_ext.llm.LLM`.

    ``complete`` sends the ``system`` text (if any) and the prompt through the model's ``chat`` and returns the
    reply's text. ``timeout`` is enforced here (a call past it raises ``TimeoutError``; set the model's own
    timeout too so the abandoned request ends). ``json_schema`` is not sent: callers state the shape in the prompt
    and validate the answer. ``acomplete`` uses the model's native ``achat``. ``id`` defaults to
    ``"llamaindex:<class>[:<model_name>]"``.

    >>> from llama_index.core.llms import MockLLM
    >>> from memory_ext.llm import LLM
    >>> llm = LlamaIndexLLM(MockLLM())
    >>> isinstance(llm, LLM), llm.id
    (True, 'llamaindex:MockLLM')
    >>> llm.complete("hello", system="be brief")     # MockLLM echoes its prompt
    'system: be brief\\nuser: hello\\nassistant: '
    """

    def __init__(self, llm: LlamaLLM, *, id: str | None = None) -> None:
        if not isinstance(llm, LlamaLLM):
            raise ConfigError("llm", llm, "pass a llama_index.core.llms.LLM instance (e.g. OpenAI(), Ollama())")
        self.llm = llm
        if id is None:
            try:
                model = llm.metadata.model_name
            except Exception:  # noqa: BLE001  metadata is the provider's code; a broken one only costs the default id
                model = None
            suffix = f":{model}" if isinstance(model, str) and model and model != "unknown" else ""
            id = f"llamaindex:{type(llm).__name__}{suffix}"
        self.id: str = id

    def complete(self, prompt: str, *, system: str | None = None, json_schema: Mapping[str, Any] | None = None,
                 timeout: float | None = None) -> str:
        """The model's reply to ``prompt`` as text."""
        messages = _messages(prompt, system)
        reply = call_with_timeout(lambda: self.llm.chat(messages), timeout, f"LLM {self.id!r}")
        return reply.message.content or ""

    async def acomplete(self, prompt: str, *, system: str | None = None,
                        json_schema: Mapping[str, Any] | None = None, timeout: float | None = None) -> str:
        """Async twin of :meth:`complete` (the model's ``achat``; never blocks the event loop)."""
        try:
            reply = await asyncio.wait_for(self.llm.achat(_messages(prompt, system)), timeout)
        except TimeoutError:
            raise TimeoutError(f"LLM {self.id!r}: no answer within {timeout:g} s") from None
        return reply.message.content or ""

    def __repr__(self) -> str:
        return f"LlamaIndexLLM(id={self.id!r})"


def _messages(prompt: str, system: str | None) -> list[ChatMessage]:
    head = [ChatMessage(role=MessageRole.SYSTEM, content=system)] if system else []
    return [*head, ChatMessage(role=MessageRole.USER, content=prompt)]
