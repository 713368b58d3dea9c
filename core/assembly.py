"""Building an engine's parts from configuration: checks at open, the embedder of a stored store, the indexes.

:class:`memory_ext.MemoryEngine` calls these when it opens; they hold the decisions about *which* parts an
engine has, so the engine itself only wires them together.

>>> from memory_ext.config import EngineConfig
>>> validate_config(EngineConfig.coerce({"recall": {"fusion": "rrf"}}))
>>> embedder_for_stored_id("hashing-v1:64").dim
64
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from .config import EngineConfig
from .embed import Embedder, HashingEmbedder
from .errors import ConfigError
from .llm import LLM
from .rank.rerank import Reranker
from .recall.channels import check_channel_config
from .registry import vector_backends
from .store import chroma as _chroma  # noqa: F401  (registers the backend; chromadb loads only when used)
from .store.base import DerivedIndex
from .store.catalog import RecordCatalog
from .store.evidence import EvidenceIndex
from .store.graph import EntityGraph
from .store.keyword import KeywordIndex
from .store.sparse import SparseIndex
from .store.timeindex import TimeIndex
from .store.vector import VectorIndex

if TYPE_CHECKING:
    from .store.sqlite import TruthStore

__all__ = ["Indexes", "build_indexes", "embedder_for_stored_id", "validate_config"]


def validate_config(cfg: EngineConfig, *, llm: LLM | None = None, reranker: Reranker | None = None) -> None:
    """Resolve every implementation name and check the switches against each other and against the ``llm`` and
    ``reranker`` given; raise ConfigError naming the key and the valid values (at open, never at a search)."""
    g = cfg.globals
    if g.layers_index_enabled and cfg.recall.fusion != "zscore":
        raise ConfigError("recall.fusion", cfg.recall.fusion, "the layer channels work with the zscore fusion; use "
                          "fusion: zscore or switch layers_index_enabled off")
    if g.rerank_enabled and cfg.recall.fusion != "zscore":
        raise ConfigError("recall.fusion", cfg.recall.fusion, "reranking works on the zscore fusion; use "
                          "fusion: zscore or switch rerank_enabled off")
    check_channel_config(cfg.recall)  # implementation names, channel weights and options
    vector_backends.resolve("storage.vector_backend", cfg.storage.vector_backend)
    if not g.vector_enabled and cfg.storage.vector_backend != "numpy":
        raise ConfigError("storage.vector_backend", cfg.storage.vector_backend,
                          "globals.vector_enabled is false, so no vector backend is used; remove this key or "
                          "enable vectors")
    if g.llm_planner_enabled and llm is None:
        raise ConfigError("globals.llm_planner_enabled", True,
                          "pass an LLM: MemoryEngine.open(..., llm=...) (for example LangChainLLM(chat_model))")
    if g.rerank_enabled and reranker is None and llm is None:
        raise ConfigError("globals.rerank_enabled", True,
                          "pass a reranker (MemoryEngine.open(..., reranker=CallableReranker(fn, id=...))) or an "
                          "llm to rerank with")
    if reranker is not None and not isinstance(reranker, Reranker):
        raise ConfigError("reranker", reranker, "pass an object with id and rerank(query, candidates, timeout=)")
    if llm is not None and not isinstance(llm, LLM):
        raise ConfigError("llm", llm, "pass an object with id and complete(prompt, ...) (memory_ext.llm.LLM)")


def embedder_for_stored_id(stored: str | None) -> Embedder | str | None:
    """When no embedder is given, reopen a store with the embedder that built it (if it is a built-in)."""
    if stored is None:
        return None
    if stored.startswith("hashing-v1:"):
        return HashingEmbedder(dim=int(stored.split(":")[1]))
    return None


@dataclass(frozen=True)
class Indexes:
    """An engine's derived indexes; ``all`` in write order (what the write pipeline and forget loop over)."""

    keyword: KeywordIndex
    vector: VectorIndex | None
    sparse: SparseIndex
    time: TimeIndex
    graph: EntityGraph
    evidence: EvidenceIndex
    catalog: RecordCatalog

    @property
    def all(self) -> tuple[DerivedIndex, ...]:
        return (self.keyword, *((self.vector,) if self.vector is not None else ()), self.sparse, self.time,
                self.graph, self.evidence, self.catalog)


def build_indexes(config: EngineConfig, store: TruthStore, embedder: Embedder | None) -> Indexes:
    """Every derived index of an engine over ``store``, their tables created. The vector index is the configured
    backend (``storage.vector_backend``) when vectors are on; the others always exist, so forgetting reaches
    what was written while a switch was on."""
    vector: VectorIndex | None = None
    if config.globals.vector_enabled and embedder is not None:
        backend = vector_backends.resolve("storage.vector_backend", config.storage.vector_backend)
        vector = backend(storage=config.storage, directory=store.directory, embedder_id=embedder.id,
                         dim=embedder.dim, store_id=store.store_id, on_commit=store.after_commit, reader=store.reader)
        if not store.read_only and callable(reconcile := getattr(vector, "reconcile", None)):
            reconcile()  # a crash between SQLite's commit and Chroma's update is repaired here
    ix = Indexes(keyword=KeywordIndex(), vector=vector, sparse=SparseIndex(), time=TimeIndex(), graph=EntityGraph(),
                 evidence=EvidenceIndex(), catalog=RecordCatalog())
    for index in ix.all:
        store.add_schema(index.create_schema)
    return ix
