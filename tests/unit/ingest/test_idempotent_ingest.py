"""Observation 5 of issue 13: ingesting the same turns twice stores nothing new (``external_id``; identical
consecutive turns), and the ``AddResult`` says which turns were new and which were already stored."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memory_ext import MemoryEngine, Turn
from memory_ext.cli import main
from tests.conftest import CONVERSATIONS, make_turns


def test_a_repeated_external_id_is_not_stored_again(engine: MemoryEngine) -> None:
    first = engine.add_turns(make_turns("ana"), "ana")
    again = engine.add_turns(make_turns("ana"), "ana")
    assert again.turn_ids == first.turn_ids and again.existing_ids == first.turn_ids
    assert again.record_ids == () and again.new_ids == ()
    assert len(engine.get_turns("ana")) == len(CONVERSATIONS["ana"])
    top = engine.search("What dog did Ana adopt?", "ana", k=2).items
    assert len({item.turn_ids[0] for item in top}) == 2  # the same turn never appears twice


def test_a_batch_mixing_new_and_known_turns_stores_only_the_new_ones(engine: MemoryEngine) -> None:
    turns = make_turns("ana")
    engine.add_turns(turns[:3], "ana")
    result = engine.add_turns(turns, "ana")
    assert len(result.turn_ids) == len(turns) and len(result.existing_ids) == 3
    assert result.new_ids == result.turn_ids[3:]
    assert [t.content for t in engine.get_turns("ana")] == [c for _, _, c in CONVERSATIONS["ana"]]


def test_the_same_external_id_in_another_session_or_namespace_is_another_turn(engine: MemoryEngine) -> None:
    engine.add_turns([Turn(role="user", content="note one", external_id="k", session_id="a")], "ana")
    other = engine.add_turns([Turn(role="user", content="note two", external_id="k", session_id="b")], "ana")
    ben = engine.add_turns([Turn(role="user", content="note one", external_id="k", session_id="a")], "ben")
    assert other.existing_ids == () and ben.existing_ids == ()
    assert [t.content for t in engine.get_turns("ana")] == ["note one", "note two"]


def test_identical_consecutive_turns_are_stored_once(engine: MemoryEngine) -> None:
    turn = Turn(role="user", speaker="Ana", content="I adopted a beagle called Toby", session_id="s1")
    first = engine.add_turns([turn], "ana")
    again = engine.add_turns([turn, turn], "ana")  # a client retrying the same message
    assert again.turn_ids == first.turn_ids * 2 and again.existing_ids == first.turn_ids
    other = engine.add_turns([turn.model_copy(update={"speaker": "Ben"}), turn], "ana")  # not consecutive any more
    assert other.existing_ids == ()
    assert len(engine.get_turns("ana")) == 3


def test_consecutive_dedup_can_be_switched_off(tmp_path: Path) -> None:
    turn = Turn(role="user", content="ok", session_id="s1")
    with MemoryEngine.open(tmp_path / "s", embedder="hashing", config={"ingest": {"dedup_consecutive": False}}) as eng:
        eng.add_turns([turn, turn], "ana")
        assert len(eng.get_turns("ana")) == 2


def test_memext_ingest_twice_adds_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    file = tmp_path / "turns.jsonl"
    file.write_text("\n".join(json.dumps({"role": r, "speaker": s, "content": c, "external_id": f"m{i}"})
                              for i, (r, s, c) in enumerate(CONVERSATIONS["ben"])), encoding="utf-8")
    common = ["--path", str(tmp_path / "store"), "--embedder", "hashing", "--user", "ben"]
    assert main(["ingest", str(file), *common]) == 0
    assert main(["ingest", str(file), *common]) == 0
    assert "ingested 0 turns" in capsys.readouterr().out
    with MemoryEngine.open(tmp_path / "store", embedder="hashing") as eng:
        assert len(eng.get_turns("ben")) == len(CONVERSATIONS["ben"])
