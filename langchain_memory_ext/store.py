"""``MemoryStore``: LangGraph's long-term memory interface (``BaseStore``) over a memory-ext store.

How LangGraph namespace tuples map onto memory-ext
--------------------------------------------------
* **Key/value truth.** Items live in a small SQLite file of their own beside the engine's store,
  ``engine.path / "langgraph_store.sqlite3"``: table ``items(part, ns, key, value, created_at, updated_at,
  turn_id, record_id, expires_at, ttl_minutes)``. ``part`` is the engine partition (below), ``ns`` the namespace
  labels joined by ``"."`` (LangGraph forbids ``"."`` inside a label, so the join is unambiguous). ``value`` is
  JSON; datetimes, dates, tuples, sets, UUIDs, Decimals and bytes are tagged so they come back as they went in.
  ``namespaces`` keeps the order namespaces first appeared in (filter-only ``search`` lists items namespace by
  namespace in that order, then in insertion order, as ``InMemoryStore`` does). ``get``, ``put``, ``delete``,
  ``list_namespaces`` and filter-only ``search`` are answered from these tables.
* **Natural-language search.** Every put (unless ``index=False``) is also archived in the engine as a turn of
  ``Namespace(user_id, agent_id, session_id=".".join(namespace))`` — by default ``user_id="langgraph-store"`` —
  with ``external_id = key`` and the namespace and key in ``metadata["langgraph_store"]``. Its text is the
  value's string fields (or the fields named by ``index_fields``, ``index["fields"]`` or ``PutOp.index``).
  ``search(prefix, query=...)`` runs one engine search over the sessions under the prefix, maps each hit back
  to its item, applies ``filter``, then ``offset``/``limit``; the ``score`` is the engine's. With an ``index``
  configuration that has an ``embed`` (LangGraph's ``{"dims", "embed", "fields"}``), a query is answered as
  ``InMemoryStore`` answers it instead: cosine similarity of the query with the embedded fields (max over an
  item's fields), with those embeddings — the engine archive is kept either way, for ``MemoryRetriever``.
* **Update and delete.** A ``put`` on an existing key is ``engine.update`` of the item's turn: the new version
  is archived, the old one keeps its validity interval (``engine.history`` lists both, ``search(as_of=...)``
  reaches the old one) and no face returns it by default. ``delete`` is ``engine.delete`` of the item's turn:
  every version leaves every store, at the cost of the item, not of the namespace; the history records the
  delete without any text.
* **TTL** (``supports_ttl = True``). ``put(..., ttl=minutes)`` or the store's ``ttl={"default_ttl": minutes,
  "refresh_on_read": bool}`` (LangGraph's ``TTLConfig``). An expired item is never returned (``get``, ``search``,
  ``list_namespaces``) and is removed — row, vectors and engine turn — by :meth:`MemoryStore.sweep_ttl`, which
  runs before every batch that writes (and periodically after :meth:`MemoryStore.start_ttl_sweeper`). Reads
  refresh the TTL of what they return (``refresh_ttl``, default from ``ttl["refresh_on_read"]``, else True).

**Forgetting.** The store registers itself as a face of the engine (``engine.register_face``): every
``engine.forget`` removes the partition's items with the namespace — ``forget(Namespace(user_id, agent_id))``
all of them, a session (one LangGraph namespace) its items, ``record_ids``/``hook_ids`` the items whose turn went
— also in processes that never create a ``MemoryStore`` (the engine records :func:`forget_items` as the hook).
The item table overwrites deleted rows (``secure_delete``).

Differences from ``InMemoryStore`` that tests pin: ``created_at`` survives updates (like LangGraph's Postgres
store), a ``query`` without an ``index`` embedding goes through memory-ext retrieval, namespaces emptied by
deletes are not listed, and values must be data (see above) — other objects are a typed error.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sqlite3
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future
from contextlib import contextmanager, suppress
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
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

from memory_ext import EngineLike, Namespace, Turn
from memory_ext.errors import ConfigError, InvalidQueryError, ValidationError

from ._store_data import (
    check_op,
    cosine,
    decode_value,
    encode_value,
    filter_matches,
    index_text,
    join_namespace,
    namespace_matches,
    split_namespace,
    texts_to_embed,
    utc,
)

__all__ = ["MemoryStore"]

logger = logging.getLogger(__name__)

DB_NAME = "langgraph_store.sqlite3"
META_KEY = "langgraph_store"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS items (
    part TEXT NOT NULL,
    ns TEXT NOT NULL,
    key TEXT NOT NULL,
    value TEXT NOT NULL,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    turn_id TEXT,
    PRIMARY KEY (part, ns, key)
);
CREATE INDEX IF NOT EXISTS items_turn ON items (part, turn_id);
CREATE TABLE IF NOT EXISTS namespaces (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    part TEXT NOT NULL,
    ns TEXT NOT NULL,
    UNIQUE (part, ns)
);
CREATE TABLE IF NOT EXISTS vectors (
    part TEXT NOT NULL,
    ns TEXT NOT NULL,
    key TEXT NOT NULL,
    path TEXT NOT NULL,
    vector BLOB NOT NULL,
    PRIMARY KEY (part, ns, key, path)
);
"""
#: Columns added after the first release (added to an older file when it is opened).
_LATER_COLUMNS = {"record_id": "TEXT", "expires_at": "REAL", "ttl_minutes": "REAL"}
_INDEX_KEYS = ("dims", "embed", "fields", "distance_type", "ann_index_config")
_TTL_KEYS = ("default_ttl", "refresh_on_read", "omit_expired", "sweep_interval_minutes")
_COLS = "i.ns, i.key, i.value, i.created_at, i.updated_at, i.turn_id, i.record_id, i.ttl_minutes"


def _connect(path: Path, file_mode: int = 0o600) -> sqlite3.Connection:
    if not path.exists():  # private like the engine's own files
        os.close(os.open(path, os.O_RDWR | os.O_CREAT, file_mode))
    db = sqlite3.connect(path, check_same_thread=False, isolation_level=None, timeout=30)
    db.execute("PRAGMA secure_delete=ON")  # forgotten items are overwritten, not left in free pages
    return db


def _forget_rows(db: sqlite3.Connection, namespace: Namespace, turn_ids: Sequence[str] | None) -> int:
    part = json.dumps(list(namespace.key))
    if turn_ids is not None:
        ids = list(turn_ids)
        return sum(db.execute(f"DELETE FROM items WHERE part = ? AND turn_id IN ({','.join('?' * len(chunk))})",
                              [part, *chunk]).rowcount for chunk in (ids[i:i + 500] for i in range(0, len(ids), 500)))
    if namespace.session_id is not None:
        return db.execute("DELETE FROM items WHERE part = ? AND ns = ?", [part, namespace.session_id]).rowcount
    return db.execute("DELETE FROM items WHERE part = ?", [part]).rowcount


def forget_items(directory: Path, namespace: Namespace, turn_ids: Sequence[str] | None) -> int:
    """The engine's forget hook: remove a namespace's items (or those of ``turn_ids``) from the item table of the
    store directory; returns how many went. Used when no ``MemoryStore`` is open in the forgetting process."""
    path = Path(directory) / DB_NAME
    if not path.exists():
        return 0
    db = _connect(path)
    try:
        db.execute("BEGIN IMMEDIATE")
        try:
            removed = _forget_rows(db, namespace, turn_ids)
        except BaseException:
            db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")
        return removed
    finally:
        db.close()


class _Row(NamedTuple):
    ns: str
    key: str
    value: dict[str, Any]
    created_at: str
    updated_at: str
    turn_id: str | None
    record_id: str | None
    ttl_minutes: float | None

    def item(self, score: float | None = None, *, search: bool = False) -> Item:
        args: dict[str, Any] = {"namespace": split_namespace(self.ns), "key": self.key, "value": self.value,
                "created_at": datetime.fromisoformat(self.created_at),
                "updated_at": datetime.fromisoformat(self.updated_at)}
        return SearchItem(**args, score=score) if search else Item(**args)


class _Embedded(NamedTuple):
    """Vectors computed ahead of a batch (by :meth:`MemoryStore.abatch`, with the async embeddings API)."""

    documents: dict[str, list[float]]
    queries: dict[str, list[float]]


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
    the system clock, for simulations and tests. The module docstring documents the mapping.
    """

    supports_ttl = True
    name = "langgraph_store"
    hook = "langchain_memory_ext.store:forget_items"
    """What the engine calls to forget items when no MemoryStore is open (see :mod:`memory_ext.store.faces`)."""

    def __init__(self, *, engine: EngineLike, user_id: str = "langgraph-store", agent_id: str | None = None,
                 index_fields: Sequence[str] | None = None, index: IndexConfig | None = None,
                 ttl: TTLConfig | None = None, clock: Callable[[], datetime] | None = None) -> None:
        self.engine = engine
        self.partition = Namespace(user_id, agent_id)  # validates the ids now
        self._part = json_part(self.partition)
        self.embeddings, self.dims, self._embed_fields, self.index_fields = _index_setup(index, index_fields)
        self.index_config = dict(index) if index is not None else None
        self.ttl_config = _check_ttl_config(ttl)
        self._clock = clock or (lambda: datetime.now(UTC))
        self._lock = threading.RLock()
        self._sweeper: tuple[threading.Thread, threading.Event, Future[None]] | None = None
        self._own_forget = False
        self._closed = False
        if getattr(engine.config.storage, "backend", "sqlite") == "postgres":
            raise ConfigError("engine", "storage.backend: postgres",
                              "MemoryStore keeps its key/value table in a SQLite file beside a store directory, "
                              "which a PostgreSQL store does not have; open the engine on a SQLite store for "
                              "MemoryStore (MemoryRetriever and the chat histories work on PostgreSQL)")
        self._db = _connect(engine.path / DB_NAME, engine.config.storage.file_mode)
        self._migrate()
        register = getattr(engine, "register_face", None)  # an embedded engine; a RemoteEngine's server cannot
        if callable(register):                               # reach this process's item table
            register(self)  # engine.forget removes this store's items with their namespace

    def forget(self, namespace: Namespace, turn_ids: Sequence[str] | None) -> int:
        """Called by ``engine.forget``: remove the namespace's items (or those whose turn was forgotten)."""
        if self._own_forget:  # this store's own forget of an old version or a deleted item: rows are handled
            return 0
        if self._closed:  # closed: the table is still on disk
            return forget_items(self.engine.path, namespace, turn_ids)
        with self._lock, self._tx() as db:
            return _forget_rows(db, namespace, turn_ids)

    def _migrate(self) -> None:
        self._db.executescript(_SCHEMA)
        have = {row[1] for row in self._db.execute("PRAGMA table_info(items)")}
        for name, kind in _LATER_COLUMNS.items():
            if name not in have:
                self._db.execute(f"ALTER TABLE items ADD COLUMN {name} {kind}")
        self._db.execute("CREATE INDEX IF NOT EXISTS items_expiry ON items (part, expires_at)")
        self._db.execute("INSERT OR IGNORE INTO namespaces (part, ns) SELECT part, ns FROM items "
                         "GROUP BY part, ns ORDER BY min(rowid)")

    @contextmanager
    def _forgetting_own(self) -> Iterator[None]:
        """While this store forgets versions through the engine, the engine's face hook leaves its rows alone."""
        self._own_forget = True
        try:
            yield
        finally:
            self._own_forget = False

    def close(self) -> None:
        """Stop the TTL sweeper, if started, and close the item table (the engine is the caller's to close)."""
        self.stop_ttl_sweeper()
        with self._lock:
            self._closed = True
            self._db.close()

    # -- sqlite primitives --------------------------------------------------------------------------------------
    def _now(self) -> datetime:
        return utc(self._clock())

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        self._db.execute("BEGIN IMMEDIATE")
        try:
            yield self._db
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")

    def _rows(self, now: datetime, where: str = "", args: Sequence[Any] = ()) -> list[_Row]:
        """Live (unexpired) rows, namespace by namespace in the order they first appeared, then by insertion."""
        sql = (f"SELECT {_COLS} FROM items i JOIN namespaces n ON n.part = i.part AND n.ns = i.ns "
               "WHERE i.part = ? AND (i.expires_at IS NULL OR i.expires_at > ?)")
        rows = self._db.execute(f"{sql} {where} ORDER BY n.seq, i.rowid", [self._part, now.timestamp(), *args])
        return [_Row(ns, key, decode_value(value), *rest) for ns, key, value, *rest in rows]

    def _under(self, prefix: Sequence[str], now: datetime) -> list[_Row]:
        if not prefix:
            return self._rows(now)
        joined = join_namespace(prefix)
        return self._rows(now, "AND (i.ns = ? OR substr(i.ns, 1, ?) = ?)", [joined, len(joined) + 1, joined + "."])

    def _session(self, ns: str) -> Namespace:
        return Namespace(self.partition.user_id, self.partition.agent_id, ns)

    def _refresh(self, rows: Iterable[_Row], now: datetime) -> None:
        """Restart the TTL of rows that have one (a read with ``refresh_ttl``)."""
        keys = [(now.timestamp(), self._part, r.ns, r.key) for r in rows if r.ttl_minutes is not None]
        if keys:
            with self._tx() as db:
                db.executemany("UPDATE items SET expires_at = ? + ttl_minutes * 60 "
                               "WHERE part = ? AND ns = ? AND key = ? AND ttl_minutes IS NOT NULL", keys)

    # -- operations ---------------------------------------------------------------------------------------------
    def _get(self, op: GetOp, now: datetime) -> Item | None:
        rows = self._rows(now, "AND i.ns = ? AND i.key = ?", [join_namespace(op.namespace), op.key])
        if op.refresh_ttl:
            self._refresh(rows, now)
        return rows[0].item() if rows else None

    def _search(self, op: SearchOp, now: datetime, pre: _Embedded | None) -> list[SearchItem]:
        if op.limit < 0 or op.offset < 0:
            raise InvalidQueryError("limit" if op.limit < 0 else "offset", min(op.limit, op.offset),
                                    "limit and offset are non-negative integers")
        rows = [r for r in self._under(op.namespace_prefix, now) if filter_matches(r.value, op.filter)]
        page: list[tuple[_Row, float | None]]
        if not op.query:
            page = [(r, None) for r in rows[op.offset:op.offset + op.limit]]
        elif self.embeddings is not None:
            page = self._vector_page(op, rows, pre)
        else:
            page = self._engine_page(op, rows)
        if op.refresh_ttl:
            self._refresh((r for r, _ in page), now)
        return [r.item(score, search=True) for r, score in page]  # type: ignore[misc]

    def _engine_page(self, op: SearchOp, rows: list[_Row]) -> list[tuple[_Row, float | None]]:
        """Rank through memory-ext retrieval; items that are not indexed follow, unscored (like InMemoryStore)."""
        by_turn = {r.turn_id: r for r in rows if r.turn_id}
        ranked: list[tuple[_Row, float | None]] = []
        if by_turn and op.query:
            sessions = sorted({r.ns for r in by_turn.values()})
            k = min(self.engine.config.limits.max_k, max(10, 4 * (op.offset + op.limit) + len(rows)))
            result = self.engine.search(op.query, self.partition, k=k, filters={"session_id": sessions})
            seen: set[str] = set()
            for hit in result.items:
                for tid in hit.turn_ids:
                    row = by_turn.get(tid)
                    if row is not None and tid not in seen:
                        seen.add(tid)
                        ranked.append((row, hit.score))
        ranked.extend((r, None) for r in rows if not r.turn_id)
        return ranked[op.offset:op.offset + op.limit]

    def _vector_page(self, op: SearchOp, rows: list[_Row], pre: _Embedded | None
                     ) -> list[tuple[_Row, float | None]]:
        """``InMemoryStore``'s ranking: cosine with every embedded field, max-pooled per item; items without
        vectors fill a short page, unscored."""
        assert self.embeddings is not None and op.query
        if not rows:
            return []
        vectors: dict[tuple[str, str], list[np.ndarray]] = {}
        for ns, key, blob in self._db.execute("SELECT ns, key, vector FROM vectors WHERE part = ? ORDER BY rowid",
                                              [self._part]):
            vectors.setdefault((ns, key), []).append(np.frombuffer(blob, dtype=np.float64))
        flat: list[tuple[_Row, np.ndarray]] = []
        scoreless = []
        for row in rows:
            mine = vectors.get((row.ns, row.key), [])
            flat.extend((row, v) for v in mine)
            if not mine:
                scoreless.append(row)
        query = pre.queries[op.query] if pre is not None else self.embeddings.embed_query(op.query)
        scores = cosine(query, [v for _, v in flat])
        ranked = sorted(zip(scores, (r for r, _ in flat), strict=True), key=lambda x: x[0], reverse=True)
        seen: set[tuple[str, str]] = set()
        kept: list[tuple[_Row, float | None]] = []
        for score, row in ranked:
            if (row.ns, row.key) in seen:
                continue
            position = len(seen)
            seen.add((row.ns, row.key))
            if position >= op.offset + op.limit:
                break
            if position >= op.offset:
                kept.append((row, score))
        if scoreless and len(kept) < op.limit:
            kept.extend((r, None) for r in scoreless[:op.limit - len(kept)])
        return kept

    def _list_namespaces(self, op: ListNamespacesOp, now: datetime) -> list[tuple[str, ...]]:
        spaces = [split_namespace(ns) for (ns,) in self._db.execute(
            "SELECT DISTINCT ns FROM items WHERE part = ? AND (expires_at IS NULL OR expires_at > ?)",
            [self._part, now.timestamp()])]
        spaces = [s for s in spaces if all(namespace_matches(c, s) for c in op.match_conditions or ())]
        if op.max_depth is not None:
            spaces = list({s[:op.max_depth] for s in spaces})
        return sorted(spaces)[op.offset:op.offset + op.limit]

    def _to_embed(self, ops: Iterable[Op]) -> list[tuple[str, str, str, str]]:
        """``(ns, key, path, text)`` of the puts to embed, under an ``index`` configuration with ``embed``."""
        if self.embeddings is None:
            return []
        return [(join_namespace(op.namespace), op.key, path, text) for op in ops
                if isinstance(op, PutOp) and isinstance(op.value, Mapping) and op.index is not False
                for path, text in texts_to_embed(op.value, op.index if isinstance(op.index, list)
                                                 else self._embed_fields or ["$"])]

    def _embed(self, writes: Sequence[PutOp], pre: _Embedded | None) -> list[tuple[str, str, str, bytes]]:
        """``(ns, key, path, vector)`` rows for the puts (embedded now, or before by :meth:`abatch`)."""
        wanted = self._to_embed(writes)
        if not wanted or self.embeddings is None:
            return []
        unique = list(dict.fromkeys(t for *_, t in wanted))
        by_text = pre.documents if pre is not None else dict(
            zip(unique, self.embeddings.embed_documents(unique), strict=True))
        for text in unique:
            vector = by_text[text]
            if len(vector) != self.dims:
                raise InvalidQueryError("index.dims", self.dims, f"the embeddings returned {len(vector)} numbers for "
                                        f"{text[:40]!r}; set dims to the embedding size")
        return [(ns, key, path, np.asarray(by_text[t], dtype=np.float64).tobytes()) for ns, key, path, t in wanted]

    def _archive(self, writes: Sequence[PutOp], now: datetime,
                 current: Mapping[tuple[str, str], str]) -> dict[tuple[str, str], tuple[str, str]]:
        """Archive the indexed puts as engine turns: ``(ns, key) -> (turn id, record id)``. A key whose item has
        a version in the engine (``current``: its turn id) gets a new version (``engine.update``)."""
        texts = {(join_namespace(op.namespace), op.key): index_text(
                     op.value, op.index if isinstance(op.index, list) else self.index_fields)  # type: ignore[arg-type]
                 for op in writes if op.index is not False}
        out: dict[tuple[str, str], tuple[str, str]] = {}
        for ns in dict.fromkeys(n for n, _ in texts):
            keys = [(n, k) for (n, k), text in texts.items() if n == ns and text.strip()]
            session = self._session(ns)
            fresh: list[tuple[str, str]] = []
            for nk in keys:
                if nk in current and self._update(session, current[nk], texts[nk], nk, now, out):
                    continue
                fresh.append(nk)
            if not fresh:
                continue
            turns = [Turn(role="user", content=texts[nk], timestamp=now, external_id=nk[1],
                          metadata=self._meta(nk)) for nk in fresh]
            added = self.engine.add_turns(turns, session)
            records = iter(added.record_ids)  # the new turns' own records come first, in order
            existing = set(added.existing_ids)
            for nk, turn_id in zip(fresh, added.turn_ids, strict=True):
                if turn_id in existing:  # the engine already holds a version of this key: a new version
                    self._update(session, turn_id, texts[nk], nk, now, out)
                else:
                    out[nk] = (turn_id, next(records))
        return out

    @staticmethod
    def _meta(nk: tuple[str, str]) -> dict[str, Any]:
        return {META_KEY: {"namespace": list(split_namespace(nk[0])), "key": nk[1]}}

    def _update(self, session: Namespace, turn_id: str, text: str, nk: tuple[str, str], now: datetime,
                out: dict[tuple[str, str], tuple[str, str]]) -> bool:
        """A new version of an item in the engine (False: the engine no longer holds the item)."""
        try:
            added = self.engine.update(session, turn_id, content=text, metadata=self._meta(nk), timestamp=now)
        except ValidationError:  # forgotten through the engine directly
            return False
        out[nk] = (added.turn_ids[0], added.record_ids[0])
        return True

    def _apply_puts(self, puts: Mapping[tuple[tuple[str, ...], str], PutOp], now: datetime,
                    pre: _Embedded | None) -> None:
        if not puts:
            return
        writes = [op for op in puts.values() if op.value is not None]
        for op in writes:
            if not isinstance(op.value, Mapping):
                raise InvalidQueryError("value", op.value, "store values are dicts (use None to delete)")
        encoded = {(op.namespace, op.key): encode_value(op.value) for op in writes}  # type: ignore[arg-type]
        vectors = self._embed(writes, pre)
        keys = [(self._part, join_namespace(ns), key) for ns, key in puts]
        old = [row for k in keys for row in self._db.execute(
            "SELECT ns, key, turn_id, record_id FROM items WHERE part = ? AND ns = ? AND key = ? AND turn_id IS NOT"
            " NULL", k)]
        archived = self._archive(writes, now, {(ns, key): tid for ns, key, tid, _ in old})
        stamp = now.isoformat()
        with self._tx() as db:
            for op in writes:
                ns = join_namespace(op.namespace)
                turn_id, record_id = archived.get((ns, op.key), (None, None))
                expires = (now + timedelta(minutes=op.ttl)).timestamp() if op.ttl is not None else None
                db.execute("INSERT OR IGNORE INTO namespaces (part, ns) VALUES (?, ?)", [self._part, ns])
                db.execute(
                    "INSERT INTO items (part, ns, key, value, created_at, updated_at, turn_id, record_id, expires_at,"
                    " ttl_minutes) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (part, ns, key) DO UPDATE SET "
                    "value = excluded.value, updated_at = excluded.updated_at, turn_id = excluded.turn_id, "
                    "record_id = excluded.record_id, expires_at = excluded.expires_at, "
                    "ttl_minutes = excluded.ttl_minutes",
                    [self._part, ns, op.key, encoded[(op.namespace, op.key)], stamp, stamp, turn_id, record_id,
                     expires, op.ttl])
            db.executemany("DELETE FROM vectors WHERE part = ? AND ns = ? AND key = ?", keys)
            db.executemany("INSERT INTO vectors (part, ns, key, path, vector) VALUES (?, ?, ?, ?, ?)",
                           [(self._part, *v) for v in vectors])
            db.executemany("DELETE FROM items WHERE part = ? AND ns = ? AND key = ?",
                           [(self._part, join_namespace(op.namespace), op.key) for op in puts.values()
                            if op.value is None])
        # deleted items, and items now put unindexed: their versions leave the engine (engine.delete)
        self._forget_versions([(ns, tid, rid) for ns, key, tid, rid in old if (ns, key) not in archived])

    def _forget_versions(self, old: Sequence[tuple[str, str | None, str | None]]) -> None:
        """Delete items' versions from the engine (``engine.delete``: every version of each item, at the cost of
        what is removed)."""
        by_ns: dict[str, list[str]] = {}
        for ns, turn_id, _ in old:
            if turn_id:
                by_ns.setdefault(ns, []).append(turn_id)
        for ns, turn_ids in by_ns.items():
            with self._forgetting_own():
                for turn_id in turn_ids:
                    with suppress(ValidationError):  # unknown to the engine (forgotten through it directly)
                        self.engine.delete(self._session(ns), [turn_id])

    def sweep_ttl(self) -> int:
        """Remove expired items (row, vectors and engine turn); returns how many. Runs before every write batch.

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
        with self._lock:
            with self._tx() as db:
                gone = db.execute("DELETE FROM items WHERE part = ? AND expires_at <= ? RETURNING ns, key, turn_id, "
                                  "record_id", [self._part, self._now().timestamp()]).fetchall()
                db.executemany("DELETE FROM vectors WHERE part = ? AND ns = ? AND key = ?",
                               [(self._part, ns, key) for ns, key, *_ in gone])
            self._forget_versions([(ns, tid, rid) for ns, _, tid, rid in gone if tid])
            return len(gone)

    async def asweep_ttl(self) -> int:
        """Async twin of :meth:`sweep_ttl` (runs in a worker thread)."""
        return await asyncio.to_thread(self.sweep_ttl)

    def start_ttl_sweeper(self, sweep_interval_minutes: float | None = None) -> Future[None]:
        """Sweep expired items in a background thread every ``sweep_interval_minutes`` (default:
        ``ttl["sweep_interval_minutes"]``, else 5), as LangGraph's ``PostgresStore`` does, until
        :meth:`stop_ttl_sweeper` or :meth:`close`. The returned future completes when the sweeper stops."""
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
        with self._lock:
            for op in ops:
                check_op(op)
            if any(isinstance(op, PutOp) for op in ops):
                self.sweep_ttl()
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


def json_part(partition: Namespace) -> str:
    """The ``part`` column of a partition: its key as JSON (``'["ana", ""]'``)."""
    return json.dumps(list(partition.key))


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
