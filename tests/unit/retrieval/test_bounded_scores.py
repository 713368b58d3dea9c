"""``RetrievedItem.score`` is a relevance in [0, 1] a threshold can use (issue 13, observation 7).

On real data (a LoCoMo dev conversation, skipped when the shared data are absent): scores are bounded and never
increase with rank; a threshold of 0.5 keeps the gold evidence of the conversation's questions and removes most
results of off-topic questions. The unbounded fused value stays in ``raw_score`` and ``explain``.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memory_ext import MemoryEngine, Turn
from memory_ext.rank.calibration import bounded_scores, relevance


def locomo_path() -> Path | None:
    """The LoCoMo dev file of the shared data (next to the repository or its worktree), if present."""
    here = Path(__file__).resolve()
    env = os.environ.get("MEMEXT_SHARED_DATA")
    candidates = [Path(env)] if env else []
    candidates += [p / "shared" / "data" for p in here.parents[3:6]]
    return next((c / "locomo_dev" / "locomo_dev.json" for c in candidates
                 if (c / "locomo_dev" / "locomo_dev.json").is_file()), None)


OFF_TOPIC = [
    "What is the boiling point of mercury?", "How do I reset my router password?", "Who won the 1998 World Cup?",
    "What is the capital of Peru?", "How many moons does Jupiter have?", "Explain the rules of cricket.",
    "What's a good recipe for sourdough starter?", "How do I file taxes in Germany?",
    "Which programming language is fastest for matrix multiplication?", "What is the airspeed of a swallow?",
]
THRESHOLD = 0.5


@pytest.fixture(scope="module")
def locomo() -> Iterator[tuple[MemoryEngine, Any]]:
    path = locomo_path()
    if path is None:
        pytest.skip("the shared LoCoMo dev data are not here")
    from memory_ext.bench.datasets import load_locomo

    conversation = min(load_locomo(path), key=lambda c: len(c.turns))
    import tempfile

    with tempfile.TemporaryDirectory() as tmp, MemoryEngine.open(Path(tmp) / "s", embedder="hashing") as engine:
        engine.add_turns([Turn(role=t.role, content=t.text, speaker=t.speaker, timestamp=t.timestamp,
                               session_id=t.session_id, external_id=t.external_id) for t in conversation.turns],
                         "conv")
        yield engine, conversation


def test_calibration_is_bounded_and_monotone() -> None:
    assert relevance(-math.inf) == 0.0 and relevance(1e6) == 1.0 and relevance(10.0) == 0.5
    scores = bounded_scores([30.0, 3.0, 12.0, -50.0, 11.0])
    assert all(0.0 <= s <= 1.0 for s in scores) and scores == sorted(scores, reverse=True)
    assert scores[1] == scores[2] == relevance(12.0)  # raised to the stronger item below it


def test_scores_are_relevances_and_raw_scores_the_fused_values(locomo: tuple[MemoryEngine, Any]) -> None:
    engine, conversation = locomo
    for question in conversation.questions[:30]:
        result = engine.search(question.text, "conv", k=10, now=conversation.now, explain=True)
        scores = [i.score for i in result.items]
        assert all(0.0 <= s <= 1.0 for s in scores)
        assert scores == sorted(scores, reverse=True)
        for item in result.items:
            assert item.raw_score is not None and item.explanation is not None
            assert item.explanation["score"]["relevance"] == item.score
            assert item.explanation["score"]["raw"] == item.raw_score


def test_a_threshold_keeps_gold_evidence_and_removes_off_topic_results(locomo: tuple[MemoryEngine, Any]) -> None:
    engine, conversation = locomo
    gold_scores = []
    for question in conversation.questions:
        result = engine.search(question.text, "conv", k=10, now=conversation.now)
        gold_scores += [i.score for i in result.items[:3] if set(i.external_ids) & set(question.gold)]
    off_scores = [i.score for q in OFF_TOPIC for i in engine.search(q, "conv", k=10, now=conversation.now).items]
    kept = sum(s >= THRESHOLD for s in gold_scores) / len(gold_scores)
    removed = sum(s < THRESHOLD for s in off_scores) / len(off_scores)
    assert len(gold_scores) >= 50
    assert kept >= 0.9, f"gold evidence in the top 3 kept by the threshold: {kept:.3f}"
    assert removed >= 0.7, f"off-topic results removed by the threshold: {removed:.3f}"
    # comparable across queries: the questions' gold evidence scores well above off-topic results
    assert sorted(gold_scores)[len(gold_scores) // 2] > sorted(off_scores)[len(off_scores) // 2] + 0.2


def test_an_exact_match_in_a_small_store_is_strong(tmp_path: Path) -> None:
    """z-scores are relative to the other candidates; the query-coverage term keeps an exact match strong when
    a store holds only a few turns."""
    with MemoryEngine.open(tmp_path / "s", embedder="hashing") as engine:
        engine.add_turns([{"role": "user", "content": "My sister Lena lives in Porto."},
                          {"role": "user", "content": "I adopted a beagle called Toby."}], "ana")
        items = engine.search("where does Lena live?", "ana", k=2).items
        assert items[0].text == "My sister Lena lives in Porto." and items[0].score >= THRESHOLD
        assert items[1].score < THRESHOLD
