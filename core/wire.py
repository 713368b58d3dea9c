"""The wire format of the REST API (``/v1``): the request bodies and the small responses.

One set of pydantic models, used by both ends: the server's routes (:mod:`memory_ext.server.rest`) parse bodies
with them, and :class:`memory_ext.client.RemoteEngine` builds its bodies from their fields (see
:mod:`memory_ext.operations`, the table that pairs each model with its engine method and route). Pure pydantic:
importing it needs neither FastAPI nor httpx. A request model's :meth:`engine_kwargs` are the keyword arguments
of its engine method (all but the namespace):

>>> HistoryRequest(user_id="ana", id="m1").engine_kwargs()
{'id': 'm1'}
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, StrictBool, StrictFloat, StrictInt

from .lifecycle.items import ItemPut
from .models import ActionState, Turn

__all__ = [
    "AddTurnsRequest",
    "CompactRequest",
    "CountResponse",
    "DeleteItemsRequest",
    "DeleteRequest",
    "ForgetRequest",
    "GetItemsRequest",
    "HistoryRequest",
    "HookIdResponse",
    "ImportanceRequest",
    "InfoResponse",
    "ItemKey",
    "ListItemNamespacesRequest",
    "ListMemoriesRequest",
    "MatchConditionBody",
    "MaybeCompactRequest",
    "NamespaceFields",
    "PreCompressRequest",
    "PromptResponse",
    "PutItemsRequest",
    "RenderPromptRequest",
    "SearchItemsRequest",
    "SearchRequest",
    "StoredTurn",
    "SweepItemsRequest",
    "TimeValue",
    "UpdateRequest",
]

_NAMESPACE_FIELDS = frozenset({"user_id", "agent_id", "session_id"})


def _not_a_boolean(value: Any) -> Any:
    if isinstance(value, bool):
        raise ValueError("a time is an ISO-8601 string, a POSIX time (a number) or null, not a boolean")
    return value


TimeValue = Annotated[datetime | str | float | None, BeforeValidator(_not_a_boolean)]
"""A time: an ISO-8601 string (naive = UTC), a POSIX time (a JSON number, never a boolean), or null."""


class _Body(BaseModel):
    """A request body: unknown fields are refused, and numbers and switches must be JSON numbers and booleans
    (``"k": true`` or ``"wait": "yes"`` is a 422, not a silent 1 or True)."""

    model_config = ConfigDict(extra="forbid")

    def engine_kwargs(self) -> dict[str, Any]:
        """The keyword arguments of the engine method this body is for: every field but the namespace's."""
        return {name: getattr(self, name) for name in type(self).model_fields if name not in _NAMESPACE_FIELDS}


class NamespaceFields(_Body):
    """Whose memory: every request names a user (and optionally an agent and a session)."""

    user_id: str = Field(description="The user whose memory this is.")
    agent_id: str | None = Field(default=None, description="Optional agent partition of the user's memory.")
    session_id: str | None = Field(default=None, description="Optional session: narrows search and forget; the "
                                                              "session of written turns that carry none.")


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
    min_score: StrictFloat | StrictInt | None = Field(default=None, description="Leave out items whose score is "
                                                      "below it (0-1; 0.5 is the documented line between a match "
                                                      "and a weak one). Default: keep every item.")


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
    max_body_bytes: int | None = Field(default=None, description="The largest request body the server accepts "
                                                                 "(server.max_body_bytes); larger is 413.")



# -- the key/value items (the LangGraph store's): /v1/store -------------------------------------------------
class _Partition(_Body):
    """Whose items: a (user_id, agent_id) partition, and the caller's time."""

    user_id: str | None = None
    """The user whose items these are (default: the user the token is pinned to)."""
    agent_id: str | None = None
    now: datetime | str | float | None = None
    """The caller's current time (TTL); default the server's."""


class PutItemsRequest(_Partition):
    items: list[ItemPut] = Field(max_length=1000)


class ItemKey(BaseModel):
    model_config = ConfigDict(extra="forbid")
    namespace: tuple[str, ...]
    key: str


class GetItemsRequest(_Partition):
    keys: list[ItemKey] = Field(max_length=1000)
    refresh_ttl: bool = False

    def engine_kwargs(self) -> dict[str, Any]:
        return {**super().engine_kwargs(), "keys": [(k.namespace, k.key) for k in self.keys]}


class DeleteItemsRequest(_Partition):
    keys: list[ItemKey] = Field(max_length=1000)

    def engine_kwargs(self) -> dict[str, Any]:
        return {**super().engine_kwargs(), "keys": [(k.namespace, k.key) for k in self.keys]}


class SearchItemsRequest(_Partition):
    prefix: tuple[str, ...] = ()
    query: str | None = None
    query_vector: list[float] | None = None
    filter: dict[str, Any] | None = None
    limit: int = 10
    offset: int = 0
    refresh_ttl: bool = False


class MatchConditionBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    match_type: Literal["prefix", "suffix"]
    path: tuple[str, ...]


class ListItemNamespacesRequest(_Partition):
    match_conditions: list[MatchConditionBody] = Field(default_factory=list)
    max_depth: int | None = None
    limit: int = 100
    offset: int = 0

    def engine_kwargs(self) -> dict[str, Any]:
        conditions = [(c.match_type, c.path) for c in self.match_conditions]
        return {**super().engine_kwargs(), "match_conditions": conditions}


class SweepItemsRequest(_Partition):
    pass


class CountResponse(BaseModel):
    count: int
