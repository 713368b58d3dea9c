"""Retrieval metrics, as pure functions over a ranked list of ids and a gold set (BENCHMARKS.md).

Every function takes the ranking as a sequence of ids (most relevant first, already flattened to turns and
without repeats — see :func:`flatten_ranking`) and the gold ids, and returns a float in ``[0, 1]``.
Relevance is binary. An empty gold set is an error: such questions are skipped before scoring.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence

__all__ = [
    "LOCOMO_KS",
    "MADIAL_KS",
    "evid_recall_at_k",
    "flatten_ranking",
    "locomo_question_metrics",
    "madial_question_metrics",
    "mean_metrics",
    "mrr",
    "ndcg_at_k",
    "percentile",
    "recall_all_at_k",
    "recall_any_at_k",
]

LOCOMO_KS: tuple[int, ...] = (1, 5, 10, 20)
MADIAL_KS: tuple[int, ...] = (1, 3, 5, 10)


def _gold_set(gold: Iterable[str]) -> set[str]:
    gold_set = set(gold)
    if not gold_set:
        raise ValueError("gold is empty: skip questions without evidence before scoring them")
    return gold_set


def flatten_ranking(items: Iterable[Iterable[str | None]]) -> list[str]:
    """Flatten ranked items (each a list of turn ids, most relevant first) into a turn ranking.

    Items are taken in rank order, their turns in order; ``None`` and repeated turns are dropped, so the
    first k entries are always k distinct turns (BENCHMARKS.md, step 3).

    >>> flatten_ranking([["D1:2", "D1:3"], ["D1:3", None, "D2:1"], ["D1:2"]])
    ['D1:2', 'D1:3', 'D2:1']
    """
    seen: set[str] = set()
    out: list[str] = []
    for item in items:
        for turn_id in item:
            if turn_id is not None and turn_id not in seen:
                seen.add(turn_id)
                out.append(turn_id)
    return out


def evid_recall_at_k(ranking: Sequence[str], gold: Iterable[str], k: int) -> float:
    """``|gold ∩ ranking[:k]| / |gold|`` — LoCoMo's "recall accuracy", MADial's Recall@k.

    >>> evid_recall_at_k(["a", "b", "c"], {"a", "c", "z"}, 2)
    0.3333333333333333
    """
    gold_set = _gold_set(gold)
    return len(gold_set.intersection(ranking[:k])) / len(gold_set)


def recall_any_at_k(ranking: Sequence[str], gold: Iterable[str], k: int) -> float:
    """1.0 when at least one gold id is in ``ranking[:k]``, else 0.0."""
    gold_set = _gold_set(gold)
    return 1.0 if gold_set.intersection(ranking[:k]) else 0.0


def recall_all_at_k(ranking: Sequence[str], gold: Iterable[str], k: int) -> float:
    """1.0 when every gold id is in ``ranking[:k]``, else 0.0."""
    gold_set = _gold_set(gold)
    return 1.0 if gold_set.issubset(ranking[:k]) else 0.0


def ndcg_at_k(ranking: Sequence[str], gold: Iterable[str], k: int) -> float:
    """Binary-gain nDCG@k: ``DCG = Σ 1/log2(rank+1)`` over gold ids in ``ranking[:k]`` (rank from 1),
    divided by the ideal DCG of ``min(|gold|, k)`` gold ids at the top (Järvelin & Kekäläinen, 2002).

    >>> round(ndcg_at_k(["x", "a"], {"a"}, 10), 4)
    0.6309
    """
    gold_set = _gold_set(gold)
    dcg = sum(1.0 / math.log2(rank + 2) for rank, doc in enumerate(ranking[:k]) if doc in gold_set)
    ideal = sum(1.0 / math.log2(rank + 2) for rank in range(min(len(gold_set), k)))
    return dcg / ideal


def mrr(ranking: Sequence[str], gold: Iterable[str]) -> float:
    """Reciprocal rank of the first gold id in ``ranking`` (0.0 when none is there).

    The caller decides the depth by how much ranking it passes (the bench passes the first ``max(k)`` turns).

    >>> mrr(["x", "y", "a"], {"a", "b"})
    0.3333333333333333
    """
    gold_set = _gold_set(gold)
    for rank, doc in enumerate(ranking, 1):
        if doc in gold_set:
            return 1.0 / rank
    return 0.0


def locomo_question_metrics(ranking: Sequence[str], gold: Iterable[str],
                            ks: Sequence[int] = LOCOMO_KS, ndcg_k: int = 10) -> dict[str, float]:
    """All LoCoMo metrics of one question: evid_recall@k, recall_any@k, recall_all@k, ndcg@10, mrr.

    MRR is computed over the first ``max(ks)`` turns.
    """
    gold_set = _gold_set(gold)
    ranking = list(ranking[: max(ks)])
    out: dict[str, float] = {}
    for k in ks:
        out[f"evid_recall@{k}"] = evid_recall_at_k(ranking, gold_set, k)
    for k in ks:
        out[f"recall_any@{k}"] = recall_any_at_k(ranking, gold_set, k)
    for k in ks:
        out[f"recall_all@{k}"] = recall_all_at_k(ranking, gold_set, k)
    out[f"ndcg@{ndcg_k}"] = ndcg_at_k(ranking, gold_set, ndcg_k)
    out["mrr"] = mrr(ranking, gold_set)
    return out


def madial_question_metrics(ranking: Sequence[str], gold: Iterable[str],
                            ks: Sequence[int] = MADIAL_KS, ndcg_k: int = 5) -> dict[str, float]:
    """All MADial metrics of one dialogue: recall@k, ndcg@5, mrr (MRR over the first ``max(ks)`` memories)."""
    gold_set = _gold_set(gold)
    ranking = list(ranking[: max(ks)])
    out = {f"recall@{k}": evid_recall_at_k(ranking, gold_set, k) for k in ks}
    out[f"ndcg@{ndcg_k}"] = ndcg_at_k(ranking, gold_set, ndcg_k)
    out["mrr"] = mrr(ranking, gold_set)
    return out


def mean_metrics(rows: Sequence[Mapping[str, float]]) -> dict[str, float]:
    """Average per-question metric dicts key by key (micro average); ``{}`` for no rows.

    >>> mean_metrics([{"mrr": 1.0}, {"mrr": 0.5}])
    {'mrr': 0.75}
    """
    if not rows:
        return {}
    keys = list(rows[0])
    return {key: sum(row[key] for row in rows) / len(rows) for key in keys}


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0-100) with linear interpolation between closest ranks (numpy's default).

    >>> percentile([1.0, 2.0, 3.0, 4.0], 50)
    2.5
    """
    if not values:
        raise ValueError("percentile of no values")
    if not 0.0 <= q <= 100.0:
        raise ValueError(f"q must be in [0, 100], got {q}")
    ordered = sorted(values)
    position = (len(ordered) - 1) * q / 100.0
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)
