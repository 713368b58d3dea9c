"""The key/value item routes (the LangGraph store's items, shared by every client of the server): ``/v1/store``.

==========  =====================================  ==============================================
method      path                                   engine call
==========  =====================================  ==============================================
POST        /v1/store/put                          put_items (``value: null`` deletes)
POST        /v1/store/get                          get_items
POST        /v1/store/search                       search_items
POST        /v1/store/namespaces                   list_item_namespaces
POST        /v1/store/delete                       delete_items
POST        /v1/store/sweep                        sweep_items (of the caller's partition)
==========  =====================================  ==============================================

Every call names a partition (``user_id``, ``agent_id``); a token pinned to a user reaches only that user's
items. Values, keys and texts travel only in bodies.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from fastapi import APIRouter, Request
from pydantic import BaseModel, ConfigDict, Field

from ..engine import MemoryEngine
from ..lifecycle.items import ItemPut, StoredItem
from ..models import Namespace
from .auth import PermissionDenied, principal_of

__all__ = ["build_items_router"]

TimeLike = datetime | str | float | None


class _Partition(BaseModel):
    model_config = ConfigDict(extra="forbid")
    user_id: str | None = None
    """The user whose items these are (default: the user the token is pinned to)."""
    agent_id: str | None = None
    now: TimeLike = None
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


class DeleteItemsRequest(_Partition):
    keys: list[ItemKey] = Field(max_length=1000)


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


class SweepItemsRequest(_Partition):
    pass


class CountResponse(BaseModel):
    count: int


def _engine(request: Request) -> MemoryEngine:
    engine: MemoryEngine = request.app.state.engine
    return engine


def _partition(request: Request, body: _Partition) -> Namespace:
    """The caller's partition, after checking that its token may touch this user."""
    principal = principal_of(request)
    user_id = body.user_id if body.user_id is not None else principal.user_id
    if user_id is None:
        raise PermissionDenied("user_id", "name the user whose items these are (user_id)")
    if not principal.may_access(user_id):
        raise PermissionDenied("user_id", f"this token is pinned to user {principal.user_id!r}; it cannot reach "
                                          "another user's items")
    return Namespace(user_id, body.agent_id)


def build_items_router() -> APIRouter:
    """The ``/v1/store`` routes; the engine is ``request.app.state.engine``."""
    router = APIRouter(prefix="/v1/store", tags=["store"])

    @router.post("/put", response_model=CountResponse, summary="Write or delete items (MemoryEngine.put_items)")
    async def put(body: PutItemsRequest, request: Request) -> CountResponse:
        ns = _partition(request, body)
        return CountResponse(count=await _engine(request).aput_items(ns, body.items, now=body.now))

    @router.post("/get", response_model=list[StoredItem | None], summary="Items by key (MemoryEngine.get_items)")
    async def get(body: GetItemsRequest, request: Request) -> list[StoredItem | None]:
        ns = _partition(request, body)
        return await _engine(request).aget_items(ns, [(k.namespace, k.key) for k in body.keys],
                                                 refresh_ttl=body.refresh_ttl, now=body.now)

    @router.post("/search", response_model=list[StoredItem],
                 summary="Items under a namespace prefix, filtered and ranked (MemoryEngine.search_items)")
    async def search(body: SearchItemsRequest, request: Request) -> list[StoredItem]:
        ns = _partition(request, body)
        return await _engine(request).asearch_items(ns, body.prefix, query=body.query, query_vector=body.query_vector,
                                                    filter=body.filter, limit=body.limit, offset=body.offset,
                                                    refresh_ttl=body.refresh_ttl, now=body.now)

    @router.post("/namespaces", response_model=list[tuple[str, ...]],
                 summary="The namespaces holding items (MemoryEngine.list_item_namespaces)")
    async def namespaces(body: ListItemNamespacesRequest, request: Request) -> list[tuple[str, ...]]:
        ns = _partition(request, body)
        conditions = [(c.match_type, c.path) for c in body.match_conditions]
        return await _engine(request).alist_item_namespaces(ns, match_conditions=conditions, max_depth=body.max_depth,
                                                            limit=body.limit, offset=body.offset, now=body.now)

    @router.post("/delete", response_model=CountResponse, summary="Delete items (MemoryEngine.delete_items)")
    async def delete(body: DeleteItemsRequest, request: Request) -> CountResponse:
        ns = _partition(request, body)
        count = await _engine(request).adelete_items(ns, [(k.namespace, k.key) for k in body.keys], now=body.now)
        return CountResponse(count=count)

    @router.post("/sweep", response_model=CountResponse,
                 summary="Remove the partition's expired items (MemoryEngine.sweep_items)")
    async def sweep(body: SweepItemsRequest, request: Request) -> CountResponse:
        ns = _partition(request, body)
        return CountResponse(count=await _engine(request).asweep_items(ns, now=body.now))

    return router
