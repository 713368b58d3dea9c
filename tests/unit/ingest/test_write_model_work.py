"""What a write queues: near-copy derived records reuse their turn's vector, mean windows, no model call."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np

from memory_ext import HashingEmbedder, MemoryEngine, Turn
from memory_ext.ingest.indexer import word_overlap

T0 = datetime(2026, 3, 2, 9, 0)
TEXTS = ["I went to a LGBTQ support group yesterday and it was so powerful.",
         "That sounds wonderful, how did it feel?", "Really freeing. I painted that lake sunrise last year too."]


class CountingEmbedder(HashingEmbedder):
    def __init__(self, dim: int = 64) -> None:
        super().__init__(dim)
        self.texts: list[str] = []

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        self.texts += list(texts)
        return super().embed_documents(texts)


def kinds_and_vectors(eng: MemoryEngine) -> list[tuple[str, str, int, np.ndarray]]:
    rows = eng._store.reader().execute(
        "SELECT r.kind, r.index_text, r.anchor_rid, e.vector FROM records r JOIN embeddings e USING(rid)"
        " ORDER BY r.rid").fetchall()
    return [(k, t, a, np.frombuffer(v, np.float32)) for k, t, a, v in rows]


def add(eng: MemoryEngine) -> None:
    eng.add_turns([Turn(role="user", speaker="Caroline", content=c, session_id="s", timestamp=T0 + timedelta(minutes=i))
                   for i, c in enumerate(TEXTS)], "c", wait=True)


def test_near_copy_derived_records_reuse_their_turns_vector(tmp_path: Path) -> None:
    emb = CountingEmbedder()
    with MemoryEngine.open(tmp_path / "s", embedder=emb) as eng:
        add(eng)
        rows = kinds_and_vectors(eng)
        assert eng.stats().vectors == eng.stats().records
    by_rid = {i + 1: r for i, r in enumerate(rows)}
    derived = [r for r in rows if r[0] not in ("turn", "window")]
    assert derived, "the rules derive an event from the first turn"
    for _kind, text, anchor, vector in derived:
        turn = by_rid[anchor]
        if word_overlap(text, turn[1]) >= 0.7:
            assert np.array_equal(vector, turn[3]) and text not in emb.texts
    assert len(emb.texts) == len(set(emb.texts))  # nothing embedded twice


def test_derived_records_are_embedded_when_copying_is_off(tmp_path: Path) -> None:
    emb = CountingEmbedder()
    with MemoryEngine.open(tmp_path / "s", embedder=emb, config={"ingest": {"derived_copy_overlap": None}}) as eng:
        add(eng)
        rows = kinds_and_vectors(eng)
    derived = [r for r in rows if r[0] not in ("turn", "window")]
    assert derived and all(text in emb.texts for _, text, _, _ in derived)


def test_mean_windows_cost_no_model_call(tmp_path: Path) -> None:
    emb = CountingEmbedder()
    with MemoryEngine.open(tmp_path / "s", embedder=emb, config={"ingest": {"window_vectors": "mean"}}) as eng:
        add(eng)
        rows = eng._store.reader().execute(
            "SELECT r.kind, r.turn_ids, e.vector FROM records r JOIN embeddings e USING(rid)").fetchall()
    turn_vec = {json.loads(t)[0]: np.frombuffer(v, np.float32) for k, t, v in rows if k == "turn"}
    windows = [(json.loads(t), np.frombuffer(v, np.float32)) for k, t, v in rows if k == "window"]
    assert windows
    for ids, v in windows:
        mean = np.mean([turn_vec[i] for i in ids], axis=0)
        assert np.allclose(v, mean / np.linalg.norm(mean), atol=1e-6)
    assert not any(t.count("\n") or len(t) > 200 for t in emb.texts)  # no window text was embedded


def test_the_foreground_embeds_at_most_one_text_per_engine(tmp_path: Path) -> None:
    import threading

    class ThreadRecording(HashingEmbedder):
        def __init__(self) -> None:
            super().__init__(64)
            self.caller_texts: list[str] = []
            self.gate = threading.Event()

        def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
            if threading.current_thread() is threading.main_thread():
                self.caller_texts += list(texts)
            else:
                self.gate.wait(60)
            return super().embed_documents(texts)

    emb = ThreadRecording()
    with MemoryEngine.open(tmp_path / "s", embedder=emb, config={"ingest": {"search_wait_s": 0}}) as eng:
        for i, text in enumerate(TEXTS):
            eng.add_turns([Turn(role="user", content=text, timestamp=T0 + timedelta(minutes=i))], "c")
        assert emb.caller_texts == [TEXTS[0]]  # the one-time embedder check; every other text is queued
        assert eng.pending("c") > 0
        emb.gate.set()
        assert eng.flush("c")
        assert eng.stats().vectors == eng.stats().records
