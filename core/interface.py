"""``EngineLike``: the public surface of :class:`~memory_ext.MemoryEngine`, as a protocol.

The framework faces (LangChain, LangGraph, LlamaIndex) accept anything that has it: the embedded
:class:`~memory_ext.MemoryEngine`, or :class:`memory_ext.client.RemoteEngine`, which calls a ``memext serve``
process over HTTP. The protocol is ``runtime_checkable``, so ``isinstance(x, EngineLike)`` checks that the
methods are there (not their signatures).

>>> import tempfile
>>> from memory_ext import EngineLike, MemoryEngine
>>> with MemoryEngine.open(tempfile.mkdtemp(), embedder="hashing") as engine:
...     isinstance(engine, EngineLike)
True
"""

from __future__ import annotations

import inspect
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import (
    TYPE_CHECKING,
    Any,
    Literal,
    Protocol,
    _ProtocolMeta,
    runtime_checkable,
)

from .models import ActionState, IndexHook, MemoryFile, Namespace, SearchResult, Turn

if TYPE_CHECKING:
    from .config import EngineConfig
    from .engine import AddResult, ForgetReceipt, StoreStats
    from .lifecycle.api import CompactionReport
    from .lifecycle.items import ItemPut, MatchCondition, StoredItem
    from .portability import ImportReport
    from .results import Memory, MemoryPage, MemoryVersion, NamespaceSummary

__all__ = ["EngineLike"]

TimeLike = datetime | str | float | None
_MISSING = object()


class _StaticProtocolMeta(_ProtocolMeta):
    """``isinstance`` looks the members up statically (as Python 3.12 does), so a check never runs a property
    (``RemoteEngine.path`` creates its directory; ``config`` must not cost a request)."""

    def __instancecheck__(cls, instance: object) -> bool:
        members = [name for name in vars(cls) if not name.startswith("_")]
        return all(inspect.getattr_static(instance, name, _MISSING) is not _MISSING for name in members)


@runtime_checkable
class EngineLike(Protocol, metaclass=_StaticProtocolMeta):
    """What a memory engine offers: write, search, read back, forget, memory files, compaction (sync + async).

    ``config`` is the engine's :class:`~memory_ext.EngineConfig` (the faces read ``config.limits.max_k``);
    ``path`` a directory for state that a face keeps beside the memory (the LangGraph store's item table).
    """

    @property
    def config(self) -> EngineConfig: ...

    @property
    def path(self) -> Path: ...

    def close(self) -> None: ...

    def add_turns(self, turns: Iterable[Turn | Mapping[str, Any]], namespace: Namespace | str, *,
                  wait: bool = False) -> AddResult: ...

    def search(self, query: str, namespace: Namespace | str, *, k: int = 10,
               filters: Mapping[str, Any] | None = None, action_state: ActionState | Mapping[str, Any] | None = None,
               explain: bool = False, now: TimeLike = None, trace: bool = False, include_cold: bool = False,
               as_of: TimeLike = None, min_score: float | None = None) -> SearchResult: ...

    def get_turns(self, namespace: Namespace | str, *, limit: int | None = None, offset: int = 0) -> list[Turn]: ...

    def forget(self, namespace: Namespace | str, *, record_ids: Iterable[str] | None = None,
               hook_ids: Iterable[str] | None = None) -> ForgetReceipt: ...

    def update(self, namespace: Namespace | str, id: str, *, content: str | None = None,
               metadata: Mapping[str, Any] | None = None, timestamp: TimeLike = None) -> AddResult: ...

    def history(self, namespace: Namespace | str, id: str) -> list[MemoryVersion]: ...

    def delete(self, namespace: Namespace | str, ids: Iterable[str]) -> ForgetReceipt: ...

    def stats(self) -> StoreStats: ...

    def namespaces(self) -> list[Namespace]: ...

    def hooks(self, namespace: Namespace | str, *, include_merged: bool = False) -> list[IndexHook]: ...

    def render_prompt(self, namespace: Namespace | str, *, budget_tokens: int | None = None,
                      query: str | None = None) -> str: ...

    def retrieve(self, hook_id: str, namespace: Namespace | str | None = None) -> MemoryFile: ...

    def set_importance(self, hook_id: str, importance: int, namespace: Namespace | str | None = None) -> IndexHook: ...

    def compact(self, namespace: Namespace | str, period: Literal["weekly", "monthly"], *,
                key: str | None = None, now: TimeLike = None) -> CompactionReport: ...

    def maybe_compact(self, namespace: Namespace | str, *, now: TimeLike = None) -> CompactionReport: ...

    def pre_compress(self, namespace: Namespace | str, full_context: str | list[Any] | dict[str, Any], *,
                     estimated_tokens: int | None = None, task_state: Mapping[str, Any] | None = None,
                     now: TimeLike = None) -> str: ...

    def list_memories(self, namespace: Namespace | str, *, filters: Mapping[str, Any] | None = None,
                      limit: int = 50, cursor: str | None = None) -> MemoryPage: ...

    def get_memory(self, namespace: Namespace | str, id: str) -> Memory: ...

    def overview(self) -> list[NamespaceSummary]: ...

    def replaced_turns(self, namespace: Namespace | str) -> frozenset[str]: ...

    def export(self, namespace: Namespace | str | None = None) -> Iterable[dict[str, Any]]: ...

    def import_records(self, lines: Iterable[str | Mapping[str, Any]] | Mapping[str, Any], *,
                       format: Literal["memory-ext", "mem0"] = "memory-ext", user_id: str | None = None,
                       wait: bool = False, progress: bool | None = None) -> ImportReport: ...

    async def alist_memories(self, namespace: Namespace | str, *, filters: Mapping[str, Any] | None = None,
                             limit: int = 50, cursor: str | None = None) -> MemoryPage: ...

    async def aget_memory(self, namespace: Namespace | str, id: str) -> Memory: ...

    async def aoverview(self) -> list[NamespaceSummary]: ...

    async def aexport(self, namespace: Namespace | str | None = None) -> list[dict[str, Any]]: ...

    async def aimport_records(self, lines: Iterable[str | Mapping[str, Any]] | Mapping[str, Any], *,
                              format: Literal["memory-ext", "mem0"] = "memory-ext", user_id: str | None = None,
                              wait: bool = False, progress: bool | None = None) -> ImportReport: ...

    def put_items(self, namespace: Namespace | str, items: Iterable[ItemPut | Mapping[str, Any]], *,
                  now: TimeLike = None) -> int: ...

    def get_items(self, namespace: Namespace | str, keys: Iterable[tuple[Sequence[str], str]], *,
                  refresh_ttl: bool = False, now: TimeLike = None) -> list[StoredItem | None]: ...

    def search_items(self, namespace: Namespace | str, prefix: Sequence[str] = (), *, query: str | None = None,
                     query_vector: Sequence[float] | None = None, filter: Mapping[str, Any] | None = None,
                     limit: int = 10, offset: int = 0, refresh_ttl: bool = False,
                     now: TimeLike = None) -> list[StoredItem]: ...

    def list_item_namespaces(self, namespace: Namespace | str, *,
                             match_conditions: Iterable[MatchCondition] | None = None, max_depth: int | None = None,
                             limit: int = 100, offset: int = 0, now: TimeLike = None) -> list[tuple[str, ...]]: ...

    def delete_items(self, namespace: Namespace | str, keys: Iterable[tuple[Sequence[str], str]], *,
                     now: TimeLike = None) -> int: ...

    def sweep_items(self, namespace: Namespace | str | None = None, *, now: TimeLike = None) -> int: ...

    async def aput_items(self, namespace: Namespace | str, items: Iterable[ItemPut | Mapping[str, Any]], *,
                         now: TimeLike = None) -> int: ...

    async def aget_items(self, namespace: Namespace | str, keys: Iterable[tuple[Sequence[str], str]], *,
                         refresh_ttl: bool = False, now: TimeLike = None) -> list[StoredItem | None]: ...

    async def asearch_items(self, namespace: Namespace | str, prefix: Sequence[str] = (), *, query: str | None = None,
                            query_vector: Sequence[float] | None = None, filter: Mapping[str, Any] | None = None,
                            limit: int = 10, offset: int = 0, refresh_ttl: bool = False,
                     now: TimeLike = None) -> list[StoredItem]: ...

    async def alist_item_namespaces(self, namespace: Namespace | str, *,
                                    match_conditions: Iterable[MatchCondition] | None = None,
                                    max_depth: int | None = None, limit: int = 100, offset: int = 0,
                                    now: TimeLike = None) -> list[tuple[str, ...]]: ...

    async def adelete_items(self, namespace: Namespace | str, keys: Iterable[tuple[Sequence[str], str]], *,
                            now: TimeLike = None) -> int: ...

    async def asweep_items(self, namespace: Namespace | str | None = None, *, now: TimeLike = None) -> int: ...

    async def aclose(self) -> None: ...

    async def aadd_turns(self, turns: Iterable[Turn | Mapping[str, Any]], namespace: Namespace | str, *,
                         wait: bool = False) -> AddResult: ...

    async def asearch(self, query: str, namespace: Namespace | str, *, k: int = 10,
                      filters: Mapping[str, Any] | None = None,
                      action_state: ActionState | Mapping[str, Any] | None = None, explain: bool = False,
                      now: TimeLike = None, trace: bool = False, include_cold: bool = False,
                      as_of: TimeLike = None, min_score: float | None = None) -> SearchResult: ...

    async def aget_turns(self, namespace: Namespace | str, *, limit: int | None = None,
                         offset: int = 0) -> list[Turn]: ...

    async def aforget(self, namespace: Namespace | str, *, record_ids: Iterable[str] | None = None,
                      hook_ids: Iterable[str] | None = None) -> ForgetReceipt: ...

    async def aupdate(self, namespace: Namespace | str, id: str, *, content: str | None = None,
                      metadata: Mapping[str, Any] | None = None, timestamp: TimeLike = None) -> AddResult: ...

    async def ahistory(self, namespace: Namespace | str, id: str) -> list[MemoryVersion]: ...

    async def adelete(self, namespace: Namespace | str, ids: Iterable[str]) -> ForgetReceipt: ...

    async def astats(self) -> StoreStats: ...

    async def anamespaces(self) -> list[Namespace]: ...

    async def ahooks(self, namespace: Namespace | str, *, include_merged: bool = False) -> list[IndexHook]: ...

    async def arender_prompt(self, namespace: Namespace | str, *, budget_tokens: int | None = None,
                             query: str | None = None) -> str: ...

    async def aretrieve(self, hook_id: str, namespace: Namespace | str | None = None) -> MemoryFile: ...

    async def aset_importance(self, hook_id: str, importance: int,
                              namespace: Namespace | str | None = None) -> IndexHook: ...

    async def acompact(self, namespace: Namespace | str, period: Literal["weekly", "monthly"], *,
                       key: str | None = None, now: TimeLike = None) -> CompactionReport: ...

    async def amaybe_compact(self, namespace: Namespace | str, *, now: TimeLike = None) -> CompactionReport: ...

    async def apre_compress(self, namespace: Namespace | str, full_context: str | list[Any] | dict[str, Any], *,
                            estimated_tokens: int | None = None, task_state: Mapping[str, Any] | None = None,
                            now: TimeLike = None) -> str: ...
