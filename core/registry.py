"""Name -> implementation tables, resolved when the engine is built (fail fast, list the valid names).

>>> from memory_ext.registry import Registry
>>> shapes = Registry("shape")
>>> @shapes.register("square")
... class Square: ...
>>> shapes.resolve("recall.shape", "square") is Square
True
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Generic, TypeVar

from .errors import ConfigError

__all__ = ["Registry", "recallers", "vector_backends"]

T = TypeVar("T")


class Registry(Generic[T]):
    """A named table of implementations of one kind.

    ``builtins`` (optional) returns the built-in implementations; it is called once, when the table is first
    read or written, so the built-ins are listed in one place (and imported only when needed) instead of being
    registered by the side effects of importing their modules.
    """

    def __init__(self, kind: str, *, builtins: Callable[[], Mapping[str, T]] | None = None) -> None:
        self.kind = kind
        self._builtins = builtins
        self._items: dict[str, T] = {}
        self._lock = threading.Lock()

    @property
    def _table(self) -> dict[str, T]:
        if self._builtins is not None:
            loaded = self._builtins()  # outside the lock: loading may import modules that register
            with self._lock:
                if self._builtins is not None:
                    self._builtins = None
                    self._items = {**loaded, **self._items}
        return self._items

    def register(self, name: str) -> Callable[[T], T]:
        """Decorator: register ``obj`` under ``name`` (a name can be registered once)."""

        def deco(obj: T) -> T:
            table = self._table
            if name in table and table[name] is not obj:
                raise ValueError(f"{self.kind} {name!r} is already registered")
            table[name] = obj
            return obj

        return deco

    def names(self) -> list[str]:
        return sorted(self._table)

    def resolve(self, field: str, name: str) -> T:
        """The implementation named ``name``, or ConfigError naming ``field`` and the valid names."""
        try:
            return self._table[name]
        except (KeyError, TypeError):
            raise ConfigError.unknown_name(field, name, self.names()) from None

    def __contains__(self, name: object) -> bool:
        return name in self._table


def _builtin_recallers() -> dict[str, type]:
    from .recall.channels import builtin_recallers

    return builtin_recallers()


recallers: Registry[type] = Registry("recaller", builtins=_builtin_recallers)
"""Recall channel implementations, selected by the ``recall.*_recaller`` keys: the built-ins of
:data:`memory_ext.recall.channels.CHANNELS` and those added with :func:`memory_ext.register_recaller`."""

vector_backends: Registry[type] = Registry("vector backend")
"""Vector index implementations, selected by ``storage.vector_backend``."""
