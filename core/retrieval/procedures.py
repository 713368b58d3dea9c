"""Tool pages first while an agent is between two calls (stage 4½, after fusion): with a next-step route in the
plan (:mod:`memory_ext.plan.procedures`: a call succeeded or is pending, nothing failed or is missing, the
namespace holds procedure records), a pool turn that documents a tool — one with a ``procedure`` record
(:mod:`memory_ext.ingest.manuals`) — gains :data:`PROCEDURE_LIFT` of the pool's score spread (the gap between its
first and its ``_SPREAD_ITEMS``-th score).

An agent in the middle of a task needs the page that says how to run its next step; the request that started
the task (a customer's story, a long brief) reads like the prose pages about its topic — FAQs, product pages,
customer how-tos — and ranks them above the internal page of the tool. Between prose and tool pages alike, the
state is action-shaped, so the tool pages go first; among tool pages the order of the fusion stays. A plain search,
a search after a failure or with a missing slot, and a namespace without procedures are unchanged.

τ²-bench banking_knowledge dev (hashing, ``memext bench agent --suites procedures``, memory-ext): hit@1 / @3 / @10
0.272 / 0.351 / 0.529 without the lift, 0.279 / 0.375 / 0.607 with it (0.5 of the spread: 0.588 before the
placeholder fix; 2.0: 0.614; a lift over the whole catalog rather than the pool: the same as over the pool).

The share of the spread is a score, and score scales differ by embedder (the same constant that helped one hurt
the other: every tool page first, e5 hit@10 0.656 -> 0.703, hashing 0.754 -> 0.623). So the step the route itself
points at goes by rank: with the texts, a tool page that takes a parameter the next-step route asks for (its
signature or parameter list names it: :func:`memory_ext.ingest.manuals.documented_tools`) goes first, in the
fusion's order, then the pool in the order of the lift; a tool page that the lift alone put first stays first (the
request and the action shape agree on it). The pool keeps its scores, only the turns trade places; where no page
takes what the route asks for, the lift is the share of the spread alone. Dev, reopened stores (hit@1 / @3 / @10,
before -> after): hashing 0.323 / 0.555 / 0.754 -> 0.323 / 0.585 / 0.810, e5 0.241 / 0.396 / 0.656 -> 0.241 /
0.485 / 0.735; no fold (probe index mod 5) lower on hit@1 or hit@10. Without the rule for the first page, hit@1
rises on hashing (0.351 at 1.0, 0.356 at 0.5 of the spread) but a manual first by both signals fell below the
pages taking the route's ids on e5 (0.253 / 0.482 / 0.740, one fold lower on hit@1); with the other tool pages
not lifted (0 of the spread), hashing lost hit@10 on a fold.

When many pages take what the route asks for (a ``user_id``: most internal pages do), the fusion's order of those
pages is the request's more than the call's. Below the first :data:`KEEP_FIRST` of them, the next-step route's own
ranking (it scores the procedure records: the tools and parameters each page lists) joins the fusion's: those pages
go by the sum of their two ranks, so a page deep in the pool that takes just what the call had comes into the top
10. Dev hashing 0.323 / 0.585 / 0.810 -> 0.323 / 0.595 / 0.829 (hit@10 per fold 0.802 / 0.884 / 0.824 / 0.765 /
0.776 -> 0.826 / 0.919 / 0.859 / 0.776 / 0.765, hit@1 per fold the same).

>>> PROCEDURE_LIFT
1.0
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from functools import lru_cache
from typing import Final

import numpy as np

from ..ingest.manuals import documented_tools
from ..models import ActionState, RouteGoal, SearchPlan
from ..plan.procedures import NEXT_STEP_ROUTE, used_tools
from ..store.catalog import KIND_CODES, Catalog
from .fuse import Fused

__all__ = ["KEEP_FIRST", "PROCEDURE_LIFT", "action_shaped", "lift_procedures"]

PROCEDURE_LIFT: Final = 1.0
"""What a turn documenting a tool gains, as a share of the pool's score spread (with the rank rule of the module
docstring and the pool reordered by rank in every case, 0.5 kept every dev fold on both embedders too — hashing
0.328 / 0.593 / 0.803, e5 0.246 / 0.485 / 0.728 — but left prose above a tool page where no page takes what the
route asks for)."""
_SPREAD_ITEMS: Final = 10
KEEP_FIRST: Final = 3
"""Among the pages that take what the next-step route asks for, the first this many keep the fusion's order; the
others go by the sum of their ranks in the fusion and in the route's own ranking (the route scores the procedure
records — the tools and parameters a page lists — so a page deep in the pool that takes just what the call had
rises into the top 10). τ² banking dev, hashing, hit@1 / @3 / @10: 0.323 / 0.585 / 0.810 -> 0.323 / 0.595 / 0.829
(every page by the sum: 0.241 / 0.548 / 0.829; by the route alone: 0.138 / 0.506 / 0.796; the first 1 / 2 kept:
hit@3 0.529 / 0.581)."""


def action_shaped(plan: SearchPlan) -> bool:
    """Whether ``plan`` serves an agent between two calls: a next-step route and no missing slot."""
    names = {r.name for r in plan.routes}
    return NEXT_STEP_ROUTE in names and not any(r.goal == RouteGoal.SLOT for r in plan.routes)


@lru_cache(maxsize=512)
def _tools_of(text: str) -> frozenset[str]:
    return frozenset(documented_tools(text)[0])


def _asked(plan: SearchPlan) -> frozenset[str]:
    """The names the next-step route asks for (the parameters the agent's call worked with)."""
    return frozenset(w for r in plan.routes if r.name == NEXT_STEP_ROUTE for q in r.queries for w in q.split())


@lru_cache(maxsize=512)
def _parameters_of(text: str) -> frozenset[str]:
    return frozenset(documented_tools(text)[1])


def lift_procedures(fused: Fused, cat: Catalog, plan: SearchPlan, state: ActionState | None = None,
                    text_of: Callable[[Sequence[int]], Mapping[int, str]] | None = None, *,
                    lift: float = PROCEDURE_LIFT, route: np.ndarray | None = None) -> Fused:
    """``fused`` with its pool reordered by the lift of the module docstring; ``fused`` itself when the plan is not
    action-shaped (:func:`action_shaped`) or no pool turn documents a tool. With the ``state`` and ``text_of``
    (catalog positions -> record texts), a page whose tools the agent has all used already
    (:func:`memory_ext.plan.procedures.used_tools`) is not lifted: it describes a step behind the agent; with
    ``text_of``, a page whose tools take a parameter the next-step route asks for goes first, in the fusion's order
    (below a tool page that the lift alone put first); with ``route`` (the next-step route's own score of every
    catalog position), those pages below the first :data:`KEEP_FIRST` go by the sum of their two ranks, in the
    fusion and in the route."""
    if not lift or not fused.rids or not action_shaped(plan):
        return fused
    procedure = (cat.kind == KIND_CODES["procedure"]) & (cat.anchor >= 0)
    documents = np.zeros(len(cat), bool)
    documents[cat.anchor[procedure]] = True
    positions = cat.pos_of(np.asarray(fused.rids, np.int64))
    lifted = [bool(p >= 0 and documents[p]) for p in positions]
    texts: Mapping[int, str] = {}
    if text_of is not None and any(lifted):
        texts = text_of([int(p) for p, up in zip(positions, lifted, strict=True) if up])
    used = used_tools(state) if state is not None else frozenset()
    if used and texts:
        lifted = [up and not (_tools_of(texts.get(int(p), "")) or {""}) <= used
                  for p, up in zip(positions, lifted, strict=True)]
    if not any(lifted):
        return fused
    top = fused.scores[:_SPREAD_ITEMS]
    gain = lift * max(top[0] - top[-1], 1e-6)
    soft = [s + gain if up else s for s, up in zip(fused.scores, lifted, strict=True)]
    order = sorted(range(len(soft)), key=lambda i: -soft[i])
    asked = _asked(plan)
    takes = [up and bool(asked & _parameters_of(texts.get(int(p), "")))
             for p, up in zip(positions, lifted, strict=True)]
    total = fused.total.copy()
    if not any(takes):
        total[positions[np.asarray(lifted)]] += gain
        return replace(fused, rids=[fused.rids[i] for i in order], scores=[soft[i] for i in order], total=total)
    # by rank, not by score (scales differ by embedder): the pages that take what the route asks for first, in the
    # fusion's order, then the pool in the order of the lift; a tool page the lift alone put first stays first
    rank = [0] * len(soft)
    for r, i in enumerate(order):
        rank[i] = r
    key = [i - len(soft) if t else rank[i] for i, t in enumerate(takes)]
    if route is not None:  # below the first few, the route's own ranking of the pages joins the fusion's
        taking = [i for i, t in enumerate(takes) if t]
        by_route = sorted(taking, key=lambda i: (-float(route[positions[i]]) if positions[i] >= 0 else np.inf, i))
        place = {i: r for r, i in enumerate(by_route)}
        fusion = {i: r for r, i in enumerate(taking)}
        head, tail = taking[:KEEP_FIRST], taking[KEEP_FIRST:]
        tail.sort(key=lambda i: (place[i] + fusion[i], fusion[i]))
        for r, i in enumerate(head + tail):
            key[i] = r - len(soft)
    if lifted[order[0]] and not takes[order[0]]:
        key[order[0]] = -2 * len(soft)
    order = sorted(range(len(soft)), key=lambda i: (key[i], i))
    scores = sorted(fused.scores, reverse=True)  # the pool keeps its scores, best first; the turns trade places
    moved = positions[np.asarray(order)]
    total[moved[moved >= 0]] = np.asarray(scores)[moved >= 0]
    return replace(fused, rids=[fused.rids[i] for i in order], scores=scores, total=total)
