"""A missing slot's value, lifted (stage 4½, after fusion): in the candidate pool, a turn that states a value for
what the agent's action lacks gains part of the pool's score spread (the gap between its first and its
``_SPREAD_ITEMS``-th score), so among turns alike it ranks above those that only talk about the same thing:

* a value of one of the action state's missing slots (:func:`memory_ext.plan.slots.states_value`: a value of the
  slot's type right after a word naming it — "I want 100 shares" for ``amount``, "Number of shares to trade"):
  :data:`SLOT_VALUE_LIFT`, :data:`FORMAT_LIFT` more when the value has the form the slot's description spells out
  (:func:`memory_ext.plan.slots.fits_format`: "the 3 letter code of the arriving airport" — LAX);
* a value of a thing the query names without saying which (:func:`memory_ext.plan.slots.open_references`: "a
  specific term" — "The term is 'Progress'"): :data:`OPEN_REFERENCE_LIFT`;
* a missing slot's value the conversation has already said (:func:`memory_ext.plan.slots.is_new`: "The sector is
  Technology" after "technology stocks") gains nothing; a turn that states no missing value but another value of
  a thing the request gives (:func:`memory_ext.plan.slots.restates_given`: "I want 100 shares" after "Buy 50
  shares", the stock missing) loses :data:`RESTATED_GIVEN_DROP`: it answers another request.

Only with an action state (an agent at a decision point), the open references only when it offers tools or
misses slots (a call in view); a plain search is unchanged.

>>> SLOT_VALUE_LIFT < OPEN_REFERENCE_LIFT
True
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Final

import numpy as np

from ..models import ActionState
from ..plan.heuristic import MAX_SLOT_ROUTES
from ..plan.slots import fits_format, is_new, open_references, restates_given, stated_values, states_value
from ..store.catalog import Catalog
from .fuse import Fused

__all__ = ["FORMAT_LIFT", "OPEN_REFERENCE_LIFT", "RESTATED_GIVEN_DROP", "SLOT_POOL_FACTOR", "SLOT_VALUE_LIFT",
           "lift_slot_values", "slot_pool_size"]

SLOT_VALUE_LIFT: Final = 0.5
"""What a turn stating a missing slot's value gains, as a share of the pool's score spread (BFCL miss_param and
When2Call dev, hashing: 0.25–0.5 lift BFCL hit@1 without costing When2Call; 1.0 and above cost When2Call 3–7
probes: a schema's parameter words also name values the request already has)."""
OPEN_REFERENCE_LIFT: Final = 1.0
"""What a turn stating a value of a thing the query leaves open gains, likewise: the query itself names that
thing, so the match is surer than a schema parameter's."""
RESTATED_GIVEN_DROP: Final = 0.15
"""What a turn loses, as a share of the spread, when it states no missing value but gives another value of a thing
the request already gives a value of (:func:`memory_ext.plan.slots.restates_given`: "I want 100 shares." after "Buy
50 shares …" that lacks the stock): an answer to another request. The least that settles that case with a margin
(0.1 barely does): larger drops cost the agent bench's slots suite (dev, hashing: 0.25 one BFCL hit@3 probe, 0.5
also a hit@10 one; e5, 0.25: two hit@10 probes — a value of another parameter under the same word, "from
Rivermist (zip 83214)" after "to Greenway (zip 74532)")."""
FORMAT_LIFT: Final = 1.0
"""How much more a missing slot's value lifts when it has the form the slot's description spells out
(:func:`memory_ext.plan.slots.fits_format`: "the 3 letter code of the arriving airport" — "to LAX", not "to Los
Angeles"; "in the format of street, city, state" — "2107 Channing Way, Berkeley, CA", not "Rivermist"). BFCL
miss_param dev, hashing: hit@3 0.695 -> 0.729 (0.5: 0.712), hit@1 and When2Call unchanged; e5 unchanged (the
golds it would lift are outside its pool)."""
SLOT_POOL_FACTOR: Final = 3
"""With missing slots, the lift reads this many times the usual candidate pool, which is then cut back to its usual
size: a short answer ("my destination is to LAX") to a long request can rank below the usual pool before its lift.
Agent bench, slots, e5 (dev): hit@3 / @10 0.789 / 0.927 -> 0.807 / 0.954 (BFCL hit@10 0.864 -> 0.915; 3, 6 alike;
hit@1 unchanged); hashing unchanged."""
_SPREAD_ITEMS: Final = 10


def slot_pool_size(pool_size: int, state: ActionState | None) -> int:
    """The candidate pool the slot lift reads: :data:`SLOT_POOL_FACTOR` times ``pool_size`` when ``state`` misses
    slots, else ``pool_size``.

    >>> slot_pool_size(40, ActionState(missing_slots=("file_name",))), slot_pool_size(40, None)
    (120, 40)
    """
    return pool_size * SLOT_POOL_FACTOR if state is not None and state.missing_slots else pool_size


def lift_slot_values(fused: Fused, cat: Catalog, text_of: Callable[[Sequence[int]], Mapping[int, str]],
                     state: ActionState | None, query: str = "", *, lift: float = SLOT_VALUE_LIFT,
                     ref_lift: float = OPEN_REFERENCE_LIFT) -> Fused:
    """``fused`` with its pool reordered by the lifts of the module docstring (``text_of``: catalog positions ->
    record texts); ``fused`` itself when nothing is lifted or there is no action state."""
    if state is None or not fused.rids:
        return fused
    slots = state.missing_slots[:MAX_SLOT_ROUTES]
    # what the query leaves open counts when a call is in view: tools on offer or slots missing
    refs = open_references(query) if slots or state.available_tools else []
    if not slots and not refs:
        return fused
    said = "\n".join(x for x in (query, state.current_subgoal, state.recent_context) if x)
    positions = cat.pos_of(np.asarray(fused.rids, np.int64))
    texts = text_of([int(p) for p in positions if p >= 0])
    top = fused.scores[:_SPREAD_ITEMS]
    spread = max(top[0] - top[-1], 1e-6)
    scores = list(fused.scores)
    total = fused.total.copy()
    for i, pos in enumerate(positions):
        text = texts.get(int(pos)) if pos >= 0 else None
        if not text:
            continue
        gain = _gain(text, slots, refs, state.slot_hints, said, query, lift, ref_lift) * spread
        if gain:
            scores[i] += gain
            total[pos] += gain
    if scores == fused.scores:
        return fused
    order = sorted(range(len(scores)), key=lambda i: -scores[i])
    return replace(fused, rids=[fused.rids[i] for i in order], scores=[scores[i] for i in order], total=total)


def _gain(text: str, slots: Sequence[str], refs: Sequence[str], hints: Mapping[str, str] | None, said: str,
          query: str, lift: float, ref_lift: float) -> float:
    """A pool turn's lift, as a share of the spread (module docstring): a missing slot's value counts when the
    conversation (``said``) has not said it already."""
    values = stated_values(text, slots, hints) if slots else {}
    new = any(is_new(v, said) for vs in values.values() for v in vs)
    if new and FORMAT_LIFT:  # a value in the form the slot's description spells out ("the 3 letter code": LAX)
        fits = any(fits_format(v, (hints or {}).get(slot, ""), text) for slot, vs in values.items() for v in vs
                   if is_new(v, said))
        lift *= 1.0 + (FORMAT_LIFT if fits else 0.0)
    gain = max(lift if new else 0.0, ref_lift if refs and states_value(text, refs) else 0.0)
    if gain:
        return gain
    if not values and restates_given(text, query, said):  # another value of a thing the request already gives
        return -RESTATED_GIVEN_DROP
    return 0.0
