"""The MCP face of ``memext serve``: tools and a resource over one engine, with the official ``mcp`` SDK.

Tools: ``search_memory``, ``save_memory``, ``list_memories``, ``get_memory``, ``memory_index``,
``open_memory_file``, ``pre_compress``, ``forget``, ``compact``, ``update_memory``, ``memory_history``,
``delete_memory``. Each takes ``user_id`` (and optional
``agent_id``, ``session_id``). Resource template: ``memory://{user_id}/index`` (the memory index of a user).
Prompt: ``with_memory(user_id)``, a system prompt with the memory index and how to use the tools. Bad arguments
— an unknown argument name included — come back as tool errors that name the error type, the field and the fix
(never the rejected value, so no memory text reaches a log); a prompt or resource the caller may not render is an
MCP error of the same text, not a traceback in the server log.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any, Literal, TypeVar

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ToolError
from mcp.shared.exceptions import MCPError
from mcp.types import CallToolResult, InputRequiredResult
from pydantic import BaseModel, Field

from .. import __version__
from ..engine import MemoryEngine
from ..errors import InvalidArgumentError, MemoryExtError
from ..models import ActionState, Namespace, Turn
from ..results import Memory
from ..telemetry import face
from .auth import STATE_KEY, PermissionDenied
from .schemas import check_arguments
from .settings import LOCAL, Principal

__all__ = ["INSTRUCTIONS", "build_mcp"]

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])
INVALID_PARAMS = -32602
"""JSON-RPC's code for invalid method parameters (what a refused prompt or resource answers)."""

INSTRUCTIONS = """Long-term memory of past conversations (memory-ext). Every tool takes user_id: the person whose \
memory it is. Before answering a question that may depend on the past (preferences, facts about the user, earlier \
decisions, what failed before), call search_memory. Save what is worth remembering with save_memory (a short \
note in `content`, or the conversation's `turns`). memory_index lists the user's memory files with hook ids; \
open_memory_file returns a whole file. Before your context is compressed or truncated, call pre_compress with \
the whole context so nothing is lost."""


class MemoryHit(BaseModel):
    """One remembered item."""

    id: str = Field(description="Memory id (pass it to forget(record_ids=[...]) to remove it).")
    text: str
    score: float = Field(description="Relevance (higher is better).")
    time: datetime | None = Field(default=None, description="When it was said (UTC).")
    speaker: str | None = None
    role: str | None = None
    session_id: str | None = None
    kind: str = "turn"
    metadata: dict[str, Any] = Field(default_factory=dict, description="The metadata the memory was saved with.")


class SearchOutput(BaseModel):
    items: list[MemoryHit]
    context: str = Field(description="The found turns in their conversational windows, ready for a prompt.")
    degraded: list[str] = Field(default_factory=list, description="Channels that failed (the result may be weaker).")


class SaveOutput(BaseModel):
    turn_ids: list[str]
    saved: int = Field(description="How many turns were stored.")


class HistoryEntry(BaseModel):
    operation: str = Field(description="add, update, supersede or delete")
    time: str
    content: str | None = Field(description="None once deleted.")
    current: bool


class MemoryEntry(BaseModel):
    """One memory at its current version."""

    id: str = Field(description="The memory's id (update_memory, memory_history, delete_memory take it).")
    content: str
    time: datetime | None = Field(default=None, description="When this version was written (UTC).")
    speaker: str | None = None
    role: str
    session_id: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    versions: int = Field(description="How many versions it has had (1: never updated).")


class MemoryListOutput(BaseModel):
    memories: list[MemoryEntry]
    next_cursor: str | None = Field(default=None, description="Pass it as cursor for the next page (null: the last).")


class MemoryDetailOutput(BaseModel):
    memory: MemoryEntry
    history: list[HistoryEntry] = Field(description="Every version and operation, oldest first.")


class MemoryFileOutput(BaseModel):
    hook_id: str
    title: str
    period: str
    period_key: str
    text: str = Field(description="The whole file as Markdown.")


class ForgetOutput(BaseModel):
    turns: int
    records: int
    files_deleted: list[str]
    files_updated: list[str]


class UpdateOutput(BaseModel):
    id: str = Field(description="The new version's id (the memory keeps its external id).")
    turn_id: str


class CompactOutput(BaseModel):
    changed: bool
    steps: list[dict[str, Any]]


class PreCompressOutput(BaseModel):
    hook_id: str = Field(description="The memory file now holding the context (open_memory_file opens it).")


def _principal(ctx: Context | None, stdio_principal: Principal) -> Principal:
    request = ctx.request_context.request if ctx is not None else None
    if request is None:  # stdio: the client launched this process itself
        return stdio_principal
    state = getattr(request, "scope", {}).get("state") or {}
    principal = state.get(STATE_KEY)
    return principal if isinstance(principal, Principal) else LOCAL


def _tool_error(exc: BaseException) -> ToolError:
    """A tool error a model can act on: type, field and fix (the rejected value is left out)."""
    if isinstance(exc, PermissionDenied):
        return ToolError(f"PermissionDeniedError: field {exc.field!r}: {exc.message}")
    field, fix = getattr(exc, "field", None), getattr(exc, "fix", None)
    if field is not None and fix is not None:
        return ToolError(f"{type(exc).__name__}: field {field!r}: {fix}")
    return ToolError(f"{type(exc).__name__}: {exc}")


async def _guard(call: Callable[[], Awaitable[T]]) -> T:
    try:
        return await call()
    except (MemoryExtError, PermissionDenied) as exc:
        raise _tool_error(exc) from None


class _MemoryServer(MCPServer):
    """The SDK's server, with the door every tool call passes first: an argument the tool does not take is a tool
    error naming it (the SDK would drop it silently: a misspelt ``session_id`` would widen a search or a forget
    to the whole user), and the arguments get the checks of a REST body
    (:func:`~memory_ext.server.schemas.check_arguments`)."""

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.arguments: dict[str, frozenset[str]] = {}
        """tool name -> the arguments it takes (filled by :meth:`memory_tool`)."""

    def memory_tool(self, fn: F) -> F:
        """``@server.tool()`` that also records the tool's argument names."""
        self.arguments[fn.__name__] = frozenset(name for name in inspect.signature(fn).parameters if name != "ctx")
        self.tool()(fn)
        return fn

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None = None
                        ) -> CallToolResult | InputRequiredResult:
        known = self.arguments.get(name)
        if known is not None:
            unknown = sorted(set(arguments) - known, key=str)
            if unknown:
                raise _tool_error(InvalidArgumentError(
                    str(unknown[0]), None, f"{name} takes no argument {str(unknown[0])!r}; its arguments are "
                                           + ", ".join(sorted(known))))
            try:
                check_arguments(arguments)
            except MemoryExtError as exc:
                raise _tool_error(exc) from None
        with face("mcp"):  # the engine spans of this call say where it came from (memory_ext.telemetry)
            return await super().call_tool(name, arguments, context)


def _refused(exc: MemoryExtError | PermissionDenied) -> MCPError:
    """A prompt the caller may not render: an MCP error the SDK passes on as it is (no "Error rendering prompt"
    with a traceback in the server log)."""
    return MCPError(code=INVALID_PARAMS, message=str(_tool_error(exc)))


def build_mcp(engine_of: Callable[[], MemoryEngine], *, stdio_principal: Principal = LOCAL) -> MCPServer:
    """An :class:`MCPServer` whose tools call the engine ``engine_of()`` returns (in worker threads)."""
    server = _MemoryServer("memory-ext", instructions=INSTRUCTIONS, version=__version__, log_level="WARNING")

    def namespace(ctx: Context | None, user_id: str, agent_id: str | None, session_id: str | None = None) -> Namespace:
        principal = _principal(ctx, stdio_principal)
        if not principal.may_access(user_id):
            raise PermissionDenied("user_id", f"this token is pinned to user {principal.user_id!r}; "
                                              f"use user_id={principal.user_id!r}")
        return Namespace(user_id, agent_id, session_id)

    @server.memory_tool
    async def search_memory(query: str, user_id: str, agent_id: str | None = None, session_id: str | None = None,
                            k: int = 5, filters: dict[str, Any] | None = None,
                            action_state: ActionState | None = None, include_cold: bool = False,
                            as_of: str | None = None, min_score: float | None = None,
                            ctx: Context | None = None) -> SearchOutput:
        """Search the user's long-term memory for what helps with `query`.

        Returns the best `k` remembered items (text, time, speaker, score, ids) and `context`, the found turns in
        their conversational windows. `filters` may hold session_id, speaker, role (user|assistant), since, until
        (ISO times), kinds and metadata ({"topic": "travel"}, {"priority": {"$gte": 2}}). `as_of` (an ISO time)
        answers with what was true then, older versions included. `action_state` describes what you are doing
        (current_subgoal, last_tool_name, failure_signal, missing_slots, ...) so that past procedures and
        failures relevant to it are found too.
        Time words in the query ("last Saturday") are understood. `session_id` limits the search to one session.
        Scores are relevances in 0-1; below 0.5 an item is a weak match. `min_score` (e.g. 0.5) leaves weak
        matches out: an empty `items` then means the memory holds nothing relevant to the query.
        """
        async def run() -> SearchOutput:
            ns = namespace(ctx, user_id, agent_id, session_id)
            result = await engine_of().asearch(query, ns, k=k, filters=filters, action_state=action_state,
                                               include_cold=include_cold, as_of=as_of, min_score=min_score)
            items = [MemoryHit(id=i.id, text=i.text, score=i.score, time=i.timestamp, speaker=i.speaker,
                               role=str(i.role) if i.role else None, session_id=i.session_id, kind=str(i.kind),
                               metadata=dict(i.metadata)) for i in result.items]
            return SearchOutput(items=items, context=result.context,
                                degraded=[f"{e.channel}: {e.error_type}" for e in result.channel_errors])
        return await _guard(run)

    @server.memory_tool
    async def save_memory(user_id: str, content: str | None = None, turns: list[dict[str, Any]] | None = None,
                          agent_id: str | None = None, session_id: str | None = None,
                          speaker: str | None = None, metadata: dict[str, Any] | None = None,
                          external_id: str | None = None, ctx: Context | None = None) -> SaveOutput:
        """Save something to the user's long-term memory: a note in `content`, or conversation `turns`.

        A note is stored as one turn (role "assistant", the given `speaker`), e.g. "Maya is allergic to
        shellfish", with `metadata` (a JSON object: search_memory can filter on it) and an `external_id` (saving
        the same external_id again stores nothing new; update_memory changes it). `turns` is a list of
        {"role": "user"|"assistant"|"system"|"tool", "content": "...", optional "speaker", "timestamp" (ISO),
        "external_id", "metadata"}. Give `content` or `turns`, not both.
        """
        async def run() -> SaveOutput:
            ns = namespace(ctx, user_id, agent_id, session_id)
            if (content is None) == (turns is None):
                raise InvalidArgumentError("content", content, "give either content (a note) or turns, not both")
            if content is None and (metadata is not None or external_id is not None):
                raise InvalidArgumentError("metadata" if metadata is not None else "external_id",
                                           metadata if metadata is not None else external_id,
                                           "metadata and external_id are for a note (content); give each of "
                                           "the turns its own")
            batch: list[Turn | dict[str, Any]] = list(turns or [])
            if content is not None:
                batch = [Turn(role="assistant", content=content, speaker=speaker, external_id=external_id,
                              metadata={"saved_by": "mcp:save_memory", **(metadata or {})})]
            added = await engine_of().aadd_turns(batch, ns)
            return SaveOutput(turn_ids=list(added.turn_ids), saved=len(added.turn_ids))
        return await _guard(run)

    @server.memory_tool
    async def memory_index(user_id: str, agent_id: str | None = None, budget_tokens: int | None = None,
                           query: str | None = None, ctx: Context | None = None) -> str:
        """The user's memory index: one line per memory file (hook id, date, title, abstract, tags).

        Put it in your working context to know what you remember; open a file with open_memory_file(hook_id).
        With `query`, the files most relevant to it come first. `budget_tokens` caps the length.
        """
        async def run() -> str:
            ns = namespace(ctx, user_id, agent_id)
            text = await engine_of().arender_prompt(ns, budget_tokens=budget_tokens, query=query)
            return text or "(no memory files yet)"
        return await _guard(run)

    @server.memory_tool
    async def open_memory_file(hook_id: str, user_id: str, agent_id: str | None = None,
                               ctx: Context | None = None) -> MemoryFileOutput:
        """Open a whole memory file by the hook id that memory_index shows (6+ leading characters are enough).

        Returns every turn of the file as Markdown, tool calls included.
        """
        async def run() -> MemoryFileOutput:
            ns = namespace(ctx, user_id, agent_id)
            memory_file = await engine_of().aretrieve(hook_id, ns)
            hook = memory_file.hook
            return MemoryFileOutput(hook_id=hook.id, title=hook.title, period=hook.period,
                                    period_key=hook.period_key, text=memory_file.text)
        return await _guard(run)

    @server.memory_tool
    async def pre_compress(user_id: str, context: str | list[dict[str, Any]], agent_id: str | None = None,
                           session_id: str | None = None, task_state: dict[str, Any] | None = None,
                           estimated_tokens: int | None = None, ctx: Context | None = None) -> PreCompressOutput:
        """Save your whole current context before it is compressed or truncated, so nothing is lost.

        `context` is the raw text (a "User: ... / Assistant: ..." transcript is parsed into turns) or a list of
        {"role", "content"} messages. `task_state` (JSON) records what you were doing. Turns already in memory
        are linked, not duplicated. Returns the hook id of the memory file that now holds it.
        """
        async def run() -> PreCompressOutput:
            ns = namespace(ctx, user_id, agent_id, session_id)
            hook_id = await engine_of().apre_compress(ns, context, estimated_tokens=estimated_tokens,
                                                      task_state=task_state)
            return PreCompressOutput(hook_id=hook_id)
        return await _guard(run)

    @server.memory_tool
    async def forget(user_id: str, agent_id: str | None = None, session_id: str | None = None,
                     record_ids: list[str] | None = None, hook_ids: list[str] | None = None,
                     everything: bool = False, ctx: Context | None = None) -> ForgetOutput:
        """Remove memories for good, from every index: the items `record_ids` (ids from search_memory or
        list_memories, or external ids: the ids get_memory and delete_memory take), the
        memory files `hook_ids` (from memory_index), or — only with everything=true — the whole session
        (`session_id`) or all of the user's memory. Returns what was removed.
        """
        async def run() -> ForgetOutput:
            ns = namespace(ctx, user_id, agent_id, session_id)
            if not (record_ids or hook_ids) and not everything:
                raise InvalidArgumentError("everything", everything, "give record_ids or hook_ids, or set "
                                           "everything=true to forget the whole session or user")
            receipt = await engine_of().aforget(ns, record_ids=record_ids or None, hook_ids=hook_ids or None)
            return ForgetOutput(turns=receipt.turns, records=receipt.records,
                                files_deleted=list(receipt.files_deleted), files_updated=list(receipt.files_updated))
        return await _guard(run)

    @server.memory_tool
    async def update_memory(user_id: str, id: str, content: str, agent_id: str | None = None,
                            ctx: Context | None = None) -> UpdateOutput:
        """Correct or replace a memory: `id` is an item id from search_memory (or a turn's external id); `content`
        its new text. The old version is kept as history (memory_history) and never returned by search again.
        """
        async def run() -> UpdateOutput:
            added = await engine_of().aupdate(namespace(ctx, user_id, agent_id), id, content=content)
            return UpdateOutput(id=added.record_ids[0], turn_id=added.turn_ids[0])
        return await _guard(run)

    @server.memory_tool
    async def memory_history(user_id: str, id: str, agent_id: str | None = None,
                             ctx: Context | None = None) -> list[HistoryEntry]:
        """The versions of one memory (`id` from search_memory, or an external id), oldest first, with the
        operation that made each (add, update, supersede, delete) and whether it is the current one.
        """
        async def run() -> list[HistoryEntry]:
            versions = await engine_of().ahistory(namespace(ctx, user_id, agent_id), id)
            return [HistoryEntry(operation=v.operation, time=v.timestamp.isoformat(), content=v.content,
                                 current=v.current) for v in versions]
        return await _guard(run)

    def entry(m: Memory) -> MemoryEntry:
        return MemoryEntry(id=m.id, content=m.content, time=m.timestamp, speaker=m.speaker, role=m.role,
                           session_id=m.session_id, metadata=dict(m.metadata), versions=m.version_count)

    @server.memory_tool
    async def list_memories(user_id: str, agent_id: str | None = None, session_id: str | None = None,
                            filters: dict[str, Any] | None = None, limit: int = 20, cursor: str | None = None,
                            ctx: Context | None = None) -> MemoryListOutput:
        """List what you remember about the user: the current memories, most recently written first, `limit` at
        a time (pass `next_cursor` back as `cursor` for more). `filters` are search_memory's (speaker, since,
        until, metadata, ...). Use it to review or tidy the memory; use search_memory to find something.
        """
        async def run() -> MemoryListOutput:
            page = await engine_of().alist_memories(namespace(ctx, user_id, agent_id, session_id), filters=filters,
                                                    limit=limit, cursor=cursor)
            return MemoryListOutput(memories=[entry(m) for m in page.items], next_cursor=page.next_cursor)
        return await _guard(run)

    @server.memory_tool
    async def get_memory(user_id: str, id: str, agent_id: str | None = None, session_id: str | None = None,
                         ctx: Context | None = None) -> MemoryDetailOutput:
        """One memory by id (from list_memories or search_memory, or an external id): its current version and
        its whole history (every version, update and delete)."""
        async def run() -> MemoryDetailOutput:
            memory = await engine_of().aget_memory(namespace(ctx, user_id, agent_id, session_id), id)
            return MemoryDetailOutput(memory=entry(memory), history=[
                HistoryEntry(operation=v.operation, time=v.timestamp.isoformat(), content=v.content,
                             current=v.current) for v in memory.history])
        return await _guard(run)

    @server.memory_tool
    async def delete_memory(user_id: str, ids: list[str], agent_id: str | None = None,
                            ctx: Context | None = None) -> ForgetOutput:
        """Delete exactly these memories (`ids` from search_memory, or external ids), every version, from every
        index; the history keeps that they were deleted, not what they said.
        """
        async def run() -> ForgetOutput:
            receipt = await engine_of().adelete(namespace(ctx, user_id, agent_id), ids)
            return ForgetOutput(turns=receipt.turns, records=receipt.records,
                                files_deleted=list(receipt.files_deleted), files_updated=list(receipt.files_updated))
        return await _guard(run)

    @server.memory_tool
    async def compact(user_id: str, agent_id: str | None = None,
                      period: Literal["due", "weekly", "monthly"] = "due", key: str | None = None,
                      ctx: Context | None = None) -> CompactOutput:
        """Tidy the user's memory files: merge finished weeks (weekly) and keep the best of finished months
        (monthly); "due" (the default) does whatever is due. Nothing becomes unsearchable. `key` names one
        week ("2026-W47") or month ("2026-11"). Safe to repeat.
        """
        async def run() -> CompactOutput:
            ns = namespace(ctx, user_id, agent_id)
            engine = engine_of()
            if period == "due":
                report = await engine.amaybe_compact(ns)
            else:
                report = await engine.acompact(ns, period, key=key)
            return CompactOutput(changed=report.changed, steps=[dict(s) for s in report.steps])
        return await _guard(run)

    @server.prompt(name="with_memory", title="Answer with long-term memory",
                   description="A system prompt holding the user's memory index and how to use the memory tools.")
    async def with_memory(user_id: str, ctx: Context) -> str:
        try:
            ns = namespace(ctx, user_id, None)
            with face("mcp"):
                index = await engine_of().arender_prompt(ns) or "(no memory files yet)"
        except (MemoryExtError, PermissionDenied) as exc:
            raise _refused(exc) from None
        return (f"You have a long-term memory of past conversations with the user {user_id!r}. Call search_memory "
                f"(user_id={user_id!r}) before answering anything that may depend on the past, save what is worth "
                f"remembering with save_memory, and call pre_compress before your context is compressed.\n\n"
                f"{index}")

    @server.resource("memory://{user_id}/index", name="memory_index", mime_type="text/markdown",
                     description="The memory index of a user (one line per memory file, with hook ids).")
    async def index_resource(user_id: str, ctx: Context) -> str:
        try:
            ns = namespace(ctx, user_id, None)
            with face("mcp"):
                return await engine_of().arender_prompt(ns) or "(no memory files yet)"
        except (MemoryExtError, PermissionDenied) as exc:
            raise ResourceError(str(_tool_error(exc))) from None

    return server
