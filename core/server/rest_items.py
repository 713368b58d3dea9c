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
items. Values, keys and texts travel only in bodies. The routes are the rows of
:data:`~memory_ext.operations.OPERATIONS` under ``/v1/store`` (their bodies: :mod:`memory_ext.wire`).
"""

from __future__ import annotations

from fastapi import APIRouter

from ..operations import OPERATIONS
from .rest import build_routes

__all__ = ["build_items_router"]


def build_items_router() -> APIRouter:
    """The ``/v1/store`` routes; the engine is ``request.app.state.engine``."""
    router = APIRouter(prefix="/v1/store")
    build_routes(router, [op for op in OPERATIONS if op.scope == "partition"])
    return router
