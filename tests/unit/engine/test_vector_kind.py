"""A store records how its turn vectors were made (``sentence-mixed`` or ``turn``), and item scores and the keyword
weight follow the vectors the store holds, not the configuration opening it: a store indexed before sentences were
mixed in (no record) scores exactly like one built with ``ingest.sentence_vectors: 0`` until a whole-store reindex
rebuilds its vectors, after which it scores like a store built with the default."""

from __future__ import annotations

import sqlite3
import warnings
from pathlib import Path

import pytest

from memory_ext import MemoryEngine, Turn
from memory_ext.errors import InvalidArgumentError
from memory_ext.rank.calibration import SENTENCE_MIXED, TURN_VECTORS
from memory_ext.store.sqlite.store import DB_FILE

CHAT = [
    ("Caroline", "I went to a LGBTQ support group yesterday and it was so powerful."),
    ("Melanie", "Wow, that's awesome! What happened there? Tell me everything."),
    ("Caroline", "The transgender stories were inspiring. I felt accepted, and I want to help others."),
    ("Melanie", "I painted a sunset over the lake last week. It calms me down after work."),
    ("Caroline", "You should show it at the art fair in June! People would love it."),
    ("Melanie", "Maybe. My kids loved the pottery class we took too."),
    ("Caroline", "I'm researching adoption agencies. I want to be a mom."),
    ("Melanie", "That's a big step, I'm proud of you."),
]
QUERIES = ["What did Melanie paint?", "Is Caroline thinking about adoption?", "What class did the kids like?"]
TURN_ONLY = {"ingest": {"sentence_vectors": 0}}


def _build(path: Path, config: dict[str, object] | None = None) -> None:
    with MemoryEngine.open(path, config=config) as engine:
        engine.add_turns([Turn(role="user" if i % 2 == 0 else "assistant", speaker=who, content=text,
                               timestamp=f"2023-05-08T13:{i:02d}:00Z") for i, (who, text) in enumerate(CHAT)],
                         namespace="u1")
        engine.flush()


def _scores(engine: MemoryEngine) -> list[list[tuple[str, float]]]:
    out = []
    for q in QUERIES:
        result = engine.search(q, "u1", k=5)
        assert not result.channel_errors
        out.append([(item.text, round(item.score, 4)) for item in result.items])
    return out


def _forget_the_record(path: Path) -> None:
    """Make the store what a store indexed before the record existed is: vectors, and no ``turn_vectors``."""
    conn = sqlite3.connect(path / DB_FILE)
    with conn:
        assert conn.execute("DELETE FROM meta WHERE key='turn_vectors'").rowcount == 1
    conn.close()


def test_a_new_store_records_the_kind_of_turn_vectors_it_was_built_with(tmp_path: Path) -> None:
    _build(tmp_path / "mixed")
    _build(tmp_path / "turn", TURN_ONLY)
    with MemoryEngine.open(tmp_path / "mixed") as mixed, MemoryEngine.open(tmp_path / "turn", config=TURN_ONLY) as turn:
        assert mixed.stats().turn_vectors == "sentence-mixed" and turn.stats().turn_vectors == "turn"
        assert mixed.config.recall.channel_weights["keyword"] == 0.5
        assert turn.config.recall.channel_weights["keyword"] == 1.0
    with MemoryEngine.open(tmp_path / "empty") as empty:
        assert empty.stats().turn_vectors is None  # nothing indexed yet: the configuration decides


def test_an_unrecorded_store_scores_like_one_built_with_turn_vectors_until_reindexed(tmp_path: Path) -> None:
    _build(tmp_path / "turn", TURN_ONLY)
    _build(tmp_path / "mixed")
    _build(tmp_path / "old", TURN_ONLY)
    _forget_the_record(tmp_path / "old")
    with MemoryEngine.open(tmp_path / "turn", config=TURN_ONLY) as engine:
        expected_turn = _scores(engine)
    with MemoryEngine.open(tmp_path / "mixed") as engine:
        expected_mixed = _scores(engine)
    assert expected_turn != expected_mixed  # the two kinds of vectors do score differently

    with pytest.warns(UserWarning, match="turn turn vectors and this configuration makes sentence-mixed"):
        old = MemoryEngine.open(tmp_path / "old")  # the default configuration: it would make mixed vectors
    with old:
        assert old.stats().turn_vectors == "turn"
        assert old.config.recall.channel_weights["keyword"] == 1.0
        assert old._read._calibration is TURN_VECTORS
        assert _scores(old) == expected_turn
        with pytest.raises(InvalidArgumentError, match="reindex with namespace=None"):
            old.reindex("u1")  # one namespace cannot change the whole store's kind
        old.reindex()
        assert old.stats().turn_vectors == "sentence-mixed"
        assert old.config.recall.channel_weights["keyword"] == 0.5
        assert old._read._calibration is SENTENCE_MIXED
        assert _scores(old) == expected_mixed
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the kinds agree now: no warning
        with MemoryEngine.open(tmp_path / "old") as again:
            assert _scores(again) == expected_mixed


def test_weights_the_user_sets_are_kept_whatever_the_store_holds(tmp_path: Path) -> None:
    _build(tmp_path / "turn", TURN_ONLY)
    chosen = {"recall": {"channel_weights": {"keyword": 0.7, "vector": 1.0}}}
    with pytest.warns(UserWarning, match="whole-store reindex"):
        engine = MemoryEngine.open(tmp_path / "turn", config=chosen)
    with engine:
        assert engine.config.recall.channel_weights == {"keyword": 0.7, "vector": 1.0}
        assert engine._read._calibration is TURN_VECTORS
