"""The engine API over the wire, declared once: one :class:`Operation` row per engine method the server exposes.

Each row pairs an engine method with its REST route (HTTP method, path, summary, tag), its request model (from
:mod:`memory_ext.wire`, the models both ends use), the type it returns and how that travels (a wrapper field such
as ``{"prompt": ...}``, JSON lines), whose memory it touches, and the MCP tool that offers it (or why none does).
The server builds its routes from the table (:mod:`memory_ext.server.rest`) and
:class:`memory_ext.client.RemoteEngine` its requests; a test checks that every row has a route, a client method
with the engine's signature, an :class:`~memory_ext.EngineLike` member and an MCP tool or a stated exemption.
Exposing a new engine method is one row here (plus its MCP tool). Pure: importing it needs neither FastAPI nor
httpx.

>>> op = OPERATION["render_prompt"]
>>> op.method, op.path, op.request.__name__, op.unwrap
('POST', '/v1/prompt', 'RenderPromptRequest', 'prompt')
>>> op.decode({"prompt": "## Memory index"})
'## Memory index'
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Literal

from pydantic import BaseModel, TypeAdapter

from .errors import InvalidArgumentError
from .lifecycle.api import CompactionReport
from .lifecycle.items import StoredItem
from .models import IndexHook, MemoryFile, Namespace, SearchResult, Turn
from .portability import ImportReport
from .results import AddResult, ForgetReceipt, Memory, MemoryPage, MemoryVersion, NamespaceSummary, StoreStats
from .wire import (
    AddTurnsRequest,
    CompactRequest,
    CountResponse,
    DeleteItemsRequest,
    DeleteRequest,
    ForgetRequest,
    GetItemsRequest,
    HistoryRequest,
    HookIdResponse,
    ImportanceRequest,
    ListItemNamespacesRequest,
    ListMemoriesRequest,
    MaybeCompactRequest,
    PreCompressRequest,
    PromptResponse,
    PutItemsRequest,
    RenderPromptRequest,
    SearchItemsRequest,
    SearchRequest,
    StoredTurn,
    SweepItemsRequest,
    UpdateRequest,
)

__all__ = ["NOT_OPERATIONS", "OPERATION", "OPERATIONS", "Operation", "Scope"]

Scope = Literal["namespace", "optional", "partition", "store"]
"""Whose data a call touches: a user's namespace (``user_id`` required, or the token's pinned user), an optional
namespace (memory files by hook id), a (user_id, agent_id) item partition, or the whole store."""


@dataclass(frozen=True)
class Operation:
    """One engine method as the server offers it.

    ``name`` is the engine method (its async twin is ``"a" + name``); ``method`` and ``path`` the REST route;
    ``request`` the body model (None: the route takes query or path parameters, or a raw body); ``result`` what
    the engine method returns; ``wire`` the response model when it differs from ``result`` (a wrapper, from which
    ``unwrap`` names the field, or a richer listing); ``lines``: the response is JSON lines. ``custom``: the route
    has its own handler in the server (path parameters, query parameters, a raw body, a guard or a filter of its
    own); otherwise the generic one parses ``request``, resolves ``scope`` and calls the engine with the body's
    :meth:`~memory_ext.wire.NamespaceFields.engine_kwargs`. ``mcp`` names the MCP tool offering the operation, or
    ``mcp_exempt`` says why none does. ``route_name`` is the route's name in the OpenAPI document (default
    ``name``).
    """

    name: str
    method: Literal["GET", "POST", "PUT"]
    path: str
    summary: str
    tag: str
    result: Any
    request: type[BaseModel] | None = None
    wire: Any = None
    unwrap: str | None = None
    lines: bool = False
    scope: Scope = "namespace"
    custom: bool = False
    mcp: str | None = None
    mcp_exempt: str | None = None
    route_name: str | None = None

    @property
    def response_model(self) -> Any:
        """The model of the route's response body."""
        return self.wire if self.wire is not None else self.result

    @cached_property
    def _adapter(self) -> TypeAdapter[Any]:
        return TypeAdapter(self.result if self.unwrap is not None else self.response_model)

    def url(self, **path_args: str) -> str:
        """The path with its parameters filled in (already quoted by the caller)."""
        return self.path.format(**path_args) if path_args else self.path

    def body(self, fields: Mapping[str, Any]) -> dict[str, Any]:
        """A request body of the row's model: refuses a field the model does not declare (so the client cannot
        drift from the server's models)."""
        if self.request is None:
            raise InvalidArgumentError("body", self.name, f"{self.method} {self.path} takes no JSON body")
        unknown = sorted(set(fields) - set(self.request.model_fields))
        if unknown:
            raise InvalidArgumentError("body", unknown, f"{self.request.__name__} declares only "
                                                        f"{sorted(self.request.model_fields)}")
        return dict(fields)

    def decode(self, data: Any) -> Any:
        """The engine's return value from the decoded JSON of a response."""
        if self.unwrap is not None:
            data = data[self.unwrap]
        return self._adapter.validate_python(data)


def _row(name: str, method: Literal["GET", "POST", "PUT"], path: str, summary: str, tag: str, result: Any,
         **more: Any) -> Operation:
    return Operation(name, method, path, summary, tag, result, **more)


_ITEMS_EXEMPT = "LangGraph's store API for the framework faces; agents keep memories with the memory tools"

OPERATIONS: tuple[Operation, ...] = (
    _row("search", "POST", "/v1/search", "Search a user's memory (MemoryEngine.search)", "search", SearchResult,
         request=SearchRequest, mcp="search_memory"),
    _row("add_turns", "POST", "/v1/turns", "Store turns (MemoryEngine.add_turns)", "turns", AddResult,
         request=AddTurnsRequest, mcp="save_memory"),
    _row("get_turns", "GET", "/v1/turns", "The stored turns of a namespace, oldest first, each saying whether it "
         "is its memory's current version (MemoryEngine.get_turns, replaced_turns)", "turns", list[Turn],
         wire=list[StoredTurn], custom=True, mcp_exempt="agents read memories with list_memories and get_memory"),
    _row("hooks", "GET", "/v1/hooks", "The index hooks of a namespace's memory files (MemoryEngine.hooks)", "files",
         list[IndexHook], custom=True, mcp_exempt="memory_index shows the hooks"),
    _row("render_prompt", "POST", "/v1/prompt", "The memory index for a system prompt (MemoryEngine.render_prompt)",
         "files", str, request=RenderPromptRequest, wire=PromptResponse, unwrap="prompt", mcp="memory_index"),
    _row("retrieve", "GET", "/v1/files/{hook_id}", "A whole memory file by hook id or a 6+ character prefix "
         "(MemoryEngine.retrieve)", "files", MemoryFile, scope="optional", custom=True, mcp="open_memory_file"),
    _row("set_importance", "PUT", "/v1/files/{hook_id}/importance", "Set a memory file's importance, 0-100 "
         "(MemoryEngine.set_importance)", "files", IndexHook, request=ImportanceRequest, scope="optional",
         custom=True, mcp_exempt="importance is the user's call (the inspector, a program), not the agent's"),
    _row("compact", "POST", "/v1/compact", "Weekly merge or monthly eviction (MemoryEngine.compact)", "lifecycle",
         CompactionReport, request=CompactRequest, mcp="compact"),
    _row("maybe_compact", "POST", "/v1/maybe_compact", "The compaction that is due (MemoryEngine.maybe_compact)",
         "lifecycle", CompactionReport, request=MaybeCompactRequest, mcp="compact"),
    _row("pre_compress", "POST", "/v1/pre_compress", "Save a host's whole context before it compresses it "
         "(MemoryEngine.pre_compress)", "lifecycle", str, request=PreCompressRequest, wire=HookIdResponse,
         unwrap="hook_id", mcp="pre_compress"),
    _row("forget", "POST", "/v1/forget", "Remove memories from every store; with no ids, the whole namespace "
         "(MemoryEngine.forget)", "lifecycle", ForgetReceipt, request=ForgetRequest, mcp="forget"),
    _row("update", "POST", "/v1/memories/update", "Write a new version of a memory (MemoryEngine.update)",
         "memories", AddResult, request=UpdateRequest, mcp="update_memory"),
    _row("history", "POST", "/v1/memories/history", "The versions of a memory and the operations on it "
         "(MemoryEngine.history)", "memories", list[MemoryVersion], request=HistoryRequest, mcp="memory_history"),
    _row("delete", "POST", "/v1/memories/delete", "Remove exactly these memories from every store "
         "(MemoryEngine.delete)", "memories", ForgetReceipt, request=DeleteRequest, mcp="delete_memory"),
    _row("list_memories", "POST", "/v1/memories/list", "list_memories with the filters in the body", "memories",
         MemoryPage, request=ListMemoriesRequest, mcp="list_memories", route_name="list_memories_body"),
    _row("get_memory", "GET", "/v1/memories/{memory_id}", "One memory: its current version and its whole history "
         "(MemoryEngine.get_memory)", "memories", Memory, custom=True, mcp="get_memory"),
    _row("overview", "GET", "/v1/overview", "Every namespace with its counts of memories and turns (a pinned "
         "token: its user's)", "store", list[NamespaceSummary], scope="store", custom=True,
         mcp_exempt="an administrator's view of the store, not one user's memory"),
    _row("export", "GET", "/v1/export", "The memories as JSON lines, the format of memext export "
         "(MemoryEngine.export)", "store", list[dict[str, Any]], lines=True, scope="optional", custom=True,
         mcp_exempt="a whole store's file: for backups, not for a conversation"),
    _row("import_records", "POST", "/v1/import", "Restore an export (or mem0's get_all output, format=mem0); the "
         "body is the file (MemoryEngine.import_records)", "store", ImportReport, scope="store", custom=True,
         mcp_exempt="a whole store's file: for backups, not for a conversation"),
    _row("stats", "GET", "/v1/stats", "Counts and size of the store", "store", StoreStats, scope="store",
         custom=True, mcp_exempt="an administrator's view of the store, not one user's memory"),
    _row("namespaces", "GET", "/v1/namespaces", "The (user_id, agent_id) partitions (a pinned token sees only its "
         "user's)", "store", list[Namespace], scope="store", custom=True,
         mcp_exempt="an administrator's view of the store, not one user's memory"),
    _row("put_items", "POST", "/v1/store/put", "Write or delete items (MemoryEngine.put_items)", "store", int,
         request=PutItemsRequest, wire=CountResponse, unwrap="count", scope="partition", route_name="put",
         mcp_exempt=_ITEMS_EXEMPT),
    _row("get_items", "POST", "/v1/store/get", "Items by key (MemoryEngine.get_items)", "store",
         list[StoredItem | None], request=GetItemsRequest, scope="partition", route_name="get",
         mcp_exempt=_ITEMS_EXEMPT),
    _row("search_items", "POST", "/v1/store/search", "Items under a namespace prefix, filtered and ranked "
         "(MemoryEngine.search_items)", "store", list[StoredItem], request=SearchItemsRequest, scope="partition",
         route_name="search", mcp_exempt=_ITEMS_EXEMPT),
    _row("list_item_namespaces", "POST", "/v1/store/namespaces", "The namespaces holding items "
         "(MemoryEngine.list_item_namespaces)", "store", list[tuple[str, ...]], request=ListItemNamespacesRequest,
         scope="partition", route_name="namespaces", mcp_exempt=_ITEMS_EXEMPT),
    _row("delete_items", "POST", "/v1/store/delete", "Delete items (MemoryEngine.delete_items)", "store", int,
         request=DeleteItemsRequest, wire=CountResponse, unwrap="count", scope="partition", route_name="delete",
         mcp_exempt=_ITEMS_EXEMPT),
    _row("sweep_items", "POST", "/v1/store/sweep", "Remove the partition's expired items (MemoryEngine.sweep_items)",
         "store", int, request=SweepItemsRequest, wire=CountResponse, unwrap="count", scope="partition",
         route_name="sweep", mcp_exempt=_ITEMS_EXEMPT),
)

OPERATION: dict[str, Operation] = {op.name: op for op in OPERATIONS}
"""The rows by engine method name."""

NOT_OPERATIONS: dict[str, str] = {
    "config": "read once from GET /v1/info when a RemoteEngine connects",
    "path": "a local directory of the caller's",
    "close": "closes the caller's connections",
    "aclose": "closes the caller's connections",
    "replaced_turns": "the current flags of GET /v1/turns (get_turns)",
}
"""The members of :class:`~memory_ext.EngineLike` that are not a row, and how a remote engine has them."""
