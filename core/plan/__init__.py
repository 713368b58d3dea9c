"""Planning a search: question type, typed routes (goal, speakers, boosted kinds, weight) and the strategy table."""

from .derive import derive_action_state
from .heuristic import classify_question, plan_search
from .strategy import STRATEGIES, Strategy

__all__ = ["STRATEGIES", "Strategy", "classify_question", "derive_action_state", "plan_search"]
