"""Stage 4, score and fuse: each route's turn scores from its channels' hits, then one pool of candidates.

* **Score** (:func:`score_routes`): per route, :func:`memory_ext.rank.zscore.rank_turns` turns the channels'
  hits into turn scores (z-scores per channel and record kind, windows, derived records, the route's speakers,
  time filter and boosted kinds, the session prior) with the question type's strategy.
* **Fuse** (:func:`fuse`): the fusion strategy (:class:`Fusion`, one object per ``recall.fusion``, made by
  :func:`fusion_for`) draws the pool. :class:`ZScoreFusion` sums the routes weighted by ``EvidenceRoute.weight``;
  :class:`RRFFusion` fuses every channel call's turn ranking by reciprocal rank, each weighted by its route's
  weight times its channel's weight. A superseded turn lifts its successor just above itself (unless ``as_of``);
  then the cold-tier prior: a cold turn loses ``Scope.cold_penalty`` (zscore: subtracted; rrf: its score divided
  by ``1 + cold_penalty / 10``, about five ranks down at the top of one channel), so a strong match in the cold
  tier still ranks first; the scope's ``as_of`` mask is applied last. The pool is the best ``pool_size`` turns.

Everything that differs between the fusions lives in its strategy object: how a route's scores are accumulated
(:meth:`Fusion.add_route`), how the pool is drawn (:meth:`Fusion.pool`), which score of an item the calibration
reads (:meth:`Fusion.fused_values`) and whether the pool can be reranked and explained channel by channel
(:attr:`Fusion.reranks`) and whether the layer channels can be fused in (:attr:`Fusion.layers`). The read pipeline
and :func:`memory_ext.assembly.validate_config` hold one and never branch on the fusion's name.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

import numpy as np

from ..models import EvidenceRoute, RouteGoal, SearchPlan
from ..plan.strategy import Strategy
from ..rank.carriers import content_first
from ..rank.fusion import rrf
from ..rank.updates import newest_first
from ..rank.zscore import TurnScores, rank_turns
from ..store.catalog import Catalog
from .recall import Recalled
from .scope import Scope

__all__ = ["FUSIONS", "Fused", "Fusion", "RRFFusion", "RouteScores", "ZScoreFusion", "channel_label", "fuse",
           "fusion_for", "pool_texts", "promote_successors", "reorder_pool", "score_routes"]


def channel_label(channel: str, route: EvidenceRoute) -> str:
    """How a channel of a route is named in explain, trace and ``RetrievedItem.channels``: ``keyword`` for the
    main route, ``keyword@<route name>`` otherwise."""
    return channel if route.goal is RouteGoal.QUERY else f"{channel}@{route.name}"


@dataclass(frozen=True)
class RouteScores:
    """Every route's turn scores, by route name, and their fusion input."""

    per_route: dict[str, TurnScores]
    routes: dict[str, EvidenceRoute]
    """The route of each name in ``per_route``."""
    total: np.ndarray
    """zscore: the sum over routes of ``weight x route score`` per catalog position; rrf: zeros."""
    rrf_parts: dict[str, list[int]] = field(default_factory=dict)
    """rrf: every channel label's turn ranking (rids, best first)."""
    rrf_part_weights: dict[str, tuple[str, float]] = field(default_factory=dict)
    """rrf: channel label -> (channel, route weight)."""


def score_routes(cat: Catalog, plan: SearchPlan, recalled: Recalled, *, strategy: Strategy,
                 weights: Mapping[str, float], scope: Scope, channel_kinds: Mapping[str, np.ndarray],
                 fusion: Fusion | str, limit: int) -> RouteScores:
    """Score every route of ``plan`` over the catalog (routes without hits are left out); ``fusion`` (a
    :class:`Fusion` or its name) accumulates them."""
    fusion = fusion_for(fusion)
    scored = RouteScores(per_route={}, routes={}, total=np.zeros(len(cat)))
    for r_index, route in enumerate(plan.routes):
        hits = recalled.route_hits[r_index]
        if not hits:
            continue
        span = (route.time_filter[0].timestamp(), route.time_filter[1].timestamp()) if route.time_filter else None
        scores = rank_turns(cat, hits, weights, strategy, allowed=scope.allowed, speakers=list(route.speakers),
                            time_span=span, assistant_roles=cat.assistant,
                            bonus_kinds=[kind.value for kind in route.boost_kinds], channel_kinds=channel_kinds)
        scored.per_route[route.name] = scores
        scored.routes[route.name] = route
        fusion.add_route(scored, cat, route, scores, scope=scope, limit=limit)
    return scored


def promote_successors(cat: Catalog, total: np.ndarray, allowed: np.ndarray | None, *,
                       past: bool = False) -> dict[int, str]:
    """A superseded turn that scores lifts the turn that replaced it just above itself (current facts first);
    ``past`` (a question about before: "where did Lena live before?", 以前): a superseded turn that scores below
    its successor trades places with it (the earlier statement answers; no third turn moves). Changes ``total``
    in place; returns {lifted position: reason} for explain."""
    out: dict[int, str] = {}
    for old, new in cat.successor.items():
        if not np.isfinite(total[old]) or not np.isfinite(total[new]) or (allowed is not None and not allowed[new]):
            continue
        if past:
            if total[old] < total[new]:  # the two trade places: no third turn is pushed down
                total[old], total[new] = total[new], total[old]
                out[old] = f"traded places with its successor rid {int(cat.rids[new])} (a question about the past)"
        elif total[new] <= total[old]:
            total[new] = total[old] + 1e-6
            out[new] = f"lifted above superseded record rid {int(cat.rids[old])}"
    return out


@dataclass(frozen=True)
class Fused:
    """The fused scores and the candidate pool.

    ``total`` holds the final score of every catalog position (``-inf``: not returnable); ``rids``/``scores``
    are the pool, best first; ``ordered`` every returnable position best first (zscore only: what a reranker
    falls back to); ``details`` each pool rid's fusion arithmetic (rrf only; zscore's is built on demand).
    """

    total: np.ndarray
    rids: list[int]
    scores: list[float]
    ordered: np.ndarray | None = None
    supersedes: dict[int, str] = field(default_factory=dict)
    """successor position -> why it was lifted (zscore explain)"""
    details: dict[int, dict[str, Any]] = field(default_factory=dict)
    raised: dict[int, float] = field(default_factory=dict)
    """rid -> how much :func:`memory_ext.retrieval.feedback.keep_first` raised its score (explain)"""
    dependents: dict[int, int] = field(default_factory=dict)
    """rid of a turn that only acknowledges or asks -> rid of the turn carrying its content
    (:func:`memory_ext.rank.carriers.content_first`)"""


def fuse(cat: Catalog, scored: RouteScores, scope: Scope, *, fusion: Fusion | str, rrf_k: int = 60,
         weights: Mapping[str, float], pool_size: int, as_of: float | None,
         text_of: Callable[[Sequence[int]], Mapping[int, str]] | None = None, restating: bool = True,
         past: bool = False, query: str | None = None) -> Fused:
    """Fuse the routes into one score per turn and draw the pool (see the module docstring); ``fusion`` is a
    :class:`Fusion` or its name (``rrf_k`` serves a name only). With ``text_of`` (catalog positions -> their
    texts), zscore fusion puts turns that only acknowledge or ask below the turn carrying their content
    (:func:`memory_ext.rank.carriers.content_first`; ``restating``: an assistant's restating reply too), then
    a later statement of the same subject above the earlier (:func:`memory_ext.rank.updates.newest_first`;
    ``past``: a question about before, which puts the earlier first, a superseded statement above its successor
    where an assistant speaks; ``query``: the question, whose words an assistant's reply may hold)."""
    fusion = fusion_for(fusion, rrf_k=rrf_k)
    total = scored.total.copy()
    links: dict[int, int] = {}
    if text_of is not None and isinstance(fusion, ZScoreFusion):
        links = content_first(cat, total, text_of, top=2 * pool_size, restating=restating, query=query)
        newest_first(cat, total, text_of, past=past)
    lift = as_of is None and (not past or bool(cat.assistant.any()))  # memories without an assistant: as before
    supersedes = promote_successors(cat, total, scope.flags, past=past) if lift else {}
    cold = cat.cold if scope.cold_penalty > 0 and cat.cold.any() else None
    fused = fusion.pool(cat, scored, scope, total, supersedes=supersedes, cold=cold, weights=weights,
                        pool_size=pool_size)
    if not links:
        return fused
    return replace(fused, dependents={int(cat.rids[p]): int(cat.rids[c]) for p, c in links.items()})


class Fusion:
    """How the routes' turn scores become one pool (``recall.fusion``); see the module docstring."""

    name: ClassVar[str]
    reranks: ClassVar[bool]
    """Whether a reranker may reorder the pool and ``explain`` breaks it down by channel z-scores."""
    layers: ClassVar[bool]
    """Whether the L0/L1 layer channels (``globals.layers_index_enabled``) can be fused."""

    def add_route(self, scored: RouteScores, cat: Catalog, route: EvidenceRoute, scores: TurnScores, *,
                  scope: Scope, limit: int) -> None:
        """Accumulate one route's scores into ``scored`` (in place)."""
        raise NotImplementedError

    def pool(self, cat: Catalog, scored: RouteScores, scope: Scope, total: np.ndarray, *,
             supersedes: dict[int, str], cold: np.ndarray | None, weights: Mapping[str, float],
             pool_size: int) -> Fused:
        """The best ``pool_size`` turns (``total``: the routes' sum with successors lifted, a copy to change)."""
        raise NotImplementedError

    def fused_values(self, cat: Catalog, total: np.ndarray, rids: Sequence[int], pool_rids: Sequence[int],
                     pool_scores: Sequence[float], scored: RouteScores,
                     weights: Mapping[str, float]) -> tuple[list[float], float]:
        """Each returned item's fused score and the highest score one turn can have (what calibration reads:
        :func:`memory_ext.rank.calibration.bounded_scores`)."""
        raise NotImplementedError


class ZScoreFusion(Fusion):
    """Standardised score fusion: the routes' turn scores summed, weighted by ``EvidenceRoute.weight``."""

    name = "zscore"
    reranks = True
    layers = True

    def add_route(self, scored: RouteScores, cat: Catalog, route: EvidenceRoute, scores: TurnScores, *,
                  scope: Scope, limit: int) -> None:
        scored.total[:] += route.weight * scores.total

    def pool(self, cat: Catalog, scored: RouteScores, scope: Scope, total: np.ndarray, *,
             supersedes: dict[int, str], cold: np.ndarray | None, weights: Mapping[str, float],
             pool_size: int) -> Fused:
        if cold is not None:
            total[cold] -= scope.cold_penalty
        if scope.flags is not None:
            total[~scope.flags] = -np.inf
        finite = np.flatnonzero(np.isfinite(total))
        ordered = finite[np.lexsort((cat.rids[finite], -total[finite]))]
        top = ordered[:pool_size]
        return Fused(total=total, rids=cat.rids[top].tolist(), scores=total[top].tolist(), ordered=ordered,
                     supersedes=supersedes)

    def fused_values(self, cat: Catalog, total: np.ndarray, rids: Sequence[int], pool_rids: Sequence[int],
                     pool_scores: Sequence[float], scored: RouteScores,
                     weights: Mapping[str, float]) -> tuple[list[float], float]:
        pos = cat.pos_of(np.asarray(rids, np.int64))
        return [float(total[p]) if p >= 0 else -np.inf for p in pos], 1.0


@dataclass(frozen=True)
class RRFFusion(Fusion):
    """Reciprocal rank fusion of every channel call's turn ranking (``recall.rrf_k``)."""

    rrf_k: int = 60
    name: ClassVar[str] = "rrf"
    reranks: ClassVar[bool] = False
    layers: ClassVar[bool] = False

    def add_route(self, scored: RouteScores, cat: Catalog, route: EvidenceRoute, scores: TurnScores, *,
                  scope: Scope, limit: int) -> None:
        rankable = np.isfinite(scores.total) & (scope.flags if scope.flags is not None else True)
        for ch, raw in scores.channel_raw.items():
            order = np.flatnonzero(rankable)[np.argsort(-raw[rankable], kind="stable")]
            order = order[raw[order] > 0][:limit]
            label = channel_label(ch, route)
            scored.rrf_parts[label] = cat.rids[order].tolist()
            scored.rrf_part_weights[label] = (ch, route.weight)

    def pool(self, cat: Catalog, scored: RouteScores, scope: Scope, total: np.ndarray, *,
             supersedes: dict[int, str], cold: np.ndarray | None, weights: Mapping[str, float],
             pool_size: int) -> Fused:
        if scope.flags is not None:
            total[~scope.flags] = -np.inf
        rrf_weights = {name: route_weight * weights.get(channel, 1.0)
                       for name, (channel, route_weight) in scored.rrf_part_weights.items()}
        items = rrf(scored.rrf_parts, k=self.rrf_k, weights=rrf_weights)
        rids = [int(f.id) for f in items]  # type: ignore[call-overload]
        scores = [f.score for f in items]
        if cold is not None and rids:
            is_cold = cold[cat.pos_of(np.asarray(rids, np.int64))]
            scores = [v / (1.0 + scope.cold_penalty / 10) if c else v for v, c in zip(scores, is_cold, strict=True)]
            order = sorted(range(len(rids)), key=lambda i: -scores[i])  # stable: ties keep the rrf order
            items, rids, scores = [items[i] for i in order], [rids[i] for i in order], [scores[i] for i in order]
        items, rids, scores = items[:pool_size], rids[:pool_size], scores[:pool_size]
        details = {rid: {"fusion": "rrf", "rrf_k": self.rrf_k,
                         "channels": {c: {"rank": r, "weight": rrf_weights.get(c, 1.0), "contribution": v}
                                      for c, (r, v) in f.contributions.items()}}
                   for rid, f in zip(rids, items, strict=True)}
        return Fused(total=total, rids=rids, scores=scores, supersedes=supersedes, details=details)

    def fused_values(self, cat: Catalog, total: np.ndarray, rids: Sequence[int], pool_rids: Sequence[int],
                     pool_scores: Sequence[float], scored: RouteScores,
                     weights: Mapping[str, float]) -> tuple[list[float], float]:
        score_of = dict(zip(pool_rids, pool_scores, strict=True))
        best = sum(route_weight * weights.get(channel, 1.0) / (self.rrf_k + 1)
                   for channel, route_weight in scored.rrf_part_weights.values())
        return [float(score_of[r]) for r in rids], best


FUSIONS: Mapping[str, type[Fusion]] = {"zscore": ZScoreFusion, "rrf": RRFFusion}
"""The fusion strategy of each ``recall.fusion`` value."""


def fusion_for(fusion: Fusion | str, *, rrf_k: int = 60) -> Fusion:
    """The strategy object of ``recall.fusion`` (an object is returned as it is)."""
    if isinstance(fusion, Fusion):
        return fusion
    if fusion == "rrf":
        return RRFFusion(rrf_k=rrf_k)
    if fusion == "zscore":
        return ZScoreFusion()
    raise ValueError(f"unknown fusion {fusion!r}; valid: {', '.join(FUSIONS)}")


def pool_texts(fused: Fused, cat: Catalog, text_of: Callable[[Sequence[int]], Mapping[int, str]]
               ) -> tuple[np.ndarray, list[str]]:
    """The pool's catalog positions (-1 for a record the catalog no longer holds) and texts (``""`` there)."""
    positions = cat.pos_of(np.asarray(fused.rids, np.int64))
    texts = text_of([int(p) for p in positions if p >= 0])
    return positions, [texts.get(int(p), "") if p >= 0 else "" for p in positions]


def reorder_pool(fused: Fused, positions: np.ndarray, bonus: Sequence[float]) -> Fused:
    """``fused`` with its pool re-ordered by ``-log(1 + rank) + bonus`` (a pool step's lift: a bonus of 1 moves a
    turn above the ones up to about e - 1 places ahead of it); the scores keep their best-first order and each
    turn takes the one of its new place (``total`` too)."""
    keys = [-math.log1p(n) + b for n, b in enumerate(bonus)]
    order = sorted(range(len(keys)), key=lambda i: -keys[i])
    scores = list(fused.scores)  # best first: the new order takes them in turn
    total = fused.total.copy()
    for i, score in zip(order, scores, strict=True):
        if positions[i] >= 0:
            total[positions[i]] = score
    return replace(fused, rids=[fused.rids[i] for i in order], scores=scores, total=total)
