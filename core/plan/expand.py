"""Query-time plan expansions (no model): conjunctive splitting and class → instance routes.

Applied by the read pipeline to whatever plan the planner made (:func:`expand_plan`), each switched by
``recall`` options so the tuning grids can compare them:

* **Conjunctive splitting** (``recall.split_conjunctions``): a question about two or more speakers jointly ("What
  do Jon and Gina both have in common?", :func:`is_conjunctive`) already has one route per speaker; each now
  asks its own sub-question, with the other speakers and the conjunction words ("both", "in common") taken
  out ("What do Jon have?"), so each person's turn is searched for on its own instead of by a query about
  both.
* **Class → instance expansion** (``recall.expansion = "lexicon"``): for each class the question names
  (:mod:`memory_ext.plan.classes`: "instruments", "cities", "painted"…), a route whose query is the class's
  instance words, about the same speakers and time span as the main route, weighing ``recall.expansion_weight``;
  ``"lexicon-sets"`` only where the question asks for the class's members (a plural or "kinds of", no quoted
  title).
* **Associated kinds** (``recall.associative_weight`` > 0): a conversation excerpt (a plan with ``opening`` /
  ``focus`` routes) gets, for each kind of experience it mentions (:mod:`memory_ext.plan.associations`: a
  performance, a competition, an outing…), a route asking for that kind's words, so a memory of the same kind
  that shares no word with the excerpt can be recalled.

>>> from memory_ext.models import EvidenceRoute, SearchPlan
>>> plan = SearchPlan(routes=(EvidenceRoute(goal="query", queries=("What instruments does Mel play?",),
...                                         speakers=("Mel",)),))
>>> [r.name for r in expand_plan(plan, expansion="lexicon").routes]
['query', 'class:instrument']
>>> split_for("What do Jon and Gina both have in common?", "Jon", ("Jon", "Gina"))
'What do Jon have?'
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from ..models import EvidenceRoute, RouteGoal, SearchPlan
from .associations import kinds_in
from .classes import classes_in

__all__ = ["MAX_CLASS_ROUTES", "expand_plan", "is_conjunctive", "split_for"]

MAX_CLASS_ROUTES = 2
"""At most this many class routes per question (bounds the extra channel calls)."""

_CONJUNCTION_WORDS = re.compile(r"\b(both|in common|each|together|share|shared)\b", re.I)


def is_conjunctive(question: str, speakers: Sequence[str]) -> bool:
    """Whether ``question`` asks about ``speakers`` jointly ("Jon and Gina", "both", "in common"), not about one
    of them in relation to another ("What did Jon tell Gina?").

    >>> pair = ("Jon", "Gina")
    >>> is_conjunctive("Did Jon and Gina both dance?", pair), is_conjunctive("What did Jon tell Gina?", pair)
    (True, False)
    """
    if re.search(r"\b(both|in common)\b", question, re.I):
        return True
    names = "|".join(re.escape(s) for s in speakers)
    return re.search(rf"\b({names})(['’]s)?(\s*,\s*|\s+(and|&)\s+)({names})\b", question) is not None


def split_for(question: str, speaker: str, speakers: Sequence[str]) -> str:
    """``question`` about ``speaker`` alone: the other named ``speakers`` and the conjunction words removed."""
    text = question
    for other in speakers:
        if other == speaker:
            continue
        name = re.escape(other)
        # "A and B", "A, B and C", "B and A": drop the other name with its joining word
        text = re.sub(rf"(\s*,\s*|\s+(and|&|or)\s+){name}(['’]s)?\b", "", text)
        text = re.sub(rf"\b{name}(['’]s)?(\s*,\s*|\s+(and|&|or)\s+)", "", text)
        text = re.sub(rf"\b{name}(['’]s)?\b", "", text)
    text = _CONJUNCTION_WORDS.sub("", text)
    text = re.sub(r"\s+([?.!,])", r"\1", re.sub(r"\s{2,}", " ", text)).strip()
    return text or question


def expand_plan(plan: SearchPlan, *, expansion: str = "off", expansion_weight: float = 0.5,
                split_conjunctions: bool = False, associative_weight: float = 0.0) -> SearchPlan:
    """``plan`` with the switched-on expansions (see the module docstring); unchanged when none applies."""
    if not plan.routes or (expansion == "off" and not split_conjunctions and associative_weight <= 0):
        return plan
    main = plan.routes[0]
    question = " ".join(main.queries)
    routes = list(plan.routes)
    if split_conjunctions:
        named = tuple(r.speakers[0] for r in routes if r.goal is RouteGoal.SPEAKER and r.speakers)
        if len(named) >= 2 and is_conjunctive(question, named):
            routes = [r.model_copy(update={"queries": (split_for(question, r.speakers[0], named),)})
                      if r.goal is RouteGoal.SPEAKER and r.speakers else r for r in routes]
    if expansion in ("lexicon", "lexicon-sets") and expansion_weight > 0 and main.goal is RouteGoal.QUERY:
        for name, instances in classes_in(question, sets_only=expansion == "lexicon-sets")[:MAX_CLASS_ROUTES]:
            routes.append(EvidenceRoute(goal=RouteGoal.OTHER, name=f"class:{name}", queries=(instances,),
                                        speakers=main.speakers, time_filter=main.time_filter,
                                        weight=expansion_weight))
    if associative_weight > 0 and any(r.goal in (RouteGoal.OPENING, RouteGoal.FOCUS) for r in routes):
        for name, words in kinds_in(question)[:MAX_CLASS_ROUTES]:
            routes.append(EvidenceRoute(goal=RouteGoal.OTHER, name=f"kind:{name}", queries=(" ".join(words),),
                                        weight=associative_weight))
    if len(routes) == len(plan.routes) and all(a is b for a, b in zip(routes, plan.routes, strict=True)):
        return plan
    return plan.model_copy(update={"routes": tuple(routes)})
