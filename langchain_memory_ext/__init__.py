"""LangChain and LangGraph faces of memory-ext.

- :class:`MemoryRetriever` — a ``BaseRetriever`` over the engine's multi-channel search.
- :class:`MemoryChatMessageHistory` — a chat history whose messages are archived as searchable turns.
- :class:`MemoryStore` — LangGraph's ``BaseStore`` (long-term memory), searchable in natural language.
- :func:`create_memory_tools` — agent tools to search (optionally action-aware), save memories, and fetch a
  memory file by the hook id the system prompt's memory index shows.
- :class:`MemoryMiddleware` — action-aware memory inside ``langchain.agents.create_agent`` (LangChain 1.x): the
  memories for what the agent is doing before each model call, the run archived after it;
  :func:`action_state_from_messages` derives that state in a LangGraph node.
- :class:`LangChainEmbedder` — any LangChain ``Embeddings`` as a memory-ext ``Embedder``.

Install with ``pip install "memory-ext[langchain]"``. This package imports LangChain; ``memory_ext`` never does.
"""

from . import _deps  # noqa: F401  (first: a missing package raises an error naming the extra)
from .chat_history import MemoryChatMessageHistory
from .embeddings import LangChainEmbedder
from .llm import LangChainLLM
from .middleware import MemoryMiddleware, action_state_from_messages
from .retrievers import MemoryRetriever
from .store import MemoryStore
from .tools import create_memory_tools

__all__ = [
    "LangChainEmbedder",
    "LangChainLLM",
    "MemoryChatMessageHistory",
    "MemoryMiddleware",
    "MemoryRetriever",
    "MemoryStore",
    "action_state_from_messages",
    "create_memory_tools",
]
