"""The systems a bench run compares, behind one small interface.

A :class:`System` holds one conversation at a time: :meth:`System.ingest` replaces whatever it held with the
turns of a conversation, :meth:`System.query` answers a query with a ranking of turn external ids (most
relevant first, no repeats), :meth:`System.close` frees everything. All systems get the same embedder.

Systems (``SYSTEMS``):

- ``memory-ext``: the engine as configured, one fresh store directory per conversation; retrieved items are
  flattened to turns in rank order (BENCHMARKS.md, step 3).
- ``bm25``: ``rank_bm25.BM25Okapi`` over ``speaker: text`` documents, tokenised by :func:`bm25_tokens`.
- ``vector``: the embedder, exact cosine over the same documents.
- ``langchain-ensemble``: LangChain's ``EnsembleRetriever`` (RRF, equal weights) over langchain-community's
  ``BM25Retriever`` (with :func:`bm25_tokens`, since its default ``str.split`` cannot read Chinese) and a
  langchain-chroma ``Chroma`` store on an in-process ephemeral client (cosine space).
- ``llamaindex-fusion``: LlamaIndex's ``QueryFusionRetriever`` (``reciprocal_rerank``, ``num_queries=1``,
  no LLM) over llama-index-retrievers-bm25's ``BM25Retriever`` (its own bm25s tokeniser and English stemmer,
  with a token pattern that splits CJK into characters) and a ``VectorStoreIndex``.

Optional packages are imported when a system is built; a missing one raises :class:`SystemUnavailable`
naming the extra to install, and the runner skips that system with a warning.
"""

from __future__ import annotations

import inspect
import re
import shutil
import tempfile
import uuid
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, ClassVar, Protocol, runtime_checkable

import numpy as np

from ..text.script import HAN
from .datasets import BenchTurn
from .metrics import flatten_ranking

__all__ = [
    "DEFAULT_SYSTEMS",
    "SYSTEMS",
    "BM25System",
    "EmbedderLike",
    "LangChainEnsembleSystem",
    "LlamaIndexFusionSystem",
    "MemoryExtSystem",
    "System",
    "SystemUnavailable",
    "VectorSystem",
    "bm25_tokens",
    "build_system",
]

BENCH_EXTRA = 'pip install "memory-ext[bench]"'


class SystemUnavailable(RuntimeError):
    """A system cannot be built here (a missing optional package or engine feature); the run skips it."""


@runtime_checkable
class EmbedderLike(Protocol):
    """The embedder protocol of :mod:`memory_ext.embed` (L2-normalised float32 vectors)."""

    id: str
    dim: int

    def embed_documents(self, texts: list[str]) -> np.ndarray: ...

    def embed_query(self, text: str) -> np.ndarray: ...


# ------------------------------------------------------------------------------------------------ tokenizer

BM25_STOP_WORDS: frozenset[str] = frozenset(
    "a an the is are was were of to in on and or what when where who how why did do does".split()
)
"""The few English stop words the ``bm25`` baseline drops (BENCHMARKS.md: "minus a few stop words")."""

_WORD = re.compile(f"[^\\W{HAN}]+|[{HAN}]+")
_CJK = re.compile(f"[{HAN}]")


def bm25_tokens(text: str) -> list[str]:
    """Tokens of the ``bm25`` baseline: lower-cased words minus :data:`BM25_STOP_WORDS`; runs of CJK
    characters become character unigrams and bigrams (BENCHMARKS.md: word segmentation loses 10-15 points on
    MADial, character n-grams do not).

    >>> bm25_tokens("What did Caroline paint?")
    ['caroline', 'paint']
    >>> bm25_tokens("Bart跳舞")
    ['bart', '跳', '舞', '跳舞']
    """
    out: list[str] = []
    for match in _WORD.finditer(text.lower()):
        token = match.group(0)
        if _CJK.match(token):
            out.extend(token)
            out.extend(token[i:i + 2] for i in range(len(token) - 1))
        elif token not in BM25_STOP_WORDS:
            out.append(token)
    return out


_CJK_CLASS = HAN
LLAMAINDEX_TOKEN_PATTERN = rf"(?u)[{_CJK_CLASS}]|[^\W{_CJK_CLASS}]{{2,}}"
"""bm25s token pattern for ``llamaindex-fusion``: its default ``\\b\\w\\w+\\b`` on latin text, one token per
CJK character (the default would make a whole Chinese sentence one token)."""


# ---------------------------------------------------------------------------------------------- the interface


class System(ABC):
    """One retrieval system under test, holding one conversation at a time."""

    name: ClassVar[str]

    def __init__(self, embedder: EmbedderLike | None, depth: int = 20) -> None:
        """``depth`` is the longest ranking :meth:`query` will be asked for (the largest k)."""
        self.embedder = embedder
        self.depth = depth

    @abstractmethod
    def ingest(self, conversation_id: str, turns: Sequence[BenchTurn], now: datetime | None = None) -> None:
        """Replace what the system holds with these turns (one store / namespace per conversation)."""

    @abstractmethod
    def query(self, text: str, k: int) -> list[str]:
        """The first ``k`` (at most) turn external ids for ``text``, most relevant first, without repeats."""

    def close(self) -> None:  # noqa: B027  an optional hook, not abstract: most systems hold nothing to free
        """Free resources (files, clients). The default does nothing."""

    def _need_embedder(self) -> EmbedderLike:
        if self.embedder is None:
            raise SystemUnavailable(f"system {self.name!r} needs an embedder (pass --embedder)")
        return self.embedder


def _top_k(scores: np.ndarray, ids: Sequence[str], k: int) -> list[str]:
    """Ids of the k highest scores, ties broken by position (stable)."""
    k = min(k, len(ids))
    if k <= 0:
        return []
    order = np.argsort(-scores, kind="stable")[:k]
    return [ids[i] for i in order]


class BM25System(System):
    """``rank_bm25.BM25Okapi`` (default k1=1.5, b=0.75) over ``speaker: text`` documents."""

    name = "bm25"

    def __init__(self, embedder: EmbedderLike | None, depth: int = 20) -> None:
        super().__init__(embedder, depth)
        try:
            from rank_bm25 import BM25Okapi
        except ImportError as exc:
            raise SystemUnavailable(f"bm25 needs rank-bm25 ({exc}); pip install rank-bm25") from None
        self._bm25_cls = BM25Okapi
        self._bm25: Any = None
        self._ids: list[str] = []

    def ingest(self, conversation_id: str, turns: Sequence[BenchTurn], now: datetime | None = None) -> None:
        self._ids = [t.external_id for t in turns]
        corpus = [bm25_tokens(t.document) for t in turns]
        # rank_bm25 divides by the corpus length; an all-empty corpus still works, an empty one does not.
        self._bm25 = self._bm25_cls(corpus) if corpus else None

    def query(self, text: str, k: int) -> list[str]:
        if self._bm25 is None:
            return []
        return _top_k(np.asarray(self._bm25.get_scores(bm25_tokens(text))), self._ids, k)


def _normalise(vectors: Any) -> np.ndarray:
    """L2-normalise a vector or the rows of a matrix (float32; zero vectors stay zero)."""
    arr = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(arr, axis=-1, keepdims=True)
    return arr / np.where(norms == 0, 1.0, norms)


class VectorSystem(System):
    """Exact cosine top-k over the embedded documents (one matrix product)."""

    name = "vector"

    def __init__(self, embedder: EmbedderLike | None, depth: int = 20) -> None:
        super().__init__(embedder, depth)
        self._embedder = self._need_embedder()
        self._matrix = np.zeros((0, self._embedder.dim), dtype=np.float32)
        self._ids: list[str] = []

    def ingest(self, conversation_id: str, turns: Sequence[BenchTurn], now: datetime | None = None) -> None:
        self._ids = [t.external_id for t in turns]
        docs = [t.document for t in turns]
        self._matrix = (_normalise(self._embedder.embed_documents(docs)) if docs
                        else np.zeros((0, self._embedder.dim), dtype=np.float32))

    def query(self, text: str, k: int) -> list[str]:
        if not self._ids:
            return []
        q = _normalise(self._embedder.embed_query(text))
        return _top_k(self._matrix @ q, self._ids, k)


# ----------------------------------------------------------------------------------------- framework baselines


def _langchain_embeddings(embedder: EmbedderLike) -> Any:
    """Wrap our embedder as a ``langchain_core.embeddings.Embeddings``."""
    from langchain_core.embeddings import Embeddings

    class _Wrapped(Embeddings):
        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            return np.asarray(embedder.embed_documents(list(texts)), dtype=np.float32).tolist()

        def embed_query(self, text: str) -> list[float]:
            return np.asarray(embedder.embed_query(text), dtype=np.float32).tolist()

    return _Wrapped()


class LangChainEnsembleSystem(System):
    """EnsembleRetriever(BM25Retriever, Chroma retriever), equal weights, RRF c=60."""

    name = "langchain-ensemble"

    def __init__(self, embedder: EmbedderLike | None, depth: int = 20) -> None:
        super().__init__(embedder, depth)
        embedder = self._need_embedder()
        try:
            import chromadb
            from chromadb.config import Settings as ChromaSettings
            from langchain_chroma import Chroma
            from langchain_classic.retrievers import EnsembleRetriever
            from langchain_community.retrievers import BM25Retriever
        except ImportError as exc:
            raise SystemUnavailable(f"langchain-ensemble needs the bench extra ({exc}); {BENCH_EXTRA}") from None
        self._chroma_cls = Chroma
        self._ensemble_cls = EnsembleRetriever
        self._bm25_cls = BM25Retriever
        self._client = chromadb.EphemeralClient(settings=ChromaSettings(anonymized_telemetry=False))
        self._embeddings = _langchain_embeddings(embedder)
        self._store: Any = None
        self._retriever: Any = None

    def _drop_store(self) -> None:
        if self._store is not None:
            self._store.delete_collection()
            self._store = None
            self._retriever = None

    def ingest(self, conversation_id: str, turns: Sequence[BenchTurn], now: datetime | None = None) -> None:
        self._drop_store()
        if not turns:
            return
        texts = [t.document for t in turns]
        metadatas = [{"turn_id": t.external_id} for t in turns]
        self._store = self._chroma_cls(
            collection_name=f"bench-{uuid.uuid4().hex}",
            embedding_function=self._embeddings,
            client=self._client,
            collection_metadata={"hnsw:space": "cosine"},
        )
        self._store.add_texts(texts, metadatas=metadatas, ids=[f"t{i}" for i in range(len(texts))])
        bm25 = self._bm25_cls.from_texts(texts, metadatas=metadatas, preprocess_func=bm25_tokens,
                                         k=min(self.depth, len(texts)))
        dense = self._store.as_retriever(search_kwargs={"k": min(self.depth, len(texts))})
        self._retriever = self._ensemble_cls(retrievers=[bm25, dense], weights=[0.5, 0.5], id_key="turn_id")

    def query(self, text: str, k: int) -> list[str]:
        if self._retriever is None:
            return []
        docs = self._retriever.invoke(text)
        return flatten_ranking([[d.metadata["turn_id"]] for d in docs])[:k]

    def close(self) -> None:
        self._drop_store()


def _llamaindex_embedding(embedder: EmbedderLike) -> Any:
    """Wrap our embedder as a LlamaIndex ``BaseEmbedding``."""
    from llama_index.core.embeddings import BaseEmbedding
    from pydantic import PrivateAttr

    class _Wrapped(BaseEmbedding):
        _inner: Any = PrivateAttr()

        def __init__(self, inner: EmbedderLike) -> None:
            super().__init__(model_name=f"memory-ext:{inner.id}", embed_batch_size=64)
            self._inner = inner

        def _get_query_embedding(self, query: str) -> list[float]:
            return np.asarray(self._inner.embed_query(query), dtype=np.float32).tolist()

        def _get_text_embedding(self, text: str) -> list[float]:
            return np.asarray(self._inner.embed_documents([text])[0], dtype=np.float32).tolist()

        def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
            return np.asarray(self._inner.embed_documents(list(texts)), dtype=np.float32).tolist()

        async def _aget_query_embedding(self, query: str) -> list[float]:
            return self._get_query_embedding(query)

        async def _aget_text_embedding(self, text: str) -> list[float]:
            return self._get_text_embedding(text)

    return _Wrapped(embedder)


class LlamaIndexFusionSystem(System):
    """QueryFusionRetriever(reciprocal_rerank, num_queries=1) over BM25Retriever + VectorStoreIndex retriever."""

    name = "llamaindex-fusion"

    def __init__(self, embedder: EmbedderLike | None, depth: int = 20) -> None:
        super().__init__(embedder, depth)
        embedder = self._need_embedder()
        try:
            from llama_index.core import VectorStoreIndex
            from llama_index.core.llms import MockLLM
            from llama_index.core.retrievers import QueryFusionRetriever
            from llama_index.core.retrievers.fusion_retriever import FUSION_MODES
            from llama_index.core.schema import TextNode
            from llama_index.retrievers.bm25 import BM25Retriever
        except ImportError as exc:
            raise SystemUnavailable(f"llamaindex-fusion needs the bench extra ({exc}); {BENCH_EXTRA}") from None
        self._index_cls = VectorStoreIndex
        self._llm_cls = MockLLM
        self._fusion_cls = QueryFusionRetriever
        self._fusion_mode = FUSION_MODES.RECIPROCAL_RANK  # the string enum "reciprocal_rerank"
        self._node_cls = TextNode
        self._bm25_cls = BM25Retriever
        self._embed_model = _llamaindex_embedding(embedder)
        self._retriever: Any = None

    def ingest(self, conversation_id: str, turns: Sequence[BenchTurn], now: datetime | None = None) -> None:
        self._retriever = None
        if not turns:
            return
        nodes = [
            self._node_cls(text=t.document, id_=f"{conversation_id}/{i}", metadata={"turn_id": t.external_id},
                           excluded_embed_metadata_keys=["turn_id"], excluded_llm_metadata_keys=["turn_id"])
            for i, t in enumerate(turns)
        ]
        top_k = min(self.depth, len(nodes))
        # embed_model and llm are passed explicitly: LlamaIndex's global defaults would reach for OpenAI.
        index = self._index_cls(nodes, embed_model=self._embed_model, show_progress=False)
        dense = index.as_retriever(similarity_top_k=top_k)
        bm25 = self._bm25_cls.from_defaults(nodes=nodes, similarity_top_k=top_k,
                                            token_pattern=LLAMAINDEX_TOKEN_PATTERN)
        self._retriever = self._fusion_cls([dense, bm25], llm=self._llm_cls(), mode=self._fusion_mode,
                                           num_queries=1, similarity_top_k=top_k, use_async=False)

    def query(self, text: str, k: int) -> list[str]:
        if self._retriever is None:
            return []
        hits = self._retriever.retrieve(text)
        return flatten_ranking([[h.node.metadata["turn_id"]] for h in hits])[:k]


# ----------------------------------------------------------------------------------------------- memory-ext


class MemoryExtSystem(System):
    """The memory-ext engine, one fresh store directory per conversation (namespace = conversation id)."""

    name = "memory-ext"

    def __init__(self, embedder: EmbedderLike | None, depth: int = 20, config: Any = None) -> None:
        super().__init__(embedder, depth)
        try:
            from memory_ext import MemoryEngine, Namespace, Turn
        except ImportError as exc:
            raise SystemUnavailable(f"the memory-ext engine is not importable here ({exc})") from None
        self._engine_cls = MemoryEngine
        self._namespace_cls = Namespace
        self._turn_cls = Turn
        self._config = config
        self._tmp = Path(tempfile.mkdtemp(prefix="memext-bench-"))
        self._engine: Any = None
        self._engine_path: Any = None
        self._namespace: Any = None
        self._now: datetime | None = None
        self._search_takes_now = False
        self._schemas: list[str] = []  # PostgreSQL schemas made (storage.backend: postgres), dropped at close

    def _drop_engine(self) -> None:
        if self._engine is not None:
            self._engine.close()
            self._engine = None

    def ingest(self, conversation_id: str, turns: Sequence[BenchTurn], now: datetime | None = None) -> None:
        self._drop_engine()
        store: Any = self._tmp / uuid.uuid4().hex
        kwargs: dict[str, Any] = {"config": self._config}
        if self._postgres_dsn() is not None:  # storage.backend: postgres — a fresh schema per conversation
            kwargs["config"], store = self._postgres_config(f"bench_{uuid.uuid4().hex[:12]}")
        if self.embedder is not None:
            kwargs["embedder"] = self.embedder
        self._engine = self._engine_cls.open(store, **kwargs)
        self._engine_path = store
        self._search_takes_now = "now" in inspect.signature(self._engine.search).parameters
        self._namespace = self._namespace_cls(conversation_id)
        self._now = now
        batch = [
            self._turn_cls(role=t.role, content=t.text, speaker=t.speaker, timestamp=t.timestamp,
                           session_id=t.session_id, external_id=t.external_id)
            for t in turns
        ]
        if batch:  # timed until fully indexed (the background indexer's vectors included)
            self._engine.add_turns(batch, self._namespace, wait=True)

    def _postgres_dsn(self) -> str | None:
        from memory_ext.config import EngineConfig
        from memory_ext.store.locate import dsn_from

        cfg = EngineConfig.coerce(self._config)
        return dsn_from(None, cfg.storage.postgres_dsn) if cfg.storage.backend == "postgres" else None

    def _postgres_config(self, schema: str) -> tuple[Any, str]:
        from memory_ext.config import EngineConfig

        cfg = EngineConfig.coerce(self._config)
        storage = cfg.storage.model_dump(exclude_unset=True) | {"postgres_schema": schema}
        self._schemas.append(schema)
        dsn = self._postgres_dsn()
        assert dsn is not None
        return cfg.model_copy(update={"storage": type(cfg.storage).model_validate(storage)}), dsn

    def query(self, text: str, k: int) -> list[str]:
        if self._engine is None:
            return []
        kwargs: dict[str, Any] = {"k": k}
        if self._search_takes_now and self._now is not None:
            kwargs["now"] = self._now
        result = self._engine.search(text, self._namespace, **kwargs)
        return flatten_ranking(item.external_ids for item in result.items)[:k]

    def close(self) -> None:
        self._drop_engine()
        shutil.rmtree(self._tmp, ignore_errors=True)
        dsn = self._postgres_dsn() if self._schemas else None
        if dsn is not None:
            import psycopg

            with psycopg.connect(dsn, autocommit=True) as conn:
                for schema in self._schemas:
                    conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


# ---------------------------------------------------------------------------------------------------- registry

SYSTEMS: dict[str, Callable[..., System]] = {
    "memory-ext": MemoryExtSystem,
    "bm25": BM25System,
    "vector": VectorSystem,
    "langchain-ensemble": LangChainEnsembleSystem,
    "llamaindex-fusion": LlamaIndexFusionSystem,
}
"""System name -> constructor ``(embedder, depth)``."""

DEFAULT_SYSTEMS: tuple[str, ...] = tuple(SYSTEMS)


def build_system(name: str, embedder: EmbedderLike | None, depth: int = 20, **options: Any) -> System:
    """Build a system by name; unknown names raise ``ValueError`` listing the valid ones."""
    try:
        factory = SYSTEMS[name]
    except KeyError:
        raise ValueError(f"unknown system {name!r}; valid systems: {', '.join(SYSTEMS)}") from None
    return factory(embedder, depth, **options)
