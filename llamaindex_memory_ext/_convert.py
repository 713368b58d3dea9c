"""Pure conversions shared by the faces: LlamaIndex messages <-> memory-ext turns, memories -> nodes and text.

Every decision that is not I/O lives here once; the sync and async paths of the faces only differ in which
engine method they await.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from llama_index.core.base.llms.types import ChatMessage, MessageRole, TextBlock, ToolCallBlock
from llama_index.core.schema import NodeWithScore, TextNode
from llama_index.core.vector_stores.types import FilterCondition, FilterOperator, MetadataFilter, MetadataFilters

from memory_ext import ActionState, RetrievedItem, SearchResult, Turn, derive_action_state
from memory_ext.errors import InvalidArgumentError, InvalidQueryError, InvalidTurnError
from memory_ext.retrieval.context import memory_line
from memory_ext.text import estimate_tokens

__all__ = [
    "EMPTY_MESSAGE",
    "MESSAGE_KEY",
    "LiveStep",
    "ToolInfo",
    "action_state_of",
    "drop_lines_for_tokens",
    "engine_filters",
    "item_to_node",
    "message_text",
    "message_to_turn",
    "messages_to_turns",
    "query_from_messages",
    "render_memory",
    "shown",
    "tool_info_of",
    "tool_specs_of",
    "turn_to_message",
    "warn_if_degraded",
]

#: Turn metadata key holding the exact LlamaIndex message (so tool-call messages come back intact).
MESSAGE_KEY = "llama_index_message"

_ROLE = {
    MessageRole.SYSTEM: "system", MessageRole.DEVELOPER: "system", MessageRole.USER: "user",
    MessageRole.ASSISTANT: "assistant", MessageRole.CHATBOT: "assistant", MessageRole.MODEL: "assistant",
    MessageRole.TOOL: "tool", MessageRole.FUNCTION: "tool",
}

#: The attachment that marks the turn of a message with no text and no tool calls (an empty model reply), kept
#: so a chat history loses no message: the engine stores a turn only if it has text, tool calls or attachments.
EMPTY_MESSAGE: dict[str, Any] = {"type": "empty_message"}

ToolInfo = Mapping[str, tuple[str, bool]]
"""Call id -> ``(tool name, is_error)``: what an agent's tool results said of each call."""

#: Node metadata the LLM does not need to read (ids, ranking details, duplicates, stored messages).
_HIDDEN_FROM_LLM = ["memory_id", "id", "score", "raw_score", "source", "date", "kind", "channels", "turn_ids",
                    "external_ids", "role", MESSAGE_KEY, "langchain_message", "langgraph_store"]

#: LlamaIndex filter operators -> the engine's metadata operators.
_OPERATORS = {FilterOperator.EQ: "$eq", FilterOperator.NE: "$ne", FilterOperator.GT: "$gt",
              FilterOperator.GTE: "$gte", FilterOperator.LT: "$lt", FilterOperator.LTE: "$lte",
              FilterOperator.IN: "$in", FilterOperator.NIN: "$nin"}


def _metadata_filter(filters: MetadataFilters, field: str) -> dict[str, Any]:
    parts: list[dict[str, Any]] = []
    for i, f in enumerate(filters.filters):
        if isinstance(f, MetadataFilters):
            parts.append(_metadata_filter(f, f"{field}.filters[{i}]"))
            continue
        op = _OPERATORS.get(FilterOperator(f.operator)) if isinstance(f, MetadataFilter) else "$eq"
        if op is None:
            raise InvalidQueryError(f"{field}.filters[{i}].operator", str(f.operator),
                                    "supported operators: " + ", ".join(o.value for o in _OPERATORS))
        value = list(f.value) if isinstance(f.value, (list, tuple)) else f.value
        parts.append({f.key: {op: value}})
    condition = FilterCondition(filters.condition or FilterCondition.AND)
    if condition not in (FilterCondition.AND, FilterCondition.OR):
        raise InvalidQueryError(f"{field}.condition", condition.value, "combine filters with 'and' or 'or'")
    if not parts:
        return {}
    return {"$and" if condition is FilterCondition.AND else "$or": parts}


def engine_filters(filters: Mapping[str, Any] | MetadataFilters | None) -> dict[str, Any] | None:
    """Engine search filters from a mapping of engine filter keys, or from LlamaIndex ``MetadataFilters``
    (a filter on the turns' metadata: the operators ``==``, ``!=``, ``>``, ``>=``, ``<``, ``<=``, ``in``,
    ``nin``, conditions ``and`` / ``or``, nested ``MetadataFilters``) as ``{"metadata": ...}``."""
    if filters is None:
        return None
    if isinstance(filters, MetadataFilters):
        metadata = _metadata_filter(filters, "filters")
        return {"metadata": metadata} if metadata else None
    if not isinstance(filters, Mapping):
        raise InvalidQueryError("filters", filters, "pass engine filters (a mapping such as {'speaker': 'Ana'}), "
                                                    "llama_index MetadataFilters, or None")
    return dict(filters)


def warn_if_degraded(result: SearchResult, logger: logging.Logger) -> None:
    """Log a warning naming the failed channels when a search was degraded (the other channels still answered)."""
    if result.channel_errors:
        logger.warning("memory search degraded for %r: %s", result.query,
                       "; ".join(f"{e.channel}: {e.error_type}: {e.message}" for e in result.channel_errors))


def item_to_node(item: RetrievedItem) -> NodeWithScore:
    """One retrieved memory as a ``NodeWithScore``; the node id is the memory id (unique per result)."""
    metadata: dict[str, Any] = {"memory_id": item.id, **item.face_metadata()}
    node = TextNode(id_=item.id, text=item.text, metadata=metadata,
                    excluded_llm_metadata_keys=list(_HIDDEN_FROM_LLM),
                    excluded_embed_metadata_keys=list(metadata))
    return NodeWithScore(node=node, score=item.score)


def render_memory(item: RetrievedItem) -> str:
    """One memory as one prompt line of quoted data, its source marked:
    ``- [2026-03-02 09:15 · user Maya] "I'm allergic to shellfish."``; a tool call as
    ``- [... · assistant tool call] → book_hotel(check_in="2026-04-14")``, a tool result as
    ``- [... · tool output book_hotel, error] "HTTP 422 …"`` (:func:`memory_ext.retrieval.context.memory_line`, the
    line the LangChain middleware's block uses): no memory text can close the block LlamaIndex wraps it in, start
    a line of its own or pass for an instruction."""
    return memory_line(item) or ""


def shown(item: RetrievedItem) -> bool:
    """Whether a memory has something to show: text, or tool calls (an empty model reply has neither)."""
    return bool(item.text.strip() or item.tool_calls)


def message_text(message: ChatMessage) -> str:
    """The text of a message (its text blocks joined), or ``""``."""
    return "\n".join(b.text for b in message.blocks if isinstance(b, TextBlock) and b.text).strip()


def _tool_calls(message: ChatMessage) -> tuple[dict[str, Any], ...]:
    calls = [{"id": b.tool_call_id, "name": b.tool_name, "arguments": b.tool_kwargs}
             for b in message.blocks if isinstance(b, ToolCallBlock)]
    if not calls:
        for raw in message.additional_kwargs.get("tool_calls") or ():
            calls.append(raw if isinstance(raw, dict) else {"repr": repr(raw)})
    return tuple(calls)


def _jsonable(message: ChatMessage) -> dict[str, Any] | None:
    """The message as JSON data, or None if something in it (a provider object) cannot be serialised."""
    try:
        return message.model_dump(mode="json")
    except (TypeError, ValueError):
        return None


def message_to_turn(message: ChatMessage, session_id: str | None = None, *, keep_message: bool = False,
                    tool_info: ToolInfo | None = None) -> Turn | None:
    """A LlamaIndex message as a memory-ext turn, or None for a message with nothing to keep.

    The session is ``session_id`` or the ``session_id`` LlamaIndex's memory put into ``additional_kwargs``.
    ``keep_message=True`` (a chat history) stores the exact message in the turn's metadata so
    :func:`turn_to_message` rebuilds it, and keeps every message: one with no text and no tool calls becomes a
    turn with empty content and the :data:`EMPTY_MESSAGE` attachment (so search has nothing to match); one that
    cannot be serialised (a provider object in ``additional_kwargs``) is an ``InvalidTurnError``, like
    LlamaIndex's own ``Memory`` raises for it. Without it (search-only archiving), empty messages are skipped
    and unserialisable parts dropped. A tool message's tool, call id and error flag become the turn's
    ``tool_name``, ``tool_call_id`` and ``is_error`` (see :func:`_tool_fields`; ``tool_info`` maps call ids to
    ``(tool name, is_error)``, as :func:`tool_info_of` reads an agent's ``ToolCallResult`` s).

    >>> message_to_turn(ChatMessage(role="assistant", content=""), keep_message=True).attachments
    ({'type': 'empty_message'},)
    >>> message_to_turn(ChatMessage(role="assistant", content="")) is None
    True
    """
    text = message_text(message)
    calls = _tool_calls(message)
    empty = not text and not calls
    if empty and not keep_message:
        return None
    metadata: dict[str, Any] = {}
    if keep_message:
        dumped = _jsonable(message)
        if dumped is None:
            raise InvalidTurnError("message.additional_kwargs", message.additional_kwargs,
                                   "a stored message holds JSON-serialisable data only: convert or drop the "
                                   "provider objects before putting the message")
        metadata[MESSAGE_KEY] = dumped
    speaker = message.additional_kwargs.get("name") if message.role == MessageRole.USER else None
    return Turn(role=_ROLE.get(message.role, "user"), content=text, tool_calls=calls, metadata=metadata,
                attachments=(dict(EMPTY_MESSAGE),) if empty else (),
                speaker=speaker if isinstance(speaker, str) else None,
                session_id=session_id or message.additional_kwargs.get("session_id"),
                **_tool_fields(message, tool_info))


def _tool_fields(message: ChatMessage, tool_info: ToolInfo | None) -> dict[str, Any]:
    """A tool message's ``tool_name``, ``tool_call_id`` and ``is_error``: from its ``additional_kwargs``
    (``tool_call_id``, ``name`` / ``tool_name``, ``is_error``), completed by ``tool_info`` (what the agent's
    ``ToolCallResult`` s said of that call: FunctionAgent's tool messages carry only the call id)."""
    if message.role not in (MessageRole.TOOL, MessageRole.FUNCTION):
        return {}
    kwargs = message.additional_kwargs

    def text(key: str) -> str | None:
        value = kwargs.get(key)
        return value if isinstance(value, str) and value.strip() else None

    call_id = text("tool_call_id")
    name, error = text("tool_name") or text("name"), kwargs.get("is_error") is True
    if call_id is not None and tool_info and call_id in tool_info:
        known_name, known_error = tool_info[call_id]
        name, error = name or known_name, error or known_error
    return {"tool_name": name, "tool_call_id": call_id, "is_error": error}


def messages_to_turns(messages: Iterable[ChatMessage], session_id: str | None = None, *,
                      keep_message: bool = False, tool_info: ToolInfo | None = None) -> list[Turn]:
    """:func:`message_to_turn` over messages (without ``keep_message``, dropping the empty ones)."""
    turns = (message_to_turn(m, session_id, keep_message=keep_message, tool_info=tool_info) for m in messages)
    return [t for t in turns if t is not None]


def tool_info_of(results: Iterable[Any]) -> dict[str, tuple[str, bool]]:
    """``{call id: (tool name, is_error)}`` of an agent's ``ToolCallResult`` s (``tool_id``, ``tool_name``,
    ``tool_output.is_error``)."""
    out: dict[str, tuple[str, bool]] = {}
    for r in results:
        call_id, name = getattr(r, "tool_id", None), getattr(r, "tool_name", None)
        if isinstance(call_id, str) and call_id and isinstance(name, str):
            out[call_id] = (name, bool(getattr(getattr(r, "tool_output", None), "is_error", False)))
    return out


def tool_specs_of(tools: Iterable[Any] | None) -> list[dict[str, Any]] | None:
    """JSON-schema specs of LlamaIndex tools (``tool.metadata.to_openai_tool()``; a function as its
    ``FunctionTool``'s; a mapping as it is)."""
    if tools is None:
        return None
    specs = []
    for i, t in enumerate(tools):
        if isinstance(t, Mapping):
            specs.append(dict(t))
        elif hasattr(getattr(t, "metadata", None), "to_openai_tool"):
            specs.append(t.metadata.to_openai_tool())
        elif callable(t):  # a function, as agents take them
            from llama_index.core.tools import FunctionTool

            specs.append(FunctionTool.from_defaults(t).metadata.to_openai_tool())
        else:
            raise InvalidArgumentError(f"tools[{i}]", t, "pass LlamaIndex tools, functions or JSON-schema tool specs")
    return specs


def action_state_of(messages: Sequence[ChatMessage], tools: Iterable[Any] | None = None, *,
                    tool_info: ToolInfo | None = None, token_budget: int | None = None) -> ActionState:
    """The :class:`~memory_ext.ActionState` of an agent's messages: :func:`messages_to_turns`, then
    :func:`memory_ext.derive_action_state` (the one derivation; system messages are left out)."""
    turns = messages_to_turns([m for m in messages if m.role not in (MessageRole.SYSTEM, MessageRole.DEVELOPER)],
                              tool_info=tool_info)
    return derive_action_state(turns, tool_specs_of(tools), token_budget=token_budget)


def turn_to_message(turn: Turn) -> ChatMessage:
    """A stored turn as a LlamaIndex message: the exact original if it was kept, else rebuilt from the turn."""
    raw = turn.metadata.get(MESSAGE_KEY)
    if isinstance(raw, dict):
        return ChatMessage.model_validate(raw)
    kwargs: dict[str, Any] = {}
    if turn.role == "tool" and turn.tool_call_id:
        kwargs["tool_call_id"] = turn.tool_call_id
    return ChatMessage(role=str(turn.role), content=turn.content, additional_kwargs=kwargs)


def query_from_messages(messages: Sequence[ChatMessage] | None, last_n: int) -> str:
    """The search query for a conversation: the text of the latest user message, plus the ``last_n - 1``
    messages before it (for context). Empty if there is no text."""
    if not messages:
        return ""
    texts = [(m.role, message_text(m)) for m in messages if m.role != MessageRole.SYSTEM]
    texts = [(r, t) for r, t in texts if t]
    last_user = max((i for i, (r, _) in enumerate(texts) if r == MessageRole.USER), default=len(texts) - 1)
    window = texts[max(0, last_user - last_n + 1): last_user + 1]
    return "\n".join(t for _, t in window)


def drop_lines_for_tokens(lines: list[str], tokens_to_drop: int) -> list[str]:
    """Drop lines from the end (the lowest-ranked memories) until about ``tokens_to_drop`` tokens are gone."""
    kept = list(lines)
    while kept and tokens_to_drop > 0:
        tokens_to_drop -= estimate_tokens(kept.pop()) + 1
    return kept


#: How many of the latest turns the action state is derived from.
STATE_WINDOW = 20


class LiveStep:
    """What a memory knows of the agent's run in progress: its messages not archived yet (tool calls and
    results), what the tool results said of each call (:func:`tool_info_of`) and the agent's tools; the action
    state of a session's turns with them. Shared by :class:`~llamaindex_memory_ext.MemoryEngineMemory`,
    :class:`~llamaindex_memory_ext.MemoryBlock` and :class:`~llamaindex_memory_ext.ArchivingMemory`."""

    def __init__(self) -> None:
        self.messages: list[ChatMessage] = []
        self.tool_info: dict[str, tuple[str, bool]] = {}
        self.tools: list[Any] | None = None

    def observe(self, messages: Sequence[ChatMessage], results: Iterable[Any] = (),
                tools: Sequence[Any] | None = None) -> None:
        self.messages = list(messages)
        self.tool_info.update(tool_info_of(results))
        if tools is not None:
            self.tools = list(tools)

    def clear(self) -> None:
        """The run's messages were archived: nothing is in progress (the tool info stays for late puts)."""
        self.messages = []

    def action_state(self, turns: Sequence[Turn], tools: Sequence[Any] | None = None) -> ActionState | None:
        """The action state of ``turns`` followed by the step's messages, or None when the agent has neither
        tools nor tool calls (a plain chat: the search is the question's alone)."""
        live = messages_to_turns(self.messages, tool_info=self.tool_info)
        known = self.tools if self.tools is not None else tools
        window = [*turns, *live][-STATE_WINDOW:]
        if not known and not any(t.tool_calls or t.role == "tool" for t in window):
            return None
        return derive_action_state(window, tool_specs_of(known))
