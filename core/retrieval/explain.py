"""``explain`` and ``trace``, assembled from what the stages returned (nothing here scores anything).

* :func:`channel_ranks` — ``RetrievedItem.channels``: each returned turn's 1-based rank in every channel that
  matched it (a layer channel: its layer record's rank among the layer's records);
* :func:`zscore_details` — ``RetrievedItem.explanation`` for the zscore fusion: every route's channel scores,
  z-scores and weights, its window, speaker, time, session, derived and kind components, the route weights,
  and the rerank and supersession steps;
* :func:`build_trace` — ``SearchResult.trace``: the plan, every channel call's best candidates, each route's
  best turns and the stage timings.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from ..models import EvidenceRoute, SearchPlan
from ..rank.zscore import TurnScores
from ..recall.base import Hits
from ..recall.channels import ChannelSpec
from ..store.catalog import KIND_CODES, Catalog
from .fuse import RouteScores, channel_label

__all__ = ["build_trace", "channel_ranks", "explain_zscore", "zscore_details"]


def channel_ranks(cat: Catalog, scored: RouteScores, specs: Mapping[str, ChannelSpec],
                  rids: Sequence[int]) -> dict[int, dict[str, int]]:
    """For each returned turn, its 1-based rank among turns in every channel that matched it."""
    out: dict[int, dict[str, int]] = {int(r): {} for r in rids}
    if not rids:
        return out
    pos = cat.pos_of(np.asarray(rids, np.int64))
    is_turn = cat.kind == KIND_CODES["turn"]
    for route_name, scores in scored.per_route.items():
        route = scored.routes[route_name]
        for ch, raw in scores.channel_raw.items():
            name = channel_label(ch, route)
            spec = specs.get(ch)
            if spec is not None and spec.is_layer:  # the rank of the turn's layer record among the layer's records
                assert spec.record_kind is not None
                layer = cat.kind == KIND_CODES[spec.record_kind]
                for rid, p in zip(rids, pos, strict=True):
                    mine = np.flatnonzero(layer & (cat.anchor == p)) if p >= 0 else np.zeros(0, np.int64)
                    if len(mine):
                        out[int(rid)][name] = int((raw[layer] > raw[mine].max()).sum()) + 1
                continue
            turn_scores = raw[is_turn]
            matches_only = spec is not None and spec.matches_only  # unlisted records score 0: only real matches
            for rid, p in zip(rids, pos, strict=True):
                if p >= 0 and (raw[p] > 0 or not matches_only):
                    out[int(rid)][name] = int((turn_scores > raw[p]).sum()) + 1
    return out


def explain_zscore(p: int, per_route: Mapping[str, TurnScores], routes: Mapping[str, EvidenceRoute],
                   weights: Mapping[str, float]) -> dict[str, Any]:
    """The arithmetic behind one turn's score (catalog position ``p``), route by route."""
    out_routes = {}
    for name, s in per_route.items():
        out_routes[name] = {
            "channels": {ch: {"score": float(s.channel_raw[ch][p]), "z": float(s.channel_z[ch][p]),
                              "weight": float(weights.get(ch, 1.0))} for ch in s.channel_raw},
            "fused": float(s.fused[p]), "window": float(s.window[p]), "speaker_boost": float(s.speaker[p]),
            "time_boost": float(s.time[p]), "session_prior": float(s.session[p]), "route_score": float(s.total[p]),
            "derived": float(s.derived[p]) if s.derived is not None else 0.0,
            "kind_bonus": float(s.kind_bonus[p]) if s.kind_bonus is not None else 0.0,
            "answer": float(s.answer[p]) if s.answer is not None else 0.0,
        }
    return {"fusion": "zscore", "routes": out_routes,
            "route_weights": {name: float(routes[name].weight) for name in per_route}}


def zscore_details(cat: Catalog, positions: Iterable[int], scored: RouteScores, weights: Mapping[str, float], *,
                   reranked: Mapping[int, dict[str, float]],
                   supersedes: Mapping[int, str]) -> dict[int, dict[str, Any]]:
    """The explanation of every pool turn (by rid): fusion, then rerank and supersession when they applied."""
    positions = list(positions)
    details = {int(cat.rids[p]): explain_zscore(p, scored.per_route, scored.routes, weights) for p in positions}
    for rid, parts in reranked.items():
        if rid in details:
            details[rid]["rerank"] = parts
    for p in positions:
        if int(p) in supersedes:
            details[int(cat.rids[p])]["supersedes"] = supersedes[int(p)]
    return details


def build_trace(plan: SearchPlan, cat: Catalog, results: Mapping[str, Hits], per_route: Mapping[str, TurnScores],
                timings: Mapping[str, float], top: int = 10, visible: np.ndarray | None = None) -> dict[str, Any]:
    """What a search did, for debugging: plan, every channel call's best candidates, each route's best turns.

    With ``visible`` (:meth:`memory_ext.retrieval.scope.Scope.visible`) only records the search may show are
    listed: a version ``update`` replaced, or a record the filters exclude, never appears in a trace."""
    channels = {}
    for name, hits in results.items():
        shown = np.arange(hits.rids.size)
        if visible is not None and hits.rids.size:
            pos = cat.pos_of(hits.rids)
            shown = np.flatnonzero((pos >= 0) & visible[np.maximum(pos, 0)])
        order = shown[np.argsort(-hits.scores[shown], kind="stable")[:top]]
        channels[name] = {"candidates": int(hits.rids.size), "complete": hits.fill is not None,
                          "best": [[int(hits.rids[i]), float(hits.scores[i])] for i in order]}
    routes = {}
    for name, scores in per_route.items():
        finite = np.flatnonzero(np.isfinite(scores.total) & (True if visible is None else visible))
        best = finite[np.argsort(-scores.total[finite], kind="stable")[:top]]
        routes[name] = [[int(cat.rids[p]), float(scores.total[p])] for p in best]
    return {"plan": plan.model_dump(mode="json"), "channels": channels, "routes": routes,
            "timings_ms": dict(timings)}
