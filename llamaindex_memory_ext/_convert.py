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

from memory_ext import RetrievedItem, SearchResult, Turn
from memory_ext.errors import InvalidQueryError, InvalidTurnError
from memory_ext.text import estimate_tokens

__all__ = [
    "EMPTY_MESSAGE",
    "MESSAGE_KEY",
    "drop_lines_for_tokens",
    "engine_filters",
    "item_to_node",
    "message_text",
    "message_to_turn",
    "messages_to_turns",
    "query_from_messages",
    "render_memory",
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
    """One memory as one prompt line: ``- [2026-03-02 09:15] Maya (user): I'm allergic to shellfish.``"""
    when = f"[{item.timestamp:%Y-%m-%d %H:%M}] " if item.timestamp else ""
    who = item.speaker or (str(item.role) if item.role is not None else "")
    role = f" ({item.role})" if item.speaker and item.role is not None else ""
    text = " ".join(item.text.split())
    return f"- {when}{who}{role}: {text}" if who else f"- {when}{text}"


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


def message_to_turn(message: ChatMessage, session_id: str | None = None, *, keep_message: bool = False) -> Turn | None:
    """A LlamaIndex message as a memory-ext turn, or None for a message with nothing to keep.

    The session is ``session_id`` or the ``session_id`` LlamaIndex's memory put into ``additional_kwargs``.
    ``keep_message=True`` (a chat history) stores the exact message in the turn's metadata so
    :func:`turn_to_message` rebuilds it, and keeps every message: one with no text and no tool calls becomes a
    turn with empty content and the :data:`EMPTY_MESSAGE` attachment (so search has nothing to match); one that
    cannot be serialised (a provider object in ``additional_kwargs``) is an ``InvalidTurnError``, like
    LlamaIndex's own ``Memory`` raises for it. Without it (search-only archiving), empty messages are skipped
    and unserialisable parts dropped.

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
    if message.role in (MessageRole.TOOL, MessageRole.FUNCTION):
        for key in ("tool_call_id", "name"):
            if isinstance(message.additional_kwargs.get(key), str):
                metadata[key] = message.additional_kwargs[key]
    speaker = message.additional_kwargs.get("name") if message.role == MessageRole.USER else None
    return Turn(role=_ROLE.get(message.role, "user"), content=text, tool_calls=calls, metadata=metadata,
                attachments=(dict(EMPTY_MESSAGE),) if empty else (),
                speaker=speaker if isinstance(speaker, str) else None,
                session_id=session_id or message.additional_kwargs.get("session_id"))


def messages_to_turns(messages: Iterable[ChatMessage], session_id: str | None = None, *,
                      keep_message: bool = False) -> list[Turn]:
    """:func:`message_to_turn` over messages (without ``keep_message``, dropping the empty ones)."""
    turns = (message_to_turn(m, session_id, keep_message=keep_message) for m in messages)
    return [t for t in turns if t is not None]


def turn_to_message(turn: Turn) -> ChatMessage:
    """A stored turn as a LlamaIndex message: the exact original if it was kept, else rebuilt from the turn."""
    raw = turn.metadata.get(MESSAGE_KEY)
    if isinstance(raw, dict):
        return ChatMessage.model_validate(raw)
    kwargs: dict[str, Any] = {}
    if turn.role == "tool" and isinstance(turn.metadata.get("tool_call_id"), str):
        kwargs["tool_call_id"] = turn.metadata["tool_call_id"]
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
