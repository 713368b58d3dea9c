"""Per-question-type ranking strategies, as frozen tables (a search never writes into them).

Weights are in units of standard deviations of the fused channel score: a ``speaker`` of 0.5 lifts a turn by the
given speaker as much as half a standard deviation of evidence. Values were set on the development data only
(LoCoMo conv-26/30; see docs/benchmarks.md); change them only with benchmark evidence.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from types import MappingProxyType

from ..models import QuestionType

__all__ = ["QUESTION_TYPES", "STRATEGIES", "Strategy", "strategy_for"]

QUESTION_TYPES = tuple(t.value for t in QuestionType)
"""The question types (:class:`~memory_ext.models.QuestionType`), as plain strings."""


@dataclass(frozen=True)
class Strategy:
    """How one question type turns channel evidence into a turn ranking."""

    window: float = 1.0
    """weight of the turn's ±1-turn window record (same session) next to the turn's own score"""
    session: float = 0.3
    """weight of the session prior: the standardised mean of the session's three best turns"""
    speaker: float = 0.5
    """bonus for turns by a speaker the question names"""
    time: float = 0.5
    """bonus for turns inside the plan's time filter (a soft gate: nothing is removed)"""
    assistant: float = 0.0
    """bonus for assistant turns (questions about what the assistant said before)"""
    derived: float = 0.5
    """weight of the best positive evidence of the derived records anchored to a turn (fact, preference, event,
    procedure, failure pattern, L0/L1 layers)"""
    answer: float = 0.75
    """weight of the fused score of the question a turn answers (:attr:`memory_ext.store.catalog.Catalog.reply_to`:
    the turn before it in its session asked it, another speaker), above ``answer_floor``: the reply to a question
    that matches is often what the question is after ("What did you take away from the book?" → "It taught me
    self-acceptance"). LoCoMo dev, evid_recall@5 / @10: 0.733 / 0.846 without it, 0.771 / 0.852 with 0.75 (held
    out, weight and floor chosen leave-one-conversation-out: 0.766 / 0.844); 0 turns it off."""
    answer_floor: float = 1.0
    """the question's fused score counts for its reply above this many standard deviations: only a question that
    matches clearly lifts its answer"""
    kind_bonus: float = 1.0
    """bonus for a turn whose derived record of a kind the route boosts (``EvidenceRoute.boost_kinds``: failure
    patterns and procedures for an action route with a failure or a last tool) matches the route's query"""


_BASE = Strategy()
STRATEGIES: MappingProxyType[str, Strategy] = MappingProxyType({
    "single": _BASE,
    "aggregate": Strategy(session=0.15),  # evidence spread over sessions: a weaker session prior
    "temporal": Strategy(time=1.0),
    "comparison": Strategy(session=0.15),
    "personalized_advice": _BASE,
    "prior_assistant_response": Strategy(assistant=0.5),
    "other": _BASE,
})


def strategy_for(question_type: str, overrides: Mapping[str, float] | None = None) -> Strategy:
    """The question type's strategy with ``overrides`` (``recall.strategy``) laid over it."""
    base = STRATEGIES[question_type]
    return replace(base, **dict(overrides)) if overrides else base
