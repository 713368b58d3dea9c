"""LlamaIndex face of metadata and scores (issue 13, observations 6 and 7): node metadata carries the turn's
metadata and ``date`` / ``timestamp`` (``FixedRecencyPostprocessor`` works), ``MetadataFilters`` translate to
the engine's metadata filter, ``SimilarityPostprocessor`` works on bounded scores."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from llama_index.core.postprocessor import FixedRecencyPostprocessor, SimilarityPostprocessor
from llama_index.core.schema import MetadataMode, QueryBundle
from llama_index.core.vector_stores.types import (
    FilterCondition,
    FilterOperator,
    MetadataFilter,
    MetadataFilters,
)

from llamaindex_memory_ext import MemoryRetriever
from memory_ext import MemoryEngine, Turn
from memory_ext.errors import InvalidQueryError

START = datetime(2026, 4, 1, 9, 0, tzinfo=UTC)
NOTES = [
    ("The Porto hotel check-in is at 3 pm.", {"topic": "travel", "priority": 2}),
    ("The Porto hotel moved check-in to 2 pm.", {"topic": "travel", "priority": 4}),
    ("Dinner in Porto at Cantinho do Avillez on May 1.", {"topic": "food", "priority": 3}),
    ("Pack a type F adapter for Porto.", {"topic": "packing", "priority": 1}),
]


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[MemoryEngine]:
    with MemoryEngine.open(tmp_path / "s", embedder="hashing") as eng:
        eng.add_turns([Turn(role="user", content=text, metadata=meta, timestamp=START + timedelta(days=i),
                            session_id=f"s{i}") for i, (text, meta) in enumerate(NOTES)], "maya")
        yield eng


def texts(nodes: Any) -> set[str]:
    return {n.node.get_content() for n in nodes}


def test_node_metadata_has_the_turns_metadata_and_a_date(engine: MemoryEngine) -> None:
    node = MemoryRetriever(engine=engine, user_id="maya").retrieve("adapter")[0]
    assert node.node.get_content() == "Pack a type F adapter for Porto."
    meta = node.node.metadata
    assert meta["topic"] == "packing" and meta["priority"] == 1 and meta["memory_id"] == node.node.node_id
    assert meta["date"] == meta["timestamp"] == (START + timedelta(days=3)).isoformat()
    assert 0.0 <= node.score <= 1.0
    shown = node.node.get_content(metadata_mode=MetadataMode.LLM)
    assert "topic: packing" in shown and "raw_score" not in shown and "memory_id" not in shown


def test_fixed_recency_postprocessor_keeps_the_latest(engine: MemoryEngine) -> None:
    nodes = MemoryRetriever(engine=engine, user_id="maya").retrieve("Porto hotel check-in")
    dates = [datetime.fromisoformat(n.node.metadata["date"]) for n in nodes]  # what it sorts on: ISO 8601
    pytest.importorskip("pandas", reason="FixedRecencyPostprocessor parses dates with pandas")
    latest = FixedRecencyPostprocessor(top_k=1).postprocess_nodes(nodes, query_bundle=QueryBundle("check-in"))
    assert datetime.fromisoformat(latest[0].node.metadata["date"]) == max(dates)


def test_metadata_filters_translate(engine: MemoryEngine) -> None:
    def retrieve(filters: MetadataFilters) -> set[str]:
        return texts(MemoryRetriever(engine=engine, user_id="maya", filters=filters).retrieve("Porto"))

    travel = MetadataFilters(filters=[MetadataFilter(key="topic", value="travel")])
    assert retrieve(travel) == {"The Porto hotel check-in is at 3 pm.", "The Porto hotel moved check-in to 2 pm."}
    both = MetadataFilters(filters=[MetadataFilter(key="topic", value="travel"),
                                    MetadataFilter(key="priority", value=3, operator=FilterOperator.GTE)])
    assert retrieve(both) == {"The Porto hotel moved check-in to 2 pm."}
    either = MetadataFilters(filters=[MetadataFilter(key="topic", value="food"),
                                      MetadataFilter(key="priority", value=1, operator=FilterOperator.LTE)],
                             condition=FilterCondition.OR)
    assert retrieve(either) == {"Dinner in Porto at Cantinho do Avillez on May 1.", "Pack a type F adapter for Porto."}
    nested = MetadataFilters(filters=[
        MetadataFilter(key="priority", value=[1, 2, 3], operator=FilterOperator.IN),
        MetadataFilters(filters=[MetadataFilter(key="topic", value="travel", operator=FilterOperator.NE),
                                 MetadataFilter(key="priority", value=2, operator=FilterOperator.LT)],
                        condition=FilterCondition.OR)])
    assert retrieve(nested) == {"Dinner in Porto at Cantinho do Avillez on May 1.", "Pack a type F adapter for Porto."}
    none = MetadataFilters(filters=[MetadataFilter(key="topic", value=["sports"], operator=FilterOperator.IN)])
    assert retrieve(none) == set()


def test_unsupported_filters_are_typed_errors(engine: MemoryEngine) -> None:
    with pytest.raises(InvalidQueryError) as info:
        MemoryRetriever(engine=engine, user_id="maya", filters=MetadataFilters(filters=[
            MetadataFilter(key="topic", value="trav", operator=FilterOperator.TEXT_MATCH)]))
    assert info.value.field == "filters.filters[0].operator" and "supported operators" in str(info.value)
    with pytest.raises(InvalidQueryError) as info:
        MemoryRetriever(engine=engine, user_id="maya", filters=MetadataFilters(
            filters=[MetadataFilter(key="topic", value="travel")], condition=FilterCondition.NOT))
    assert info.value.field == "filters.condition" and "'and' or 'or'" in str(info.value)


def _locomo() -> Path | None:
    here = Path(__file__).resolve()
    env = os.environ.get("MEMEXT_SHARED_DATA")
    for base in ([Path(env)] if env else []) + [p / "shared" / "data" for p in here.parents[3:6]]:
        if (base / "locomo_dev" / "locomo_dev.json").is_file():
            return base / "locomo_dev" / "locomo_dev.json"
    return None


def test_similarity_postprocessor_keeps_gold_evidence_and_drops_off_topic_results() -> None:
    path = _locomo()
    if path is None:
        pytest.skip("the shared LoCoMo dev data are not here")
    from memory_ext.bench.datasets import load_locomo

    conversation = min(load_locomo(path), key=lambda c: len(c.turns))
    cutoff = SimilarityPostprocessor(similarity_cutoff=0.5)
    with tempfile.TemporaryDirectory() as tmp, MemoryEngine.open(Path(tmp) / "s", embedder="hashing") as engine:
        engine.add_turns([Turn(role=t.role, content=t.text, speaker=t.speaker, timestamp=t.timestamp,
                               session_id=t.session_id, external_id=t.external_id) for t in conversation.turns],
                         "conv")
        retriever = MemoryRetriever(engine=engine, user_id="conv", similarity_top_k=10)
        kept = found = 0
        for question in conversation.questions:
            nodes = retriever.retrieve(question.text)
            gold = {n.node.node_id for n in nodes[:3] if set(n.node.metadata["external_ids"]) & set(question.gold)}
            found += len(gold)
            kept += len(gold & {n.node.node_id for n in cutoff.postprocess_nodes(nodes)})
        assert found >= 50 and kept / found >= 0.9
        off_topic = ["What is the boiling point of mercury?", "How do I reset my router password?",
                     "What is the capital of Peru?", "How many moons does Jupiter have?"]
        before = [retriever.retrieve(q) for q in off_topic]
        assert sum(len(cutoff.postprocess_nodes(n)) for n in before) <= 0.3 * sum(len(n) for n in before)
