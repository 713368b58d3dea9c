"""Maximal marginal relevance (Carbonell & Goldstein, SIGIR 1998) as a pure function.

``select = argmax_i [ λ · rel_i − (1 − λ) · max_{j ∈ selected} sim(i, j) ]``, applied greedily over a candidate pool
several times larger than k, so it changes *which* items are returned, not only their order. Relevance is min-max
scaled to [0, 1] inside the pool so λ means the same thing whatever the score scale. λ = 1 is plain relevance.

>>> sims = np.array([[1.0, 0.99, 0.1], [0.99, 1.0, 0.1], [0.1, 0.1, 1.0]])
>>> mmr(np.array([1.0, 0.95, 0.6]), sims, k=2, lam=0.5)
[0, 2]
>>> mmr(np.array([1.0, 0.95, 0.6]), sims, k=2, lam=1.0)
[0, 1]
"""

from __future__ import annotations

import numpy as np

__all__ = ["jaccard_matrix", "mmr"]


def mmr(relevance: np.ndarray, similarity: np.ndarray, *, k: int, lam: float) -> list[int]:
    """Indices into the pool, in selection order (at most ``k``). Inputs are not mutated."""
    if not 0.0 <= lam <= 1.0:
        raise ValueError(f"MMR lambda must be within [0, 1], got {lam}")
    n = int(relevance.size)
    if n == 0 or k <= 0:
        return []
    lo, hi = float(relevance.min()), float(relevance.max())
    rel = (relevance - lo) / (hi - lo) if hi > lo else np.ones(n)
    base = lam * rel
    score = base - (1.0 - lam) * 0.0  # nothing chosen yet: no penalty
    chosen: list[int] = []
    max_sim: np.ndarray | None = None  # each candidate's highest similarity to a chosen one
    for _ in range(min(k, n)):
        if max_sim is not None:
            score = base - (1.0 - lam) * max_sim
        score[chosen] = -np.inf
        best = int(np.argmax(score))
        chosen.append(best)
        if max_sim is None:
            max_sim = np.array(similarity[best], dtype=np.float64)
        else:
            np.maximum(max_sim, similarity[best], out=max_sim)
    return chosen


def jaccard_matrix(token_sets: list[set[str]]) -> np.ndarray:
    """Pairwise Jaccard similarity of token sets (the similarity MMR uses when the store has no vectors)."""
    n = len(token_sets)
    out = np.eye(n)
    for i in range(n):
        for j in range(i + 1, n):
            union = len(token_sets[i] | token_sets[j])
            out[i, j] = out[j, i] = len(token_sets[i] & token_sets[j]) / union if union else 0.0
    return out
