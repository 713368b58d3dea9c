"""MemoryEngine: the write path, the read path and forgetting, over one store directory.

>>> import tempfile
>>> from memory_ext import MemoryEngine, Turn
>>> with MemoryEngine.open(tempfile.mkdtemp(), embedder="hashing") as engine:
...     _ = engine.add_turns([Turn(role="user", content="I adopted a beagle called Toby", speaker="Ana")], "ana")
...     engine.search("what dog does Ana have?", "ana", k=1).items[0].text
'I adopted a beagle called Toby'

The engine is synchronous and thread-safe. Every public method has an ``a``-prefixed async twin
(``aadd_turns``, ``asearch``, ...) that runs it in a worker thread, so an event loop is never blocked.
"""

from __future__ import annotations

import asyncio
import os
import sys
import threading
import warnings
from collections.abc import Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from .assembly import (
    backend_for_path,
    build_indexer,
    build_indexes,
    build_planner_and_reranker,
    open_store,
    validate_config,
    with_embedder_defaults,
)
from .blas import limit_blas_threads
from .config import EngineConfig
from .e5_numpy import PASS_GATE
from .embed import Embedder
from .errors import InvalidArgumentError, ValidationError
from .ingest.contextual import MIXED, stored_vector_kind, vector_kind
from .ingest.pipeline import WritePipeline
from .ingest.reindex import ReindexReport, reindex_engine
from .lifecycle.api import CompactionReport, Lifecycle
from .lifecycle.forgetting import forget, purge_files
from .lifecycle.items import ItemPut, Items, ItemSweeper, MatchCondition, StoredItem
from .lifecycle.versions import Versions
from .llm import LLM
from .models import ActionState, IndexHook, MemoryFile, Namespace, SearchResult, Turn
from .portability import ImportReport, export_lines, from_mem0, import_lines
from .rank.rerank import Reranker
from .recall.base import RecallContext, Recaller
from .recall.channels import build_channels
from .results import (
    AddResult,
    ForgetReceipt,
    Memory,
    MemoryPage,
    MemoryVersion,
    NamespaceSummary,
    QuarantinedRecord,
    StoreStats,
)
from .retrieval import ReadPipeline
from .store.faces import Face, record_face
from .store.interface import TruthStore
from .telemetry import traced_operations
from .validate import check_page

__all__ = ["AddResult", "ForgetReceipt", "MemoryEngine", "StoreStats"]

TimeLike = datetime | str | float | None

@traced_operations  # one OpenTelemetry span per operation when the ``otel`` extra is installed (memory_ext.telemetry)
class MemoryEngine:
    """Long-term memory over one store directory.

    Open it with :meth:`open`; write with :meth:`add_turns`; read with :meth:`search`; change with :meth:`update`,
    :meth:`history`, :meth:`delete`; rebuild with :meth:`reindex`; remove with :meth:`forget`. Turns are archived in
    daily memory files (:meth:`render_prompt`, :meth:`retrieve`, :meth:`compact`, :meth:`pre_compress`).
    """

    def __init__(self, store: TruthStore, config: EngineConfig, embedder: Embedder | None,
                 embedder_warning: str | None, llm: LLM | None = None, reranker: Reranker | None = None) -> None:
        self._store = store
        self.embedder = embedder
        self._asked = config  # before the defaults that follow the store's turn vectors
        self.vector_kind = vector_kind(config.ingest.window_vectors, config.ingest.sentence_vectors, embedder)
        """How this engine makes turn vectors (:func:`~memory_ext.ingest.contextual.vector_kind`); the store's own,
        which scores and the keyword weight follow, is in :meth:`stats` (``turn_vectors``)."""
        stored = self._stored_kind()
        if stored is not None and stored != self.vector_kind:
            warnings.warn(f"the store holds {stored} turn vectors and this configuration makes {self.vector_kind} "
                          "ones: item scores and the keyword weight follow the stored vectors until a whole-store "
                          "reindex (engine.reindex(), memext reindex) rebuilds them", UserWarning, stacklevel=3)
        config = with_embedder_defaults(config, embedder, stored_kind=stored)
        planner, reranker = build_planner_and_reranker(config, llm, reranker)
        self.config = config
        ix = build_indexes(config, store, embedder)
        self._catalog, self._evidence, self._vector = ix.catalog, ix.evidence, ix.vector
        self._indexes = ix.all  # the write pipeline hands each batch to all of them; forget removes from all
        ctx = RecallContext(store=store, keyword_index=ix.keyword, vector_index=ix.vector, embedder=embedder,
                            graph_index=ix.graph, time_index=ix.time, evidence_index=ix.evidence,
                            sparse_index=ix.sparse)
        channels = build_channels(config, ctx)
        self._recallers: dict[str, Recaller] = channels.recallers
        self._pool = ThreadPoolExecutor(max_workers=max(4, 4 * len(self._recallers)),
                                        thread_name_prefix="memory-ext-recall")
        self._read = ReadPipeline(store=store, catalog=self._catalog, channels=channels, pool=self._pool,
                                  planner=planner, config=config, reranker=reranker,
                                  vector_index=self._vector, evidence_index=self._evidence,
                                  embedder_warning=embedder_warning,
                                  settle=lambda ns_id, sparse, excerpt: self._writer.settle_search(
                                      ns_id, config.ingest.search_wait_s, sparse=sparse, excerpt=excerpt),
                                  health=lambda ns_id: self._writer.health(ns_id),
                                  mixed_vectors=(stored or self.vector_kind) == MIXED)
        # the model work of writes (vectors, sparse encodings) is queued and made by the writer's indexer
        self._writer = WritePipeline(store, config, embedder, self._indexes, vector=ix.vector, graph=ix.graph,
                                     time=ix.time, sparse="sparse" in self._recallers,
                                     evidence=config.globals.evidence_enabled,
                                     indexer=build_indexer(config, store, embedder, ix,
                                                           sparse="sparse" in self._recallers))
        self._lifecycle = Lifecycle(store, config, llm, search=self.search, add_turns=self.add_turns,
                                    check_open=self._check_open, on_flags_changed=self._catalog.invalidate,
                                    add_in=self._writer.add_in)
        # the composed parts: memory versions (update, history, delete, list) and the key/value items
        self._versions = Versions(store, self._writer, lambda ns, rids: self.forget(ns, record_ids=rids))
        self._items = Items(store, self._writer, self._versions, self.search, config.limits.max_k)
        self._faces: dict[str, Face] = {}
        self._closed = False
        self._writer.resume()  # the queue a previous writer left (closed early, or crashed)
        self._sweeper = ItemSweeper(store, self._items)  # imports an earlier version's item file; sweeps on a timer
        self.item_sweeps: threading.Event | None = self._sweeper.start()
        """Set after each background sweep of expired items (tests wait on it); None for a read-only store."""

    def _stored_kind(self) -> str | None:
        """The kind of turn vectors the store holds (None: no vectors, or this engine makes none)."""
        return stored_vector_kind(self._store.get_meta) if self.embedder is not None else None

    # -- construction ----------------------------------------------------------------------------------------
    @classmethod
    def open(cls, path: str | os.PathLike[str] | None = None, *,
             config: EngineConfig | Mapping[str, Any] | str | os.PathLike[str] | None = None,
             embedder: Embedder | str | None = None, read_only: bool = False, llm: LLM | None = None,
             reranker: Reranker | None = None, allow_embedder_change: bool = False) -> MemoryEngine:
        """Open (or create) the store in directory ``path`` (default ``~/.memory_ext``).

        ``config`` is an :class:`EngineConfig`, a mapping, or a YAML/TOML/JSON path; ``embedder`` an
        :class:`~memory_ext.embed.Embedder` or a registered name (``"e5"``, the default, or ``"hashing"``).
        ``llm`` (any :class:`~memory_ext.llm.LLM`) plans searches when ``globals.llm_planner_enabled`` is set; a
        failed or slow plan falls back to the heuristic one and says so in ``SearchResult.channel_errors``.
        Configuration errors raise :class:`~memory_ext.errors.ConfigError` here, never at the first search.
        ``read_only=True`` opens a store that another process writes. With ``globals.rerank_enabled``, the
        fused candidates are reranked by ``reranker`` (any :class:`~memory_ext.rank.rerank.Reranker`, e.g. a
        cross-encoder wrapped in ``CallableReranker``) or, when none is given, by ``llm`` (``LLMReranker``); a
        failed rerank keeps the fused order and says so in ``channel_errors``.
        """
        cfg = backend_for_path(path, EngineConfig.coerce(config if not isinstance(config, os.PathLike)
                                                         else Path(config)))
        validate_config(cfg, llm=llm, reranker=reranker)
        limit_blas_threads(cfg.globals.blas_threads)
        PASS_GATE.configure(during_search=cfg.globals.background_passes_during_search)
        store, emb, warning, new_dir = open_store(path, cfg, read_only=read_only, embedder=embedder,
                                                  allow_embedder_change=allow_embedder_change)
        try:
            return cls(store, cfg, emb, warning, llm, reranker)
        except BaseException:
            store.close()
            new_dir.undo()  # a failed open leaves no new store directory behind
            raise

    def close(self) -> None:
        """Release the store (and its writer lock) and the worker threads. Idempotent."""
        if self._closed:
            return
        self._closed = True
        self._sweeper.stop()
        self._writer.close(self.config.ingest.close_timeout_s)  # what is left stays queued on disk
        self._pool.shutdown(wait=False, cancel_futures=True)
        if self._vector is not None:
            self._vector.close()
        self._store.close()

    def __enter__(self) -> MemoryEngine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def llm(self) -> LLM | None:
        """The LLM the lifecycle uses (LLM summaries, eviction relevance); settable."""
        return self._lifecycle.llm

    @llm.setter
    def llm(self, value: LLM | None) -> None:
        self._lifecycle.llm = value

    @property
    def path(self) -> Path:
        """The store directory."""
        return self._store.directory

    # -- write path ------------------------------------------------------------------------------------------
    def add_turns(self, turns: Iterable[Turn | Mapping[str, Any]], namespace: Namespace | str, *,
                  wait: bool = False) -> AddResult:
        """Store turns losslessly and index them, in one transaction (all or nothing).

        ``turns`` are :class:`Turn` objects or mappings with at least ``role`` and ``content``. A turn without a
        timestamp gets the current time; one without a session gets ``namespace.session_id``. Invalid input
        raises a :class:`~memory_ext.errors.ValidationError` naming the field, the value and the fix, and
        nothing is written. The transaction writes every index that needs no model and queues the model work
        (vectors, sparse encodings), which the background indexer does next (see :meth:`flush`); ``wait=True``
        returns once every record of this namespace is indexed or quarantined. No model failure raises once the
        turns are committed: a record the embedder fails on even alone and from its sentences is quarantined
        (``AddResult.quarantined`` names its turn; found by keyword until ``reindex`` retries it), and when the
        embedder fails on everything the work stays queued (``AddResult.pending`` and ``indexing_error``).

        >>> import tempfile
        >>> with MemoryEngine.open(tempfile.mkdtemp(), embedder="hashing") as engine:
        ...     result = engine.add_turns([Turn(role="user", content="My dog is called Toby.")], "ana", wait=True)
        ...     result.quarantined, result.pending
        ((), 0)
        """
        self._check_open()
        ns = Namespace.coerce(namespace)
        result = self._writer.add(turns, ns)
        if wait:
            self.flush(ns)
            mine = set(result.turn_ids)
            held = tuple(dict.fromkeys(t for q in self._writer.quarantined(ns) if q.kind == "turn"
                                       for t in q.turn_ids if t in mine))
            pending = self._writer.pending(ns)
            error = self._writer.indexer.error if self._writer.indexer is not None and pending else None
            if held or pending or error is not None:
                result = result.model_copy(update={"quarantined": held, "pending": pending, "indexing_error": (
                    None if error is None else f"{type(error).__name__}: {error}")})
        return result

    def flush(self, namespace: Namespace | str | None = None, *, timeout: float | None = None) -> bool:
        """Wait until every record of the namespace (of the whole store if None) is indexed or quarantined: True, or
        False if ``timeout`` seconds passed first or the embedder fails on everything (the work stays queued;
        searches report it in ``channel_errors``). Never raises for a model failure."""
        self._check_open()
        return self._writer.flush(None if namespace is None else Namespace.coerce(namespace), timeout)

    def pending(self, namespace: Namespace | str | None = None) -> int:
        """Records of the namespace (of the store if None) whose vectors are not written yet."""
        self._check_open()
        return self._writer.pending(None if namespace is None else Namespace.coerce(namespace))

    # -- read path -------------------------------------------------------------------------------------------
    def search(self, query: str, namespace: Namespace | str, *, k: int = 10,
               filters: Mapping[str, Any] | None = None, action_state: ActionState | Mapping[str, Any] | None = None,
               explain: bool = False, now: datetime | str | float | None = None,
               trace: bool = False, include_cold: bool = False,
               as_of: datetime | str | float | None = None, min_score: float | None = None) -> SearchResult:
        """Find the turns that help with ``query`` (and, if given, with what the agent is doing).

        The heuristic planner classifies the question, reads a time filter (relative to ``now``, default the
        current time) and the speakers it names, and adds a route for the ``action_state``. For every route the
        channels (keyword BM25, vector) run in parallel over turn and window records; their scores are fused
        (``recall.fusion``, see :mod:`memory_ext.rank.zscore`) into one score per turn, and the routes are summed.
        ``filters`` keys: ``session_id``, ``speaker``, ``role``, ``since``, ``until``, ``kinds``, ``metadata``
        (LangGraph's filter language on ``Turn.metadata``: :mod:`memory_ext.store.metadata_filter`), applied
        before ranking. Items carry their turn's ``metadata``, a relevance ``score`` in [0, 1] and the fused
        ``raw_score`` (:mod:`memory_ext.rank.calibration`). Turns in the cold tier are searched too, ranked a
        little lower (``recall.cold_penalty``); ``include_cold=True`` removes that penalty. ``as_of`` returns
        what was true then: only memories stated by that time and not yet superseded at it; without it, a
        superseded memory always ranks below the one that replaced it. ``trace=True`` attaches
        :attr:`SearchResult.trace` (plan, per-route candidates, stage timings; in memory only).
        ``min_score`` (off by default) leaves out the items whose ``score`` is below it, and their windows from
        ``context``: 0.5 is the documented line between a match and a weak one, so ``min_score=0.5`` returns
        nothing rather than the nearest unrelated turns when the store holds nothing relevant (fewer than ``k``
        items, possibly none).
        A channel that fails or times out is listed in ``channel_errors`` (``degraded`` is then True); only if
        every channel fails does this raise :class:`~memory_ext.errors.RetrievalError`.
        Read-your-writes: when vectors of the namespace are still being made, the search first waits up to
        ``ingest.search_wait_s`` for them; whatever is still pending then is found only through the channels
        that need no model, and :attr:`SearchResult.pending` says how many records that is. A conversation
        excerpt's first search of a namespace waits the same way for its turns' sparse encodings
        (``ingest.sparse_encodings``).
        """
        self._check_open()
        ns = Namespace.coerce(namespace)
        return self._read.search(query, ns, k=k, filters=filters, action_state=action_state, explain=explain,
                                 now=now, trace=trace, include_cold=include_cold, as_of=as_of, min_score=min_score)

    # -- reading turns back, forgetting, stats -------------------------------------------------------------
    def get_turns(self, namespace: Namespace | str, *, limit: int | None = None, offset: int = 0) -> list[Turn]:
        """The stored turns of a namespace (of its session, if it names one), oldest first."""
        self._check_open()
        ns = Namespace.coerce(namespace)
        check_page(limit, offset)
        ns_id = self._store.find_namespace(ns.key)
        if ns_id is None:
            return []
        return [r.to_turn() for r in self._store.list_turns(ns_id, ns.session_id, limit, offset)]

    def replaced_turns(self, namespace: Namespace | str) -> frozenset[str]:
        """Ids of the namespace's stored turns whose version an :meth:`update` replaced (:meth:`get_turns` lists
        them with the others: the store is lossless; a default search never returns them)."""
        self._check_open()
        ns_id = self._store.find_namespace(Namespace.coerce(namespace).key)
        return frozenset() if ns_id is None else frozenset(self._store.replaced_turn_ids(ns_id))

    def forget(self, namespace: Namespace | str, *, record_ids: Iterable[str] | None = None,
               hook_ids: Iterable[str] | None = None) -> ForgetReceipt:
        """Remove memories from every store and return a receipt of what was removed.

        With only ``namespace``: the whole namespace (or, if it names a session, that session). With
        ``record_ids`` (ids of search results): the turns those records were built from; a turn id or an
        ``external_id`` (the ids :meth:`get_memory` and :meth:`delete` take) names every version of that memory.
        With ``hook_ids``: the memory files and every turn in them. In every case the turns go, with every record
        built from them (turn records, windows), their vectors (numpy or Chroma), keyword postings, graph entries,
        claims, and their place in memory files — files left empty are deleted, the others get their hooks
        recomputed, and verbatim ``pre_compress`` context has their text cut out. SQLite overwrites deleted content
        (``secure_delete``) and its write-ahead log is truncated, so the text is gone from disk too — unless
        another process holds an older read snapshot: ``forget`` waits at most 0.5 s for it, the receipt then says
        ``purge_complete=False`` and the purge is retried after later writes, at close and by :meth:`purge`.
        Faces registered with :meth:`register_face` (the LangGraph store) forget their own rows too.
        Unknown ids raise :class:`~memory_ext.errors.ValidationError` and nothing is removed.
        """
        self._check_open()
        return forget(self._store, self._indexes, self._evidence, Namespace.coerce(namespace),
                      record_ids=record_ids, hook_ids=hook_ids, resolve=self._lifecycle.resolve, faces=self._faces)

    def register_face(self, face: Face) -> None:
        """Let ``forget`` reach a face's own tables (see :mod:`memory_ext.store.faces`); its ``hook`` is recorded
        in the store so processes that never open the face forget its rows too."""
        self._check_open()
        self._faces[face.name] = face
        record_face(self._store, face.name, face.hook)

    def purge(self, *, wait_s: float = 0.0) -> tuple[str, ...]:
        """Finish the on-disk purge of earlier forgets; returns the files still pending (empty: complete).

        ``forget`` never waits for other processes' readers; when one held an old snapshot, its receipt says
        ``purge_complete=False``. This retries now, waiting at most ``wait_s`` seconds (``memext forget --purge``).
        """
        self._check_open()
        return purge_files(self._store, self._indexes, wait_s=wait_s, force=True)

    def quarantined(self, namespace: Namespace | str | None = None) -> list[QuarantinedRecord]:
        """The records the indexer gave up on (of ``namespace``, of the whole store if None), with the error:
        stored and found by every channel that needs no model, without a vector until :meth:`reindex` retries
        them (``ingest.quarantine_after``). ``memext doctor`` prints them.

        >>> import tempfile
        >>> with MemoryEngine.open(tempfile.mkdtemp(), embedder="hashing") as engine:
        ...     engine.quarantined()
        []
        """
        self._check_open()
        ns = None if namespace is None else Namespace.coerce(namespace)
        keys: dict[int, tuple[str, str]] = {}
        out = []
        for q in self._writer.quarantined(ns):
            user, agent = keys.setdefault(q.ns_id, self._store.namespace_key(q.ns_id))
            out.append(QuarantinedRecord(user_id=user, agent_id=agent or None, record_id=q.record_id, kind=q.kind,
                                         turn_ids=q.turn_ids, attempts=q.attempts, error=q.error, since=q.since))
        return out

    def stats(self) -> StoreStats:
        """Counts and on-disk size of the store."""
        self._check_open()
        return StoreStats(path=str(self._store.directory), namespaces=len(self._store.namespaces()),
                          turns=self._store.count("turns"), records=self._store.count("records"),
                          vectors=self._store.count("embeddings"), embedder_id=self._store.get_meta("embedder_id"),
                          quarantined=len(self._writer.quarantined(None)), pending=self._writer.pending(None),
                          turn_vectors=stored_vector_kind(self._store.get_meta),
                          vector_backend=self.config.storage.vector_backend if self._vector else "off",
                          disk_bytes=self._store.disk_bytes())

    # -- export and import (see memory_ext.portability) -------------------------------------------------------
    def export(self, namespace: Namespace | str | None = None) -> Iterator[dict[str, Any]]:
        """The store's memories (one namespace's, or — with a user id or a ``Namespace`` without agent — also
        every agent's of that user; None: all) as JSON-ready lines: a header, then per namespace its turns with
        every field, versions and history, and its memory files with hooks. ``json.dumps`` each line for a file
        :meth:`import_records` (or ``memext import``) restores into any store.

        >>> import json, tempfile
        >>> from memory_ext import MemoryEngine, Turn
        >>> with MemoryEngine.open(tempfile.mkdtemp(), embedder="hashing") as engine:
        ...     _ = engine.add_turns([Turn(role="user", content="I'm allergic to shellfish.")], "maya")
        ...     lines = [json.dumps(line) for line in engine.export("maya")]
        >>> json.loads(lines[0])["format"], json.loads(lines[2])["content"]
        ('memory-ext', "I'm allergic to shellfish.")
        """
        self._check_open()
        chosen: list[tuple[int, Namespace]] = []
        wanted = None if namespace is None else Namespace.coerce(namespace)
        for ns_id, user, agent in self._store.namespaces():
            if wanted is None or (user == wanted.user_id and (wanted.agent_id is None or agent == wanted.agent_id)):
                chosen.append((ns_id, Namespace(user, agent or None)))
        return export_lines(self._store, chosen, embedder_id=self._store.get_meta("embedder_id"))

    def import_records(self, lines: Iterable[str | Mapping[str, Any]] | Mapping[str, Any], *,
                       format: Literal["memory-ext", "mem0"] = "memory-ext", user_id: str | None = None,
                       wait: bool = False, progress: bool | None = None) -> ImportReport:
        """Restore an export (lines as text or dicts): every turn, version, operation and memory file the store
        does not hold yet, in one transaction — importing the same file twice adds nothing; a bad line raises
        :class:`~memory_ext.errors.InvalidImportError` naming it, and nothing is written. Vectors and indexes
        are made again by this engine (``wait=True`` waits for them).

        ``format="mem0"`` reads mem0's ``get_all`` output instead (``{"results": [...]}`` or a list; pass the
        parsed JSON): one memory per entry through :meth:`add_turns`, mem0's id as the ``external_id``
        (``user_id``: the user of entries that name none). ``progress``: a tqdm bar (None: on a terminal).
        """
        self._check_open()
        show = sys.stderr.isatty() if progress is None else progress
        if format == "mem0":
            report = self._import_mem0(lines, user_id=user_id, progress=show)
        elif format == "memory-ext":
            if isinstance(lines, Mapping):
                raise InvalidArgumentError("lines", type(lines).__name__, "give the export's lines (text or dicts)")
            report = import_lines(self._store, self._writer, self._indexes, lines, limits=self.config.limits,
                                  progress=show)
        else:
            raise InvalidArgumentError("format", format, "give 'memory-ext' or 'mem0'")
        if wait:
            self.flush()
        return report

    def _import_mem0(self, data: Any, *, user_id: str | None, progress: bool) -> ImportReport:
        from tqdm import tqdm

        by_ns: dict[Namespace, list[Turn]] = {}
        for ns, turn in from_mem0(data, user_id=user_id):
            by_ns.setdefault(ns, []).append(turn)
        added = skipped = 0
        with tqdm(total=sum(map(len, by_ns.values())), desc="import mem0", unit="memory",
                  disable=not progress) as bar:
            for ns, turns in by_ns.items():
                for start in range(0, len(turns), 500):
                    result = self.add_turns(turns[start:start + 500], ns)
                    skipped += len(result.existing_ids)
                    added += len(result.turn_ids) - len(result.existing_ids)
                    bar.update(len(turns[start:start + 500]))
        return ImportReport(namespaces=len(by_ns), turns=added, skipped_turns=skipped)

    def namespaces(self) -> list[Namespace]:
        """Every (user_id, agent_id) partition in the store."""
        self._check_open()
        return [Namespace(u, a or None) for _, u, a in self._store.namespaces()]

    def overview(self) -> list[NamespaceSummary]:
        """Every namespace with its counts of current memories and stored turns (namespaces forgotten whole,
        which keep only their id row, are left out)."""
        self._check_open()
        return [NamespaceSummary(user_id=u, agent_id=a or None, memories=m, turns=t)
                for u, a, m, t in self._store.namespace_counts() if t]

    def _check_open(self) -> None:
        if self._closed:
            raise ValidationError("engine", "closed", "open a new engine with MemoryEngine.open(path)")

    # -- memory versions (see memory_ext.lifecycle.versions.Versions) -----------------------------------------
    def update(self, namespace: Namespace | str, id: str, *, content: str | None = None,
               metadata: Mapping[str, Any] | None = None,
               timestamp: datetime | str | float | None = None) -> AddResult:
        """Write a new version of a memory; the old one keeps its validity interval.

        ``id`` names the memory: a turn id, a record id (``RetrievedItem.id``) or an ``external_id``. The new
        version is a new turn (same role, speaker, session, ``external_id``; ``content`` and ``metadata`` when
        given, else the old ones; ``timestamp``, default now), indexed everywhere; the old version ends then
        (``valid_to``, ``superseded_by``): default searches never return it, ``search(as_of=...)`` before the
        update does, :meth:`history` lists both. Returns the new turn's ids (``turn_ids[0]``, ``record_ids[0]``).
        An unknown or deleted id raises :class:`~memory_ext.errors.InvalidQueryError` and nothing is written.
        """
        self._check_open()
        return self._versions.update(namespace, id, content=content, metadata=metadata, timestamp=timestamp)

    def history(self, namespace: Namespace | str, id: str) -> list[MemoryVersion]:
        """The versions of a memory and the operations on it (add / update / supersede / delete), oldest first.
        ``id`` is any id :meth:`update` takes (after a delete: the memory's ``external_id`` or first turn id)."""
        self._check_open()
        return self._versions.history(namespace, id)

    def delete(self, namespace: Namespace | str, ids: Iterable[str]) -> ForgetReceipt:
        """Remove exactly these memories (every version) from every store, at a cost proportional to what is
        removed; :meth:`history` records the delete without any text. ``ids`` as :meth:`update` takes them."""
        self._check_open()
        return self._versions.delete(namespace, ids)

    def list_memories(self, namespace: Namespace | str, *, filters: Mapping[str, Any] | None = None,
                      limit: int = 50, cursor: str | None = None) -> MemoryPage:
        """The namespace's current memories — one per memory, its latest version not replaced by an update —
        most recently written first, ``limit`` (1-1000) a page; pass ``next_cursor`` back for the next page.

        ``filters`` takes the keys :meth:`search` takes (``session_id``, ``speaker``, ``role``, ``since``,
        ``until``, ``kinds``, ``metadata``); each :class:`~memory_ext.results.Memory` has its id (what
        :meth:`update`, :meth:`history` and :meth:`delete` take), content, speaker, role, time, metadata and
        version count. A replaced version is never listed; a deleted memory is gone.

        >>> import tempfile
        >>> from memory_ext import MemoryEngine, Turn
        >>> with MemoryEngine.open(tempfile.mkdtemp(), embedder="hashing") as engine:
        ...     _ = engine.add_turns([Turn(role="user", content="Ana lives in Oslo", external_id="home"),
        ...                           Turn(role="user", content="Ana plays the cello")], "ana")
        ...     _ = engine.update("ana", "home", content="Ana lives in Porto")
        ...     [(m.content, m.version_count) for m in engine.list_memories("ana").items]
        [('Ana lives in Porto', 2), ('Ana plays the cello', 1)]
        """
        self._check_open()
        return self._versions.list(namespace, filters=filters, limit=limit, cursor=cursor)

    def get_memory(self, namespace: Namespace | str, id: str) -> Memory:
        """One memory: its current version, its version count and its whole :meth:`history` (``Memory.history``).
        ``id`` is any id :meth:`update` takes; a deleted or unknown one raises
        :class:`~memory_ext.errors.InvalidQueryError`."""
        self._check_open()
        return self._versions.get(namespace, id)

    async def alist_memories(self, namespace: Namespace | str, *, filters: Mapping[str, Any] | None = None,
                             limit: int = 50, cursor: str | None = None) -> MemoryPage:
        """Async twin of :meth:`list_memories`."""
        return await asyncio.to_thread(self.list_memories, namespace, filters=filters, limit=limit, cursor=cursor)

    async def aget_memory(self, namespace: Namespace | str, id: str) -> Memory:
        """Async twin of :meth:`get_memory`."""
        return await asyncio.to_thread(self.get_memory, namespace, id)

    async def aupdate(self, namespace: Namespace | str, id: str, *, content: str | None = None,
                      metadata: Mapping[str, Any] | None = None,
                      timestamp: datetime | str | float | None = None) -> AddResult:
        """Async twin of :meth:`update`."""
        return await asyncio.to_thread(self.update, namespace, id, content=content, metadata=metadata,
                                       timestamp=timestamp)

    async def ahistory(self, namespace: Namespace | str, id: str) -> list[MemoryVersion]:
        """Async twin of :meth:`history`."""
        return await asyncio.to_thread(self.history, namespace, id)

    async def adelete(self, namespace: Namespace | str, ids: Iterable[str]) -> ForgetReceipt:
        """Async twin of :meth:`delete`."""
        return await asyncio.to_thread(self.delete, namespace, list(ids))

    # -- key/value items, the LangGraph store's (see memory_ext.lifecycle.items.Items) ------------------------
    def put_items(self, namespace: Namespace | str, items: Iterable[ItemPut | Mapping[str, Any]], *,
                  now: TimeLike = None) -> int:
        """Write items of a ``(user_id, agent_id)`` partition (``value=None`` deletes), in one transaction with
        the archive of their text (see :mod:`memory_ext.lifecycle.items`); ``now`` (default: the current time)
        stamps them and starts their TTL. Expired items of the partition are swept first. Returns the writes."""
        self._check_open()
        return self._items.put(namespace, list(items) if not isinstance(items, (Mapping, ItemPut, str, bytes))
                               else items, now)

    def get_items(self, namespace: Namespace | str, keys: Iterable[tuple[Sequence[str], str]], *,
                  refresh_ttl: bool = False, now: TimeLike = None) -> list[StoredItem | None]:
        """The live items of ``(namespace tuple, key)`` pairs, in order (None for a missing or expired one);
        ``refresh_ttl`` restarts the TTL of those returned."""
        self._check_open()
        return self._items.get(namespace, keys, refresh_ttl, now)

    def search_items(self, namespace: Namespace | str, prefix: Sequence[str] = (), *, query: str | None = None,
                     query_vector: Sequence[float] | None = None, filter: Mapping[str, Any] | None = None,
                     limit: int = 10, offset: int = 0, refresh_ttl: bool = False,
                     now: TimeLike = None) -> list[StoredItem]:
        """Items under a namespace prefix passing ``filter`` (LangGraph's filter language on the value), ranked by
        ``query_vector`` (cosine) or ``query`` (memory-ext retrieval) when given."""
        self._check_open()
        return self._items.search(namespace, prefix, query=query, query_vector=query_vector, filter=filter,
                                  limit=limit, offset=offset, refresh_ttl=refresh_ttl, now=now)

    def list_item_namespaces(self, namespace: Namespace | str, *,
                             match_conditions: Iterable[MatchCondition] | None = None, max_depth: int | None = None,
                             limit: int = 100, offset: int = 0, now: TimeLike = None) -> list[tuple[str, ...]]:
        """The LangGraph namespaces holding live items, sorted (``match_conditions``: prefix/suffix paths)."""
        self._check_open()
        return self._items.list_namespaces(namespace, match_conditions, max_depth, limit, offset, now)

    def delete_items(self, namespace: Namespace | str, keys: Iterable[tuple[Sequence[str], str]], *,
                     now: TimeLike = None) -> int:
        """Delete items and every version of their archived turns; returns how many were stored."""
        self._check_open()
        return self._items.delete(namespace, keys, now)

    def sweep_items(self, namespace: Namespace | str | None = None, *, now: TimeLike = None) -> int:
        """Remove the expired items (rows, vectors, turns) of a partition, or of the store; returns how many."""
        self._check_open()
        return self._items.sweep(namespace, now)

    async def aput_items(self, namespace: Namespace | str, items: Iterable[ItemPut | Mapping[str, Any]], *,
                         now: TimeLike = None) -> int:
        """Async twin of :meth:`put_items`."""
        return await asyncio.to_thread(self.put_items, namespace, list(items), now=now)

    async def aget_items(self, namespace: Namespace | str, keys: Iterable[tuple[Sequence[str], str]], *,
                         refresh_ttl: bool = False, now: TimeLike = None) -> list[StoredItem | None]:
        """Async twin of :meth:`get_items`."""
        return await asyncio.to_thread(self.get_items, namespace, list(keys), refresh_ttl=refresh_ttl, now=now)

    async def asearch_items(self, namespace: Namespace | str, prefix: Sequence[str] = (), *,
                            query: str | None = None, query_vector: Sequence[float] | None = None,
                            filter: Mapping[str, Any] | None = None, limit: int = 10, offset: int = 0,
                            refresh_ttl: bool = False, now: TimeLike = None) -> list[StoredItem]:
        """Async twin of :meth:`search_items`."""
        return await asyncio.to_thread(self.search_items, namespace, prefix, query=query, query_vector=query_vector,
                                       filter=filter, limit=limit, offset=offset, refresh_ttl=refresh_ttl, now=now)

    async def alist_item_namespaces(self, namespace: Namespace | str, *,
                                    match_conditions: Iterable[MatchCondition] | None = None,
                                    max_depth: int | None = None, limit: int = 100, offset: int = 0,
                                    now: TimeLike = None) -> list[tuple[str, ...]]:
        """Async twin of :meth:`list_item_namespaces`."""
        return await asyncio.to_thread(self.list_item_namespaces, namespace, match_conditions=match_conditions,
                                       max_depth=max_depth, limit=limit, offset=offset, now=now)

    async def adelete_items(self, namespace: Namespace | str, keys: Iterable[tuple[Sequence[str], str]], *,
                            now: TimeLike = None) -> int:
        """Async twin of :meth:`delete_items`."""
        return await asyncio.to_thread(self.delete_items, namespace, list(keys), now=now)

    async def asweep_items(self, namespace: Namespace | str | None = None, *, now: TimeLike = None) -> int:
        """Async twin of :meth:`sweep_items`."""
        return await asyncio.to_thread(self.sweep_items, namespace, now=now)

    # -- rebuilding (see memory_ext.ingest.reindex) --------------------------------------------------------------
    def reindex(self, namespace: Namespace | str | None = None, *, progress: bool | None = None) -> ReindexReport:
        """Rebuild every derived index of ``namespace`` (of the whole store if None) from the stored turns, with
        the engine's current switches and embedder (:mod:`memory_ext.ingest.reindex`); resumable, one transaction
        per namespace. ``progress``: a progress bar on stderr (default: when stderr is a terminal). A namespace
        reindexed searches like one freshly ingested with the same switches. To change the embedder, open the
        store with the new one and ``allow_embedder_change=True``, then reindex the whole store."""
        self._check_open()
        report = reindex_engine(self._store, self._writer, self._indexes, self.embedder, namespace,
                                progress=progress, vector_kind=self.vector_kind)
        stored = self._stored_kind()
        if stored is not None:  # a whole-store run may have changed the store's kind of turn vectors
            self.config = with_embedder_defaults(self._asked, self.embedder, stored_kind=stored)
            self._read.use_vectors(self.config, stored == MIXED)
        return report

    async def areindex(self, namespace: Namespace | str | None = None, *,
                       progress: bool | None = None) -> ReindexReport:
        """Async twin of :meth:`reindex`."""
        return await asyncio.to_thread(self.reindex, namespace, progress=progress)

    # -- the memory files (see memory_ext.lifecycle.api.Lifecycle) ------------------------------------------
    def hooks(self, namespace: Namespace | str, *, include_merged: bool = False) -> list[IndexHook]:
        """The namespace's index hooks (only those the prompt index shows unless ``include_merged``)."""
        return self._lifecycle.hooks(namespace, include_merged=include_merged)

    def render_prompt(self, namespace: Namespace | str, *, budget_tokens: int | None = None,
                      query: str | None = None) -> str:
        """A compact index of the namespace's memory files for a system prompt, within ``budget_tokens``
        (ranked by ``query`` when given); each line carries the hook id :meth:`retrieve` opens."""
        return self._lifecycle.render_prompt(namespace, budget_tokens=budget_tokens, query=query)

    def retrieve(self, hook_id: str, namespace: Namespace | str | None = None) -> MemoryFile:
        """The whole memory file of a hook id (or a unique prefix of at least 6 characters); counts the access."""
        return self._lifecycle.retrieve(hook_id, namespace)

    def set_importance(self, hook_id: str, importance: int, namespace: Namespace | str | None = None) -> IndexHook:
        """Set a file's importance (0-100); a user-set value is kept by merges and counts in the eviction."""
        return self._lifecycle.set_importance(hook_id, importance, namespace)

    def compact(self, namespace: Namespace | str, period: Literal["weekly", "monthly"], *,
                key: str | None = None, now: datetime | str | float | None = None) -> CompactionReport:
        """Merge a week's daily files (``"weekly"``) or evict a month's weekly files (``"monthly"``)."""
        return self._lifecycle.compact(namespace, period, key=key, now=now)

    def maybe_compact(self, namespace: Namespace | str, *,
                      now: datetime | str | float | None = None) -> CompactionReport:
        """Merge every finished week, then evict every finished month (cheap when nothing is due)."""
        return self._lifecycle.maybe_compact(namespace, now=now)

    def pre_compress(self, namespace: Namespace | str, full_context: str | list[Any] | dict[str, Any], *,
                     estimated_tokens: int | None = None, task_state: Mapping[str, Any] | None = None,
                     now: datetime | str | float | None = None) -> str:
        """Archive a host's whole context before it compresses it; returns the hook id of the saved file."""
        return self._lifecycle.pre_compress(namespace, full_context, estimated_tokens=estimated_tokens,
                                            task_state=task_state, now=now)

    # -- async twins ---------------------------------------------------------------------------------------
    async def aadd_turns(self, turns: Iterable[Turn | Mapping[str, Any]], namespace: Namespace | str, *,
                         wait: bool = False) -> AddResult:
        """Async twin of :meth:`add_turns` (runs in a worker thread)."""
        return await asyncio.to_thread(self.add_turns, list(turns), namespace, wait=wait)

    async def aflush(self, namespace: Namespace | str | None = None, *, timeout: float | None = None) -> bool:
        """Async twin of :meth:`flush`."""
        return await asyncio.to_thread(self.flush, namespace, timeout=timeout)

    async def asearch(self, query: str, namespace: Namespace | str, *, k: int = 10,
                      filters: Mapping[str, Any] | None = None,
                      action_state: ActionState | Mapping[str, Any] | None = None,
                      explain: bool = False, now: datetime | str | float | None = None,
                      trace: bool = False, include_cold: bool = False,
                      as_of: datetime | str | float | None = None, min_score: float | None = None) -> SearchResult:
        """Async twin of :meth:`search` (runs in a worker thread)."""
        return await asyncio.to_thread(self.search, query, namespace, k=k, filters=filters,
                                       action_state=action_state, explain=explain, now=now, trace=trace,
                                       include_cold=include_cold, as_of=as_of, min_score=min_score)

    async def aget_turns(self, namespace: Namespace | str, *, limit: int | None = None,
                         offset: int = 0) -> list[Turn]:
        """Async twin of :meth:`get_turns`."""
        return await asyncio.to_thread(self.get_turns, namespace, limit=limit, offset=offset)

    async def areplaced_turns(self, namespace: Namespace | str) -> frozenset[str]:
        """Async twin of :meth:`replaced_turns`."""
        return await asyncio.to_thread(self.replaced_turns, namespace)

    async def aforget(self, namespace: Namespace | str, *, record_ids: Iterable[str] | None = None,
                      hook_ids: Iterable[str] | None = None) -> ForgetReceipt:
        """Async twin of :meth:`forget`."""
        return await asyncio.to_thread(self.forget, namespace, record_ids=record_ids, hook_ids=hook_ids)

    async def apurge(self, *, wait_s: float = 0.0) -> tuple[str, ...]:
        """Async twin of :meth:`purge`."""
        return await asyncio.to_thread(self.purge, wait_s=wait_s)

    async def aexport(self, namespace: Namespace | str | None = None) -> list[dict[str, Any]]:
        """Async twin of :meth:`export` (the whole export, read in a worker thread)."""
        return await asyncio.to_thread(lambda: list(self.export(namespace)))

    async def aimport_records(self, lines: Iterable[str | Mapping[str, Any]] | Mapping[str, Any], *,
                              format: Literal["memory-ext", "mem0"] = "memory-ext", user_id: str | None = None,
                              wait: bool = False, progress: bool | None = None) -> ImportReport:
        """Async twin of :meth:`import_records`."""
        data = lines if isinstance(lines, Mapping) else list(lines)
        return await asyncio.to_thread(self.import_records, data, format=format, user_id=user_id, wait=wait,
                                       progress=progress)

    async def astats(self) -> StoreStats:
        """Async twin of :meth:`stats`."""
        return await asyncio.to_thread(self.stats)

    async def aoverview(self) -> list[NamespaceSummary]:
        """Async twin of :meth:`overview`."""
        return await asyncio.to_thread(self.overview)

    async def anamespaces(self) -> list[Namespace]:
        """Async twin of :meth:`namespaces`."""
        return await asyncio.to_thread(self.namespaces)

    async def ahooks(self, namespace: Namespace | str, *, include_merged: bool = False) -> list[IndexHook]:
        """Async twin of :meth:`hooks`."""
        return await asyncio.to_thread(self.hooks, namespace, include_merged=include_merged)

    async def arender_prompt(self, namespace: Namespace | str, *, budget_tokens: int | None = None,
                             query: str | None = None) -> str:
        """Async twin of :meth:`render_prompt`."""
        return await asyncio.to_thread(self.render_prompt, namespace, budget_tokens=budget_tokens, query=query)

    async def aretrieve(self, hook_id: str, namespace: Namespace | str | None = None) -> MemoryFile:
        """Async twin of :meth:`retrieve`."""
        return await asyncio.to_thread(self.retrieve, hook_id, namespace)

    async def aset_importance(self, hook_id: str, importance: int,
                              namespace: Namespace | str | None = None) -> IndexHook:
        """Async twin of :meth:`set_importance`."""
        return await asyncio.to_thread(self.set_importance, hook_id, importance, namespace)

    async def acompact(self, namespace: Namespace | str, period: Literal["weekly", "monthly"], *,
                       key: str | None = None, now: datetime | str | float | None = None) -> CompactionReport:
        """Async twin of :meth:`compact`."""
        return await asyncio.to_thread(self.compact, namespace, period, key=key, now=now)

    async def amaybe_compact(self, namespace: Namespace | str, *,
                             now: datetime | str | float | None = None) -> CompactionReport:
        """Async twin of :meth:`maybe_compact`."""
        return await asyncio.to_thread(self.maybe_compact, namespace, now=now)

    async def apre_compress(self, namespace: Namespace | str, full_context: str | list[Any] | dict[str, Any], *,
                            estimated_tokens: int | None = None, task_state: Mapping[str, Any] | None = None,
                            now: datetime | str | float | None = None) -> str:
        """Async twin of :meth:`pre_compress`."""
        return await asyncio.to_thread(self.pre_compress, namespace, full_context,
                                       estimated_tokens=estimated_tokens, task_state=task_state, now=now)

    async def aclose(self) -> None:
        """Async twin of :meth:`close`."""
        await asyncio.to_thread(self.close)

    async def __aenter__(self) -> MemoryEngine:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

