"""The vector channel: the query embedding against the namespace's record vectors."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import numpy as np

from ..embed import Embedder, check_vectors
from .base import Hits, RecallContext, RecallRequest

__all__ = ["VectorRecaller", "cached_encoding", "dense_key", "has_encoding", "put_encoding"]


QUERY_CACHE_SIZE = 64


class _Slot:
    """One cached query embedding; its own lock lets different texts be embedded in parallel."""

    __slots__ = ("lock", "vector")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.vector: Any = None


def _slot(ctx: RecallContext, key: tuple[str, ...]) -> _Slot:
    """The cache entry of ``key`` (made when missing), moved to the most recent end of the LRU."""
    with ctx.lock:
        found = ctx.query_vectors.pop(key, None)  # type: ignore[arg-type]
        slot = found if isinstance(found, _Slot) else _Slot()
        ctx.query_vectors[key] = slot  # type: ignore[index]
        while len(ctx.query_vectors) > QUERY_CACHE_SIZE:
            ctx.query_vectors.pop(next(iter(ctx.query_vectors)))
    return slot


def cached_encoding(ctx: RecallContext, key: tuple[str, ...], compute: Callable[[], Any]) -> Any:
    """``compute()`` once per ``key`` for all the channel calls of a search and the next few searches (a small
    LRU in ``ctx``). Different keys are computed in parallel: the cache lock covers bookkeeping only, and each
    entry has its own lock, so a second call for the same key waits for the first instead of encoding again."""
    slot = _slot(ctx, key)
    with slot.lock:
        if slot.vector is None:
            slot.vector = compute()
        return slot.vector


def has_encoding(ctx: RecallContext, key: tuple[str, ...]) -> bool:
    """Whether :func:`cached_encoding` holds a value for ``key`` (no waiting, no LRU update)."""
    with ctx.lock:
        found = ctx.query_vectors.get(key)  # type: ignore[arg-type]
    return isinstance(found, _Slot) and found.vector is not None


def put_encoding(ctx: RecallContext, key: tuple[str, ...], value: Any) -> None:
    """Give :func:`cached_encoding` the value of ``key`` made elsewhere (a batch of a search's encodings); a value
    already there is kept."""
    slot = _slot(ctx, key)
    with slot.lock:
        if slot.vector is None:
            slot.vector = value


def dense_key(embedder: Embedder, text: str) -> tuple[str, str]:
    """The cache key of ``text``'s dense query vector (what the vector channels read)."""
    return (embedder.id, text)


def _query_vector(ctx: RecallContext, text: str) -> np.ndarray:
    """The query's embedding, computed once for all the vector channels of a search."""
    embedder = ctx.embedder
    assert embedder is not None
    return cached_encoding(ctx, dense_key(embedder, text), lambda: np.asarray(
        check_vectors(embedder, embedder.embed_query(text), 1)[0]))


class VectorRecaller:
    """Cosine similarity between the query and records (exact with numpy, or Chroma)."""

    channel = "vector"

    def __init__(self, ctx: RecallContext) -> None:
        if ctx.vector_index is None or ctx.embedder is None:
            raise ValueError("the vector channel needs a vector index and an embedder")
        self.ctx = ctx

    def recall(self, request: RecallRequest) -> Hits:
        """Every record's similarity when the index can score them all (numpy), else the best candidates."""
        embedder, index = self.ctx.embedder, self.ctx.vector_index
        assert embedder is not None and index is not None
        query = _query_vector(self.ctx, request.query)
        score_all = getattr(index, "score_all", None)
        scored = None if score_all is None else score_all(self.ctx.store.reader(), request.ns_id, query)
        if scored is None:  # the index cannot score every record (Chroma; pgvector above its exact size)
            return Hits.from_pairs(index.search(self.ctx.store.reader(), request.ns_id, query, request.limit,
                                                allowed=request.allowed))
        rids, scores = scored
        if request.allowed is not None:
            keep = np.isin(rids, np.fromiter(request.allowed, np.int64, len(request.allowed)))
            rids, scores = rids[keep], scores[keep]
        return Hits(rids, scores.astype(np.float64))
