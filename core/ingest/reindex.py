"""Reindex: rebuild every derived index of a store from its truth (the stored turns).

:func:`reindex` is what :meth:`memory_ext.MemoryEngine.reindex` and ``memext reindex`` run. For each namespace,
in one transaction: every record, vector, claim and derived-index entry of the namespace is dropped; the stored
turns are derived again in seq order, in batches, exactly as the write pipeline derives new turns — with the
engine's *current* switches (windows, layers, derived kinds, evidence, sparse) — and indexed; a turn record keeps
its id, a version replaced by ``update`` stays replaced and the cold tier stays cold. The memory files, the turns
and the history are untouched. The model work (vectors with the current embedder, sparse encodings) is queued in
the same transaction and made by the indexer; :func:`reindex` waits for it.

Resumable: a whole-store reindex keeps its progress in the ``meta`` table (``reindex_progress``: the namespaces
done), updated in each namespace's transaction; a reindex that was killed resumes where it stopped. When every
namespace is done, the store's ``embedder_id`` becomes the current embedder's: an embedder change is a reindex
(open the store with ``allow_embedder_change=True`` and the new embedder, then reindex).

>>> import tempfile
>>> from memory_ext import MemoryEngine, Turn
>>> with MemoryEngine.open(tempfile.mkdtemp(), embedder="hashing") as engine:
...     _ = engine.add_turns([Turn(role="user", content="I adopted a beagle called Toby")], "ana")
...     engine.reindex().namespaces
1
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict

from ..errors import InvalidArgumentError, ReadOnlyStoreError
from ..models import Namespace
from ..store.repos.meta import TURN_VECTORS_KEY
from ..store.tiers import set_cold
from .contextual import stored_vector_kind
from .derive import IngestTurn
from .pipeline import KIND_CONTEXT_TURNS

if TYPE_CHECKING:
    from ..embed import Embedder
    from ..store.base import DerivedIndex
    from ..store.interface import TruthStore
    from .pipeline import WritePipeline

__all__ = ["PROGRESS_KEY", "ReindexReport", "reindex", "reindex_engine"]

PROGRESS_KEY = "reindex_progress"
"""The ``meta`` row of a whole-store reindex in progress: ``{"done": [ns_id, ...]}``."""

BATCH_TURNS = 1000
"""Stored turns derived per batch."""


class ReindexReport(BaseModel):
    """What :meth:`MemoryEngine.reindex` rebuilt."""

    model_config = ConfigDict(frozen=True)
    namespaces: int
    """Namespaces rebuilt by this call."""
    turns: int
    """Turns derived again."""
    resumed: bool = False
    """True when this call continued a reindex that had stopped."""
    embedder_id: str | None = None
    """The embedder the vectors were made with (None: no vectors)."""


def reindex(store: TruthStore, writer: WritePipeline, indexes: Sequence[DerivedIndex], *,
            namespace: Namespace | None, embedder_id: str | None, progress: bool | None = None,
            vector_kind: str | None = None) -> ReindexReport:
    """Rebuild the derived indexes of ``namespace`` (every namespace if None); see the module docstring.
    ``progress``: a tqdm bar on stderr (None: only when stderr is a terminal). A whole-store run records
    ``embedder_id`` and ``vector_kind`` (how the writer makes turn vectors) as the store's."""
    if store.read_only:
        raise ReadOnlyStoreError("reindex")
    if namespace is not None:
        ns_id = store.find_namespace(namespace.key)
        targets = [] if ns_id is None else [ns_id]
        done: list[int] = []
        resumed = False
    else:
        marker = store.get_meta(PROGRESS_KEY)
        resumed = marker is not None
        done = list(json.loads(marker)["done"]) if marker else []
        targets = [n for n, _, _ in store.namespaces() if n not in done]
        if not resumed:
            with store.transaction("reindex") as conn:
                store.set_meta(conn, PROGRESS_KEY, json.dumps({"done": []}))
    show = sys.stderr.isatty() if progress is None else progress
    from tqdm import tqdm

    turns = 0
    for ns_id in tqdm(targets, desc="reindex", unit="namespace", disable=not show):
        turns += _rebuild(store, writer, indexes, ns_id, done if namespace is None else None)
        writer.kick()
        writer.flush(None, None)
    if namespace is None:
        with store.transaction("reindex") as conn:
            if embedder_id is not None:
                store.set_meta(conn, "embedder_id", embedder_id)
                if vector_kind is not None:
                    store.set_meta(conn, TURN_VECTORS_KEY, vector_kind)
            store.delete_meta(conn, PROGRESS_KEY)
    return ReindexReport(namespaces=len(targets), turns=turns, resumed=resumed, embedder_id=embedder_id)


def _rebuild(store: TruthStore, writer: WritePipeline, indexes: Sequence[DerivedIndex], ns_id: int,
             done: list[int] | None) -> int:
    """Rebuild one namespace in one transaction; ``done`` (whole-store run): the progress marker to extend."""
    try:
        with store.transaction("reindex") as conn:
            state = store.reindex_state(conn, ns_id)
            rows = [IngestTurn.from_row(row) for row in store.stored_turn_rows(conn, ns_id)]
            for index in indexes:
                index.drop_namespace(conn, ns_id)
            store.clear_records(conn, ns_id)
            context: list[IngestTurn] = []
            for start in range(0, len(rows), BATCH_TURNS):
                batch = rows[start:start + BATCH_TURNS]
                rids, _ = writer.rederive(conn, ns_id, batch, context, state["record_ids"])
                context = (context + [replace(r, rid=rid) for r, rid in zip(batch, rids, strict=True)]
                           )[-KIND_CONTEXT_TURNS:]
            for turn_id, valid_to, by in state["replaced"]:
                store.mark_replaced(conn, ns_id, turn_id, valid_to, by)
            set_cold(conn, ns_id, state["cold"], 1)
            if done is not None:
                done.append(ns_id)
                store.set_meta(conn, PROGRESS_KEY, json.dumps({"done": done}))
    finally:
        for index in indexes:
            index.invalidate(ns_id)
    return len(rows)


def reindex_engine(store: TruthStore, writer: WritePipeline, indexes: Sequence[DerivedIndex],
                   embedder: Embedder | None, namespace: Namespace | str | None, *,
                   progress: bool | None = None, vector_kind: str | None = None) -> ReindexReport:
    """:meth:`MemoryEngine.reindex <memory_ext.MemoryEngine.reindex>`: :func:`reindex` with the engine's embedder
    and kind of turn vectors (:func:`memory_ext.ingest.contextual.vector_kind`), refusing a namespace-only run
    when either changed (that rebuilds the whole store)."""
    ns = None if namespace is None else Namespace.coerce(namespace)
    embedder_id = None if embedder is None or not writer.vectors else embedder.id
    stored = store.get_meta("embedder_id")
    if ns is not None and embedder_id is not None and stored not in (None, embedder_id):
        raise InvalidArgumentError("namespace", namespace, f"the store's vectors are {stored!r}: an embedder "
                                   "change rebuilds the whole store, reindex with namespace=None")
    kind = stored_vector_kind(store.get_meta)
    if ns is not None and embedder_id is not None and vector_kind is not None and kind not in (None, vector_kind):
        raise InvalidArgumentError("namespace", namespace, f"the store's turn vectors are {kind!r} and this "
                                   f"configuration makes {vector_kind!r} ones: that change rebuilds the whole "
                                   "store, reindex with namespace=None")
    return reindex(store, writer, indexes, namespace=ns, progress=progress, embedder_id=embedder_id,
                   vector_kind=vector_kind)
