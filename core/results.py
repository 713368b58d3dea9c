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
