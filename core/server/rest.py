"""The REST API: ``/v1/...`` over one :class:`~memory_ext.MemoryEngine`, every call in a worker thread.

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
import json
from collections.abc import Iterator
from typing import Any

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import StreamingResponse

from .. import __version__
from ..engine import AddResult, ForgetReceipt, MemoryEngine, StoreStats
from ..errors import InvalidArgumentError, InvalidImportError
from ..lifecycle.api import CompactionReport
from ..models import IndexHook, MemoryFile, Namespace, SearchResult
from ..portability import ImportReport
from ..results import Memory, MemoryPage, MemoryVersion, NamespaceSummary
from .auth import PermissionDenied, principal_of
from .schemas import (
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
    PreCompressRequest,
    PromptResponse,
    RenderPromptRequest,
    SearchRequest,
    StoredTurn,
    UpdateRequest,
    check_arguments,
)

__all__ = ["build_router"]


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


def build_router() -> APIRouter:
    """The ``/v1`` routes; the engine is ``request.app.state.engine``."""
    router = APIRouter(prefix="/v1", dependencies=[Depends(_checked_body)])

    @router.post("/search", response_model=SearchResult, tags=["search"],
                 summary="Search a user's memory (MemoryEngine.search)")
    async def search(body: SearchRequest, request: Request) -> SearchResult:
        ns = _namespace(request, body.user_id, body.agent_id, body.session_id)
        return await _engine(request).asearch(body.query, ns, k=body.k, filters=body.filters,
                                              action_state=body.action_state, explain=body.explain, now=body.now,
                                              trace=body.trace, include_cold=body.include_cold, as_of=body.as_of)

    @router.post("/turns", response_model=AddResult, tags=["turns"], summary="Store turns (MemoryEngine.add_turns)")
    async def add_turns(body: AddTurnsRequest, request: Request) -> AddResult:
        ns = _namespace(request, body.user_id, body.agent_id, body.session_id)
        return await _engine(request).aadd_turns(body.turns, ns, wait=body.wait)

    @router.get("/turns", response_model=list[StoredTurn], tags=["turns"],
                summary="The stored turns of a namespace, oldest first, each saying whether it is its memory's "
                        "current version (MemoryEngine.get_turns, replaced_turns)")
    async def get_turns(request: Request, user_id: str, agent_id: str | None = None, session_id: str | None = None,
                        limit: int | None = Query(default=None, ge=0), offset: int = Query(default=0, ge=0)
                        ) -> list[StoredTurn]:
        ns = _namespace(request, user_id, agent_id, session_id)
        engine = _engine(request)
        turns = await engine.aget_turns(ns, limit=limit, offset=offset)
        replaced = await engine.areplaced_turns(ns) if turns else frozenset()
        return [StoredTurn(**t.model_dump(), current=t.id not in replaced) for t in turns]

    @router.get("/hooks", response_model=list[IndexHook], tags=["files"],
                summary="The index hooks of a namespace's memory files (MemoryEngine.hooks)")
    async def hooks(request: Request, user_id: str, agent_id: str | None = None,
                    include_merged: bool = False) -> list[IndexHook]:
        return await _engine(request).ahooks(_namespace(request, user_id, agent_id), include_merged=include_merged)

    @router.post("/prompt", response_model=PromptResponse, tags=["files"],
                 summary="The memory index for a system prompt (MemoryEngine.render_prompt)")
    async def render_prompt(body: RenderPromptRequest, request: Request) -> PromptResponse:
        ns = _namespace(request, body.user_id, body.agent_id, body.session_id)
        text = await _engine(request).arender_prompt(ns, budget_tokens=body.budget_tokens, query=body.query)
        return PromptResponse(prompt=text)

    @router.get("/files/{hook_id}", response_model=MemoryFile, tags=["files"],
                summary="A whole memory file by hook id or a 6+ character prefix (MemoryEngine.retrieve)")
    async def retrieve(hook_id: str, request: Request, user_id: str | None = None,
                       agent_id: str | None = None) -> MemoryFile:
        return await _engine(request).aretrieve(hook_id, _optional_namespace(request, user_id, agent_id))

    @router.put("/files/{hook_id}/importance", response_model=IndexHook, tags=["files"],
                summary="Set a memory file's importance, 0-100 (MemoryEngine.set_importance)")
    async def set_importance(hook_id: str, body: ImportanceRequest, request: Request) -> IndexHook:
        ns = _optional_namespace(request, body.user_id, body.agent_id)
        return await _engine(request).aset_importance(hook_id, body.importance, ns)

    @router.post("/compact", response_model=CompactionReport, tags=["lifecycle"],
                 summary="Weekly merge or monthly eviction (MemoryEngine.compact)")
    async def compact(body: CompactRequest, request: Request) -> CompactionReport:
        ns = _namespace(request, body.user_id, body.agent_id, body.session_id)
        return await _engine(request).acompact(ns, body.period, key=body.key, now=body.now)  # type: ignore[arg-type]

    @router.post("/maybe_compact", response_model=CompactionReport, tags=["lifecycle"],
                 summary="The compaction that is due (MemoryEngine.maybe_compact)")
    async def maybe_compact(body: MaybeCompactRequest, request: Request) -> CompactionReport:
        ns = _namespace(request, body.user_id, body.agent_id, body.session_id)
        return await _engine(request).amaybe_compact(ns, now=body.now)

    @router.post("/pre_compress", response_model=HookIdResponse, tags=["lifecycle"],
                 summary="Save a host's whole context before it compresses it (MemoryEngine.pre_compress)")
    async def pre_compress(body: PreCompressRequest, request: Request) -> HookIdResponse:
        ns = _namespace(request, body.user_id, body.agent_id, body.session_id)
        hook_id = await _engine(request).apre_compress(ns, body.full_context, estimated_tokens=body.estimated_tokens,
                                                       task_state=body.task_state, now=body.now)
        return HookIdResponse(hook_id=hook_id)

    @router.post("/forget", response_model=ForgetReceipt, tags=["lifecycle"],
                 summary="Remove memories from every store; with no ids, the whole namespace (MemoryEngine.forget)")
    async def forget(body: ForgetRequest, request: Request) -> ForgetReceipt:
        ns = _namespace(request, body.user_id, body.agent_id, body.session_id)
        return await _engine(request).aforget(ns, record_ids=body.record_ids, hook_ids=body.hook_ids)

    @router.post("/memories/update", response_model=AddResult, tags=["memories"],
                 summary="Write a new version of a memory (MemoryEngine.update)")
    async def update(body: UpdateRequest, request: Request) -> AddResult:
        ns = _namespace(request, body.user_id, body.agent_id, body.session_id)
        return await _engine(request).aupdate(ns, body.id, content=body.content, metadata=body.metadata,
                                              timestamp=body.timestamp)

    @router.post("/memories/history", response_model=list[MemoryVersion], tags=["memories"],
                 summary="The versions of a memory and the operations on it (MemoryEngine.history)")
    async def history(body: HistoryRequest, request: Request) -> list[MemoryVersion]:
        ns = _namespace(request, body.user_id, body.agent_id, body.session_id)
        return await _engine(request).ahistory(ns, body.id)

    @router.post("/memories/delete", response_model=ForgetReceipt, tags=["memories"],
                 summary="Remove exactly these memories from every store (MemoryEngine.delete)")
    async def delete(body: DeleteRequest, request: Request) -> ForgetReceipt:
        ns = _namespace(request, body.user_id, body.agent_id, body.session_id)
        return await _engine(request).adelete(ns, body.ids)

    @router.get("/memories", response_model=MemoryPage, tags=["memories"],
                summary="The current memories, most recently written first, a page at a time "
                        "(MemoryEngine.list_memories)")
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

    @router.post("/memories/list", response_model=MemoryPage, tags=["memories"],
                 summary="list_memories with the filters in the body")
    async def list_memories_body(body: ListMemoriesRequest, request: Request) -> MemoryPage:
        ns = _namespace(request, body.user_id, body.agent_id, body.session_id)
        return await _engine(request).alist_memories(ns, filters=body.filters, limit=body.limit, cursor=body.cursor)

    @router.get("/memories/{memory_id}", response_model=Memory, tags=["memories"],
                summary="One memory: its current version and its whole history (MemoryEngine.get_memory)")
    async def get_memory(memory_id: str, request: Request, user_id: str, agent_id: str | None = None,
                         session_id: str | None = None) -> Memory:
        ns = _namespace(request, user_id, agent_id, session_id)
        return await _engine(request).aget_memory(ns, memory_id)

    @router.get("/overview", response_model=list[NamespaceSummary], tags=["store"],
                summary="Every namespace with its counts of memories and turns (a pinned token: its user's)")
    async def overview(request: Request) -> list[NamespaceSummary]:
        principal = principal_of(request)
        return [s for s in await _engine(request).aoverview() if principal.may_access(s.user_id)]

    @router.get("/export", tags=["store"], response_class=StreamingResponse,
                summary="The memories as JSON lines, the format of memext export (MemoryEngine.export)",
                responses={200: {"content": {"application/x-ndjson": {}}}})
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

    @router.post("/import", response_model=ImportReport, tags=["store"],
                 summary="Restore an export (or mem0's get_all output, format=mem0); the body is the file "
                         "(MemoryEngine.import_records)")
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

    @router.get("/stats", response_model=StoreStats, tags=["store"], summary="Counts and size of the store")
    async def stats(request: Request) -> StoreStats:
        if principal_of(request).user_id is not None:
            raise PermissionDenied(None, "store statistics need a token that is not pinned to a user")
        return await _engine(request).astats()

    @router.get("/namespaces", response_model=list[Namespace], tags=["store"],
                summary="The (user_id, agent_id) partitions (a pinned token sees only its user's)")
    async def namespaces(request: Request) -> list[Namespace]:
        principal = principal_of(request)
        return [ns for ns in await _engine(request).anamespaces() if principal.may_access(ns.user_id)]

    @router.get("/info", response_model=InfoResponse, tags=["store"],
                summary="Server version, engine configuration, embedder id and the caller's pinned user")
    async def info(request: Request) -> InfoResponse:
        engine = _engine(request)
        config: dict[str, Any] = engine.config.model_dump(mode="json")
        return InfoResponse(version=__version__, config=config,
                            embedder_id=engine.embedder.id if engine.embedder is not None else None,
                            user_id=principal_of(request).user_id)

    return router
