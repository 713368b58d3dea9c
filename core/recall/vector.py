"""The vector channel: the query embedding against the namespace's record vectors."""

from __future__ import annotations

import numpy as np

from ..embed import check_vectors
from ..registry import recallers
from .base import RecallContext, RecallRequest

__all__ = ["VectorRecaller"]


@recallers.register("vector")
class VectorRecaller:
    """Cosine similarity between the query and records (exact with numpy, or Chroma)."""

    channel = "vector"

    def __init__(self, ctx: RecallContext) -> None:
        if ctx.vector_index is None or ctx.embedder is None:
            raise ValueError("the vector channel needs a vector index and an embedder")
        self.ctx = ctx

    def recall(self, request: RecallRequest) -> list[tuple[int, float]]:
        embedder = self.ctx.embedder
        assert embedder is not None and self.ctx.vector_index is not None
        query = check_vectors(embedder, embedder.embed_query(request.query), 1)[0]
        hits = self.ctx.vector_index.search(self.ctx.store.reader(), request.ns_id, np.asarray(query),
                                            request.limit, allowed=request.allowed)
        return [(rid, score) for rid, score in hits if score > 0]  # orthogonal or opposite: not evidence
