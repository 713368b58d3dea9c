"""The write pipeline: validate -> derive once -> persist, index and queue the model work in one transaction.

:meth:`WritePipeline.add` is what :meth:`memory_ext.MemoryEngine.add_turns` runs:

1. **validate** the batch (:func:`turn_rows`): typed errors naming the field, nothing written;
2. **derive** with no LLM and no model, once: a ``turn`` record per turn, ±1 ``window`` records, L0/L1
   ``layers`` of long turns, ``fact``/``preference``/``event``/``procedure``/``failure_pattern`` records; then,
   per turn record, its entities, time spans and evidence keys (:func:`index_records`); and the model work of
   each record (how its dense vector is made, whether it gets a sparse encoding);
3. **persist and index** in one transaction: turns, records, then every derived index of the engine's list
   (:class:`~memory_ext.store.base.DerivedIndex` — each stores what it is given; the
   :class:`~memory_ext.ingest.indexer.IndexQueue` among them queues the model work), the memory-file archive
   and supersession. Any failure rolls everything back and invalidates the indexes' caches.
4. the :class:`~memory_ext.ingest.indexer.Indexer` makes the vectors and sparse encodings afterwards, in the
   background (``ingest.background_indexing``) or before ``add`` returns.

No model runs in the foreground, except once per engine: its first write embeds its first record to check the
embedder's output (a broken embedder fails before anything is written; the indexer reuses that vector).

>>> import tempfile
>>> from memory_ext import MemoryEngine, Turn
>>> with MemoryEngine.open(tempfile.mkdtemp(), embedder="hashing") as engine:
...     engine.add_turns([Turn(role="user", content="I live in Porto.", speaker="Ana")], "ana").turn_ids[0][:5]
'turn_'
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from ..embed import Embedder, check_vectors
from ..errors import InvalidTurnError, ReadOnlyStoreError
from ..lifecycle.files import archive_turns
from ..lifecycle.supersede import supersede
from ..models import ChannelError, Namespace, Turn
from ..results import AddResult
from ..store.base import DerivedIndex, IndexedRecord, RecordBatch
from ..store.interface import Connection, StoreConflict
from ..store.sparse import SparseIndex
from ..text import estimate_tokens
from ..validate import check_json
from .derive import DerivedRecord, IngestTurn, derive_turn_record, derive_windows, new_id
from .evidence_keys import batch_entities, window_keys
from .fact_keys import augment_turn_keys
from .indexer import Indexer, Work, word_overlap
from .kinds import derive_kinds
from .layers import derive_layers

if TYPE_CHECKING:
    from ..config import EngineConfig, LimitsConfig
    from ..store.graph import EntityGraph
    from ..store.interface import TruthStore
    from ..store.repos.queue import QuarantinedWork
    from ..store.timeindex import TimeIndex
    from ..store.vector import VectorIndex

__all__ = ["KIND_CONTEXT_TURNS", "WritePipeline", "dedup_rows", "index_records", "stored_tail", "turn_rows"]

KIND_CONTEXT_TURNS = 8
SPARSE_WAIT_TURNS = 256
"""The most turns of a sparse-encoding backfill (a namespace's first excerpt search,
``ingest.sparse_encodings: on_demand``) a search waits for, up to ``ingest.search_wait_s``: a conversation's turns
are encoded in a few seconds; a shelf of manuals would hold every search of it for minutes, so past this the
searches read what is encoded while the rest is made in the background (``SearchResult.pending`` counts it)."""
"""Stored turns the derivation of procedures and failure patterns may look back at."""


def turn_rows(turns: Iterable[Turn | Mapping[str, Any]], ns: Namespace, limits: LimitsConfig,
              now: datetime) -> list[IngestTurn]:
    """Validate a batch and give each turn its stored form (id, session, timestamp, token count filled in)."""
    if isinstance(turns, (Turn, Mapping, str, bytes)) or not isinstance(turns, Iterable):
        raise InvalidTurnError("turns", turns, "pass a list of turns, even for a single turn")
    items = [Turn.coerce(t, i) for i, t in enumerate(turns)]  # type: ignore[arg-type]
    if len(items) > limits.max_batch_turns:
        raise InvalidTurnError("turns", f"<{len(items)} turns>",
                               f"split into batches of at most {limits.max_batch_turns} (limits.max_batch_turns)")
    for i, t in enumerate(items):
        if len(t.content) > limits.max_content_chars:
            raise InvalidTurnError(f"turns[{i}].content", t.content,
                                   f"content has {len(t.content)} characters; the limit is "
                                   f"{limits.max_content_chars} (limits.max_content_chars): split the turn")
        # stored as JSON text that every face reads back: Turn() refused NUL, lone surrogates and NaN; here the
        # configured caps (limits.max_metadata_depth, limits.max_metadata_bytes)
        check_json(f"turns[{i}].metadata", t.metadata, InvalidTurnError, max_depth=limits.max_metadata_depth,
                   max_bytes=limits.max_metadata_bytes, what="metadata")
        for name in ("tool_calls", "attachments"):
            for j, item in enumerate(getattr(t, name)):
                check_json(f"turns[{i}].{name}[{j}]", item, InvalidTurnError, max_depth=limits.max_metadata_depth,
                           what=name)
    given_ids = [t.id for t in items if t.id is not None]
    if len(given_ids) != len(set(given_ids)):
        dup = next(i for i in given_ids if given_ids.count(i) > 1)
        raise InvalidTurnError("turns[].id", dup, "turn ids must be unique; omit id to get a fresh one")
    return [IngestTurn(
        id=t.id or new_id("turn"), session_id=t.session_id or ns.session_id, role=t.role.value,
        speaker=t.speaker, content=t.content, ts=(t.timestamp or now).timestamp(), external_id=t.external_id,
        tool_calls=list(t.tool_calls), attachments=list(t.attachments), metadata=t.stored_metadata(),
        token_count=estimate_tokens(t.content),
    ) for t in items]


def index_records(records: Sequence[DerivedRecord], rids: Sequence[int], anchor_rids: Sequence[int | None],
                  *, turn_facets: Sequence[tuple[Sequence[str], Sequence[Any], Sequence[str] | None]]
                  ) -> list[IndexedRecord]:
    """Typed records for the indexes; the first ``len(turn_facets)`` records are the turn records and carry
    their ``(entities, time spans, evidence keys or None)``. A record's ``key_text`` (fact-augmented turn keys,
    ``ingest.fact_keys``) replaces its ``index_text`` for the indexes."""
    out = []
    for i, (r, rid, anchor) in enumerate(zip(records, rids, anchor_rids, strict=True)):
        ents, spans, keys = turn_facets[i] if i < len(turn_facets) else (None, None, None)
        out.append(IndexedRecord(
            rid=rid, kind=r.kind.value, text=r.text, index_text=r.key_text or r.index_text, speaker=r.speaker,
            session_id=r.session_id, ref_ts=r.ref_ts, anchor_rid=anchor,
            entities=None if ents is None else tuple(ents), time_spans=None if spans is None else tuple(spans),
            evidence_keys=None if keys is None else tuple(keys)))
    return out


def _content_key(turn: IngestTurn) -> tuple[Any, ...]:
    """What makes two turns identical for the consecutive dedup: everything stored but ids and time."""
    return (turn.role, turn.speaker, turn.content, turn.session_id,
            *(json.dumps(v, sort_keys=True, default=str) for v in (turn.tool_calls, turn.attachments, turn.metadata)))


def stored_tail(store: TruthStore, conn: Connection, ns_id: int, n: int) -> list[IngestTurn]:
    """The namespace's last ``n`` stored turns (oldest first), each with its turn record's ``rid``."""
    return [IngestTurn.from_row(row) for row in store.tail_turns(conn, ns_id, n)]


def dedup_rows(store: TruthStore, conn: Connection, ns: Namespace, rows: list[IngestTurn],
               consecutive: bool) -> tuple[tuple[str, ...], tuple[str, ...], list[IngestTurn]]:
    """Idempotent ingest: ``(id of each turn of the call, ids already stored, rows to write)``.

    A turn whose ``external_id`` the namespace already holds in the turn's session (or an earlier turn of the
    batch) is not written: its id is the stored turn's. With ``consecutive``, a turn without ``external_id``
    identical (role, speaker, content, session) to the turn just before it — the last stored one, or the previous
    turn of the batch — is not written either.
    One indexed lookup per batch (``turns(ns_id, external_id)``) and one tail read.
    """
    ns_id = store.namespace_id(conn, ns.key)
    wanted = [r.external_id for r in rows if r.external_id is not None]
    known = store.turns_with_external_ids(conn, ns_id, wanted) if ns_id is not None and wanted else {}
    tail = stored_tail(store, conn, ns_id, 1) if ns_id is not None and consecutive else []
    last = tail[0] if tail else None
    prev = None if last is None else (*_content_key(last), last.id)
    ids: list[str] = []
    existing: list[str] = []
    keep: list[IngestTurn] = []
    for r in rows:
        key = _content_key(r)
        ext = r.external_id
        stored = known.get((ext, r.session_id)) if ext is not None else \
            prev[-1] if consecutive and prev is not None and prev[:-1] == key else None
        if stored is not None:
            ids.append(stored)
            existing.append(stored)
            continue
        if ext is not None:
            known[(ext, r.session_id)] = r.id
        prev = (*key, r.id)
        ids.append(r.id)
        keep.append(r)
    return tuple(ids), tuple(dict.fromkeys(existing)), keep


@dataclass(frozen=True)
class _Prepared:
    """What a write derives before its transaction writes it (:meth:`WritePipeline._prepare`)."""

    records: list[DerivedRecord]
    """The turn records, one per turn."""
    anchored: list[DerivedRecord]
    """The records anchored to a turn: windows, layers, derived kinds."""
    context: list[IngestTurn]
    """The stored tail of the namespace the derivation read (the turns before these)."""
    work: list[tuple[Work, int]]
    """The ``(dense, sparse)`` model work of each record, turn records first (:meth:`WritePipeline._work`)."""


class WritePipeline:
    """Stores turns and derives and indexes their records (see the module docstring).

    ``indexes`` are every derived index the engine writes to, in order; ``graph`` and ``time`` among them give
    the entity keys and time spans a turn record is derived with. ``indexer`` (when the engine makes vectors or
    sparse encodings) drains the model work each write queues.
    """

    def __init__(self, store: TruthStore, config: EngineConfig, embedder: Embedder | None,
                 indexes: Sequence[DerivedIndex], *, vector: VectorIndex | None, graph: EntityGraph,
                 time: TimeIndex, sparse: bool, evidence: bool, indexer: Indexer | None = None) -> None:
        self._store = store
        self._config = config
        self._embedder = embedder
        self._indexes = tuple(indexes)
        self._sparse_index = next((i for i in self._indexes if isinstance(i, SparseIndex)), None)
        self._vector = vector
        self._graph = graph
        self._time = time
        self._sparse = sparse
        self._evidence = evidence
        self.indexer = indexer
        self._checked = False  # the embedder's output checked once (first write of this engine)

    def add(self, turns: Iterable[Turn | Mapping[str, Any]], ns: Namespace) -> AddResult:
        """Validate, derive, persist, index and queue the model work of one batch, all or nothing."""
        rows = turn_rows(turns, ns, self._config.limits, datetime.now(UTC))
        if not rows:
            return AddResult(turn_ids=(), record_ids=())
        store = self._store
        with store.namespace_lock(ns.key):  # one writer of the namespace at a time: its tail cannot change
            if store.read_only:
                raise ReadOnlyStoreError("add_turns")
            ids, existing, rows = dedup_rows(store, store.reader(), ns, rows, self._config.ingest.dedup_consecutive)
            if not rows:
                return AddResult(turn_ids=ids, record_ids=(), existing_ids=existing)
            prepared = self._prepare(store.reader(), rows, ns)
            with store.transaction("add_turns") as conn:
                self._write(conn, ns, rows, prepared)
        self._kick(prepared.work)
        return AddResult(turn_ids=ids, record_ids=tuple(r.id for r in prepared.records),
                         existing_ids=existing)

    def resume(self) -> None:
        """Start the indexer on the model work a previous writer left queued (closed early, or crashed)."""
        if self.indexer is not None and self.indexer.background and self._store.pending() > 0:
            self.indexer.notify()

    def close(self, timeout: float | None) -> None:
        """Let the indexer finish the queue for up to ``timeout`` seconds; the rest stays queued on disk."""
        if self.indexer is not None:
            self.indexer.close(timeout)

    def flush(self, ns: Namespace | None, timeout: float | None) -> bool:
        """Wait until ``ns`` (the whole store if None) is fully indexed: True, or False after ``timeout``."""
        if self.indexer is None:
            return True
        ns_id = None if ns is None else self._store.find_namespace(ns.key)
        return True if ns is not None and ns_id is None else self.indexer.wait(ns_id, timeout)

    def health(self, ns_id: int) -> list[ChannelError]:
        """What a search of ``ns_id`` misses for want of vectors: the embedder failing on everything (the work
        stays queued) and records of the namespace in quarantine (see :class:`~memory_ext.ingest.indexer.Indexer`)."""
        out: list[ChannelError] = []
        error = self.indexer.error if self.indexer is not None else None
        if error is not None:
            pending = self._store.pending(ns_id)
            if pending:
                out.append(ChannelError(channel="vector", error_type=type(error).__name__, message=(
                    f"the embedder fails ({error}); {pending} record(s) of this namespace wait for their vectors and"
                    " are found only by the channels that need no model until it recovers")))
        held = self._store.quarantined(ns_id)
        if held:
            out.append(ChannelError(channel="vector", error_type="Quarantined", message=(
                f"{len(held)} record(s) of this namespace have no vector (quarantined after {held[-1].attempts}"
                f" attempts; last error: {held[-1].error}): they are found only by the channels that need no"
                " model. `memext doctor` lists them; `memext reindex` retries them")))
        return out

    def quarantined(self, ns: Namespace | None) -> list[QuarantinedWork]:
        """The quarantined records of ``ns`` (of the store if None)."""
        if ns is None:
            return self._store.quarantined()
        ns_id = self._store.find_namespace(ns.key)
        return [] if ns_id is None else self._store.quarantined(ns_id)

    def pending(self, ns: Namespace | None) -> int:
        """Records of ``ns`` (of the store if None) whose model work is still queued."""
        if ns is None:
            return self._store.pending()
        ns_id = self._store.find_namespace(ns.key)
        return 0 if ns_id is None else self._store.pending(ns_id)

    def _sparse_deferred(self, conn: Connection, ns_id: int) -> bool:
        """True when the turns written now to ``ns_id`` get no sparse encoding yet (``ingest.sparse_encodings:
        on_demand`` and no excerpt search has asked the namespace for them)."""
        if self._config.ingest.sparse_encodings != "on_demand":
            return False
        index = self._sparse_index
        return not ((index is not None and index.has_rows(conn, ns_id)) or self._store.sparse_queued(conn, ns_id))

    def settle_search(self, ns_id: int, wait_s: float, *, sparse: Sequence[int] = (),
                      excerpt: bool = True) -> tuple[int, float | None]:
        """Before a search of ``ns_id``: :meth:`demand_sparse` of the turn records ``sparse`` when it is an
        excerpt search that found turns without a sparse encoding, else the indexer's wait for the namespace's
        queued vectors — and for an ``excerpt`` search, for its queued sparse encodings too, unless they are a
        backfill of more than :data:`SPARSE_WAIT_TURNS` turns (a search never stalls behind the encoding of a
        whole manual shelf: it reads what is encoded, and the rest comes in the background)."""
        if sparse:
            return self.demand_sparse(ns_id, sparse, wait_s)
        if self.indexer is None:
            return self._store.pending(ns_id), None
        return self.indexer.settle(ns_id, wait_s, dense_only=not excerpt or self._backfill(ns_id))

    def _backfill(self, ns_id: int) -> bool:
        """Whether more than :data:`SPARSE_WAIT_TURNS` records of ``ns_id`` wait for a sparse encoding alone."""
        store = self._store
        return store.pending(ns_id) - store.pending(ns_id, dense_only=True) > SPARSE_WAIT_TURNS

    def demand_sparse(self, ns_id: int, rids: Sequence[int], wait_s: float) -> tuple[int, float | None]:
        """An excerpt search of ``ns_id`` found turn records ``rids`` without a sparse encoding: queue them (from
        then on the namespace's turns are encoded at write, :meth:`_sparse_deferred`) and wait up to ``wait_s``
        for the namespace's queue, as a search after a write does (for its vectors only when the backfill is of
        more than :data:`SPARSE_WAIT_TURNS` turns). Returns ``(records still pending, ms waited
        or None)``; ``(pending, None)`` when this engine cannot make them (read-only, no indexer, no sparse
        encodings)."""
        store = self._store
        if self.indexer is None or not self._sparse or store.read_only:
            return store.pending(ns_id), None
        with store.namespace_lock(store.namespace_key(ns_id)), store.transaction("queue sparse") as conn:
            store.queue_sparse(conn, ns_id, rids)
        self._kick([(Work.NONE, 1)])
        return self.indexer.settle(ns_id, wait_s, dense_only=self._backfill(ns_id))

    def add_in(self, conn: Connection, turns: Iterable[Turn | Mapping[str, Any]],
               ns: Namespace, *, dedup: bool = True) -> AddResult:
        """:meth:`add` inside the caller's open write transaction (``store.transaction(...)``), which commits or
        rolls back everything together — so a caller such as ``pre_compress`` stays one transaction. Nothing is
        committed here; on an error the indexes' caches are invalidated and the caller's rollback undoes the rest.
        The queued model work starts once the caller's transaction has committed.
        """
        rows = turn_rows(turns, ns, self._config.limits, datetime.now(UTC))
        if not rows:
            return AddResult(turn_ids=(), record_ids=())
        if self._store.read_only:
            raise ReadOnlyStoreError("add_turns")
        ids: tuple[str, ...] = tuple(r.id for r in rows)
        existing: tuple[str, ...] = ()
        if dedup:
            ids, existing, rows = dedup_rows(self._store, conn, ns, rows, self._config.ingest.dedup_consecutive)
            if not rows:
                return AddResult(turn_ids=ids, record_ids=(), existing_ids=existing)
        prepared = self._prepare(conn, rows, ns)
        self._write(conn, ns, rows, prepared)
        self._store.after_commit(lambda: self._kick(prepared.work))
        return AddResult(turn_ids=ids, record_ids=tuple(r.id for r in prepared.records),
                         existing_ids=existing)

    def _prepare(self, conn: Connection, rows: list[IngestTurn], ns: Namespace) -> _Prepared:
        """Everything derived before the write: records and their model work (``conn`` reads the stored tail)."""
        known_ns = self._store.namespace_id(conn, ns.key)
        context = stored_tail(self._store, conn, known_ns, KIND_CONTEXT_TURNS) if known_ns is not None else []
        records, anchored, windows = self._derive(rows, context)
        work = self._work(records, anchored, windows)
        self._check_embedder(records)
        return _Prepared(records, anchored, context, work)

    def _write(self, conn: Connection, ns: Namespace, rows: list[IngestTurn],
               prepared: _Prepared) -> None:
        ns_id = self._store.ensure_namespace(conn, ns.key)
        try:
            self._persist(conn, ns_id, rows, prepared.records, prepared.anchored, prepared.context,
                          prepared.work)
        except BaseException:
            for index in self._indexes:
                index.invalidate(ns_id)
            raise

    def _kick(self, work: Sequence[tuple[Work, int]]) -> None:
        """Start the model work a committed write queued (in the background, or now)."""
        if self.indexer is None or not any(d or s for d, s in work):
            return
        if self.indexer.background:
            self.indexer.notify()
        else:  # a model that is down never fails a committed write: the work stays queued, searches say so
            with contextlib.suppress(Exception):
                self.indexer.drain()

    # -- steps -------------------------------------------------------------------------------------------------
    def _derive(self, rows: list[IngestTurn], context: list[IngestTurn]
                ) -> tuple[list[DerivedRecord], list[DerivedRecord], list[DerivedRecord]]:
        """Turn records; records anchored to a turn (windows, layers, derived kinds); the windows alone."""
        ingest = self._config.ingest
        tail = context[-2:]  # windows need the last two stored turns
        records = [derive_turn_record(r) for r in rows]
        windows = derive_windows(tail + rows, first_center=len(tail) - 1) if ingest.windows else []
        derived = derive_layers(rows, min_chars=ingest.layer_min_chars) \
            if self._config.globals.layers_index_enabled else []
        if ingest.derived_kinds:
            derived += derive_kinds(context + rows, first=len(context))
            if ingest.fact_keys:  # the turn's key = its text + the facts it states (ingest/fact_keys.py)
                augment_turn_keys(records, derived)
        return records, windows + derived, windows

    def _work(self, records: list[DerivedRecord], anchored: list[DerivedRecord],
              windows: list[DerivedRecord]) -> list[tuple[Work, int]]:
        """``(dense, sparse)`` model work of each record (turn records, then the anchored ones), for the queue:
        turns are embedded (and sparse-encoded); windows embedded or, with ``window_vectors: mean``, the mean
        of their turns' vectors; a derived record that is a near-copy of its turn reuses the turn's vector."""
        vectors = self._vector is not None and self._embedder is not None
        sparse = int(self._sparse and self._embedder is not None)
        if not vectors:
            return [(Work.NONE, sparse) for _ in records] + [(Work.NONE, 0) for _ in anchored]
        ingest = self._config.ingest
        window_mode = Work.MEAN if ingest.window_vectors == "mean" else Work.EMBED
        text_of = {r.turn_ids[0]: r.index_text for r in records}
        out = [(Work.EMBED, sparse) for _ in records] + [(window_mode, 0) for _ in windows]
        threshold = ingest.derived_copy_overlap
        for r in anchored[len(windows):]:
            turn_text = text_of.get(r.anchor_turn_id or "")
            copy = threshold is not None and turn_text is not None and \
                word_overlap(r.index_text, turn_text) >= threshold
            out.append((Work.COPY if copy else Work.EMBED, 0))
        return out

    def _check_embedder(self, records: list[DerivedRecord]) -> None:
        """The first write of an engine embeds its first record in the foreground, once: a broken embedder
        (wrong dimension, NaN) fails here, before anything is written. The indexer reuses that vector."""
        if self._checked or self._vector is None or self._embedder is None or not records:
            return
        text = records[0].index_text
        vector = check_vectors(self._embedder, self._embedder.embed_documents([text]), 1)[0]
        if self.indexer is not None:
            self.indexer.remember(text, vector)
        self._checked = True

    def _persist(self, conn: Connection, ns_id: int, rows: list[IngestTurn],
                 records: list[DerivedRecord], anchored: list[DerivedRecord], context: list[IngestTurn],
                 work: list[tuple[Work, int]], *, fresh: bool = True) -> list[int]:
        """Persist and index a batch; ``fresh=False`` (reindex): the turns and their memory files are stored
        already, only the records and the derived indexes are written. Returns the turn records' rids."""
        store = self._store
        seq = store.next_seq(conn, ns_id) if fresh else -1
        if fresh:
            rows = [replace(row, seq=seq + offset) for offset, row in enumerate(rows)]
            try:
                store.insert_turns(conn, ns_id, [row.as_row() for row in rows])
            except StoreConflict as exc:
                raise InvalidTurnError("turns[].id", [r.id for r in rows], f"{exc.fix} ({exc.detail})") from None
        rids = store.insert_records(conn, ns_id, [r.as_row() for r in records])
        turn_rids = list(rids)
        rid_of = {t.id: t.rid for t in context}
        rid_of.update({r.turn_ids[0]: rid for r, rid in zip(records, rids, strict=True)})
        anchors: list[int | None] = [*rids, *(rid_of[w.anchor_turn_id or ""] for w in anchored)]
        rids += store.insert_records(conn, ns_id, [r.as_row() for r in anchored], anchor_rids=anchors[len(records):])
        if any(sp for _, sp in work) and self._sparse_deferred(conn, ns_id):
            # made when an excerpt search first asks (demand_sparse); but a system turn (a manual, a policy page)
            # is reference text that an agent's long requests search: it is encoded now, not in a backfill that
            # would run while the agent works
            manual = [i < len(records) and records[i].source_role == "system" for i in range(len(work))]
            work = [(d, sp if m else 0) for (d, sp), m in zip(work, manual, strict=True)]
        batch = RecordBatch(
            index_records(records + anchored, rids, anchors, turn_facets=self._turn_facets(conn, ns_id, records,
                                                                                            rows, context)),
            extra={"queue": [(rid, d, sp) for rid, (d, sp) in zip(rids, work, strict=True) if d or sp]})
        for index in self._indexes:
            index.index(conn, ns_id, batch)
        life = self._config.lifecycle
        if life.archive and fresh:
            archive_turns(conn, ns_id, store.turns_from_seq(conn, ns_id, seq), soft_tokens=life.file_soft_tokens)
        if life.supersession:
            supersede(conn, ns_id, records, rids[:len(records)], derived=anchored,
                      derived_rids=rids[len(records):], frames=life.statement_frames)
        return turn_rids

    def rederive(self, conn: Connection, ns_id: int, rows: list[IngestTurn],
                 context: list[IngestTurn], record_ids: Mapping[str, str]) -> tuple[list[int], bool]:
        """Reindex: derive and index the records of stored turns ``rows`` (seq order, after ``context``, the
        turns re-derived just before them, each with its new turn record's ``rid``) inside the caller's
        transaction; a turn record keeps its id (``record_ids``: turn id -> record id). Returns the new turn
        records' rids and whether model work was queued (start it with :meth:`kick` after the commit)."""
        records, anchored, windows = self._derive(rows, context)
        records = [replace(r, id=record_ids.get(r.turn_ids[0], r.id)) for r in records]
        work = self._work(records, anchored, windows)
        self._check_embedder(records)
        turn_rids = self._persist(conn, ns_id, rows, records, anchored, context, work, fresh=False)
        return turn_rids, any(d or s for d, s in work)

    @property
    def vectors(self) -> bool:
        """True when this pipeline makes dense vectors."""
        return self._vector is not None and self._embedder is not None

    def kick(self) -> None:
        """Start the queued model work (in the background, or now)."""
        if self.indexer is not None:
            self._kick([(Work.EMBED, 0)])

    def _turn_facets(self, conn: Connection, ns_id: int, records: list[DerivedRecord],
                     rows: list[IngestTurn], context: list[IngestTurn]
                     ) -> list[tuple[list[str], list[Any], list[str] | None]]:
        """Entities, time spans and (when the evidence index is written) evidence keys of each turn record."""
        names = batch_entities([(r.text, r.speaker) for r in records], self._graph.known_keys(conn, ns_id))
        spans = [self._time.spans_of(r.text, r.ref_ts) for r in records]
        keys: list[list[str] | None] = [None] * len(records)
        if self._evidence:  # the costliest derivation: only when the evidence channel searches it
            prev = context[-1:]  # ±1 neighbours of the same session, the last stored turn too
            seq_rows = prev + rows
            keys = list(window_keys([
                {"text": r.text, "speaker": r.speaker, "ref_ts": r.ref_ts, "session_id": r.session_id,
                 "entities": names[i],
                 "neighbours": [seq_rows[j].content for j in (i + len(prev) - 1, i + len(prev) + 1)
                                if 0 <= j < len(seq_rows) and seq_rows[j].session_id == r.session_id]}
                for i, r in enumerate(records)]))
        return [(names[i], spans[i], keys[i]) for i in range(len(records))]
