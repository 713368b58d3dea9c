"""The truth store's repositories by table family, shared by the backends: each backend's store class
composes them (``store/sqlite``, ``store/pg``) with its own connections, transactions, schema and purge."""

from .base import CommonStore
from .meta import MetaRepo
from .queue import QueueRepo
from .records import RecordRepo
from .turns import TurnRepo
from .versions import VersionRepo

__all__ = ["CommonStore", "MetaRepo", "QueueRepo", "RecordRepo", "TurnRepo", "VersionRepo"]
