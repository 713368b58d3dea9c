"""``MemoryRetriever``: a LangChain retriever over a memory-ext store."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from langchain_core.callbacks import (
    AsyncCallbackManagerForRetrieverRun,
    CallbackManagerForRetrieverRun,
)
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from pydantic import ConfigDict

from memory_ext import ActionState, EngineLike, MemoryEngine, Namespace, RetrievedItem, SearchResult
from memory_ext.errors import InvalidQueryError

__all__ = ["MemoryRetriever", "item_to_document"]

_CALL_ARGS = ("k", "filters", "score_threshold", "action_state")


def item_to_document(item: RetrievedItem) -> Document:
    """One retrieved memory as a ``Document``: ``id`` is the memory id; metadata is JSON-friendly."""
    return Document(
        id=item.id,
        page_content=item.text,
        metadata={"score": item.score, **item.metadata()},
    )


class MemoryRetriever(BaseRetriever):
    """Retrieve long-term memories (conversation turns) of one user as LangChain ``Document`` objects.

    Setup:
        ``pip install "memory-ext[langchain]"``

    Instantiate:
        >>> import tempfile
        >>> from memory_ext import MemoryEngine
        >>> from langchain_memory_ext import MemoryRetriever
        >>> engine = MemoryEngine.open(tempfile.mkdtemp(), embedder="hashing")
        >>> retriever = MemoryRetriever(engine=engine, user_id="ana", k=2)

    Add (through the engine, or through ``MemoryChatMessageHistory``):
        >>> _ = engine.add_turns([
        ...     {"role": "user", "speaker": "Ana", "content": "My sister Lena lives in Porto."},
        ...     {"role": "user", "speaker": "Ana", "content": "I adopted a beagle called Toby."},
        ... ], "ana")

    Search:
        >>> docs = retriever.invoke("where does Lena live?")
        >>> docs[0].page_content, docs[0].metadata["speaker"]
        ('My sister Lena lives in Porto.', 'Ana')

    Per call, ``k``, ``filters``, ``score_threshold`` and ``action_state`` override the fields:
        >>> len(retriever.invoke("Toby", k=1, filters={"speaker": "Ana"}))
        1

    Async (``ainvoke`` runs the search in a worker thread; the event loop is never blocked):
        >>> import asyncio
        >>> len(asyncio.run(retriever.ainvoke("Lena", k=1)))
        1

    Use in a chain:
        ``{"context": retriever | format_docs, "question": RunnablePassthrough()} | prompt | model``

        >>> engine.close()

    Fields: ``engine`` (a ``MemoryEngine``, or a ``memory_ext.client.RemoteEngine`` for a ``memext serve`` server),
    ``user_id``, ``agent_id``, ``session_id`` (narrow to one session), ``k`` (default 4),
    ``score_threshold`` (drop items whose fused score is below it), ``filters`` (engine filter keys:
    ``session_id``, ``speaker``, ``role``, ``since``, ``until``, ``kinds``; per-call filters are merged over
    them) and ``action_state`` (an :class:`~memory_ext.ActionState` or mapping). Unknown arguments are errors.
    Each ``Document`` has ``id`` = the memory id and metadata ``score``, ``kind``, ``channels`` (channel -> rank),
    ``turn_ids``, ``external_ids``, ``session_id``, ``timestamp`` (ISO 8601, UTC), ``speaker`` and ``role``.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True, extra="forbid")

    engine: EngineLike
    user_id: str
    agent_id: str | None = None
    session_id: str | None = None
    k: int = 4
    score_threshold: float | None = None
    filters: dict[str, Any] | None = None
    action_state: ActionState | None = None

    @classmethod
    def from_path(cls, path: str | os.PathLike[str], *, user_id: str, embedder: Any = None, config: Any = None,
                  read_only: bool = False, **kwargs: Any) -> MemoryRetriever:
        """Open the store at ``path`` (see :meth:`MemoryEngine.open`) and build a retriever over it.

        The retriever owns nothing: close it with ``retriever.engine.close()``.
        """
        engine = MemoryEngine.open(path, config=config, embedder=embedder, read_only=read_only)
        try:
            return cls(engine=engine, user_id=user_id, **kwargs)
        except BaseException:
            engine.close()
            raise

    @property
    def namespace(self) -> Namespace:
        """The engine namespace searched: ``(user_id, agent_id, session_id)``."""
        return Namespace(self.user_id, self.agent_id, self.session_id)

    def _call_args(self, kwargs: Mapping[str, Any]) -> tuple[int, dict[str, Any] | None, float | None, Any]:
        """Merge per-call arguments over the fields; reject unknown ones."""
        unknown = sorted(set(kwargs) - set(_CALL_ARGS))
        if unknown:
            raise InvalidQueryError(unknown[0], kwargs[unknown[0]],
                                    "per-call arguments are: " + ", ".join(_CALL_ARGS))
        k = kwargs.get("k", self.k)
        call_filters = kwargs.get("filters")
        if call_filters is not None and not isinstance(call_filters, Mapping):
            raise InvalidQueryError("filters", call_filters, "pass a mapping such as {'speaker': 'Ana'}, or None")
        filters = {**(self.filters or {}), **(call_filters or {})} or None
        threshold = kwargs.get("score_threshold", self.score_threshold)
        if threshold is not None and (isinstance(threshold, bool) or not isinstance(threshold, (int, float))):
            raise InvalidQueryError("score_threshold", threshold, "give a number or None")
        return k, filters, threshold, kwargs.get("action_state", self.action_state)

    @staticmethod
    def _documents(result: SearchResult, threshold: float | None) -> list[Document]:
        return [item_to_document(i) for i in result.items if threshold is None or i.score >= threshold]

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun,
                                **kwargs: Any) -> list[Document]:
        k, filters, threshold, state = self._call_args(kwargs)
        result = self.engine.search(query, self.namespace, k=k, filters=filters, action_state=state)
        return self._documents(result, threshold)

    async def _aget_relevant_documents(self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun,
                                       **kwargs: Any) -> list[Document]:
        k, filters, threshold, state = self._call_args(kwargs)
        result = await self.engine.asearch(query, self.namespace, k=k, filters=filters, action_state=state)
        return self._documents(result, threshold)
