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
import time
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import numpy as np

from .config import EngineConfig
from .embed import Embedder, HashingEmbedder, resolve_embedder
from .errors import (
    ConfigError,
    InvalidQueryError,
    RetrievalError,
    ValidationError,
)
from .ingest.derive import WINDOW_MAX_GAP_S
from .ingest.indexer import Indexer, IndexQueue
from .ingest.pipeline import WritePipeline
from .models import (
    IndexHook,
    MemoryFile,
    ActionState,
    ChannelError,
    EvidenceRoute,
    Namespace,
    RetrievedItem,
    SearchResult,
    Turn,
    to_utc,
)
from .lifecycle.api import CompactionReport, Lifecycle
from .lifecycle.forgetting import forget
from .llm import LLM
from .plan.heuristic import plan_search
from .plan.llm_planner import HeuristicPlanner, LLMPlanner, Planner
from .plan.strategy import STRATEGIES
from .rank.fusion import rrf
from .rank.mmr import jaccard_matrix, mmr
from .rank.rerank import Candidate, LLMReranker, Reranker, apply_rerank, fair_pool
from .rank.select import apply_episode_budget, apply_route_quotas
from .rank.zscore import TurnScores, rank_turns
from .recall.base import RecallContext, Recaller, RecallRequest
from .recall.runner import run_channels
from .registry import recallers, vector_backends
from .store.graph import EntityGraph
from .store.evidence import EvidenceIndex
from .store.timeindex import TimeIndex
from .store.keyword import KeywordIndex
from .recall import graph as _graph_channel  # noqa: F401  (registers the graph recaller)
from .recall import evidence as _evidence_channel  # noqa: F401  (registers the evidence recaller)
from .recall import temporal as _temporal_channel  # noqa: F401  (registers the temporal recaller)
from .recall.layers import KIND_CHANNELS, LAYER_CHANNELS
from .recall import sparse as _sparse_channel  # noqa: F401  (registers the sparse recaller)
from .results import AddResult, ForgetReceipt, StoreStats
from .store.base import DerivedIndex
from .store.sparse import SparseIndex
from .store import chroma as _chroma  # noqa: F401  (registers the backend; chromadb loads only when used)
from .store.catalog import KIND_CODES, RecordCatalog
from .store.sqlite import TruthStore, TurnRow
from .store.vector import VectorIndex
from .text import estimate_tokens, tokenize

__all__ = ["AddResult", "ForgetReceipt", "MemoryEngine", "StoreStats"]

CHANNELS = ("keyword", "vector", "sparse", "graph", "temporal", "evidence", "turns", "keyword_l0", "keyword_l1", "vector_l0", "vector_l1")
DISCLOSE_MIN_CHARS = 600
"""In ``SearchResult.context`` a turn at least this long may be shown as its L1 abstract or L0 title when the
whole text does not fit the budget."""
KIND_CONTEXT_TURNS = 8
"""Stored turns the derivation of procedures and failure patterns may look back at."""
CONVERSATION_GOALS = ("opening", "focus")
"""Route goals the heuristic planner gives a conversation excerpt (see ``plan.heuristic.conversation_parts``)."""
SECONDARY_ROUTE_WEIGHT = 0.5
"""Weight of the action route and of per-speaker routes next to the main route (weight 1)."""
FILTER_KEYS = ("session_id", "speaker", "role", "since", "until", "kinds")


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
    :meth:`forget`. Turns are archived into daily memory files whose hooks :meth:`render_prompt` shows and
    :meth:`retrieve` opens; :meth:`compact` / :meth:`maybe_compact` merge them weekly and evict monthly;
    :meth:`pre_compress` saves a host's whole context. See the module docstring for a runnable example.
    """

    def __init__(self, store: TruthStore, config: EngineConfig, embedder: Embedder | None,
                 embedder_warning: str | None, llm: LLM | None = None, reranker: Reranker | None = None) -> None:
        self._store = store
        self._reranker: Reranker | None = None
        if config.globals.rerank_enabled:
            self._reranker = reranker if reranker is not None else LLMReranker(llm) if llm is not None else None
        self._planner: Planner = HeuristicPlanner()
        if config.globals.llm_planner_enabled and llm is not None:
            self._planner = LLMPlanner(llm, timeout_s=config.recall.planner_timeout_s)
        self.config = config
        self.embedder = embedder
        self._embedder_warning = embedder_warning
        self._keyword = KeywordIndex()
        self._catalog = RecordCatalog()
        self._graph = EntityGraph()
        self._time = TimeIndex()
        self._evidence = EvidenceIndex()
        self._sparse = SparseIndex()
        self._vector: VectorIndex | None = None
        if config.globals.vector_enabled and embedder is not None:
            backend = vector_backends.resolve("storage.vector_backend", config.storage.vector_backend)
            self._vector = backend(storage=config.storage, directory=store.directory, embedder_id=embedder.id,
                                   dim=embedder.dim, store_id=store.store_id)
        # every derived index, in write order: the write pipeline hands each batch to all of them (an index
        # stores only what the batch carries for it), forget removes from all of them
        self._indexes: tuple[DerivedIndex, ...] = (
            self._keyword, *((self._vector,) if self._vector is not None else ()), self._sparse, self._time,
            self._graph, self._evidence, self._catalog, IndexQueue(store))
        for index in self._indexes:
            store.add_schema(index.create_schema)
        ctx = RecallContext(store=store, keyword_index=self._keyword, vector_index=self._vector, embedder=embedder,
                            graph_index=self._graph, time_index=self._time, evidence_index=self._evidence,
                            sparse_index=self._sparse)
        self._recallers: dict[str, Recaller] = {
            "keyword": recallers.resolve("recall.keyword_recaller", config.recall.keyword_recaller)(ctx)}
        if self._vector is not None:
            self._recallers["vector"] = recallers.resolve("recall.vector_recaller", config.recall.vector_recaller)(ctx)
        if config.globals.sparse_enabled and callable(getattr(embedder, "embed_sparse", None)):
            self._recallers["sparse"] = recallers.resolve("recall.sparse_recaller", config.recall.sparse_recaller)(ctx)
        if config.globals.graph_enabled:
            self._recallers["graph"] = recallers.resolve("recall.graph_recaller", config.recall.graph_recaller)(ctx)
        if config.globals.evidence_enabled:
            self._recallers["evidence"] = recallers.resolve("recall.evidence_recaller",
                                                            config.recall.evidence_recaller)(ctx)
        if config.globals.turns_channel_enabled:
            self._recallers["turns"] = recallers.resolve("recall.turns_recaller", config.recall.turns_recaller)(ctx)
        if config.globals.temporal_enabled:
            self._recallers["temporal"] = recallers.resolve("recall.temporal_recaller",
                                                            config.recall.temporal_recaller)(ctx)
        if config.globals.layers_index_enabled:
            for channel in LAYER_CHANNELS:
                if channel.startswith("vector") and self._vector is None:
                    continue
                field = f"{channel}_recaller"
                self._recallers[channel] = recallers.resolve(f"recall.{field}", getattr(config.recall, field))(ctx)
        self._pool = ThreadPoolExecutor(max_workers=max(4, 4 * len(self._recallers)),
                                        thread_name_prefix="memory-ext-recall")
        # the model work of writes (vectors, sparse encodings) is queued and made by the indexer
        self._indexer: Indexer | None = None
        if not store.read_only and (self._vector is not None or "sparse" in self._recallers):
            ingest = config.ingest
            self._indexer = Indexer(store, embedder, [i for i in (self._vector, self._sparse) if i is not None],
                                    vectors=self._vector is not None, sparse="sparse" in self._recallers,
                                    batch=ingest.indexer_batch, threads=ingest.indexer_threads,
                                    background=ingest.background_indexing)
        self._writer = WritePipeline(store, config, embedder, self._indexes, vector=self._vector, graph=self._graph,
                                     time=self._time, sparse="sparse" in self._recallers,
                                     evidence=config.globals.evidence_enabled, indexer=self._indexer)
        self._lifecycle = Lifecycle(store, config, llm, search=self.search, add_turns=self.add_turns,
                                    check_open=self._check_open, on_flags_changed=self._catalog.invalidate)
        self._closed = False
        if self._indexer is not None and self._indexer.background and store.pending() > 0:
            self._indexer.notify()  # resume the queue a previous writer left (closed early, or crashed)

    # -- construction ----------------------------------------------------------------------------------------
    @classmethod
    def open(cls, path: str | os.PathLike[str] | None = None, *,
             config: EngineConfig | Mapping[str, Any] | str | os.PathLike[str] | None = None,
             embedder: Embedder | str | None = None, read_only: bool = False,
             llm: LLM | None = None, reranker: Reranker | None = None) -> MemoryEngine:
        """Open (or create) the store in directory ``path`` (default ``~/.memory_ext``).

        ``config`` is an :class:`EngineConfig`, a mapping, or a YAML/TOML/JSON path; ``embedder`` an
        :class:`~memory_ext.embed.Embedder` or a registered name (``"e5"``, the default, or ``"hashing"``).
        ``llm`` (any :class:`~memory_ext.llm.LLM`) plans searches when ``globals.llm_planner_enabled`` is set; a
        failed or slow plan falls back to the heuristic one and says so in ``SearchResult.channel_errors``.
        Configuration errors raise :class:`~memory_ext.errors.ConfigError` here, never at the first search.
        ``read_only=True`` opens a store that another process writes. With ``globals.rerank_enabled``, the
        fused candidates are reranked by ``reranker`` (any :class:`~memory_ext.rank.rerank.Reranker`, e.g. a
        cross-encoder wrapped in ``CallableReranker``) or, when none is given, by ``llm`` (``LLMReranker``); a
        failed rerank keeps the fused order and says so in ``channel_errors``.
        """
        cfg = EngineConfig.coerce(config if not isinstance(config, os.PathLike) else Path(config))
        _validate_config(cfg)
        if cfg.globals.llm_planner_enabled and llm is None:
            raise ConfigError("globals.llm_planner_enabled", True,
                              "pass an LLM: MemoryEngine.open(..., llm=...) (for example LangChainLLM(chat_model))")
        if cfg.globals.rerank_enabled and reranker is None and llm is None:
            raise ConfigError("globals.rerank_enabled", True,
                              "pass a reranker (MemoryEngine.open(..., reranker=CallableReranker(fn, id=...))) or an "
                              "llm to rerank with")
        if reranker is not None and not isinstance(reranker, Reranker):
            raise ConfigError("reranker", reranker, "pass an object with id and rerank(query, candidates, timeout=)")
        if llm is not None and not isinstance(llm, LLM):
            raise ConfigError("llm", llm, "pass an object with id and complete(prompt, ...) (memory_ext.llm.LLM)")
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
            return cls(store, cfg, emb, warning, llm, reranker)
        except BaseException:
            store.close()
            raise

    def close(self) -> None:
        """Release the store (and its writer lock) and the worker threads. Idempotent."""
        if self._closed:
            return
        self._closed = True
        if self._indexer is not None:  # finish the queue (bounded); what is left stays queued on disk
            self._indexer.close(self.config.ingest.close_timeout_s)
        self._pool.shutdown(wait=False, cancel_futures=True)
        if self._vector is not None:
            self._vector.close()
        self._store.close()

    def __enter__(self) -> MemoryEngine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def llm(self) -> LLM | None:
        """The LLM the lifecycle uses (LLM summaries, eviction relevance); settable."""
        return self._lifecycle.llm

    @llm.setter
    def llm(self, value: LLM | None) -> None:
        self._lifecycle.llm = value

    @property
    def path(self) -> Path:
        """The store directory."""
        return self._store.directory

    # -- write path ------------------------------------------------------------------------------------------
    def add_turns(self, turns: Iterable[Turn | Mapping[str, Any]], namespace: Namespace | str, *,
                  wait: bool = False) -> AddResult:
        """Store turns losslessly and index them, in one transaction (all or nothing).

        ``turns`` are :class:`Turn` objects or mappings with at least ``role`` and ``content``. A turn without a
        timestamp gets the current time; one without a session gets ``namespace.session_id``. Invalid input
        raises a :class:`~memory_ext.errors.ValidationError` naming the field, the value and the fix, and
        nothing is written. The transaction writes every index that needs no model and queues the model work
        (vectors, sparse encodings), which the background indexer does next (see :meth:`flush`); ``wait=True``
        returns only once this namespace is fully indexed.
        """
        self._check_open()
        ns = Namespace.coerce(namespace)
        result = self._writer.add(turns, ns)
        if wait:
            self.flush(ns)
        return result

    def flush(self, namespace: Namespace | str | None = None, *, timeout: float | None = None) -> bool:
        """Wait until the namespace (the whole store if None) is fully indexed: True, or False if ``timeout``
        seconds passed first. Raises the embedder's error if the indexer cannot make the vectors."""
        self._check_open()
        if self._indexer is None:
            return True
        ns_id = None
        if namespace is not None:
            ns_id = self._store.find_namespace(Namespace.coerce(namespace).key)
            if ns_id is None:
                return True
        return self._indexer.wait(ns_id, timeout)

    def pending(self, namespace: Namespace | str | None = None) -> int:
        """Records of the namespace (of the store if None) whose vectors are not written yet."""
        self._check_open()
        if namespace is None:
            return self._store.pending()
        ns_id = self._store.find_namespace(Namespace.coerce(namespace).key)
        return 0 if ns_id is None else self._store.pending(ns_id)

    # -- read path -------------------------------------------------------------------------------------------
    def search(self, query: str, namespace: Namespace | str, *, k: int = 10,
               filters: Mapping[str, Any] | None = None, action_state: ActionState | Mapping[str, Any] | None = None,
               explain: bool = False, now: datetime | str | float | None = None,
               trace: bool = False, include_cold: bool = False,
               as_of: datetime | str | float | None = None) -> SearchResult:
        """Find the turns that help with ``query`` (see :meth:`_search` for how).

        Read-your-writes: when vectors of the namespace are still being made, the search first waits up to
        ``ingest.search_wait_s`` for them; whatever is still pending then is found only through the channels
        that need no model, and :attr:`SearchResult.pending` says how many records that is.
        """
        self._check_open()
        ns = Namespace.coerce(namespace)
        ns_id = self._store.find_namespace(ns.key)
        pending = self._store.pending(ns_id) if ns_id is not None else 0
        waited_ms = None
        if pending and self._indexer is not None and self.config.ingest.search_wait_s > 0:
            t0 = time.perf_counter()
            try:
                self._indexer.wait(ns_id, self.config.ingest.search_wait_s)
            except Exception:  # noqa: BLE001 - the embedder fails: search what is indexed, report pending
                pass
            pending, waited_ms = self._store.pending(ns_id), _ms(t0)
        result = self._search(query, ns, k=k, filters=filters, action_state=action_state, explain=explain, now=now,
                              trace=trace, include_cold=include_cold, as_of=as_of)
        if waited_ms is None and not pending:
            return result
        timings = dict(result.timings_ms) if waited_ms is None else {**result.timings_ms, "pending_wait": waited_ms}
        return result.model_copy(update={"pending": pending, "timings_ms": timings})

    def _search(self, query: str, namespace: Namespace | str, *, k: int = 10,
                filters: Mapping[str, Any] | None = None,
                action_state: ActionState | Mapping[str, Any] | None = None,
                explain: bool = False, now: datetime | str | float | None = None,
                trace: bool = False, include_cold: bool = False,
                as_of: datetime | str | float | None = None) -> SearchResult:
        """Find the turns that help with ``query`` (and, if given, with what the agent is doing).

        The heuristic planner classifies the question, reads a time filter (relative to ``now``, default the
        current time) and the speakers it names, and adds a route for the ``action_state``. For every route the
        channels (keyword BM25, vector) run in parallel over turn and window records; their scores are fused
        (``recall.fusion``, see :mod:`memory_ext.rank.zscore`) into one score per turn, and the routes are summed.
        ``filters`` keys: ``session_id``, ``speaker``, ``role``, ``since``, ``until``, ``kinds``.
        ``include_cold=True`` also searches the cold tier (turns the monthly eviction moved out of the main
        memory). ``as_of`` returns what was true then: only memories stated by that time and not yet superseded
        at it; without it, a superseded memory always ranks below the one that replaced it. ``trace=True``
        attaches :attr:`SearchResult.trace` (plan, per-route candidates, stage timings; in memory only).
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
        try:
            reference = to_utc(now, "now") if now is not None else datetime.now(UTC)
        except ValidationError as exc:
            raise InvalidQueryError(exc.field, exc.value, exc.fix) from None
        where, args = _filter_sql(filters, ns.session_id)
        try:
            as_of_ts = to_utc(as_of, "as_of").timestamp() if as_of is not None else None  # type: ignore[union-attr]
        except ValidationError as exc:
            raise InvalidQueryError(exc.field, exc.value, exc.fix) from None
        warnings = (self._embedder_warning,) if self._embedder_warning else ()
        errors = [ChannelError(channel="embedder", error_type="EmbedderFallback",
                               message=self._embedder_warning)] if self._embedder_warning else []
        ns_id = self._store.find_namespace(ns.key)
        if ns_id is None:
            plan = plan_search(query, now=reference, speakers=(), action_state=state)  # nothing to search
            return SearchResult(query=query, plan=plan, channel_errors=tuple(errors), warnings=warnings,
                                timings_ms={"total": _ms(t0)})
        cat = self._catalog.get(self._store.reader(), ns_id)
        plan, planner_error = self._planner.plan(query, now=reference, speakers=cat.speakers(), action_state=state)
        if planner_error is not None:
            errors.append(planner_error)
        allowed_rids = self._store.filter_rids(ns_id, where, args) if where else None
        allowed_mask = None
        if allowed_rids is not None:
            allowed_mask = np.zeros(len(cat), bool)
            pos = cat.pos_of(np.fromiter(allowed_rids, np.int64, len(allowed_rids)))
            allowed_mask[pos[pos >= 0]] = True
        if allowed_mask is not None:
            # a window counts when its own turn passes the filter
            allowed_mask |= (cat.kind == KIND_CODES["window"]) & (cat.anchor >= 0) & allowed_mask[cat.anchor]
        # the cold tier and as_of remove turns from the *result*, after ranking: a superseded statement that went
        # cold still lifts the statement that replaced it
        flags = _flag_mask(cat, include_cold, as_of_ts)
        if allowed_mask is not None or flags is not None:
            returnable = (np.ones(len(cat), bool) if allowed_mask is None else allowed_mask) & \
                (np.ones(len(cat), bool) if flags is None else flags)
            if not (returnable & (cat.kind == KIND_CODES["turn"])).any():
                return SearchResult(query=query, plan=plan, channel_errors=tuple(errors), warnings=warnings,
                                    timings_ms={"total": _ms(t0)})
        limit = max(4 * k, self.config.recall.candidates_per_channel)
        kind_rids = {kind: cat.rids[cat.kind == KIND_CODES[kind]] for kind in ("l0", "l1", "turn")}
        layer_rids = {layer: kind_rids[layer] for layer in ("l0", "l1")}
        channel_kinds: dict[str, np.ndarray] = {}
        if any(c in KIND_CHANNELS for c in self._recallers):
            is_layer = np.isin(cat.kind, [KIND_CODES["l0"], KIND_CODES["l1"]])
            for channel in self._recallers:  # each layer is scored by its own channels only
                channel_kinds[channel] = cat.kind == KIND_CODES[KIND_CHANNELS[channel]] \
                    if channel in KIND_CHANNELS else ~is_layer
            empty = [layer.upper() for layer, rids in layer_rids.items() if rids.size == 0]
            if empty and any(c in LAYER_CHANNELS for c in self._recallers):
                warnings = (*warnings, f"layer channels: no {' or '.join(empty)} layers in this namespace (only turns "
                            f"of at least ingest.layer_min_chars={self.config.ingest.layer_min_chars} characters "
                            "written with globals.layers_index_enabled have them); those channels found nothing")
        if "evidence" in self._recallers and self._evidence.record_count(self._store.reader(), ns_id) == 0:
            warnings = (*warnings, "evidence channel: no evidence nodes in this namespace (turns written while "
                                   "globals.evidence_enabled was off are not indexed); it found nothing")
        calls = {}
        call_of: dict[tuple[str, str], str] = {}  # (channel, query text) -> call: routes sharing a text share it
        route_calls: list[dict[str, str]] = []
        # the sparse latent-term channel matches situations: it serves conversation excerpts, not questions
        conversational = any(r.goal in CONVERSATION_GOALS for r in plan.routes)
        for r_index, route in enumerate(plan.routes):
            text = " ".join(route.queries)
            names = {}
            for channel, recaller in self._recallers.items():
                allowed = None
                if channel == "temporal" and route.time_filter is None:
                    continue  # nothing to look for
                if channel in KIND_CHANNELS:
                    allowed = kind_rids[KIND_CHANNELS[channel]]
                    if allowed.size == 0:
                        continue
                if channel == "sparse" and not conversational:
                    continue
                if (channel, text) not in call_of:
                    name = call_of[(channel, text)] = _call_name(channel, route, r_index)
                    request = RecallRequest(query=text, ns_id=ns_id, limit=limit, allowed=allowed, route=route)
                    calls[name] = (lambda r=recaller, q=request: r.recall(q))
                names[channel] = call_of[(channel, text)]
            route_calls.append(names)
        run = run_channels(self._pool, calls, self.config.recall.channel_timeout_s)
        errors += run.errors
        if not run.results:
            raise RetrievalError(run.errors)
        t_rank = time.perf_counter()
        strategy = STRATEGIES[plan.question_type]
        weights = self.config.recall.channel_weights
        lam = self.config.recall.mmr_lambda
        pool_size = k if lam >= 1.0 else k * self.config.recall.mmr_pool_factor
        total = np.zeros(len(cat))
        per_route: dict[str, TurnScores] = {}
        rrf_parts: dict[str, list[int]] = {}
        for r_index, route in enumerate(plan.routes):
            route_weight = 1.0 if route.goal == "query" else SECONDARY_ROUTE_WEIGHT
            hits = {ch: run.results[name] for ch, name in route_calls[r_index].items() if name in run.results}
            if not hits:
                continue
            speakers = [c.split(":", 1)[1] for c in route.constraints if c.startswith("speaker:")]
            span = (route.time_filter[0].timestamp(), route.time_filter[1].timestamp()) if route.time_filter else None
            bonus_kinds = [k for c in route.constraints if c.startswith("kinds:") for k in c[6:].split(",")]
            scores = rank_turns(cat, hits, weights, strategy, allowed=allowed_mask, speakers=speakers,
                                time_span=span, assistant_roles=cat.assistant, bonus_kinds=bonus_kinds,
                                channel_kinds=channel_kinds)
            per_route[route.goal] = scores
            if self.config.recall.fusion == "zscore":
                total += route_weight * scores.total
            else:
                rankable = np.isfinite(scores.total) & (flags if flags is not None else True)
                for ch, raw in scores.channel_raw.items():
                    order = np.flatnonzero(rankable)[np.argsort(-raw[rankable], kind="stable")]
                    order = order[raw[order] > 0][:limit]
                    rrf_parts[f"{ch}@{route.goal}" if route.goal != "query" else ch] = cat.rids[order].tolist()
        supersedes = _promote_successors(cat, total, flags) if as_of_ts is None else {}
        rerank_ms: float | None = None
        if flags is not None:
            total[~flags] = -np.inf
        if self.config.recall.fusion == "rrf":
            rrf_weights = {name: (1.0 if "@" not in name else SECONDARY_ROUTE_WEIGHT)
                           * weights.get(name.split("@")[0], 1.0) for name in rrf_parts}
            fused = rrf(rrf_parts, k=self.config.recall.rrf_k, weights=rrf_weights)[:pool_size]
            top_rids = [int(f.id) for f in fused]
            top_scores = [f.score for f in fused]
            details = {int(f.id): {"fusion": "rrf", "rrf_k": self.config.recall.rrf_k,
                                   "channels": {c: {"rank": r, "contribution": v}
                                                for c, (r, v) in f.contributions.items()}} for f in fused}
        else:
            finite = np.flatnonzero(np.isfinite(total))
            ordered = finite[np.lexsort((cat.rids[finite], -total[finite]))]
            top = ordered[:pool_size]
            top_rids = cat.rids[top].tolist()
            top_scores = total[top].tolist()
            reranked: dict[int, dict[str, float]] = {}
            if self._reranker is not None and top.size:
                t_rerank = time.perf_counter()
                top_rids, top_scores, reranked, rerank_error = self._rerank(
                    query, ns_id, cat, total, ordered, per_route, pool_size, k)
                if rerank_error is not None:
                    errors.append(rerank_error)
                top = cat.pos_of(np.asarray(top_rids, np.int64))
                rerank_ms = _ms(t_rerank)
            details = {int(cat.rids[p]): _explain_zscore(p, per_route, weights) for p in top} if explain else {}
            for rid, parts in reranked.items():
                if rid in details:
                    details[rid]["rerank"] = parts
            for p in top:
                if explain and int(p) in supersedes:
                    details[int(cat.rids[p])]["supersedes"] = supersedes[int(p)]
        score_of = dict(zip(top_rids, top_scores, strict=True))
        order, _ = self._select(ns_id, top_rids, top_scores, len(top_rids), details)
        top_rids = self._quotas_and_budget(cat, order, per_route, total, k)
        floor = min(score_of.values(), default=0.0)
        top_scores = [score_of.get(r, floor - 1e-3) for r in top_rids]
        items, source_turns = self._hydrate(ns_id, top_rids, top_scores, _channel_ranks(cat, per_route, top_rids), details,
                              explain)
        timings = {f"channel.{n}": v for n, v in run.timings_ms.items()}
        timings["rank"] = _ms(t_rank)
        if rerank_ms is not None:
            timings["rerank"] = rerank_ms
        t_context = time.perf_counter()
        context = self._render_context(ns_id, items, source_turns)
        timings["context"] = _ms(t_context)
        timings["total"] = _ms(t0)
        trace_data = _trace(plan, cat, run.results, per_route, timings) if trace else None
        return SearchResult(query=query, items=tuple(items), context=context, plan=plan,
                            channel_errors=tuple(errors), warnings=warnings, timings_ms=timings, trace=trace_data)

    def _rerank(self, query: str, ns_id: int, cat: Any, total: np.ndarray, ordered: np.ndarray,
                per_route: Mapping[str, TurnScores], pool_size: int,
                k: int) -> tuple[list[int], list[float], dict[int, dict[str, float]], ChannelError | None]:
        """Rerank a pool drawn fairly from every channel's best turns; the rest keeps the fused order."""
        assert self._reranker is not None
        cfg = self.config.recall
        cap = max(2000, pool_size)
        fused_order = cat.rids[ordered[:cap]].tolist()
        rankable = np.isfinite(total)
        rankings: dict[str, list[int]] = {}
        for goal, scores in per_route.items():
            for ch, raw in scores.channel_raw.items():
                cand = np.flatnonzero(rankable)
                best = cand[np.lexsort((cat.rids[cand], -raw[cand]))][:cfg.rerank_pool]
                rankings[f"{ch}@{goal}"] = cat.rids[best].tolist()
        pool = fair_pool(rankings, fused_order, max(cfg.rerank_pool, k))
        texts = self._store.records_by_rid(ns_id, pool)
        pos = dict(zip(pool, cat.pos_of(np.asarray(pool, np.int64)).tolist(), strict=True))
        candidates = [Candidate(key=r, text=texts[r].text, score=float(total[pos[r]])) for r in pool if r in texts]
        outcome = apply_rerank(self._reranker, query, candidates, weight=cfg.rerank_weight,
                               timeout=cfg.rerank_timeout_s, fused_order=fused_order)
        order = outcome.order[:pool_size]
        in_pool = {c.key for c in candidates}
        floor = min((outcome.scores[r] for r in in_pool if r in outcome.scores), default=0.0)
        scores = []
        for i, r in enumerate(order):
            scores.append(outcome.scores[r] if r in in_pool and r in outcome.scores else floor - 1.0 - i * 1e-6)
        parts = {r: {"rerank_score": float(outcome.rerank_scores[r]), "final": float(outcome.scores[r]),
                     "weight": cfg.rerank_weight} for r in order if r in outcome.rerank_scores}
        return order, scores, parts, outcome.error

    def _quotas_and_budget(self, cat: Any, order: list[int], per_route: Mapping[str, TurnScores],
                           total: np.ndarray, k: int) -> list[int]:
        """Apply the episode budget, then give every secondary route its quota (see rank/select.py)."""
        cfg = self.config.recall
        if cfg.episode_budget:
            pos = cat.pos_of(np.asarray(order, np.int64))
            episode_of = {r: int(cat.session[p]) for r, p in zip(order, pos, strict=True) if p >= 0}
            order = apply_episode_budget(order, episode_of, budget=cfg.episode_budget, k=len(order))  # type: ignore[arg-type]
        route_best: dict[str, list[int]] = {}
        if cfg.route_quota and len(per_route) > 1:
            returnable = np.isfinite(total)
            for goal, scores in per_route.items():
                if goal == "query":
                    continue
                cand = np.flatnonzero(returnable & np.isfinite(scores.total) & (scores.fused > 0))
                best = cand[np.lexsort((cat.rids[cand], -scores.total[cand]))][:2 * cfg.route_quota]
                route_best[goal] = cat.rids[best].tolist()
        return apply_route_quotas(order, route_best, quota=cfg.route_quota, k=k)

    def _select(self, ns_id: int, rids: list[int], scores: list[float], k: int,
                details: dict[int, dict[str, Any]]) -> tuple[list[int], list[float]]:
        """Choose k of the pool with MMR (a no-op when ``recall.mmr_lambda`` is 1)."""
        lam = self.config.recall.mmr_lambda
        if lam >= 1.0 or len(rids) <= 1:
            return rids[:k], scores[:k]
        vectors = self._store.vectors_by_rid(ns_id, rids) if self._vector is not None else {}
        if len(vectors) == len(rids):
            mat = np.stack([vectors[r] for r in rids])
            similarity = mat @ mat.T
        else:  # no vectors (switched off, or not embedded): word overlap
            texts = self._store.records_by_rid(ns_id, rids)
            similarity = jaccard_matrix([set(tokenize(texts[r].text)) if r in texts else set() for r in rids])
        order = mmr(np.asarray(scores, dtype=np.float64), similarity, k=k, lam=lam)
        for position, i in enumerate(order):
            if rids[i] in details:
                details[rids[i]]["mmr"] = {"lambda": lam, "pool_rank": i + 1, "selected_at": position + 1}
        return [rids[i] for i in order], [scores[i] for i in order]

    def _render_context(self, ns_id: int, items: Sequence[RetrievedItem], found: Mapping[str, TurnRow]) -> str:
        """Prompt-ready text: each found turn inside its source window (±n turns of the same exchange), windows
        of one session merged where they overlap, best first, within ``recall.context_budget_tokens``."""
        n = self.config.recall.context_window_turns
        budget = self.config.recall.context_budget_tokens
        centres = [found[i.turn_ids[0]] for i in items if i.turn_ids and i.turn_ids[0] in found]
        blocks: list[dict[str, Any]] = []  # lo, hi, session, centres (best first)
        for t in centres:
            lo, hi = t.seq - n, t.seq + n
            for b in blocks:
                if b["session"] == t.session_id and lo <= b["hi"] + 1 and hi >= b["lo"] - 1:
                    b["lo"], b["hi"] = min(b["lo"], lo), max(b["hi"], hi)
                    b["centres"].append(t)
                    break
            else:
                blocks.append({"lo": lo, "hi": hi, "session": t.session_id, "centres": [t]})
        rows = self._store.turns_by_seq_ranges(ns_id, [(b["lo"], b["hi"]) for b in blocks])
        by_seq = {r.seq: r for r in rows}

        layers: dict[str, tuple[str, str]] = {}

        def disclose(r: Any, level: int) -> str:
            """A turn at disclosure level 2 (whole text), 1 (L1 abstract) or 0 (L0 title) — long turns only."""
            if level == 2 or len(r.content) < DISCLOSE_MIN_CHARS:
                return _context_line(r.ts, r.speaker, r.role, r.content)
            if r.id not in layers:
                from .lifecycle.summary import summarize

                summary = summarize([r])
                layers[r.id] = (summary.title, summary.abstract or summary.title)
            text = layers[r.id][1 if level == 1 else 0]
            return _context_line(r.ts, r.speaker, r.role, f"{text} [abridged from {len(r.content)} characters; "
                                                         f"get_turns has the whole turn {r.id}]")

        def render(lo: int, hi: int, block_centres: list[Any], level: int = 2) -> str:
            def near(r: Any) -> bool:  # same exchange as one of the block's found turns
                return any(r.session_id == c.session_id and (r.ts is None or c.ts is None or
                                                             abs(r.ts - c.ts) <= WINDOW_MAX_GAP_S)
                           for c in block_centres)

            return "\n".join(disclose(r, level) for s in range(lo, hi + 1)
                             if (r := by_seq.get(s)) is not None and near(r))

        out: list[str] = []
        used = 0
        for b in blocks:  # in the rank order of their best turn
            # disclosure: the whole window (L2), else long turns as their abstract (L1), else as their title (L0)
            text = next((t for level in (2, 1, 0)
                         if used + estimate_tokens(t := render(b["lo"], b["hi"], b["centres"], level)) <= budget),
                        None)
            if text is None:
                if out:
                    break
                best = b["centres"][0]  # the first block is too long: the best turn's own window, or the turn
                text = next((t for level in (2, 1, 0) if estimate_tokens(
                    t := render(best.seq - n, best.seq + n, [best], level)) <= budget), None) \
                    or next((t for level in (2, 1, 0) if estimate_tokens(t := disclose(best, level)) <= budget),
                            disclose(best, 0))
            out.append(text)
            used += estimate_tokens(text)
        return "\n---\n".join(out)

    def _hydrate(self, ns_id: int, rids: Sequence[int], scores: Sequence[float],
                 ranks: Mapping[int, dict[str, int]], details: Mapping[int, dict[str, Any]],
                 explain: bool) -> tuple[list[RetrievedItem], dict[str, TurnRow]]:
        """The items, and the source turns they were built from (the context reuses them)."""
        records = self._store.records_by_rid(ns_id, rids)
        turns = self._store.turns_by_id(ns_id, (t for r in records.values() for t in r.turn_ids))
        items = []
        for rid, score in zip(rids, scores, strict=True):
            rec = records.get(rid)
            if rec is None:  # deleted between recall and hydration
                continue
            src = [turns[t] for t in rec.turn_ids if t in turns]
            items.append(RetrievedItem(
                id=rec.id, text=rec.text, score=float(score), kind=rec.kind, turn_ids=tuple(rec.turn_ids),
                external_ids=tuple(t.external_id for t in src), session_id=rec.session_id,
                timestamp=datetime.fromtimestamp(rec.ref_ts, UTC) if rec.ref_ts is not None else None,
                speaker=rec.speaker, role=rec.source_role, channels=ranks.get(rid, {}),
                explanation=details.get(rid) if explain else None))
        return items, turns

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

    def forget(self, namespace: Namespace | str, *, record_ids: Iterable[str] | None = None,
               hook_ids: Iterable[str] | None = None) -> ForgetReceipt:
        """Remove memories from every store and return a receipt of what was removed.

        With only ``namespace``: the whole namespace (or, if it names a session, that session). With
        ``record_ids`` (ids of search results): the turns those records were built from. With ``hook_ids``: the
        memory files and every turn in them. In every case the turns go, with every record built from them
        (turn records, windows), their vectors (numpy or Chroma), keyword postings, graph entries, claims, and
        their place in memory files — files left empty are deleted, the others get their hooks recomputed, and
        verbatim ``pre_compress`` context has their text cut out. SQLite overwrites deleted content
        (``secure_delete``) and its write-ahead log is truncated, so the text is gone from disk too.
        Unknown ids raise :class:`~memory_ext.errors.ValidationError` and nothing is removed.
        """
        self._check_open()
        return forget(self._store, self._indexes, self._evidence, Namespace.coerce(namespace),
                      record_ids=record_ids, hook_ids=hook_ids, resolve=self._lifecycle.resolve)

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

    # -- the memory files (see memory_ext.lifecycle.api.Lifecycle) ------------------------------------------
    def hooks(self, namespace: Namespace | str, *, include_merged: bool = False) -> list[IndexHook]:
        """The namespace's index hooks (only those the prompt index shows unless ``include_merged``)."""
        return self._lifecycle.hooks(namespace, include_merged=include_merged)

    def render_prompt(self, namespace: Namespace | str, *, budget_tokens: int | None = None,
                      query: str | None = None) -> str:
        """A compact index of the namespace's memory files for a system prompt, within ``budget_tokens``
        (ranked by ``query`` when given); each line carries the hook id :meth:`retrieve` opens."""
        return self._lifecycle.render_prompt(namespace, budget_tokens=budget_tokens, query=query)

    def retrieve(self, hook_id: str, namespace: Namespace | str | None = None) -> MemoryFile:
        """The whole memory file of a hook id (or a unique prefix of at least 6 characters); counts the access."""
        return self._lifecycle.retrieve(hook_id, namespace)

    def set_importance(self, hook_id: str, importance: int, namespace: Namespace | str | None = None) -> IndexHook:
        """Set a file's importance (0-100); a user-set value is kept by merges and counts in the eviction."""
        return self._lifecycle.set_importance(hook_id, importance, namespace)

    def compact(self, namespace: Namespace | str, period: Literal["weekly", "monthly"], *,
                key: str | None = None, now: datetime | str | float | None = None) -> CompactionReport:
        """Merge a week's daily files (``"weekly"``) or evict a month's weekly files (``"monthly"``)."""
        return self._lifecycle.compact(namespace, period, key=key, now=now)

    def maybe_compact(self, namespace: Namespace | str, *,
                      now: datetime | str | float | None = None) -> CompactionReport:
        """Merge every finished week, then evict every finished month (cheap when nothing is due)."""
        return self._lifecycle.maybe_compact(namespace, now=now)

    def pre_compress(self, namespace: Namespace | str, full_context: str | list[Any] | dict[str, Any], *,
                     estimated_tokens: int | None = None, task_state: Mapping[str, Any] | None = None,
                     now: datetime | str | float | None = None) -> str:
        """Archive a host's whole context before it compresses it; returns the hook id of the saved file."""
        return self._lifecycle.pre_compress(namespace, full_context, estimated_tokens=estimated_tokens,
                                            task_state=task_state, now=now)

    # -- async twins ---------------------------------------------------------------------------------------
    async def aadd_turns(self, turns: Iterable[Turn | Mapping[str, Any]], namespace: Namespace | str, *,
                         wait: bool = False) -> AddResult:
        """Async twin of :meth:`add_turns` (runs in a worker thread)."""
        return await asyncio.to_thread(self.add_turns, list(turns), namespace, wait=wait)

    async def aflush(self, namespace: Namespace | str | None = None, *, timeout: float | None = None) -> bool:
        """Async twin of :meth:`flush`."""
        return await asyncio.to_thread(self.flush, namespace, timeout=timeout)

    async def asearch(self, query: str, namespace: Namespace | str, *, k: int = 10,
                      filters: Mapping[str, Any] | None = None,
                      action_state: ActionState | Mapping[str, Any] | None = None,
                      explain: bool = False, now: datetime | str | float | None = None,
                      trace: bool = False, include_cold: bool = False,
                      as_of: datetime | str | float | None = None) -> SearchResult:
        """Async twin of :meth:`search` (runs in a worker thread)."""
        return await asyncio.to_thread(self.search, query, namespace, k=k, filters=filters,
                                       action_state=action_state, explain=explain, now=now, trace=trace,
                                       include_cold=include_cold, as_of=as_of)

    async def aget_turns(self, namespace: Namespace | str, *, limit: int | None = None,
                         offset: int = 0) -> list[Turn]:
        """Async twin of :meth:`get_turns`."""
        return await asyncio.to_thread(self.get_turns, namespace, limit=limit, offset=offset)

    async def aforget(self, namespace: Namespace | str, *, record_ids: Iterable[str] | None = None,
                      hook_ids: Iterable[str] | None = None) -> ForgetReceipt:
        """Async twin of :meth:`forget`."""
        return await asyncio.to_thread(self.forget, namespace, record_ids=record_ids, hook_ids=hook_ids)

    async def astats(self) -> StoreStats:
        """Async twin of :meth:`stats`."""
        return await asyncio.to_thread(self.stats)

    async def anamespaces(self) -> list[Namespace]:
        """Async twin of :meth:`namespaces`."""
        return await asyncio.to_thread(self.namespaces)

    async def ahooks(self, namespace: Namespace | str, *, include_merged: bool = False) -> list[IndexHook]:
        """Async twin of :meth:`hooks`."""
        return await asyncio.to_thread(self.hooks, namespace, include_merged=include_merged)

    async def arender_prompt(self, namespace: Namespace | str, *, budget_tokens: int | None = None,
                             query: str | None = None) -> str:
        """Async twin of :meth:`render_prompt`."""
        return await asyncio.to_thread(self.render_prompt, namespace, budget_tokens=budget_tokens, query=query)

    async def aretrieve(self, hook_id: str, namespace: Namespace | str | None = None) -> MemoryFile:
        """Async twin of :meth:`retrieve`."""
        return await asyncio.to_thread(self.retrieve, hook_id, namespace)

    async def aset_importance(self, hook_id: str, importance: int,
                              namespace: Namespace | str | None = None) -> IndexHook:
        """Async twin of :meth:`set_importance`."""
        return await asyncio.to_thread(self.set_importance, hook_id, importance, namespace)

    async def acompact(self, namespace: Namespace | str, period: Literal["weekly", "monthly"], *,
                       key: str | None = None, now: datetime | str | float | None = None) -> CompactionReport:
        """Async twin of :meth:`compact`."""
        return await asyncio.to_thread(self.compact, namespace, period, key=key, now=now)

    async def amaybe_compact(self, namespace: Namespace | str, *,
                             now: datetime | str | float | None = None) -> CompactionReport:
        """Async twin of :meth:`maybe_compact`."""
        return await asyncio.to_thread(self.maybe_compact, namespace, now=now)

    async def apre_compress(self, namespace: Namespace | str, full_context: str | list[Any] | dict[str, Any], *,
                            estimated_tokens: int | None = None, task_state: Mapping[str, Any] | None = None,
                            now: datetime | str | float | None = None) -> str:
        """Async twin of :meth:`pre_compress`."""
        return await asyncio.to_thread(self.pre_compress, namespace, full_context,
                                       estimated_tokens=estimated_tokens, task_state=task_state, now=now)

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
    if g.layers_index_enabled and cfg.recall.fusion != "zscore":
        raise ConfigError("recall.fusion", cfg.recall.fusion, "the layer channels work with the zscore fusion; use "
                          "fusion: zscore or switch layers_index_enabled off")
    if g.rerank_enabled and cfg.recall.fusion != "zscore":
        raise ConfigError("recall.fusion", cfg.recall.fusion, "reranking works on the zscore fusion; use "
                          "fusion: zscore or switch rerank_enabled off")
    for field, channel in (("keyword_recaller", "keyword"), ("vector_recaller", "vector"),
                           ("sparse_recaller", "sparse"), ("graph_recaller", "graph"), ("temporal_recaller", "temporal"),
                           ("evidence_recaller", "evidence"), ("turns_recaller", "turns"),
                           *((f"{c}_recaller", c) for c in LAYER_CHANNELS)):
        name = getattr(cfg.recall, field)
        valid = [n for n in recallers.names() if getattr(recallers.resolve(field, n), "channel", None) == channel]
        if name not in valid:
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


def _flag_mask(cat: Any, include_cold: bool, as_of: float | None) -> np.ndarray | None:
    """Records a search may return given the cold tier and ``as_of`` (None: all of them)."""
    mask = None
    if not include_cold and cat.cold.any():
        mask = ~cat.cold
    if as_of is not None:
        valid = (np.isnan(cat.ts) | (cat.ts <= as_of)) & (np.isnan(cat.valid_to) | (cat.valid_to > as_of))
        mask = valid if mask is None else mask & valid
    return mask


def _promote_successors(cat: Any, total: np.ndarray, allowed: np.ndarray | None) -> dict[int, str]:
    """A superseded turn that scores lifts the turn that replaced it just above itself (current facts first).

    Returns {successor position: reason} for explain."""
    out: dict[int, str] = {}
    for old, new in cat.successor.items():
        if not np.isfinite(total[old]) or not np.isfinite(total[new]) or (allowed is not None and not allowed[new]):
            continue
        if total[new] <= total[old]:
            total[new] = total[old] + 1e-6
            out[new] = f"lifted above superseded record rid {int(cat.rids[old])}"
    return out


def _coerce_action_state(value: ActionState | Mapping[str, Any] | None) -> ActionState | None:
    if value is None or isinstance(value, ActionState):
        return value
    if isinstance(value, Mapping):
        try:
            return ActionState(**value)
        except Exception as exc:
            raise InvalidQueryError("action_state", dict(value), f"fix the action state's fields ({exc})") from None
    raise InvalidQueryError("action_state", value, "pass an ActionState, a mapping of its fields, or None")


def _call_name(channel: str, route: EvidenceRoute, index: int) -> str:
    """The runner's name of one channel call: ``keyword`` for the main route, ``keyword@action`` otherwise."""
    if route.goal == "query":
        return channel
    return f"{channel}@{route.goal}" if not route.goal.startswith("speaker:") else f"{channel}@route{index}"


def _channel_ranks(cat: Any, per_route: Mapping[str, TurnScores], rids: Sequence[int]) -> dict[int, dict[str, int]]:
    """For each returned turn, its 1-based rank among turns in every channel that matched it."""
    out: dict[int, dict[str, int]] = {int(r): {} for r in rids}
    if not rids:
        return out
    pos = cat.pos_of(np.asarray(rids, np.int64))
    is_turn = cat.kind == KIND_CODES["turn"]
    for goal, scores in per_route.items():
        for ch, raw in scores.channel_raw.items():
            name = ch if goal == "query" else f"{ch}@{goal}"
            if ch in LAYER_CHANNELS:  # the rank of the turn's layer record among the layer's records
                layer = cat.kind == KIND_CODES[LAYER_CHANNELS[ch]]
                for rid, p in zip(rids, pos, strict=True):
                    mine = np.flatnonzero(layer & (cat.anchor == p)) if p >= 0 else []
                    if len(mine):
                        out[int(rid)][name] = int((raw[layer] > raw[mine].max()).sum()) + 1
                continue
            turn_scores = raw[is_turn]
            sparse = ch in ("keyword", "graph", "temporal", "evidence")  # channels whose unlisted records score 0: only real matches
            for rid, p in zip(rids, pos, strict=True):
                if p >= 0 and (raw[p] > 0 or not sparse):
                    out[int(rid)][name] = int((turn_scores > raw[p]).sum()) + 1
    return out


def _trace(plan: Any, cat: Any, results: Mapping[str, Any], per_route: Mapping[str, TurnScores],
           timings: Mapping[str, float], top: int = 10) -> dict[str, Any]:
    """What a search did, for debugging: plan, every channel call's best candidates, each route's best turns."""
    channels = {}
    for name, hits in results.items():
        order = np.argsort(-hits.scores, kind="stable")[:top]
        channels[name] = {"candidates": int(hits.rids.size), "complete": hits.fill is not None,
                          "best": [[int(hits.rids[i]), float(hits.scores[i])] for i in order]}
    routes = {}
    for goal, scores in per_route.items():
        finite = np.flatnonzero(np.isfinite(scores.total))
        best = finite[np.argsort(-scores.total[finite], kind="stable")[:top]]
        routes[goal] = [[int(cat.rids[p]), float(scores.total[p])] for p in best]
    return {"plan": plan.model_dump(mode="json"), "channels": channels, "routes": routes,
            "timings_ms": dict(timings)}


def _explain_zscore(p: int, per_route: Mapping[str, TurnScores], weights: Mapping[str, float]) -> dict[str, Any]:
    """The arithmetic behind one turn's score, route by route."""
    routes = {}
    for goal, s in per_route.items():
        routes[goal] = {
            "channels": {ch: {"score": float(s.channel_raw[ch][p]), "z": float(s.channel_z[ch][p]),
                              "weight": float(weights.get(ch, 1.0))} for ch in s.channel_raw},
            "fused": float(s.fused[p]), "window": float(s.window[p]), "speaker_boost": float(s.speaker[p]),
            "time_boost": float(s.time[p]), "session_prior": float(s.session[p]), "route_score": float(s.total[p]),
            "derived": float(s.derived[p]) if s.derived is not None else 0.0,
            "kind_bonus": float(s.kind_bonus[p]) if s.kind_bonus is not None else 0.0,
        }
    return {"fusion": "zscore", "routes": routes,
            "route_weights": {g: (1.0 if g == "query" else SECONDARY_ROUTE_WEIGHT) for g in per_route}}


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


def _context_line(when: float | None, speaker: str | None, role: str | None, text: str) -> str:
    stamp = datetime.fromtimestamp(when, UTC).strftime("%Y-%m-%d %H:%M") if when is not None else "undated"
    return f"[{stamp}] {speaker or role or 'memory'}: {text}"