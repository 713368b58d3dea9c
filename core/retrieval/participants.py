"""A conversation excerpt's memories with the same people first (stage 4½, after fusion): for a plan with the
excerpt routes (``opening`` / ``focus``, :data:`memory_ext.retrieval.recall.CONVERSATION_GOALS`), each pool turn
that names a participant the excerpt names (:func:`memory_ext.text.participants.participants`: a parent, a friend,
a teacher, a pet) moves up: the pool is re-ordered by ``-ln(1 + rank) + weight x shared``, ``rank`` its place in
the fused pool (0 first) and ``shared`` the number of roles it shares with the excerpt. A role that more than half
the pool's turns name tells nothing and is not counted. The pool's scores stay where they were, handed out again in
the new order.

Why: an emotional-support conversation recalls the user's memories *with the people it is about* — a child upset
that his parents argue is reminded of an afternoon swimming with his father, one teased by classmates of a
friend's support — which share no event word, and no emotion, with the excerpt, so neither e5 nor the keyword
channels rank them. MADial-Bench zh dev (80 dialogues, e5, ``recall.participant_weight`` chosen per fold among
0 / 0.5 / 0.8 / 1.0 / 1.3, 5 folds): recall@5 / @10 0.532 / 0.684 -> 0.558 / 0.688 held out; the default 1.0
in-sample 0.565 / 0.691 (docs/design-notes/excerpt-search.md). Searches that are not excerpts (questions, an
agent's state) are unchanged.

>>> shared_counts("爸爸妈妈总是吵架", ["Bart和爸爸一起去游泳", "Bart在海边放风筝", "Bart和妈妈一起看动画片"])
[1, 0, 1]
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Final

from ..models import RouteGoal, SearchPlan
from ..store.catalog import Catalog
from ..text.participants import participants
from .fuse import Fused, pool_texts, reorder_pool
from .recall import CONVERSATION_GOALS

__all__ = ["excerpt_only", "lift_participants", "shared_counts"]

_AGENT_GOALS: Final = frozenset({RouteGoal.ACTION, RouteGoal.SLOT, RouteGoal.OTHER})


def excerpt_only(plan: SearchPlan) -> bool:
    """Whether ``plan`` is a conversation excerpt's and nothing else: ``opening`` / ``focus`` routes and no route of
    an agent's state (``action``, ``slot``) or a planner's own (``other``), whose order other lifts decide."""
    goals = {r.goal for r in plan.routes}
    return bool(goals & set(CONVERSATION_GOALS)) and not goals & _AGENT_GOALS


def shared_counts(query: str, texts: Sequence[str]) -> list[int]:
    """How many of ``query``'s participant keys each of ``texts`` names, keys named by more than half of
    ``texts`` left out."""
    asked = participants(query)
    if not asked or not texts:
        return [0] * len(texts)
    keys = [participants(t) & asked for t in texts]
    common = Counter(k for ks in keys for k in ks)
    told = {k for k in asked if common[k] * 2 <= len(texts)}
    return [len(ks & told) for ks in keys]


def lift_participants(fused: Fused, cat: Catalog, plan: SearchPlan, query: str,
                      text_of: Callable[[Sequence[int]], Mapping[int, str]], *, weight: float) -> Fused:
    """``fused`` with its pool re-ordered as the module docstring says; ``fused`` itself when ``weight`` is 0, the
    plan is not a conversation excerpt's alone (:func:`excerpt_only`), or no pool turn shares a participant with
    the query."""
    if weight <= 0 or len(fused.rids) < 2 or not excerpt_only(plan) or not participants(query):
        return fused
    positions, texts = pool_texts(fused, cat, text_of)
    shared = shared_counts(query, texts)
    if not any(shared):
        return fused
    return reorder_pool(fused, positions, [weight * s for s in shared])
