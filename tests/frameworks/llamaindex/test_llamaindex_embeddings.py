"""Embedding adapters: our embedder as a LlamaIndex BaseEmbedding, and any BaseEmbedding as our Embedder."""

from __future__ import annotations

import asyncio
import zlib

import numpy as np
import pytest

pytest.importorskip("llama_index.core")

from llama_index.core import Document, VectorStoreIndex
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.bridge.pydantic import Field

from llamaindex_memory_ext import LlamaIndexEmbedder, MemoryExtEmbedding
from memory_ext import HashingEmbedder, MemoryEngine
from memory_ext.embed import Embedder
from memory_ext.errors import ConfigError, EmbedderMismatchError


class BagOfWordsEmbedding(BaseEmbedding):
    """A deterministic LlamaIndex embedding (crc32 buckets of words) that records what it was asked."""

    dim: int = 64
    calls: list[str] = Field(default_factory=list)

    def _vec(self, text: str) -> list[float]:
        vec = np.zeros(self.dim)
        for word in text.lower().replace("?", " ").replace(".", " ").split():
            vec[zlib.crc32(word.encode()) % self.dim] += 1.0
        return vec.tolist()

    def _get_query_embedding(self, query: str) -> list[float]:
        self.calls.append("query")
        return self._vec(query)

    def _get_text_embedding(self, text: str) -> list[float]:
        self.calls.append("text")
        return self._vec(text)

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return self._get_query_embedding(query)


def test_memory_ext_embedding_gives_our_vectors() -> None:
    emb = MemoryExtEmbedding("hashing")
    ours = HashingEmbedder()
    assert emb.model_name == ours.id == emb.embedder.id
    np.testing.assert_allclose(emb.get_query_embedding("where is Lena?"), ours.embed_query("where is Lena?"),
                               rtol=1e-6)
    batch = emb.get_text_embedding_batch(["I moved to Lisbon", "我搬到了里斯本"])
    np.testing.assert_allclose(batch, ours.embed_documents(["I moved to Lisbon", "我搬到了里斯本"]), rtol=1e-6)
    np.testing.assert_allclose(asyncio.run(emb.aget_query_embedding("tea")), ours.embed_query("tea"), rtol=1e-6)
    np.testing.assert_allclose(asyncio.run(emb.aget_text_embedding_batch(["tea", "green tea"])),
                               ours.embed_documents(["tea", "green tea"]), rtol=1e-6)


def test_memory_ext_embedding_shares_an_engines_embedder_in_an_index(tmp_path) -> None:
    with MemoryEngine.open(tmp_path / "s", embedder=HashingEmbedder(dim=128)) as engine:
        emb = MemoryExtEmbedding.from_engine(engine)
        assert emb.embedder is engine.embedder and emb.model_name == "hashing-v1:128"
        index = VectorStoreIndex.from_documents(
            [Document(text="Lena lives in Porto."), Document(text="Cats sleep a lot.")], embed_model=emb)
        top = index.as_retriever(similarity_top_k=1).retrieve("where does Lena live?")
        assert top[0].node.get_content() == "Lena lives in Porto."


def test_from_engine_without_vectors_is_a_config_error(tmp_path) -> None:
    with (MemoryEngine.open(tmp_path / "s", config={"globals": {"vector_enabled": False}}) as engine,
          pytest.raises(ConfigError, match="vector_enabled")):
        MemoryExtEmbedding.from_engine(engine)


def test_unknown_embedder_name_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="hashing"):
        MemoryExtEmbedding("hashin")


def test_any_base_embedding_is_an_embedder() -> None:
    model = BagOfWordsEmbedding()
    emb = LlamaIndexEmbedder(model)
    assert isinstance(emb, Embedder)
    assert emb.dim == 64 and emb.id == "llamaindex:BagOfWordsEmbedding:unknown:64"
    assert emb.embed_documents(["a b", "c"]).shape == (2, 64) and emb.embed_documents([]).shape == (0, 64)
    model.calls.clear()
    assert emb.embed_query("a").shape == (64,) and model.calls == ["query"]  # the query side for queries
    assert LlamaIndexEmbedder(model, dim=64, id="bow-v2").id == "bow-v2"
    with pytest.raises(ConfigError):
        LlamaIndexEmbedder(HashingEmbedder())  # type: ignore[arg-type]


def test_an_engine_searches_with_a_llamaindex_embedding(tmp_path) -> None:
    path = tmp_path / "s"
    with MemoryEngine.open(path, embedder=LlamaIndexEmbedder(BagOfWordsEmbedding())) as engine:
        engine.add_turns([{"role": "user", "content": "Lena lives in Porto."},
                          {"role": "user", "content": "My cat sleeps all day."}], "ana")
        result = engine.search("where does Lena live?", "ana", k=2)
        assert result.items[0].text == "Lena lives in Porto." and "vector" in result.items[0].channels
        assert not result.degraded
    with pytest.raises(EmbedderMismatchError):  # the store remembers which model wrote it
        MemoryEngine.open(path, embedder=LlamaIndexEmbedder(BagOfWordsEmbedding(dim=32)))


def test_round_trip_keeps_the_vectors() -> None:
    back = LlamaIndexEmbedder(MemoryExtEmbedding("hashing"))
    np.testing.assert_allclose(back.embed_documents(["green tea"]), HashingEmbedder().embed_documents(["green tea"]),
                               rtol=1e-6)
