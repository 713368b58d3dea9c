"""The graph channel: records reached from the entities a query names, through the entity co-occurrence graph.

Scoring (all inside ``request.ns_id``; ``N`` = records of the namespace that name an entity, ``df(e)`` = records
naming entity ``e``):

* **specificity** ``spec(e) = log(1 + N / df(e)) / log(1 + N)``, in (0, 1]: 1 for an entity named once, small
  for a hub such as the user's own name (an IDF, normalised so that scores of different queries compare);
* **seeds** ``S`` = the entities the query names (:meth:`EntityGraph.entities_in`); no seed -> no hit;
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
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from ..registry import recallers
from .base import Hits, RecallRequest

if TYPE_CHECKING:
    import sqlite3

    from ..store.graph import EntityGraph

__all__ = ["GraphRecaller"]


def _empty() -> Hits:
    return Hits(np.zeros(0, np.int64), np.zeros(0, np.float64), fill=0.0)


@recallers.register("graph")
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

    def recall(self, request: RecallRequest) -> Hits:
        """The records connected to the query's entities, scored by hop distance and edge weight."""
        conn = self.ctx.store.reader()
        ns_id = request.ns_id
        if request.allowed is not None and len(request.allowed) == 0:
            return _empty()
        seeds = [eid for eid, _ in self.graph.entities_in(conn, ns_id, request.query)]
        if not seeds:
            return _empty()
        n_docs = max(self.graph.record_count(conn, ns_id), 1)
        now = self.graph.reference_time(conn, ns_id)
        spec_of: dict[int, float] = {}

        def spec(eids: Iterable[int]) -> None:
            missing = [e for e in eids if e not in spec_of]
            for eid, (_, df) in self.graph.entity_info(conn, ns_id, missing).items():
                spec_of[eid] = math.log1p(n_docs / max(df, 1)) / math.log1p(n_docs)

        spec(seeds)
        seeds = [s for s in seeds if s in spec_of]
        act: dict[int, float] = {s: self.seed_weight * spec_of[s] for s in seeds}
        scores: dict[int, float] = defaultdict(float)
        allowed = None if request.allowed is None else {int(r) for r in request.allowed}

        def credit(activation: Mapping[int, float], *, weigh_by_spec: bool) -> None:
            spec(activation)
            for eid, rows in self.graph.postings(conn, ns_id, list(activation), limit=self.max_postings).items():
                gain = activation[eid] * (spec_of.get(eid, 0.0) if weigh_by_spec else 1.0)
                for rid, _ in rows:
                    if allowed is None or rid in allowed:
                        scores[rid] += gain

        credit(act, weigh_by_spec=False)
        hop1 = self._spread(conn, ns_id, act, exclude=set(act), now=now)
        credit(hop1, weigh_by_spec=True)
        if len(scores) < request.limit and hop1:
            sources = dict(sorted(hop1.items(), key=lambda kv: (-kv[1], kv[0]))[: self.max_hop2_sources])
            hop2 = self._spread(conn, ns_id, sources, exclude=set(act) | set(hop1), now=now)
            credit(hop2, weigh_by_spec=True)
        if not scores:
            return _empty()
        rids = np.fromiter(scores.keys(), np.int64, len(scores))
        values = np.fromiter(scores.values(), np.float64, len(scores))
        return Hits(rids, values, fill=0.0)

    def _spread(
        self,
        conn: sqlite3.Connection,
        ns_id: int,
        source: Mapping[int, float],
        *,
        exclude: set[int],
        now: float | None,
    ) -> dict[int, float]:
        """One hop: ``act(n) = decay * sum_s act(s) * w(s, n) / max_m w(s, m)`` over entities not in ``exclude``."""
        out: dict[int, float] = defaultdict(float)
        neighbours = self.graph.neighbours(conn, ns_id, list(source), now=now, limit=self.max_neighbours)
        for eid, edges in neighbours.items():
            if not edges or edges[0][1] <= 0:
                continue
            top = edges[0][1]
            for other, weight in edges:
                if other not in exclude:
                    out[other] += self.hop_decay * source[eid] * weight / top
        return dict(out)
