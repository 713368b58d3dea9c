"""Fact-augmented turn keys (``ingest.fact_keys``, issue 25)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from memory_ext import MemoryEngine, Turn
from memory_ext.ingest.derive import DerivedRecord
from memory_ext.ingest.fact_keys import MAX_FACT_KEY_CHARS, augment_turn_keys, fact_key
from memory_ext.ingest.pipeline import index_records
from memory_ext.models import Namespace, RecordKind


def _turn(text: str, tid: str = "t1") -> DerivedRecord:
    return DerivedRecord(id=f"r-{tid}", kind=RecordKind.TURN, text=text, index_text=text, ref_ts=None,
                         turn_ids=[tid], source_role="user", speaker="Ana", session_id=None)


def _derived(kind: RecordKind, anchor: str, text: str, entities: list[str]) -> DerivedRecord:
    return DerivedRecord(id=f"d-{anchor}-{len(text)}", kind=kind, text=text, index_text=text, ref_ts=None,
                         turn_ids=[anchor], source_role="user", speaker="Ana", session_id=None,
                         anchor_turn_id=anchor, entities=entities)


def test_facts_of_the_turn_join_its_key_and_others_do_not() -> None:
    turns = [_turn("Ana: I live in Porto now.", "t1"), _turn("Ana: hello", "t2")]
    derived = [_derived(RecordKind.FACT, "t1", "Ana lives in Porto", ["Porto"]),
               _derived(RecordKind.PROCEDURE, "t2", "how to: step one", [])]
    out = augment_turn_keys(turns, derived)
    assert out[0].key_text == "Ana: I live in Porto now. [facts: Ana lives in Porto]"
    assert out[0].index_text == "Ana: I live in Porto now."  # the vector's text is unchanged
    assert out[1].key_text is None  # procedures are not fact keys
    indexed = index_records(out, [1, 2], [None, None], turn_facets=[((), (), None), ((), (), None)])
    assert [r.index_text for r in indexed] == [out[0].key_text, "Ana: hello"]


def test_nothing_new_adds_nothing_and_the_suffix_is_bounded() -> None:
    assert fact_key("Ana lives in Porto", [_derived(RecordKind.FACT, "t1", "Ana lives in Porto", ["Porto"])]) == ""
    many = [_derived(RecordKind.EVENT, "t1", f"Ana visited place number {i} of the long list", [])
            for i in range(40)]
    assert len(fact_key("Ana: trips", many)) <= MAX_FACT_KEY_CHARS + len("[facts: ]")


def test_the_switch_keys_the_turn_under_its_facts_and_keeps_its_stored_text(tmp_path: Path) -> None:
    ts = datetime(2023, 5, 8, 13, 0, tzinfo=UTC)
    turn = Turn(role="user", speaker="Ana", content="I ran a marathon yesterday!", timestamp=ts)
    for on in (False, True):
        with MemoryEngine.open(tmp_path / str(on), embedder="hashing",
                               config={"ingest": {"fact_keys": on}}) as engine:
            engine.add_turns([turn], "ana")
            rows = engine._store.reader().execute("SELECT rid, index_text FROM records WHERE kind = 'turn'").fetchall()
            assert rows[0][1] == "Ana: I ran a marathon yesterday!"
            ns_id = engine._store.find_namespace(Namespace.coerce("ana").key)
            rids, scores = engine._read.channels.context.keyword_index.score_all(  # type: ignore[union-attr]
                engine._store.reader(), ns_id, "2023-05-07")
            turn_scores = dict(zip(rids.tolist(), scores.tolist(), strict=True)).get(rows[0][0], 0.0)
            assert (turn_scores > 0) is on  # the event's resolved date is in the turn's keyword key only when on
