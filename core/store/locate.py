"""Where a store lives: a directory (SQLite) or a PostgreSQL connection URI. No driver import, so the server's
settings, the CLI and the bench can tell the two apart without loading a backend.

>>> is_dsn("postgresql://memory@db/memory"), is_dsn("./memory")
(True, False)
"""

from __future__ import annotations

import os

__all__ = ["DSN_ENV", "dsn_from", "is_dsn"]

DSN_ENV = "MEMORY_EXT_POSTGRES_DSN"
"""Environment variable read when ``storage.postgres_dsn`` is not set."""


def dsn_from(path: str | os.PathLike[str] | None, dsn: str | None) -> str | None:
    """The DSN a store opens: a ``postgresql://`` path, else ``storage.postgres_dsn``, else :data:`DSN_ENV`."""
    if is_dsn(path):
        return str(path)
    return dsn or os.environ.get(DSN_ENV) or None


def is_dsn(path: str | os.PathLike[str] | None) -> bool:
    """Whether a store path is a PostgreSQL connection URI rather than a directory."""
    return path is not None and str(path).startswith(("postgresql://", "postgres://"))
