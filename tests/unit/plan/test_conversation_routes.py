"""Conversation-excerpt queries: opening and focus routes, no time filter, and the sparse latent-term channel."""

from __future__ import annotations

import threading
import zlib
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest

from memory_ext import ActionState, MemoryEngine, Turn
from memory_ext.embed import HashingEmbedder
from memory_ext.plan.heuristic import conversation_parts, plan_search, split_sentences

T0 = datetime(2023, 5, 8, 13, 0, tzinfo=UTC)
EXCERPT = ("I went hiking with my dad yesterday. It was great! Did you see anything? We saw a fox near the river. "
           "Do you like animals? I love foxes, they are so clever.")


def test_split_sentences_chinese_and_latin() -> None:
    assert split_sentences("我今天去了公园！你喜欢公园吗？喜欢。") == ["我今天去了公园！", "你喜欢公园吗？", "喜欢。"]
    assert split_sentences("I went there. Did you like it? Yes! 3.5 is ok") == [
        "I went there.", "Did you like it?", "Yes!", "3.5 is ok"]


def test_questions_get_no_conversation_routes() -> None:
    assert conversation_parts("When did Caroline go to the support group?") is None
    plan = plan_search("What did Caroline do yesterday?", now=T0, speakers=["Caroline"], action_state=None)
    assert [r.goal for r in plan.routes] == ["query"] and plan.routes[0].time_filter is not None


def test_a_conversation_excerpt_gets_opening_and_focus_routes_and_no_time_filter() -> None:
    opening, focus = conversation_parts(EXCERPT)  # type: ignore[misc]
    assert opening == "I went hiking with my dad yesterday."
    assert focus == "Do you like animals? I love foxes, they are so clever."
    plan = plan_search(EXCERPT, now=T0, speakers=[], action_state=None)
    assert [r.goal for r in plan.routes] == ["query", "opening", "focus"]
    assert all(r.time_filter is None for r in plan.routes)  # "yesterday" dates the story, not the memories


class _SparseHashing(HashingEmbedder):
    """The hashing embedder plus a sparse view (hashed words), counting what it encodes."""

    def __init__(self) -> None:
        super().__init__(dim=64)
        self.sparse_calls: list[str] = []

    def embed_sparse(self, texts: Sequence[str]) -> list[tuple[np.ndarray, np.ndarray]]:
        out = []
        for text in texts:
            self.sparse_calls.append(text)
            idx = sorted({zlib.crc32(w.encode()) % 4096 for w in text.lower().split()})
            out.append((np.array(idx, dtype=np.int32), np.ones(len(idx), dtype=np.float32)))
        return out


def _engine(tmp: Path, emb: _SparseHashing, config: dict | None = None) -> MemoryEngine:
    eng = MemoryEngine.open(tmp / "s", embedder=emb, config=config)
    notes = ["Bart saw a clever fox by the river with his dad", "Bart baked a cake for his birthday",
             "Bart lost his blue kite at the beach", "Bart read a comic about space pirates"]
    eng.add_turns([Turn(role="user", content=c, timestamp=T0 + timedelta(days=i)) for i, c in enumerate(notes)], "u",
                  wait=True)
    return eng


def test_the_sparse_channel_serves_conversation_excerpts_only(tmp_path: Path) -> None:
    emb = _SparseHashing()
    with _engine(tmp_path, emb) as eng:
        assert emb.sparse_calls == []  # ingest.sparse_encodings: on_demand — nothing encoded at write
        eng.search("When did Bart see a fox?", "u", k=2, explain=True)
        assert emb.sparse_calls == []  # a question: the channel does not run, nor asks for encodings
        res = eng.search(EXCERPT, "u", k=2, explain=True)
        assert "fox" in res.items[0].text and "sparse" in res.items[0].channels
        assert res.trace is None and not res.degraded and res.pending == 0
        # the first excerpt search had the four turns encoded (once), then its three route texts
        assert len(emb.sparse_calls) == 4 + 3 and sorted(emb.sparse_calls[:4]) == sorted(
            t.content for t in eng.get_turns("u"))
        eng.search(EXCERPT.replace("foxes", "owls"), "u", k=2)
        assert all(emb.sparse_calls.count(t.content) == 1 for t in eng.get_turns("u"))  # not encoded again
        calls = len(emb.sparse_calls)
        eng.add_turns([Turn(role="user", content="Bart fed the ducks at the pond", timestamp=T0)], "u", wait=True)
        assert emb.sparse_calls[calls:] == ["Bart fed the ducks at the pond"]  # from now on encoded at write
        receipt = eng.forget("u", record_ids=[res.items[0].id])
        assert receipt.turns == 1
        res = eng.search(EXCERPT, "u", k=4)
        assert all("fox" not in i.text for i in res.items)  # forgotten: its sparse vector is gone too


def test_sparse_encodings_at_write_encodes_every_turn_when_it_is_written(tmp_path: Path) -> None:
    emb = _SparseHashing()
    with _engine(tmp_path, emb, {"ingest": {"sparse_encodings": "at_write"}}) as eng:
        assert len(emb.sparse_calls) == 4
        eng.search(EXCERPT, "u", k=2)
        assert len(emb.sparse_calls) == 4 + 3  # only the route texts at search time


def test_a_reader_that_cannot_make_the_encodings_says_what_its_sparse_channel_missed(tmp_path: Path) -> None:
    emb = _SparseHashing()
    with _engine(tmp_path, emb) as writer:  # only questions so far: no sparse encodings
        with MemoryEngine.open(tmp_path / "s", embedder=emb, read_only=True) as reader:
            res = reader.search(EXCERPT, "u", k=2)
            assert res.items and "fox" in res.items[0].text  # the other channels still find it
            assert any(w.startswith("sparse channel: 4 turn(s)") for w in res.warnings)
            assert emb.sparse_calls == []  # a reader makes no encodings (and an empty index asks for none)
        writer.search(EXCERPT, "u", k=2)  # the writer's first excerpt search makes them
        with MemoryEngine.open(tmp_path / "s", embedder=emb, read_only=True) as reader:
            res = reader.search(EXCERPT, "u", k=2)
            assert not any(w.startswith("sparse channel") for w in res.warnings)
            assert "sparse" in res.items[0].channels


def test_sparse_enabled_false_removes_the_channel(tmp_path: Path) -> None:
    emb = _SparseHashing()
    with _engine(tmp_path, emb, {"globals": {"sparse_enabled": False}}) as eng:
        eng.search(EXCERPT, "u", k=2)
        assert emb.sparse_calls == []


class _SlowSparse(_SparseHashing):
    """Sparse encodings of stored notes (they start with "Bart") wait until ``ready`` is set: a backfill that
    takes as long as the test wants."""

    def __init__(self) -> None:
        super().__init__()
        self.ready = threading.Event()

    def embed_sparse(self, texts: Sequence[str]) -> list[tuple[np.ndarray, np.ndarray]]:
        if any(t.startswith("Bart") for t in texts):
            self.ready.wait()
        return super().embed_sparse(texts)


def test_a_search_does_not_stall_behind_a_large_sparse_backfill(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """A namespace's first excerpt search queues the sparse encodings of its turns; when they are more than
    ``SPARSE_WAIT_TURNS`` (a shelf of manuals, here 3 for 4 notes) it does not wait for them (the indexer is held,
    so a wait would last ``search_wait_s``): it answers from the other channels, says what the sparse channel
    missed, and neither it nor a question waits for that backfill afterwards."""
    monkeypatch.setattr("memory_ext.ingest.pipeline.SPARSE_WAIT_TURNS", 3)
    emb = _SlowSparse()
    eng = _engine(tmp_path, emb, {"ingest": {"search_wait_s": 600}})
    try:
        res = eng.search(EXCERPT, "u", k=2)
        assert "pending_wait" not in res.timings_ms and res.pending == 4
        assert res.items and "fox" in res.items[0].text
        assert any(w.startswith("sparse channel: 4 turn(s)") for w in res.warnings)
        question = eng.search("When did Bart see a fox?", "u", k=2)
        assert "pending_wait" not in question.timings_ms and "fox" in question.items[0].text
    finally:
        emb.ready.set()
    eng.flush()
    res = eng.search(EXCERPT, "u", k=2)
    assert res.pending == 0 and "sparse" in res.items[0].channels
    eng.close()


def test_an_agents_search_neither_starts_nor_waits_for_a_sparse_backfill(tmp_path: Path) -> None:
    """A decision point (a search with an action state) whose request reads as an excerpt uses the encodings the
    namespace has; it does not queue the encoding of every stored turn."""
    emb = _SparseHashing()
    with _engine(tmp_path, emb) as eng:
        res = eng.search(EXCERPT, "u", k=2, action_state=ActionState(current_subgoal="find the fox story"))
        assert res.items and res.pending == 0
        assert not any(c.startswith("Bart") for c in emb.sparse_calls)


def test_an_agents_search_makes_no_sparse_query_encodings_where_nothing_is_sparse_encoded(tmp_path: Path) -> None:
    """With no sparse encoding in the namespace the sparse channel could find nothing: an agent's search neither
    calls it nor encodes its route texts for it (a raw pass and the sparse head each), and ranks as before. Once a
    manual is written (encoded at write), the channel runs again and finds it."""
    emb = _SparseHashing()
    state = ActionState(current_subgoal="find the fox story")
    with _engine(tmp_path, emb) as eng:
        res = eng.search(EXCERPT, "u", k=4, action_state=state)
        assert emb.sparse_calls == [] and not any(k.startswith("channel.sparse") for k in res.timings_ms)
        assert "fox" in res.items[0].text and not res.degraded and not res.warnings
        manual = "Fox sightings by the river are logged with log_sighting(place, animal)."
        eng.add_turns([Turn(role="system", content=manual, timestamp=T0)], "u", wait=True)
        res = eng.search(EXCERPT, "u", k=5, action_state=state)
        assert "channel.sparse" in res.timings_ms and EXCERPT in emb.sparse_calls
        assert any("sparse" in i.channels for i in res.items if i.text == manual)


def test_a_manual_gets_its_sparse_encoding_when_it_is_written(tmp_path: Path) -> None:
    """``on_demand`` defers the encodings of conversation turns, not of system turns (an agent's manuals): those
    are what its long requests search, so they are encoded at write and an agent's first search finds them whole."""
    emb = _SparseHashing()
    manual = ("Refund policy. A refund over 500 dollars needs a supervisor's approval; call approve_refund(order_id) "
              "before issue_refund(order_id, amount).")
    with _engine(tmp_path, emb) as eng:
        eng.add_turns([Turn(role="system", content=manual, timestamp=T0)], "u", wait=True)
        assert manual in emb.sparse_calls
        assert not any(c.startswith("Bart") for c in emb.sparse_calls)  # the chat's turns still wait
