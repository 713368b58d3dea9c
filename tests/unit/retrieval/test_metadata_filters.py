"""``Turn.metadata`` comes back on every item and can be filtered on (issue 13, observation 6).

``filters={"metadata": ...}`` speaks LangGraph's store filter language; each filter is run side by side on the
same items in LangGraph's reference ``InMemoryStore`` and in the engine, and must select the same memories.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from langgraph.store.memory import InMemoryStore

from memory_ext import MemoryEngine, Turn
from memory_ext.errors import InvalidQueryError
from memory_ext.store.filters import RecordFilter, filter_sql

START = datetime(2026, 4, 1, 9, 0, tzinfo=UTC)

MEMORIES: list[tuple[str, dict[str, Any]]] = [
    ("I'm allergic to shellfish.", {"topic": "health", "priority": 5, "source": "onboarding"}),
    ("My sister Clara lives in Lyon.", {"topic": "family", "priority": 3, "place": {"city": "Lyon"}}),
    ("Book the direct TAP flight to Lisbon on April 24.", {"topic": "travel", "priority": 4,
                                                           "place": {"city": "Lisbon"}, "tags": ["flight", "tap"]}),
    ("Casa do Chiado, four nights from April 25.", {"topic": "travel", "priority": 2, "place": {"city": "Lisbon"}}),
    ("The morning train to Porto leaves at 8:39.", {"topic": "travel", "priority": 1, "tags": ["train"]}),
    ("Reserve Cantinho do Avillez for May 1 at 8 pm.", {"topic": "food", "priority": 2, "confirmed": True}),
    ("Bring a type F plug adapter.", {"topic": "packing", "priority": 1, "confirmed": False}),
    ("Keep some cash for the trams and small cafes.", {"topic": "money", "priority": 2, "due": "2026-04-20"}),
    ("The dentist moved my check-up to May 12.", {"topic": "health", "priority": 3, "due": "2026-05-12"}),
    ("Clara's birthday is on June 3.", {"topic": "family", "priority": 4, "due": "2026-06-03"}),
]

# filters whose meaning LangGraph's InMemoryStore defines on these items (every item has a priority)
SAME_AS_REFERENCE: list[dict[str, Any]] = [
    {"topic": "travel"},
    {"topic": {"$eq": "health"}},
    {"topic": {"$ne": "travel"}},
    {"priority": {"$gt": 3}},
    {"priority": {"$gte": 3}},
    {"priority": {"$lt": 2}},
    {"priority": {"$lte": 2}},
    {"priority": {"$gte": 2, "$lt": 4}},
    {"topic": "travel", "priority": {"$gte": 2}},
    {"priority": 2.0},
    {"place": {"city": "Lisbon"}},
    {"place": {"city": {"$ne": "Lisbon"}}},
    {"tags": ["flight", "tap"]},
    {"confirmed": True},
    {"confirmed": False},
    {"source": "onboarding"},
    {"never_set": "x"},
    {"never_set": {"$eq": 1}},
    {"never_set": {"$ne": 1}},
    {"never_set": None},
    {"topic": "nothing-like-this"},
]


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Any:
    with MemoryEngine.open(tmp_path_factory.mktemp("meta") / "s", embedder="hashing") as eng:
        eng.add_turns([Turn(role="user", content=text, metadata=meta, timestamp=START + timedelta(hours=i),
                            session_id="trip") for i, (text, meta) in enumerate(MEMORIES)], "maya")
        yield eng


@pytest.fixture(scope="module")
def reference() -> InMemoryStore:
    store = InMemoryStore()
    for i, (text, meta) in enumerate(MEMORIES):
        store.put(("maya",), f"m{i}", {"text": text, **meta})
    return store


def engine_texts(engine: MemoryEngine, metadata_filter: Any) -> set[str]:
    result = engine.search("what do I need to remember for the trip", "maya", k=50,
                           filters={"metadata": metadata_filter})
    return {item.text for item in result.items}


def reference_texts(store: InMemoryStore, metadata_filter: Any) -> set[str]:
    return {item.value["text"] for item in store.search(("maya",), filter=metadata_filter, limit=100)}


def test_every_item_carries_its_turns_metadata(engine: MemoryEngine) -> None:
    result = engine.search("Where does Clara live?", "maya", k=3)
    assert result.items[0].text == "My sister Clara lives in Lyon."
    assert result.items[0].metadata == {"topic": "family", "priority": 3, "place": {"city": "Lyon"}}
    assert all(item.metadata == dict(MEMORIES)[item.text] for item in result.items)


@pytest.mark.parametrize("metadata_filter", SAME_AS_REFERENCE, ids=repr)
def test_filters_select_what_langgraphs_in_memory_store_selects(engine: MemoryEngine, reference: InMemoryStore,
                                                                metadata_filter: dict[str, Any]) -> None:
    assert engine_texts(engine, metadata_filter) == reference_texts(reference, metadata_filter)


def test_a_key_never_set_matches_nothing(engine: MemoryEngine, reference: InMemoryStore) -> None:
    assert engine_texts(engine, {"colour": "red"}) == reference_texts(reference, {"colour": "red"}) == set()


def test_comparison_on_a_key_some_items_lack(engine: MemoryEngine, reference: InMemoryStore) -> None:
    # InMemoryStore raises here (float(None)); the engine follows PostgresStore's JSONB semantics — the items
    # without the key do not match — and compares ISO dates as strings
    with pytest.raises(TypeError):
        reference_texts(reference, {"due": {"$gte": "2026-05-01"}})
    assert engine_texts(engine, {"due": {"$gte": "2026-05-01"}}) == {
        "The dentist moved my check-up to May 12.", "Clara's birthday is on June 3."}
    assert engine_texts(engine, {"due": {"$lt": 5}}) == set()  # a number never matches a string


def test_in_nin_and_or_combine(engine: MemoryEngine) -> None:
    assert engine_texts(engine, {"topic": {"$in": ["food", "money"]}}) == {
        "Reserve Cantinho do Avillez for May 1 at 8 pm.", "Keep some cash for the trams and small cafes."}
    assert len(engine_texts(engine, {"topic": {"$nin": ["travel", "health", "family"]}})) == 3
    either = {"$or": [{"topic": "health"}, {"priority": {"$gte": 5}}]}
    assert engine_texts(engine, either) == {"I'm allergic to shellfish.", "The dentist moved my check-up to May 12."}
    both = {"$and": [{"topic": "travel"}, {"$or": [{"priority": 1}, {"priority": 4}]}]}
    assert engine_texts(engine, both) == {"Book the direct TAP flight to Lisbon on April 24.",
                                          "The morning train to Porto leaves at 8:39."}


@pytest.mark.parametrize(("metadata_filter", "field"), [
    ({"priority": {"$near": 2}}, "filters.metadata.priority"),
    ({"priority": {"$gt": [1, 2]}}, "filters.metadata.priority.$gt"),
    ({"topic": {"$in": "travel"}}, "filters.metadata.topic.$in"),
    ({"$not": {"topic": "travel"}}, "filters.metadata.$not"),
    ({"$or": []}, "filters.metadata.$or"),
    ("travel", "filters.metadata"),
])
def test_bad_filters_are_typed_errors_naming_the_field(engine: MemoryEngine, metadata_filter: Any,
                                                       field: str) -> None:
    with pytest.raises(InvalidQueryError) as info:
        engine.search("trip", "maya", filters={"metadata": metadata_filter})
    assert info.value.field == field


def test_the_filter_is_sql_on_the_source_turns_metadata() -> None:
    where, args = filter_sql(RecordFilter.parse({"metadata": {"topic": "travel"}}, session_id=None))
    assert "json_extract" in where and "FROM turns" in where and "travel" in args


def test_the_filter_applies_before_ranking(tmp_path: Path) -> None:
    """A memory passing a selective filter is found even when every channel's unfiltered candidates (5 here)
    are other memories: the channels rank inside the filtered set."""
    config = {"recall": {"candidates_per_channel": 5}}
    with MemoryEngine.open(tmp_path / "s", embedder="hashing", config=config) as eng:
        flights = [Turn(role="user", timestamp=START + timedelta(hours=i),
                        content=f"Flight option {i}: Lisbon to Porto on April {i + 1}, {90 + i} euros with a bag.")
                   for i in range(40)]
        eng.add_turns([*flights, Turn(role="user", content="Renew the travel insurance before the trip.",
                                      metadata={"topic": "admin"}, timestamp=START + timedelta(days=3))], "maya")
        result = eng.search("Lisbon to Porto flight euros", "maya", k=3, filters={"metadata": {"topic": "admin"}})
        assert [i.text for i in result.items] == ["Renew the travel insurance before the trip."]
