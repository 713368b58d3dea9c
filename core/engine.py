"""MemoryEngine: the write path, the read path and forgetting, over one store directory.

>>> import tempfile
>>> from memory_ext import MemoryEngine, Turn
>>> with MemoryEngine.open(tempfile.mkdtemp(), embedder="hashing") as engine:
...     _ = engine.add_turns([Turn(role="user", content="I adopted a beagle called Toby", speaker="Ana")], "ana")
...     engine.search("what dog does Ana have?", "ana", k=1).items[0].text
'I adopted a beagle called Toby'

The engine is synchronous and thread-safe. Every public method has an ``a``-prefixed async twin
(``aadd_turns``, ``asearch``, ...) that runs it in a worker thread, so an event loop is never blocked.
"""

from __future__ import annotations

import asyncio
import math
import os
import sqlite3
import time
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from .config import EngineConfig
from .embed import Embedder, HashingEmbedder, check_vectors, resolve_embedder
from .errors import ConfigError, InvalidQueryError, InvalidTurnError, RetrievalError, ValidationError
from .ingest.derive import derive_turn_record, new_id
from .models import (
    ActionState,
    ChannelError,
    EvidenceRoute,
    Namespace,
    RetrievedItem,
    SearchPlan,
    SearchResult,
    Turn,
    to_utc,
)
from .rank.fusion import rrf
from .recall.base import RecallContext, Recaller, RecallRequest
from .recall.runner import run_channels
from .registry import recallers, vector_backends
from .store.keyword import KeywordIndex
from .store import chroma as _chroma  # noqa: F401  (registers the backend; chromadb loads only when used)
from .store.sqlite import TruthStore
from .store.vector import VectorIndex
from .text import estimate_tokens

__all__ = ["AddResult", "ForgetReceipt", "MemoryEngine", "StoreStats"]

CHANNELS = ("keyword", "vector")
ACTION_ROUTE_WEIGHT = 0.5
FILTER_KEYS = ("session_id", "speaker", "role", "since", "until", "kinds")


class AddResult(BaseModel):
    """What ``add_turns`` wrote."""

    model_config = ConfigDict(frozen=True)
    turn_ids: tuple[str, ...]
    record_ids: tuple[str, ...]


class ForgetReceipt(BaseModel):
    """What ``forget`` removed, from every store (truth store, keyword and vector indexes)."""

    model_config = ConfigDict(frozen=True)
    namespace: Namespace
    turns: int
    records: int


class StoreStats(BaseModel):
    """Counts and sizes of a store."""

    model_config = ConfigDict(frozen=True)
    path: str
    namespaces: int
    turns: int
    records: int
    vectors: int
    embedder_id: str | None
    vector_backend: str
    disk_bytes: int


def _embedder_for_stored_id(stored: str | None) -> Embedder | str | None:
    """When no embedder is given, reopen a store with the embedder that built it (if it is a built-in)."""
    if stored is None:
        return None
    if stored.startswith("hashing-v1:"):
        return HashingEmbedder(dim=int(stored.split(":")[1]))
    return None


class MemoryEngine:
    """Long-term memory over one store directory.

    Open it with :meth:`open`; write with :meth:`add_turns`; read with :meth:`search`; remove with
    :meth:`forget`. See the module docstring for a runnable example.
    """

    def __init__(self, store: TruthStore, config: EngineConfig, embedder: Embedder | None,
                 embedder_warning: str | None) -> None:
        self._store = store
        self.config = config
        self.embedder = embedder
        self._embedder_warning = embedder_warning
        self._keyword = KeywordIndex()
        store.add_schema(KeywordIndex.create_schema)
        self._vector: VectorIndex | None = None
        if config.globals.vector_enabled and embedder is not None:
            backend = vector_backends.resolve("storage.vector_backend", config.storage.vector_backend)
            self._vector = backend(storage=config.storage, directory=store.directory, embedder_id=embedder.id,
                                   dim=embedder.dim, store_id=store.store_id)
        ctx = RecallContext(store=store, keyword_index=self._keyword, vector_index=self._vector, embedder=embedder)
        self._recallers: dict[str, Recaller] = {
            "keyword": recallers.resolve("recall.keyword_recaller", config.recall.keyword_recaller)(ctx)}
        if self._vector is not None:
            self._recallers["vector"] = recallers.resolve("recall.vector_recaller", config.recall.vector_recaller)(ctx)
        self._pool = ThreadPoolExecutor(max_workers=max(4, 4 * len(self._recallers)),
                                        thread_name_prefix="memory-ext-recall")
        self._closed = False

    # -- construction ----------------------------------------------------------------------------------------
    @classmethod
    def open(cls, path: str | os.PathLike[str] | None = None, *,
             config: EngineConfig | Mapping[str, Any] | str | os.PathLike[str] | None = None,
             embedder: Embedder | str | None = None, read_only: bool = False) -> MemoryEngine:
        """Open (or create) the store in directory ``path`` (default ``~/.memory_ext``).

        ``config`` is an :class:`EngineConfig`, a mapping, or a YAML/TOML/JSON path; ``embedder`` an
        :class:`~memory_ext.embed.Embedder` or a registered name (``"e5"``, the default, or ``"hashing"``).
        Configuration errors raise :class:`~memory_ext.errors.ConfigError` here, never at the first search.
        ``read_only=True`` opens a store that another process writes.
        """
        cfg = EngineConfig.coerce(config if not isinstance(config, os.PathLike) else Path(config))
        _validate_config(cfg)
        directory = Path(path).expanduser() if path is not None else Path("~/.memory_ext").expanduser()
        store = TruthStore(directory, read_only=read_only)
        try:
            emb: Embedder | None = None
            warning: str | None = None
            if cfg.globals.vector_enabled:
                stored = store.get_meta("embedder_id")
                emb, warning = resolve_embedder(embedder if embedder is not None
                                                else _embedder_for_stored_id(stored))
                store.check_embedder(emb.id)  # refuses to mix embedders (also a fallback in an e5 store)
            return cls(store, cfg, emb, warning)
        except BaseException:
            store.close()
            raise

    def close(self) -> None:
        """Release the store (and its writer lock) and the worker threads. Idempotent."""
        if self._closed:
            return
        self._closed = True
        self._pool.shutdown(wait=False, cancel_futures=True)
        if self._vector is not None:
            self._vector.close()
        self._store.close()

    def __enter__(self) -> MemoryEngine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def path(self) -> Path:
        """The store directory."""
        return self._store.directory

    # -- write path ------------------------------------------------------------------------------------------
    def add_turns(self, turns: Iterable[Turn | Mapping[str, Any]], namespace: Namespace | str) -> AddResult:
        """Store turns losslessly and index them, in one transaction (all or nothing).

        ``turns`` are :class:`Turn` objects or mappings with at least ``role`` and ``content``. A turn without a
        timestamp gets the current time; one without a session gets ``namespace.session_id``. Invalid input
        raises a :class:`~memory_ext.errors.ValidationError` naming the field, the value and the fix, and
        nothing is written.
        """
        self._check_open()
        ns = Namespace.coerce(namespace)
        if isinstance(turns, (Turn, Mapping, str, bytes)):
            raise InvalidTurnError("turns", turns, "pass a list of turns, even for a single turn")
        items = [Turn.coerce(t, i) for i, t in enumerate(turns)]  # type: ignore[arg-type]
        limits = self.config.limits
        if len(items) > limits.max_batch_turns:
            raise InvalidTurnError("turns", f"<{len(items)} turns>",
                                   f"split into batches of at most {limits.max_batch_turns} (limits.max_batch_turns)")
        for i, t in enumerate(items):
            if len(t.content) > limits.max_content_chars:
                raise InvalidTurnError(f"turns[{i}].content", t.content,
                                       f"content has {len(t.content)} characters; the limit is "
                                       f"{limits.max_content_chars} (limits.max_content_chars): split the turn")
        if not items:
            return AddResult(turn_ids=(), record_ids=())
        given_ids = [t.id for t in items if t.id is not None]
        if len(given_ids) != len(set(given_ids)):
            dup = next(i for i in given_ids if given_ids.count(i) > 1)
            raise InvalidTurnError("turns[].id", dup, "turn ids must be unique; omit id to get a fresh one")
        now = datetime.now(UTC)
        turn_rows = []
        for t in items:
            ts = t.timestamp or now
            turn_rows.append({
                "id": t.id or new_id("turn"), "session_id": t.session_id or ns.session_id, "role": t.role.value,
                "speaker": t.speaker, "content": t.content, "ts": ts.timestamp(), "external_id": t.external_id,
                "tool_calls": list(t.tool_calls), "attachments": list(t.attachments), "metadata": dict(t.metadata),
                "token_count": estimate_tokens(t.content),
            })
        records = [derive_turn_record(r) for r in turn_rows]
        vectors = None
        if self._vector is not None and self.embedder is not None:
            texts = [r["index_text"] for r in records]
            vectors = check_vectors(self.embedder, self.embedder.embed_documents(texts), len(texts))
        with self._store.transaction("add_turns") as conn:
            ns_id = self._store.ensure_namespace(conn, ns.key)
            seq = self._store.next_seq(conn, ns_id)
            for offset, row in enumerate(turn_rows):
                row["seq"] = seq + offset
            try:
                try:
                    self._store.insert_turns(conn, ns_id, turn_rows)
                except sqlite3.IntegrityError as exc:
                    raise InvalidTurnError("turns[].id", [t.id for t in items if t.id],
                                           "turn ids must be unique in the store; omit id to get a fresh one "
                                           f"({exc})") from None
                rids = self._store.insert_records(conn, ns_id, records)
                self._keyword.add(conn, ns_id, list(zip(rids, (r["index_text"] for r in records), strict=True)))
                if vectors is not None and self._vector is not None and self.embedder is not None:
                    self._store.insert_embeddings(conn, ns_id, rids, vectors, self.embedder.id)
                    self._vector.add(conn, ns_id, rids, vectors)
            except BaseException:
                self._keyword.invalidate(ns_id)
                if self._vector is not None:
                    self._vector.invalidate(ns_id)
                raise
        return AddResult(turn_ids=tuple(r["id"] for r in turn_rows), record_ids=tuple(r["id"] for r in records))

    # -- read path -------------------------------------------------------------------------------------------
    def search(self, query: str, namespace: Namespace | str, *, k: int = 10,
               filters: Mapping[str, Any] | None = None, action_state: ActionState | Mapping[str, Any] | None = None,
               explain: bool = False) -> SearchResult:
        """Find the memories that help with ``query`` (and, if given, what the agent is doing).

        Channels (keyword BM25 and vector) run in parallel; their rankings are fused by RRF. With an
        ``action_state``, a second route searches for its subgoal, tentative action, tool and failure, at half
        weight. ``filters`` keys: ``session_id``, ``speaker``, ``role``, ``since``, ``until``, ``kinds``.
        A channel that fails or times out is listed in ``channel_errors`` (``degraded`` is then True); only if
        every channel fails does this raise :class:`~memory_ext.errors.RetrievalError`.
        """
        self._check_open()
        t0 = time.perf_counter()
        ns = Namespace.coerce(namespace)
        if not isinstance(query, str) or not query.strip():
            raise InvalidQueryError("query", query, "give a non-empty question or statement")
        if len(query) > self.config.limits.max_query_chars:
            raise InvalidQueryError("query", query, f"queries are at most {self.config.limits.max_query_chars} "
                                                    "characters (limits.max_query_chars)")
        if isinstance(k, bool) or not isinstance(k, int) or k <= 0 or k > self.config.limits.max_k:
            raise InvalidQueryError("k", k, f"give an integer between 1 and {self.config.limits.max_k}")
        state = _coerce_action_state(action_state)
        where, args = _filter_sql(filters, ns.session_id)
        plan = _plan(query, state)
        warnings = (self._embedder_warning,) if self._embedder_warning else ()
        fallback_errors = [ChannelError(channel="embedder", error_type="EmbedderFallback",
                                        message=self._embedder_warning)] if self._embedder_warning else []
        ns_id = self._store.find_namespace(ns.key)
        if ns_id is None:
            return SearchResult(query=query, plan=plan, channel_errors=tuple(fallback_errors), warnings=warnings,
                                timings_ms={"total": _ms(t0)})
        allowed = self._store.filter_rids(ns_id, where, args) if where else None
        if allowed is not None and not allowed:
            return SearchResult(query=query, plan=plan, channel_errors=tuple(fallback_errors), warnings=warnings,
                                timings_ms={"total": _ms(t0)})
        limit = max(k, self.config.recall.candidates_per_channel)
        calls = {}
        weights = {}
        for route in plan.routes:
            route_weight = 1.0 if route.goal == "query" else ACTION_ROUTE_WEIGHT
            text = " ".join(route.queries)
            for channel, recaller in self._recallers.items():
                name = channel if route.goal == "query" else f"{channel}@{route.goal}"
                request = RecallRequest(query=text, ns_id=ns_id, limit=limit, allowed=allowed)
                calls[name] = (lambda r=recaller, q=request: r.recall(q))
                weights[name] = route_weight * self.config.recall.channel_weights.get(channel, 1.0)
        run = run_channels(self._pool, calls, self.config.recall.channel_timeout_s)
        if not run.results:
            raise RetrievalError(run.errors)
        t_fuse = time.perf_counter()
        rankings = {name: [rid for rid, _ in hits] for name, hits in run.results.items()}
        raw_scores = {name: dict(hits) for name, hits in run.results.items()}
        fused = rrf(rankings, k=self.config.recall.rrf_k, weights=weights)[:k]
        items = self._hydrate(ns_id, fused, raw_scores, explain)
        timings = {f"channel.{n}": v for n, v in run.timings_ms.items()}
        timings["fuse"] = _ms(t_fuse)
        timings["total"] = _ms(t0)
        return SearchResult(query=query, items=tuple(items), context=_render_context(items), plan=plan,
                            channel_errors=tuple(fallback_errors + run.errors), warnings=warnings,
                            timings_ms=timings)

    def _hydrate(self, ns_id: int, fused: Sequence[Any], raw_scores: Mapping[str, Mapping[int, float]],
                 explain: bool) -> list[RetrievedItem]:
        records = self._store.records_by_rid(ns_id, [f.id for f in fused])
        turns = self._store.turns_by_id(ns_id, (t for r in records.values() for t in r.turn_ids))
        items = []
        for f in fused:
            rec = records.get(f.id)
            if rec is None:  # deleted between recall and hydration
                continue
            src = [turns[t] for t in rec.turn_ids if t in turns]
            explanation = None
            if explain:
                explanation = {
                    "fusion": "rrf",
                    "rrf_k": self.config.recall.rrf_k,
                    "channels": {name: {"rank": rank, "score": raw_scores[name].get(f.id),
                                        "contribution": contribution}
                                 for name, (rank, contribution) in f.contributions.items()},
                    "score": f.score,
                }
            items.append(RetrievedItem(
                id=rec.id, text=rec.text, score=f.score, kind=rec.kind, turn_ids=tuple(rec.turn_ids),
                external_ids=tuple(t.external_id for t in src), session_id=rec.session_id,
                timestamp=datetime.fromtimestamp(rec.ref_ts, UTC) if rec.ref_ts is not None else None,
                speaker=rec.speaker, role=rec.source_role,
                channels={name: rank for name, (rank, _) in f.contributions.items()}, explanation=explanation))
        return items

    # -- reading turns back, forgetting, stats -------------------------------------------------------------
    def get_turns(self, namespace: Namespace | str, *, limit: int | None = None, offset: int = 0) -> list[Turn]:
        """The stored turns of a namespace (of its session, if it names one), oldest first."""
        self._check_open()
        ns = Namespace.coerce(namespace)
        ns_id = self._store.find_namespace(ns.key)
        if ns_id is None:
            return []
        rows = self._store.list_turns(ns_id, ns.session_id, limit, offset)
        return [Turn(role=r.role, content=r.content, speaker=r.speaker, session_id=r.session_id,
                     timestamp=datetime.fromtimestamp(r.ts, UTC) if r.ts is not None else None,
                     external_id=r.external_id, tool_calls=tuple(r.tool_calls), attachments=tuple(r.attachments),
                     metadata=r.metadata, id=r.id) for r in rows]

    def forget(self, namespace: Namespace | str) -> ForgetReceipt:
        """Remove a namespace — or, if it names a session, that session — from every store."""
        self._check_open()
        ns = Namespace.coerce(namespace)
        ns_id = self._store.find_namespace(ns.key)
        if ns_id is None:
            return ForgetReceipt(namespace=ns, turns=0, records=0)
        with self._store.transaction("forget") as conn:
            rids, n_turns = self._store.delete_rows(conn, ns_id, ns.session_id)
            if ns.session_id is None:
                self._keyword.drop_namespace(conn, ns_id)
            else:
                self._keyword.remove(conn, ns_id, rids)
            if self._vector is not None:
                self._vector.remove(conn, ns_id, rids)
        self._keyword.invalidate(ns_id)
        if self._vector is not None:
            self._vector.invalidate(ns_id)
        return ForgetReceipt(namespace=ns, turns=n_turns, records=len(rids))

    def stats(self) -> StoreStats:
        """Counts and on-disk size of the store."""
        self._check_open()
        return StoreStats(path=str(self._store.directory), namespaces=len(self._store.namespaces()),
                          turns=self._store.count("turns"), records=self._store.count("records"),
                          vectors=self._store.count("embeddings"), embedder_id=self._store.get_meta("embedder_id"),
                          vector_backend=self.config.storage.vector_backend if self._vector else "off",
                          disk_bytes=self._store.disk_bytes())

    def namespaces(self) -> list[Namespace]:
        """Every (user_id, agent_id) partition in the store."""
        self._check_open()
        return [Namespace(u, a or None) for _, u, a in self._store.namespaces()]

    def _check_open(self) -> None:
        if self._closed:
            raise ValidationError("engine", "closed", "open a new engine with MemoryEngine.open(path)")

    # -- async twins ---------------------------------------------------------------------------------------
    async def aadd_turns(self, turns: Iterable[Turn | Mapping[str, Any]], namespace: Namespace | str) -> AddResult:
        """Async twin of :meth:`add_turns` (runs in a worker thread)."""
        return await asyncio.to_thread(self.add_turns, list(turns), namespace)

    async def asearch(self, query: str, namespace: Namespace | str, *, k: int = 10,
                      filters: Mapping[str, Any] | None = None,
                      action_state: ActionState | Mapping[str, Any] | None = None,
                      explain: bool = False) -> SearchResult:
        """Async twin of :meth:`search` (runs in a worker thread)."""
        return await asyncio.to_thread(self.search, query, namespace, k=k, filters=filters,
                                       action_state=action_state, explain=explain)

    async def aget_turns(self, namespace: Namespace | str, *, limit: int | None = None,
                         offset: int = 0) -> list[Turn]:
        """Async twin of :meth:`get_turns`."""
        return await asyncio.to_thread(self.get_turns, namespace, limit=limit, offset=offset)

    async def aforget(self, namespace: Namespace | str) -> ForgetReceipt:
        """Async twin of :meth:`forget`."""
        return await asyncio.to_thread(self.forget, namespace)

    async def astats(self) -> StoreStats:
        """Async twin of :meth:`stats`."""
        return await asyncio.to_thread(self.stats)

    async def anamespaces(self) -> list[Namespace]:
        """Async twin of :meth:`namespaces`."""
        return await asyncio.to_thread(self.namespaces)

    async def aclose(self) -> None:
        """Async twin of :meth:`close`."""
        await asyncio.to_thread(self.close)

    async def __aenter__(self) -> MemoryEngine:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


# -- pure helpers ---------------------------------------------------------------------------------------------
def _ms(t0: float) -> float:
    return round((time.perf_counter() - t0) * 1000, 3)


def _validate_config(cfg: EngineConfig) -> None:
    """Resolve every implementation name and check the switches; raise ConfigError listing valid names."""
    g = cfg.globals
    for switch in ("graph_enabled", "layers_index_enabled"):
        if getattr(g, switch):
            raise ConfigError(f"globals.{switch}", True, "this version has no such channel yet; set it to false")
    if g.rerank_enabled:
        raise ConfigError("globals.rerank_enabled", True, "no reranker is available in this version; set it false")
    if g.llm_planner_enabled:
        raise ConfigError("globals.llm_planner_enabled", True,
                          "no LLM planner is available in this version; set it to false")
    for field, channel in (("keyword_recaller", "keyword"), ("vector_recaller", "vector")):
        name = getattr(cfg.recall, field)
        impl = recallers.resolve(f"recall.{field}", name)
        if getattr(impl, "channel", None) != channel:
            valid = [n for n in recallers.names() if getattr(recallers.resolve(field, n), "channel", None) == channel]
            raise ConfigError.unknown_name(f"recall.{field}", name, valid)
    vector_backends.resolve("storage.vector_backend", cfg.storage.vector_backend)
    for channel, weight in cfg.recall.channel_weights.items():
        if channel not in CHANNELS:
            raise ConfigError.unknown_name(f"recall.channel_weights.{channel}", channel, CHANNELS)
        if not math.isfinite(weight) or weight < 0:
            raise ConfigError(f"recall.channel_weights.{channel}", weight, "weights are finite numbers >= 0")
    if not g.vector_enabled and cfg.storage.vector_backend != "numpy":
        raise ConfigError("storage.vector_backend", cfg.storage.vector_backend,
                          "globals.vector_enabled is false, so no vector backend is used; remove this key or "
                          "enable vectors")


def _coerce_action_state(value: ActionState | Mapping[str, Any] | None) -> ActionState | None:
    if value is None or isinstance(value, ActionState):
        return value
    if isinstance(value, Mapping):
        try:
            return ActionState(**value)
        except Exception as exc:
            raise InvalidQueryError("action_state", dict(value), f"fix the action state's fields ({exc})") from None
    raise InvalidQueryError("action_state", value, "pass an ActionState, a mapping of its fields, or None")


def _plan(query: str, state: ActionState | None) -> SearchPlan:
    """The foundation's plan: the query itself, plus one route for what the agent is doing, if anything."""
    routes = [EvidenceRoute(goal="query", queries=(query,))]
    if state is not None:
        parts = [state.current_subgoal, state.tentative_action, state.last_tool_name, state.failure_signal,
                 *state.missing_slots]
        text = " ".join(p for p in parts if p)
        if text.strip():
            routes.append(EvidenceRoute(goal="action", queries=(text,)))
    return SearchPlan(question_type="other", routes=tuple(routes), planner="basic")


def _as_list(name: str, value: Any) -> list[str]:
    values = [value] if isinstance(value, str) else value
    if not isinstance(values, (list, tuple, set, frozenset)) or not values or \
            not all(isinstance(v, str) and v for v in values):
        raise InvalidQueryError(f"filters.{name}", value, "give a non-empty string or a list of strings")
    return list(values)


def _filter_sql(filters: Mapping[str, Any] | None, session_id: str | None) -> tuple[str, list[Any]]:
    """Validated filters -> a SQL condition on the records table (and its arguments)."""
    if filters is not None and not isinstance(filters, Mapping):
        raise InvalidQueryError("filters", filters, "pass a mapping such as {'session_id': 's1'}, or None")
    filters = dict(filters or {})
    unknown = set(filters) - set(FILTER_KEYS)
    if unknown:
        raise InvalidQueryError(f"filters.{sorted(unknown)[0]}", filters[sorted(unknown)[0]],
                                "valid filter keys: " + ", ".join(FILTER_KEYS))
    clauses: list[str] = []
    args: list[Any] = []
    if session_id is not None:
        clauses.append("session_id = ?")
        args.append(session_id)
    column = {"session_id": "session_id", "speaker": "speaker", "role": "source_role", "kinds": "kind"}
    for key, col in column.items():
        if filters.get(key) is not None:
            values = _as_list(key, filters[key])
            clauses.append(f"{col} IN ({','.join('?' * len(values))})")
            args.extend(values)
    for key, op in (("since", ">="), ("until", "<=")):
        if filters.get(key) is not None:
            try:
                ts = to_utc(filters[key], f"filters.{key}")
            except ValidationError as exc:
                raise InvalidQueryError(exc.field, exc.value, exc.fix) from None
            assert ts is not None
            clauses.append(f"ref_ts {op} ?")
            args.append(ts.timestamp())
    return " AND ".join(clauses), args


def _render_context(items: Sequence[RetrievedItem], budget_tokens: int = 2000) -> str:
    """The items as prompt-ready lines (``[date] speaker: text``), within a token budget."""
    lines, used = [], 0
    for item in items:
        stamp = item.timestamp.strftime("%Y-%m-%d %H:%M") if item.timestamp else "undated"
        who = item.speaker or (item.role.value if item.role else "memory")
        line = f"[{stamp}] {who}: {item.text}"
        cost = estimate_tokens(line)
        if used + cost > budget_tokens:
            break
        lines.append(line)
        used += cost
    return "\n".join(lines)
