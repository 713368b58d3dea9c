"""The Recaller protocol and what a recall call receives."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from ..embed import Embedder
    from ..store.keyword import KeywordIndex
    from ..store.sqlite import TruthStore
    from ..store.vector import VectorIndex

__all__ = ["RecallContext", "RecallRequest", "Recaller"]


@dataclass(frozen=True)
class RecallContext:
    """The engine's shared resources a channel may read."""

    store: TruthStore
    keyword_index: KeywordIndex
    vector_index: VectorIndex | None
    embedder: Embedder | None


@dataclass(frozen=True)
class RecallRequest:
    """One channel call: the query, the namespace partition, how many candidates, and an optional rid filter."""

    query: str
    ns_id: int
    limit: int
    allowed: Collection[int] | None = None


@runtime_checkable
class Recaller(Protocol):
    """A recall channel: returns ``(rid, score)`` pairs, best first, all inside ``request.ns_id``.

    Raise on failure — the runner reports it as a ChannelError; never return ``[]`` to hide an error.
    """

    channel: str

    def recall(self, request: RecallRequest) -> list[tuple[int, float]]: ...
