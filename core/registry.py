"""Name -> implementation tables, resolved when the engine is built (fail fast, list the valid names).

>>> from memory_ext.registry import Registry
>>> shapes = Registry("shape")
>>> @shapes.register("square")
... class Square: ...
>>> shapes.resolve("recall.shape", "square") is Square
True
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

from .errors import ConfigError

__all__ = ["Registry", "recallers", "vector_backends"]

T = TypeVar("T")


class Registry(Generic[T]):
    """A named table of implementations of one kind."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._items: dict[str, T] = {}

    def register(self, name: str) -> Callable[[T], T]:
        """Decorator: register ``obj`` under ``name`` (a name can be registered once)."""

        def deco(obj: T) -> T:
            if name in self._items and self._items[name] is not obj:
                raise ValueError(f"{self.kind} {name!r} is already registered")
            self._items[name] = obj
            return obj

        return deco

    def names(self) -> list[str]:
        return sorted(self._items)

    def resolve(self, field: str, name: str) -> T:
        """The implementation named ``name``, or ConfigError naming ``field`` and the valid names."""
        try:
            return self._items[name]
        except (KeyError, TypeError):
            raise ConfigError.unknown_name(field, name, self.names()) from None

    def __contains__(self, name: object) -> bool:
        return name in self._items


recallers: Registry[type] = Registry("recaller")
"""Recall channel implementations, selected by the ``recall.*_recaller`` keys."""

vector_backends: Registry[type] = Registry("vector backend")
"""Vector index implementations, selected by ``storage.vector_backend``."""
