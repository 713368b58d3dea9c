"""Stage 1, the scope: which records a search may return, as masks over the namespace's catalog positions.

Two masks, kept apart because they act at different times: ``allowed`` (the search's filters; a window counts
when its own turn passes) is applied while each route is scored; ``flags`` (``as_of``) removes turns from the
*result* after ranking, so a superseded statement still lifts the one that replaced it.

The cold tier is not a mask: it is a ranking prior (``Scope.cold_penalty``, applied by the fuse stage to the
catalog's ``cold`` column), so compaction never makes a memory unreachable by a default search.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..store.catalog import KIND_CODES, Catalog
from ..store.interface import TruthStore
from .request import SearchRequest

__all__ = ["Scope", "flag_mask", "scope_of"]


@dataclass(frozen=True)
class Scope:
    """The masks of one search (None: no restriction)."""

    allowed: np.ndarray | None = None
    """Records passing the filters (windows follow their turn)."""
    flags: np.ndarray | None = None
    """Records valid at ``as_of``."""
    cold_penalty: float = 0.0
    """What a cold record loses of its fused score (``recall.cold_penalty``; 0 with ``include_cold``)."""

    def returns_nothing(self, cat: Catalog) -> bool:
        """True when no turn of the namespace can be returned (the search can stop here)."""
        if self.allowed is None and self.flags is None:
            return False
        returnable = (np.ones(len(cat), bool) if self.allowed is None else self.allowed) & \
            (np.ones(len(cat), bool) if self.flags is None else self.flags)
        return not (returnable & (cat.kind == KIND_CODES["turn"])).any()

    def visible(self, cat: Catalog) -> np.ndarray | None:
        """Records whose text a search may show anywhere — items, the context's windows, the trace (None: all).

        Both masks at once: what the filters exclude and what ``as_of`` (or, without it, ``update``) hid is
        never shown, not even as a neighbour of a found turn.
        """
        if self.allowed is None and self.flags is None:
            return None
        if self.allowed is None:
            assert self.flags is not None
            return self.flags
        return self.allowed if self.flags is None else self.allowed & self.flags


def flag_mask(cat: Catalog, as_of: float | None) -> np.ndarray | None:
    """Records a search may return given ``as_of`` (None: all of them). The cold tier masks nothing; a version
    replaced by ``MemoryEngine.update`` is returned only by an ``as_of`` search at which it was valid."""
    if as_of is None:
        return ~cat.replaced if cat.replaced.any() else None
    return (np.isnan(cat.ts) | (cat.ts <= as_of)) & (np.isnan(cat.valid_to) | (cat.valid_to > as_of))


def scope_of(store: TruthStore, cat: Catalog, ns_id: int, request: SearchRequest, *,
             cold_penalty: float = 0.0) -> Scope:
    """The scope of ``request`` in namespace ``ns_id`` (the filter is evaluated by the store); ``cold_penalty``
    is ``recall.cold_penalty`` (ignored with ``include_cold``)."""
    allowed_mask = None
    if not request.record_filter.empty:
        allowed_rids = store.rids_matching(ns_id, request.record_filter)
        allowed_mask = np.zeros(len(cat), bool)
        pos = cat.pos_of(np.fromiter(allowed_rids, np.int64, len(allowed_rids)))
        allowed_mask[pos[pos >= 0]] = True
        # a window counts when its own turn passes the filter
        allowed_mask |= (cat.kind == KIND_CODES["window"]) & (cat.anchor >= 0) & allowed_mask[cat.anchor]
    return Scope(allowed=allowed_mask, flags=flag_mask(cat, request.as_of),
                 cold_penalty=0.0 if request.include_cold else cold_penalty)
