"""The graph channel: records reached from the entities a query names, through the entity co-occurrence graph.

Scoring (all inside ``request.ns_id``; ``N`` = records of the namespace that name an entity, ``df(e)`` = records
naming entity ``e``):

* **specificity** ``spec(e) = log(1 + N / df(e)) / log(1 + N)``, in (0, 1]: 1 for an entity named once, small
  for a hub such as the user's own name (an IDF, normalised so that scores of different queries compare);
* **hubs**: an entity named by more than ``max_seed_share`` of the ``N`` records, and by at least
  :data:`HUB_MIN_RECORDS` (a small graph has no hubs), (in a conversation, the
  speakers themselves: each is named in most windows) is neither a seed nor reached through an edge. A hub
  reaches nearly every record, and once the fusion standardises the channel's scores that near-constant signal
  counts as much as a real match; who is speaking is the planner's speaker evidence, not the graph's;
* **seeds** ``S`` = the entities the query names (:meth:`EntityGraph.entities_in`) that are not hubs; no seed ->
  no hit;
* **hop 0**: each seed has activation ``act(s) = w0 * spec(s)`` (``w0`` = 1);
* **hop 1**: a neighbour ``n`` of the seeds (not itself a seed) gets
  ``act(n) = decay * sum_s act(s) * w(s, n) / max_m w(s, m)``, where ``w`` is the edge weight
  (co-occurrence count x recency, :meth:`EntityGraph.neighbours`), normalised by the seed's heaviest edge;
  only each seed's ``max_neighbours`` heaviest edges are followed;
* **hop 2** (only when hops 0 and 1 reached fewer than ``request.limit`` allowed records): the same step once
  more from the hop-1 entities (``decay ** 2`` overall), to entities not yet reached;
* a **record** scores ``sum over the reached entities e it names of act(e) * spec(e)`` for hop-1/2 entities and
  ``act(s)`` for seeds.

So a record naming a seed outranks one reached through a neighbour (``act(n) <= decay * act(s)``), a neighbour
named together with the seed often and lately outranks a rare or old one, and a rare entity outranks a hub.
Every record reached is returned (``fill=0.0``: a record not listed is not connected to the query's entities),
restricted to ``request.allowed`` when given.

All of it runs in memory on the namespace's :class:`~memory_ext.store.graph.GraphSnapshot` (no SQL beyond the
``graph_stats`` check when nothing changed), vectorised with numpy; each record's score is summed in the same
order as the straightforward loop (seeds, then hop-1, then hop-2 entities in order of first reach).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from .base import Hits, RecallRequest

if TYPE_CHECKING:
    from ..store.graph import EntityGraph, GraphSnapshot

__all__ = ["HUB_MIN_RECORDS", "GraphRecaller"]

HUB_MIN_RECORDS = 10
"""An entity named by fewer records is never a hub, whatever its share of a small graph."""


class GraphRecaller:
    """Entity-graph recall: seeds from the query, then their records and their neighbours' (see module doc).

    ``ctx`` is the engine's :class:`~memory_ext.recall.base.RecallContext`; it must carry a ``graph_index``
    (an :class:`~memory_ext.store.graph.EntityGraph`) and a ``store``.
    """

    channel = "graph"

    def __init__(
        self,
        ctx: Any,
        *,
        seed_weight: float = 1.0,
        hop_decay: float = 0.5,
        max_neighbours: int = 32,
        max_postings: int = 1000,
        max_hop2_sources: int = 16,
        max_seed_share: float = 0.2,
    ) -> None:
        graph = getattr(ctx, "graph_index", None)
        if graph is None:
            raise ValueError("the graph channel needs an entity graph (RecallContext.graph_index)")
        if not 0.0 < hop_decay < 1.0:
            raise ValueError(f"hop_decay must be between 0 and 1 (exclusive), got {hop_decay!r}")
        self.ctx = ctx
        self.graph: EntityGraph = graph
        self.seed_weight = float(seed_weight)
        self.hop_decay = float(hop_decay)
        self.max_neighbours = int(max_neighbours)
        self.max_postings = int(max_postings)
        self.max_hop2_sources = int(max_hop2_sources)
        if not 0.0 < max_seed_share <= 1.0:
            raise ValueError(f"max_seed_share must be in (0, 1], got {max_seed_share!r}")
        self.max_seed_share = float(max_seed_share)

    def recall(self, request: RecallRequest) -> Hits:
        """The records connected to the query's entities, scored by hop distance and edge weight.

        Pure in-memory work on the namespace's :class:`~memory_ext.store.graph.GraphSnapshot` (synced with one
        SQL statement when nothing changed), vectorised per entity.
        """
        if request.allowed is not None and len(request.allowed) == 0:
            return Hits.empty()
        conn = self.ctx.store.reader()
        snap = self.graph.snapshot(conn, request.ns_id)
        if snap is None or snap.size == 0:
            return Hits.empty()
        index = snap.index
        seeds = [i for i in (index.get(e) for e in self.graph.match(conn, request.ns_id, request.query,
                                                                     stats=snap.stats))
                 if i is not None]
        hub = (snap.df > self.max_seed_share * max(snap.n_records, 1)) & (snap.df >= HUB_MIN_RECORDS)
        seeds = [i for i in seeds if not hub[i]]
        if not seeds:
            return Hits.empty()
        n_rec = len(snap.rids)
        allowed = None
        if request.allowed is not None:
            wanted = np.fromiter((int(r) for r in request.allowed), np.int64, len(request.allowed))
            pos = np.minimum(np.searchsorted(snap.rids, wanted), max(n_rec - 1, 0))
            allowed = np.zeros(n_rec, bool)
            if n_rec:
                allowed[pos[snap.rids[pos] == wanted]] = True

        rec_parts: list[np.ndarray] = []  # record idxs credited, in order: each record's sum runs in this order
        gain_parts: list[np.ndarray] = []
        seen = np.zeros(n_rec, bool)

        def credit(idxs: np.ndarray, gains: np.ndarray) -> None:
            recs, counts = snap.postings_many(idxs, self.max_postings)
            per_posting = np.repeat(gains, counts)
            if allowed is not None:
                keep = allowed[recs]
                recs, per_posting = recs[keep], per_posting[keep]
            rec_parts.append(recs)
            gain_parts.append(per_posting)
            seen[recs] = True

        seed_idx = np.array(seeds, np.int64)
        seed_act = self.seed_weight * snap.specificity(seed_idx)
        credit(seed_idx, seed_act)
        reached = hub.copy()  # hubs are never reached
        reached[seed_idx] = True
        hop1_idx, hop1_act = self._spread(snap, seed_idx, seed_act, reached)
        credit(hop1_idx, hop1_act * snap.specificity(hop1_idx))
        if len(hop1_idx) and np.count_nonzero(seen) < request.limit:
            top = np.lexsort((hop1_idx, -hop1_act))[: self.max_hop2_sources]  # by activation, ties by eid
            reached[hop1_idx] = True
            hop2_idx, hop2_act = self._spread(snap, hop1_idx[top], hop1_act[top], reached)
            credit(hop2_idx, hop2_act * snap.specificity(hop2_idx))
        hit = np.flatnonzero(seen)
        if not len(hit):
            return Hits.empty()
        scores = np.bincount(np.concatenate(rec_parts), weights=np.concatenate(gain_parts), minlength=n_rec)
        return Hits(snap.rids[hit].astype(np.int64, copy=False), scores[hit].astype(np.float64, copy=False),
                    fill=0.0)

    def _spread(
        self, snap: GraphSnapshot, source: np.ndarray, act: np.ndarray, exclude: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """One hop: ``act(n) = decay * sum_s act(s) * w(s, n) / max_m w(s, m)`` over entities not ``exclude``d
        (a mask over entity idxs); returned in order of first reach, each sum in source order."""
        others: list[np.ndarray] = []
        gains: list[np.ndarray] = []
        for i, a in zip(source.tolist(), act.tolist(), strict=True):
            dst, weight = snap.neighbours(i, self.max_neighbours)
            if not len(weight) or weight[0] <= 0:
                continue
            keep = ~exclude[dst]
            others.append(dst[keep])
            gains.append(self.hop_decay * a * weight[keep] / weight[0])
        if not others:
            return np.zeros(0, np.int64), np.zeros(0, np.float64)
        reached, first, inverse = np.unique(np.concatenate(others), return_index=True, return_inverse=True)
        total = np.bincount(inverse, weights=np.concatenate(gains), minlength=len(reached))
        order = np.argsort(first, kind="stable")
        return reached[order], total[order]
