"""The SQLite backend of the truth store: one database (WAL) in the store directory.

``store.py`` holds :class:`TruthStore` (connections, the write transaction, locking, purge, composed with the
repositories of ``store/repos``), ``connection.py`` the read connections, ``schema.py`` the migrations.
"""

from ..rows import RecordRow, TurnRow
from .schema import MIGRATIONS, SCHEMA_VERSION
from .store import DB_FILE, DURABILITY, LOCK_FILE, NewDirectory, TruthStore, _lock_holder, check_embedder_shape

SqliteTruthStore = TruthStore
"""The name ``assembly.py`` knows it by."""

__all__ = ["DB_FILE", "DURABILITY", "LOCK_FILE", "MIGRATIONS", "SCHEMA_VERSION", "NewDirectory", "RecordRow",
           "SqliteTruthStore", "TruthStore", "TurnRow", "_lock_holder", "check_embedder_shape"]
