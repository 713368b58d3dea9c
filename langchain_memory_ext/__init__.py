"""LangChain and LangGraph faces of memory-ext (retriever, chat history, store): coming in their own issue.

Install with ``pip install "memory-ext[langchain]"``. This package imports LangChain; ``memory_ext`` never does.
"""

__all__: list[str] = []
