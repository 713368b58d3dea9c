"""What the engine's write, forget and stats calls return.

>>> from memory_ext.results import AddResult
>>> AddResult(turn_ids=("turn_1",), record_ids=("rec_1",)).turn_ids
('turn_1',)
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from .models import Namespace

__all__ = ["AddResult", "ForgetReceipt", "Memory", "MemoryPage", "MemoryVersion", "NamespaceSummary", "StoreStats"]


class AddResult(BaseModel):
    """What ``add_turns`` wrote.

    ``turn_ids`` has one id per turn of the call, in order: the new turn's id, or — for a turn that was
    already stored (same ``external_id`` in the namespace, or an identical consecutive turn, see
    ``ingest.dedup_consecutive``) — the id of the stored turn, which is then also in ``existing_ids``.
    ``record_ids`` are the records written: the new turns' own records first (in the order of the new turns),
    then windows and derived records.

    >>> r = AddResult(turn_ids=("turn_1", "turn_2"), record_ids=("rec_2",), existing_ids=("turn_1",))
    >>> r.new_ids
    ('turn_2',)
    """

    model_config = ConfigDict(frozen=True)
    turn_ids: tuple[str, ...]
    record_ids: tuple[str, ...]
    existing_ids: tuple[str, ...] = ()
    """Ids (in ``turn_ids``) of turns that were already stored: nothing was written for them."""
    quarantined: tuple[str, ...] = ()
    """With ``wait=True``: ids (in ``turn_ids``) of turns the embedder could not vectorise even alone and from
    their sentences. They are stored and found by every channel that needs no model; ``stats().quarantined``
    counts them, ``memext doctor`` lists them with the error, ``reindex`` retries them."""
    pending: int = 0
    """With ``wait=True``: records of the namespace still waiting for their vectors when the call returned (the
    embedder is down: ``indexing_error`` says why; they are indexed when it recovers)."""
    indexing_error: str | None = None
    """With ``wait=True``: why vectors could not be made (the embedder failing on everything), else None."""

    @property
    def new_ids(self) -> tuple[str, ...]:
        """Ids of the turns this call stored."""
        existing = set(self.existing_ids)
        return tuple(t for t in self.turn_ids if t not in existing)


class MemoryVersion(BaseModel):
    """One entry of ``MemoryEngine.history``: a version of a memory and the operation that made or ended it.

    ``operation`` is ``add`` (the first version), ``update`` (a version written by ``update``), ``supersede``
    (a later statement replaced this version's claim: ``timestamp`` is when) or ``delete`` (the memory was
    deleted: ``content`` and ``turn_id`` are None, since deleted means forgotten; so are those of the versions
    it removed).

    >>> MemoryVersion(memory_id="home", operation="add", turn_id="turn_1", content="Ana lives in Oslo",
    ...               timestamp=datetime(2026, 1, 1)).operation
    'add'
    """

    model_config = ConfigDict(frozen=True)
    memory_id: str
    """The memory's key: its ``external_id``, or the id of its first turn."""
    operation: Literal["add", "update", "supersede", "delete"]
    turn_id: str | None
    content: str | None
    timestamp: datetime
    valid_to: datetime | None = None
    """End of this version's validity (None: current, or deleted)."""
    current: bool = False
    """True for the memory's latest version not replaced by an update: the one default searches return (if a
    later statement superseded its claim, it ranks below that statement)."""
    metadata: dict[str, Any] = Field(default_factory=dict)


class Memory(BaseModel):
    """One memory as ``MemoryEngine.list_memories`` and ``get_memory`` show it: its *current* version (the one a
    default search returns), how many versions it has, and — from ``get_memory`` — every version and operation.

    >>> m = Memory(id="home", turn_id="turn_2", content="Ana lives in Porto", role="user", version_count=2,
    ...            timestamp=datetime(2026, 1, 2))
    >>> m.id, m.version_count, m.history
    ('home', 2, ())
    """

    model_config = ConfigDict(frozen=True)
    id: str
    """The memory's key (what ``update``, ``history`` and ``delete`` take): its ``external_id``, or the id of its
    first turn."""
    turn_id: str
    """The current version's turn id."""
    record_id: str | None = None
    """The current version's turn record id (``RetrievedItem.id`` of a search that finds it)."""
    content: str
    speaker: str | None = None
    role: str
    session_id: str | None = None
    timestamp: datetime | None = None
    external_id: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    kind: str = "turn"
    """The kind of the memory's record (a turn: what was said or saved)."""
    version_count: int = 1
    """Versions written so far (the first one and every ``update``)."""
    history: tuple[MemoryVersion, ...] = ()
    """Every version and operation, oldest first (``get_memory`` only; ``list_memories`` leaves it empty)."""


class MemoryPage(BaseModel):
    """A page of ``MemoryEngine.list_memories``: the memories, most recently written first, and the cursor of the
    next page (None: this is the last one)."""

    model_config = ConfigDict(frozen=True)
    items: tuple[Memory, ...] = ()
    next_cursor: str | None = None


class NamespaceSummary(BaseModel):
    """One namespace of ``MemoryEngine.overview``: its ids and how much it holds."""

    model_config = ConfigDict(frozen=True)
    user_id: str
    agent_id: str | None = None
    memories: int
    """Current memories (what ``list_memories`` lists)."""
    turns: int
    """Stored turns, every version included."""


class QuarantinedRecord(BaseModel):
    """A record the indexer gave up on (``MemoryEngine.quarantined``): stored and found by every channel that needs
    no model, but without a vector until ``reindex`` retries it.

    >>> QuarantinedRecord(user_id="ana", record_id="rec_1", kind="turn", turn_ids=("turn_1",), attempts=3,
    ...                   error="EmbedderError: ...", since="2026-12-07T01:00:00+00:00").kind
    'turn'
    """

    model_config = ConfigDict(frozen=True)
    user_id: str
    agent_id: str | None = None
    record_id: str
    kind: str
    """``turn``, ``window`` or a derived kind."""
    turn_ids: tuple[str, ...]
    attempts: int
    error: str
    """The last error (its type and message)."""
    since: str
    """When it was quarantined (ISO 8601, UTC)."""


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
    quarantined: int = 0
    """Records the indexer gave up on (no vector; found by the channels that need no model): ``memext doctor``
    lists them, ``reindex`` retries them."""
    pending: int = 0
    """Records whose vectors or sparse encodings are still queued."""
    turn_vectors: str | None = None
    """How the stored turn vectors were made: ``sentence-mixed`` or ``turn`` (None: no vectors yet). Item scores
    and the keyword weight follow it; a whole-store ``reindex`` rebuilds them the way the configuration asks."""
