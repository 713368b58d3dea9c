"""``MemoryChatMessageHistory``: a LangChain chat history whose every message is archived as a memory turn."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from langchain_core.chat_history import BaseChatMessageHistory
from langchain_core.messages import BaseMessage, message_to_dict, messages_from_dict

from memory_ext import EngineLike, Namespace, Turn
from memory_ext.errors import InvalidTurnError

__all__ = ["EMPTY_MESSAGE", "MemoryChatMessageHistory", "message_to_turn", "turn_to_message"]

#: Turn metadata key holding the serialised LangChain message (``message_to_dict``), so reading back is lossless.
MESSAGE_KEY = "langchain_message"

#: The attachment that marks the turn of a message with no text and no tool calls (an empty model reply).
#: The engine stores a turn only if it has text, tool calls or attachments; this marker keeps such a message in
#: the history (in order, with its metadata) while giving search nothing to match.
EMPTY_MESSAGE: dict[str, Any] = {"type": "empty_message"}

_ROLE_BY_TYPE = {"human": "user", "ai": "assistant", "system": "system", "tool": "tool", "function": "tool",
                 "developer": "system"}


def message_to_turn(message: BaseMessage, session_id: str | None = None) -> Turn:
    """A LangChain message as a memory turn.

    Role from the message type (human -> user, ai -> assistant, system/developer -> system, tool/function ->
    tool; a ``ChatMessage`` keeps its role when it is one of ours, else it is stored as ``user``); content = the
    message text; speaker = ``message.name``; external id = ``message.id``; tool calls as ``{id, name, args}``;
    a ``ToolMessage``'s tool (``name``), call id and ``status == "error"`` as the turn's ``tool_name``,
    ``tool_call_id`` and ``is_error``; the full message serialised in ``metadata["langchain_message"]``. A
    message with no text and no tool calls (a model that answered ``""``) is kept as a turn with empty content and
    the :data:`EMPTY_MESSAGE` attachment.

    A message that cannot be stored exactly (a value in ``additional_kwargs`` or ``response_metadata`` that is
    not JSON) is an :class:`~memory_ext.errors.InvalidTurnError`, raised before anything is written.

    >>> from langchain_core.messages import AIMessage, ToolMessage
    >>> message_to_turn(AIMessage("")).attachments
    ({'type': 'empty_message'},)
    >>> failed = message_to_turn(ToolMessage("HTTP 422", name="book_hotel", tool_call_id="c1", status="error"))
    >>> failed.tool_name, failed.tool_call_id, failed.is_error
    ('book_hotel', 'c1', True)
    """
    role = _ROLE_BY_TYPE.get(message.type)
    if role is None:
        chat_role = str(getattr(message, "role", "user")).lower()
        role = chat_role if chat_role in ("user", "assistant", "system", "tool") else "user"
    tool_calls = tuple({"id": c.get("id"), "name": c["name"], "args": c.get("args", {})}
                       for c in getattr(message, "tool_calls", None) or ())
    stored = message_to_dict(message)
    for field, value in stored["data"].items():
        try:
            json.dumps(value)
        except (TypeError, ValueError) as exc:
            raise InvalidTurnError(f"{type(message).__name__}.{field}", value,
                                   f"a stored message holds JSON data only ({exc}); convert the value (e.g. a "
                                   "datetime to an ISO string) before adding the message") from None
    text = message.text
    empty = not text.strip() and not tool_calls
    tool: dict[str, Any] = {}
    if role == "tool":  # a ToolMessage: its tool, the call it answers and whether it is an error are fields
        call_id = getattr(message, "tool_call_id", None)
        tool = {"tool_name": message.name or None, "tool_call_id": str(call_id) if call_id else None,
                "is_error": getattr(message, "status", None) == "error"}
    return Turn(role=role, content=text, speaker=message.name, session_id=session_id,
                external_id=message.id, tool_calls=tool_calls, attachments=(dict(EMPTY_MESSAGE),) if empty else (),
                metadata={MESSAGE_KEY: stored}, **tool)


def turn_to_message(turn: Turn) -> BaseMessage:
    """The LangChain message of a turn (exact when it was written by :func:`message_to_turn`)."""
    stored = turn.metadata.get(MESSAGE_KEY)
    if isinstance(stored, dict):
        return messages_from_dict([stored])[0]
    # a turn written through the engine directly
    data: dict[str, Any] = {"content": turn.content, "name": turn.speaker, "id": turn.external_id}
    kind = {"user": "human", "assistant": "ai", "system": "system"}.get(str(turn.role))
    if kind is None and turn.tool_call_id:  # a tool turn written by another face: a ToolMessage
        return messages_from_dict([{"type": "tool", "data": {**data, "name": turn.tool_name or turn.speaker,
                                                             "tool_call_id": turn.tool_call_id,
                                                             "status": "error" if turn.is_error else "success"}}])[0]
    if kind is None:  # tool turn without a tool_call_id: keep it as a generic chat message
        return messages_from_dict([{"type": "chat", "data": {**data, "role": "tool"}}])[0]
    if kind == "ai" and turn.tool_calls:
        data["tool_calls"] = [{"id": c.get("id"), "name": c.get("name", ""), "args": c.get("args", {})}
                              for c in turn.tool_calls]
    return messages_from_dict([{"type": kind, "data": data}])[0]


class MemoryChatMessageHistory(BaseChatMessageHistory):
    """Chat history of one session, kept in a memory-ext store (so it is searchable by ``MemoryRetriever``).

    .. note::
        LangChain has deprecated ``BaseChatMessageHistory`` / ``RunnableWithMessageHistory`` (removal planned
        for langchain-core 2.0). New code should keep conversation state in LangGraph (a checkpointer) and
        long-term memories in :class:`langchain_memory_ext.MemoryStore`; this class serves existing chains.

    Setup:
        ``pip install "memory-ext[langchain]"``

    Instantiate:
        >>> import tempfile
        >>> from langchain_core.messages import AIMessage, HumanMessage
        >>> from memory_ext import MemoryEngine
        >>> from langchain_memory_ext import MemoryChatMessageHistory, MemoryRetriever
        >>> engine = MemoryEngine.open(tempfile.mkdtemp(), embedder="hashing")
        >>> history = MemoryChatMessageHistory(engine=engine, user_id="ana", session_id="chat-1")

    Add (one transaction for the whole batch):
        >>> history.add_messages([HumanMessage("My sister Lena lives in Porto."), AIMessage("Noted!")])
        >>> [m.type for m in history.messages]
        ['human', 'ai']

    The messages are memories:
        >>> MemoryRetriever(engine=engine, user_id="ana", k=1).invoke("where does Lena live?")[0].page_content
        'My sister Lena lives in Porto.'

    Clear forgets this session only (its turns leave the search index too):
        >>> history.clear()
        >>> history.messages
        []
        >>> engine.close()

    Async: ``aget_messages``, ``aadd_messages`` and ``aclear`` run the engine in a worker thread.

    Each message becomes a turn (see :func:`message_to_turn`): role, text, name as speaker, id as external id,
    tool calls, the time it was added, and the full serialised message, which ``messages`` returns unchanged.
    """

    def __init__(self, *, engine: EngineLike, user_id: str, session_id: str, agent_id: str | None = None) -> None:
        self.engine = engine
        self.namespace = Namespace(user_id, agent_id, session_id)  # validates the ids now, not at first use
        if self.namespace.session_id is None:
            from memory_ext.errors import InvalidNamespaceError

            raise InvalidNamespaceError("session_id", session_id, "a chat history needs a session id")
        self.session_id: str = self.namespace.session_id

    def _turns(self, messages: Sequence[BaseMessage]) -> list[Turn]:
        return [message_to_turn(m, self.session_id) for m in messages]

    @property
    def messages(self) -> list[BaseMessage]:  # type: ignore[override]
        """The session's messages, oldest first."""
        return [turn_to_message(t) for t in self.engine.get_turns(self.namespace)]

    async def aget_messages(self) -> list[BaseMessage]:
        """Async twin of :attr:`messages`."""
        return [turn_to_message(t) for t in await self.engine.aget_turns(self.namespace)]

    def add_messages(self, messages: Sequence[BaseMessage]) -> None:
        """Archive messages as turns, all or nothing."""
        turns = self._turns(messages)
        if turns:
            self.engine.add_turns(turns, self.namespace)

    async def aadd_messages(self, messages: Sequence[BaseMessage]) -> None:
        """Async twin of :meth:`add_messages`."""
        turns = self._turns(messages)
        if turns:
            await self.engine.aadd_turns(turns, self.namespace)

    def clear(self) -> None:
        """Forget this session (its turns and derived memories); other sessions are untouched."""
        self.engine.forget(self.namespace)

    async def aclear(self) -> None:
        """Async twin of :meth:`clear`."""
        await self.engine.aforget(self.namespace)
