"""Planning a search: question type, routes, constraints and the strategy table."""

from .heuristic import classify_question, plan_search
from .strategy import STRATEGIES, Strategy

__all__ = ["STRATEGIES", "Strategy", "classify_question", "plan_search"]
