"""``RetrievedItem.score``: a bounded relevance in [0, 1] that means the same in every store (pure functions).

With an embedder whose cosines were calibrated (the default e5, :data:`COSINE_EMBEDDERS`), for each returned
item::

    relevance = max(sigmoid((cosine - midpoint) / scale + coverage_logit * coverage),
                    COVERAGE_WEIGHT * coverage ** 2)

* ``cosine``: the similarity of the query's and the item's own e5 vectors (the main route's vector channel
  scores every record): an absolute signal, the same whether the store holds 3 turns or 10,000.
* ``coverage``: the share of the query's words (tokenized, stop words removed, stemmed; CJK words and bigrams)
  that the item's text contains. The second term keeps an item holding every word of the query strong.

The constants are a logistic regression of rank-1 gold items against off-topic results (``memext bench
calibration --fit``: stores of 3, 10 and 50 turns sampled from the two LoCoMo dev conversations, and the full
ones; every size and class weighing the same, so 0.5 is where a result is as likely an answer as an off-topic
one), fitted on both conversations, once for each kind of turn vector (:func:`cosine_calibration`):
sentence-mixed (:data:`SENTENCE_MIXED`, ``ingest.sentence_vectors`` 2, the default; they lie closer to their
questions) and the turns' own (:data:`TURN_VECTORS`). Fitted leave-one-conversation-out, a threshold of 0.5 kept
93-100 % of the rank-1 gold and dropped 85-100 % of the off-topic results of the left-out conversation at every
size with the mixed vectors (92-100 % and 88-100 % with the turns' own; docs/design-notes/calibration.md).

Without calibrated cosines (the ``hashing`` embedder, a custom one, vectors switched off) the score comes from the
item's fused score instead, as before::

    relevance = max(1 / (1 + exp(-(fused - ZSCORE_MIDPOINT) / ZSCORE_SCALE)), COVERAGE_WEIGHT * coverage ** 2)

where ``fused`` is the weighted sum over routes of the channels' z-scores with the window, speaker, time and
session evidence (with ``rrf`` fusion: the item's RRF score over the highest one a turn could reach). z-scores
are relative to the other candidates, so this score depends on the store: fitted on full LoCoMo dev conversations
(hashing embedder), it keeps about 97 % of the gold evidence in the top 3 at 0.5 there, but with e5 it kept only
22 % of the rank-1 gold in 3-turn stores and dropped only 30 % of off-topic results in full ones.

In both cases every score is then raised to the highest score below it in the list (MMR and route quotas may put
a stronger item under a weaker one), so scores never increase with rank and a threshold keeps a prefix of the
result that holds every item above the threshold.

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
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ..text import tokenize

if TYPE_CHECKING:
    from ..recall.base import Hits

__all__ = ["COVERAGE_WEIGHT", "SENTENCE_MIXED", "TURN_VECTORS", "ZSCORE_MIDPOINT", "ZSCORE_SCALE", "CosineCalibration",
           "bounded_scores", "cosine_calibration", "cosine_relevance", "coverage", "item_cosines", "relevance"]

ZSCORE_MIDPOINT = 10.0
"""The fused z-score sum that maps to 0.5."""
ZSCORE_SCALE = 7.0
"""How many fused-score units move the relevance by one logit."""
COVERAGE_WEIGHT = 0.9
"""The relevance of an item that contains every word of the query, whatever its fused score."""


COSINE_EMBEDDERS = ("e5-small-",)
"""Embedder id prefixes whose cosines the absolute calibration was fitted for."""


@dataclass(frozen=True)
class CosineCalibration:
    """The constants of ``sigmoid((cosine - midpoint) / scale + coverage_logit * coverage)``."""

    midpoint: float
    """The e5 cosine (query vs the item's own turn) that maps to 0.5 when no query word is covered."""
    scale: float
    """How many cosine units move the relevance by one logit."""
    coverage_logit: float
    """Logits added by a query whose words the item covers completely (proportionally for a part)."""


TURN_VECTORS = CosineCalibration(midpoint=0.819, scale=0.0168, coverage_logit=4.87)
"""Fitted for turns whose vector is the turn's own (``ingest.sentence_vectors`` 0)."""
SENTENCE_MIXED = CosineCalibration(midpoint=0.8387, scale=0.0152, coverage_logit=4.29)
"""Fitted for turn vectors mixed with their sentences' (``ingest.sentence_vectors`` 2, the default): they lie
closer to their questions, so the midpoint is higher."""


def cosine_calibration(mixed: bool) -> CosineCalibration:
    """The constants fitted for sentence-mixed turn vectors (``mixed``) or for the turns' own vectors.

    >>> cosine_calibration(False) is TURN_VECTORS, cosine_calibration(True) is SENTENCE_MIXED
    (True, True)
    """
    return SENTENCE_MIXED if mixed else TURN_VECTORS


def item_cosines(hits: Hits | None, rids: Sequence[int], embedder_id: str | None) -> list[float] | None:
    """The cosine between the query and each item's own record, from the main route's vector hits; ``None`` when
    there are none or the embedder's cosines were not calibrated (then the fused score is used). A record the
    channel did not list (an index that returns only its best candidates) gets the lowest listed cosine."""
    if hits is None or hits.rids.size == 0 or not embedder_id or not embedder_id.startswith(COSINE_EMBEDDERS):
        return None
    order = np.argsort(hits.rids, kind="stable")
    sorted_rids, sorted_scores = hits.rids[order], hits.scores[order]
    wanted = np.asarray(rids, np.int64)
    pos = np.clip(np.searchsorted(sorted_rids, wanted), 0, sorted_rids.size - 1)
    found = sorted_rids[pos] == wanted
    floor = float(hits.scores.min())
    return [float(sorted_scores[p]) if ok else floor for p, ok in zip(pos.tolist(), found.tolist(), strict=True)]


def cosine_relevance(cosine: float, cover: float, calibration: CosineCalibration = SENTENCE_MIXED) -> float:
    """The absolute relevance of one item from its cosine and the query coverage of its text."""
    x = (cosine - calibration.midpoint) / calibration.scale + calibration.coverage_logit * cover
    return 1.0 / (1.0 + math.exp(-x)) if x >= -700 else 0.0


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
                   fusion: str = "zscore", rrf_max: float = 1.0,
                   cosines: Sequence[float] | None = None,
                   calibration: CosineCalibration = SENTENCE_MIXED) -> list[float]:
    """The relevance of each item of a ranked list (see the module docstring), raised to the best one below it
    so that it never increases with rank."""
    words = set(tokenize(query)) if query and texts is not None else set()
    covers = [coverage(words, t) for t in texts] if words and texts is not None else None
    if cosines is not None:
        out = [cosine_relevance(c, v, calibration)
               for c, v in zip(cosines, covers or [0.0] * len(cosines), strict=True)]
    else:
        out = [relevance(value, fusion=fusion, rrf_max=rrf_max) for value in fused]
    if covers is not None:
        out = [max(r, COVERAGE_WEIGHT * v ** 2) for r, v in zip(out, covers, strict=True)]
    for i in range(len(out) - 2, -1, -1):
        out[i] = max(out[i], out[i + 1])
    return out
