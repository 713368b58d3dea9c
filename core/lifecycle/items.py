"""Key/value items (the LangGraph store's) as engine operations: put, get, search, list namespaces, sweep.

An item lives in an engine partition ``Namespace(user_id, agent_id)`` under a LangGraph namespace (a tuple of
labels) and a key; its rows are in the truth store (:mod:`memory_ext.store.items`), so every process of a store —
a ``memext serve`` and the ``RemoteEngine`` hosts in front of it, the engines of a PostgreSQL schema — sees the
same items, and ``forget`` removes them with the rest.

* **put** (:meth:`Items.put`): one transaction writes the item rows and, for an item with ``text``, archives it
  as a turn of ``Namespace(user_id, agent_id, session_id=".".join(namespace))`` (``external_id`` = key, the
  namespace and key in ``metadata["langgraph_store"]``). A put on a key whose item has a turn is
  ``update`` of that turn (the old version keeps its validity interval). An item put without text, or a delete
  (``value=None``), then deletes its turn's every version (``delete``). ``vectors`` (client-side embeddings, by
  field path) replace the item's vectors.
* **get / search / list**: only live items (``expires_at`` later than ``now``) are returned. ``search`` filters
  by namespace prefix and LangGraph's filter language on the value (in SQL: :mod:`memory_ext.store.metadata_filter`,
  the same implementation as ``search(filters={"metadata": ...})``), then ranks by ``query_vector`` (cosine,
  max-pooled over an item's vectors, as LangGraph's ``InMemoryStore``), or by ``query`` through memory-ext
  retrieval over the item turns; unranked items follow, unscored.
* **TTL**: ``ttl_minutes`` sets ``expires_at``; reads with ``refresh_ttl`` restart it. Expired items are removed
  (row, vectors, turn) by :meth:`Items.sweep`, which runs before every put and on a timer in the process that
  holds the writer (:data:`SWEEP_INTERVAL_S`).
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import suppress
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict

from ..errors import InvalidNamespaceError, InvalidQueryError, ValidationError
from ..models import Namespace, SearchResult, Turn, to_utc
from ..store.metadata_filter import parse_metadata_filter

if TYPE_CHECKING:
    from ..ingest.pipeline import WritePipeline
    from ..store.interface import TruthStore
    from ..store.items import ItemRow
    from .versions import Versions

__all__ = ["SWEEP_INTERVAL_S", "ItemPut", "ItemSweeper", "Items", "MatchCondition", "StoredItem"]

logger = logging.getLogger(__name__)

META_KEY = "langgraph_store"
SWEEP_INTERVAL_S = 60.0
"""How often the writer process sweeps expired items (besides before every put)."""
TimeLike = datetime | str | float | None
MatchCondition = tuple[Literal["prefix", "suffix"], Sequence[str]]
"""A namespace condition of ``list_item_namespaces``: prefix or suffix labels, ``"*"`` matching any one label."""


class ItemPut(BaseModel):
    """One write of :meth:`MemoryEngine.put_items <memory_ext.MemoryEngine.put_items>`: ``value=None`` deletes the item.

    ``text`` is what is archived as an engine turn for natural-language search (None: not indexed);
    ``ttl_minutes`` the item's time to live; ``vectors`` client-side embeddings by field path (None: none).
    """

    model_config = ConfigDict(frozen=True)
    namespace: tuple[str, ...]
    key: str
    value: dict[str, Any] | None = None
    text: str | None = None
    ttl_minutes: float | None = None
    vectors: dict[str, list[float]] | None = None


class StoredItem(BaseModel):
    """An item as read back; ``score`` is set by a ranked search."""

    model_config = ConfigDict(frozen=True)
    namespace: tuple[str, ...]
    key: str
    value: dict[str, Any]
    created_at: datetime
    updated_at: datetime
    score: float | None = None


def _labels(namespace: Any, field: str, *, empty: bool = False) -> tuple[str, ...]:
    if isinstance(namespace, str) or not isinstance(namespace, Sequence):
        raise InvalidNamespaceError(field, namespace, "give the namespace as a tuple of labels, e.g. ('users', 'ana')")
    for label in namespace:
        if not isinstance(label, str) or not label or "." in label or "\x00" in label:
            raise InvalidNamespaceError(f"{field} label", label, "namespace labels are non-empty strings without '.' "
                                                                 "or NUL")
    if not namespace and not empty:
        raise InvalidNamespaceError(field, namespace, "give a non-empty namespace tuple")
    return tuple(namespace)


def _key(key: Any) -> str:
    if not isinstance(key, str) or not key:
        raise InvalidQueryError("key", key, "give the item's key as a non-empty string")
    return key


def _page(limit: Any, offset: Any) -> None:
    for name, value in (("limit", limit), ("offset", offset)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise InvalidQueryError(name, value, "limit and offset are non-negative integers")


def _match(condition: Any) -> tuple[str, tuple[str, ...]]:
    try:
        kind, path = condition
    except (TypeError, ValueError):
        raise InvalidQueryError("match_conditions", condition, "give (match_type, path) pairs") from None
    if kind not in ("prefix", "suffix"):
        raise InvalidQueryError("match_type", kind, "use 'prefix' or 'suffix'")
    labels = tuple(path)
    _labels([p for p in labels if p != "*"], "match_conditions.path", empty=True)
    return kind, labels


def _matches(kind: str, path: tuple[str, ...], namespace: tuple[str, ...]) -> bool:
    if len(namespace) < len(path):
        return False
    pairs = zip(namespace, path, strict=False) if kind == "prefix" else \
        zip(reversed(namespace), reversed(path), strict=False)
    return all(p == "*" or n == p for n, p in pairs)


def cosine(query: Sequence[float], vectors: Sequence[np.ndarray]) -> list[float]:
    """Cosine similarity of a query with each vector (0 for a zero vector), as ``InMemoryStore`` computes it."""
    if not vectors:
        return []
    q = np.asarray(query, dtype=float)
    m = np.asarray(vectors, dtype=float)
    norms = np.linalg.norm(m, axis=1)
    out = np.zeros_like(norms)
    mask = norms != 0
    out[mask] = np.dot(m[mask], q) / (norms[mask] * np.linalg.norm(q))
    return [float(x) for x in out]


def _stored(row: ItemRow, score: float | None = None) -> StoredItem:
    return StoredItem(namespace=tuple(row.ns.split(".")), key=row.key, value=json.loads(row.value),
                      created_at=datetime.fromisoformat(row.created_at),
                      updated_at=datetime.fromisoformat(row.updated_at), score=score)


class Items:
    """The item operations over one engine's truth store, write pipeline, versions and search."""

    def __init__(self, store: TruthStore, writer: WritePipeline, versions: Versions,
                 search: Callable[..., SearchResult], max_k: int) -> None:
        self._store = store
        self._writer = writer
        self._versions = versions
        self._search = search
        self._max_k = max_k

    @staticmethod
    def _partition(namespace: Namespace | str) -> Namespace:
        ns = Namespace.coerce(namespace)
        if ns.session_id is not None:
            raise InvalidNamespaceError("namespace.session_id", ns.session_id,
                                        "items belong to a (user_id, agent_id) partition; name the LangGraph "
                                        "namespace in each item instead of a session")
        return ns

    @staticmethod
    def _now(now: TimeLike) -> datetime:
        return to_utc(now, "now") or datetime.now(UTC)

    # -- writes --------------------------------------------------------------------------------------------------
    def put(self, namespace: Namespace | str, items: Iterable[ItemPut | Mapping[str, Any]], now: TimeLike) -> int:
        """Write (or, with ``value=None``, delete) items; the last write of a key wins. Returns the writes."""
        ns = self._partition(namespace)
        if isinstance(items, (Mapping, ItemPut, str, bytes)):
            raise InvalidQueryError("items", items, "pass a list of items, even for one item")
        puts: dict[tuple[str, str], ItemPut] = {}
        for i, raw in enumerate(items):
            try:
                put = raw if isinstance(raw, ItemPut) else ItemPut.model_validate(raw)
            except ValueError as exc:
                raise InvalidQueryError(f"items[{i}]", raw, f"give namespace, key, value, text, ttl_minutes, "
                                                            f"vectors ({str(exc).splitlines()[0]})") from None
            _labels(put.namespace, f"items[{i}].namespace")
            _key(put.key)
            if put.ttl_minutes is not None and not put.ttl_minutes > 0:
                raise InvalidQueryError(f"items[{i}].ttl_minutes", put.ttl_minutes, "give minutes (> 0), or None")
            puts[(".".join(put.namespace), put.key)] = put
        if not puts:
            return 0
        at = self._now(now)
        values = {k: self._encode(f"items[{i}].value", p.value) for i, (k, p) in enumerate(puts.items())}
        self.sweep(ns, at)
        store, rows = self._store, self._store.items
        to_drop: list[tuple[str, str]] = []
        stamp = at.isoformat()
        with store.transaction("put items") as conn:
            ns_id = store.ensure_namespace(conn, ns.key)
            old = rows.stored(conn, ns_id, list(puts))
            for (joined, key), put in puts.items():
                prev = old.get((joined, key))
                if put.value is None:
                    rows.delete(conn, ns_id, [(joined, key)])
                    if prev is not None and prev.turn_id:
                        to_drop.append((joined, prev.turn_id))
                    continue
                turn_id = record_id = None
                if put.text is not None and put.text.strip():
                    turn_id, record_id = self._archive(conn, ns, ns_id, put, prev, at)
                elif prev is not None and prev.turn_id:
                    to_drop.append((joined, prev.turn_id))
                expires = (at + timedelta(minutes=put.ttl_minutes)).timestamp() if put.ttl_minutes else None
                rows.upsert(conn, ns_id, joined, key, values[(joined, key)] or "{}", stamp, turn_id, record_id,
                            expires, put.ttl_minutes)
                rows.set_vectors(conn, ns_id, joined, key, [
                    (path, np.asarray(vector, dtype=np.float64).tobytes())
                    for path, vector in (put.vectors or {}).items()])
        self._drop_turns(ns, to_drop)
        return len(puts)

    @staticmethod
    def _encode(field: str, value: dict[str, Any] | None) -> str | None:
        if value is None:
            return None
        try:
            return json.dumps(value, allow_nan=False)
        except (TypeError, ValueError):
            raise InvalidQueryError(field, value, "item values are JSON objects (strings, finite numbers, bools, "
                                                  "None, lists and objects)") from None

    def _archive(self, conn: Any, ns: Namespace, ns_id: int, put: ItemPut, prev: ItemRow | None,
                 at: datetime) -> tuple[str, str]:
        """Archive an item's text as a turn (a new version of its turn when it has one): (turn id, record id)."""
        session = Namespace(ns.user_id, ns.agent_id, ".".join(put.namespace))
        meta = {META_KEY: {"namespace": list(put.namespace), "key": put.key}}
        text = put.text or ""
        if prev is not None and prev.turn_id:
            updated = self._update(conn, session, ns_id, prev.turn_id, text, meta, at)
            if updated is not None:
                return updated
        added = self._writer.add_in(conn, [Turn(role="user", content=text, timestamp=at, external_id=put.key,
                                                metadata=meta)], session)
        if added.existing_ids:  # the engine holds a version of this key (an item file's turn): a new version
            updated = self._update(conn, session, ns_id, added.turn_ids[0], text, meta, at)
            if updated is not None:
                return updated
        return added.turn_ids[0], added.record_ids[0]

    def _update(self, conn: Any, session: Namespace, ns_id: int, turn_id: str, text: str, meta: dict[str, Any],
                at: datetime) -> tuple[str, str] | None:
        try:
            added = self._versions.update_in(conn, session, ns_id, turn_id, content=text, metadata=meta,
                                             timestamp=at)
        except ValidationError:  # forgotten or deleted through the engine directly (nothing was written)
            return None
        return added.turn_ids[0], added.record_ids[0]

    def _drop_turns(self, ns: Namespace, turns: Sequence[tuple[str, str]]) -> None:
        """Delete items' archived turns, every version (``delete``; at the cost of what is removed)."""
        for joined, turn_id in turns:
            with suppress(ValidationError):  # already gone from the engine (forgotten through it directly)
                self._versions.delete(Namespace(ns.user_id, ns.agent_id, joined), [turn_id])

    def delete(self, namespace: Namespace | str, keys: Iterable[tuple[Sequence[str], str]], now: TimeLike) -> int:
        """Delete items (and their turns); returns how many were stored."""
        wanted = self._keys(keys)
        ns = self._partition(namespace)
        ns_id = self._store.find_namespace(ns.key)
        if ns_id is None or not wanted:
            return 0
        present = self._store.items.stored(self._store.reader(), ns_id, [(".".join(n), k) for n, k in wanted])
        self.put(ns, [ItemPut(namespace=n, key=k) for n, k in wanted], now)
        return len(present)

    def sweep(self, namespace: Namespace | str | None, now: TimeLike) -> int:
        """Remove expired items (rows, vectors, turns) of a partition, or of the whole store; returns how many."""
        store = self._store
        if store.read_only:
            return 0
        ns_id: int | None = None
        if namespace is not None:
            ns_id = store.find_namespace(self._partition(namespace).key)
            if ns_id is None:
                return 0
        ts = self._now(now).timestamp()
        if not store.items.expired(store.reader(), ts, ns_id):
            return 0
        with store.transaction("sweep items") as conn:
            gone = store.items.expired(conn, ts, ns_id)
            for nid, joined, key, _ in gone:
                store.items.delete(conn, nid, [(joined, key)])
        partitions = {nid: store.namespace_key(nid) for nid in {g[0] for g in gone}}
        for nid, joined, _, turn_id in gone:
            if turn_id:
                user_id, agent_id = partitions[nid]
                self._drop_turns(Namespace(user_id, agent_id or None), [(joined, turn_id)])
        return len(gone)

    # -- reads ---------------------------------------------------------------------------------------------------
    @staticmethod
    def _keys(keys: Iterable[tuple[Sequence[str], str]]) -> list[tuple[tuple[str, ...], str]]:
        if isinstance(keys, (str, bytes, Mapping)):
            raise InvalidQueryError("keys", keys, "pass a list of (namespace, key) pairs")
        out = []
        for pair in keys:
            try:
                namespace, key = pair
            except (TypeError, ValueError):
                raise InvalidQueryError("keys", pair, "pass (namespace, key) pairs") from None
            out.append((_labels(namespace, "namespace"), _key(key)))
        return out

    def _refresh(self, ns_id: int, rows: Sequence[ItemRow], at: float) -> None:
        keys = [(r.ns, r.key) for r in rows if r.ttl_minutes is not None]
        if keys and not self._store.read_only:
            with self._store.transaction("refresh item ttl") as conn:
                self._store.items.refresh(conn, ns_id, at, keys)

    def get(self, namespace: Namespace | str, keys: Iterable[tuple[Sequence[str], str]], refresh_ttl: bool,
            now: TimeLike) -> list[StoredItem | None]:
        """The live items of ``(namespace, key)`` pairs, in order (None: no such item, or expired)."""
        wanted = self._keys(keys)
        ns_id = self._store.find_namespace(self._partition(namespace).key)
        if ns_id is None:
            return [None] * len(wanted)
        at = self._now(now).timestamp()
        exact = [(".".join(n), k) for n, k in wanted]
        found = {(r.ns, r.key): r for r in self._store.items.rows(self._store.reader(), ns_id, at, exact=exact)}
        if refresh_ttl:
            self._refresh(ns_id, list(found.values()), at)
        return [_stored(found[k]) if k in found else None for k in exact]

    def search(self, namespace: Namespace | str, prefix: Sequence[str], *, query: str | None,
               query_vector: Sequence[float] | None, filter: Mapping[str, Any] | None, limit: int, offset: int,
               refresh_ttl: bool, now: TimeLike) -> list[StoredItem]:
        """Items under ``prefix`` that pass ``filter``, in namespace then insertion order — or ranked by
        ``query_vector`` / ``query`` (see the module docstring); then ``offset`` / ``limit``."""
        ns = self._partition(namespace)
        labels = _labels(prefix, "namespace_prefix", empty=True)
        _page(limit, offset)
        if query is not None and not isinstance(query, str):
            raise InvalidQueryError("query", query, "give the query as a string (or None)")
        where = parse_metadata_filter(filter, field="filter") if filter else None
        ns_id = self._store.find_namespace(ns.key)
        if ns_id is None:
            return []
        at = self._now(now).timestamp()
        store = self._store
        rows = store.items.rows(store.reader(), ns_id, at, prefix=".".join(labels) or None, where=where)
        page: list[tuple[ItemRow, float | None]]
        if query_vector is not None:
            page = self._vector_page(ns_id, rows, query_vector, limit, offset)
        elif query:
            page = self._engine_page(ns, rows, query, limit, offset)
        else:
            page = [(r, None) for r in rows[offset:offset + limit]]
        if refresh_ttl:
            self._refresh(ns_id, [r for r, _ in page], at)
        return [_stored(r, score) for r, score in page]

    def _engine_page(self, ns: Namespace, rows: list[ItemRow], query: str, limit: int, offset: int
                     ) -> list[tuple[ItemRow, float | None]]:
        """Rank through memory-ext retrieval; items that are not indexed follow, unscored (like InMemoryStore)."""
        by_turn = {r.turn_id: r for r in rows if r.turn_id}
        ranked: list[tuple[ItemRow, float | None]] = []
        if by_turn:
            sessions = sorted({r.ns for r in by_turn.values()})
            k = min(self._max_k, max(10, 4 * (offset + limit) + len(rows)))
            result = self._search(query, ns, k=k, filters={"session_id": sessions})
            seen: set[str] = set()
            for hit in result.items:
                for tid in hit.turn_ids:
                    row = by_turn.get(tid)
                    if row is not None and tid not in seen:
                        seen.add(tid)
                        ranked.append((row, hit.score))
        ranked.extend((r, None) for r in rows if not r.turn_id)
        return ranked[offset:offset + limit]

    def _vector_page(self, ns_id: int, rows: list[ItemRow], query: Sequence[float], limit: int, offset: int
                     ) -> list[tuple[ItemRow, float | None]]:
        """``InMemoryStore``'s ranking: cosine with every embedded field, max-pooled per item; items without
        vectors fill a short page, unscored."""
        if not rows:
            return []
        try:
            q = [float(x) for x in query]
        except (TypeError, ValueError):
            raise InvalidQueryError("query_vector", query, "give the query embedding as a list of numbers") from None
        vectors: dict[tuple[str, str], list[np.ndarray]] = {}
        for ns, key, blob in self._store.items.vectors(self._store.reader(), ns_id):
            vectors.setdefault((ns, key), []).append(np.frombuffer(blob, dtype=np.float64))
        flat: list[tuple[ItemRow, np.ndarray]] = []
        scoreless = []
        for row in rows:
            mine = vectors.get((row.ns, row.key), [])
            flat.extend((row, v) for v in mine)
            if not mine:
                scoreless.append(row)
        if flat and any(len(v) != len(q) for _, v in flat):
            raise InvalidQueryError("query_vector", f"{len(q)} numbers", "embed the query with the embeddings "
                                    "the items were embedded with (same size)")
        scores = cosine(q, [v for _, v in flat])
        ranked = sorted(zip(scores, (r for r, _ in flat), strict=True), key=lambda x: x[0], reverse=True)
        seen: set[tuple[str, str]] = set()
        kept: list[tuple[ItemRow, float | None]] = []
        for score, row in ranked:
            if (row.ns, row.key) in seen:
                continue
            position = len(seen)
            seen.add((row.ns, row.key))
            if position >= offset + limit:
                break
            if position >= offset:
                kept.append((row, score))
        if scoreless and len(kept) < limit:
            kept.extend((r, None) for r in scoreless[:limit - len(kept)])
        return kept

    def list_namespaces(self, namespace: Namespace | str, match_conditions: Iterable[MatchCondition] | None,
                        max_depth: int | None, limit: int, offset: int, now: TimeLike) -> list[tuple[str, ...]]:
        """The LangGraph namespaces that hold live items (sorted; cut to ``max_depth`` labels)."""
        ns = self._partition(namespace)
        conditions = [_match(c) for c in match_conditions or ()]
        _page(limit, offset)
        if max_depth is not None and (isinstance(max_depth, bool) or not isinstance(max_depth, int)
                                      or max_depth < 1):
            raise InvalidQueryError("max_depth", max_depth, "give a positive number of labels, or None")
        ns_id = self._store.find_namespace(ns.key)
        if ns_id is None:
            return []
        at = self._now(now).timestamp()
        spaces = [tuple(joined.split(".")) for joined in self._store.items.live_namespaces(self._store.reader(),
                                                                                            ns_id, at)]
        spaces = [s for s in spaces if all(_matches(kind, path, s) for kind, path in conditions)]
        if max_depth is not None:
            spaces = list({s[:max_depth] for s in spaces})
        return sorted(spaces)[offset:offset + limit]


class ItemSweeper:
    """The writer's TTL sweeper: every :data:`SWEEP_INTERVAL_S` seconds, the store's expired items go."""

    def __init__(self, store: TruthStore, items: Items) -> None:
        self._store = store
        self._items = items
        self._thread: tuple[threading.Thread, threading.Event] | None = None

    def start(self) -> threading.Event | None:
        """At open: import an item file of an earlier version and start the timer; returns the event set after
        each sweep (tests wait on it), or None for a read-only store (which neither imports nor sweeps)."""
        from ..store.items import import_legacy_file

        if self._store.read_only:
            return None
        interval_s = SWEEP_INTERVAL_S
        import_legacy_file(self._store)
        stop = threading.Event()
        sweeps = threading.Event()

        def run() -> None:
            while not stop.wait(interval_s):
                try:
                    self._items.sweep(None, None)
                except Exception:
                    if stop.is_set():
                        return
                    logger.exception("item TTL sweep failed; retrying in %s s", interval_s)
                sweeps.set()

        thread = threading.Thread(target=run, name="memory-ext-item-sweeper", daemon=True)
        self._thread = (thread, stop)
        thread.start()
        return sweeps

    def stop(self) -> None:
        """Stop the timer (idempotent)."""
        if self._thread is not None:
            thread, stop = self._thread
            stop.set()
            if thread is not threading.current_thread():
                thread.join()
            self._thread = None
