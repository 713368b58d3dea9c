"""Stage 6, select: k of the pool.

MMR (``recall.mmr_lambda``) orders the whole pool by relevance and novelty (vector similarity of the records,
or word overlap without vectors); then the episode budget (``recall.episode_budget``) caps the items of one
session, and every secondary route keeps its quota of best items (``recall.route_quota``; see
:mod:`memory_ext.rank.select`). The selection's scores are the pool's; an item a quota brought in from outside
the pool ranks just below it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..config import RecallConfig
from ..models import EvidenceRoute, RouteGoal
from ..rank.mmr import jaccard_matrix, mmr
from ..rank.select import AGENT_QUOTA_SLOT, CONVERSATION_QUOTA_SLOT, apply_episode_budget, apply_route_quotas
from ..rank.zscore import TurnScores
from ..store.catalog import Catalog
from ..store.interface import TruthStore
from ..text.tokenize import term_set

__all__ = ["Selection", "mmr_order", "quotas_and_budget", "select"]


@dataclass(frozen=True)
class Selection:
    """The chosen rids and scores, best first, and each pool rid's MMR step (for explain)."""

    rids: list[int]
    scores: list[float]
    mmr: dict[int, dict[str, Any]] = field(default_factory=dict)


def mmr_order(store: TruthStore, ns_id: int, rids: list[int], scores: list[float], *, lam: float,
              use_vectors: bool) -> tuple[list[int], dict[int, dict[str, Any]]]:
    """The pool reordered by MMR (unchanged when ``lam`` is 1), and each rid's MMR step."""
    if lam >= 1.0 or len(rids) <= 1:
        return list(rids), {}
    vectors = store.vectors_by_rid(ns_id, rids) if use_vectors else {}
    if len(vectors) == len(rids):
        mat = np.stack([vectors[r] for r in rids])
        similarity = mat @ mat.T
    else:  # no vectors (switched off, or not embedded): word overlap
        texts = store.records_by_rid(ns_id, rids)
        similarity = jaccard_matrix([set(term_set(texts[r].text)) if r in texts else set() for r in rids])
    order = mmr(np.asarray(scores, dtype=np.float64), similarity, k=len(rids), lam=lam)
    steps = {rids[i]: {"lambda": lam, "pool_rank": i + 1, "selected_at": position + 1}
             for position, i in enumerate(order)}
    return [rids[i] for i in order], steps


def quotas_and_budget(cat: Catalog, order: list[int], per_route: Mapping[str, TurnScores],
                      routes: Mapping[str, EvidenceRoute], total: np.ndarray, k: int, *,
                      episode_budget: int | None, route_quota: int) -> list[int]:
    """Apply the episode budget, then give every secondary route its quota (see rank/select.py)."""
    if episode_budget:
        pos = cat.pos_of(np.asarray(order, np.int64))
        episode_of = {r: int(cat.session[p]) for r, p in zip(order, pos, strict=True) if p >= 0}
        order = apply_episode_budget(order, episode_of, budget=episode_budget, k=k)  # type: ignore[arg-type]
    route_best: dict[str, list[int]] = {}
    if route_quota and len(per_route) > 1:
        returnable = np.isfinite(total)
        for name, scores in per_route.items():
            if routes[name].goal is RouteGoal.QUERY:
                continue
            cand = np.flatnonzero(returnable & np.isfinite(scores.total) & (scores.fused > 0))
            best = cand[np.lexsort((cat.rids[cand], -scores.total[cand]))][:2 * route_quota]
            route_best[name] = cat.rids[best].tolist()
    # what the action state asks for precisely (a failure's lesson or a tool's procedure: an action route that
    # boosts kinds; a missing slot's value) comes right below the top; the other routes' items at the bottom
    first = {name: AGENT_QUOTA_SLOT if routes[name].goal is RouteGoal.SLOT
             or (routes[name].goal is RouteGoal.ACTION and routes[name].boost_kinds) else CONVERSATION_QUOTA_SLOT
             for name in route_best}
    return apply_route_quotas(order, route_best, quota=route_quota, k=k, first_slot=first)


def select(store: TruthStore, ns_id: int, cat: Catalog, rids: list[int], scores: list[float], *,
           per_route: Mapping[str, TurnScores], routes: Mapping[str, EvidenceRoute], total: np.ndarray, k: int,
           config: RecallConfig, use_vectors: bool) -> Selection:
    """Choose k of the pool ``rids`` (with ``scores``, best first): MMR, episode budget, route quotas."""
    score_of = dict(zip(rids, scores, strict=True))
    order, steps = mmr_order(store, ns_id, rids, scores, lam=config.mmr_lambda, use_vectors=use_vectors)
    chosen = quotas_and_budget(cat, order, per_route, routes, total, k, episode_budget=config.episode_budget,
                               route_quota=config.route_quota)
    floor = min(score_of.values(), default=0.0)
    return Selection(rids=chosen, scores=[score_of.get(r, floor - 1e-3) for r in chosen], mmr=steps)
