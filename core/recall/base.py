"""The Recaller protocol and what a recall call receives."""

from __future__ import annotations

import threading
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import numpy as np

if TYPE_CHECKING:
    from ..embed import Embedder
    from ..models import EvidenceRoute
    from ..store.evidence import EvidenceIndex
    from ..store.graph import EntityGraph
    from ..store.interface import TruthStore
    from ..store.keyword import KeywordIndex
    from ..store.timeindex import TimeIndex
    from ..store.vector import VectorIndex
    from .sparse import SparseIndex

__all__ = ["Hits", "RecallContext", "RecallRequest", "Recaller"]


@dataclass(frozen=True)
class Hits:
    """What a channel found: parallel arrays of rids and scores (higher is better).

    ``fill`` is the score of every record *not* listed when the channel scored the whole namespace (0.0 for
    BM25, whose unlisted documents share no term with the query); ``None`` when the channel returned only its
    best candidates, so an unlisted record's score is unknown (below the lowest listed one).
    """

    rids: np.ndarray
    scores: np.ndarray
    fill: float | None = None

    @classmethod
    def empty(cls) -> Hits:
        """Nothing found: no rids, and every record of the namespace scores 0."""
        return cls(np.zeros(0, np.int64), np.zeros(0, np.float64), fill=0.0)

    @classmethod
    def from_pairs(cls, pairs: Sequence[tuple[int, float]]) -> Hits:
        return cls(np.fromiter((p[0] for p in pairs), np.int64, len(pairs)),
                   np.fromiter((p[1] for p in pairs), np.float64, len(pairs)))

    def ranked(self) -> list[tuple[int, float]]:
        """``(rid, score)`` best first, ties by rid."""
        order = np.lexsort((self.rids, -self.scores))
        return [(int(self.rids[i]), float(self.scores[i])) for i in order]


@dataclass(frozen=True)
class RecallContext:
    """The engine's shared resources a channel may read."""

    store: TruthStore
    keyword_index: KeywordIndex
    vector_index: VectorIndex | None
    embedder: Embedder | None
    graph_index: EntityGraph | None = None
    time_index: TimeIndex | None = None
    evidence_index: EvidenceIndex | None = None
    sparse_index: SparseIndex | None = None
    query_vectors: dict[tuple[str, str], object] = field(default_factory=dict)
    """Query embeddings of recent searches (several vector channels of one search embed the query once)."""
    lock: threading.Lock = field(default_factory=threading.Lock)


@dataclass(frozen=True)
class RecallRequest:
    """One channel call: the query, the namespace partition, how many candidates, and an optional rid filter."""

    query: str
    ns_id: int
    limit: int
    allowed: Collection[int] | None = None
    route: EvidenceRoute | None = None
    """The plan's route this call serves (its time filter, speakers); channels that need it read it here."""


@runtime_checkable
class Recaller(Protocol):
    """A recall channel: returns :class:`Hits` (or ``(rid, score)`` pairs), all inside ``request.ns_id``.

    Raise on failure — the runner reports it as a ChannelError; never return nothing to hide an error.
    """

    channel: str

    def recall(self, request: RecallRequest) -> Hits | list[tuple[int, float]]: ...
