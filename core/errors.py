"""Every error memory-ext raises, in one tree.

::

    MemoryExtError                      base of everything below
    ├── ConfigError                     bad EngineConfig: unknown key or implementation, inconsistent switches
    ├── ValidationError                 bad input to a public call (also a ValueError); nothing was written
    │   ├── InvalidTurnError            a turn field is wrong (role, content, timestamp, ...)
    │   ├── InvalidNamespaceError       a namespace id is empty, too long or has control characters
    │   ├── InvalidQueryError           a search argument is wrong (empty query, k <= 0, bad filter)
    │   ├── InvalidArgumentError        another argument is wrong (period, budget, importance, context)
    │   ├── InvalidImportError          a line of an export file is wrong (its number is in the message)
    │   ├── HookNotFoundError           no memory file has this hook id (or the prefix is ambiguous)
    │   └── RequestTooLargeError        a request body over a server's max_body_bytes (HTTP 413)
    ├── EmbedderError                   an embedder misbehaved (NaN, wrong dimension, wrong count)
    │   └── EmbedderMismatchError       the store was built with another embedder
    ├── StoreError                      the storage layer failed
    │   ├── CorruptStoreError           the database file is not readable (corrupt, truncated, not a store)
    │   ├── StoreNotFoundError          no store at the path given (and creating one was not asked for)
    │   ├── StoreLockedError            another process holds the writer lock of the store
    │   ├── ReadOnlyStoreError          a write on a store opened read-only
    │   └── SchemaVersionError          the store was written by a newer memory-ext
    ├── RetrievalError                  every recall channel failed; carries the ChannelErrors
    └── MissingDependencyError          an optional extra is not installed (also an ImportError)

Messages say what was wrong, the value received and the fix. A failed *single* channel is not an exception:
it becomes a :class:`memory_ext.models.ChannelError` in ``SearchResult.channel_errors``.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import date
from enum import Enum
from typing import Any

__all__ = [
    "ConfigError",
    "CorruptStoreError",
    "EmbedderError",
    "EmbedderMismatchError",
    "HookNotFoundError",
    "InvalidArgumentError",
    "InvalidImportError",
    "InvalidNamespaceError",
    "InvalidQueryError",
    "InvalidTurnError",
    "MemoryExtError",
    "MissingDependencyError",
    "ReadOnlyStoreError",
    "RequestTooLargeError",
    "RetrievalError",
    "SchemaVersionError",
    "StoreError",
    "StoreLockedError",
    "StoreNotFoundError",
    "ValidationError",
]


PREVIEW_CHARS = 12
"""Characters of rejected text an error shows (and keeps in ``.value``); the rest is only counted."""
_SHORT_STR = 24


def redact(value: Any) -> Any:
    """What an error keeps of a rejected value: short values as they are; long text (or bytes, or a container
    whose ``repr`` is long — it may hold user content) as a length and a short prefix, never all of it.

    >>> redact("robot")
    'robot'
    >>> redact("my password is hunter2, please remember it")
    <42 characters: 'my password '…>
    """
    if isinstance(value, Redacted):
        return value
    if isinstance(value, str):
        if len(value) <= _SHORT_STR and type(value) is str:
            return value
        return Redacted(f"<{len(value)} characters: {value[:PREVIEW_CHARS]!r}…>" if len(value) > PREVIEW_CHARS
                        else f"<{len(value)} characters: {str(value)!r}>")
    if isinstance(value, (bytes, bytearray, memoryview)):
        return Redacted(f"<{len(value)} bytes>")
    if value is None or isinstance(value, (bool, int, float, date, Enum)):
        return value
    text = repr(value)
    if len(text) <= 2 * _SHORT_STR:
        return value
    return Redacted(f"<{type(value).__name__} of {len(text)} characters: {text[:PREVIEW_CHARS]}…>")


class Redacted(str):
    """A rejected value as an error keeps it: its length and a short prefix (shown without quotes)."""

    def __repr__(self) -> str:
        return str(self)


def _short(value: Any, limit: int = 80) -> str:
    text = repr(redact(value))
    return text if len(text) <= limit else text[: limit - 3] + "..."


class MemoryExtError(Exception):
    """Base class of every error raised by memory-ext."""


class ConfigError(MemoryExtError):
    """The engine configuration is invalid; raised when the engine is built, never at the first search.

    >>> str(ConfigError("keyword_recaller", "kw", "valid names: keyword"))
    "config field 'keyword_recaller': got 'kw'; valid names: keyword"
    """

    def __init__(self, field: str, value: Any, fix: str) -> None:
        value = redact(value)
        self.field, self.value, self.fix = field, value, fix
        super().__init__(f"config field {field!r}: got {_short(value)}; {fix}")

    @classmethod
    def unknown_key(cls, field: str, valid: Iterable[str]) -> ConfigError:
        """An unknown configuration key; its value (perhaps a secret) is neither shown nor kept."""
        err = cls(field, None, "valid keys: " + ", ".join(valid))
        err.args = (f"config field {field!r}: unknown key (its value is not shown); {err.fix}",)
        return err

    @classmethod
    def unknown_name(cls, field: str, value: Any, valid: Iterable[str]) -> ConfigError:
        return cls(field, value, "valid names: " + ", ".join(sorted(valid)))


class ValidationError(MemoryExtError, ValueError):
    """Bad input to a public call. Names the field, the value and the fix; nothing was written.

    Rejected text is user content: ``.value`` and the message keep only its length and a short prefix
    (:func:`redact`).
    """

    def __init__(self, field: str, value: Any, fix: str) -> None:
        value = redact(value)
        self.field, self.value, self.fix = field, value, fix
        super().__init__(f"{field}: got {_short(value)}; {fix}")


class InvalidTurnError(ValidationError):
    """A turn is malformed (``field`` is like ``turns[3].role``)."""


class InvalidNamespaceError(ValidationError):
    """A namespace id is empty, too long, or contains control characters."""


class InvalidQueryError(ValidationError):
    """A search argument is invalid (empty query, ``k <= 0``, an unknown filter)."""


class InvalidArgumentError(ValidationError):
    """An argument of a lifecycle call is wrong: unknown period, negative budget, importance out of range..."""


class InvalidImportError(ValidationError):
    """A line of an import file is wrong; ``line`` is its number (1-based; 0: a check across lines) and the
    field reads ``line 12: metadata``. Nothing of the file was written."""

    def __init__(self, line: int, field: str, value: Any, fix: str) -> None:
        self.line = line
        super().__init__(f"line {line}: {field}" if line else field, value, fix)


class HookNotFoundError(ValidationError):
    """No memory file has this hook id, or a prefix matches several (``candidates`` lists them)."""

    def __init__(self, field: str, value: Any, fix: str, candidates: Iterable[str] = ()) -> None:
        super().__init__(field, value, fix)
        self.candidates = list(candidates)


class RequestTooLargeError(ValidationError):
    """A request body larger than the server accepts (``server.max_body_bytes``; HTTP 413). Nothing was written.

    ``size`` is the body's size in bytes (None when the server refused it without reading it), ``limit`` the
    server's limit (None when the server did not say). A ``RemoteEngine`` raises it before sending a body it
    knows is too large.

    >>> str(RequestTooLargeError(9_000_000, 8_388_608)).split(";")[0]
    'the request body is 9000000 bytes, over the server limit of 8388608 bytes (server.max_body_bytes)'
    """

    FIX = ("send a smaller body (split the turns over several calls), or raise the server's limit: "
           "server.max_body_bytes (memext serve --max-body-bytes N, MEMORY_EXT_MAX_BODY_BYTES)")

    def __init__(self, size: int | None, limit: int | None, fix: str | None = None) -> None:
        super().__init__("body", size, fix or self.FIX)
        self.size, self.limit = size, limit
        what = f"is {size} bytes" if size is not None else "is too large"
        over = f"over the server limit of {limit} bytes" if limit is not None else "over the server limit"
        self.args = (f"the request body {what}, {over} (server.max_body_bytes); {self.fix}",)


class EmbedderError(MemoryExtError):
    """An embedder returned something unusable (NaN, wrong dimension, wrong number of vectors)."""

    def __init__(self, embedder_id: str, problem: str, fix: str = "check the embedder implementation") -> None:
        self.embedder_id, self.problem = embedder_id, problem
        super().__init__(f"embedder {embedder_id!r}: {problem}; {fix}")


class EmbedderMismatchError(EmbedderError):
    """The store's vectors were made by another embedder; mixing embedders is refused."""

    def __init__(self, stored: str, given: str) -> None:
        self.stored, self.given = stored, given
        MemoryExtError.__init__(
            self,
            f"this store was indexed with embedder {stored!r} but {given!r} was given; "
            f"open it with that embedder, or rebuild its vectors with the new one: `memext reindex --embedder "
            f"NAME` (or MemoryEngine.open(path, embedder=..., allow_embedder_change=True).reindex())",
        )
        self.embedder_id, self.problem = given, "mismatch"


class StoreError(MemoryExtError):
    """The storage layer failed."""


class CorruptStoreError(StoreError):
    """The store's database cannot be read: corrupt, truncated, or not a memory-ext store at all."""

    def __init__(self, path: str, problem: str) -> None:
        self.path = path
        super().__init__(
            f"store {path!r} cannot be read ({problem}); restore the directory from a backup, or move it away "
            f"to start an empty store (`sqlite3 memory.sqlite3 .recover` may save some turns)")


class StoreNotFoundError(StoreError):
    """No memory-ext store at the path given, where an existing one was expected (a mistyped ``--path`` must not
    become a new, empty memory).

    >>> str(StoreNotFoundError("/srv/memroy", "pass --create to make a new store there"))
    "no memory-ext store at '/srv/memroy'; check the path, or pass --create to make a new store there"
    """

    def __init__(self, path: str, fix: str, *, schema: str | None = None) -> None:
        self.path, self.fix, self.schema = path, fix, schema
        if schema is not None:  # ``path`` is a DSN then: it may hold a password, and is not shown
            super().__init__(f"no memory-ext store in PostgreSQL schema {schema!r}; check --path and "
                             f"storage.postgres_schema, or {fix}")
        else:
            super().__init__(f"no memory-ext store at {path!r}; check the path, or {fix}")


class StoreLockedError(StoreError):
    """Another process is the writer of this store directory."""

    def __init__(self, path: str, holder: str) -> None:
        self.path, self.holder = path, holder
        super().__init__(
            f"store {path!r} is locked by another writer process ({holder}); only one process may write a "
            f"store: reuse that process's engine, or open this one with MemoryEngine.open(path, read_only=True)"
        )


class ReadOnlyStoreError(StoreError):
    """A write was attempted on a store opened with ``read_only=True``."""

    def __init__(self, operation: str) -> None:
        super().__init__(f"{operation}: this engine was opened read_only=True; open it without read_only to write")


class SchemaVersionError(StoreError):
    """The store's schema is newer than this version of memory-ext understands."""


class RetrievalError(MemoryExtError):
    """Every recall channel failed, so there is no result at all. ``errors`` lists the ChannelErrors."""

    def __init__(self, errors: list[Any]) -> None:
        self.errors = list(errors)
        detail = "; ".join(f"{e.channel}: {e.error_type}: {e.message}" for e in self.errors)
        super().__init__(f"all recall channels failed ({detail})")


class MissingDependencyError(MemoryExtError, ImportError):
    """An optional dependency is missing; the message names the extra to install."""

    def __init__(self, package: str, extra: str, purpose: str) -> None:
        self.package, self.extra = package, extra
        super().__init__(f"{purpose} needs the package {package!r}: pip install \"memory-ext[{extra}]\"")
