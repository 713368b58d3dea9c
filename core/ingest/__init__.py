"""The write path's derivation: turns -> searchable records (no LLM)."""

from .derive import DerivedRecord, IngestTurn, derive_turn_record, derive_windows, index_text

__all__ = ["DerivedRecord", "IngestTurn", "derive_turn_record", "derive_windows", "index_text"]
