"""LlamaIndex faces of memory-ext (retriever, memory block, agent memory): coming in their own issue.

Install with ``pip install "memory-ext[llamaindex]"``. This package imports LlamaIndex; ``memory_ext`` never does.
"""

__all__: list[str] = []
