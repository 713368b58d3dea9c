"""A failed batch never blocks the store: the failing record is isolated, retried, quarantined and reported; the
others (and every later turn, and other namespaces) get their vectors; no write raises once its turns are stored."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from memory_ext import HashingEmbedder, MemoryEngine, Turn
from memory_ext.errors import EmbedderError

FAST = {"ingest": {"retry_s": 0.01, "search_wait_s": 2.0}}


class PoisonEmbedder(HashingEmbedder):
    """The hashing embedder that fails on any batch holding a text with ``poison`` in it (one record's input
    breaks the model), and, with ``down``, on everything (the model server is down)."""

    def __init__(self, dim: int = 64, poison: str = "0xDEADBEEF") -> None:
        super().__init__(dim)
        self.poison = poison
        self.down = threading.Event()
        self.calls = 0

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        self.calls += 1
        if self.down.is_set():
            raise EmbedderError(self.id, "the model server is down")
        if any(self.poison in t for t in texts):
            raise EmbedderError(self.id, "the model returned NaN for this input")
        return super().embed_documents(texts)


def chat() -> list[Turn]:
    return [Turn(role="user", speaker="Ana", session_id="s1", content=c) for c in (
        "I adopted a beagle puppy last week.",
        "Her vet said to call her at 0xDEADBEEF extension if anything happens.",  # the record the model fails on
        "We go to the beach every Sunday morning.",
        "My sister Lena is moving to Porto in June.",
    )]


@pytest.mark.parametrize("background", [True, False])
def test_a_failing_record_is_quarantined_and_nothing_else_waits(tmp_path: Path, background: bool) -> None:
    emb = PoisonEmbedder()
    config = {"ingest": {**FAST["ingest"], "background_indexing": background}}
    with MemoryEngine.open(tmp_path / "s", embedder=emb, config=config) as eng:
        result = eng.add_turns(chat(), "ana", wait=True)  # returns: nothing raises after the commit
        bad = result.turn_ids[1]
        assert result.quarantined == (bad,) and result.pending == 0 and result.indexing_error is None
        held = eng.quarantined("ana")
        assert bad in {t for q in held for t in q.turn_ids}
        assert all(q.attempts == 3 and "NaN" in q.error and q.user_id == "ana" for q in held)
        stats = eng.stats()
        assert stats.quarantined == len(held) and stats.pending == 0
        assert stats.vectors == stats.records - len(held)  # every other record has its vector
        # a turn added afterwards, and another user's turns, are vectorised as usual
        later = eng.add_turns([Turn(role="user", speaker="Ana", session_id="s2", content="My dog is called Toby.")],
                              "ana", wait=True)
        other = eng.add_turns([Turn(role="user", content="I play the cello on Fridays.")], "ben", wait=True)
        assert later.quarantined == () == other.quarantined
        assert eng.stats().vectors == eng.stats().records - len(held)
        # a search of the namespace is degraded and says why; the quarantined turn is still found by keyword
        found = eng.search("vet extension", "ana", k=3)
        assert found.degraded and found.pending == 0
        [error] = [e for e in found.channel_errors if e.error_type == "Quarantined"]
        assert "reindex" in error.message and "NaN" in error.message
        assert bad in {t for item in found.items for t in item.turn_ids}
        assert not eng.search("cello", "ben").degraded  # another user's searches are not
        assert eng.search("dog name", "ana", k=1).items[0].text == "My dog is called Toby."


def test_reindex_retries_quarantined_records(tmp_path: Path) -> None:
    emb = PoisonEmbedder()
    with MemoryEngine.open(tmp_path / "s", embedder=emb, config=FAST) as eng:
        assert eng.add_turns(chat(), "ana", wait=True).quarantined
        emb.poison = "no longer matches anything"  # the model was fixed
        eng.reindex()
        assert eng.quarantined() == [] and eng.stats().quarantined == 0
        stats = eng.stats()
        assert stats.vectors == stats.records
        assert not eng.search("vet extension", "ana").degraded


def test_forget_removes_a_quarantined_record(tmp_path: Path) -> None:
    with MemoryEngine.open(tmp_path / "s", embedder=PoisonEmbedder(), config=FAST) as eng:
        result = eng.add_turns(chat(), "ana", wait=True)
        records = {q.record_id for q in eng.quarantined("ana") if q.kind == "turn"}
        assert len(records) == 1
        eng.forget("ana", record_ids=records)
        assert all(result.turn_ids[1] not in q.turn_ids for q in eng.quarantined("ana"))


@pytest.mark.parametrize("background", [True, False])
def test_an_embedder_that_is_down_quarantines_nothing_and_recovers(tmp_path: Path, background: bool) -> None:
    emb = PoisonEmbedder()
    eng = MemoryEngine.open(tmp_path / "s", embedder=emb,
                            config={"ingest": {**FAST["ingest"], "background_indexing": background}})
    try:
        eng.add_turns(chat()[:1], "ana", wait=True)  # the engine's first write checks the embedder
        emb.down.set()
        result = eng.add_turns(chat()[2:], "ana", wait=True)
        assert result.pending > 0 and "down" in (result.indexing_error or "") and result.quarantined == ()
        assert eng.flush() is False and eng.quarantined() == []
        found = eng.search("beach Sunday", "ana")
        assert found.degraded and any("down" in e.message for e in found.channel_errors)
        assert "beach" in found.items[0].text  # keyword still finds it
        emb.down.clear()  # the server is back
        assert eng.flush(timeout=60) is True
        assert eng.stats().vectors == eng.stats().records
        assert not eng.search("beach Sunday", "ana").degraded
    finally:
        eng.close()  # never raises


def test_memext_doctor_lists_quarantined_records(tmp_path: Path) -> None:
    """The CLI opens the store with the hashing embedder: the quarantine made by another engine is on disk."""
    with MemoryEngine.open(tmp_path / "s", embedder=PoisonEmbedder(256), config=FAST) as eng:
        bad = eng.add_turns(chat(), "ana", wait=True).quarantined[0]
    run = subprocess.run([sys.executable, "-m", "memory_ext.cli", "doctor", "--path", str(tmp_path / "s"),
                          "--embedder", "hashing", "--read-only"], capture_output=True, text=True, timeout=120)
    assert run.returncode == 1, run.stderr
    assert "quarantined records" in run.stdout and bad in run.stdout and "NaN" in run.stdout
    run = subprocess.run([sys.executable, "-m", "memory_ext.cli", "doctor", "--path", str(tmp_path / "s"),
                          "--embedder", "hashing", "--read-only", "--json"], capture_output=True, text=True,
                         timeout=120)
    report = json.loads(run.stdout)
    assert report["stats"]["quarantined"] == len(report["quarantined"]) > 0
