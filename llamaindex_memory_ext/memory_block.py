"""``MemoryBlock``: long-term memories as a block of LlamaIndex's ``Memory``; ``ArchivingMemory``: archive every turn.

LlamaIndex's ``Memory`` hands messages to its blocks only when its short-term buffer overflows (about 21k
tokens by default), so with a plain ``Memory`` a short chat never reaches the engine. ``ArchivingMemory`` is a
``Memory`` that also hands every message to its ``MemoryBlock`` s as soon as it is put — use it unless you
want only overflowed messages archived.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Literal

from ._deps import require

require("llama_index.core", "llamaindex_memory_ext.MemoryBlock")

from llama_index.core.base.llms.types import ChatMessage  # noqa: E402
from llama_index.core.bridge.pydantic import Field, PrivateAttr, model_validator  # noqa: E402
from llama_index.core.memory import Memory  # noqa: E402
from llama_index.core.memory.memory import BaseMemoryBlock  # noqa: E402

from memory_ext import EngineLike, Namespace  # noqa: E402

from ._convert import (  # noqa: E402
    LiveStep,
    drop_lines_for_tokens,
    message_text,
    messages_to_turns,
    query_from_messages,
    render_memory,
    shown,
    warn_if_degraded,
)

__all__ = ["ArchivingMemory", "MemoryBlock"]

logger = logging.getLogger(__name__)


class MemoryBlock(BaseMemoryBlock[str]):
    """Long-term memories of one user, searched with the latest messages, as a block of LlamaIndex's ``Memory``.

    ``_aget`` searches the engine with the text of the latest user message (and the ``query_messages - 1``
    messages before it) and renders the best ``similarity_top_k`` memories as lines of quoted data
    (``- [2026-03-02 09:15 · user Maya] "…"``); memories whose text is already in the chat history are left
    out. ``scope="user"`` (default) searches every session of ``(user_id, agent_id)``; ``scope="session"``
    only the session ``Memory`` passes. ``_aput`` archives messages as turns of the session ``Memory`` passes.

    In an agent (:class:`~llamaindex_memory_ext.MemoryFunctionAgent` with an :class:`ArchivingMemory`), the
    search follows what the agent is doing: the :class:`~memory_ext.ActionState` derived from the chat history
    and the run's tool calls and results (passed by ``ArchivingMemory`` as ``action_messages``), with the
    required parameters of ``tools`` as missing slots.

    ``priority=0`` (default): LlamaIndex never truncates the block. With a priority > 0, ``atruncate`` drops the
    lowest-ranked memories instead of the whole block.

    Setup:
        ``pip install "memory-ext[llamaindex]"``

    Instantiate (``ArchivingMemory`` archives every turn as it is put; a plain ``Memory`` only on overflow):
        >>> import asyncio, tempfile
        >>> from llama_index.core.llms import ChatMessage
        >>> from memory_ext import MemoryEngine
        >>> from llamaindex_memory_ext import ArchivingMemory, MemoryBlock
        >>> engine = MemoryEngine.open(tempfile.mkdtemp(), embedder="hashing")
        >>> block = MemoryBlock(engine=engine, user_id="maya")
        >>> memory = ArchivingMemory.from_defaults(session_id="s1", memory_blocks=[block])

    Add (every message is archived as a turn of session ``s1``):
        >>> memory.put_messages([ChatMessage(role="user", content="I'm allergic to shellfish."),
        ...                      ChatMessage(role="assistant", content="Noted.")])
        >>> [t.content for t in engine.get_turns("maya")]
        ["I'm allergic to shellfish.", 'Noted.']

    Search (a new session: the memory comes back in the system message):
        >>> later = ArchivingMemory.from_defaults(session_id="s2", memory_blocks=[block])
        >>> messages = later.get(input="Any dinner ideas? Remember what I can't eat.")
        >>> "shellfish" in messages[0].content
        True
        >>> engine.close()
    """

    name: str = Field(default="long_term_memory", description="The name of the memory block.")
    description: str | None = Field(default="Relevant memories from earlier conversations with this user.")
    priority: int = Field(default=0, description="0 = never truncated; > 0: truncated (shortened) in that order.")
    engine: EngineLike = Field(description="The memory-ext engine to search and archive into.", exclude=True)
    user_id: str = Field(description="The user whose memories are searched and written.")
    agent_id: str | None = Field(default=None, description="Optional agent partition of the user's memories.")
    similarity_top_k: int = Field(default=5, gt=0, description="How many memories to render.")
    query_messages: int = Field(default=1, gt=0, description="Messages (up to the latest user one) in the query.")
    scope: Literal["user", "session"] = Field(default="user",
                                              description="Search every session, or only Memory's session.")
    filters: dict[str, Any] | None = Field(default=None, description="Engine search filters.")
    tools: list[Any] | None = Field(default=None, exclude=True,
                                    description="The agent's tools (or JSON-schema specs): their required "
                                                "parameters are the action state's missing slots.")

    def __init__(self, **data: Any) -> None:
        Namespace(data.get("user_id"), data.get("agent_id"))  # a bad id raises memory_ext's typed error here
        super().__init__(**data)

    def _namespace(self, session_id: str | None = None) -> Namespace:
        return Namespace(self.user_id, self.agent_id, session_id)

    async def _aget(self, messages: list[ChatMessage] | None = None, **block_kwargs: Any) -> str:
        """Search with the latest messages; the rendered memories, or ``""``."""
        query = query_from_messages(messages, self.query_messages)
        if not query:
            return ""
        session_id = block_kwargs.get("session_id") if self.scope == "session" else None
        step = block_kwargs.get("action_step")
        live = step if isinstance(step, LiveStep) else LiveStep()
        state = live.action_state(messages_to_turns(messages or ()), self.tools)
        visible = {message_text(m) for m in [*(messages or ()), *live.messages]}
        k = min(self.similarity_top_k + len(visible), self.engine.config.limits.max_k)
        result = await self.engine.asearch(query, self._namespace(session_id), k=k, filters=self.filters,
                                           action_state=state)
        warn_if_degraded(result, logger)
        items = [it for it in result.items if shown(it) and (not it.text.strip() or it.text.strip() not in visible)
                 ][: self.similarity_top_k]
        return "\n".join(render_memory(it) for it in items)

    async def _aput(self, messages: list[ChatMessage]) -> None:
        """Archive messages as turns (of the session ``Memory`` put in ``additional_kwargs``)."""
        turns = messages_to_turns(messages)
        if turns:
            await self.engine.aadd_turns(turns, self._namespace())

    async def atruncate(self, content: str, tokens_to_truncate: int) -> str | None:
        """Drop the lowest-ranked memory lines until about ``tokens_to_truncate`` tokens are gone."""
        kept = drop_lines_for_tokens(content.splitlines(), tokens_to_truncate)
        return "\n".join(kept) or None


class ArchivingMemory(Memory):
    """A LlamaIndex ``Memory`` that archives every message into its ``MemoryBlock`` s as soon as it is put.

    Everything else is ``Memory``: the short-term chat history, token limits, other blocks. The
    ``MemoryBlock`` s it holds are copies with ``accept_short_term_memory=False`` (the caller's blocks are not
    changed), so messages that later overflow the short-term buffer are not archived twice. ``set``/``aset``
    (replacing the history) archives nothing. Build it like ``Memory``: ``ArchivingMemory.from_defaults(...)``.
    """

    @model_validator(mode="before")
    @classmethod
    def _live_blocks(cls, values: Any) -> Any:
        if isinstance(values, dict) and values.get("memory_blocks"):
            values = dict(values)
            values["memory_blocks"] = [
                b.model_copy(update={"accept_short_term_memory": False}) if isinstance(b, MemoryBlock) else b
                for b in values["memory_blocks"]]
        return values

    _step: LiveStep = PrivateAttr(default_factory=LiveStep)

    @classmethod
    def class_name(cls) -> str:
        return "ArchivingMemory"

    def observe_step(self, messages: list[ChatMessage], results: list[Any] | tuple[Any, ...] = (),
                     tools: list[Any] | None = None) -> None:
        """Show the memory's blocks the run's in-progress messages (tool calls and results, not archived yet)
        and the ``ToolCallResult`` s: the next ``get`` searches with the action state they give.
        :class:`~llamaindex_memory_ext.MemoryFunctionAgent` calls it after each tool round."""
        self._step.observe(messages, results, tools)

    async def aobserve_step(self, messages: list[ChatMessage], results: list[Any] | tuple[Any, ...] = (),
                            tools: list[Any] | None = None) -> None:
        """:meth:`observe_step` (nothing to await: it only records the step)."""
        self._step.observe(messages, results, tools)

    async def aget(self, input: str | ChatMessage | None = None, **block_kwargs: Any) -> list[ChatMessage]:
        """``Memory.aget``, its blocks given the run's step (``action_step``)."""
        return await super().aget(input=input, action_step=self._step, **block_kwargs)

    async def _archive(self, messages: list[ChatMessage]) -> None:
        # copies: BaseMemoryBlock.aput writes the session id into each message's additional_kwargs; a tool
        # message's copy gets the tool name and error flag its ToolCallResult gave (the original is the LLM's)
        info = self._step.tool_info
        copies = []
        for m in messages:
            extra = dict(m.additional_kwargs)
            call_id = extra.get("tool_call_id")
            if m.role.value in ("tool", "function") and isinstance(call_id, str) and call_id in info:
                extra.setdefault("tool_name", info[call_id][0])
                extra.setdefault("is_error", info[call_id][1])
            copies.append(m.model_copy(update={"additional_kwargs": extra}))
        self._step.clear()
        await asyncio.gather(*(b.aput(copies, session_id=self.session_id)
                               for b in self.memory_blocks if isinstance(b, MemoryBlock)))

    async def aput(self, message: ChatMessage) -> None:
        await super().aput(message)
        await self._archive([message])

    async def aput_messages(self, messages: list[ChatMessage]) -> None:
        await super().aput_messages(messages)
        await self._archive(list(messages))
