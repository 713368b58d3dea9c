"""``RetrievedItem.score``: a bounded relevance in [0, 1] from the unbounded fused score (pure functions).

For each returned item::

    relevance = max(1 / (1 + exp(-(fused - ZSCORE_MIDPOINT) / ZSCORE_SCALE)),    # zscore fusion
                    COVERAGE_WEIGHT * coverage ** 2)

* ``fused``: the item's fused score — the weighted sum over routes of the channels' z-scores with the window,
  speaker, time and session evidence, after the cold-tier prior (before a rerank blend, which is a z-score
  within the pool). With ``rrf`` fusion the first term is the item's RRF score over the highest one a turn
  could reach (first in every channel call).
* ``coverage``: the share of the query's words (tokenized, stop words removed, stemmed; CJK words) that the
  item's text contains. z-scores are relative to the other candidates, so in a store of a few turns even an
  exact match has a small fused score; the coverage term keeps such a match strong.
* Then every score is raised to the highest score below it in the list (MMR and route quotas may put a
  stronger item under a weaker one), so scores never increase with rank and a threshold keeps a prefix of the
  result that holds every item above the threshold.

The constants were fitted on LoCoMo dev (``memext bench locomo``, hashing embedder; z-scores make the fused
score nearly independent of the embedder): 0.5 lies near the 12th percentile of the fused scores of the
questions' gold evidence in their top 10, so a threshold of 0.5 keeps about 97 % of the gold evidence ranked
in the top 3 and removes about 80 % of the results of off-topic questions.

>>> [round(s, 3) for s in bounded_scores([24.0, 10.0, 12.0, -3.0])]
[0.881, 0.571, 0.571, 0.135]
>>> round(bounded_scores([1.2], texts=["My sister Lena lives in Porto."], query="Where does Lena live?")[0], 2)
0.9
>>> bounded_scores([0.0325], fusion="rrf", rrf_max=0.0325)
[1.0]
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from ..text import tokenize

__all__ = ["COVERAGE_WEIGHT", "ZSCORE_MIDPOINT", "ZSCORE_SCALE", "bounded_scores", "coverage", "relevance"]

ZSCORE_MIDPOINT = 10.0
"""The fused z-score sum that maps to 0.5."""
ZSCORE_SCALE = 7.0
"""How many fused-score units move the relevance by one logit."""
COVERAGE_WEIGHT = 0.9
"""The relevance of an item that contains every word of the query, whatever its fused score."""


def relevance(fused: float, *, fusion: str = "zscore", rrf_max: float = 1.0) -> float:
    """The bounded relevance of one fused score (before the monotone cap)."""
    if not math.isfinite(fused):
        return 0.0
    if fusion == "rrf":
        return min(1.0, max(0.0, fused / rrf_max)) if rrf_max > 0 else 0.0
    x = (fused - ZSCORE_MIDPOINT) / ZSCORE_SCALE
    return 1.0 / (1.0 + math.exp(-x)) if x >= -700 else 0.0


def coverage(query_words: set[str], text: str) -> float:
    """The share of ``query_words`` (from :func:`memory_ext.text.tokenize`) that ``text`` contains."""
    if not query_words:
        return 0.0
    return len(query_words & set(tokenize(text))) / len(query_words)


def bounded_scores(fused: Sequence[float], *, texts: Sequence[str] | None = None, query: str | None = None,
                   fusion: str = "zscore", rrf_max: float = 1.0) -> list[float]:
    """The relevance of each item of a ranked list (see the module docstring), raised to the best one below it
    so that it never increases with rank."""
    words = set(tokenize(query)) if query and texts is not None else set()
    out = [relevance(value, fusion=fusion, rrf_max=rrf_max) for value in fused]
    if words and texts is not None:
        out = [max(r, COVERAGE_WEIGHT * coverage(words, t) ** 2) for r, t in zip(out, texts, strict=True)]
    for i in range(len(out) - 2, -1, -1):
        out[i] = max(out[i], out[i + 1])
    return out
