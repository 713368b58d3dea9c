"""Ranking: fusion of channel rankings (and, in later versions, MMR, budgets and disclosure)."""

from .fusion import FusedItem, rrf

__all__ = ["FusedItem", "rrf"]
