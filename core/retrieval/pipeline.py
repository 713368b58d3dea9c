"""The read pipeline: one object, built once per engine, that runs every stage of a search in order.

request → plan → scope → recall → score and fuse → rerank → select → hydrate → context; ``explain`` and
``trace`` are assembled from what the stages return (:mod:`memory_ext.retrieval.explain`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Executor
from dataclasses import replace
from datetime import datetime
from functools import partial
from typing import Any

import numpy as np

from ..config import EngineConfig
from ..e5_numpy import PASS_GATE
from ..models import ActionState, ChannelError, Namespace, RetrievedItem, RouteGoal, SearchPlan, SearchResult
from ..plan.expand import expand_plan
from ..plan.heuristic import plan_search
from ..plan.llm_planner import Planner
from ..plan.procedures import NEXT_STEP_ROUTE, fit_to_store
from ..plan.strategy import strategy_for
from ..rank.answer_slot import SLOT_TOP, slot_first
from ..rank.calibration import background_cosine, bounded_scores, cosine_calibration, item_cosines, reference_cosine
from ..rank.carriers import after_carriers
from ..rank.rerank import Reranker
from ..rank.updates import asks_past
from ..recall.channels import ChannelSet
from ..recall.encodings import clip_to_tokens
from ..recall.vector import cached_encoding, dense_key, has_encoding
from ..store.catalog import KIND_CODES, Catalog, RecordCatalog
from ..store.evidence import EvidenceIndex
from ..store.interface import TruthStore
from ..store.vector import VectorIndex
from .context import render_context
from .explain import build_trace, channel_ranks, zscore_details
from .feedback import FEEDBACK_ROUTE, feedback_hits, keep_first, score_feedback
from .fuse import Fusion, RouteScores, fuse, fusion_for, score_routes
from .hydrate import Hydrated, hydrate
from .participants import lift_participants
from .phrases import lift_phrases
from .procedures import lift_procedures
from .recall import CONVERSATION_GOALS, Recalled, plan_calls, recall
from .request import SearchRequest, parse_request
from .rerank import rerank
from .scope import scope_of
from .select import Selection, select
from .slots import lift_slot_values, slot_pool_size

__all__ = ["ReadPipeline"]

POOL_MIN_K = 10
"""Searches for up to this many items draw the same candidate pool (a search's first k items do not depend on k)."""


def _ms(t0: float) -> float:
    return round((time.perf_counter() - t0) * 1000, 3)


def _hop_allowed(plan: SearchPlan) -> bool:
    """The second hop never runs on a plan with an action or slot route: those routes rank what the agent is
    doing (a failure's patterns, a missing slot), and turns fed back from them would drown that."""
    return not any(route.goal in (RouteGoal.ACTION, RouteGoal.SLOT) for route in plan.routes)


class ReadPipeline:
    """Runs searches over one store (thread-safe: it keeps no per-search state).

    Built by :class:`~memory_ext.MemoryEngine` from what the stages need: the truth ``store`` and the record
    ``catalog``, the ``channels`` it built (:func:`memory_ext.recall.channels.build_channels`) and the thread
    ``pool`` they run on, the ``planner``, the optional ``reranker``, the ``config``, the ``vector_index`` (MMR
    uses the stored vectors when there is one), the ``evidence_index`` (to warn when it is empty), the
    embedder fallback warning, if any, and ``settle``: read-your-writes before the channels run, ``(ns_id,
    sparse, excerpt) -> (records still pending, ms waited or None)`` (the writer's
    :meth:`~memory_ext.ingest.pipeline.WritePipeline.settle_search`; ``sparse``: the turn records an excerpt
    search found without the sparse encodings its sparse channel scores, which a namespace gets on its first
    excerpt search; ``excerpt``: whether the search reads sparse encodings at all). ``health``: ``ns_id ->
    channel errors`` of the namespace's indexing (an embedder that is down,
    records in quarantine), added to every search of it so that a search without some vectors says so.
    """

    def __init__(self, *, store: TruthStore, catalog: RecordCatalog, channels: ChannelSet, pool: Executor,
                 planner: Planner, config: EngineConfig, reranker: Reranker | None = None,
                 vector_index: VectorIndex | None = None, evidence_index: EvidenceIndex | None = None,
                 embedder_warning: str | None = None,
                 settle: Callable[[int, Sequence[int], bool], tuple[int, float | None]] | None = None,
                 health: Callable[[int], list[ChannelError]] | None = None,
                 mixed_vectors: bool) -> None:
        self.store = store
        self.catalog = catalog
        self.channels = channels
        self.pool = pool
        self.planner = planner
        self.config = config
        self.reranker = reranker
        self.vector_index = vector_index
        self.evidence_index = evidence_index
        self.embedder_warning = embedder_warning
        self.settle = settle
        self.health = health
        self.fusion: Fusion = fusion_for(config.recall.fusion, rrf_k=config.recall.rrf_k)
        self._calibration = cosine_calibration(mixed_vectors)
        """The cosine constants of the item scores: fitted for sentence-mixed turn vectors or the turns' own
        (``mixed_vectors``: the kind the store holds)."""

    def use_vectors(self, config: EngineConfig, mixed: bool) -> None:
        """Score with ``config`` (its channel weights) and the constants of sentence-mixed turn vectors or not:
        after a whole-store reindex changed the store's kind of turn vectors."""
        self.config = config
        self._calibration = cosine_calibration(mixed)

    def search(self, query: str, namespace: Namespace | str, *, k: int = 10,
               filters: Mapping[str, Any] | None = None,
               action_state: ActionState | Mapping[str, Any] | None = None, explain: bool = False,
               now: datetime | str | float | None = None, trace: bool = False, include_cold: bool = False,
               as_of: datetime | str | float | None = None, min_score: float | None = None) -> SearchResult:
        """Validate the arguments and run :meth:`run` (see :meth:`memory_ext.MemoryEngine.search`)."""
        t0 = time.perf_counter()
        request = parse_request(query, namespace, limits=self.config.limits, k=k, filters=filters,
                                action_state=action_state, explain=explain, now=now, trace=trace,
                                include_cold=include_cold, as_of=as_of, min_score=min_score)
        return self.run(request, started=t0)

    def _sparse_gaps(self, cat: Catalog, ns_id: int) -> list[int]:
        """Turn records of the namespace without a sparse encoding, when this engine runs the sparse channel
        (none otherwise): a namespace's turns get theirs on its first excerpt search (``ingest.sparse_encodings``)."""
        index = getattr(self.channels.context, "sparse_index", None)
        if "sparse" not in self.channels.recallers or index is None:
            return []
        turns = cat.rids[dict(cat.kind_groups()).get(KIND_CODES["turn"], np.zeros(0, np.int64))]
        encoded = index.matrix(self.store.reader(), ns_id).rids
        return [int(r) for r in (turns if encoded.size == 0 else np.setdiff1d(turns, encoded, assume_unique=True))]

    def _sparse_warning(self, cat: Catalog, ns_id: int) -> tuple[str, ...]:
        """After the settle of an excerpt search that found turns without sparse encodings: read the namespace's
        encodings again (those made now may sit below what the cached matrix has read) and say what is missing."""
        index = getattr(self.channels.context, "sparse_index", None)
        if index is not None:
            index.invalidate(ns_id)
        left = len(self._sparse_gaps(cat, ns_id))
        if not left:
            return ()
        return (f"sparse channel: {left} turn(s) of this namespace have no sparse encoding yet (a writer makes them "
                "when an excerpt search first asks; SearchResult.pending counts those queued); it searched the "
                "others",)

    def _cosines(self, recalled: Recalled, rids: Sequence[int]) -> list[float] | None:
        """Each of ``rids``' cosine with the query, from the main route's vector hits (None: not calibrated)."""
        return item_cosines(recalled.route_hits[0].get("vector") if recalled.route_hits else None, rids,
                            getattr(getattr(self.channels.context, "embedder", None), "id", None))

    def _stats(self, recalled: Recalled, query: str) -> tuple[float | None, float | None]:
        """The query's background and reference cosines (:mod:`memory_ext.rank.calibration`); the query vector is
        the one the vector channel cached (no reference when it made none)."""
        ctx = self.channels.context
        embedder = getattr(ctx, "embedder", None)
        vector = None
        if ctx is not None and embedder is not None and has_encoding(ctx, dense_key(embedder, query)):
            vector = cached_encoding(ctx, dense_key(embedder, query), lambda: None)
        return (background_cosine(recalled.route_hits[0].get("vector") if recalled.route_hits else None),
                reference_cosine(vector, embedder))

    def _clip(self, request: SearchRequest) -> Callable[[str], str] | None:
        """An agent's decision point: its route texts encoded from their first ``recall.action_query_tokens``."""
        tokens, ctx = self.config.recall.action_query_tokens, self.channels.context
        if request.action_state is None or tokens <= 0 or ctx is None:
            return None
        return partial(clip_to_tokens, ctx.embedder, max_tokens=tokens)

    def _first_relevance(self, cat: Catalog, total: np.ndarray, pool_rids: Sequence[int],
                         pool_scores: Sequence[float], scored: RouteScores, request: SearchRequest,
                         recalled: Recalled, ns_id: int) -> float:
        """The bounded relevance the first ranking's best turn would be returned with (the second hop's gate,
        ``recall.feedback_gate``); 1.0 when the gate is off, without computing it. Without the Chinese offset
        (``CosineCalibration.cjk_logit``, chosen for no-answer questions): with it the hop ran less often on
        Chinese questions and MADial dev R@5 / R@10 fell 0.533 / 0.683 -> 0.524 / 0.673."""
        if self.config.recall.feedback_gate <= 0:
            return 1.0
        top = [int(pool_rids[0])]
        record = self.store.records_by_rid(ns_id, top).get(top[0])
        fused_values, best = self.fusion.fused_values(cat, total, top, pool_rids, pool_scores, scored,
                                                      self.config.recall.channel_weights)
        return bounded_scores(fused_values, texts=[record.text if record is not None else ""], query=request.query,
                              fusion=self.fusion.name, rrf_max=best, cosines=self._cosines(recalled, top),
                              calibration=replace(self._calibration, cjk_logit=0.0),  # the gate's own scale
                              stats=self._stats(recalled, request.query))[0]

    def _bounded(self, hydrated: Hydrated, cat: Catalog, total: np.ndarray, pool_scores: Sequence[float],
                 pool_rids: Sequence[int], scored: RouteScores, request: SearchRequest, recalled: Recalled, *,
                 cold_penalty: float, dependents: Mapping[int, int] | None = None) -> list[RetrievedItem]:
        """The items with ``score`` = their bounded relevance (:mod:`memory_ext.rank.calibration`); a dependent
        turn (``dependents``: rid -> its carrier's rid) is no more relevant than its carrier."""
        fused_values, best = self.fusion.fused_values(cat, total, hydrated.rids, pool_rids, pool_scores, scored,
                                                      self.config.recall.channel_weights)
        cosines = self._cosines(recalled, hydrated.rids)
        stats = self._stats(recalled, request.query) if cosines is not None else (None, None)
        at = {rid: n for n, rid in enumerate(hydrated.rids)}
        carried = {at[d]: at[c] for d, c in (dependents or {}).items() if d in at and c in at}
        bounded = bounded_scores(fused_values, texts=[i.text for i in hydrated.items], query=request.query,
                                 fusion=self.fusion.name, rrf_max=best, cosines=cosines,
                                 calibration=replace(self._calibration,
                                                     slot_logit=self.config.recall.answer_slot_logit,
                                                     absent_logit=self.config.recall.answer_slot_absent_logit),
                                 stats=stats, carriers=carried)
        out = []
        for n, (rid, item, fused_value, score) in enumerate(
                zip(hydrated.rids, hydrated.items, fused_values, bounded, strict=True)):
            update: dict[str, Any] = {"score": score}
            if item.explanation is not None:
                explanation = dict(item.explanation)
                explanation["score"] = {"relevance": score, "raw": item.raw_score, "fused": fused_value}
                if cosines is not None:
                    explanation["score"]["cosine"] = cosines[n]
                    explanation["score"]["background"], explanation["score"]["reference"] = stats
                p = cat.pos_of(np.asarray([rid], np.int64))[0]
                if cold_penalty and p >= 0 and cat.cold[p]:
                    explanation["cold_penalty"] = cold_penalty
                update["explanation"] = explanation
            out.append(item.model_copy(update=update))
        return out

    def run(self, request: SearchRequest, *, started: float | None = None) -> SearchResult:
        """Every stage of one search, in order, marked in flight for the whole of it: background forward passes
        (the indexer's) stand aside meanwhile (:meth:`memory_ext.e5_numpy.PassGate.foreground_work`)."""
        with PASS_GATE.foreground_work():
            result, pending, waited_ms = self._run(request, started=started)
        return result.with_pending(pending, waited_ms)

    def _run(self, request: SearchRequest, *, started: float | None = None
             ) -> tuple[SearchResult, int, float | None]:
        """The search, and ``(records still pending, ms waited)`` of the settle before its channels ran."""
        t0 = time.perf_counter() if started is None else started
        cfg = self.config.recall
        store, query, k = self.store, request.query, request.k
        warnings: tuple[str, ...] = (self.embedder_warning,) if self.embedder_warning else ()
        errors = [ChannelError(channel="embedder", error_type="EmbedderFallback",
                               message=self.embedder_warning)] if self.embedder_warning else []
        ns_id = store.find_namespace(request.namespace.key)
        if ns_id is None:  # nothing to search
            plan = plan_search(query, now=request.reference, speakers=(), action_state=request.action_state)
            return SearchResult(query=query, plan=plan, channel_errors=tuple(errors), warnings=warnings,
                                timings_ms={"total": _ms(t0)}), 0, None
        # plan
        cat = self.catalog.get(store.reader(), ns_id)
        plan, planner_error = self.planner.plan(query, now=request.reference, speakers=cat.speakers(),
                                                action_state=request.action_state)
        if planner_error is not None:
            errors.append(planner_error)
        plan = fit_to_store(plan, has_procedures=bool(np.any(cat.kind == KIND_CODES["procedure"])))
        plan = expand_plan(plan, expansion=cfg.expansion, expansion_weight=cfg.expansion_weight,
                           split_conjunctions=cfg.split_conjunctions, associative_weight=cfg.associative_weight)
        # read-your-writes: the namespace's queued vectors, and for an excerpt its turns' sparse encodings (an
        # agent's decision point reads the encodings the namespace has: it neither starts nor waits for a backfill)
        excerpt = any(r.goal in CONVERSATION_GOALS for r in plan.routes)
        gaps = self._sparse_gaps(cat, ns_id) if excerpt and request.action_state is None else []
        pending, waited_ms = self.settle(ns_id, gaps, excerpt) if self.settle is not None else (0, None)
        if self.health is not None:
            errors += self.health(ns_id)
        if gaps:
            warnings = (*warnings, *self._sparse_warning(cat, ns_id))
        # scope
        scope = scope_of(store, cat, ns_id, request, cold_penalty=cfg.cold_penalty)
        if scope.returns_nothing(cat):
            return SearchResult(query=query, plan=plan, channel_errors=tuple(errors), warnings=warnings,
                                timings_ms={"total": _ms(t0)}), pending, waited_ms
        # recall
        limit = max(4 * k, cfg.candidates_per_channel)
        evidence = self.evidence_index
        calls = plan_calls(plan, cat, ns_id, self.channels, limit=limit,
                           layer_min_chars=self.config.ingest.layer_min_chars,
                           evidence_is_empty=lambda: evidence is not None
                           and evidence.record_count(store.reader(), ns_id) == 0, allowed=scope.allowed,
                           pool=self.pool,
                           no_vectors=frozenset() if cfg.slot_route_vectors else frozenset({RouteGoal.SLOT}),
                           clip=self._clip(request))
        warnings = (*warnings, *calls.warnings)
        recalled = recall(self.pool, calls, cfg.channel_timeout_s)
        errors += recalled.errors
        # score and fuse
        t_rank = time.perf_counter()
        feedback_ms: float | None = None
        weights = cfg.channel_weights
        # one pool for every k up to POOL_MIN_K: MMR then orders the same candidates, so a search for k items
        # returns the first k of a search for more (up to POOL_MIN_K)
        pool_size = k if cfg.mmr_lambda >= 1.0 else max(k, POOL_MIN_K) * cfg.mmr_pool_factor
        strategy = strategy_for(plan.question_type, cfg.strategy)
        scored = score_routes(cat, plan, recalled, strategy=strategy, weights=weights, scope=scope,
                              channel_kinds=calls.channel_kinds, fusion=self.fusion, limit=limit)

        read: dict[int, str | None] = {}  # position -> text: the fusions and lifts of one search read the same pool

        def text_of(positions: Sequence[int]) -> dict[int, str]:
            todo = [p for p in positions if p not in read]
            if todo:
                rows = store.records_by_rid(ns_id, [int(r) for r in cat.rids[np.asarray(todo, np.int64)]])
                for p in todo:
                    row = rows.get(int(cat.rids[p]))
                    read[p] = None if row is None else row.text
            return {p: text for p in positions if (text := read[p]) is not None}

        restating, past = not strategy.assistant, asks_past(query)
        # a missing slot's value may rank low before its lift (a short answer to a long request): a wider pool
        fuse_size = slot_pool_size(pool_size, request.action_state)
        fused = fuse(cat, scored, scope, fusion=self.fusion, weights=weights, pool_size=fuse_size,
                     as_of=request.as_of, text_of=text_of, restating=restating, past=past, query=query)
        if cfg.feedback_weight > 0 and fused.rids and self.channels.context is not None and _hop_allowed(plan) \
                and self._first_relevance(cat, fused.total, fused.rids, fused.scores, scored, request, recalled,
                                          ns_id) >= cfg.feedback_gate:
            # the second hop: a feedback route from the first ranking's best turns (retrieval/feedback.py)
            t_feedback = time.perf_counter()
            feedback = feedback_hits(store, self.channels.context, cat, ns_id, plan, fused.rids,
                                     docs=cfg.feedback_docs, n_terms=cfg.feedback_terms, beta=cfg.feedback_dense,
                                     weight=cfg.feedback_weight, decay=cfg.feedback_decay, limit=limit,
                                     channels=tuple(recalled.route_hits[0]) if recalled.route_hits else ())
            if feedback is not None:
                score_feedback(cat, scored, feedback, strategy=strategy, weights=weights, scope=scope,
                               fusion=self.fusion, limit=limit)
                fused = keep_first(fused, fuse(cat, scored, scope, fusion=self.fusion, weights=weights,
                                               pool_size=fuse_size, as_of=request.as_of, text_of=text_of,
                                               restating=restating, past=past, query=query),
                                   cfg.feedback_keep)
            feedback_ms = _ms(t_feedback)
        fused = lift_slot_values(fused, cat, text_of, request.action_state, query)  # a missing slot's value (slots.py)
        if fuse_size > pool_size:  # the pool after the lift: as large as without it
            fused = replace(fused, rids=fused.rids[:pool_size], scores=fused.scores[:pool_size])
        # between two calls, the pages of tools not used yet first (procedures.py)
        next_step = scored.per_route.get(NEXT_STEP_ROUTE)  # its own ranking of the tool pages joins the fusion's
        fused = lift_procedures(fused, cat, plan, request.action_state, text_of,
                                route=next_step.total if next_step is not None else None)
        # a conversation excerpt's memories with the same people first (participants.py)
        fused = lift_participants(fused, cat, plan, query, text_of, weight=cfg.participant_weight)
        # a question's memories that repeat its own words in a row first (phrases.py)
        fused = lift_phrases(fused, cat, plan, query, text_of, weight=cfg.phrase_weight)
        pool_rids, pool_scores = fused.rids, fused.scores
        details = {rid: dict(parts) for rid, parts in fused.details.items()}
        rerank_ms: float | None = None
        if self.fusion.reranks:
            # rerank
            reranked: dict[int, dict[str, float]] = {}
            if self.reranker is not None and pool_rids:
                t_rerank = time.perf_counter()
                outcome = rerank(self.reranker, store, query, ns_id, cat, fused, scored, pool_size=pool_size, k=k,
                                 config=cfg)
                pool_rids, pool_scores, reranked = outcome.rids, outcome.scores, outcome.parts
                if outcome.error is not None:
                    errors.append(outcome.error)
                rerank_ms = _ms(t_rerank)
            positions = cat.pos_of(np.asarray(pool_rids, np.int64))
            details = zscore_details(cat, positions, scored, weights, reranked=reranked,
                                     supersedes=fused.supersedes) if request.explain else {}
        for rid, by in fused.raised.items():  # the first hop's best turns kept their places (keep_first)
            if rid in details:
                details[rid]["feedback_keep"] = {"raised_by": by}
        # select
        quota_routes = {n: s for n, s in scored.per_route.items() if n != FEEDBACK_ROUTE}
        # chosen for at least POOL_MIN_K and cut to k after the carriers' reorder: a search for k items stays the
        # first k of a search for more (a dependent's carrier may sit just past k)
        selection = select(store, ns_id, cat, pool_rids, pool_scores, per_route=quota_routes,
                           routes=scored.routes, total=fused.total, k=max(k, POOL_MIN_K), config=cfg,
                           use_vectors=self.vector_index is not None)
        dependents = fused.dependents
        if cfg.answer_slot_first and len(selection.rids) > 1:  # the turn holding the asked kind of value first
            selection, moved = _slot_first(selection, query, text_of, cat)
            if moved is not None:  # a short turn holding the value asked ("老师姓林。") answers it: no acknowledgement
                dependents = {d: c for d, c in dependents.items() if d != moved}
        if dependents:  # diversification may have swapped a dependent turn above its carrier
            ordered, ordered_scores = after_carriers(selection.rids, selection.scores, dependents)
            selection = replace(selection, rids=ordered, scores=ordered_scores)
        selection = replace(selection, rids=selection.rids[:k], scores=selection.scores[:k])
        for rid, step in selection.mmr.items():
            if rid in details:
                details[rid]["mmr"] = step
        # hydrate
        hydrated = hydrate(store, ns_id, selection.rids, selection.scores,
                           channel_ranks(cat, scored, self.channels.specs, selection.rids), details,
                           request.explain, raw_scores=selection.scores)
        # bounded scores (rank/calibration.py): from each item's fused score and query coverage, monotone
        items = self._bounded(hydrated, cat, fused.total, selection.scores, selection.rids, scored, request,
                              recalled, cold_penalty=scope.cold_penalty, dependents=dependents)
        if request.min_score is not None:  # below the caller's line: left out of the items and of the context
            items = [item for item in items if item.score >= request.min_score]
        timings = {f"channel.{n}": v for n, v in recalled.timings_ms.items()}
        timings["rank"] = _ms(t_rank)
        if feedback_ms is not None:
            timings["feedback"] = feedback_ms
        if rerank_ms is not None:
            timings["rerank"] = rerank_ms
        # context
        t_context = time.perf_counter()
        visible = scope.visible(cat)
        context = render_context(store, ns_id, items, hydrated.source_turns,
                                 window_turns=cfg.context_window_turns, budget_tokens=cfg.context_budget_tokens,
                                 cat=cat, visible=visible)
        timings["context"] = _ms(t_context)
        timings["total"] = _ms(t0)
        trace_data = build_trace(plan, cat, recalled.results, scored.per_route, timings,
                                 visible=visible) if request.trace else None
        return SearchResult(query=query, items=tuple(items), context=context, plan=plan,
                            channel_errors=tuple(errors), warnings=warnings, timings_ms=timings,
                            trace=trace_data), pending, waited_ms


def _slot_first(selection: Selection, query: str, text_of: Callable[[Sequence[int]], Mapping[int, str]],
                cat: Catalog) -> tuple[Selection, int | None]:
    """``selection`` with the turn :func:`memory_ext.rank.answer_slot.slot_first` names moved first (its score
    raised to the first one's), and that turn's rid; ``(selection, None)`` when it names none."""
    head = [int(p) for p in cat.pos_of(np.asarray(selection.rids[:SLOT_TOP], np.int64))]
    texts = text_of([p for p in head if p >= 0])
    j = slot_first(query, [texts.get(p, "") for p in head])
    if j is None:
        return selection, None
    rids, scores = list(selection.rids), list(selection.scores)
    rids.insert(0, rids.pop(j))
    scores.insert(0, max(scores.pop(j), scores[0]))
    return replace(selection, rids=rids, scores=scores), rids[0]
