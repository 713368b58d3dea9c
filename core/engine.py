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
import json
import os
import sqlite3
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict

from .config import EngineConfig
from .embed import Embedder, HashingEmbedder, check_vectors, resolve_embedder
from .errors import (
    ConfigError,
    InvalidQueryError,
    InvalidTurnError,
    ReadOnlyStoreError,
    ValidationError,
)
from .ingest.derive import derive_turn_record, derive_windows, new_id
from .ingest.kinds import derive_kinds
from .ingest.layers import derive_layers
from .models import (
    ActionState,
    Namespace,
    SearchResult,
    Turn,
)
from .lifecycle.api import LifecycleMixin
from .lifecycle.files import archive_turns
from .lifecycle.forget import forget_turns
from .lifecycle.supersede import supersede
from .llm import LLM
from .plan.llm_planner import HeuristicPlanner, LLMPlanner, Planner
from .rank.rerank import LLMReranker, Reranker
from .recall.base import RecallContext, Recaller
from .recall.channels import build_channels, check_channel_config
from .registry import vector_backends
from .retrieval import ReadPipeline
from .store.graph import EntityGraph
from .store.evidence import EvidenceIndex
from .store.timeindex import TimeIndex
from .store.keyword import KeywordIndex
from .recall.sparse import SparseIndex, normalise
from .store import chroma as _chroma  # noqa: F401  (registers the backend; chromadb loads only when used)
from .store.catalog import RecordCatalog
from .store.sqlite import TruthStore
from .store.vector import VectorIndex
from .text import estimate_tokens

__all__ = ["AddResult", "ForgetReceipt", "MemoryEngine", "StoreStats"]

KIND_CONTEXT_TURNS = 8
"""Stored turns the derivation of procedures and failure patterns may look back at."""


class AddResult(BaseModel):
    """What ``add_turns`` wrote."""

    model_config = ConfigDict(frozen=True)
    turn_ids: tuple[str, ...]
    record_ids: tuple[str, ...]


class ForgetReceipt(BaseModel):
    """What ``forget`` removed, from every store (truth store, keyword, vector and graph indexes, memory files)."""

    model_config = ConfigDict(frozen=True)
    namespace: Namespace
    turns: int
    """Turns removed."""
    records: int
    """Records removed (turn records, windows), with their vectors, postings and graph entries."""
    turn_ids: tuple[str, ...] = ()
    record_ids: tuple[str, ...] = ()
    files_deleted: tuple[str, ...] = ()
    """Memory files (hook ids) deleted: those named, and those left empty."""
    files_updated: tuple[str, ...] = ()
    """Memory files that lost turns; their hooks were recomputed from what remains."""
    stores: tuple[str, ...] = ()
    """The stores the removal went through."""


class StoreStats(BaseModel):
    """Counts and sizes of a store."""

    model_config = ConfigDict(frozen=True)
    path: str
    namespaces: int
    turns: int
    records: int
    vectors: int
    embedder_id: str | None
    vector_backend: str
    disk_bytes: int


def _embedder_for_stored_id(stored: str | None) -> Embedder | str | None:
    """When no embedder is given, reopen a store with the embedder that built it (if it is a built-in)."""
    if stored is None:
        return None
    if stored.startswith("hashing-v1:"):
        return HashingEmbedder(dim=int(stored.split(":")[1]))
    return None


class MemoryEngine(LifecycleMixin):
    """Long-term memory over one store directory.

    Open it with :meth:`open`; write with :meth:`add_turns`; read with :meth:`search`; remove with
    :meth:`forget`. Turns are archived into daily memory files whose hooks :meth:`render_prompt` shows and
    :meth:`retrieve` opens; :meth:`compact` / :meth:`maybe_compact` merge them weekly and evict monthly;
    :meth:`pre_compress` saves a host's whole context. See the module docstring for a runnable example.
    """

    def __init__(self, store: TruthStore, config: EngineConfig, embedder: Embedder | None,
                 embedder_warning: str | None, llm: LLM | None = None, reranker: Reranker | None = None) -> None:
        self._store = store
        self.llm = llm
        self._reranker: Reranker | None = None
        if config.globals.rerank_enabled:
            self._reranker = reranker if reranker is not None else LLMReranker(llm) if llm is not None else None
        self._planner: Planner = HeuristicPlanner()
        if config.globals.llm_planner_enabled and llm is not None:
            self._planner = LLMPlanner(llm, timeout_s=config.recall.planner_timeout_s)
        self.config = config
        self.embedder = embedder
        self._embedder_warning = embedder_warning
        self._keyword = KeywordIndex()
        self._catalog = RecordCatalog()
        self._graph = EntityGraph()
        self._time = TimeIndex()
        self._evidence = EvidenceIndex()
        self._sparse = SparseIndex()
        store.add_schema(KeywordIndex.create_schema)
        store.add_schema(EntityGraph.create_schema)
        store.add_schema(TimeIndex.create_schema)
        store.add_schema(EvidenceIndex.create_schema)
        store.add_schema(SparseIndex.create_schema)
        self._vector: VectorIndex | None = None
        if config.globals.vector_enabled and embedder is not None:
            backend = vector_backends.resolve("storage.vector_backend", config.storage.vector_backend)
            self._vector = backend(storage=config.storage, directory=store.directory, embedder_id=embedder.id,
                                   dim=embedder.dim, store_id=store.store_id)
        ctx = RecallContext(store=store, keyword_index=self._keyword, vector_index=self._vector, embedder=embedder,
                            graph_index=self._graph, time_index=self._time, evidence_index=self._evidence,
                            sparse_index=self._sparse)
        channels = build_channels(config, ctx)
        self._recallers: dict[str, Recaller] = channels.recallers
        self._pool = ThreadPoolExecutor(max_workers=max(4, 4 * len(self._recallers)),
                                        thread_name_prefix="memory-ext-recall")
        self._read = ReadPipeline(store=store, catalog=self._catalog, channels=channels, pool=self._pool,
                                  planner=self._planner, config=config, reranker=self._reranker,
                                  vector_index=self._vector, evidence_index=self._evidence,
                                  embedder_warning=embedder_warning)
        self._closed = False

    # -- construction ----------------------------------------------------------------------------------------
    @classmethod
    def open(cls, path: str | os.PathLike[str] | None = None, *,
             config: EngineConfig | Mapping[str, Any] | str | os.PathLike[str] | None = None,
             embedder: Embedder | str | None = None, read_only: bool = False,
             llm: LLM | None = None, reranker: Reranker | None = None) -> MemoryEngine:
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
        cfg = EngineConfig.coerce(config if not isinstance(config, os.PathLike) else Path(config))
        _validate_config(cfg)
        if cfg.globals.llm_planner_enabled and llm is None:
            raise ConfigError("globals.llm_planner_enabled", True,
                              "pass an LLM: MemoryEngine.open(..., llm=...) (for example LangChainLLM(chat_model))")
        if cfg.globals.rerank_enabled and reranker is None and llm is None:
            raise ConfigError("globals.rerank_enabled", True,
                              "pass a reranker (MemoryEngine.open(..., reranker=CallableReranker(fn, id=...))) or an "
                              "llm to rerank with")
        if reranker is not None and not isinstance(reranker, Reranker):
            raise ConfigError("reranker", reranker, "pass an object with id and rerank(query, candidates, timeout=)")
        if llm is not None and not isinstance(llm, LLM):
            raise ConfigError("llm", llm, "pass an object with id and complete(prompt, ...) (memory_ext.llm.LLM)")
        directory = Path(path).expanduser() if path is not None else Path("~/.memory_ext").expanduser()
        store = TruthStore(directory, read_only=read_only)
        try:
            emb: Embedder | None = None
            warning: str | None = None
            if cfg.globals.vector_enabled:
                stored = store.get_meta("embedder_id")
                emb, warning = resolve_embedder(embedder if embedder is not None
                                                else _embedder_for_stored_id(stored))
                store.check_embedder(emb.id)  # refuses to mix embedders (also a fallback in an e5 store)
            return cls(store, cfg, emb, warning, llm, reranker)
        except BaseException:
            store.close()
            raise

    def close(self) -> None:
        """Release the store (and its writer lock) and the worker threads. Idempotent."""
        if self._closed:
            return
        self._closed = True
        self._pool.shutdown(wait=False, cancel_futures=True)
        if self._vector is not None:
            self._vector.close()
        self._store.close()

    def __enter__(self) -> MemoryEngine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def path(self) -> Path:
        """The store directory."""
        return self._store.directory

    # -- write path ------------------------------------------------------------------------------------------
    def add_turns(self, turns: Iterable[Turn | Mapping[str, Any]], namespace: Namespace | str) -> AddResult:
        """Store turns losslessly and index them, in one transaction (all or nothing).

        ``turns`` are :class:`Turn` objects or mappings with at least ``role`` and ``content``. A turn without a
        timestamp gets the current time; one without a session gets ``namespace.session_id``. Invalid input
        raises a :class:`~memory_ext.errors.ValidationError` naming the field, the value and the fix, and
        nothing is written.
        """
        self._check_open()
        ns = Namespace.coerce(namespace)
        if isinstance(turns, (Turn, Mapping, str, bytes)):
            raise InvalidTurnError("turns", turns, "pass a list of turns, even for a single turn")
        items = [Turn.coerce(t, i) for i, t in enumerate(turns)]  # type: ignore[arg-type]
        limits = self.config.limits
        if len(items) > limits.max_batch_turns:
            raise InvalidTurnError("turns", f"<{len(items)} turns>",
                                   f"split into batches of at most {limits.max_batch_turns} (limits.max_batch_turns)")
        for i, t in enumerate(items):
            if len(t.content) > limits.max_content_chars:
                raise InvalidTurnError(f"turns[{i}].content", t.content,
                                       f"content has {len(t.content)} characters; the limit is "
                                       f"{limits.max_content_chars} (limits.max_content_chars): split the turn")
        if not items:
            return AddResult(turn_ids=(), record_ids=())
        given_ids = [t.id for t in items if t.id is not None]
        if len(given_ids) != len(set(given_ids)):
            dup = next(i for i in given_ids if given_ids.count(i) > 1)
            raise InvalidTurnError("turns[].id", dup, "turn ids must be unique; omit id to get a fresh one")
        now = datetime.now(UTC)
        turn_rows = []
        for t in items:
            ts = t.timestamp or now
            turn_rows.append({
                "id": t.id or new_id("turn"), "session_id": t.session_id or ns.session_id, "role": t.role.value,
                "speaker": t.speaker, "content": t.content, "ts": ts.timestamp(), "external_id": t.external_id,
                "tool_calls": list(t.tool_calls), "attachments": list(t.attachments), "metadata": dict(t.metadata),
                "token_count": estimate_tokens(t.content),
            })
        with self._store.write_lock:  # one writer at a time: the stored tail cannot change under us
            if self._store.read_only:
                raise ReadOnlyStoreError("add_turns")
            known_ns = self._store.find_namespace(ns.key)
            context = self._store.tail_turns(self._store.reader(), known_ns, KIND_CONTEXT_TURNS) \
                if known_ns is not None else []
            tail = context[-2:]  # windows need the last two stored turns
            records = [derive_turn_record(r) for r in turn_rows]
            ingest = self.config.ingest
            windows = derive_windows(tail + turn_rows, first_center=len(tail) - 1) if ingest.windows else []
            derived = derive_layers(turn_rows, min_chars=ingest.layer_min_chars) \
                if self.config.globals.layers_index_enabled else []
            if ingest.derived_kinds:
                derived += derive_kinds(context + turn_rows, first=len(context))
            anchored = windows + derived  # records that are evidence for the turn they are anchored to
            all_records = records + anchored
            vectors = None
            if self._vector is not None and self.embedder is not None:
                mean = ingest.window_vectors == "mean"
                embed = records + ([] if mean else windows) + derived
                texts = [r["index_text"] for r in embed]
                vectors = check_vectors(self.embedder, self.embedder.embed_documents(texts), len(texts))
                if mean and windows:
                    n = len(records)
                    vectors = np.vstack([vectors[:n], self._mean_window_vectors(known_ns, windows, turn_rows,
                                                                               vectors[:n], tail), vectors[n:]])
            sparse = normalise(self.embedder.embed_sparse([r["text"] for r in records])) \
                if "sparse" in self._recallers else None  # type: ignore[union-attr]
            with self._store.transaction("add_turns") as conn:
                ns_id = self._store.ensure_namespace(conn, ns.key)
                seq = self._store.next_seq(conn, ns_id)
                for offset, row in enumerate(turn_rows):
                    row["seq"] = seq + offset
                try:
                    try:
                        self._store.insert_turns(conn, ns_id, turn_rows)
                    except sqlite3.IntegrityError as exc:
                        raise InvalidTurnError("turns[].id", [t.id for t in items if t.id],
                                               "turn ids must be unique in the store; omit id to get a fresh one "
                                               f"({exc})") from None
                    rids = self._store.insert_records(conn, ns_id, records)
                    rid_of = {t["id"]: t["rid"] for t in context}
                    rid_of.update({r["turn_ids"][0]: rid for r, rid in zip(records, rids, strict=True)})
                    for w in anchored:
                        w["anchor_rid"] = rid_of[w["anchor_turn_id"]]
                    rids += self._store.insert_records(conn, ns_id, anchored)
                    self._keyword.add(conn, ns_id, list(zip(rids, (r["index_text"] for r in all_records),
                                                            strict=True)))
                    if vectors is not None and self._vector is not None and self.embedder is not None:
                        self._store.insert_embeddings(conn, ns_id, rids, vectors, self.embedder.id)
                        self._vector.add(conn, ns_id, rids, vectors)
                    if sparse is not None:
                        self._sparse.add(conn, ns_id, rids[:len(records)], sparse)
                    self._time.add(conn, ns_id, [(rid, r["text"], r["ref_ts"])
                                                 for rid, r in zip(rids, records, strict=False)])
                    names = self._graph.entities_for(conn, ns_id, [(r["text"], r["speaker"]) for r in records])
                    self._graph.add(conn, ns_id, list(zip(rids[:len(records)], names,
                                                          (r["ref_ts"] for r in records), strict=True)))
                    prev = context[-1:]  # ±1 neighbours of the same session, the last stored turn too
                    seq_rows = prev + turn_rows
                    if self.config.globals.evidence_enabled:  # the costliest index: only when it is searched
                        self._evidence.add(conn, ns_id, [
                            {"rid": rid, "text": r["text"], "speaker": r["speaker"], "ref_ts": r["ref_ts"],
                             "session_id": r["session_id"], "entities": names[i],
                             "neighbours": [seq_rows[j]["content"] for j in (i + len(prev) - 1, i + len(prev) + 1)
                                            if 0 <= j < len(seq_rows)
                                            and seq_rows[j]["session_id"] == r["session_id"]]}
                            for i, (rid, r) in enumerate(zip(rids, records, strict=False))])
                    life = self.config.lifecycle
                    if life.archive:
                        archived = conn.execute("SELECT tid, ts, content FROM turns WHERE ns_id=? AND seq>=?"
                                                " ORDER BY seq", (ns_id, seq)).fetchall()
                        archive_turns(conn, ns_id, archived, soft_tokens=life.file_soft_tokens)
                    if life.supersession:
                        supersede(conn, ns_id, records, rids[:len(records)])
                except BaseException:
                    self._keyword.invalidate(ns_id)
                    self._graph.invalidate(ns_id)
                    self._time.invalidate(ns_id)
                    self._evidence.invalidate(ns_id)
                    self._sparse.invalidate(ns_id)
                    self._catalog.invalidate(ns_id)
                    if self._vector is not None:
                        self._vector.invalidate(ns_id)
                    raise
        return AddResult(turn_ids=tuple(r["id"] for r in turn_rows), record_ids=tuple(r["id"] for r in records))

    def _mean_window_vectors(self, ns_id: int | None, windows: Sequence[dict[str, Any]],
                             turn_rows: Sequence[dict[str, Any]], vectors: np.ndarray,
                             tail: Sequence[dict[str, Any]]) -> np.ndarray:
        """Window vectors as the normalised mean of their turns' vectors (new turns' from ``vectors``)."""
        by_turn = {row["id"]: vectors[i] for i, row in enumerate(turn_rows)}
        missing = [t["rid"] for t in tail if t["id"] not in by_turn]
        if missing and ns_id is not None:
            stored = self._store.vectors_by_rid(ns_id, missing)
            by_turn.update({t["id"]: stored[t["rid"]] for t in tail if t["rid"] in stored})
        out = []
        for w in windows:
            members = [by_turn[t] for t in w["turn_ids"] if t in by_turn]
            out.append(np.mean(members, axis=0))
        assert self.embedder is not None
        return check_vectors(self.embedder, np.asarray(out, np.float32), len(windows))

    # -- read path -------------------------------------------------------------------------------------------
    def search(self, query: str, namespace: Namespace | str, *, k: int = 10,
               filters: Mapping[str, Any] | None = None, action_state: ActionState | Mapping[str, Any] | None = None,
               explain: bool = False, now: datetime | str | float | None = None,
               trace: bool = False, include_cold: bool = False,
               as_of: datetime | str | float | None = None) -> SearchResult:
        """Find the turns that help with ``query`` (and, if given, with what the agent is doing).

        The heuristic planner classifies the question, reads a time filter (relative to ``now``, default the
        current time) and the speakers it names, and adds a route for the ``action_state``. For every route the
        channels (keyword BM25, vector) run in parallel over turn and window records; their scores are fused
        (``recall.fusion``, see :mod:`memory_ext.rank.zscore`) into one score per turn, and the routes are summed.
        ``filters`` keys: ``session_id``, ``speaker``, ``role``, ``since``, ``until``, ``kinds``.
        ``include_cold=True`` also searches the cold tier (turns the monthly eviction moved out of the main
        memory). ``as_of`` returns what was true then: only memories stated by that time and not yet superseded
        at it; without it, a superseded memory always ranks below the one that replaced it. ``trace=True``
        attaches :attr:`SearchResult.trace` (plan, per-route candidates, stage timings; in memory only).
        A channel that fails or times out is listed in ``channel_errors`` (``degraded`` is then True); only if
        every channel fails does this raise :class:`~memory_ext.errors.RetrievalError`.
        """
        self._check_open()
        return self._read.search(query, namespace, k=k, filters=filters, action_state=action_state, explain=explain,
                                 now=now, trace=trace, include_cold=include_cold, as_of=as_of)

    # -- reading turns back, forgetting, stats -------------------------------------------------------------
    def get_turns(self, namespace: Namespace | str, *, limit: int | None = None, offset: int = 0) -> list[Turn]:
        """The stored turns of a namespace (of its session, if it names one), oldest first."""
        self._check_open()
        ns = Namespace.coerce(namespace)
        ns_id = self._store.find_namespace(ns.key)
        if ns_id is None:
            return []
        rows = self._store.list_turns(ns_id, ns.session_id, limit, offset)
        return [Turn(role=r.role, content=r.content, speaker=r.speaker, session_id=r.session_id,
                     timestamp=datetime.fromtimestamp(r.ts, UTC) if r.ts is not None else None,
                     external_id=r.external_id, tool_calls=tuple(r.tool_calls), attachments=tuple(r.attachments),
                     metadata=r.metadata, id=r.id) for r in rows]

    def forget(self, namespace: Namespace | str, *, record_ids: Iterable[str] | None = None,
               hook_ids: Iterable[str] | None = None) -> ForgetReceipt:
        """Remove memories from every store and return a receipt of what was removed.

        With only ``namespace``: the whole namespace (or, if it names a session, that session). With
        ``record_ids`` (ids of search results): the turns those records were built from. With ``hook_ids``: the
        memory files and every turn in them. In every case the turns go, with every record built from them
        (turn records, windows), their vectors (numpy or Chroma), keyword postings, graph entries, claims, and
        their place in memory files — files left empty are deleted, the others get their hooks recomputed, and
        verbatim ``pre_compress`` context has their text cut out. SQLite overwrites deleted content
        (``secure_delete``) and its write-ahead log is truncated, so the text is gone from disk too.
        Unknown ids raise :class:`~memory_ext.errors.ValidationError` and nothing is removed.
        """
        self._check_open()
        ns = Namespace.coerce(namespace)
        records = _id_list("record_ids", record_ids)
        hooks = _id_list("hook_ids", hook_ids)
        ns_id = self._store.find_namespace(ns.key)
        if ns_id is None:
            if records or hooks:
                raise InvalidQueryError("record_ids" if records else "hook_ids", records or hooks,
                                        "this namespace has no memories; check the namespace")
            return ForgetReceipt(namespace=ns, turns=0, records=0)
        with self._store.write_lock:
            if self._store.read_only:
                raise ReadOnlyStoreError("forget")
            reader = self._store.reader()
            drop_files: list[int] = []
            if records is None and hooks is None:
                sql, args = "SELECT tid FROM turns WHERE ns_id=?", [ns_id]
                if ns.session_id is not None:
                    sql += " AND session_id=?"
                    args.append(ns.session_id)
                tids = [int(r[0]) for r in reader.execute(sql, args)]
                if ns.session_id is None:
                    drop_files = [int(r[0]) for r in reader.execute("SELECT fid FROM files WHERE ns_id=?", (ns_id,))]
            else:
                tids = []
                for rid_text in records or []:
                    row = reader.execute("SELECT turn_ids FROM records WHERE ns_id=? AND id=?",
                                         (ns_id, rid_text)).fetchone()
                    if row is None:
                        raise InvalidQueryError("record_ids", rid_text, "no record of this namespace has this id; "
                                                "use the ids of search results (RetrievedItem.id)")
                    ids = json.loads(row[0])
                    tids += [int(r[0]) for r in reader.execute(
                        f"SELECT tid FROM turns WHERE ns_id=? AND id IN ({','.join('?' * len(ids))})", (ns_id, *ids))]
                for hook_id in hooks or []:
                    file_row = self._resolve(hook_id, ns)
                    drop_files.append(file_row.fid)
                    tids += [int(r[0]) for r in reader.execute("SELECT tid FROM file_turns WHERE fid=?",
                                                                (file_row.fid,))]
            partial = not (records is None and hooks is None and ns.session_id is None)
            # event frames of the forgotten turns' neighbours name their entities (only if evidence was indexed)
            neighbours = _neighbour_tids(reader, ns_id, tids) \
                if partial and self._evidence.record_count(reader, ns_id) else []
            with self._store.transaction("forget") as conn:
                removed = forget_turns(conn, ns_id, tids, drop_files=drop_files)
                if neighbours:  # their event frames named the forgotten turns' entities: index them again
                    self._evidence.add(conn, ns_id, _evidence_items(conn, ns_id, neighbours))
                rids = removed["rids"]
                whole = records is None and hooks is None and ns.session_id is None
                if whole:
                    self._keyword.drop_namespace(conn, ns_id)
                    self._graph.drop_namespace(conn, ns_id)
                    self._time.drop_namespace(conn, ns_id)
                    self._evidence.drop_namespace(conn, ns_id)
                    self._sparse.drop_namespace(conn, ns_id)
                    conn.execute("DELETE FROM claims WHERE ns_id=?", (ns_id,))
                else:
                    self._keyword.remove(conn, ns_id, rids)
                    self._graph.remove(conn, ns_id, rids)
                    self._time.remove(conn, ns_id, rids)
                    self._evidence.remove(conn, ns_id, rids)
                    self._sparse.remove(conn, ns_id, rids)
                if self._vector is not None:
                    self._vector.remove(conn, ns_id, rids)
            try:
                self._store.checkpoint()
            except sqlite3.Error:  # pragma: no cover - a reader holds the log; the next checkpoint truncates it
                pass
        self._keyword.invalidate(ns_id)
        self._graph.invalidate(ns_id)
        self._time.invalidate(ns_id)
        self._evidence.invalidate(ns_id)
        self._sparse.invalidate(ns_id)
        self._catalog.invalidate(ns_id)
        if self._vector is not None:
            self._vector.invalidate(ns_id)
        return ForgetReceipt(namespace=ns, turns=len(removed["turn_ids"]), records=len(rids),
                             turn_ids=tuple(removed["turn_ids"]), record_ids=tuple(removed["record_ids"]),
                             files_deleted=tuple(removed["deleted_files"]),
                             files_updated=tuple(removed["updated_files"]),
                             stores=("truth", "keyword", "graph", "time", "evidence") + (("vector:" + self.config.storage.vector_backend,)
                                                             if self._vector is not None else ()) + ("files",))

    def stats(self) -> StoreStats:
        """Counts and on-disk size of the store."""
        self._check_open()
        return StoreStats(path=str(self._store.directory), namespaces=len(self._store.namespaces()),
                          turns=self._store.count("turns"), records=self._store.count("records"),
                          vectors=self._store.count("embeddings"), embedder_id=self._store.get_meta("embedder_id"),
                          vector_backend=self.config.storage.vector_backend if self._vector else "off",
                          disk_bytes=self._store.disk_bytes())

    def namespaces(self) -> list[Namespace]:
        """Every (user_id, agent_id) partition in the store."""
        self._check_open()
        return [Namespace(u, a or None) for _, u, a in self._store.namespaces()]

    def _check_open(self) -> None:
        if self._closed:
            raise ValidationError("engine", "closed", "open a new engine with MemoryEngine.open(path)")

    # -- async twins ---------------------------------------------------------------------------------------
    async def aadd_turns(self, turns: Iterable[Turn | Mapping[str, Any]], namespace: Namespace | str) -> AddResult:
        """Async twin of :meth:`add_turns` (runs in a worker thread)."""
        return await asyncio.to_thread(self.add_turns, list(turns), namespace)

    async def asearch(self, query: str, namespace: Namespace | str, *, k: int = 10,
                      filters: Mapping[str, Any] | None = None,
                      action_state: ActionState | Mapping[str, Any] | None = None,
                      explain: bool = False, now: datetime | str | float | None = None,
                      trace: bool = False, include_cold: bool = False,
                      as_of: datetime | str | float | None = None) -> SearchResult:
        """Async twin of :meth:`search` (runs in a worker thread)."""
        return await asyncio.to_thread(self.search, query, namespace, k=k, filters=filters,
                                       action_state=action_state, explain=explain, now=now, trace=trace,
                                       include_cold=include_cold, as_of=as_of)

    async def aget_turns(self, namespace: Namespace | str, *, limit: int | None = None,
                         offset: int = 0) -> list[Turn]:
        """Async twin of :meth:`get_turns`."""
        return await asyncio.to_thread(self.get_turns, namespace, limit=limit, offset=offset)

    async def aforget(self, namespace: Namespace | str, *, record_ids: Iterable[str] | None = None,
                      hook_ids: Iterable[str] | None = None) -> ForgetReceipt:
        """Async twin of :meth:`forget`."""
        return await asyncio.to_thread(self.forget, namespace, record_ids=record_ids, hook_ids=hook_ids)

    async def astats(self) -> StoreStats:
        """Async twin of :meth:`stats`."""
        return await asyncio.to_thread(self.stats)

    async def anamespaces(self) -> list[Namespace]:
        """Async twin of :meth:`namespaces`."""
        return await asyncio.to_thread(self.namespaces)

    async def aclose(self) -> None:
        """Async twin of :meth:`close`."""
        await asyncio.to_thread(self.close)

    async def __aenter__(self) -> MemoryEngine:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


# -- pure helpers ---------------------------------------------------------------------------------------------
def _validate_config(cfg: EngineConfig) -> None:
    """Resolve every implementation name and check the switches; raise ConfigError listing valid names."""
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


def _neighbour_tids(conn: sqlite3.Connection, ns_id: int, tids: Sequence[int]) -> list[int]:
    """Turns of the same session right before or after the given ones (and not among them)."""
    gone = set(tids)
    out: set[int] = set()
    for tid in tids:
        row = conn.execute("SELECT seq, session_id FROM turns WHERE tid=? AND ns_id=?", (tid, ns_id)).fetchone()
        if row is None:
            continue
        for r in conn.execute("SELECT tid, session_id FROM turns WHERE ns_id=? AND seq IN (?, ?)",
                              (ns_id, row[0] - 1, row[0] + 1)):
            if r[1] == row[1] and r[0] not in gone:
                out.add(int(r[0]))
    return sorted(out)


def _evidence_items(conn: sqlite3.Connection, ns_id: int, tids: Sequence[int]) -> list[dict[str, Any]]:
    """Evidence-index items of the turn records of ``tids``, with their current ±1 neighbours."""
    items = []
    for tid in tids:
        row = conn.execute("SELECT t.seq, t.session_id, t.record_rid, r.text, r.speaker, r.ref_ts FROM turns t"
                           " JOIN records r ON r.rid = t.record_rid WHERE t.tid=? AND t.ns_id=?",
                           (tid, ns_id)).fetchone()
        if row is None:
            continue
        seq, session, rid, text, speaker, ref_ts = row
        near = [r[0] for r in conn.execute("SELECT content FROM turns WHERE ns_id=? AND session_id IS ? AND seq IN"
                                           " ((SELECT MAX(seq) FROM turns WHERE ns_id=? AND seq<?),"
                                           "  (SELECT MIN(seq) FROM turns WHERE ns_id=? AND seq>?))",
                                           (ns_id, session, ns_id, seq, ns_id, seq))]
        items.append({"rid": int(rid), "text": text, "speaker": speaker, "ref_ts": ref_ts, "session_id": session,
                      "neighbours": near})
    return items


def _id_list(name: str, value: Iterable[str] | None) -> list[str] | None:
    if value is None:
        return None
    values = [value] if isinstance(value, str) else list(value) if isinstance(value, Iterable) else None
    if not values or not all(isinstance(v, str) and v for v in values):
        raise InvalidQueryError(name, value, "give a non-empty list of id strings (or None)")
    return values
