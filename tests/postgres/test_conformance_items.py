"""Conformance, key/value items (the LangGraph ``MemoryStore``'s): the same operations and the same observable
results on SQLite and on PostgreSQL — puts archived as turns, updates as versions, filters in SQL on the value
(one filter language), vectors, TTL swept by the writer, forget reaching the items, two engines of one store."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

pytest.importorskip("langgraph.store.base")

from langchain_memory_ext import MemoryStore
from memory_ext import MemoryEngine, Namespace
from memory_ext.errors import InvalidQueryError
from tests.conftest import StoreTarget

pytestmark = pytest.mark.postgres

START = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
NS = ("users", "ana", "memories")
ITEMS = {
    ("users", "ana", "memories"): {
        "m1": {"text": "Ana's sister Lena lives in Porto", "year": 2024, "tags": ["family"], "meta": {"src": "chat"},
               "城市": "波尔图"},
        "m2": {"text": "Ana adopted a beagle puppy called Toby", "year": 2026, "tags": ["pets"],
               "meta": {"src": "chat"}},
        "m3": {"text": "Ana practises the cello every evening", "year": "2025", "meta": {"src": "form"}},
    },
    ("users", "ben", "memories"): {"b1": {"text": "Ben is training for the Berlin marathon", "year": 2026}},
    ("docs",): {"d1": {"text": "Release notes", "draft": None}},
}


def _embed(texts: list[str]) -> list[list[float]]:
    return [[float(t.count(c)) for c in "aeiounrst"] for t in texts]


class Clock:
    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture
def engine(store_target: StoreTarget) -> Iterator[MemoryEngine]:
    with store_target.open() as eng:
        yield eng


def _fill(store: MemoryStore) -> None:
    for ns, items in ITEMS.items():
        for key, value in items.items():
            store.put(ns, key, value)


def _keys(items: list[Any]) -> list[str]:
    return [i.key for i in items]


def test_put_get_update_delete(engine: MemoryEngine) -> None:
    store = MemoryStore(engine=engine, user_id="ana", clock=Clock())
    _fill(store)
    got = store.get(NS, "m1")
    assert got is not None and got.value == ITEMS[NS]["m1"] and got.created_at == START
    store.put(NS, "m1", {"text": "Ana's sister Lena moved to Lisbon", "year": 2025})
    after = store.get(NS, "m1")
    assert after is not None and after.value["year"] == 2025 and after.created_at == START
    assert [v.operation for v in engine.history(Namespace("ana", session_id=".".join(NS)), "m1")] == ["add", "update"]
    store.delete(NS, "m2")
    assert store.get(NS, "m2") is None
    assert all("Toby" not in t.content for t in engine.get_turns("ana"))
    assert _keys(store.search(())) == ["m1", "m3", "b1", "d1"]  # namespace order, then insertion order
    assert store.list_namespaces(max_depth=2) == [("docs",), ("users", "ana"), ("users", "ben")]
    assert store.list_namespaces(suffix=("memories",)) == [("users", "ana", "memories"), ("users", "ben", "memories")]
    assert asyncio.run(store.aget(NS, "m3")) is not None


@pytest.mark.parametrize(("flt", "expected"), [
    ({"year": {"$gte": 2025}}, ["m2", "b1"]),          # "2025" (a string) does not compare with a number
    ({"year": {"$gte": "2025"}}, ["m3"]),
    ({"meta": {"src": "chat"}}, ["m1", "m2"]),
    ({"tags": ["family"]}, ["m1"]),
    ({"year": {"$ne": 2024}}, ["m2", "m3", "b1", "d1"]),  # a key never set matches $ne
    ({"year": {"$nin": [2024, 2026]}}, ["m3", "d1"]),
    ({"draft": None}, ["m1", "m2", "m3", "b1", "d1"]),  # None equals a key never set (as in InMemoryStore)
    ({"draft": {"$ne": None}}, []),
    ({"missing": {"$lt": 1}}, []),                       # a key never set matches no comparison
    ({"城市": "波尔图"}, ["m1"]),
    ({"$or": [{"year": 2024}, {"year": "2025"}]}, ["m1", "m3"]),
])
def test_filters_are_one_language_on_both_backends(engine: MemoryEngine, flt: dict[str, Any],
                                                   expected: list[str]) -> None:
    store = MemoryStore(engine=engine, user_id="ana")
    _fill(store)
    assert _keys(store.search((), filter=flt)) == expected
    assert _keys(store.search((), filter=flt, limit=1, offset=1)) == expected[1:2]


def test_bad_filters_are_typed_errors(engine: MemoryEngine) -> None:
    store = MemoryStore(engine=engine, user_id="ana")
    _fill(store)
    with pytest.raises(InvalidQueryError, match=r"filter\.year"):
        store.search((), filter={"year": {"$near": 1}})


def test_queries_rank_by_retrieval_and_by_client_side_vectors(engine: MemoryEngine) -> None:
    plain = MemoryStore(engine=engine, user_id="ana")
    _fill(plain)
    assert _keys(plain.search(("users",), query="where does Lena live in Porto", limit=1)) == ["m1"]
    indexed = MemoryStore(engine=engine, user_id="vec", index={"dims": 9, "embed": _embed, "fields": ["text"]})
    _fill(indexed)
    hits = indexed.search(("users",), query="Ana's sister Lena lives in Porto", limit=2)
    assert hits[0].key == "m1" and hits[0].score == pytest.approx(1.0) and hits[1].score is not None


def test_ttl_is_swept_by_the_writer(engine: MemoryEngine) -> None:
    clock = Clock()
    store = MemoryStore(engine=engine, user_id="ana", clock=clock, ttl={"default_ttl": 30})
    store.put(NS, "tmp", {"text": "call the vet about Toby"})
    clock.now += timedelta(minutes=20)
    assert store.get(NS, "tmp") is not None  # the read refreshes the TTL
    clock.now += timedelta(minutes=40)
    assert store.get(NS, "tmp") is None and store.list_namespaces() == []
    assert engine.sweep_items(now=clock.now) == 1  # the whole store's sweep, as the writer's timer runs it
    assert engine.get_turns("ana") == [] and engine.search_items("ana") == []


def test_forget_removes_the_items(engine: MemoryEngine) -> None:
    store = MemoryStore(engine=engine, user_id="ana")
    _fill(store)
    store.put(("plain",), "p", {"text": "never archived"}, index=False)
    engine.forget(Namespace("ana", session_id=".".join(NS)))
    assert store.get(NS, "m1") is None and store.get(("docs",), "d1") is not None
    hit = engine.search("Berlin marathon", "ana", k=1).items[0]
    engine.forget("ana", record_ids=[hit.id])
    assert store.get(("users", "ben", "memories"), "b1") is None and store.get(("docs",), "d1") is not None
    engine.forget("ana")
    assert store.search(()) == [] and store.list_namespaces() == []
    conn = engine._store.reader()
    assert [conn.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0]
            for t in ("store_items", "store_vectors", "store_namespaces")] == [0, 0, 0]


def test_two_engines_of_one_store_share_the_items(store_target: StoreTarget) -> None:
    if store_target.backend == "sqlite":
        pytest.skip("one writer per SQLite directory: sharing between hosts goes through memext serve")
    with store_target.open() as a, store_target.open() as b:
        MemoryStore(engine=a, user_id="ana").put(NS, "m1", {"text": "Lena lives in Porto"})
        other = MemoryStore(engine=b, user_id="ana")
        got = other.get(NS, "m1")
        assert got is not None and got.value == {"text": "Lena lives in Porto"}
        other.delete(NS, "m1")
        assert MemoryStore(engine=a, user_id="ana").get(NS, "m1") is None
