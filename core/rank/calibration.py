"""``RetrievedItem.score``: a bounded relevance in [0, 1] that means the same in every store (pure functions).

With an embedder whose cosines were calibrated (the default e5, :data:`COSINE_EMBEDDERS`), for each returned
item::

    relevance = max(sigmoid((cosine - midpoint) / scale + coverage_logit * coverage
                            + reference_logit * (cosine - reference) + cjk_logit * cjk
                            - slot_logit * unfilled - absent_logit * absent),
                    COVERAGE_WEIGHT * coverage ** 2)

* ``cosine``: the similarity of the query's and the item's own e5 vectors (the main route's vector channel
  scores every record): an absolute signal, the same whether the store holds 3 turns or 10,000.
* ``coverage``: the share of the query's words (tokenized, stop words removed, stemmed; CJK words and bigrams)
  that the item's text contains. The second term keeps an item holding every word of the query strong.
* ``reference``: the query's cosine with the mean vector of a few replies that say nothing ("Got it.", "好的。";
  :func:`reference_cosine`). e5 puts some questions close to everything — short ones, Chinese ones, questions near
  a chat's topic whose answer is absent ("What does Lena's husband do?" over "Lena moved to Coimbra") — and an
  item's cosine counts for less the closer its query already is to text that says nothing. It depends on the query
  alone, never on the store, so scores still mean the same in every store.
* ``unfilled``: 1 when the item does not hold what the question asks for (:mod:`memory_ext.rank.answer_slot`:
  a time for "when", a name for "叫什么", the thing or a name for "what airline"); ``slot_logit`` is
  ``recall.answer_slot_logit``, chosen as the largest that keeps every rank-1 gold item of the LoCoMo dev
  calibration stores at >= 0.5.
* ``absent``: 1 when no item of the result fills the slot either and the slot is one whose answer a turn says (a
  phone number, a name, a person, or a thing said by its name: an airline, a train, a laptop; not a time nor a
  count, which people often leave to the session's date or to a photo:
  :func:`memory_ext.rank.answer_slot.shown_slot`): the store does not hold what is asked ("What airline is mom
  flying?" over a chat about her flight landing at Heathrow). ``absent_logit`` (:data:`ABSENT_LOGIT`) applies only
  with ``slot_logit``.
* ``cjk``: the query's share of CJK characters. Chinese questions lie closer to the Chinese turns of their topic
  than English ones do, even measured from the reference; :data:`CJK_LOGIT` was chosen on the small-store
  suite's dev chats (LoCoMo holds no Chinese).

A returned item that depends on another returned one (an acknowledgement, a question, the agent's reply;
:mod:`memory_ext.rank.carriers`) scores no higher than that one: "congratulations to Lena" is no more an answer to
"What does Lena's husband do?" than "Lena moved to Coimbra".

The constants are a logistic regression of rank-1 gold items against the results of off-topic questions and of
questions whose answer the store does not hold (``memext bench calibration --fit``: stores of 3, 10 and 50 turns
sampled from the two LoCoMo dev conversations, each asked its question, a question of the other conversation and a
question of its own conversation whose gold turns it does not hold; and the full ones; every size weighing the
same, the gold as much as the rest, of which :data:`NEAR_WEIGHT` goes to the questions without their answer),
fitted on both conversations, once for each kind of turn vector (:func:`cosine_calibration`): sentence-mixed
(:data:`SENTENCE_MIXED`, ``ingest.sentence_vectors`` 2, the default; they lie closer to their questions) and the
turns' own (:data:`TURN_VECTORS`, fitted before the reference and without it). Fitted leave-one-conversation-out,
a threshold of 0.5 kept 100 % of the rank-1 gold and dropped 97-100 % of the off-topic results of the left-out
conversation at every size with the mixed vectors, and the first result of 53-60 % of the 3-turn stores' questions
without their answer (docs/design-notes/calibration.md).

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
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

import numpy as np

from ..text import tokenize
from ..text.tokenize import cjk_ratio, term_set
from .answer_slot import answer_slot, fills_each, shown_slot

if TYPE_CHECKING:
    from ..recall.base import Hits

__all__ = ["ABSENT_LOGIT", "CJK_LOGIT", "COVERAGE_WEIGHT", "NEAR_WEIGHT", "CosineCalibration", "REFERENCE_TEXTS",
           "SENTENCE_MIXED", "TURN_VECTORS", "ZSCORE_MIDPOINT", "ZSCORE_SCALE", "background_cosine", "bounded_scores",
           "cosine_calibration", "cosine_relevance", "coverage", "item_cosines", "reference_cosine", "relevance",
           "unfilled"]

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
    margin_logit: float = 0.0
    """Logits per unit of cosine above the query's background (:func:`background_cosine`); 0: not used."""
    reference_logit: float = 0.0
    """Logits per unit of cosine above the query's reference (:func:`reference_cosine`); 0: not used."""
    cjk_logit: float = 0.0
    """Logits added for a query written in Chinese (times its share of CJK characters); 0: not used."""
    slot_logit: float = 0.0
    """Logits taken from an item that does not fill the slot its question asks for
    (:mod:`memory_ext.rank.answer_slot`: no time for "when", no name for "what's her name", neither the thing
    nor a name for "what airline"); 0: not used."""
    absent_logit: float = 0.0
    """Logits taken, besides ``slot_logit``, from every item of a result none of whose items fills a slot whose
    answer a turn says in words :func:`memory_ext.rank.answer_slot.fills` sees (a phone number, a name, a person,
    a named thing; not a time nor a count: :func:`~memory_ext.rank.answer_slot.shown_slot`): the store does not
    hold what is asked (used only with ``slot_logit``)."""

    def logit(self, cosine: float, cover: float, background: float | None = None,
              reference: float | None = None, cjk: float = 0.0) -> float:
        """The logit of one item: ``(cosine - midpoint) / scale + coverage_logit * cover + cjk_logit * cjk``,
        plus ``margin_logit * (cosine - background)`` and ``reference_logit * (cosine - reference)`` when known."""
        x = (cosine - self.midpoint) / self.scale + self.coverage_logit * cover + self.cjk_logit * cjk
        if background is not None and self.margin_logit:
            x += self.margin_logit * (cosine - background)
        if reference is not None and self.reference_logit:
            x += self.reference_logit * (cosine - reference)
        return x


CJK_LOGIT = -2.0
"""Logits for a query in Chinese. LoCoMo holds no Chinese, so this one constant was chosen on the dev chats of the
small-store suite (``memext bench small --part dev``), with the others fixed: every offset from -1.0 to -3.0
kept all 14 Chinese rank-1 gold items at 0.5 and dropped 9-10 of the 11 Chinese no-answer questions (4 with 0,
12 of 14 gold kept with -4.0); -2.0 is the middle. e5 puts Chinese questions closer to Chinese turns of the same
topic than English ones (the dev chats' no-answer items: cosines 0.84-0.89 in Chinese, 0.80-0.88 in English)."""
NEAR_WEIGHT = 0.1
"""The share of a store size's negative weight the fit gives to questions whose answer the store does not hold:
the largest of 0, 0.05, 0.1, 0.15, 0.2, 0.25 and 0.5 for which every left-out conversation kept at least 93 % of
its rank-1 gold at every size (0.15 kept 92 % in conv-30's 10-turn stores)."""
TURN_VECTORS = CosineCalibration(midpoint=0.819, scale=0.0168, coverage_logit=4.87)
"""Fitted for turns whose vector is the turn's own (``ingest.sentence_vectors`` 0), against off-topic results only
and without the reference (not refitted since)."""
ABSENT_LOGIT = 6.0
"""Logits for a result none of whose items fills a slot a turn would say (``CosineCalibration.absent_logit``,
``recall.answer_slot_absent_logit``); 0: off. 6.0 was chosen on the small-store suite's dev chats (no-answer < 0.5
0.957 -> 1.000; "What airline is mom flying?" 0.98 -> 0.40, 3.0 leaves it at 0.75). Held out 0.870 -> 0.913.
Applied to time and count questions too, it kept only 0.964 / 0.897 of LoCoMo's rank-1 gold >= 0.5 in the 3- /
10-turn calibration stores ("When did Jon start reading 'The Lean Startup'?" answered by "I just started it", the
date being the session's; "How many children does Melanie have?"); for the slots a turn says, every rank-1 gold
item keeps >= 0.5 at every size (3, 10, 50 turns, whole conversations). Scores only: rankings never change."""
SENTENCE_MIXED = CosineCalibration(midpoint=0.8976, scale=0.0249, coverage_logit=3.31, reference_logit=37.39,
                                   cjk_logit=CJK_LOGIT, absent_logit=ABSENT_LOGIT)
"""Fitted for turn vectors mixed with their sentences' (``ingest.sentence_vectors`` 2, the default): they lie
closer to their questions. Before the reference: 0.8387 / 0.0152 / 4.29."""


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


def background_cosine(hits: Hits | None) -> float | None:
    """The query's background: the median cosine of the records the main route's vector channel listed (every
    record of a store up to ``recall.candidates_per_channel`` records, the best ones of a larger store). A query
    close to everything in its store (a store of one topic, a language whose cosines run high) has a high one.

    >>> from memory_ext.recall.base import Hits
    >>> background_cosine(Hits(np.array([1, 2, 3]), np.array([0.8, 0.9, 0.7], np.float32)))
    0.8
    """
    if hits is None or hits.scores.size == 0:
        return None
    return round(float(np.median(hits.scores)), 6)


REFERENCE_TEXTS: Final = ("Okay, thanks!", "Sounds good.", "Got it.", "Sure, no problem.", "That's nice.",
                          "Let me know.", "好的，谢谢！", "没问题。", "收到。", "听起来不错。", "知道了。", "好的。")
"""Replies that say nothing, in English and Chinese: their mean vector is the reference a query's cosines are
measured from (:func:`reference_cosine`)."""
_REFERENCES: dict[str, np.ndarray] = {}
_REFERENCE_LOCK = threading.Lock()


def reference_cosine(query_vector: np.ndarray | None, embedder: Any) -> float | None:
    """The query's cosine with the mean vector of :data:`REFERENCE_TEXTS` (embedded once per embedder and
    process): how close the embedder puts this query to text that says nothing. e5's cosines run higher for some
    queries and languages than for others (Chinese ones ~0.02 higher against the reference, ~0.04 against their
    answers); an item's cosine above the reference is comparable across them. None without a query vector or
    when the embedder fails."""
    if query_vector is None or embedder is None or not str(getattr(embedder, "id", "")).startswith(COSINE_EMBEDDERS):
        return None
    key = str(embedder.id)
    with _REFERENCE_LOCK:
        reference = _REFERENCES.get(key)
        if reference is None:
            try:
                vectors = np.asarray(embedder.embed_documents(list(REFERENCE_TEXTS)), np.float32)
            except Exception:  # noqa: BLE001 - a failed reference leaves the feature out, never the search
                return None
            mean = vectors.mean(axis=0)
            reference = _REFERENCES[key] = mean / (np.linalg.norm(mean) or 1.0)
    return round(float(np.asarray(query_vector, np.float32) @ reference), 6)


def cosine_relevance(cosine: float, cover: float, calibration: CosineCalibration = SENTENCE_MIXED,
                     background: float | None = None, reference: float | None = None, cjk: float = 0.0, *,
                     unfilled: bool = False, absent: bool = False) -> float:
    """The absolute relevance of one item from its cosine, the query coverage of its text, (when known) the
    query's background and reference cosines, the query's share of CJK characters, whether the item leaves
    the question's slot unfilled (``calibration.slot_logit`` taken off) and whether every item of its result does
    (``absent``: ``calibration.absent_logit`` taken off too)."""
    x = calibration.logit(cosine, cover, background, reference, cjk) - (calibration.slot_logit if unfilled else 0.0)
    if absent and unfilled:
        x -= calibration.absent_logit
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
    return len(query_words & term_set(text)) / len(query_words)


def unfilled(query: str, texts: Sequence[str]) -> list[bool]:
    """Whether each of ``texts`` leaves the slot ``query`` asks for unfilled
    (:func:`memory_ext.rank.answer_slot.fills_each` is False); all False when it asks none."""
    return [f is False for f in fills_each(query, texts)]


def bounded_scores(fused: Sequence[float], *, texts: Sequence[str] | None = None, query: str | None = None,
                   fusion: str = "zscore", rrf_max: float = 1.0,
                   cosines: Sequence[float] | None = None,
                   calibration: CosineCalibration = SENTENCE_MIXED,
                   stats: tuple[float | None, float | None] = (None, None),
                   carriers: Mapping[int, int] | None = None) -> list[float]:
    """The relevance of each item of a ranked list (see the module docstring), raised to the best one below it
    so that it never increases with rank. ``stats``: the query's background and reference cosines
    (:func:`background_cosine`, :func:`reference_cosine`; None: unknown). ``carriers``: {index of a dependent
    item: index of its carrier} (:mod:`memory_ext.rank.carriers`): an acknowledgement, a question or the agent's
    reply is no more relevant than the statement it belongs to (before the cap).

    >>> [round(s, 2) for s in bounded_scores([0.0, 0.0], cosines=[0.80, 0.95])]
    [0.89, 0.89]
    >>> [round(s, 2) for s in bounded_scores([0.0, 0.0], cosines=[0.80, 0.95], carriers={1: 0})]
    [0.02, 0.02]
    """
    background, reference = stats
    words = set(tokenize(query)) if query and texts is not None else set()
    covers = [coverage(words, t) for t in texts] if words and texts is not None else None
    if cosines is not None:
        cjk = cjk_ratio(query) if query else 0.0
        empty = (unfilled(query, texts) if calibration.slot_logit and query and texts is not None
                 else [False] * len(cosines))
        absent = bool(empty) and all(empty) and shown_slot(answer_slot(query or ""))  # no item holds what is asked
        out = [cosine_relevance(c, v, calibration, background, reference, cjk, unfilled=u, absent=absent)
               for c, v, u in zip(cosines, covers or [0.0] * len(cosines), empty, strict=True)]
    else:
        out = [relevance(value, fusion=fusion, rrf_max=rrf_max) for value in fused]
    if covers is not None:
        out = [max(r, COVERAGE_WEIGHT * v ** 2) for r, v in zip(out, covers, strict=True)]
    for dependent, carrier in (carriers or {}).items():
        if 0 <= dependent < len(out) and 0 <= carrier < len(out):
            out[dependent] = min(out[dependent], out[carrier])
    for i in range(len(out) - 2, -1, -1):
        out[i] = max(out[i], out[i + 1])
    return out
