"""Embedding adapters both ways: a memory-ext embedder as a LlamaIndex ``BaseEmbedding``, and back.

- :class:`MemoryExtEmbedding` — our embedder (default: multilingual e5-small) as a LlamaIndex ``BaseEmbedding``,
  so a user's own vector index can share the model the memory store uses.
- :class:`LlamaIndexEmbedder` — any LlamaIndex ``BaseEmbedding`` as a memory-ext
  :class:`~memory_ext.embed.Embedder`: ``MemoryEngine.open(path, embedder=LlamaIndexEmbedder(model))``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import numpy as np

from ._deps import require

require("llama_index.core", "llamaindex_memory_ext embeddings")

from llama_index.core.base.embeddings.base import BaseEmbedding  # noqa: E402
from llama_index.core.bridge.pydantic import PrivateAttr  # noqa: E402

from memory_ext import MemoryEngine  # noqa: E402
from memory_ext.embed import Embedder, resolve_embedder  # noqa: E402
from memory_ext.errors import ConfigError  # noqa: E402

__all__ = ["LlamaIndexEmbedder", "MemoryExtEmbedding"]


class MemoryExtEmbedding(BaseEmbedding):
    """A memory-ext embedder as a LlamaIndex ``BaseEmbedding`` (``model_name`` is the embedder's id).

    ``embedder`` is an :class:`~memory_ext.embed.Embedder` or a registered name (``"e5"``, the default, or
    ``"hashing"``); :meth:`from_engine` shares an open engine's embedder. Queries use the embedder's query side
    (e5's ``query:`` prefix), texts its passage side. Async methods run in a worker thread.

    >>> from llama_index.core import Settings
    >>> from llamaindex_memory_ext import MemoryExtEmbedding
    >>> emb = MemoryExtEmbedding("hashing")
    >>> emb.model_name, len(emb.get_query_embedding("where does Lena live?"))
    ('hashing-v1:256', 256)
    >>> Settings.embed_model = emb      # a VectorStoreIndex built now shares it  # doctest: +SKIP
    """

    _embedder: Embedder = PrivateAttr()

    def __init__(self, embedder: Embedder | str | None = None, **kwargs: Any) -> None:
        resolved, _warning = resolve_embedder(embedder)  # the e5 fallback warns (warnings.warn) itself
        kwargs.setdefault("model_name", resolved.id)
        super().__init__(**kwargs)
        self._embedder = resolved

    @classmethod
    def from_engine(cls, engine: MemoryEngine, **kwargs: Any) -> MemoryExtEmbedding:
        """The embedder an open engine uses (so an index built with it matches the memory store)."""
        if engine.embedder is None:
            raise ConfigError("globals.vector_enabled", False,
                              "this engine has no embedder; open it with vector_enabled: true")
        return cls(engine.embedder, **kwargs)

    @classmethod
    def class_name(cls) -> str:
        return "MemoryExtEmbedding"

    @property
    def embedder(self) -> Embedder:
        """The wrapped memory-ext embedder."""
        return self._embedder

    def _get_query_embedding(self, query: str) -> list[float]:
        return np.asarray(self._embedder.embed_query(query), dtype=np.float32).tolist()

    def _get_text_embedding(self, text: str) -> list[float]:
        return self._get_text_embeddings([text])[0]

    def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        return np.asarray(self._embedder.embed_documents(texts), dtype=np.float32).tolist()

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return await asyncio.to_thread(self._get_query_embedding, query)

    async def _aget_text_embedding(self, text: str) -> list[float]:
        return await asyncio.to_thread(self._get_text_embedding, text)

    async def _aget_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        return await asyncio.to_thread(self._get_text_embeddings, texts)


class LlamaIndexEmbedder:
    """Any LlamaIndex ``BaseEmbedding`` as a memory-ext :class:`~memory_ext.embed.Embedder`.

    ``dim`` is measured by embedding one probe text unless given. ``id`` (default
    ``llamaindex:<class>:<model_name>:<dim>``) names the model in the store: the engine refuses to mix vectors
    of different ids, so give an explicit ``id`` if the model's name does not pin its configuration.

    >>> import tempfile
    >>> from memory_ext import MemoryEngine
    >>> from llamaindex_memory_ext import LlamaIndexEmbedder, MemoryExtEmbedding
    >>> embedder = LlamaIndexEmbedder(MemoryExtEmbedding("hashing"))
    >>> embedder.id, embedder.dim, embedder.embed_documents(["a", "b"]).shape
    ('llamaindex:MemoryExtEmbedding:hashing-v1:256:256', 256, (2, 256))
    >>> engine = MemoryEngine.open(tempfile.mkdtemp(), embedder=embedder)
    >>> engine.close()
    """

    def __init__(self, embed_model: BaseEmbedding, *, dim: int | None = None, id: str | None = None) -> None:
        if not isinstance(embed_model, BaseEmbedding):
            raise ConfigError("embed_model", embed_model, "pass a llama_index BaseEmbedding instance")
        self.embed_model = embed_model
        self.dim = dim if dim is not None else len(embed_model.get_text_embedding("dimension probe"))
        self.id = id or f"llamaindex:{type(embed_model).__name__}:{embed_model.model_name}:{self.dim}"

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.asarray(self.embed_model.get_text_embedding_batch(list(texts)), dtype=np.float32)

    def embed_query(self, text: str) -> np.ndarray:
        return np.asarray(self.embed_model.get_query_embedding(text), dtype=np.float32)

    def __repr__(self) -> str:
        return f"LlamaIndexEmbedder(id={self.id!r}, dim={self.dim})"
