"""``MemoryRetriever``: a LangChain retriever over a memory-ext store."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any, Literal

from langchain_core.callbacks import (
    AsyncCallbackManagerForRetrieverRun,
    CallbackManagerForRetrieverRun,
)
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from pydantic import ConfigDict, Field

from memory_ext import ActionState, EngineLike, MemoryEngine, Namespace, RetrievedItem, SearchResult
from memory_ext.errors import InvalidQueryError
from memory_ext.ingest.calls import calls_text

__all__ = ["MemoryRetriever", "item_to_document", "with_metadata_filter"]

_CALL_ARGS = ("k", "filters", "filter", "score_threshold", "action_state")


def item_to_document(item: RetrievedItem) -> Document:
    """One retrieved memory as a ``Document``: ``id`` is the memory id; metadata is JSON-friendly — the turn's
    own metadata keys, then ``id``, ``score`` (relevance in [0, 1]), ``source`` and the engine's keys (see
    :meth:`memory_ext.RetrievedItem.face_metadata`)."""
    return Document(id=item.id, page_content=item.text or calls_text(item.tool_calls),  # a tool-call turn: its calls
                    metadata=item.face_metadata())


def with_metadata_filter(filters: Mapping[str, Any] | None, metadata_filter: Any) -> dict[str, Any] | None:
    """Engine ``filters`` with a LangChain ``filter`` (a filter on the documents' metadata: ``{"key": value}``,
    ``{"key": {"$gte": 2}}``, ``$and`` / ``$or`` lists) added as ``filters["metadata"]`` (ANDed with one
    already there)."""
    out = dict(filters or {})
    if metadata_filter is None:
        return out or None
    if not isinstance(metadata_filter, Mapping):
        raise InvalidQueryError("filter", metadata_filter, "pass a mapping such as {'topic': 'travel'}, or None")
    if out.get("metadata") is not None:
        out["metadata"] = {"$and": [out["metadata"], dict(metadata_filter)]}
    else:
        out["metadata"] = dict(metadata_filter)
    return out


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

    Per call, ``k``, ``filters``, ``filter``, ``score_threshold`` and ``action_state`` override the fields:
        >>> len(retriever.invoke("Toby", k=1, filters={"speaker": "Ana"}))
        1

    As a vector store retriever: ``search_type="similarity_score_threshold"`` with
    ``search_kwargs={"score_threshold": 0.5, "filter": {...}, "k": 4}`` (scores are relevances in [0, 1]):
        >>> strict = MemoryRetriever(engine=engine, user_id="ana", search_type="similarity_score_threshold",
        ...                          search_kwargs={"score_threshold": 0.5})
        >>> [d.page_content for d in strict.invoke("where does Lena live?")]
        ['My sister Lena lives in Porto.']

    Async (``ainvoke`` runs the search in a worker thread; the event loop is never blocked):
        >>> import asyncio
        >>> len(asyncio.run(retriever.ainvoke("Lena", k=1)))
        1

    Use in a chain:
        ``{"context": retriever | format_docs, "question": RunnablePassthrough()} | prompt | model``

        >>> engine.close()

    Fields: ``engine`` (a ``MemoryEngine``, or a ``memory_ext.client.RemoteEngine`` for a ``memext serve``
    server), ``user_id``, ``agent_id``, ``session_id`` (narrow to one session), ``k`` (default 4),
    ``score_threshold`` (drop items whose relevance — ``RetrievedItem.score``, in [0, 1] — is below it),
    ``filters`` (engine filter keys: ``session_id``, ``speaker``, ``role``, ``since``, ``until``, ``kinds``,
    ``metadata``; per-call filters are merged over them), ``action_state`` (an :class:`~memory_ext.ActionState`
    or mapping), ``search_type`` (``similarity`` or ``similarity_score_threshold``, which needs a
    ``score_threshold``) and ``search_kwargs`` (``k``, ``filter`` — a filter on the turns' metadata, LangGraph's
    operators ``$eq $ne $gt $gte $lt $lte`` plus ``$in $nin $and $or`` —, ``filters``, ``score_threshold``,
    ``action_state``; they override the fields, per-call arguments override them). Unknown arguments are errors.
    Each ``Document`` has ``id`` = the memory id and metadata: the turn's own metadata keys, ``id``, ``score``,
    ``raw_score``, ``source``, ``kind``, ``channels`` (channel -> rank), ``turn_ids``, ``external_ids``,
    ``session_id``, ``timestamp`` and ``date`` (ISO 8601, UTC), ``speaker`` and ``role``.
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
    search_type: Literal["similarity", "similarity_score_threshold"] = "similarity"
    search_kwargs: dict[str, Any] = Field(default_factory=dict)

    def __init__(self, **data: Any) -> None:
        super().__init__(**data)
        self._check_search_kwargs()  # after pydantic, so the typed error is not wrapped in its ValidationError

    def _check_search_kwargs(self) -> None:
        unknown = sorted(set(self.search_kwargs) - set(_CALL_ARGS))
        if unknown:
            raise InvalidQueryError(f"search_kwargs.{unknown[0]}", self.search_kwargs[unknown[0]],
                                    "search_kwargs keys are: " + ", ".join(_CALL_ARGS))
        if self.search_type == "similarity_score_threshold" and \
                self.search_kwargs.get("score_threshold", self.score_threshold) is None:
            raise InvalidQueryError("score_threshold", None, "search_type='similarity_score_threshold' needs "
                                    "search_kwargs={'score_threshold': 0.5} (a relevance in [0, 1])")

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
        kwargs = {**self.search_kwargs, **kwargs}
        k = kwargs.get("k", self.k)
        filters = dict(self.filters or {})
        for layer in (self.search_kwargs, kwargs):
            call_filters = layer.get("filters")
            if call_filters is not None and not isinstance(call_filters, Mapping):
                raise InvalidQueryError("filters", call_filters,
                                        "pass a mapping such as {'speaker': 'Ana'}, or None")
            filters.update(call_filters or {})
        merged = with_metadata_filter(filters, kwargs.get("filter"))
        threshold = kwargs.get("score_threshold", self.score_threshold)
        if threshold is not None and (isinstance(threshold, bool) or not isinstance(threshold, (int, float))):
            raise InvalidQueryError("score_threshold", threshold, "give a number or None")
        return k, merged, threshold, kwargs.get("action_state", self.action_state)

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
