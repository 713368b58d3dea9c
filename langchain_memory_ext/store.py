"""``MemoryStore``: LangGraph's long-term memory interface (``BaseStore``) over a memory-ext engine.

How LangGraph namespace tuples map onto memory-ext
--------------------------------------------------
* **Key/value truth.** Items are rows of the engine's own store (``engine.put_items`` / ``get_items`` /
  ``search_items`` / ``list_item_namespaces``: :mod:`memory_ext.lifecycle.items`), in the partition
  ``Namespace(user_id, agent_id)`` — by default ``user_id="langgraph-store"``. So every client of one store sees
  the same items: processes of a PostgreSQL schema, and ``RemoteEngine`` hosts in front of one ``memext serve``.
  ``value`` is JSON; datetimes, dates, tuples, sets, UUIDs, Decimals and bytes are tagged so they come back as they
  went in. Filter-only ``search`` lists items namespace by namespace in the order namespaces first appeared, then
  in insertion order, as ``InMemoryStore`` does.
* **Natural-language search.** Every put (unless ``index=False``) is also archived in the engine as a turn of
  ``Namespace(user_id, agent_id, session_id=".".join(namespace))`` with ``external_id = key`` and the namespace and
  key in ``metadata["langgraph_store"]`` — in the same transaction as the item. Its text is the value's string
  fields (or the fields named by ``index_fields``, ``index["fields"]`` or ``PutOp.index``). ``search(prefix,
  query=...)`` runs one engine search over the sessions under the prefix and maps each hit back to its item
  (``filter`` applies first, in SQL); the ``score`` is the engine's. With an ``index`` configuration that has an
  ``embed`` (LangGraph's ``{"dims", "embed", "fields"}``) the store embeds on the client side, sends the vectors
  with the put and a query's vector with the search, and the engine ranks as ``InMemoryStore`` does (cosine, max
  over an item's fields) — the engine archive is kept either way, for ``MemoryRetriever``.
* **Update and delete.** A ``put`` on an existing key is ``engine.update`` of the item's turn: the new version
  is archived, the old one keeps its validity interval (``engine.history`` lists both) and no face returns it by
  default. ``delete`` removes the item and deletes its turn (``engine.delete``): every version leaves every store.
* **TTL** (``supports_ttl = True``). ``put(..., ttl=minutes)`` or the store's ``ttl={"default_ttl": minutes,
  "refresh_on_read": bool}`` (LangGraph's ``TTLConfig``). An expired item is never returned; it is removed — row,
  vectors and turn — by the process holding the engine's writer (before every put, and on a timer: the embedded
  engine, or ``memext serve``), and by :meth:`MemoryStore.sweep_ttl`. Reads refresh the TTL of what they return
  (``refresh_ttl``, default from ``ttl["refresh_on_read"]``, else True). ``clock`` times all of it.

**Forgetting.** ``engine.forget`` of the partition removes its items, of a session (one LangGraph namespace) that
namespace's items, of record ids the items whose turn went — in the forget's own transaction, in any process.

**Filters** are memory-ext's one filter language (:mod:`memory_ext.store.metadata_filter`, also behind
``search(filters={"metadata": ...})``), evaluated in SQL over the stored value. Differences from ``InMemoryStore``
that tests pin: a comparison (``$gt``...) on a key an item lacks, or of another type (a numeric string against a
number), does not match that item instead of raising; ``created_at`` survives updates (like LangGraph's Postgres
store); a ``query`` without an ``index`` embedding goes through memory-ext retrieval; namespaces emptied by
deletes are not listed; values must be data (see above) — other objects are a typed error.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future
from datetime import UTC, datetime
from typing import Any, NamedTuple

from langchain_core.embeddings import Embeddings
from langgraph.store.base import (
    BaseStore,
    GetOp,
    IndexConfig,
    Item,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    TTLConfig,
    ensure_embeddings,
)

from memory_ext import EngineLike, Namespace
from memory_ext.errors import InvalidQueryError
from memory_ext.lifecycle.items import ItemPut, StoredItem

from ._store_data import check_op, from_data, index_text, join_namespace, texts_to_embed, to_data, to_filter, utc

__all__ = ["MemoryStore"]

logger = logging.getLogger(__name__)

_INDEX_KEYS = ("dims", "embed", "fields", "distance_type", "ann_index_config")
_TTL_KEYS = ("default_ttl", "refresh_on_read", "omit_expired", "sweep_interval_minutes")


class _Embedded(NamedTuple):
    """Vectors computed ahead of a batch (by :meth:`MemoryStore.abatch`, with the async embeddings API)."""

    documents: dict[str, list[float]]
    queries: dict[str, list[float]]


def _item(stored: StoredItem, *, search: bool = False) -> Item:
    args: dict[str, Any] = {"namespace": tuple(stored.namespace), "key": stored.key, "value": from_data(stored.value),
                            "created_at": stored.created_at, "updated_at": stored.updated_at}
    return SearchItem(**args, score=stored.score) if search else Item(**args)


def _index_setup(index: Mapping[str, Any] | None, index_fields: Sequence[str] | None
                 ) -> tuple[Embeddings | None, int | None, list[str] | None, list[str] | None]:
    """(embeddings, dims, fields embedded, fields archived in the engine) from the constructor arguments."""
    if index is None:
        return None, None, None, list(index_fields) if index_fields is not None else None
    if not isinstance(index, Mapping):
        raise InvalidQueryError("index", index, "pass LangGraph's index config: {'dims', 'embed', 'fields'}")
    unknown = sorted(set(index) - set(_INDEX_KEYS))
    if unknown:
        raise InvalidQueryError(f"index.{unknown[0]}", index[unknown[0]], "index keys are " + ", ".join(_INDEX_KEYS))
    if index.get("distance_type", "cosine") != "cosine":
        raise InvalidQueryError("index.distance_type", index["distance_type"], "only 'cosine' is supported")
    fields = index.get("fields")
    if fields is not None and index_fields is not None:
        raise InvalidQueryError("index_fields", index_fields, "give the fields once: index={'fields': [...]}")
    if fields is not None and (isinstance(fields, str) or not all(isinstance(f, str) for f in fields)):
        raise InvalidQueryError("index.fields", fields, "give a list of JSON paths such as ['text', 'notes[*]']")
    fields = list(fields) if fields is not None else (list(index_fields) if index_fields is not None else None)
    if "embed" not in index:
        return None, None, None, fields
    dims = index.get("dims")
    if isinstance(dims, bool) or not isinstance(dims, int) or dims <= 0:
        raise InvalidQueryError("index.dims", dims, "give the embedding size, e.g. {'dims': 1536, 'embed': ...}")
    embed = index["embed"]
    if not (isinstance(embed, (Embeddings, str)) or callable(embed)):
        raise InvalidQueryError("index.embed", embed, "pass a LangChain Embeddings or a function from texts to vectors")
    try:
        embeddings = ensure_embeddings(embed)
    except (ValueError, TypeError, ImportError) as exc:  # what LangGraph raises for what it cannot use
        raise InvalidQueryError("index.embed", index["embed"], "pass a LangChain Embeddings, a function from texts "
                                f"to vectors, or an async one ({exc})") from None
    return embeddings, dims, fields or ["$"], fields


class MemoryStore(BaseStore):
    """LangGraph ``BaseStore`` whose items are memory-ext memories (searchable in natural language).

    Setup:
        ``pip install "memory-ext[langchain]"``

    Instantiate:
        >>> import tempfile
        >>> from memory_ext import MemoryEngine
        >>> from langchain_memory_ext import MemoryStore
        >>> engine = MemoryEngine.open(tempfile.mkdtemp(), embedder="hashing")
        >>> store = MemoryStore(engine=engine)

    Put / get / delete:
        >>> store.put(("users", "ana", "memories"), "m1", {"text": "Ana's sister Lena lives in Porto", "year": 2024})
        >>> store.put(("users", "ana", "memories"), "m2", {"text": "Ana adopted a beagle called Toby", "year": 2026})
        >>> store.get(("users", "ana", "memories"), "m1").value["year"]
        2024

    Search (namespace prefix, natural-language ``query`` through memory-ext retrieval, ``filter``):
        >>> [i.key for i in store.search(("users", "ana"), query="where does Lena live?", limit=1)]
        ['m1']
        >>> [i.key for i in store.search(("users",), filter={"year": {"$gte": 2025}})]
        ['m2']
        >>> store.list_namespaces(prefix=("users",), max_depth=2)
        [('users', 'ana')]

    TTL in minutes, per item or as a store default (expired items are never returned, and are swept):
        >>> store.put(("users", "ana", "scratch"), "tmp", {"text": "call the vet"}, ttl=60)
        >>> store.get(("users", "ana", "scratch"), "tmp").value
        {'text': 'call the vet'}

    Async (``abatch`` runs in a worker thread; the event loop is never blocked):
        >>> import asyncio
        >>> asyncio.run(store.aget(("users", "ana", "memories"), "m2")).key
        'm2'
        >>> store.delete(("users", "ana", "memories"), "m1")
        >>> engine.close()

    Use in LangGraph: ``graph.compile(store=store)``; nodes receive it as the ``store`` argument or through
    ``get_store()``.

    ``user_id`` / ``agent_id`` choose the engine partition its items are archived in (default
    ``"langgraph-store"``; pass a real user id to make the items searchable by that user's ``MemoryRetriever``).
    ``index_fields`` (e.g. ``["text"]``) chooses the value fields archived for search (default: all strings).
    ``index`` takes LangGraph's ``{"dims", "embed", "fields"}`` configuration (``embed``: a LangChain
    ``Embeddings`` or a function; ``fields``: JSON paths into the value, ``"$"`` the whole value): queries are
    then ranked by those embeddings, as ``InMemoryStore`` ranks them. ``ttl`` takes LangGraph's ``TTLConfig``
    (``default_ttl`` minutes, ``refresh_on_read``). ``clock`` (a function returning the current time) replaces
    the system clock, for simulations and tests. ``engine`` may be a ``RemoteEngine``: the items are the server's,
    shared with every other client. The module docstring documents the mapping.
    """

    supports_ttl = True

    def __init__(self, *, engine: EngineLike, user_id: str = "langgraph-store", agent_id: str | None = None,
                 index_fields: Sequence[str] | None = None, index: IndexConfig | None = None,
                 ttl: TTLConfig | None = None, clock: Callable[[], datetime] | None = None) -> None:
        self.engine = engine
        self.partition = Namespace(user_id, agent_id)  # validates the ids now
        self.embeddings, self.dims, self._embed_fields, self.index_fields = _index_setup(index, index_fields)
        self.index_config = dict(index) if index is not None else None
        self.ttl_config = _check_ttl_config(ttl)
        self._clock = clock or (lambda: datetime.now(UTC))
        self._sweeper: tuple[threading.Thread, threading.Event, Future[None]] | None = None

    def close(self) -> None:
        """Stop the TTL sweeper, if started (the engine, and the items in it, are the caller's)."""
        self.stop_ttl_sweeper()

    def _now(self) -> datetime:
        return utc(self._clock())

    # -- operations ---------------------------------------------------------------------------------------------
    def _get(self, op: GetOp, now: datetime) -> Item | None:
        found = self.engine.get_items(self.partition, [(tuple(op.namespace), op.key)],
                                      refresh_ttl=bool(op.refresh_ttl), now=now)[0]
        return None if found is None else _item(found)

    def _search(self, op: SearchOp, now: datetime, pre: _Embedded | None) -> list[SearchItem]:
        if op.limit < 0 or op.offset < 0:
            raise InvalidQueryError("limit" if op.limit < 0 else "offset", min(op.limit, op.offset),
                                    "limit and offset are non-negative integers")
        query_vector = None
        if op.query and self.embeddings is not None:
            query_vector = pre.queries[op.query] if pre is not None else self.embeddings.embed_query(op.query)
        found = self.engine.search_items(
            self.partition, tuple(op.namespace_prefix), query=(op.query or None) if query_vector is None else None,
            query_vector=query_vector, filter=to_filter(op.filter) if op.filter else None, limit=op.limit,
            offset=op.offset, refresh_ttl=bool(op.refresh_ttl), now=now)
        return [_item(i, search=True) for i in found]  # type: ignore[misc]

    def _list_namespaces(self, op: ListNamespacesOp, now: datetime) -> list[tuple[str, ...]]:
        conditions = [(c.match_type, tuple(c.path)) for c in op.match_conditions or ()]
        return self.engine.list_item_namespaces(self.partition, match_conditions=conditions,
                                                max_depth=op.max_depth, limit=op.limit, offset=op.offset, now=now)

    def _to_embed(self, ops: Iterable[Op]) -> list[tuple[str, str, str, str]]:
        """``(ns, key, path, text)`` of the puts to embed, under an ``index`` configuration with ``embed``."""
        if self.embeddings is None:
            return []
        return [(join_namespace(op.namespace), op.key, path, text) for op in ops
                if isinstance(op, PutOp) and isinstance(op.value, Mapping) and op.index is not False
                for path, text in texts_to_embed(op.value, op.index if isinstance(op.index, list)
                                                 else self._embed_fields or ["$"])]

    def _embed(self, writes: Sequence[PutOp], pre: _Embedded | None) -> dict[tuple[str, str], dict[str, list[float]]]:
        """``{(ns, key): {path: vector}}`` for the puts (embedded now, or before by :meth:`abatch`)."""
        wanted = self._to_embed(writes)
        if not wanted or self.embeddings is None:
            return {}
        unique = list(dict.fromkeys(t for *_, t in wanted))
        by_text = pre.documents if pre is not None else dict(
            zip(unique, self.embeddings.embed_documents(unique), strict=True))
        for text in unique:
            vector = by_text[text]
            if len(vector) != self.dims:
                raise InvalidQueryError("index.dims", self.dims, f"the embeddings returned {len(vector)} numbers for "
                                        f"{text[:40]!r}; set dims to the embedding size")
        out: dict[tuple[str, str], dict[str, list[float]]] = {}
        for ns, key, path, text in wanted:
            out.setdefault((ns, key), {})[path] = [float(x) for x in by_text[text]]
        return out

    def _apply_puts(self, puts: Mapping[tuple[tuple[str, ...], str], PutOp], now: datetime,
                    pre: _Embedded | None) -> None:
        if not puts:
            return
        writes = [op for op in puts.values() if op.value is not None]
        for op in writes:
            if not isinstance(op.value, Mapping):
                raise InvalidQueryError("value", op.value, "store values are dicts (use None to delete)")
        data = {(tuple(op.namespace), op.key): to_data(op.value) for op in writes}  # type: ignore[arg-type]
        vectors = self._embed(writes, pre)
        items = []
        for (namespace, key), op in puts.items():
            if op.value is None:
                items.append(ItemPut(namespace=namespace, key=key))
                continue
            text = None if op.index is False else index_text(
                op.value, op.index if isinstance(op.index, list) else self.index_fields)
            items.append(ItemPut(namespace=namespace, key=key, value=data[(namespace, key)], text=text,
                                 ttl_minutes=op.ttl, vectors=vectors.get((join_namespace(namespace), key))))
        self.engine.put_items(self.partition, items, now=now)

    def sweep_ttl(self) -> int:
        """Remove this partition's expired items (row, vectors and engine turn) now; returns how many. The
        engine's writer also sweeps before every put and on a timer.

        >>> import tempfile
        >>> from datetime import UTC, datetime, timedelta
        >>> from memory_ext import MemoryEngine
        >>> now = [datetime(2026, 3, 1, 9, 0, tzinfo=UTC)]
        >>> engine = MemoryEngine.open(tempfile.mkdtemp(), embedder="hashing")
        >>> store = MemoryStore(engine=engine, ttl={"default_ttl": 30}, clock=lambda: now[0])
        >>> store.put(("notes",), "n1", {"text": "buy milk"})
        >>> now[0] += timedelta(minutes=31)
        >>> store.get(("notes",), "n1") is None, store.sweep_ttl(), engine.get_turns("langgraph-store")
        (True, 1, [])
        >>> engine.close()
        """
        return self.engine.sweep_items(self.partition, now=self._now())

    async def asweep_ttl(self) -> int:
        """Async twin of :meth:`sweep_ttl`."""
        return await self.engine.asweep_items(self.partition, now=self._now())

    def start_ttl_sweeper(self, sweep_interval_minutes: float | None = None) -> Future[None]:
        """Sweep expired items in a background thread every ``sweep_interval_minutes`` (default:
        ``ttl["sweep_interval_minutes"]``, else 5), as LangGraph's ``PostgresStore`` does, until
        :meth:`stop_ttl_sweeper` or :meth:`close` — with this store's clock (the engine's writer sweeps by its
        own). The returned future completes when the sweeper stops."""
        if self._sweeper is not None:
            return self._sweeper[2]
        interval = sweep_interval_minutes or (self.ttl_config or {}).get("sweep_interval_minutes") or 5
        if isinstance(interval, bool) or not isinstance(interval, (int, float)) or interval <= 0:
            raise InvalidQueryError("sweep_interval_minutes", interval, "give minutes (> 0)")
        stop = threading.Event()
        done: Future[None] = Future()

        def run() -> None:
            while not stop.wait(interval * 60):
                try:
                    self.sweep_ttl()
                except Exception:  # one failed sweep must not end the sweeper
                    logger.exception("TTL sweep failed; retrying in %s minutes", interval)
            done.set_result(None)

        thread = threading.Thread(target=run, name="memory-ext-ttl-sweeper", daemon=True)
        self._sweeper = (thread, stop, done)
        thread.start()
        return done

    def stop_ttl_sweeper(self, timeout: float | None = None) -> bool:
        """Stop the background sweeper; True once it has stopped (or was never started)."""
        if self._sweeper is None:
            return True
        thread, stop, _ = self._sweeper
        stop.set()
        thread.join(timeout)
        if thread.is_alive():
            return False
        self._sweeper = None
        return True

    # -- BaseStore ----------------------------------------------------------------------------------------------
    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run operations; reads see the store as it was before the batch, then the puts apply (last one wins)."""
        return self._batch(list(ops), None)

    def _batch(self, ops: list[Op], pre: _Embedded | None) -> list[Result]:
        results: list[Result] = []
        puts: dict[tuple[tuple[str, ...], str], PutOp] = {}
        for op in ops:
            check_op(op)
        now = self._now()
        for op in ops:
            if isinstance(op, GetOp):
                results.append(self._get(op, now))
            elif isinstance(op, SearchOp):
                results.append(self._search(op, now, pre))
            elif isinstance(op, ListNamespacesOp):
                results.append(self._list_namespaces(op, now))
            elif isinstance(op, PutOp):
                puts[(tuple(op.namespace), op.key)] = op
                results.append(None)
            else:
                raise InvalidQueryError("op", op, "pass GetOp, PutOp, SearchOp or ListNamespacesOp")
        self._apply_puts(puts, now, pre)
        return results

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """Async twin of :meth:`batch`: embeds with the async API of the ``index`` embeddings (an async-only
        ``embed`` works), then runs the batch in a worker thread."""
        ops = list(ops)
        if self.embeddings is None:
            return await asyncio.to_thread(self.batch, ops)
        documents = list(dict.fromkeys(t for *_, t in self._to_embed(ops)))
        queries = list(dict.fromkeys(op.query for op in ops if isinstance(op, SearchOp) and op.query))
        vectors = await self.embeddings.aembed_documents(documents) if documents else []
        query_vectors = await asyncio.gather(*(self.embeddings.aembed_query(q) for q in queries))
        pre = _Embedded(dict(zip(documents, vectors, strict=True)), dict(zip(queries, query_vectors, strict=True)))
        return await asyncio.to_thread(self._batch, ops, pre)


def _check_ttl_config(ttl: TTLConfig | None) -> TTLConfig | None:
    if ttl is None:
        return None
    if not isinstance(ttl, Mapping):
        raise InvalidQueryError("ttl", ttl, "pass LangGraph's TTLConfig: {'default_ttl': minutes, 'refresh_on_read'}")
    unknown = sorted(set(ttl) - set(_TTL_KEYS))
    if unknown:
        raise InvalidQueryError(f"ttl.{unknown[0]}", dict(ttl)[unknown[0]], "TTL keys are " + ", ".join(_TTL_KEYS))
    default = ttl.get("default_ttl")
    if default is not None and (isinstance(default, bool) or not isinstance(default, (int, float)) or default <= 0):
        raise InvalidQueryError("ttl.default_ttl", default, "give minutes (> 0), or None for no expiry")
    return ttl
