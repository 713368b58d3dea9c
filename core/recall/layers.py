"""Layer channels: keyword and vector search over the L0 (title) and L1 (abstract) layers of long records.

Each is a registered Recaller (``keyword_l0``, ``keyword_l1``, ``vector_l0``, ``vector_l1``) that scores only the
records of its layer: the engine passes the layer's record ids as ``request.allowed``. The engine switches them on
with ``globals.layers_index_enabled``; a namespace without layers is reported in ``SearchResult.warnings``
instead of silently contributing nothing.
"""

from __future__ import annotations

from ..registry import recallers
from .base import Hits, RecallContext, RecallRequest
from .keyword import KeywordRecaller
from .vector import VectorRecaller

__all__ = ["KIND_CHANNELS", "LAYER_CHANNELS", "KeywordLayerRecaller", "TurnsRecaller", "VectorLayerRecaller"]

LAYER_CHANNELS = {"keyword_l0": "l0", "keyword_l1": "l1", "vector_l0": "l0", "vector_l1": "l1"}
"""Layer channel -> the record kind it searches."""
KIND_CHANNELS = {**LAYER_CHANNELS, "turns": "turn"}
"""Every channel restricted to one record kind -> that kind."""


class _Layer:
    channel: str
    layer: str
    _base: KeywordRecaller | VectorRecaller

    def recall(self, request: RecallRequest) -> Hits:
        if request.allowed is None:
            raise ValueError(f"the {self.channel} channel needs the ids of the {self.layer} records (allowed)")
        return self._base.recall(request)


class KeywordLayerRecaller(_Layer):
    """BM25 over one layer's records."""

    def __init__(self, ctx: RecallContext, *, channel: str) -> None:
        self.channel, self.layer = channel, LAYER_CHANNELS[channel]
        self._base = KeywordRecaller(ctx)


class VectorLayerRecaller(_Layer):
    """Cosine similarity over one layer's records."""

    def __init__(self, ctx: RecallContext, *, channel: str) -> None:
        self.channel, self.layer = channel, LAYER_CHANNELS[channel]
        self._base = VectorRecaller(ctx)


def _factory(cls: type[_Layer], channel: str) -> type:
    made = type(f"{cls.__name__}_{channel}", (cls,), {
        "channel": channel, "__init__": lambda self, ctx: cls.__init__(self, ctx, channel=channel),
        "__doc__": f"The {channel} channel."})
    return made


for _name in LAYER_CHANNELS:
    recallers.register(_name)(_factory(KeywordLayerRecaller if _name.startswith("keyword") else VectorLayerRecaller,
                                       _name))


@recallers.register("turns")
class TurnsRecaller(_Layer):
    """The ``turns`` channel: BM25 over the raw turns only (no windows, no derived records), so a question that
    quotes what was said is matched against exactly that. The engine passes the turn records as ``allowed``."""

    channel = "turns"
    layer = "turn"

    def __init__(self, ctx: RecallContext) -> None:
        self._base = KeywordRecaller(ctx)
