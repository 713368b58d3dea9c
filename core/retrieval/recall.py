"""Stage 3, recall: the channel calls a plan needs, run in parallel on the engine's thread pool.

Every route of the plan asks every built channel (:class:`~memory_ext.recall.channels.ChannelSet`) unless the
channel's row says otherwise: a channel restricted to one record kind gets those records' ids (and is skipped
when there are none), a time channel needs a route with a time filter, a conversation channel a plan with
conversation routes. Routes with the same query text share one call per channel; when the embedder makes dense and
sparse encodings together, the route texts' query encodings are made in one batch that the channel calls share
(:mod:`memory_ext.recall.encodings`). A failing channel becomes a
:class:`~memory_ext.models.ChannelError`; only when every call fails is :class:`~memory_ext.errors.RetrievalError`
raised.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from concurrent.futures import Executor
from dataclasses import dataclass, field
from functools import partial

import numpy as np

from ..errors import RetrievalError
from ..models import ChannelError, EvidenceRoute, RouteGoal, SearchPlan
from ..recall.base import Hits, RecallRequest
from ..recall.channels import CHANNEL_SPECS, ChannelSet
from ..recall.encodings import route_encodings
from ..recall.runner import run_channels
from ..store.catalog import KIND_CODES, Catalog

__all__ = ["CONVERSATION_GOALS", "ChannelCalls", "Recalled", "call_name", "plan_calls", "recall"]

CONVERSATION_GOALS = (RouteGoal.OPENING, RouteGoal.FOCUS)
"""Route goals the heuristic planner gives a conversation excerpt (see ``plan.heuristic.conversation_parts``)."""


def call_name(channel: str, route: EvidenceRoute, index: int) -> str:
    """The runner's name of one channel call: ``keyword`` for the main route, ``keyword@action`` otherwise
    (``keyword@route<i>`` for a speaker's route)."""
    if route.goal is RouteGoal.QUERY:
        return channel
    return f"{channel}@{route.name}" if route.goal is not RouteGoal.SPEAKER else f"{channel}@route{index}"


@dataclass(frozen=True)
class ChannelCalls:
    """The calls of one search and how they serve the routes."""

    calls: dict[str, Callable[[], Hits | list[tuple[int, float]]]]
    """call name -> the call"""
    route_calls: tuple[dict[str, str], ...]
    """per route of the plan: channel -> the call that serves it"""
    channel_kinds: dict[str, np.ndarray] = field(default_factory=dict)
    """channel -> the records its evidence counts for (only when a channel is restricted to one kind)"""
    warnings: tuple[str, ...] = ()


def plan_calls(plan: SearchPlan, cat: Catalog, ns_id: int, channels: ChannelSet, *, limit: int,
               layer_min_chars: int, evidence_is_empty: Callable[[], bool],
               allowed: np.ndarray | None = None, pool: Executor | None = None,
               no_vectors: frozenset[RouteGoal] = frozenset(),
               clip: Callable[[str], str] | None = None) -> ChannelCalls:
    """The channel calls ``plan`` needs (``limit`` candidates each) and the warnings about channels that can
    find nothing in this namespace. ``evidence_is_empty`` says whether the namespace has evidence nodes;
    ``allowed`` (the scope's filter mask over the catalog) restricts every channel to the records passing the
    search's filters, so the channels rank inside the filtered set (nothing is over-fetched and dropped).
    ``pool`` (the one the calls will run on) may lend the query encodings a worker; routes whose goal is in
    ``no_vectors`` ask no channel that needs vectors (``recall.slot_route_vectors`` off: slot routes); ``clip``
    gives the text the channels that read model encodings search for (``recall.action_query_tokens``: an agent's
    long request encoded from its first sentences; the keyword channels read it whole)."""
    specs = channels.specs
    kind_rids: dict[str, np.ndarray] = {}

    def rids_of(kind: str) -> np.ndarray:
        if kind not in kind_rids:
            mask = cat.kind == KIND_CODES[kind]
            kind_rids[kind] = cat.rids[mask if allowed is None else mask & allowed]
        return kind_rids[kind]

    filtered = cat.rids[allowed] if allowed is not None else None

    warnings: list[str] = []
    channel_kinds: dict[str, np.ndarray] = {}
    if any(spec.record_kind is not None for spec in specs.values()):
        is_layer = np.isin(cat.kind, [KIND_CODES["l0"], KIND_CODES["l1"]])
        for channel, spec in specs.items():  # each layer is scored by its own channels only
            channel_kinds[channel] = cat.kind == KIND_CODES[spec.record_kind] \
                if spec.record_kind is not None else ~is_layer
        empty = [layer.upper() for layer in ("l0", "l1") if not (cat.kind == KIND_CODES[layer]).any()]
        if empty and any(spec.is_layer for spec in specs.values()):
            warnings.append(f"layer channels: no {' or '.join(empty)} layers in this namespace (only turns "
                            f"of at least ingest.layer_min_chars={layer_min_chars} characters "
                            "written with globals.layers_index_enabled have them); those channels found nothing")
    if "evidence" in specs and evidence_is_empty():
        warnings.append("evidence channel: no evidence nodes in this namespace (turns written while "
                        "globals.evidence_enabled was off are not indexed); it found nothing")
    # the sparse latent-term channel matches situations: it serves conversation excerpts, not questions
    conversational = any(r.goal in CONVERSATION_GOALS for r in plan.routes)
    for channel, reason in channels.unavailable.items():
        spec = CHANNEL_SPECS[channel]
        if (spec.conversation_only and not conversational) or \
                (spec.needs_time_filter and all(r.time_filter is None for r in plan.routes)):
            continue  # this search would not have called it
        warnings.append(f"{channel} channel: switched on (globals.{spec.switch}) but it cannot run: {reason}; "
                        "it found nothing")
    # a namespace with no sparse encodings (an agent's store of turns only ever searched with an action state,
    # which never starts the backfill) gives the sparse channel nothing to find: no call, so no query encodings
    # (a raw pass and the sparse head per route text) are made for it
    unencoded = conversational and _no_sparse_encodings(channels, ns_id, specs)
    skipped: list[str] = []
    clipped: dict[str, str] = {}  # route text -> what its encodings are made of (tokenized once per search)
    requests: dict[str, tuple[str, RecallRequest]] = {}  # call name -> (channel, request)
    call_of: dict[tuple[str, str], str] = {}  # (channel, query text) -> call: routes sharing a text share it
    route_calls: list[dict[str, str]] = []
    for r_index, route in enumerate(plan.routes):
        text = " ".join(route.queries)
        names = {}
        for channel in channels.recallers:
            spec = specs[channel]
            only = filtered
            if spec.needs_time_filter and route.time_filter is None:
                continue  # nothing to look for
            if spec.record_kind is not None:
                only = rids_of(spec.record_kind)
                if only.size == 0:
                    continue
            if spec.conversation_only and not conversational:
                continue
            if spec.needs_vectors and route.goal in no_vectors:
                continue
            query = text
            if clip is not None and (spec.needs_vectors or spec.needs_sparse):
                query = clipped[text] if text in clipped else clipped.setdefault(text, clip(text))
            if spec.needs_sparse and unencoded:
                skipped.append(query)  # its encodings are not made, but the excerpt is pooled as if they were
                continue
            if (channel, query) not in call_of:
                name = call_of[(channel, query)] = call_name(channel, route, r_index)
                requests[name] = (channel, RecallRequest(query=query, ns_id=ns_id, limit=limit, allowed=only,
                                                         route=route))
            names[channel] = call_of[(channel, query)]
        route_calls.append(names)
    # the route texts' query encodings, made together when the embedder can (recall/encodings.py)
    encodings = route_encodings(
        channels.context,
        dense_texts=list(dict.fromkeys(q.query for ch, q in requests.values() if specs[ch].needs_vectors)),
        sparse_texts=list(dict.fromkeys(q.query for ch, q in requests.values() if specs[ch].needs_sparse)),
        executor=pool, plan_texts=skipped)
    calls: dict[str, Callable[[], Hits | list[tuple[int, float]]]] = {}
    for name, (channel, request) in requests.items():
        call: Callable[[], Hits | list[tuple[int, float]]] = partial(channels.recallers[channel].recall, request)
        if encodings is not None and (specs[channel].needs_vectors or specs[channel].needs_sparse):
            call = encodings.before(request.query, call)
        calls[name] = call
    return ChannelCalls(calls=calls, route_calls=tuple(route_calls), channel_kinds=channel_kinds,
                        warnings=tuple(warnings))


def _no_sparse_encodings(channels: ChannelSet, ns_id: int, specs: Mapping[str, object]) -> bool:
    """Whether the namespace's sparse index is empty, so every sparse-channel call would find nothing."""
    ctx = channels.context
    index = getattr(ctx, "sparse_index", None) if ctx is not None else None
    if ctx is None or index is None:
        return False
    if not any(CHANNEL_SPECS[ch].needs_sparse for ch in channels.recallers if ch in specs):
        return False
    return bool(index.matrix(ctx.store.reader(), ns_id).rids.size == 0)


@dataclass(frozen=True)
class Recalled:
    """What the channels found: every call's hits, each route's hits by channel, failures, timings (ms)."""

    results: Mapping[str, Hits]
    route_hits: tuple[dict[str, Hits], ...]
    errors: tuple[ChannelError, ...] = ()
    timings_ms: Mapping[str, float] = field(default_factory=dict)


def recall(pool: Executor, planned: ChannelCalls, timeout_s: float) -> Recalled:
    """Run the calls side by side (at most ``timeout_s`` in all); raise RetrievalError if every one failed."""
    run = run_channels(pool, planned.calls, timeout_s)
    if not run.results:
        raise RetrievalError(run.errors)
    route_hits = tuple({ch: run.results[name] for ch, name in names.items() if name in run.results}
                       for names in planned.route_calls)
    return Recalled(results=run.results, route_hits=route_hits, errors=tuple(run.errors),
                    timings_ms=run.timings_ms)
