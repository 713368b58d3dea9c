"""LangChain face of metadata and scores (issue 13, observations 6 and 7): ``Document.metadata`` carries the
turn's metadata and the conventional ``id``, ``score`` and ``source``; ``search_kwargs={"filter": ...}``
filters on it before ranking; ``search_type="similarity_score_threshold"`` works on bounded scores."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from langchain_memory_ext import MemoryRetriever, create_memory_tools
from memory_ext import MemoryEngine, Turn
from memory_ext.errors import InvalidQueryError

START = datetime(2026, 4, 1, 9, 0, tzinfo=UTC)
NOTES = [
    ("I'm allergic to shellfish.", {"topic": "health", "priority": 5, "source": "onboarding-form"}),
    ("Book the direct TAP flight to Lisbon on April 24.", {"topic": "travel", "priority": 4}),
    ("The morning train to Porto leaves at 8:39.", {"topic": "travel", "priority": 1}),
    ("Reserve Cantinho do Avillez in Porto for May 1 at 8 pm.", {"topic": "food", "priority": 2}),
]


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[MemoryEngine]:
    with MemoryEngine.open(tmp_path / "s", embedder="hashing") as eng:
        eng.add_turns([Turn(role="user", content=text, metadata=meta, timestamp=START + timedelta(hours=i),
                            session_id="trip") for i, (text, meta) in enumerate(NOTES)], "maya")
        yield eng


def test_documents_carry_the_turns_metadata_and_the_conventional_keys(engine: MemoryEngine) -> None:
    doc = MemoryRetriever(engine=engine, user_id="maya", k=2).invoke("What am I allergic to?")[0]
    assert doc.page_content == "I'm allergic to shellfish."
    meta = doc.metadata
    assert meta["topic"] == "health" and meta["priority"] == 5
    assert meta["id"] == doc.id and 0.0 <= meta["score"] <= 1.0 and isinstance(meta["raw_score"], float)
    assert meta["source"] == "onboarding-form"  # the turn's own source wins
    other = MemoryRetriever(engine=engine, user_id="maya", k=1).invoke("train to Porto")[0]
    assert other.metadata["source"].startswith("memory://trip/")
    assert other.metadata["date"] == other.metadata["timestamp"] == (START + timedelta(hours=2)).isoformat()


def test_search_kwargs_filter_is_a_metadata_filter(engine: MemoryEngine) -> None:
    travel = MemoryRetriever(engine=engine, user_id="maya", k=4, search_kwargs={"filter": {"topic": "travel"}})
    assert {d.page_content for d in travel.invoke("Porto")} == {
        "Book the direct TAP flight to Lisbon on April 24.", "The morning train to Porto leaves at 8:39."}
    # a per-call filter overrides search_kwargs; operators and $or work
    docs = travel.invoke("Porto", filter={"$or": [{"topic": "food"}, {"priority": {"$gte": 5}}]})
    assert {d.metadata["topic"] for d in docs} == {"food", "health"}
    # ANDed with a metadata filter given as engine filters
    both = MemoryRetriever(engine=engine, user_id="maya", k=4, filters={"metadata": {"priority": {"$lt": 3}}},
                           search_kwargs={"filter": {"topic": "travel"}})
    assert [d.page_content for d in both.invoke("Porto")] == ["The morning train to Porto leaves at 8:39."]
    assert MemoryRetriever(engine=engine, user_id="maya", search_kwargs={"filter": {"topic": "sports"}}) \
        .invoke("Porto") == []


def test_bad_search_arguments_are_typed_errors(engine: MemoryEngine) -> None:
    with pytest.raises(InvalidQueryError, match="score_threshold"):
        MemoryRetriever(engine=engine, user_id="maya", search_type="similarity_score_threshold")
    with pytest.raises(InvalidQueryError, match=r"search_kwargs\.fetch_k"):
        MemoryRetriever(engine=engine, user_id="maya", search_kwargs={"fetch_k": 20})
    retriever = MemoryRetriever(engine=engine, user_id="maya")
    with pytest.raises(InvalidQueryError, match=r"filters\.metadata\.priority"):
        retriever.invoke("Porto", filter={"priority": {"$regex": "1"}})


def test_the_search_tool_returns_documents_with_metadata(engine: MemoryEngine) -> None:
    search = create_memory_tools(engine, user_id="maya")[0]
    msg = search.invoke({"type": "tool_call", "id": "c1", "name": search.name,  # type: ignore[attr-defined]
                         "args": {"query": "What am I allergic to?"}})
    assert msg.artifact[0].metadata["topic"] == "health" and "score" in msg.artifact[0].metadata


def _locomo() -> Path | None:
    here = Path(__file__).resolve()
    env = os.environ.get("MEMEXT_SHARED_DATA")
    for base in ([Path(env)] if env else []) + [p / "shared" / "data" for p in here.parents[3:6]]:
        if (base / "locomo_dev" / "locomo_dev.json").is_file():
            return base / "locomo_dev" / "locomo_dev.json"
    return None


@pytest.fixture(scope="module")
def locomo_engine() -> Iterator[tuple[MemoryEngine, Any]]:
    path = _locomo()
    if path is None:
        pytest.skip("the shared LoCoMo dev data are not here")
    from memory_ext.bench.datasets import load_locomo

    conversation = min(load_locomo(path), key=lambda c: len(c.turns))
    with tempfile.TemporaryDirectory() as tmp, MemoryEngine.open(Path(tmp) / "s", embedder="hashing") as eng:
        eng.add_turns([Turn(role=t.role, content=t.text, speaker=t.speaker, timestamp=t.timestamp,
                            session_id=t.session_id, external_id=t.external_id) for t in conversation.turns], "conv")
        yield eng, conversation


def test_score_threshold_keeps_gold_evidence_and_drops_off_topic_results(
        locomo_engine: tuple[MemoryEngine, Any]) -> None:
    engine, conversation = locomo_engine
    strict = MemoryRetriever(engine=engine, user_id="conv", search_type="similarity_score_threshold",
                             search_kwargs={"score_threshold": 0.5, "k": 10})
    plain = MemoryRetriever(engine=engine, user_id="conv", k=10)
    kept = found = 0
    for question in conversation.questions:
        top3 = plain.invoke(question.text)[:3]
        gold = {d.id for d in top3 if set(d.metadata["external_ids"]) & set(question.gold)}
        found += len(gold)
        kept += len(gold & {d.id for d in strict.invoke(question.text)})
    assert found >= 50 and kept / found >= 0.9
    off_topic = ["What is the boiling point of mercury?", "How do I reset my router password?",
                 "What is the capital of Peru?", "How many moons does Jupiter have?",
                 "What's a good recipe for sourdough starter?", "How do I file taxes in Germany?"]
    before = sum(len(plain.invoke(q)) for q in off_topic)
    after = sum(len(strict.invoke(q)) for q in off_topic)
    assert after <= 0.3 * before
