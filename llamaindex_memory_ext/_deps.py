"""Import guard: a missing LlamaIndex raises an ImportError naming the extra to install."""

from __future__ import annotations

import importlib
from types import ModuleType

from memory_ext.errors import MissingDependencyError


def require(module: str, purpose: str) -> ModuleType:
    """Import ``module`` or raise :class:`~memory_ext.errors.MissingDependencyError` naming the ``llamaindex`` extra."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise MissingDependencyError("llama-index-core", "llamaindex", purpose) from exc
