"""Memory-level CRUD: update a memory to a new version, list its history, delete memories.

The unit is the *memory*: the turns that are versions of one statement. A memory is named by any of

* the ``external_id`` its turns carry (the LangGraph store's key, a chat platform's message id), or
* the id of one of its turns (``AddResult.turn_ids``, ``RetrievedItem.turn_ids``), or
* the id of a record built from one of them (``RetrievedItem.id``: the record's turn is meant).

Its *key* is its ``external_id``, or else the id of its first turn. :func:`update` writes the new version as a
new turn (same role, speaker, session and ``external_id``; the new content and metadata; the current time) in
the write pipeline — every derived index gets it — and, in the same transaction, ends the old version's validity:
its turn record and the records anchored to it get ``valid_to`` (now), ``superseded_by`` (the new turn record)
and ``replaced``. A default search never returns a replaced version (``search(as_of=...)`` before the update
does); ``get_turns`` still lists it (the store is lossless). The update is recorded in the ``memory_history``
table (key, ``update``, the new turn id, time).

:func:`history` merges the live versions (``add`` for the first, ``update`` for the others, a ``supersede``
entry when a later statement superseded a version's claim) with the recorded updates and deletes.

:func:`delete` forgets every version of the named memories through :func:`~memory_ext.lifecycle.forgetting.forget`
by their turn records' ids — the cost is that of the removed turns, not of the namespace — and records
``delete`` (and the ``add`` of what it removed) in the history, without any text: deleted means forgotten.

>>> import tempfile
>>> from memory_ext import MemoryEngine, Turn
>>> with MemoryEngine.open(tempfile.mkdtemp(), embedder="hashing") as engine:
...     _ = engine.add_turns([Turn(role="user", content="Ana lives in Oslo", external_id="home")], "ana")
...     _ = engine.update("ana", "home", content="Ana lives in Porto")
...     [(v.operation, v.content) for v in engine.history("ana", "home")]
[('add', 'Ana lives in Oslo'), ('update', 'Ana lives in Porto')]
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal

from ..errors import InvalidQueryError, ReadOnlyStoreError
from ..models import Namespace, Turn, to_utc
from ..results import AddResult, ForgetReceipt, Memory, MemoryPage, MemoryVersion
from ..store.filters import RecordFilter
from ..store.interface import Connection
from .forgetting import id_list

if TYPE_CHECKING:
    from ..ingest.pipeline import WritePipeline
    from ..store.interface import TruthStore
    from ..store.rows import TurnRow

__all__ = ["Versions"]

def _dt(ts: float | None) -> datetime:
    return datetime.fromtimestamp(ts if ts is not None else 0.0, UTC)


MAX_PAGE = 1000
"""The largest page ``list_memories`` returns."""
_CURSOR = "before:"


def _page_args(limit: Any, cursor: Any) -> int | None:
    """Validate ``limit`` (1..:data:`MAX_PAGE`) and ``cursor`` (a ``next_cursor``); the seq the page starts below."""
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_PAGE:
        raise InvalidQueryError("limit", limit, f"give an integer between 1 and {MAX_PAGE}")
    if cursor is None:
        return None
    if isinstance(cursor, str) and cursor.startswith(_CURSOR) and cursor[len(_CURSOR):].isdigit() \
            and len(cursor) <= 40:
        return int(cursor[len(_CURSOR):])
    raise InvalidQueryError("cursor", cursor, "pass the next_cursor of the previous page, or None for the first page")


class Versions:
    """Update, history and delete over one engine's truth store and write pipeline (see the module docstring).

    ``forget(namespace, record_ids)`` is the engine's forget (every index, the faces, the purge).
    """

    def __init__(self, store: TruthStore, writer: WritePipeline,
                 forget: Callable[[Namespace, list[str]], ForgetReceipt]) -> None:
        self._store = store
        self._writer = writer
        self._forget = forget

    # -- resolution --------------------------------------------------------------------------------------------
    def _ns_id(self, ns: Namespace, field: str, ident: Any) -> int:
        ns_id = self._store.find_namespace(ns.key)
        if ns_id is None:
            raise InvalidQueryError(field, ident, "this namespace has no memories; check the namespace")
        return ns_id

    def _key(self, conn: Connection, ns_id: int, ident: str, field: str, session_id: str | None
             ) -> tuple[str, str | None, TurnRow | None]:
        """The memory key of ``ident``, its session and its turn (None when only its history is left)."""
        if not isinstance(ident, str) or not ident:
            raise InvalidQueryError(field, ident, "give the id of a memory: a turn id, a record id (RetrievedItem.id)"
                                    " or an external_id")
        turn = self._store.turn_lookup(conn, ns_id, ident, session_id)
        if turn is None:
            ops = self._store.history_ops(conn, ns_id, ident, session_id)
            if ops:
                return ident, ops[-1][3], None
            raise InvalidQueryError(field, ident, "no memory of this namespace has this id; use a turn id, a record "
                                    "id (RetrievedItem.id) or an external_id of this namespace")
        key = self._store.memory_key_of(conn, ns_id, turn.id) or turn.external_id or turn.id
        return key, turn.session_id, turn

    # -- operations --------------------------------------------------------------------------------------------
    def update(self, namespace: Namespace | str, memory_id: str, *, content: str | None = None,
               metadata: Mapping[str, Any] | None = None,
               timestamp: datetime | str | float | None = None) -> AddResult:
        """Write a new version of a memory; returns the new turn's ids (``turn_ids[0]``, ``record_ids[0]``)."""
        ns = Namespace.coerce(namespace)
        if content is None and metadata is None:
            raise InvalidQueryError("content", None, "give the new content, the new metadata, or both")
        if metadata is not None and not isinstance(metadata, Mapping):
            raise InvalidQueryError("metadata", metadata, "give a dict (it replaces the memory's metadata)")
        store = self._store
        if store.read_only:
            raise ReadOnlyStoreError("update")
        ns_id = self._ns_id(ns, "id", memory_id)
        with store.transaction("update") as conn:
            return self.update_in(conn, ns, ns_id, memory_id, content=content, metadata=metadata,
                                  timestamp=timestamp)

    def update_in(self, conn: Connection, ns: Namespace, ns_id: int, memory_id: str, *,
                  content: str | None, metadata: Mapping[str, Any] | None,
                  timestamp: datetime | str | float | None) -> AddResult:
        """:meth:`update` inside the caller's open write transaction (the LangGraph store's put)."""
        store = self._store
        key, session, _ = self._key(conn, ns_id, memory_id, "id", ns.session_id)
        live = [(t, replaced) for t, _, replaced in store.turns_of_memory(conn, ns_id, key, session)]
        current = next((t for t, replaced in reversed(live) if not replaced), None)
        if current is None:
            raise InvalidQueryError("id", memory_id, "this memory was deleted; add it again with add_turns")
        now = to_utc(timestamp, "timestamp") or datetime.now(UTC)
        turn = Turn(role=current.role, content=current.content if content is None else content,
                    speaker=current.speaker, session_id=current.session_id, timestamp=now,
                    external_id=current.external_id, tool_calls=tuple(current.tool_calls),
                    attachments=tuple(current.attachments),
                    metadata=dict(current.metadata if metadata is None else metadata))
        added = self._writer.add_in(conn, [turn], ns, dedup=False)
        store.mark_replaced(conn, ns_id, current.id, now.timestamp(), added.record_ids[0])
        store.add_history(conn, ns_id, key, session, "update", added.turn_ids[0], now.timestamp())
        return added

    def history(self, namespace: Namespace | str, memory_id: str) -> list[MemoryVersion]:
        """Every version of a memory and the operations on it, oldest first."""
        ns = Namespace.coerce(namespace)
        ns_id = self._ns_id(ns, "id", memory_id)
        conn = self._store.reader()
        key, session, _ = self._key(conn, ns_id, memory_id, "id", ns.session_id)
        ops = self._store.history_ops(conn, ns_id, key, session)
        versions = self._store.turns_of_memory(conn, ns_id, key, session)
        updated = {turn_id for op, turn_id, _, _ in ops if op == "update"}
        live = {t.id for t, _, _ in versions}
        current = next((t.id for t, _, replaced in reversed(versions) if not replaced), None)
        out: list[tuple[float, int, MemoryVersion]] = []
        for op, turn_id, ts, _ in ops:
            if op == "update" and turn_id in live:
                continue  # listed below, with its content
            out.append((ts, len(out), MemoryVersion(memory_id=key, operation=op,  # type: ignore[arg-type]
                                                    turn_id=None, content=None, timestamp=_dt(ts))))
        for t, valid_to, replaced in versions:
            made: Literal["add", "update"] = "update" if t.id in updated else "add"
            out.append((t.ts or 0.0, len(out), MemoryVersion(
                memory_id=key, operation=made, turn_id=t.id, content=t.content, timestamp=_dt(t.ts),
                valid_to=None if valid_to is None else _dt(valid_to), current=t.id == current,
                metadata=t.metadata)))
            if valid_to is not None and not replaced:
                out.append((valid_to, len(out), MemoryVersion(
                    memory_id=key, operation="supersede", turn_id=t.id, content=t.content, timestamp=_dt(valid_to),
                    valid_to=_dt(valid_to), metadata=t.metadata)))
        return [v for _, _, v in sorted(out, key=lambda e: (e[0], e[1]))]

    @staticmethod
    def _memory(turn: TurnRow, key: str, record_id: str | None, versions: int,
                history: tuple[MemoryVersion, ...] = ()) -> Memory:
        return Memory(id=key, turn_id=turn.id, record_id=record_id, content=turn.content, speaker=turn.speaker,
                      role=turn.role, session_id=turn.session_id, timestamp=_dt(turn.ts) if turn.ts is not None
                      else None, external_id=turn.external_id, metadata=dict(turn.metadata),
                      version_count=max(1, versions), history=history)

    def list(self, namespace: Namespace | str, *, filters: Mapping[str, Any] | None = None, limit: int = 50,
             cursor: str | None = None) -> MemoryPage:
        """The current memories of a namespace, most recently written first (see ``MemoryEngine.list_memories``)."""
        ns = Namespace.coerce(namespace)
        before = _page_args(limit, cursor)
        record_filter = RecordFilter.parse(filters, ns.session_id)
        ns_id = self._store.find_namespace(ns.key)
        if ns_id is None:
            return MemoryPage()
        conn = self._store.reader()
        turns = self._store.current_turns(conn, ns_id, record_filter, before_seq=before, limit=limit + 1)
        page, more = turns[:limit], len(turns) > limit
        recorded = self._store.memory_keys_of(conn, ns_id, [t.id for t in page])
        keys = [recorded.get(t.id) or t.external_id or t.id for t in page]
        updates = self._store.live_update_counts(conn, ns_id, keys)  # the first version, plus each update's
        records = self._store.record_ids_by_rid(conn, ns_id, [t.record_rid for t in page if t.record_rid is not None])
        items = tuple(self._memory(t, key, records.get(t.record_rid) if t.record_rid is not None else None,
                                   1 + updates.get((key, t.session_id), 0)) for t, key in zip(page, keys, strict=True))
        return MemoryPage(items=items, next_cursor=f"{_CURSOR}{page[-1].seq}" if more and page else None)

    def get(self, namespace: Namespace | str, memory_id: str) -> Memory:
        """One memory, its current version and its whole history (see ``MemoryEngine.get_memory``)."""
        ns = Namespace.coerce(namespace)
        ns_id = self._ns_id(ns, "id", memory_id)
        conn = self._store.reader()
        key, session, _ = self._key(conn, ns_id, memory_id, "id", ns.session_id)
        versions = self._store.turns_of_memory(conn, ns_id, key, session)
        current = next((t for t, _, replaced in reversed(versions) if not replaced), None)
        if current is None:
            raise InvalidQueryError("id", memory_id, "this memory was deleted; history(namespace, id) lists what "
                                                     "happened to it")
        records = self._store.record_ids_by_rid(conn, ns_id, [current.record_rid] if current.record_rid else [])
        return self._memory(current, key, records.get(current.record_rid or -1), len(versions),
                            history=tuple(self.history(ns, memory_id)))

    def delete(self, namespace: Namespace | str, memory_ids: Iterable[str]) -> ForgetReceipt:
        """Forget every version of the named memories from every store; the history keeps only the operations."""
        ns = Namespace.coerce(namespace)
        ids = id_list("ids", memory_ids)
        assert ids is not None
        store = self._store
        if store.read_only:
            raise ReadOnlyStoreError("delete")
        ns_id = self._ns_id(ns, "ids", ids)
        conn = store.reader()
        keys: dict[tuple[str, str | None], list[TurnRow]] = {}
        for ident in ids:
            key, session, turn = self._key(conn, ns_id, ident, "ids", ns.session_id)
            if turn is None:
                raise InvalidQueryError("ids", ident, "this memory was already deleted")
            keys.setdefault((key, session), [t for t, _, _ in store.turns_of_memory(conn, ns_id, key, session)])
        turns = [t for versions in keys.values() for t in versions]
        record_ids = store.turn_record_ids(conn, ns_id, [t.id for t in turns])
        receipt = self._forget(ns, record_ids)
        now = datetime.now(UTC).timestamp()
        with store.transaction("delete") as wconn:
            for (key, session), versions in keys.items():
                updated = {turn_id for op, turn_id, _, _ in store.history_ops(wconn, ns_id, key, session)
                           if op == "update"}
                for t in versions:
                    if t.id not in updated:  # the add of a removed version, without its text
                        store.add_history(wconn, ns_id, key, session, "add", None, t.ts or now)
                store.add_history(wconn, ns_id, key, session, "delete", None, now)
        return receipt
