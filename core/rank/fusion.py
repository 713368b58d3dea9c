"""Reciprocal rank fusion as a pure function.

RRF (Cormack, Clarke & Buettcher, SIGIR 2009): ``score(d) = sum_c w_c / (k + rank_c(d))`` with 1-based ranks.
A channel whose weight is 0 is skipped: it cannot change the ranking, the ties or the membership.

>>> [f.id for f in rrf({"keyword": ["a", "b"], "vector": ["b", "c"]})]
['b', 'a', 'c']
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field

__all__ = ["FusedItem", "rrf"]


@dataclass(frozen=True)
class FusedItem:
    """One fused id with its score and, per channel, ``(rank, contribution)``."""

    id: Hashable
    score: float
    contributions: dict[str, tuple[int, float]] = field(default_factory=dict)


def rrf(rankings: Mapping[str, Sequence[Hashable]], *, k: int = 60,
        weights: Mapping[str, float] | None = None) -> list[FusedItem]:
    """Fuse ranked id lists by reciprocal rank; returns new objects, highest score first.

    Ties are broken by the best (lowest) rank in any channel, then by first appearance, so the order is stable.
    Repeated ids inside one list count once, at their first rank. Inputs are never mutated.
    """
    if k < 1:
        raise ValueError(f"rrf k must be >= 1, got {k}")
    scores: dict[Hashable, float] = {}
    parts: dict[Hashable, dict[str, tuple[int, float]]] = {}
    best: dict[Hashable, int] = {}
    order: dict[Hashable, int] = {}
    for channel, ids in rankings.items():
        weight = 1.0 if weights is None else float(weights.get(channel, 1.0))
        if weight == 0:
            continue  # a zero-weight channel has no influence at all, not even on ties or membership
        seen: set[Hashable] = set()
        for rank, item in enumerate(ids, start=1):
            if item in seen:
                continue
            seen.add(item)
            order.setdefault(item, len(order))
            contribution = weight / (k + rank)
            scores[item] = scores.get(item, 0.0) + contribution
            parts.setdefault(item, {})[channel] = (rank, contribution)
            best[item] = min(best.get(item, rank), rank)
    ranked = sorted(scores, key=lambda i: (-scores[i], best[i], order[i]))
    return [FusedItem(i, scores[i], dict(parts[i])) for i in ranked]
