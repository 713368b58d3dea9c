"""Fact-augmented turn keys (``ingest.fact_keys``, issue 25)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from memory_ext import MemoryEngine, Turn
from memory_ext.ingest.fact_keys import MAX_FACT_KEY_CHARS, augment_turn_keys, fact_key


def _turn(text: str, tid: str = "t1") -> dict:
    return {"kind": "turn", "turn_ids": [tid], "index_text": text}


def test_facts_of_the_turn_join_its_key_and_others_do_not() -> None:
    turns = [_turn("Ana: I live in Porto now.", "t1"), _turn("Ana: hello", "t2")]
    derived = [{"kind": "fact", "anchor_turn_id": "t1", "text": "Ana lives in Porto", "entities": ["Porto"]},
               {"kind": "procedure", "anchor_turn_id": "t2", "text": "how to: step one", "entities": []}]
    out = augment_turn_keys(turns, derived)
    assert out[0]["index_text"] == "Ana: I live in Porto now. [facts: Ana lives in Porto]"
    assert out[1]["index_text"] == "Ana: hello"  # procedures are not fact keys


def test_nothing_new_adds_nothing_and_the_suffix_is_bounded() -> None:
    assert fact_key("Ana lives in Porto", [{"text": "Ana lives in Porto", "entities": ["Porto"]}]) == ""
    many = [{"text": f"Ana visited place number {i} of the long list", "entities": []} for i in range(40)]
    assert len(fact_key("Ana: trips", many)) <= MAX_FACT_KEY_CHARS + len("[facts: ]")


def test_the_switch_changes_the_stored_turn_key_only_when_on(tmp_path: Path) -> None:
    ts = datetime(2023, 5, 8, 13, 0, tzinfo=UTC)
    turn = Turn(role="user", speaker="Ana", content="I live in Porto and I love green tea.", timestamp=ts)
    keys = {}
    for on in (False, True):
        with MemoryEngine.open(tmp_path / str(on), embedder="hashing",
                               config={"ingest": {"fact_keys": on}}) as engine:
            engine.add_turns([turn], "ana")
            rows = engine._store.reader().execute("SELECT index_text FROM records WHERE kind = 'turn'").fetchall()
            keys[on] = rows[0][0]
            assert engine.search("green tea", "ana", k=1).items[0].text == turn.content
    assert keys[False] == "Ana: I live in Porto and I love green tea."
    assert keys[True].startswith(keys[False] + " [facts: ") and "Ana" in keys[True][len(keys[False]):]
