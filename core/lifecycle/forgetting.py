"""Forgetting across every store: what to remove, removing it from the truth store and every derived index in
one transaction, and the receipt.

:func:`forget` is what :meth:`memory_ext.MemoryEngine.forget` runs. It selects the turns (a namespace, a session,
the source turns of record ids, or the turns of memory files), deletes them and everything derived from them in
the truth store (:func:`~memory_ext.lifecycle.forget.forget_turns`), then loops over the engine's derived
indexes — ``drop_namespace`` when a whole namespace goes, ``remove`` of the records otherwise — re-derives the
evidence keys of the forgotten turns' neighbours (their event frames named the forgotten turns' entities), and
purges the store's files so the text is gone from disk too (SQLite: truncates the write-ahead log and zeroes the
unallocated space of the database file, see :meth:`memory_ext.store.sqlite.TruthStore.purge`; PostgreSQL:
rewrites the changed tables, see :meth:`memory_ext.store.pg.truth.PgTruthStore.purge`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

from ..errors import InvalidQueryError, ReadOnlyStoreError
from ..ingest.evidence_keys import window_keys
from ..models import Namespace
from ..results import ForgetReceipt
from ..store.faces import forget_in_faces
from ..store.forget_rows import forget_turns
from ..store.interface import Connection

if TYPE_CHECKING:
    from ..store.base import DerivedIndex
    from ..store.evidence import EvidenceIndex
    from ..store.faces import Face
    from ..store.interface import TruthStore
    from .files import FileRow

__all__ = ["forget", "id_list", "purge_files"]

FORGET_PURGE_WAIT_S = 0.5
"""How long ``forget`` lets readers finish before truncating the write-ahead log: enough for this process's own
short reads (a search, the background indexer picking its next batch), far too short for another process's long
read snapshot to stall ``forget`` or the writers behind it — that purge stays pending and is retried."""


def id_list(name: str, value: Iterable[str] | None) -> list[str] | None:
    """A validated list of id strings (None stays None)."""
    if value is None:
        return None
    values = [value] if isinstance(value, str) else list(value) if isinstance(value, Iterable) else None
    if not values or not all(isinstance(v, str) and v for v in values):
        raise InvalidQueryError(name, value, "give a non-empty list of id strings (or None)")
    return values


def forget(store: TruthStore, indexes: Sequence[DerivedIndex], evidence: EvidenceIndex, ns: Namespace, *,
           record_ids: Iterable[str] | None, hook_ids: Iterable[str] | None,
           resolve: Callable[[str, Namespace], FileRow], faces: Mapping[str, Face] | None = None) -> ForgetReceipt:
    """Remove the selected memories from every store — the faces' own tables too (``faces``: those open in this
    process; recorded ones are reached through their hook) — and return the receipt (see
    ``MemoryEngine.forget``)."""
    receipt = _forget(store, indexes, evidence, ns, record_ids=record_ids, hook_ids=hook_ids, resolve=resolve)
    whole = record_ids is None and hook_ids is None
    if not whole and not receipt.turn_ids:
        return receipt
    rows, unreachable = forget_in_faces(store, faces or {}, ns, None if whole else receipt.turn_ids)
    return receipt.model_copy(update={
        "stores": (*receipt.stores, *(f"face:{n}" for n in rows)),
        "purge_complete": receipt.purge_complete and not unreachable,
        "pending_purge": (*receipt.pending_purge, *(f"face:{n}" for n in unreachable))})


def _forget(store: TruthStore, indexes: Sequence[DerivedIndex], evidence: EvidenceIndex, ns: Namespace, *,
            record_ids: Iterable[str] | None, hook_ids: Iterable[str] | None,
            resolve: Callable[[str, Namespace], FileRow]) -> ForgetReceipt:
    records = id_list("record_ids", record_ids)
    hooks = id_list("hook_ids", hook_ids)
    ns_id = store.find_namespace(ns.key)
    if ns_id is None:
        if records or hooks:
            raise InvalidQueryError("record_ids" if records else "hook_ids", records or hooks,
                                    "this namespace has no memories; check the namespace")
        return ForgetReceipt(namespace=ns, turns=0, records=0)
    whole = records is None and hooks is None and ns.session_id is None
    with store.write_lock:
        if store.read_only:
            raise ReadOnlyStoreError("forget")
        drop_files: list[int] = []
        if records is None and hooks is None:
            tids = store.turn_tids(ns_id, ns.session_id)
            if whole:
                drop_files = store.file_fids(ns_id)
        else:
            tids = []
            for rid_text in records or []:
                found = store.tids_of_record(ns_id, rid_text)
                if found is None:
                    found = _tids_of_memory(store, ns_id, rid_text, ns.session_id)
                if found is None:
                    raise InvalidQueryError("record_ids", rid_text, "no memory of this namespace has this id; use "
                                            "the ids of search results (RetrievedItem.id), a turn id or an "
                                            "external_id")
                tids += found
            for hook_id in hooks or []:
                file_row = resolve(hook_id, ns)
                drop_files.append(file_row.fid)
                tids += store.tids_of_file(file_row.fid)
        # event frames of the forgotten turns' neighbours name their entities (only if evidence was indexed)
        neighbours = store.neighbour_tids(ns_id, tids) \
            if not whole and evidence.record_count(store.reader(), ns_id) else []
        try:
            with store.transaction("forget") as conn:
                removed = forget_turns(conn, ns_id, tids, drop_files=drop_files)
                # key/value items (the LangGraph store's): the namespace's, the session's, or those of the turns
                if records is None and hooks is None:
                    store.items.forget(conn, ns_id, session=ns.session_id)
                else:
                    store.items.forget(conn, ns_id, turn_ids=removed["turn_ids"])
                rids = removed["rids"]
                for index in indexes:
                    if whole:
                        index.drop_namespace(conn, ns_id)
                    else:
                        index.remove(conn, ns_id, rids)
                if whole:
                    store.delete_claims(conn, ns_id)
                    store.delete_history(conn, ns_id)
                if neighbours:
                    _reindex_evidence(store, evidence, conn, ns_id, neighbours)
        finally:
            for index in indexes:
                index.invalidate(ns_id)
        pending = purge_files(store, indexes, wait_s=FORGET_PURGE_WAIT_S)
    return ForgetReceipt(namespace=ns, turns=len(removed["turn_ids"]), records=len(rids),
                         turn_ids=tuple(removed["turn_ids"]), record_ids=tuple(removed["record_ids"]),
                         files_deleted=tuple(removed["deleted_files"]), files_updated=tuple(removed["updated_files"]),
                         stores=("truth", *(index.name for index in indexes), "files"),
                         purge_complete=not pending, pending_purge=pending)


def _tids_of_memory(store: TruthStore, ns_id: int, ident: str, session_id: str | None) -> list[int] | None:
    """Row ids of every version of the memory a turn id or an ``external_id`` names (the ids ``get_memory`` and
    ``delete`` take); None when none of the namespace has it."""
    conn = store.reader()
    turn = store.turn_lookup(conn, ns_id, ident, session_id)
    if turn is None:
        return None
    key = store.memory_key_of(conn, ns_id, turn.id) or turn.external_id or turn.id
    return [t.tid for t, _, _ in store.turns_of_memory(conn, ns_id, key, turn.session_id)]


def purge_files(store: TruthStore, indexes: Sequence[DerivedIndex] = (), *, wait_s: float = 0.0,
                force: bool = False) -> tuple[str, ...]:
    """Try (waiting at most ``wait_s`` for other processes' readers) to remove every leftover byte of forgotten
    data from the store's files.

    Returns the files (relative to the store directory) that may still hold some: the store's ``PURGE_TARGET``
    (``memory.sqlite3-wal`` on SQLite, ``postgres:dead-row-versions`` on PostgreSQL) while another process holds a
    read snapshot from before the forget (on SQLite ``memory.sqlite3`` while its unallocated space could not be
    zeroed yet, see :meth:`~memory_ext.store.sqlite.TruthStore.purge`), and whatever an index reports through an
    optional ``purge() -> tuple[str, ...]`` method (e.g. Chroma's own log). Pending purges are retried after
    every later write, at close, at the next open, and by ``memext forget --purge``.
    """
    pending: list[str] = [] if store.purge(wait_s=wait_s) else list(store.pending_targets or (store.PURGE_TARGET,))
    purges = [purge for index in indexes if callable(purge := getattr(index, "purge", None))]
    if purges:
        # under the write lock: an index rebuilt from the truth store's vectors (Chroma) must not miss a batch the
        # background indexer commits between the rebuild's read and its new collection (forget already holds it)
        with store.write_lock:
            for purge in purges:
                pending += list(purge(force=True) if force else purge())
    return tuple(pending)


def _reindex_evidence(store: TruthStore, evidence: EvidenceIndex, conn: Connection, ns_id: int,
                      tids: Sequence[int]) -> None:
    """Derive the evidence keys of these turns again, from their current neighbours."""
    items = store.turn_records_with_neighbours(conn, ns_id, tids)
    keys = window_keys(items, evidence.known_entities(conn, ns_id))
    evidence.add(conn, ns_id, [(item["rid"], k) for item, k in zip(items, keys, strict=True)])
