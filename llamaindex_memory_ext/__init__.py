"""LlamaIndex faces of memory-ext: a retriever, a ``Memory`` block, an agent memory and embedding adapters.

Install with ``pip install "memory-ext[llamaindex]"``. This package imports LlamaIndex; ``memory_ext`` never does.

- :class:`MemoryRetriever` — a ``BaseRetriever`` (query engines, ``QueryFusionRetriever``), sync and async.
- :class:`MemoryBlock` — a block of LlamaIndex's ``Memory``; :class:`ArchivingMemory` archives every turn.
- :class:`MemoryEngineMemory` — a ``BaseMemory`` for ``agent.run(..., memory=...)``: the session's history
  from the engine plus relevant long-term memories, every message archived.
- :class:`MemoryFunctionAgent` — a ``FunctionAgent`` that shows its memory each tool call and result as it
  happens, so the search before the next model call follows what the agent is doing (its action state).
- :class:`MemoryExtEmbedding` (our embedder as a LlamaIndex ``BaseEmbedding``) and :class:`LlamaIndexEmbedder`
  (any ``BaseEmbedding`` as a memory-ext embedder).
"""

from .agent import MemoryFunctionAgent
from .embeddings import LlamaIndexEmbedder, MemoryExtEmbedding
from .llm import LlamaIndexLLM
from .memory import MemoryEngineMemory
from .memory_block import ArchivingMemory, MemoryBlock
from .retriever import MemoryRetriever

__all__ = [
    "ArchivingMemory",
    "LlamaIndexEmbedder",
    "LlamaIndexLLM",
    "MemoryBlock",
    "MemoryEngineMemory",
    "MemoryExtEmbedding",
    "MemoryFunctionAgent",
    "MemoryRetriever",
]
