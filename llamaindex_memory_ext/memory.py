"""``MemoryEngineMemory``: a LlamaIndex agent memory kept entirely in a memory-ext store."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Sequence
from typing import Any, Literal

from ._deps import require

require("llama_index.core", "llamaindex_memory_ext.MemoryEngineMemory")

from llama_index.core.base.llms.types import ChatMessage, MessageRole, TextBlock  # noqa: E402
from llama_index.core.bridge.pydantic import ConfigDict, Field, PrivateAttr  # noqa: E402
from llama_index.core.memory.types import BaseMemory  # noqa: E402

from memory_ext import ActionState, EngineLike, Namespace, RetrievedItem, SearchResult, Turn  # noqa: E402

from ._convert import (  # noqa: E402
    LiveStep,
    message_text,
    messages_to_turns,
    query_from_messages,
    render_memory,
    shown,
    turn_to_message,
    warn_if_degraded,
)

__all__ = ["MemoryEngineMemory"]

logger = logging.getLogger(__name__)

DEFAULT_HEADER = "Relevant memories from earlier conversations with this user (oldest sessions included):"


def _new_session_id() -> str:
    return f"session-{uuid.uuid4().hex}"


class MemoryEngineMemory(BaseMemory):
    """An agent memory (``agent.run(..., memory=...)``) whose every message is archived in a memory-ext store.

    ``get``/``aget`` return the session's chat history (the stored turns of ``session_id``, oldest first; the
    last ``history_limit`` if set) with, first, one system message listing the ``similarity_top_k`` memories
    most relevant to the input (or to the latest user message), searched over *every* session of
    ``(user_id, agent_id)`` (``insert_method="user"``: prepended to the latest user message instead).
    Memories already in the returned history are left out. ``put``/``aput`` archive
    each message as a turn (the exact message is kept in the turn's metadata, so tool calls come back intact; an
    empty message is kept too, and ``get_all`` returns what LlamaIndex's ``Memory`` would);
    ``set`` replaces the session's stored turns; ``reset`` forgets the session. The async methods use the
    engine's async twins and never block the event loop.

    **Agents.** With :class:`~llamaindex_memory_ext.MemoryFunctionAgent` (a ``FunctionAgent`` that shows its
    memory each tool call and result as they happen, :meth:`aobserve_step`), the search before each model call
    follows what the agent is doing: the :class:`~memory_ext.ActionState` derived from the session's turns and
    the run's tool calls (the last call with its arguments, a failure, missing parameters of ``tools``); the
    archived tool turns keep the tool name and the error flag.

    ``ReActAgent`` (llama-index-core 0.14) discards the first system message memory returns: give the agent a
    ``system_prompt`` (its own message then comes first) or use ``insert_method="user"``.

    Setup:
        ``pip install "memory-ext[llamaindex]"``

    Use with an agent (any function-calling LLM):
        >>> import tempfile
        >>> from memory_ext import MemoryEngine
        >>> from llama_index.core.llms import ChatMessage
        >>> from llamaindex_memory_ext import MemoryEngineMemory
        >>> engine = MemoryEngine.open(tempfile.mkdtemp(), embedder="hashing")
        >>> monday = MemoryEngineMemory(engine=engine, user_id="maya", session_id="monday")
        >>> # await FunctionAgent(llm=llm, tools=[...]).run("I'm allergic to shellfish.", memory=monday)
        >>> monday.put(ChatMessage(role="user", content="I'm allergic to shellfish."))
        >>> friday = MemoryEngineMemory(engine=engine, user_id="maya", session_id="friday")
        >>> messages = friday.get(input="Book me a seafood dinner; what should I avoid?")
        >>> messages[0].role.value, "shellfish" in messages[0].content
        ('system', True)
        >>> engine.close()
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    engine: EngineLike = Field(description="The memory-ext engine that stores the history.", exclude=True)
    user_id: str = Field(description="The user whose memories are kept.")
    agent_id: str | None = Field(default=None, description="Optional agent partition of the user's memories.")
    session_id: str = Field(default_factory=_new_session_id, description="This conversation's id.")
    similarity_top_k: int = Field(default=4, ge=0, description="Long-term memories injected per call (0: none).")
    history_limit: int | None = Field(default=None, gt=0, description="Return only the last N messages.")
    memory_header: str = Field(default=DEFAULT_HEADER, description="First line of the injected system message.")
    filters: dict[str, Any] | None = Field(default=None, description="Engine search filters.")
    insert_method: Literal["system", "user"] = Field(
        default="system", description="Memories as a first system message, or prepended to the latest user message.")
    tools: list[Any] | None = Field(default=None, exclude=True,
                                    description="The agent's tools (or JSON-schema specs): their required "
                                                "parameters are the action state's missing slots.")
    _step: LiveStep = PrivateAttr(default_factory=LiveStep)

    def __init__(self, **data: Any) -> None:
        Namespace(data.get("user_id"), data.get("agent_id"), data.get("session_id"))  # typed error for bad ids
        super().__init__(**data)

    @classmethod
    def class_name(cls) -> str:
        return "MemoryEngineMemory"

    @classmethod
    def from_defaults(cls, **kwargs: Any) -> MemoryEngineMemory:
        """``MemoryEngineMemory(**kwargs)``; needs ``engine`` and ``user_id``."""
        return cls(**kwargs)

    # -- pure pieces, shared by the sync and async paths -------------------------------------------------------
    @property
    def _session(self) -> Namespace:
        return Namespace(self.user_id, self.agent_id, self.session_id)

    @property
    def _user(self) -> Namespace:
        return Namespace(self.user_id, self.agent_id)

    def _window(self, turns: list[Turn]) -> list[Turn]:
        return turns[-self.history_limit:] if self.history_limit else turns

    def _query(self, input: str | ChatMessage | None, history: Sequence[ChatMessage]) -> str:
        if isinstance(input, ChatMessage):
            input = message_text(input)
        if isinstance(input, str) and input.strip():
            return input
        return query_from_messages(history, 1) if self.similarity_top_k else ""

    def _k(self, visible: int) -> int:
        return min(self.similarity_top_k + visible, self.engine.config.limits.max_k)

    def _compose(self, turns: list[Turn], result: SearchResult | None) -> list[ChatMessage]:
        history = [turn_to_message(t) for t in turns]
        if result is None:
            return history
        warn_if_degraded(result, logger)
        visible = {t.id for t in turns}
        items: list[RetrievedItem] = [it for it in result.items if shown(it)  # (an empty reply: nothing)
                                      and not (it.turn_ids and set(it.turn_ids) <= visible)][: self.similarity_top_k]
        if not items:
            return history
        text = "\n".join([self.memory_header, *(render_memory(it) for it in items)])
        last_user = next((i for i in range(len(history) - 1, -1, -1) if history[i].role == MessageRole.USER), None)
        if self.insert_method == "user" and last_user is not None:
            message = history[last_user]
            history[last_user] = message.model_copy(update={"blocks": [TextBlock(text=text + "\n\n"), *message.blocks]})
            return history
        return [ChatMessage(role=MessageRole.SYSTEM, content=text), *history]

    def _turns(self, messages: Sequence[ChatMessage]) -> list[Turn]:
        return messages_to_turns(messages, self.session_id, keep_message=True, tool_info=self._step.tool_info)

    def _state(self, turns: list[Turn], input: str | ChatMessage | None) -> ActionState | None:
        """The action state of the session's turns, the run's step and ``input`` (the request, when the agent
        has not put it yet)."""
        text = message_text(input) if isinstance(input, ChatMessage) else input
        asked = [Turn(role="user", content=text)] if isinstance(text, str) and text.strip() and not any(
            t.role == "user" and t.content == text for t in turns[-3:]) else []
        return self._step.action_state([*turns, *asked], self.tools)

    def observe_step(self, messages: Sequence[ChatMessage], results: Sequence[Any] = (),
                     tools: Sequence[Any] | None = None) -> None:
        """Show the memory the run's in-progress messages (the agent's tool calls and their results, not archived
        yet) and the ``ToolCallResult`` s (tool names, error flags): the next :meth:`get` searches with the
        action state they give. :class:`~llamaindex_memory_ext.MemoryFunctionAgent` calls it after each tool
        round; the messages are archived when the agent puts them (``finalize``)."""
        self._step.observe(messages, results, tools)

    async def aobserve_step(self, messages: Sequence[ChatMessage], results: Sequence[Any] = (),
                            tools: Sequence[Any] | None = None) -> None:
        """:meth:`observe_step` (nothing to await: it only records the step)."""
        self._step.observe(messages, results, tools)

    # -- sync --------------------------------------------------------------------------------------------------
    def get(self, input: str | ChatMessage | None = None, **kwargs: Any) -> list[ChatMessage]:
        """The session's history, preceded by a system message of relevant long-term memories."""
        turns = self._window(self.engine.get_turns(self._session))
        query = self._query(input, [turn_to_message(t) for t in turns])
        result = (self.engine.search(query, self._user, k=self._k(len(turns)), filters=self.filters,
                                     action_state=self._state(turns, input)) if query else None)
        return self._compose(turns, result)

    def get_all(self) -> list[ChatMessage]:
        """Every stored message of the session, oldest first, without memories."""
        return [turn_to_message(t) for t in self.engine.get_turns(self._session)]

    def put(self, message: ChatMessage) -> None:
        """Archive one message as a turn of the session."""
        self.put_messages([message])

    def put_messages(self, messages: list[ChatMessage]) -> None:
        """Archive messages as turns of the session (one transaction)."""
        turns = self._turns(messages)
        self._step.clear()  # the run's messages are archived now
        if turns:
            self.engine.add_turns(turns, self._session)

    def set(self, messages: list[ChatMessage]) -> None:
        """Replace the session's stored turns with ``messages`` (checked first: a bad message changes nothing)."""
        turns = self._turns(messages)
        self.engine.forget(self._session)
        if turns:
            self.engine.add_turns(turns, self._session)

    def reset(self) -> None:
        """Forget the session (other sessions' memories stay)."""
        self.engine.forget(self._session)

    # -- async (the engine's twins run in its worker threads) --------------------------------------------------
    async def aget(
        self, input: str | ChatMessage | None = None, **kwargs: Any
    ) -> list[ChatMessage]:
        turns = self._window(await self.engine.aget_turns(self._session))
        query = self._query(input, [turn_to_message(t) for t in turns])
        result = (await self.engine.asearch(query, self._user, k=self._k(len(turns)), filters=self.filters,
                                            action_state=self._state(turns, input)) if query else None)
        return self._compose(turns, result)

    async def aget_all(self) -> list[ChatMessage]:
        return [turn_to_message(t) for t in await self.engine.aget_turns(self._session)]

    async def aput(self, message: ChatMessage) -> None:
        await self.aput_messages([message])

    async def aput_messages(self, messages: list[ChatMessage]) -> None:
        turns = self._turns(messages)
        self._step.clear()
        if turns:
            await self.engine.aadd_turns(turns, self._session)

    async def aset(self, messages: list[ChatMessage]) -> None:
        turns = self._turns(messages)
        await self.engine.aforget(self._session)
        if turns:
            await self.engine.aadd_turns(turns, self._session)

    async def areset(self) -> None:
        await self.engine.aforget(self._session)
