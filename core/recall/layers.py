"""Layer channels: keyword and vector search over the L0 (title) and L1 (abstract) layers of long records, and
the ``turns`` channel over the raw turns alone.

Each scores only the records of its kind: the read pipeline passes that kind's record ids as
``request.allowed`` (the record kind of every channel is in :data:`memory_ext.recall.channels.CHANNELS`).
``globals.layers_index_enabled`` switches the layer channels on; a namespace without layers is reported in
``SearchResult.warnings`` instead of silently contributing nothing.
"""

from __future__ import annotations

from typing import ClassVar

from .base import Hits, RecallContext, RecallRequest
from .keyword import KeywordRecaller
from .vector import VectorRecaller

__all__ = ["KeywordL0Recaller", "KeywordL1Recaller", "KeywordLayerRecaller", "TurnsRecaller", "VectorL0Recaller",
           "VectorL1Recaller", "VectorLayerRecaller"]


class _KindRestricted:
    """A channel over the records of one kind (``layer``): it refuses to run without their ids."""

    channel: ClassVar[str]
    layer: ClassVar[str]
    _base: KeywordRecaller | VectorRecaller

    def recall(self, request: RecallRequest) -> Hits:
        if request.allowed is None:
            raise ValueError(f"the {self.channel} channel needs the ids of the {self.layer} records (allowed)")
        return self._base.recall(request)


class KeywordLayerRecaller(_KindRestricted):
    """BM25 over one layer's records (``keyword_l0``, ``keyword_l1``)."""

    def __init__(self, ctx: RecallContext) -> None:
        self._base = KeywordRecaller(ctx)


class VectorLayerRecaller(_KindRestricted):
    """Cosine similarity over one layer's records (``vector_l0``, ``vector_l1``)."""

    def __init__(self, ctx: RecallContext) -> None:
        self._base = VectorRecaller(ctx)


class KeywordL0Recaller(KeywordLayerRecaller):
    """The ``keyword_l0`` channel: BM25 over the L0 titles."""

    channel, layer = "keyword_l0", "l0"


class KeywordL1Recaller(KeywordLayerRecaller):
    """The ``keyword_l1`` channel: BM25 over the L1 abstracts."""

    channel, layer = "keyword_l1", "l1"


class VectorL0Recaller(VectorLayerRecaller):
    """The ``vector_l0`` channel: cosine similarity over the L0 titles."""

    channel, layer = "vector_l0", "l0"


class VectorL1Recaller(VectorLayerRecaller):
    """The ``vector_l1`` channel: cosine similarity over the L1 abstracts."""

    channel, layer = "vector_l1", "l1"


class TurnsRecaller(KeywordLayerRecaller):
    """The ``turns`` channel: BM25 over the raw turns only (no windows, no derived records), so a question that
    quotes what was said is matched against exactly that. The pipeline passes the turn records as ``allowed``."""

    channel, layer = "turns", "turn"
