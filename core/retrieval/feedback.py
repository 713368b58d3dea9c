"""Stage 4b, the second hop: pseudo-relevance feedback from the first fused ranking (no model call, no LLM).

After the routes are fused once, the best ``recall.feedback_docs`` turns of the pool stand for what the question
is about; a ``feedback`` route asks the channels again with what they say, and is fused with its own weight
(``recall.feedback_weight``, 0.5 by default; 0 switches the hop off and leaves the first ranking as it is). The
hop runs only when the first ranking's best turn would be returned with a score of at least
``recall.feedback_gate`` (0.5: a question the store has nothing close to is not expanded with unrelated turns),
and never on a plan with an action or slot route (:mod:`memory_ext.retrieval.pipeline`):

* **keyword** (RM3-style, Lavrenko & Croft 2001; Abdul-Jaleel et al. 2004): the feedback turns' terms weighted by
  their share of each turn's length times their IDF in the namespace; the best ``recall.feedback_terms`` that
  are not words of the question and occur in at least one other record make a BM25 query (a term repeated by its
  weight, at most :data:`MAX_REPEAT` times).
* **vector** (Rocchio): the question's own query vector (already made by the first hop: a cache hit) plus
  ``recall.feedback_dense`` times the centroid of the feedback turns' stored vectors, scored against every
  stored vector (one matrix-vector product), or, where the index cannot score every record (Chroma, a PostgreSQL
  namespace past ``storage.pgvector_exact_max``), its best candidates as the first hop asks for them.

The route is scored like any other (:func:`memory_ext.rank.zscore.rank_turns`, the question type's strategy) but
without the main route's speaker and time bonuses (the main route already gives them) and it has no route quota:
it can only move turns, never reserve a place. A turn the question's words miss but whose session-mate or
topic-mate was found (multi-hop evidence spread over sessions: "What has Melanie painted?" finds one painting, the
feedback finds the others) rises. The document frequencies are the keyword index's own (its in-memory copy of
the namespace), so a hop costs a few small numpy operations and two short reads.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np

from ..models import EvidenceRoute, RouteGoal, SearchPlan
from ..plan.strategy import Strategy
from ..rank.zscore import rank_turns
from ..recall.base import Hits, RecallContext
from ..recall.vector import cached_encoding, dense_key, has_encoding
from ..store.catalog import Catalog
from ..store.interface import TruthStore
from ..text import tokenize
from .fuse import Fused, Fusion, RouteScores
from .scope import Scope

__all__ = ["FEEDBACK_ROUTE", "MAX_REPEAT", "Feedback", "feedback_hits", "feedback_route", "keep_first",
           "feedback_terms", "rocchio_vector", "score_feedback", "term_query"]

FEEDBACK_ROUTE = "feedback"
"""The name of the second hop's route (its channels are labelled ``keyword@feedback``, ``vector@feedback``)."""
MAX_REPEAT = 3
"""A feedback term is repeated at most this many times in the BM25 query (its weight, rounded)."""
CANDIDATE_FACTOR = 4
"""The document frequency is looked up for at most this many times ``feedback_terms`` candidate terms."""


def feedback_terms(texts: Sequence[str], *, exclude: set[str], df: Callable[[Sequence[str]], dict[str, int]],
                   n_docs: int, n_terms: int, doc_weights: Sequence[float] | None = None) -> list[tuple[str, float]]:
    """The ``n_terms`` best expansion terms of the feedback ``texts``: ``(term, weight)``, best first.

    A term's weight is the sum over the texts of its share of the text's tokens (times the text's
    ``doc_weights`` entry, 1 each by default), times its IDF
    ``log((N - df + 0.5) / (df + 0.5))`` in the namespace. Terms of ``exclude`` (the question's), terms that no
    other record holds (df <= 1: they can only find the text they came from) and terms in more than half the
    records (no positive IDF) are left out. ``df`` gives the document frequencies of a list of terms.

    >>> stats = {"violin": 3, "melani": 400, "play": 40, "clarinet": 2, "mochi": 1}
    >>> feedback_terms(["Melanie: I play the violin and the clarinet", "Melanie: my violin, Mochi"],
    ...                exclude={"play"}, df=lambda ts: {t: stats.get(t, 1) for t in ts}, n_docs=500, n_terms=2)
    [('violin', 3.30...), ('clarinet', 1.76...)]
    """
    if n_terms <= 0 or not texts:
        return []
    share: dict[str, float] = {}
    in_docs: Counter[str] = Counter()
    for i, text in enumerate(texts):
        tokens = [t for t in tokenize(text) if t not in exclude]
        if not tokens:
            continue
        w = 1.0 if doc_weights is None else doc_weights[i]
        for term, count in Counter(tokens).items():
            share[term] = share.get(term, 0.0) + w * count / len(tokens)
            in_docs[term] += 1
    if not share:
        return []
    candidates = sorted(share, key=lambda t: (-in_docs[t], -share[t], t))[:CANDIDATE_FACTOR * n_terms]
    freq = df(candidates)
    weights: dict[str, float] = {}
    for term in candidates:
        d = freq.get(term, 0)
        if d <= 1 or d > n_docs / 2:
            continue
        weight = share[term] * math.log((n_docs - d + 0.5) / (d + 0.5))
        if weight > 0:
            weights[term] = weight
    return sorted(weights.items(), key=lambda tw: (-tw[1], tw[0]))[:n_terms]


def term_query(terms: Sequence[tuple[str, float]]) -> str:
    """The BM25 query of weighted ``terms``: each repeated by its weight relative to the best (1 to
    :data:`MAX_REPEAT` times; the keyword index counts a repeated query term again).

    >>> term_query([("violin", 3.0), ("clarinet", 1.0)])
    'violin violin violin clarinet'
    """
    if not terms:
        return ""
    top = terms[0][1]
    return " ".join(" ".join([t] * max(1, min(MAX_REPEAT, round(MAX_REPEAT * w / top)))) for t, w in terms)


def rocchio_vector(query: np.ndarray, feedback: Sequence[np.ndarray], beta: float,
                   weights: Sequence[float] | None = None) -> np.ndarray:
    """``query + beta x centroid(feedback)``, normalised (the query alone when there is no feedback); the
    centroid is weighted by ``weights`` when given.

    >>> [round(float(x), 3) for x in rocchio_vector(np.array([1.0, 0.0]), [np.array([0.0, 1.0])], 1.0)]
    [0.707, 0.707]
    """
    q = np.asarray(query, np.float64)
    q = q / (np.linalg.norm(q) or 1.0)
    if feedback and beta > 0:
        centroid = np.average([np.asarray(v, np.float64) / (np.linalg.norm(v) or 1.0) for v in feedback], axis=0,
                              weights=None if weights is None else np.asarray(weights, np.float64))
        q = q + beta * centroid
    return (q / (np.linalg.norm(q) or 1.0)).astype(np.float32)


@dataclass(frozen=True)
class Feedback:
    """The second hop of one search: the feedback route, its channels' hits, and what it was made of."""

    route: EvidenceRoute
    hits: dict[str, Hits]
    rids: tuple[int, ...]
    """the feedback turns (the first ranking's best)"""
    terms: tuple[tuple[str, float], ...]


def feedback_route(plan: SearchPlan, weight: float) -> EvidenceRoute:
    """The feedback route of ``plan``: its main route's question, no speakers, no time filter, ``weight``."""
    main = plan.routes[0]
    return EvidenceRoute(goal=RouteGoal.OTHER, name=FEEDBACK_ROUTE, queries=main.queries, weight=weight)


def feedback_hits(store: TruthStore, ctx: RecallContext, cat: Catalog, ns_id: int, plan: SearchPlan,
                  pool_rids: Sequence[int], *, docs: int, n_terms: int, beta: float, weight: float,
                  channels: Sequence[str], decay: float = 0.0, limit: int = 200) -> Feedback | None:
    """The second hop's hits from the first ranking's best ``docs`` turns of ``pool_rids`` (None when there is
    nothing to feed back). ``channels``: the channels the first hop ran (only ``keyword`` and ``vector`` are fed
    back, each when it ran); ``decay``: the i-th turn weighs ``(i + 1) ** -decay``; ``limit``: the vector candidates
    asked of an index that cannot score every record (the first hop's per-channel limit)."""
    top = [int(r) for r in pool_rids[:docs]]
    rank_weight = {r: (i + 1.0) ** -decay for i, r in enumerate(top)}
    if not top or not plan.routes:
        return None
    question = " ".join(plan.routes[0].queries)
    hits: dict[str, Hits] = {}
    terms: list[tuple[str, float]] = []
    reader = store.reader()
    if "keyword" in channels and n_terms > 0:
        records = store.records_by_rid(ns_id, top)
        found = [r for r in top if r in records]
        texts = [records[r].text for r in found]
        index = ctx.keyword_index
        n_docs = index.doc_count(reader, ns_id)
        terms = feedback_terms(texts, exclude=set(tokenize(question)), n_docs=n_docs, n_terms=n_terms,
                               doc_weights=[rank_weight[r] for r in found],
                               df=lambda ts: dict(zip(ts, index.doc_freqs(reader, ns_id, ts), strict=True)))
        if terms:
            rids, scores = index.score_all(reader, ns_id, term_query(terms))
            hits["keyword"] = Hits(rids, scores, fill=0.0)
    embedder, vectors = ctx.embedder, ctx.vector_index
    if "vector" in channels and beta > 0 and embedder is not None and vectors is not None:
        key = dense_key(embedder, question)
        stored = store.vectors_by_rid(ns_id, top)
        if has_encoding(ctx, key) and stored:
            query = cached_encoding(ctx, key, lambda: None)
            have = [r for r in top if r in stored]
            q = rocchio_vector(query, [stored[r] for r in have], beta, [rank_weight[r] for r in have])
            score_all = getattr(vectors, "score_all", None)
            scored = None if score_all is None else score_all(reader, ns_id, q)
            if scored is not None:
                hits["vector"] = Hits(np.asarray(scored[0], np.int64), np.asarray(scored[1], np.float64))
            else:  # Chroma, or a PostgreSQL namespace past its exact size: the best ``limit``, as the first hop
                hits["vector"] = Hits.from_pairs(vectors.search(reader, ns_id, q, limit))
    if not hits:
        return None
    return Feedback(route=feedback_route(plan, weight), hits=hits, rids=tuple(top), terms=tuple(terms))


def score_feedback(cat: Catalog, scored: RouteScores, feedback: Feedback, *, strategy: Strategy,
                   weights: Mapping[str, float], scope: Scope, fusion: Fusion, limit: int) -> None:
    """Score the feedback route and add it to ``scored`` (in place), as the first hop's routes were."""
    scores = rank_turns(cat, feedback.hits, weights, strategy, allowed=scope.allowed,
                        assistant_roles=cat.assistant)
    scored.per_route[feedback.route.name] = scores
    scored.routes[feedback.route.name] = feedback.route
    fusion.add_route(scored, cat, feedback.route, scores, scope=scope, limit=limit)


def keep_first(first: Fused, second: Fused, n: int) -> Fused:
    """``second`` with ``first``'s best ``n`` pool turns back in front, in ``first``'s order (those still in
    ``second``'s pool); each kept turn's score is raised to the best score behind it, so the pool stays sorted.

    >>> a = Fused(total=np.zeros(4), rids=[7, 8, 9], scores=[3.0, 2.0, 1.0])
    >>> b = Fused(total=np.zeros(4), rids=[9, 7, 6, 8], scores=[5.0, 4.0, 3.0, 2.0])
    >>> kept = keep_first(a, b, 2)
    >>> kept.rids, kept.scores
    ([7, 8, 9, 6], [5.0, 5.0, 5.0, 3.0])
    >>> kept.raised
    {7: 1.0, 8: 3.0}
    """
    if n <= 0:
        return second
    score = dict(zip(second.rids, second.scores, strict=True))
    kept = [r for r in first.rids[:n] if r in score]
    if not kept:
        return second
    taken = set(kept)
    rest = [r for r in second.rids if r not in taken]
    floor = score[rest[0]] if rest else -math.inf
    scores = [max(score[r], floor) for r in kept]
    for i in range(len(scores) - 2, -1, -1):
        scores[i] = max(scores[i], scores[i + 1])
    raised = {r: v - score[r] for r, v in zip(kept, scores, strict=True) if v > score[r]}
    return replace(second, rids=kept + rest, scores=scores + [score[r] for r in rest], raised=raised)
