"""Import guard, run first by the package: a missing LangChain package raises an ImportError naming the extra."""

from __future__ import annotations

import importlib

from memory_ext.errors import MissingDependencyError

#: module -> the PyPI package that provides it (both are in the ``langchain`` extra)
REQUIRED = {"langchain_core": "langchain-core", "langgraph.store.base": "langgraph-checkpoint"}


def require(module: str, package: str, purpose: str = "langchain_memory_ext") -> None:
    """Import ``module`` or raise :class:`~memory_ext.errors.MissingDependencyError` naming the ``langchain`` extra."""
    try:
        importlib.import_module(module)
    except ImportError as exc:
        raise MissingDependencyError(package, "langchain", purpose) from exc


for _module, _package in REQUIRED.items():
    require(_module, _package)
