"""The vector channel: the query embedding against the namespace's record vectors."""

from __future__ import annotations

import threading
from collections import OrderedDict
from concurrent.futures import Future

import numpy as np

from ..embed import check_vectors
from ..registry import recallers
from .base import Hits, RecallContext, RecallRequest

__all__ = ["VectorRecaller"]


@recallers.register("vector")
class VectorRecaller:
    """Cosine similarity between the query and records (exact with numpy, or Chroma)."""

    channel = "vector"

    CACHE_SIZE = 256

    def __init__(self, ctx: RecallContext) -> None:
        if ctx.vector_index is None or ctx.embedder is None:
            raise ValueError("the vector channel needs a vector index and an embedder")
        self.ctx = ctx
        self._lock = threading.Lock()
        self._cache: OrderedDict[str, Future[np.ndarray]] = OrderedDict()

    def query_vector(self, text: str) -> np.ndarray:
        """The query's embedding, computed once even when several routes of one search ask at the same time."""
        with self._lock:
            fut = self._cache.get(text)
            owner = fut is None
            if fut is None:
                fut = self._cache[text] = Future()
                while len(self._cache) > self.CACHE_SIZE:
                    self._cache.popitem(last=False)
            else:
                self._cache.move_to_end(text)
        if owner:
            embedder = self.ctx.embedder
            assert embedder is not None
            try:
                fut.set_result(np.asarray(check_vectors(embedder, embedder.embed_query(text), 1)[0]))
            except BaseException as exc:
                with self._lock:
                    self._cache.pop(text, None)  # a failure is not remembered
                fut.set_exception(exc)
        return fut.result()

    def recall(self, request: RecallRequest) -> Hits:
        """Every record's similarity when the index can score them all (numpy), else the best candidates."""
        index = self.ctx.vector_index
        assert index is not None
        query = self.query_vector(request.query)
        score_all = getattr(index, "score_all", None)
        if score_all is None:
            return Hits.from_pairs(index.search(self.ctx.store.reader(), request.ns_id, query, request.limit,
                                                allowed=request.allowed))
        rids, scores = score_all(self.ctx.store.reader(), request.ns_id, query)
        if request.allowed is not None:
            keep = np.isin(rids, np.fromiter(request.allowed, np.int64, len(request.allowed)))
            rids, scores = rids[keep], scores[keep]
        return Hits(rids, scores.astype(np.float64))
