"""Observation 9 of issue 13: ``reindex`` rebuilds every derived index from the stored turns — a namespace
reindexed after switches were turned on searches exactly like one freshly ingested with them on; it is resumable,
keeps updates, and an embedder change is a reindex."""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from memory_ext import HashingEmbedder, MemoryEngine, Turn
from memory_ext.cli import main
from memory_ext.errors import EmbedderMismatchError
from memory_ext.ingest.reindex import PROGRESS_KEY
from tests.conftest import CONVERSATIONS, SHARED_DATA, make_turns

OFF: dict[str, Any] = {"globals": {"layers_index_enabled": False, "evidence_enabled": False},
                       "ingest": {"background_indexing": False, "layer_min_chars": 50}}
ON: dict[str, Any] = {"globals": {"layers_index_enabled": True, "evidence_enabled": True},
                      "ingest": {"background_indexing": False, "layer_min_chars": 50}}


def _locomo() -> Path | None:
    env = os.environ.get("MEMEXT_SHARED_DATA")
    for base in ([Path(env)] if env else []) + [SHARED_DATA] + [p / "shared" / "data" for p in
                                                                 Path(__file__).resolve().parents[3:6]]:
        if (base / "locomo_dev" / "locomo_dev.json").is_file():
            return base / "locomo_dev" / "locomo_dev.json"
    return None


def _conversation() -> tuple[list[Turn], list[str]]:
    path = _locomo()
    if path is None:
        pytest.skip("the shared LoCoMo dev data are not here")
    from memory_ext.bench.datasets import load_locomo

    conv = min(load_locomo(path), key=lambda c: len(c.turns))
    turns = [Turn(role=t.role, content=t.text, speaker=t.speaker, timestamp=t.timestamp, session_id=t.session_id,
                  external_id=t.external_id) for t in conv.turns]
    return turns, [q.text for q in conv.questions[:20]]


def _kinds(engine: MemoryEngine) -> dict[str, int]:
    conn = sqlite3.connect(engine.path / "memory.sqlite3")
    try:
        return dict(conn.execute("SELECT kind, COUNT(*) FROM records GROUP BY kind"))
    finally:
        conn.close()


def _answers(engine: MemoryEngine, questions: list[str]) -> list[list[tuple[str, float]]]:
    return [[(i.text, round(i.score, 6)) for i in engine.search(q, "conv", k=5).items] for q in questions]


def test_a_reindexed_namespace_searches_like_a_fresh_one_with_the_new_switches(tmp_path: Path) -> None:
    turns, questions = _conversation()
    with MemoryEngine.open(tmp_path / "old", embedder="hashing", config=OFF) as old:
        old.add_turns(turns, "conv")
        assert "l0" not in _kinds(old)
    with MemoryEngine.open(tmp_path / "old", embedder="hashing", config=ON) as old:
        report = old.reindex()
        assert (report.namespaces, report.turns) == (1, len(turns))
        reindexed = _answers(old, questions)
        kinds = _kinds(old)
    with MemoryEngine.open(tmp_path / "fresh", embedder="hashing", config=ON) as fresh:
        fresh.add_turns(turns, "conv")
        assert kinds == _kinds(fresh)
        assert reindexed == _answers(fresh, questions)


def test_reindex_keeps_updates_turn_record_ids_and_the_vectors(engine: MemoryEngine) -> None:
    engine.add_turns(make_turns("ana"), "ana", wait=True)
    engine.update("ana", "ana:2", content="My sister Lena is moving to Nairobi in June.")
    hit = engine.search("Where is Lena moving?", "ana", k=1).items[0]
    vectors = engine.stats().vectors
    engine.reindex("ana")
    engine.flush()
    again = engine.search("Where is Lena moving?", "ana", k=5).items
    assert again[0].id == hit.id and "Nairobi" in again[0].text
    assert not any("Lena is moving to Porto" in i.text for i in again)
    assert engine.stats().vectors == vectors


def test_a_stopped_reindex_resumes_where_it_stopped(engine: MemoryEngine) -> None:
    for user in CONVERSATIONS:
        engine.add_turns(make_turns(user), user)
    done = engine._store.find_namespace(("ana", ""))  # a reindex killed after its first namespace
    with engine._store.transaction("test") as conn:
        engine._store.set_meta(conn, PROGRESS_KEY, json.dumps({"done": [done]}))
    report = engine.reindex()
    assert report.resumed and report.namespaces == 2
    assert report.turns == len(CONVERSATIONS["ben"]) + len(CONVERSATIONS["chen"])
    assert engine._store.get_meta(PROGRESS_KEY) is None
    assert "marathon" in engine.search("marathon", "ben", k=1).items[0].text


def test_an_embedder_change_is_a_reindex(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = tmp_path / "store"
    with MemoryEngine.open(store, embedder=HashingEmbedder(dim=256)) as eng:
        eng.add_turns(make_turns("chen"), "chen", wait=True)
    with pytest.raises(EmbedderMismatchError) as info:
        MemoryEngine.open(store, embedder=HashingEmbedder(dim=128))
    assert "memext reindex --embedder" in str(info.value) and "allow_embedder_change=True" in str(info.value)
    with MemoryEngine.open(store, embedder=HashingEmbedder(dim=128), allow_embedder_change=True) as eng:
        assert eng.reindex().embedder_id == "hashing-v1:128"
    with MemoryEngine.open(store, embedder=HashingEmbedder(dim=128)) as eng:  # no switch needed any more
        assert "peanuts" in eng.search("allergic to peanuts", "chen", k=1).items[0].text
        assert eng.stats().embedder_id == "hashing-v1:128"
    assert main(["reindex", "--path", str(store), "--embedder", "hashing", "--no-progress"]) == 0
    assert "reindexed 1 namespace(s)" in capsys.readouterr().out
