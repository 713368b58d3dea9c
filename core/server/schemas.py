"""The wire format of the REST API (``/v1``): request bodies, small responses, and the error body.

Pure pydantic, shared by the server (:mod:`memory_ext.server.rest`) and the client
(:class:`memory_ext.client.RemoteEngine`), so the two cannot drift. Responses are the engine's own models
(``SearchResult``, ``AddResult``, ``MemoryFile``, ``IndexHook``, ``ForgetReceipt``, ``StoreStats``,
``CompactionReport``, ``Turn``, ``Namespace``).

Every error is ``{"error": {"type", "field", "message", "fix", "value"}}`` where ``type`` is the name of the
:mod:`memory_ext.errors` class (or ``AuthenticationError``, ``PermissionDeniedError``, ``InternalError``):

>>> from memory_ext.errors import InvalidQueryError
>>> status, body = error_payload(InvalidQueryError("k", 0, "give an integer between 1 and 200"))
>>> status, body["error"]["type"], body["error"]["field"], body["error"]["fix"]
(400, 'InvalidQueryError', 'k', 'give an integer between 1 and 200')
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt

from ..errors import (
    ConfigError,
    EmbedderError,
    EmbedderMismatchError,
    HookNotFoundError,
    InvalidArgumentError,
    InvalidNamespaceError,
    InvalidQueryError,
    InvalidTurnError,
    MemoryExtError,
    MissingDependencyError,
    ReadOnlyStoreError,
    RetrievalError,
    SchemaVersionError,
    StoreError,
    StoreLockedError,
    ValidationError,
)
from ..models import ActionState, Turn
from ..validate import MAX_JSON_DEPTH, check_json, repair_json

__all__ = [
    "AddTurnsRequest",
    "CompactRequest",
    "ForgetRequest",
    "HookIdResponse",
    "ImportanceRequest",
    "InfoResponse",
    "ListMemoriesRequest",
    "MaybeCompactRequest",
    "NamespaceFields",
    "PreCompressRequest",
    "PromptResponse",
    "RenderPromptRequest",
    "SearchRequest",
    "StoredTurn",
    "check_arguments",
    "error_payload",
    "status_of",
]

TimeValue = datetime | str | float | None
"""A time: an ISO-8601 string (naive = UTC), a POSIX time, or null."""


class _Body(BaseModel):
    """A request body: unknown fields are refused, and numbers and switches must be JSON numbers and booleans
    (``"k": true`` or ``"wait": "yes"`` is a 422, not a silent 1 or True)."""

    model_config = ConfigDict(extra="forbid")


class NamespaceFields(_Body):
    """Whose memory: every request names a user (and optionally an agent and a session)."""

    user_id: str = Field(description="The user whose memory this is.")
    agent_id: str | None = Field(default=None, description="Optional agent partition of the user's memory.")
    session_id: str | None = Field(default=None, description="Optional session: narrows search and forget; the "
                                                              "session of written turns that carry none.")

    def namespace(self) -> dict[str, Any]:
        return {"user_id": self.user_id, "agent_id": self.agent_id, "session_id": self.session_id}


class SearchRequest(NamespaceFields):
    """``POST /v1/search``: the arguments of ``MemoryEngine.search``."""

    query: str
    k: StrictInt = 10
    filters: dict[str, Any] | None = Field(default=None, description="session_id, speaker, role, since, until, kinds")
    action_state: ActionState | None = None
    explain: StrictBool = False
    now: TimeValue = None
    trace: StrictBool = False
    include_cold: StrictBool = False
    as_of: TimeValue = None


class ListMemoriesRequest(NamespaceFields):
    """``POST /v1/memories/list``: the arguments of ``MemoryEngine.list_memories`` (filters in the body, where
    metadata values belong; ``GET /v1/memories`` takes the same as query parameters)."""

    filters: dict[str, Any] | None = Field(default=None, description="The filters search takes: session_id, speaker, "
                                                                      "role, since, until, kinds, metadata")
    limit: StrictInt = 50
    cursor: str | None = Field(default=None, description="next_cursor of the previous page")


class StoredTurn(Turn):
    """A turn as ``GET /v1/turns`` lists it: every field, and whether it is its memory's current version."""

    current: bool = Field(default=True, description="False for a version an update replaced (a default search "
                                                    "never returns it; as_of does)")


class AddTurnsRequest(NamespaceFields):
    """``POST /v1/turns``: turns to store (each a ``Turn``: role, content, speaker, timestamp, session_id, ...)."""

    turns: list[dict[str, Any]] = Field(description="Turn objects: role (user|assistant|system|tool), content, and "
                                                    "optionally speaker, timestamp, session_id, external_id, "
                                                    "tool_calls, attachments, metadata.")
    wait: StrictBool = Field(default=False, description="Return only once the turns are fully indexed (vectors too), "
                                                  "as MemoryEngine.add_turns(wait=True).")


class RenderPromptRequest(NamespaceFields):
    """``POST /v1/prompt``: the memory index for a system prompt (``render_prompt``)."""

    budget_tokens: StrictInt | None = None
    query: str | None = None


class PromptResponse(BaseModel):
    prompt: str


class ImportanceRequest(_Body):
    """``PUT /v1/files/{hook_id}/importance``."""

    importance: StrictInt = Field(description="0-100")
    user_id: str | None = None
    agent_id: str | None = None


class CompactRequest(NamespaceFields):
    """``POST /v1/compact``: one kind of compaction step."""

    period: str = Field(description="weekly or monthly")
    key: str | None = None
    now: TimeValue = None


class MaybeCompactRequest(NamespaceFields):
    """``POST /v1/maybe_compact``: whatever compaction is due."""

    now: TimeValue = None


class PreCompressRequest(NamespaceFields):
    """``POST /v1/pre_compress``: save a host's whole context before it compresses it."""

    full_context: str | list[Any] | dict[str, Any]
    estimated_tokens: StrictInt | None = None
    task_state: dict[str, Any] | None = None
    now: TimeValue = None


class HookIdResponse(BaseModel):
    hook_id: str


class ForgetRequest(NamespaceFields):
    """``POST /v1/forget``: with no ids, the whole namespace (or its session)."""

    record_ids: list[str] | None = None
    hook_ids: list[str] | None = None


class UpdateRequest(NamespaceFields):
    """``POST /v1/memories/update``: the arguments of ``MemoryEngine.update``."""

    id: str = Field(description="The memory: a turn id, a record id (search result id) or an external_id.")
    content: str | None = None
    metadata: dict[str, Any] | None = None
    timestamp: TimeValue = None


class HistoryRequest(NamespaceFields):
    """``POST /v1/memories/history``: the arguments of ``MemoryEngine.history``."""

    id: str


class DeleteRequest(NamespaceFields):
    """``POST /v1/memories/delete``: the arguments of ``MemoryEngine.delete``."""

    ids: list[str]


class InfoResponse(BaseModel):
    """``GET /v1/info``: what a client needs to mirror the engine."""

    version: str
    config: dict[str, Any]
    embedder_id: str | None
    user_id: str | None = Field(default=None, description="The user the caller's token is pinned to, if any.")


# -- errors ------------------------------------------------------------------------------------------------------
_STATUS: tuple[tuple[type[BaseException], int], ...] = (
    (HookNotFoundError, 404),
    (ValidationError, 400),
    (ConfigError, 400),
    (ReadOnlyStoreError, 409),
    (StoreLockedError, 409),
    (SchemaVersionError, 409),
    (EmbedderMismatchError, 409),
    (StoreError, 503),
    (RetrievalError, 503),
    (EmbedderError, 503),
    (MissingDependencyError, 500),
)


def status_of(exc: BaseException) -> int:
    """The HTTP status of an engine error (500 for anything unexpected)."""
    if isinstance(exc, ValidationError) and exc.field == "engine":  # the engine is closed: shutting down
        return 503
    for cls, status in _STATUS:
        if isinstance(exc, cls):
            return status
    return 500


# -- the door: what every body and tool call is checked for before the engine sees it ----------------------------
_ERROR_OF_ARGUMENT: dict[str, type[ValidationError]] = {
    **dict.fromkeys(("user_id", "agent_id", "session_id"), InvalidNamespaceError),
    **dict.fromkeys(("query", "k", "filters", "action_state", "as_of", "explain", "trace", "include_cold"),
                    InvalidQueryError),
    **dict.fromkeys(("turns", "content", "metadata", "speaker", "timestamp"), InvalidTurnError),
}
BODY_DEPTH = MAX_JSON_DEPTH + 3
"""Deepest nesting of a request body or tool arguments (a turn's metadata sits three levels down)."""


def check_arguments(arguments: Any) -> None:
    """Refuse a request body (or the arguments of a tool call) that no face could store or answer: a lone
    surrogate in any key or string (JSON's ``"\\ud800"`` escape decodes to one; it cannot be encoded as UTF-8 —
    not by SQLite, not by the response), a non-finite number (Python's JSON reader accepts ``NaN``), or nesting
    deeper than :data:`BODY_DEPTH`. The error is the type of the argument (``user_id``:
    ``InvalidNamespaceError``, ``query``: ``InvalidQueryError``, ``turns``: ``InvalidTurnError``, others
    ``InvalidArgumentError``) and names the path (``turns[0].metadata.k``). NUL characters are left to the engine,
    which knows where they are allowed.

    >>> check_arguments({"user_id": "ana", "query": "where?"})
    >>> check_arguments({"user_id": "ana", "turns": [{"role": "user", "content": "hi \\ud800"}]})
    Traceback (most recent call last):
    ...
    memory_ext.errors.InvalidTurnError: turns[0].content: got <4 characters: 'hi \\ud800'>; contains a lone ...
    """
    if not isinstance(arguments, dict):
        return  # not an object: the body model refuses it (422)
    for key, value in arguments.items():
        check_json("<argument name>", key, InvalidArgumentError, nul=False)
        check_json(key, value, _ERROR_OF_ARGUMENT.get(key, InvalidArgumentError), nul=False, max_depth=BODY_DEPTH,
                   what="argument")


def _json_value(value: Any) -> Any:
    try:
        text = json.dumps(value, allow_nan=False)
    except (TypeError, ValueError, RecursionError):
        value = repr(value)[:200]
        text = json.dumps(value)
    return value if len(text) <= 2000 else repr(value)[:200] + "..."


def error_payload(exc: BaseException) -> tuple[int, dict[str, Any]]:
    """``(status, {"error": {...}})`` for an exception; unexpected ones say nothing of their content."""
    if not isinstance(exc, MemoryExtError):
        return 500, {"error": {"type": "InternalError", "field": None, "value": None,
                               "message": "internal server error; the server log has the details",
                               "fix": "retry; report the problem if it persists"}}
    body: dict[str, Any] = {"type": type(exc).__name__, "field": getattr(exc, "field", None),
                            "value": _json_value(getattr(exc, "value", None)), "message": str(exc),
                            "fix": getattr(exc, "fix", None)}
    if isinstance(exc, HookNotFoundError):
        body["candidates"] = list(exc.candidates)
    if isinstance(exc, RetrievalError):
        body["channel_errors"] = [e.model_dump() if hasattr(e, "model_dump") else str(e) for e in exc.errors]
    # the value (and a field named after a key) echo the caller's input: a lone surrogate in it would make the
    # error itself unencodable, a 500 in place of this 400 (repair_json: U+FFFD instead)
    return status_of(exc), {"error": repair_json(body)}


def plain_error(type_: str, message: str, *, field: str | None = None, fix: str | None = None) -> dict[str, Any]:
    """An error body for failures that are not engine errors (authentication, permission, bad request body);
    ``field`` and ``message`` may echo a key of the request, so they are made encodable (:func:`repair_json`)."""
    return {"error": repair_json({"type": type_, "field": field, "value": None, "message": message, "fix": fix})}
