"""The keyword channel: BM25 over the mixed Chinese/English tokenizer."""

from __future__ import annotations

import numpy as np

from .base import Hits, RecallContext, RecallRequest

__all__ = ["KeywordRecaller"]


class KeywordRecaller:
    """BM25 (Okapi) over records, per namespace, from the incremental keyword index."""

    channel = "keyword"

    def __init__(self, ctx: RecallContext) -> None:
        self.ctx = ctx

    def recall(self, request: RecallRequest) -> Hits:
        """Every record sharing a term with the query (the rest score 0), restricted to ``allowed``."""
        rids, scores = self.ctx.keyword_index.score_all(self.ctx.store.reader(), request.ns_id, request.query)
        if request.allowed is not None:
            keep = np.isin(rids, np.fromiter(request.allowed, np.int64, len(request.allowed)))
            rids, scores = rids[keep], scores[keep]
        return Hits(rids, scores, fill=0.0)
