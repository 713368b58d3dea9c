"""A question's own wording first (stage 4½, after fusion): for a question (a plan of ``query`` / ``speaker``
routes only), each pool turn that repeats a run of the question's words — at least :data:`MIN_RUN` words in a
row, :data:`MIN_CONTENT` of them not stop words ("my *biggest focus right now* is …") — moves up: the pool is
re-ordered by ``-ln(1 + rank) + weight x (content words of its longest such run - 1)``, ``rank`` its place in
the fused pool (0 first). A run that more than half the pool's turns repeat tells nothing and is not counted
(the topic's own name: "the espresso machine"), and neither does a run in a question (the turn that asked for a
memory repeats the words a later question asks it in; the reply holds the memory). The pool's scores stay where
they were, handed out again in the new order.

Why: people ask about a memory in the words they said it in, and a multiple-choice question spells out every
choice ("…is it getting more sleep, good diet, managing stress, or reducing screen time?"): each choice pulls the
turns about it, and in a bag of words (BM25) or one vector (e5) the turn that answers ("My biggest focus right now
is on maintaining a good diet") is one of many about health. Words in the same order are rarer than the same
words: a run of three or more of the question's words is seldom there by chance. BFCL v4 memory dev (e5,
``memext bench agent --suites memory``) hit@1 / @3 / @10 0.846 / 0.974 / 0.974 -> 0.872 / 0.987 / 1.000; the
numbers and guards are in ``recall.phrase_weight`` (:class:`memory_ext.config.RecallConfig`).

>>> shared_runs("What is my biggest focus right now?", ["My biggest focus right now is a good diet.",
...     "Right now I sleep more.", "My focus is sleep."])
[4, 0, 0]
"""

from __future__ import annotations

import functools
import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Final

from ..models import RouteGoal, SearchPlan
from ..store.catalog import Catalog
from ..text.tokenize import EN_STOP_WORDS
from .fuse import Fused, pool_texts, reorder_pool

__all__ = ["MIN_CONTENT", "MIN_RUN", "lift_phrases", "question_only", "shared_runs"]

MIN_RUN: Final = 3
"""A run counts from this many words in a row."""
MIN_CONTENT: Final = 2
"""... of which at least this many are not stop words."""
TOLD_CACHE: Final = 8192
"""Pool texts whose words are kept (:func:`_told_words`)."""
_QUESTION_GOALS: Final = frozenset({RouteGoal.QUERY, RouteGoal.SPEAKER})
_TOKEN_RE: Final = re.compile(r"[a-z0-9]+(?:'[a-z0-9]+)*|[^\sa-z0-9]")
"""A lower-cased word (inner apostrophes kept) or one other character (punctuation, a Chinese character: it breaks
a run; the stop words that tell a run of words from a run of function words are English)."""
_SENTENCE_RE: Final = re.compile(r"(?<=[.!?])\s+|\n+")
_APOSTROPHES: Final = str.maketrans({"\u2019": "'", "\u2018": "'", "\u02bc": "'"})


def question_only(plan: SearchPlan) -> bool:
    """Whether ``plan`` is a question's: its routes are the question's and its speakers' only (no conversation
    excerpt, no agent state, no planner's own need)."""
    return bool(plan.routes) and all(r.goal in _QUESTION_GOALS for r in plan.routes)


def _words(text: str) -> list[str]:
    out = []
    for tok in _TOKEN_RE.findall(text.lower().translate(_APOSTROPHES)):
        if tok[0].isascii() and tok[0].isalnum():
            out.append(tok[:-2] if tok.endswith("'s") else tok)
        else:
            out.append("")  # punctuation: no run goes through it
    return out


def _runs(query: Sequence[str], text: Sequence[str]) -> set[tuple[str, ...]]:
    """The maximal runs of ``query``'s words that ``text`` repeats in order, of at least :data:`MIN_RUN` words
    with :data:`MIN_CONTENT` content words."""
    starts: dict[tuple[str, ...], list[int]] = {}
    for i in range(len(query) - MIN_RUN + 1):
        gram = tuple(query[i:i + MIN_RUN])
        if all(gram):
            starts.setdefault(gram, []).append(i)
    out: set[tuple[str, ...]] = set()
    for j in range(len(text) - MIN_RUN + 1):
        for i in starts.get(tuple(text[j:j + MIN_RUN]), ()):
            if i and j and query[i - 1] and query[i - 1] == text[j - 1]:
                continue  # not maximal: it extends to the left
            n = MIN_RUN
            while i + n < len(query) and j + n < len(text) and query[i + n] and query[i + n] == text[j + n]:
                n += 1
            run = tuple(query[i:i + n])
            if sum(w not in EN_STOP_WORDS for w in run) >= MIN_CONTENT:
                out.add(run)
    return out


def _told(text: str) -> str:
    """``text`` without its questions: a question that repeats the words of a later question asked for the memory,
    the reply holds it ("What did you take away from the book?")."""
    return " ".join(s for s in _SENTENCE_RE.split(text) if not s.rstrip().endswith("?"))


@functools.lru_cache(maxsize=TOLD_CACHE)
def _told_words(text: str) -> tuple[str, ...]:
    """:func:`_words` of ``text`` outside its questions (cached: the pools of searches hold the same turns)."""
    return tuple(_words(_told(text)))


def shared_runs(query: str, texts: Sequence[str]) -> list[int]:
    """For each of ``texts``, the content words of its longest run of ``query``'s words outside its questions
    (0: none), runs that more than half of ``texts`` repeat left out."""
    asked = _words(query)
    runs = [_runs(asked, _told_words(t)) for t in texts]
    common = Counter(r for rs in runs for r in rs)
    return [max((sum(w not in EN_STOP_WORDS for w in r) for r in rs if common[r] * 2 <= len(texts)), default=0)
            for rs in runs]


def lift_phrases(fused: Fused, cat: Catalog, plan: SearchPlan, query: str,
                 text_of: Callable[[Sequence[int]], Mapping[int, str]], *, weight: float) -> Fused:
    """``fused`` with its pool re-ordered as the module docstring says; ``fused`` itself when ``weight`` is 0, the
    plan is not a question's (:func:`question_only`) or no pool turn repeats a run of the question."""
    if weight <= 0 or len(fused.rids) < 2 or not question_only(plan):
        return fused
    positions, texts = pool_texts(fused, cat, text_of)
    shared = shared_runs(query, texts)
    if not any(shared):
        return fused
    return reorder_pool(fused, positions, [weight * max(s - 1, 0) for s in shared])
