"""The keyword channel: BM25 over the mixed Chinese/English tokenizer."""

from __future__ import annotations

from ..registry import recallers
from .base import RecallContext, RecallRequest

__all__ = ["KeywordRecaller"]


@recallers.register("keyword")
class KeywordRecaller:
    """BM25 (Okapi) over records, per namespace, from the incremental keyword index."""

    channel = "keyword"

    def __init__(self, ctx: RecallContext) -> None:
        self.ctx = ctx

    def recall(self, request: RecallRequest) -> list[tuple[int, float]]:
        return self.ctx.keyword_index.search(self.ctx.store.reader(), request.ns_id, request.query,
                                             request.limit, allowed=request.allowed)
