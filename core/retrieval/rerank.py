"""Stage 5, rerank (optional, ``globals.rerank_enabled``, zscore fusion only).

A pool drawn fairly from every channel's best turns (round-robin, then the fused order; ``recall.rerank_pool``)
is scored by the :class:`~memory_ext.rank.rerank.Reranker` and blended with the fused score
(``recall.rerank_weight``); the turns outside the pool keep their fused order below it. A failed or slow rerank
keeps the fused order and is reported as a :class:`~memory_ext.models.ChannelError`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..config import RecallConfig
from ..models import ChannelError
from ..rank.rerank import Candidate, Reranker, apply_rerank, fair_pool
from ..store.catalog import Catalog
from ..store.interface import TruthStore
from .fuse import Fused, RouteScores

__all__ = ["Reranked", "rerank"]


@dataclass(frozen=True)
class Reranked:
    """The new pool (rids and scores, best first), each reranked rid's arithmetic, and the failure if any."""

    rids: list[int]
    scores: list[float]
    parts: dict[int, dict[str, float]] = field(default_factory=dict)
    error: ChannelError | None = None


def rerank(reranker: Reranker, store: TruthStore, query: str, ns_id: int, cat: Catalog, fused: Fused,
           scored: RouteScores, *, pool_size: int, k: int, config: RecallConfig) -> Reranked:
    """Rerank a pool drawn fairly from every channel's best turns; the rest keeps the fused order."""
    assert fused.ordered is not None
    total = fused.total
    cap = max(2000, pool_size)
    fused_order = cat.rids[fused.ordered[:cap]].tolist()
    rankable = np.isfinite(total)
    rankings: dict[str, list[int]] = {}
    for goal, scores in scored.per_route.items():
        for ch, raw in scores.channel_raw.items():
            cand = np.flatnonzero(rankable)
            best = cand[np.lexsort((cat.rids[cand], -raw[cand]))][:config.rerank_pool]
            rankings[f"{ch}@{goal}"] = cat.rids[best].tolist()
    pool = fair_pool(rankings, fused_order, max(config.rerank_pool, k))
    texts = store.records_by_rid(ns_id, pool)
    pos = dict(zip(pool, cat.pos_of(np.asarray(pool, np.int64)).tolist(), strict=True))
    candidates = [Candidate(key=r, text=texts[r].text, score=float(total[pos[r]])) for r in pool if r in texts]
    outcome = apply_rerank(reranker, query, candidates, weight=config.rerank_weight,
                           timeout=config.rerank_timeout_s, fused_order=fused_order)
    order = outcome.order[:pool_size]
    in_pool = {c.key for c in candidates}
    floor = min((outcome.scores[r] for r in in_pool if r in outcome.scores), default=0.0)
    scores_out = []
    for i, r in enumerate(order):
        scores_out.append(outcome.scores[r] if r in in_pool and r in outcome.scores else floor - 1.0 - i * 1e-6)
    parts = {r: {"rerank_score": float(outcome.rerank_scores[r]), "final": float(outcome.scores[r]),
                 "weight": config.rerank_weight} for r in order if r in outcome.rerank_scores}
    return Reranked(rids=order, scores=scores_out, parts=parts, error=outcome.error)
