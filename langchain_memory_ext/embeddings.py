"""Use any LangChain ``Embeddings`` as a memory-ext ``Embedder``."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from langchain_core.embeddings import Embeddings

from memory_ext.errors import EmbedderError

__all__ = ["LangChainEmbedder"]


class LangChainEmbedder:
    """A LangChain ``Embeddings`` model as a :class:`memory_ext.Embedder`.

    ``id`` names the model *and* its configuration — a store refuses vectors from an embedder with another id,
    so give a stable one (default: ``"langchain:<class>:<model>"`` from the ``model``/``model_name`` attribute,
    if any). ``dim`` is measured with one query embedding when not given.

    >>> import tempfile
    >>> from langchain_core.embeddings import DeterministicFakeEmbedding
    >>> from memory_ext import MemoryEngine
    >>> embedder = LangChainEmbedder(DeterministicFakeEmbedding(size=32), id="fake-32")
    >>> embedder.dim
    32
    >>> engine = MemoryEngine.open(tempfile.mkdtemp(), embedder=embedder)
    >>> _ = engine.add_turns([{"role": "user", "content": "I keep bees"}], "zoe")
    >>> engine.search("bees", "zoe", k=1).items[0].text
    'I keep bees'
    >>> engine.close()
    """

    def __init__(self, embeddings: Embeddings, *, id: str | None = None, dim: int | None = None) -> None:
        if not isinstance(embeddings, Embeddings):
            raise EmbedderError(str(id), f"expected a langchain_core Embeddings, got {type(embeddings).__name__}",
                                "pass an Embeddings instance (e.g. OpenAIEmbeddings(), HuggingFaceEmbeddings())")
        self.embeddings = embeddings
        if id is None:
            model = getattr(embeddings, "model", None) or getattr(embeddings, "model_name", None)
            id = f"langchain:{type(embeddings).__name__}" + (f":{model}" if model else "")
        self.id: str = id
        if dim is None:
            dim = len(embeddings.embed_query("dimension probe"))
        if isinstance(dim, bool) or not isinstance(dim, int) or dim <= 0:
            raise EmbedderError(self.id, f"dim must be a positive integer, got {dim!r}", "pass dim=<vector size>")
        self.dim: int = dim

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        """Embed passages: an array of shape ``(len(texts), dim)``."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.asarray(self.embeddings.embed_documents(list(texts)), dtype=np.float32)

    def embed_query(self, text: str) -> np.ndarray:
        """Embed one query: an array of shape ``(dim,)``."""
        return np.asarray(self.embeddings.embed_query(text), dtype=np.float32)
