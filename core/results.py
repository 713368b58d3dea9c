"""What the engine's write, forget and stats calls return.

>>> from memory_ext.results import AddResult
>>> AddResult(turn_ids=("turn_1",), record_ids=("rec_1",)).turn_ids
('turn_1',)
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from .models import Namespace

__all__ = ["AddResult", "ForgetReceipt", "StoreStats"]


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
    purge_complete: bool = True
    """True when no byte of the forgotten data is left in any file of the store directory. False when another
    process held a read snapshot from before the forget (a long ``.backup``, a read-only engine mid-search): the
    write-ahead log could not be truncated yet. The rows are gone for every reader either way."""
    pending_purge: tuple[str, ...] = ()
    """Files (relative to the store directory) that may still hold forgotten bytes while ``purge_complete`` is
    False. The purge is retried, without waiting, after every later write, at ``close``, at the next open and by
    ``engine.purge()`` / ``memext forget --purge``, until it completes."""


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
