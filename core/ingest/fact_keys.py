"""Fact-augmented turn keys: a turn is indexed under its text plus the facts the rules derived from it.

LongMemEval's "K = V + fact" (index each session under its text and its extracted facts) raised recall@10; here
the facts are the rule-derived ``fact`` / ``preference`` / ``event`` records of :mod:`memory_ext.ingest.kinds`
(no LLM) — "Ana lives in Lisbon", "Ana: ran a marathon (2023-05-06)" — and the entities they name. With
``ingest.fact_keys`` on, :func:`augment_turn_keys` gives the turn record they come from a ``key_text``: its
``index_text`` plus ``[facts: …]`` (bounded by :data:`MAX_FACT_KEY_CHARS`), which the write path hands to the
indexes that read a record's text (the keyword index's BM25 key). The stored ``index_text``, and so the turn's
dense vector, stay as they are: the vector of a turn is pooled from the encoding of its conversation run, whose
text holds the turn's own text only. The derived records themselves are still written as separate records.

>>> from memory_ext.ingest.derive import DerivedRecord
>>> from memory_ext.models import RecordKind
>>> turn = DerivedRecord(id="r1", kind=RecordKind.TURN, text="I moved here from Porto last May.",
...     index_text="Ana: I moved here from Porto last May.", ref_ts=None, turn_ids=["t1"], source_role="user",
...     speaker="Ana", session_id=None)
>>> fact = DerivedRecord(id="r2", kind=RecordKind.EVENT, text="Ana: moved here from Porto (2023-05-01)",
...     index_text="Ana: moved here from Porto (2023-05-01)", ref_ts=None, turn_ids=["t1"], source_role="user",
...     speaker="Ana", session_id=None, anchor_turn_id="t1", entities=["Porto"])
>>> augment_turn_keys([turn], [fact])[0].key_text
'Ana: I moved here from Porto last May. [facts: Ana: moved here from Porto (2023-05-01)]'
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .derive import DerivedRecord

__all__ = ["FACT_KEY_KINDS", "MAX_FACT_KEY_CHARS", "augment_turn_keys", "fact_key"]

FACT_KEY_KINDS = frozenset({"fact", "preference", "event"})
"""The derived kinds whose text joins their turn's key (procedures and failures are keyed on their own)."""
MAX_FACT_KEY_CHARS = 240
"""At most this many characters of facts are appended to one turn's key (bounds the extra embedding work)."""


def fact_key(turn_text: str, facts: Sequence[DerivedRecord]) -> str:
    """The ``[facts: …]`` suffix for a turn whose key is ``turn_text`` (empty when nothing new is stated):
    each fact's text, then the entities no fact or the turn names yet."""
    parts: list[str] = []
    seen = turn_text.lower()
    for fact in facts:
        text = (fact.text or "").strip()
        if text and text.lower() not in seen:
            parts.append(text)
            seen += " " + text.lower()
    for fact in facts:
        for entity in fact.entities or ():
            name = str(entity).strip()
            if name and name.lower() not in seen:
                parts.append(name)
                seen += " " + name.lower()
    suffix = ""
    for part in parts:
        candidate = f"{suffix}; {part}" if suffix else part
        if len(candidate) > MAX_FACT_KEY_CHARS:
            break
        suffix = candidate
    return f"[facts: {suffix}]" if suffix else ""


def augment_turn_keys(records: list[DerivedRecord], derived: Sequence[DerivedRecord]) -> list[DerivedRecord]:
    """``records`` (turn records), each given a ``key_text`` — its ``index_text`` extended by :func:`fact_key` of
    the derived records of :data:`FACT_KEY_KINDS` anchored to it — where they state anything new (the list is
    updated in place, with new frozen records, and returned)."""
    by_turn: dict[str, list[DerivedRecord]] = {}
    for record in derived:
        anchor = record.anchor_turn_id
        if record.kind.value in FACT_KEY_KINDS and anchor:
            by_turn.setdefault(str(anchor), []).append(record)
    if not by_turn:
        return records
    for i, record in enumerate(records):
        facts = by_turn.get(record.turn_ids[0]) if record.turn_ids else None
        if facts:
            suffix = fact_key(record.index_text, facts)
            if suffix:
                records[i] = dataclasses.replace(record, key_text=f"{record.index_text} {suffix}")
    return records
