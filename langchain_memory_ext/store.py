"""``MemoryStore``: LangGraph's long-term memory interface (``BaseStore``) over a memory-ext store.

How LangGraph namespace tuples map onto memory-ext
--------------------------------------------------
* **Key/value truth.** Items live in a small SQLite file of their own beside the engine's store,
  ``engine.path / "langgraph_store.sqlite3"``, table ``items(part, ns, key, value, created_at, updated_at,
  turn_id)``. ``part`` is the engine partition (below), ``ns`` the namespace labels joined by ``"."`` (LangGraph
  forbids ``"."`` inside a label, so the join is unambiguous). ``get``, ``put``, ``delete``, ``list_namespaces``
  and filter-only ``search`` are answered from this table.
* **Natural-language search.** Every put (unless ``index=False``) is also archived in the engine as a turn of
  ``Namespace(user_id, agent_id, session_id=".".join(namespace))`` — by default ``user_id="langgraph-store"`` —
  with ``external_id = key`` and the namespace and key in ``metadata["langgraph_store"]``. Its text is the
  value's string fields (or the fields named by ``index_fields`` / ``PutOp.index``). ``search(prefix,
  query=...)`` runs one engine search over the sessions under the prefix, maps each hit back through the
  row's ``turn_id`` (so superseded versions are skipped), applies ``filter``, then ``offset``/``limit``. The
  ``score`` is the engine's fused score.
* **Delete** removes the row and rebuilds the namespace's session in the engine (forget it, re-archive the live
  items), so deleted text is no longer searchable or stored. An **update** keeps the old version's turn in the
  engine as history (memory-ext keeps turns losslessly) but it is never returned.

**Forgetting.** The store registers itself as a face of the engine (``engine.register_face``): every
``engine.forget`` removes the partition's items with the namespace — ``forget(Namespace(user_id, agent_id))``
all of them, a session (one LangGraph namespace) its items, ``record_ids``/``hook_ids`` the items whose turn went
— also in processes that never create a ``MemoryStore`` (the engine records :func:`forget_items` as the hook).
The item table overwrites deleted rows (``secure_delete``).

Differences from ``InMemoryStore`` that tests pin: ``created_at`` survives updates (like LangGraph's Postgres
store), a ``query`` always goes through memory-ext retrieval (no ``index`` configuration needed), and there is
no TTL (``supports_ttl = False``).
"""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NamedTuple

from langgraph.store.base import (
    BaseStore,
    GetOp,
    Item,
    ListNamespacesOp,
    MatchCondition,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
)
from langgraph.store.base.embed import get_text_at_path, tokenize_path
from memory_ext import MemoryEngine, Namespace, Turn
from memory_ext.errors import InvalidNamespaceError, InvalidQueryError

__all__ = ["MemoryStore"]

DB_NAME = "langgraph_store.sqlite3"
META_KEY = "langgraph_store"
_OPERATORS = ("$eq", "$ne", "$gt", "$gte", "$lt", "$lte")

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
"""


# -- pure helpers (shared by every path) -------------------------------------------------------------------------
def join_namespace(namespace: Sequence[str]) -> str:
    """``("users", "ana")`` -> ``"users.ana"`` (labels never contain ``"."``)."""
    return ".".join(namespace)


def split_namespace(joined: str) -> tuple[str, ...]:
    return tuple(joined.split("."))


def check_labels(namespace: Sequence[str], field: str = "namespace") -> tuple[str, ...]:
    """LangGraph's label rules (non-empty strings without ``"."`` or NUL), also for ops passed to ``batch``."""
    for label in namespace:
        if not isinstance(label, str) or not label or "." in label or "\x00" in label:
            raise InvalidNamespaceError(f"{field} label", label,
                                        "namespace labels are non-empty strings without '.' or NUL")
    return tuple(namespace)


def namespace_matches(condition: MatchCondition, namespace: tuple[str, ...]) -> bool:
    """Prefix/suffix match of a namespace, ``"*"`` matching any one label."""
    path = tuple(condition.path)
    if len(namespace) < len(path):
        return False
    if condition.match_type == "prefix":
        pairs = zip(namespace, path, strict=False)
    elif condition.match_type == "suffix":
        pairs = zip(reversed(namespace), reversed(path), strict=False)
    else:
        raise InvalidQueryError("match_type", condition.match_type, "use 'prefix' or 'suffix'")
    return all(p == "*" or n == p for n, p in pairs)


def _operator(value: Any, op: str, expected: Any) -> bool:
    if op == "$eq":
        return bool(value == expected)
    if op == "$ne":
        return bool(value != expected)
    if op not in _OPERATORS:
        raise InvalidQueryError(f"filter.{op}", expected, "valid operators: " + ", ".join(_OPERATORS))
    if value is None or isinstance(value, (dict, list)):
        return False
    try:
        a, b = float(value), float(expected)
    except (TypeError, ValueError):
        return False
    return {"$gt": a > b, "$gte": a >= b, "$lt": a < b, "$lte": a <= b}[op]


def value_matches(value: Any, expected: Any) -> bool:
    """LangGraph filter semantics: equality, nested mappings, ``{"$op": x}`` comparisons."""
    if isinstance(expected, Mapping):
        if any(str(k).startswith("$") for k in expected):
            return all(_operator(value, op, x) for op, x in expected.items())
        return isinstance(value, Mapping) and all(value_matches(value.get(k), v) for k, v in expected.items())
    if isinstance(expected, (list, tuple)):
        return (isinstance(value, (list, tuple)) and len(value) == len(expected)
                and all(value_matches(v, e) for v, e in zip(value, expected, strict=True)))
    return bool(value == expected)


def filter_matches(value: Mapping[str, Any], flt: Mapping[str, Any] | None) -> bool:
    return not flt or all(value_matches(value.get(k), v) for k, v in flt.items())


def index_text(value: Mapping[str, Any], fields: Sequence[str] | None) -> str:
    """The text archived for search: the named fields, or every string in the value (else its JSON)."""
    if fields is not None:
        texts = [t for f in fields for t in get_text_at_path(value, tokenize_path(f)) if t]
        return "\n".join(texts)
    strings: list[str] = []

    def walk(v: Any) -> None:
        if isinstance(v, str):
            if v.strip():
                strings.append(v)
        elif isinstance(v, Mapping):
            for x in v.values():
                walk(x)
        elif isinstance(v, (list, tuple)):
            for x in v:
                walk(x)

    walk(value)
    return "\n".join(strings) or json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)


def _check_op(op: Op) -> None:
    if isinstance(op, (GetOp, PutOp)):
        if not check_labels(op.namespace):
            raise InvalidNamespaceError("namespace", op.namespace, "give a non-empty namespace tuple")
    elif isinstance(op, SearchOp):
        check_labels(op.namespace_prefix, "namespace_prefix")
    elif isinstance(op, ListNamespacesOp):
        for condition in op.match_conditions or ():
            for label in condition.path:
                if label != "*":
                    check_labels((label,), "match_conditions.path")


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
    value: str
    created_at: str
    updated_at: str
    turn_id: str | None

    def item(self, score: float | None = None, *, search: bool = False) -> Item:
        args = {"namespace": split_namespace(self.ns), "key": self.key, "value": json.loads(self.value),
                "created_at": datetime.fromisoformat(self.created_at),
                "updated_at": datetime.fromisoformat(self.updated_at)}
        return SearchItem(**args, score=score) if search else Item(**args)


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
    The module docstring documents the mapping.
    """

    supports_ttl = False
    name = "langgraph_store"
    hook = "langchain_memory_ext.store:forget_items"
    """What the engine calls to forget items when no MemoryStore is open (see :mod:`memory_ext.store.faces`)."""

    def __init__(self, *, engine: MemoryEngine, user_id: str = "langgraph-store", agent_id: str | None = None,
                 index_fields: Sequence[str] | None = None) -> None:
        self.engine = engine
        self.partition = Namespace(user_id, agent_id)  # validates the ids now
        self._part = json.dumps(list(self.partition.key))
        self.index_fields = list(index_fields) if index_fields is not None else None
        self._lock = threading.RLock()
        self._rebuilding = False
        self._closed = False
        self._db = _connect(engine.path / DB_NAME, engine.config.storage.file_mode)
        self._db.executescript(_SCHEMA)
        engine.register_face(self)  # engine.forget removes this store's items with their namespace

    def forget(self, namespace: Namespace, turn_ids: Sequence[str] | None) -> int:
        """Called by ``engine.forget``: remove the namespace's items (or those whose turn was forgotten)."""
        if self._rebuilding:  # our own forget-and-re-archive of a session keeps its live items
            return 0
        if self._closed:  # closed: the table is still on disk
            return forget_items(self.engine.path, namespace, turn_ids)
        with self._lock, self._tx() as db:
            return _forget_rows(db, namespace, turn_ids)

    def close(self) -> None:
        """Close the item table (the engine is the caller's to close)."""
        with self._lock:
            self._closed = True
            self._db.close()

    # -- sqlite primitives --------------------------------------------------------------------------------------
    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        self._db.execute("BEGIN IMMEDIATE")
        try:
            yield self._db
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")

    def _rows(self, where: str = "", args: Sequence[Any] = ()) -> list[_Row]:
        sql = "SELECT ns, key, value, created_at, updated_at, turn_id FROM items WHERE part = ?"
        return [_Row(*r) for r in self._db.execute(f"{sql} {where} ORDER BY rowid", [self._part, *args])]

    def _under(self, prefix: Sequence[str]) -> list[_Row]:
        if not prefix:
            return self._rows()
        joined = join_namespace(prefix)
        return self._rows("AND (ns = ? OR substr(ns, 1, ?) = ?)", [joined, len(joined) + 1, joined + "."])

    def _session(self, ns: str) -> Namespace:
        return Namespace(self.partition.user_id, self.partition.agent_id, ns)

    # -- operations ---------------------------------------------------------------------------------------------
    def _get(self, op: GetOp) -> Item | None:
        rows = self._rows("AND ns = ? AND key = ?", [join_namespace(op.namespace), op.key])
        return rows[0].item() if rows else None

    def _search(self, op: SearchOp) -> list[SearchItem]:
        if op.limit < 0 or op.offset < 0:
            raise InvalidQueryError("limit" if op.limit < 0 else "offset", min(op.limit, op.offset),
                                    "limit and offset are non-negative integers")
        rows = [r for r in self._under(op.namespace_prefix) if filter_matches(json.loads(r.value), op.filter)]
        if not op.query:
            return [r.item(search=True) for r in rows[op.offset:op.offset + op.limit]]  # type: ignore[misc]
        by_turn = {r.turn_id: r for r in rows if r.turn_id}
        ranked: list[SearchItem] = []
        if by_turn:
            sessions = sorted({r.ns for r in by_turn.values()})
            k = min(self.engine.config.limits.max_k, max(10, 4 * (op.offset + op.limit) + len(rows)))
            result = self.engine.search(op.query, self.partition, k=k, filters={"session_id": sessions})
            seen: set[str] = set()
            for hit in result.items:
                for tid in hit.turn_ids:
                    row = by_turn.get(tid)
                    if row is not None and tid not in seen:
                        seen.add(tid)
                        ranked.append(row.item(hit.score, search=True))  # type: ignore[arg-type]
        # like InMemoryStore: items that are not indexed (index=False) follow the ranked ones, without a score
        ranked.extend(r.item(search=True) for r in rows if not r.turn_id)  # type: ignore[misc]
        return ranked[op.offset:op.offset + op.limit]

    def _list_namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        spaces = [split_namespace(ns) for (ns,) in
                  self._db.execute("SELECT DISTINCT ns FROM items WHERE part = ?", [self._part])]
        spaces = [s for s in spaces if all(namespace_matches(c, s) for c in op.match_conditions or ())]
        if op.max_depth is not None:
            spaces = list({s[:op.max_depth] for s in spaces})
        return sorted(spaces)[op.offset:op.offset + op.limit]

    def _apply_puts(self, puts: Mapping[tuple[tuple[str, ...], str], PutOp]) -> None:
        if not puts:
            return
        now = datetime.now(UTC)
        stamp = now.isoformat()
        writes = [op for op in puts.values() if op.value is not None]
        deletes = [op for op in puts.values() if op.value is None]
        for op in writes:
            if not isinstance(op.value, Mapping):
                raise InvalidQueryError("value", op.value, "store values are dicts (use None to delete)")
        texts = {(op.namespace, op.key): index_text(op.value, op.index if isinstance(op.index, list)
                                                    else self.index_fields)  # type: ignore[arg-type]
                 for op in writes if op.index is not False}
        turn_ids: dict[tuple[tuple[str, ...], str], str] = {}
        for ns in {n for n, _ in texts}:
            keys = [(n, k) for (n, k) in texts if n == ns and texts[(n, k)].strip()]
            if not keys:
                continue
            turns = [Turn(role="user", content=texts[nk], timestamp=now, external_id=nk[1],
                          metadata={META_KEY: {"namespace": list(ns), "key": nk[1]}}) for nk in keys]
            added = self.engine.add_turns(turns, self._session(join_namespace(ns)))
            turn_ids.update(zip(keys, added.turn_ids, strict=True))
        rebuild: set[str] = set()
        with self._tx() as db:
            for op in writes:
                db.execute(
                    "INSERT INTO items (part, ns, key, value, created_at, updated_at, turn_id) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (part, ns, key) DO UPDATE SET "
                    "value = excluded.value, updated_at = excluded.updated_at, turn_id = excluded.turn_id",
                    [self._part, join_namespace(op.namespace), op.key,
                     json.dumps(dict(op.value), ensure_ascii=False, default=str),  # type: ignore[arg-type]
                     stamp, stamp, turn_ids.get((op.namespace, op.key))])
            for op in deletes:
                ns = join_namespace(op.namespace)
                cur = db.execute("DELETE FROM items WHERE part = ? AND ns = ? AND key = ? RETURNING turn_id",
                                 [self._part, ns, op.key])
                if any(tid for (tid,) in cur.fetchall()):
                    rebuild.add(ns)
        for ns in sorted(rebuild):
            self._rebuild(ns)

    def _rebuild(self, ns: str) -> None:
        """Forget a namespace's session in the engine and re-archive its live, indexed items."""
        session = self._session(ns)
        live = [r for r in self._rows("AND ns = ? AND turn_id IS NOT NULL", [ns])]
        old = {t.id: t for t in self.engine.get_turns(session)}
        keep = [(r, old[r.turn_id]) for r in live if r.turn_id in old]
        self._rebuilding = True
        try:
            self.engine.forget(session)
        finally:
            self._rebuilding = False
        if not keep:
            return
        turns = [t.model_copy(update={"id": None}) for _, t in keep]
        added = self.engine.add_turns(turns, session)
        with self._tx() as db:
            for (row, _), tid in zip(keep, added.turn_ids, strict=True):
                db.execute("UPDATE items SET turn_id = ? WHERE part = ? AND ns = ? AND key = ?",
                           [tid, self._part, row.ns, row.key])

    # -- BaseStore ----------------------------------------------------------------------------------------------
    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run operations; reads see the store as it was before the batch, then the puts apply (last one wins)."""
        results: list[Result] = []
        puts: dict[tuple[tuple[str, ...], str], PutOp] = {}
        with self._lock:
            for op in ops:
                _check_op(op)
                if isinstance(op, GetOp):
                    results.append(self._get(op))
                elif isinstance(op, SearchOp):
                    results.append(self._search(op))
                elif isinstance(op, ListNamespacesOp):
                    results.append(self._list_namespaces(op))
                elif isinstance(op, PutOp):
                    puts[(tuple(op.namespace), op.key)] = op
                    results.append(None)
                else:
                    raise InvalidQueryError("op", op, "pass GetOp, PutOp, SearchOp or ListNamespacesOp")
            self._apply_puts(puts)
        return results

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """Async twin of :meth:`batch` (runs in a worker thread)."""
        return await asyncio.to_thread(self.batch, list(ops))
