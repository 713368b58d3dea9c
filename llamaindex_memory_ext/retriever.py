"""``MemoryRetriever``: a LlamaIndex retriever over a memory-ext store."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from ._deps import require

require("llama_index.core", "llamaindex_memory_ext.MemoryRetriever")

from llama_index.core.base.base_retriever import BaseRetriever  # noqa: E402
from llama_index.core.callbacks import CallbackManager  # noqa: E402
from llama_index.core.schema import NodeWithScore, QueryBundle  # noqa: E402
from llama_index.core.vector_stores.types import MetadataFilters  # noqa: E402

from memory_ext import ActionState, EngineLike, Namespace, SearchResult  # noqa: E402
from memory_ext.errors import InvalidQueryError  # noqa: E402

from ._convert import engine_filters, item_to_node, warn_if_degraded  # noqa: E402

__all__ = ["MemoryRetriever"]

logger = logging.getLogger(__name__)


class MemoryRetriever(BaseRetriever):
    """Retrieve the long-term memories of one user as LlamaIndex ``NodeWithScore`` objects.

    Each node's id is the memory id (unique in a result), its text the remembered turn, its score the relevance
    in [0, 1] (``RetrievedItem.score``: ``SimilarityPostprocessor(similarity_cutoff=0.5)`` works on it);
    ``node.metadata`` holds the turn's own metadata keys, then ``memory_id``, ``id``, ``score``, ``raw_score``,
    ``source``, ``kind``, ``channels`` (channel -> rank), ``turn_ids``, ``external_ids``, ``session_id``,
    ``timestamp`` and ``date`` (ISO 8601: ``FixedRecencyPostprocessor`` sorts on it), ``speaker`` and ``role``.
    The ids, scores, ranking details and stored messages are hidden from an LLM.

    Setup:
        ``pip install "memory-ext[llamaindex]"``

    Instantiate:
        >>> import tempfile
        >>> from memory_ext import MemoryEngine
        >>> from llamaindex_memory_ext import MemoryRetriever
        >>> engine = MemoryEngine.open(tempfile.mkdtemp(), embedder="hashing")
        >>> retriever = MemoryRetriever(engine=engine, user_id="ana", similarity_top_k=2)

    Add (through the engine, or through ``MemoryBlock`` / ``MemoryEngineMemory``):
        >>> _ = engine.add_turns([
        ...     {"role": "user", "speaker": "Ana", "content": "My sister Lena lives in Porto."},
        ...     {"role": "assistant", "content": "Porto is lovely in spring."},
        ... ], "ana")

    Search:
        >>> nodes = retriever.retrieve("where does Lena live?")
        >>> nodes[0].node.get_content(), nodes[0].node.metadata["speaker"]
        ('My sister Lena lives in Porto.', 'Ana')

    Async (the search runs in the engine's worker thread, never on the event loop):
        >>> import asyncio
        >>> len(asyncio.run(retriever.aretrieve("Lena"))) >= 1
        True

    Use in a query engine (any LLM; ``MockLLM`` here):
        >>> from llama_index.core.llms import MockLLM
        >>> from llama_index.core.query_engine import RetrieverQueryEngine
        >>> qe = RetrieverQueryEngine.from_args(retriever, llm=MockLLM())
        >>> len(qe.query("where does Lena live?").source_nodes) >= 1
        True
        >>> engine.close()

    ``engine`` is a ``MemoryEngine`` or a ``memory_ext.client.RemoteEngine`` (a ``memext serve`` server).
    ``session_id`` narrows the search to one session; ``filters`` takes the engine's filter keys
    (``session_id``, ``speaker``, ``role``, ``since``, ``until``, ``kinds``, ``metadata``) or LlamaIndex
    ``MetadataFilters`` on the turns' metadata (AND / OR, nested, operators ``==``, ``!=``, ``>``, ``>=``,
    ``<``, ``<=``, ``in``, ``nin``), applied before ranking; ``action_state`` (an
    :class:`~memory_ext.ActionState` or a mapping) adds the engine's route for what the agent is doing. A search
    with a failed channel still returns what the other channels found and logs the channel errors (a warning
    on the ``llamaindex_memory_ext.retriever`` logger).
    """

    def __init__(self, engine: EngineLike, user_id: str, agent_id: str | None = None,
                 session_id: str | None = None, similarity_top_k: int = 4,
                 filters: Mapping[str, Any] | MetadataFilters | None = None,
                 action_state: ActionState | Mapping[str, Any] | None = None,
                 callback_manager: CallbackManager | None = None, verbose: bool = False) -> None:
        if not isinstance(engine, EngineLike):
            raise TypeError(f"engine must be a memory_ext.MemoryEngine or memory_ext.client.RemoteEngine, got "
                            f"{type(engine).__name__}; open one with MemoryEngine.open(path)")
        max_k = engine.config.limits.max_k
        if (isinstance(similarity_top_k, bool) or not isinstance(similarity_top_k, int)
                or not 1 <= similarity_top_k <= max_k):
            raise InvalidQueryError("similarity_top_k", similarity_top_k,
                                    f"give an integer between 1 and {max_k} (limits.max_k)")
        self.engine = engine
        self.namespace = Namespace(user_id=user_id, agent_id=agent_id, session_id=session_id)
        self.similarity_top_k = similarity_top_k
        self.filters = engine_filters(filters)
        self.action_state = (action_state if action_state is None or isinstance(action_state, ActionState)
                             else ActionState(**action_state))
        super().__init__(callback_manager=callback_manager, verbose=verbose)

    def _search_kwargs(self) -> dict[str, Any]:
        return {"k": self.similarity_top_k, "filters": self.filters, "action_state": self.action_state}

    def _to_nodes(self, result: SearchResult) -> list[NodeWithScore]:
        warn_if_degraded(result, logger)
        return [item_to_node(item) for item in result.items]

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return self._to_nodes(self.engine.search(query_bundle.query_str, self.namespace, **self._search_kwargs()))

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        result = await self.engine.asearch(query_bundle.query_str, self.namespace, **self._search_kwargs())
        return self._to_nodes(result)
