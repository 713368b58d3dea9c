"""The REST API: ``/v1/...`` over one :class:`~memory_ext.MemoryEngine`, every call in a worker thread.

The routes are built from :data:`memory_ext.operations.OPERATIONS` (one row per engine method: path, body model,
result, summary); rows marked ``custom`` have their handler here (:data:`HANDLERS`), the others share one that
parses the body, resolves the namespace against the caller's token and calls the engine.

==========  =====================================  ==============================================
method      path                                   engine call
==========  =====================================  ==============================================
POST        /v1/search                             search
POST        /v1/turns                              add_turns
GET         /v1/turns                              get_turns
GET         /v1/hooks                              hooks
POST        /v1/prompt                             render_prompt
GET         /v1/files/{hook_id}                    retrieve
PUT         /v1/files/{hook_id}/importance         set_importance
POST        /v1/compact                            compact
POST        /v1/maybe_compact                      maybe_compact
POST        /v1/pre_compress                       pre_compress
POST        /v1/forget                             forget
POST        /v1/memories/update                    update
POST        /v1/memories/history                   history
POST        /v1/memories/delete                    delete
GET         /v1/memories                           list_memories (paged: limit, cursor)
POST        /v1/memories/list                      list_memories (filters in the body)
GET         /v1/memories/{id}                      get_memory (the memory and its history)
GET         /v1/overview                           overview (a pinned token sees its user's namespaces)
GET         /v1/sessions                           get_turns, grouped: a namespace's sessions with their
                                                   sizes and dates (what the inspector's forget picks from)
GET         /v1/export                             export (JSON lines; a pinned token: its user only)
POST        /v1/import                             import_records (the body is the file; every namespace in
                                                   it must be the pinned token's user)
GET         /v1/stats                              stats (tokens pinned to a user: 403)
GET         /v1/namespaces                         namespaces (a pinned token sees its user's)
GET         /v1/info                               version, engine config, embedder id, the caller's pin
==========  =====================================  ==============================================

Memory text travels only in bodies (never in a URL, so no access log can hold it) — except the ``id`` of
``GET /v1/memories/{id}`` (an external id you chose) and the ``filters`` a ``GET /v1/memories`` is given: use
``POST /v1/memories/list`` for filters on private values. Every body passes
:func:`~memory_ext.server.schemas.check_arguments` before its route runs: a lone surrogate, a NaN or absurd nesting
anywhere in it is a typed 400, never a 500.
"""

from __future__ import annotations

import asyncio
import inspect
import json
from collections.abc import Awaitable, Callable, Iterable, Iterator
from datetime import datetime
from typing import Any

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, Field

from .. import __version__
from ..engine import MemoryEngine
from ..errors import InvalidArgumentError, InvalidImportError
from ..models import IndexHook, MemoryFile, Namespace
from ..operations import OPERATIONS, Operation
from ..portability import ImportReport
from ..results import Memory, MemoryPage, NamespaceSummary, StoreStats
from .auth import PermissionDenied, principal_of
from .schemas import ImportanceRequest, InfoResponse, StoredTurn, check_arguments

__all__ = ["EXTRA_ROUTES", "HANDLERS", "build_router", "build_routes"]

EXTRA_ROUTES: dict[tuple[str, str], str] = {
    ("GET", "/v1/memories"): "list_memories with query parameters (POST /v1/memories/list keeps filters out of URLs)",
    ("GET", "/v1/info"): "what a RemoteEngine reads when it connects: version, engine config, embedder id, pin",
    ("GET", "/v1/sessions"): "a namespace's sessions with their sizes and dates (the inspector's forget picker)",
}
"""The ``/v1`` routes that are not a row of :data:`~memory_ext.operations.OPERATIONS`."""


def _engine(request: Request) -> MemoryEngine:
    engine: MemoryEngine = request.app.state.engine
    return engine


def _namespace(request: Request, user_id: str | None, agent_id: str | None = None,
               session_id: str | None = None) -> Namespace:
    """The namespace of a request, after checking that the caller's token may touch this user."""
    principal = principal_of(request)
    if user_id is None:
        user_id = principal.user_id
        if user_id is None:
            raise PermissionDenied("user_id", "name the user whose memory this is (user_id)")
    if not principal.may_access(user_id):
        raise PermissionDenied("user_id", f"this token is pinned to user {principal.user_id!r}; it cannot reach "
                                          "another user's memory")
    return Namespace(user_id, agent_id, session_id)


def _optional_namespace(request: Request, user_id: str | None, agent_id: str | None) -> Namespace | None:
    """For calls where the namespace is optional (retrieve, set_importance): a pinned token is held to its user."""
    if user_id is None and principal_of(request).user_id is None:
        return None
    return _namespace(request, user_id, agent_id)


async def _checked_body(request: Request) -> None:
    """The door of every route: a JSON body that no face could store or answer is refused (typed 400) before
    the body model or the engine sees it (:func:`~memory_ext.server.schemas.check_arguments`)."""
    if request.method in ("POST", "PUT", "PATCH") and await request.body():
        try:
            body = await request.json()  # FastAPI decoded it already: this is its cached result
        except ValueError:
            return  # not JSON: FastAPI has answered 422
        check_arguments(body)


def _safe_name(name: str) -> str:
    """A file name for a Content-Disposition header (no quotes, no control or non-ASCII characters)."""
    return "".join(c if c.isascii() and (c.isalnum() or c in "-_.") else "_" for c in name)


def _partition(request: Request, user_id: str | None, agent_id: str | None) -> Namespace:
    """The caller's item partition, after checking that its token may touch this user."""
    principal = principal_of(request)
    user_id = user_id if user_id is not None else principal.user_id
    if user_id is None:
        raise PermissionDenied("user_id", "name the user whose items these are (user_id)")
    if not principal.may_access(user_id):
        raise PermissionDenied("user_id", f"this token is pinned to user {principal.user_id!r}; it cannot reach "
                                          "another user's items")
    return Namespace(user_id, agent_id)


def _scoped(op: Operation, request: Request, body: BaseModel) -> Namespace | None:
    """The namespace a body of ``op`` names, held to the caller's token."""
    user_id, agent_id = getattr(body, "user_id", None), getattr(body, "agent_id", None)
    if op.scope == "partition":
        return _partition(request, user_id, agent_id)
    if op.scope == "optional":
        return _optional_namespace(request, user_id, agent_id)
    return _namespace(request, user_id, agent_id, getattr(body, "session_id", None))


def _body_endpoint(op: Operation) -> Callable[..., Awaitable[Any]]:
    """The route of a row without a handler of its own: parse the body, resolve whose memory it is, call the
    engine's async twin with the body's engine arguments, wrap the result if the row says so."""
    async def endpoint(body: BaseModel, request: Request) -> Any:
        ns = _scoped(op, request, body)
        result = await getattr(_engine(request), "a" + op.name)(namespace=ns, **body.engine_kwargs())  # type: ignore[attr-defined]
        return op.wire(**{op.unwrap: result}) if op.unwrap is not None else result

    endpoint.__name__ = op.route_name or op.name
    endpoint.__signature__ = inspect.Signature(  # type: ignore[attr-defined]  # FastAPI reads the body model here
        [inspect.Parameter("body", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=op.request),
         inspect.Parameter("request", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=Request)],
        return_annotation=op.response_model)
    return endpoint


# -- the rows with handlers of their own (path or query parameters, a raw body, a guard, a filter) --------------
async def get_turns(request: Request, user_id: str, agent_id: str | None = None, session_id: str | None = None,
                    limit: int | None = Query(default=None, ge=0), offset: int = Query(default=0, ge=0)
                    ) -> list[StoredTurn]:
    ns = _namespace(request, user_id, agent_id, session_id)
    engine = _engine(request)
    turns = await engine.aget_turns(ns, limit=limit, offset=offset)
    replaced = await engine.areplaced_turns(ns) if turns else frozenset()
    return [StoredTurn(**t.model_dump(), current=t.id not in replaced) for t in turns]


async def hooks(request: Request, user_id: str, agent_id: str | None = None,
                include_merged: bool = False) -> list[IndexHook]:
    return await _engine(request).ahooks(_namespace(request, user_id, agent_id), include_merged=include_merged)


async def retrieve(hook_id: str, request: Request, user_id: str | None = None,
                   agent_id: str | None = None) -> MemoryFile:
    return await _engine(request).aretrieve(hook_id, _optional_namespace(request, user_id, agent_id))


async def set_importance(hook_id: str, body: ImportanceRequest, request: Request) -> IndexHook:
    ns = _optional_namespace(request, body.user_id, body.agent_id)
    return await _engine(request).aset_importance(hook_id, body.importance, ns)


async def list_memories(request: Request, user_id: str, agent_id: str | None = None,
                        session_id: str | None = None, limit: int = Query(default=50, ge=1, le=1000),
                        cursor: str | None = None,
                        filters: str | None = Query(default=None, description="the search filters as JSON "
                                                    "text (POST /v1/memories/list keeps them out of URLs)")
                        ) -> MemoryPage:
    ns = _namespace(request, user_id, agent_id, session_id)
    parsed = None
    if filters:
        try:
            parsed = json.loads(filters)
        except ValueError:
            raise InvalidArgumentError("filters", filters, "give the filters as JSON text, e.g. "
                                       '{"metadata": {"topic": "travel"}}') from None
        check_arguments(parsed)
    return await _engine(request).alist_memories(ns, filters=parsed, limit=limit, cursor=cursor)


async def get_memory(memory_id: str, request: Request, user_id: str, agent_id: str | None = None,
                     session_id: str | None = None) -> Memory:
    ns = _namespace(request, user_id, agent_id, session_id)
    return await _engine(request).aget_memory(ns, memory_id)


async def overview(request: Request) -> list[NamespaceSummary]:
    principal = principal_of(request)
    return [s for s in await _engine(request).aoverview() if principal.may_access(s.user_id)]


async def export(request: Request, user_id: str | None = None, agent_id: str | None = None) -> StreamingResponse:
    principal = principal_of(request)
    engine = _engine(request)
    ns = _namespace(request, user_id, agent_id) if user_id is not None or principal.user_id is not None \
        else None
    lines = await asyncio.to_thread(lambda: list(engine.export(ns)))

    def body() -> Iterator[bytes]:
        for line in lines:
            yield (json.dumps(line, ensure_ascii=False) + "\n").encode("utf-8")

    name = f"memory-ext-{ns.user_id if ns is not None else 'all'}.jsonl"
    return StreamingResponse(body(), media_type="application/x-ndjson",
                             headers={"Content-Disposition": f'attachment; filename="{_safe_name(name)}"'})


async def import_records(request: Request, format: str = Query(default="memory-ext",
                                                               pattern="^(memory-ext|mem0)$"),
                         user_id: str | None = None, wait: bool = False) -> ImportReport:
    principal = principal_of(request)
    raw = (await request.body()).decode("utf-8", errors="replace")
    engine = _engine(request)
    if format == "mem0":
        try:
            data = json.loads(raw)
        except ValueError as exc:
            raise InvalidImportError(1, "body", raw[:40], f"mem0's export is one JSON document ({exc})") from None
        entries = data.get("results") if isinstance(data, dict) else data
        owners = {e.get("user_id") or user_id for e in entries or [] if isinstance(e, dict)}
        for owner in owners:
            if owner is not None:
                _namespace(request, str(owner))
        if principal.user_id is not None and user_id is None and None in owners:
            user_id = principal.user_id
        return await engine.aimport_records(data, format="mem0", user_id=user_id, wait=wait, progress=False)
    lines = raw.splitlines()
    for n, line in enumerate(lines, start=1):  # a pinned token imports only into its own user
        if '"namespace"' in line:
            try:
                record = json.loads(line)
            except ValueError:
                continue  # the import names the bad line
            if isinstance(record, dict) and record.get("type") == "namespace" \
                    and not principal.may_access(str(record.get("user_id"))):
                raise PermissionDenied("user_id", f"line {n} names user {record.get('user_id')!r}; this "
                                       f"token is pinned to user {principal.user_id!r}")
    return await engine.aimport_records(lines, wait=wait, progress=False)


class SessionSummary(BaseModel):
    """One session of a namespace as ``GET /v1/sessions`` lists it."""

    session_id: str | None = Field(description="The session (null: the turns stored without one).")
    turns: int = Field(description="Stored turns, every version included (what forgetting the session removes).")
    memories: int = Field(description="Current memories (turns no update replaced).")
    first: datetime | None = Field(default=None, description="The earliest turn's time.")
    last: datetime | None = Field(default=None, description="The latest turn's time.")


async def sessions(request: Request, user_id: str, agent_id: str | None = None) -> list[SessionSummary]:
    """The namespace's sessions, the most recent first (by their latest turn), with sizes and dates."""
    ns = _namespace(request, user_id, agent_id)
    engine = _engine(request)
    turns = await engine.aget_turns(ns)
    replaced = await engine.areplaced_turns(ns) if turns else frozenset()
    grouped: dict[str | None, list[Any]] = {}
    for turn in turns:
        grouped.setdefault(turn.session_id, []).append(turn)
    out = []
    for session_id, members in grouped.items():
        times = [t.timestamp for t in members if t.timestamp is not None]
        out.append(SessionSummary(session_id=session_id, turns=len(members),
                                  memories=sum(t.id not in replaced for t in members),
                                  first=min(times) if times else None, last=max(times) if times else None))
    out.sort(key=lambda s: (s.last is not None, s.last.timestamp() if s.last else 0.0), reverse=True)
    return out


async def stats(request: Request) -> StoreStats:
    if principal_of(request).user_id is not None:
        raise PermissionDenied(None, "store statistics need a token that is not pinned to a user")
    return await _engine(request).astats()


async def namespaces(request: Request) -> list[Namespace]:
    principal = principal_of(request)
    return [ns for ns in await _engine(request).anamespaces() if principal.may_access(ns.user_id)]


async def info(request: Request) -> InfoResponse:
    engine = _engine(request)
    config: dict[str, Any] = engine.config.model_dump(mode="json")
    return InfoResponse(version=__version__, config=config,
                        embedder_id=engine.embedder.id if engine.embedder is not None else None,
                        user_id=principal_of(request).user_id,
                        max_body_bytes=getattr(request.app.state, "max_body_bytes", None))


_NDJSON: dict[str, Any] = {"response_class": StreamingResponse, "response_model": None,
                           "responses": {200: {"content": {"application/x-ndjson": {}}}}}
HANDLERS: dict[str, tuple[Callable[..., Awaitable[Any]], dict[str, Any]]] = {
    "get_turns": (get_turns, {}), "hooks": (hooks, {}), "retrieve": (retrieve, {}),
    "set_importance": (set_importance, {}), "get_memory": (get_memory, {}), "overview": (overview, {}),
    "export": (export, _NDJSON), "import_records": (import_records, {}), "stats": (stats, {}),
    "namespaces": (namespaces, {}),
}
"""The handlers of the rows marked ``custom``, with their extra route arguments."""


def build_routes(router: APIRouter, operations: Iterable[Operation]) -> None:
    """Add the route of every row to ``router`` (whose prefix the rows' paths start with)."""
    for op in operations:
        if op.custom:
            endpoint, extra = HANDLERS[op.name]
        else:
            endpoint, extra = _body_endpoint(op), {}
        options: dict[str, Any] = {"response_model": op.response_model, **extra}
        router.add_api_route(op.path.removeprefix(router.prefix), endpoint, methods=[op.method], tags=[op.tag],
                             summary=op.summary, name=op.route_name or op.name, **options)


def build_router() -> APIRouter:
    """The ``/v1`` routes (all but the items' ``/v1/store``); the engine is ``request.app.state.engine``."""
    router = APIRouter(prefix="/v1", dependencies=[Depends(_checked_body)])
    build_routes(router, [op for op in OPERATIONS if op.scope != "partition"])
    router.add_api_route("/memories", list_memories, methods=["GET"], response_model=MemoryPage, tags=["memories"],
                         summary="The current memories, most recently written first, a page at a time "
                                 "(MemoryEngine.list_memories)")
    router.add_api_route("/sessions", sessions, methods=["GET"], response_model=list[SessionSummary],
                         tags=["memories"], summary="A namespace's sessions with their sizes and dates, the most "
                                                    "recent first (GET /v1/turns, grouped by session)")
    router.add_api_route("/info", info, methods=["GET"], response_model=InfoResponse, tags=["store"],
                         summary="Server version, engine configuration, embedder id and the caller's pinned user")
    return router
