"""The server's side of the wire format (``/v1``): the error body, HTTP statuses, and the door every body
passes (:func:`check_arguments`).

The request bodies and small responses live in :mod:`memory_ext.wire` (pure pydantic, shared with
:class:`memory_ext.client.RemoteEngine`) and are re-exported here; responses are otherwise the engine's own models
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
from typing import Any

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
from ..validate import MAX_JSON_DEPTH, check_json, repair_json
from ..wire import (
    AddTurnsRequest,
    CompactRequest,
    DeleteRequest,
    ForgetRequest,
    HistoryRequest,
    HookIdResponse,
    ImportanceRequest,
    InfoResponse,
    ListMemoriesRequest,
    MaybeCompactRequest,
    NamespaceFields,
    PreCompressRequest,
    PromptResponse,
    RenderPromptRequest,
    SearchRequest,
    StoredTurn,
    UpdateRequest,
)

__all__ = [
    "AddTurnsRequest",
    "CompactRequest",
    "DeleteRequest",
    "ForgetRequest",
    "HistoryRequest",
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
    "UpdateRequest",
    "check_arguments",
    "error_payload",
    "status_of",
]

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
