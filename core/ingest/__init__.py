"""The write path's derivation: turns -> searchable records (no LLM)."""

from .derive import derive_turn_record, derive_windows, index_text

__all__ = ["derive_turn_record", "derive_windows", "index_text"]
