"""MemoryStore against LangGraph's InMemoryStore: the same scenarios, the same observable results.

Each scenario runs on a fresh store of each kind and returns what a LangGraph user observes (values, keys,
namespaces, None for missing items, errors). Orders are compared where LangGraph defines them (one namespace,
list_namespaces) and as sets where the reference's order is an implementation detail (across namespaces).
"""

from __future__ import annotations

import asyncio
import re
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langgraph.store.base")

from langgraph.store.base import BaseStore, GetOp, ListNamespacesOp, PutOp, SearchOp
from langgraph.store.memory import InMemoryStore

from langchain_memory_ext import MemoryStore
from memory_ext import MemoryEngine

MEMORIES = {
    ("users", "ana", "memories"): {
        "m1": {"text": "Ana's sister Lena lives in Porto", "year": 2024, "tags": ["family"],
               "meta": {"src": "chat"}},
        "m2": {"text": "Ana adopted a beagle puppy called Toby", "year": 2026, "tags": ["pets"],
               "meta": {"src": "chat"}},
        "m3": {"text": "Ana practises the cello every evening", "year": 2025, "tags": ["music"],
               "meta": {"src": "form"}},
    },
    ("users", "ben", "memories"): {
        "m1": {"text": "Ben is training for the Berlin marathon", "year": 2026, "tags": ["sport"],
               "meta": {"src": "chat"}},
    },
    ("users", "ben", "prefs"): {"p1": {"text": "Ben does not eat spicy food", "year": 2025, "tags": [], "meta": {}}},
    ("docs", "v1"): {"d1": {"text": "Release notes", "year": 2026, "tags": [], "meta": {}}},
}


def _embed(texts: list[str]) -> list[list[float]]:
    """Deterministic bag-of-words hashing, so InMemoryStore can answer queries offline."""
    out = []
    for text in texts:
        vec = [0.0] * 128
        for word in re.findall(r"[a-z]+", text.lower()):
            vec[zlib.crc32(word.encode()) % 128] += 1.0
        out.append(vec)
    return out


@pytest.fixture(params=["memory", "memory-ext"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[BaseStore]:
    if request.param == "memory":
        yield InMemoryStore(index={"dims": 128, "embed": _embed, "fields": ["text"]})
        return
    engine = MemoryEngine.open(tmp_path / "s", embedder="hashing")
    st = MemoryStore(engine=engine)
    try:
        yield st
    finally:
        st.close()
        engine.close()


def _fill(store: BaseStore) -> None:
    for ns, items in MEMORIES.items():
        for key, value in items.items():
            store.put(ns, key, value)


def _keys(items: list[Any]) -> list[tuple[tuple[str, ...], str]]:
    return [(i.namespace, i.key) for i in items]


# -- scenarios: each returns the observable outcome -------------------------------------------------------------
def get_put_update_delete(store: BaseStore) -> Any:
    _fill(store)
    ns = ("users", "ana", "memories")
    got = store.get(ns, "m1")
    store.put(ns, "m1", {"text": "Lena moved to Lisbon", "year": 2026})
    updated = store.get(ns, "m1")
    store.delete(ns, "m2")
    store.delete(ns, "never-existed")
    return [(got.namespace, got.key, got.value), updated.value, store.get(ns, "m2"), store.get(("nope",), "m1"),
            updated.updated_at >= got.updated_at, type(got).__name__]


def filter_only_search(store: BaseStore) -> Any:
    _fill(store)
    out = []
    for prefix, flt in [(("users",), None), (("users", "ana"), {"year": 2026}), (("users",), {"year": {"$gte": 2025}}),
                        (("users",), {"year": {"$gt": 2024, "$lt": 2026}}), (("users",), {"year": {"$ne": 2026}}),
                        (("users",), {"year": {"$lte": 2024}}), (("users",), {"year": {"$eq": 2025}}),
                        (("users",), {"tags": ["pets"]}), (("users",), {"meta": {"src": "form"}}),
                        (("users",), {"missing": 1}), ((), None), (("use",), None)]:
        out.append(sorted(_keys(store.search(prefix, filter=flt, limit=50))))
    return out


def pagination_in_one_namespace(store: BaseStore) -> Any:
    _fill(store)
    ns = ("users", "ana", "memories")
    pages = [_keys(store.search(ns, limit=2, offset=o)) for o in (0, 2, 4)]
    return pages, [i.score for i in store.search(ns)]


def list_namespaces(store: BaseStore) -> Any:
    _fill(store)
    return [
        store.list_namespaces(),
        store.list_namespaces(prefix=("users",)),
        store.list_namespaces(suffix=("memories",)),
        store.list_namespaces(prefix=("users", "*", "memories")),
        store.list_namespaces(prefix=("users",), suffix=("prefs",)),
        store.list_namespaces(max_depth=2),
        store.list_namespaces(prefix=("users",), max_depth=1),
        store.list_namespaces(limit=2, offset=1),
        store.list_namespaces(prefix=("x",)),
    ]


def batch_reads_see_state_before_puts(store: BaseStore) -> Any:
    ns = ("a", "b")
    # (ListNamespacesOp first: InMemoryStore's GetOp of a missing key creates an empty namespace it then lists)
    res = store.batch([ListNamespacesOp(), PutOp(ns, "k", {"v": 1}), GetOp(ns, "k"), PutOp(ns, "k", {"v": 2}),
                       SearchOp(("a",))])
    after = store.batch([GetOp(ns, "k"), PutOp(ns, "k", None), GetOp(ns, "k")])
    return [res[0], res[1], res[2], res[4], after[0].value, after[2].value, store.get(ns, "k")]


def async_api(store: BaseStore) -> Any:
    async def run() -> Any:
        await store.aput(("a",), "k1", {"text": "hello world", "n": 1})
        await store.aput(("a", "b"), "k2", {"text": "goodbye", "n": 2})
        got = await store.aget(("a",), "k1")
        found = sorted(_keys(await store.asearch(("a",), filter={"n": {"$gt": 1}})))
        spaces = await store.alist_namespaces(prefix=("a",))
        await store.adelete(("a",), "k1")
        return [got.value, found, spaces, await store.aget(("a",), "k1")]

    return asyncio.run(run())


def invalid_input(store: BaseStore) -> Any:
    out = []
    for call in (lambda: store.put(("a.b",), "k", {"v": 1}), lambda: store.put((), "k", {"v": 1}),
                 lambda: store.put(("langgraph",), "k", {"v": 1}), lambda: store.put(("a", ""), "k", {"v": 1})):
        with pytest.raises(ValueError) as info:
            call()
        out.append(isinstance(info.value, ValueError))
    return out


def query_top_hit(store: BaseStore) -> Any:
    _fill(store)
    return [
        _keys(store.search(("users",), query="where does Lena live in Porto", limit=1)),
        _keys(store.search(("users",), query="beagle puppy Toby", limit=1)),
        _keys(store.search(("users", "ben"), query="Berlin marathon training", limit=1)),
        sorted(_keys(store.search(("users", "ana"), query="Ana", limit=10))),
        _keys(store.search(("users",), query="Ana", filter={"year": 2025}, limit=10)),
    ]


SCENARIOS: list[Callable[[BaseStore], Any]] = [
    get_put_update_delete, filter_only_search, pagination_in_one_namespace, list_namespaces,
    batch_reads_see_state_before_puts, async_api, invalid_input, query_top_hit,
]


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.__name__)
def test_same_observable_results(scenario: Callable[[BaseStore], Any], tmp_path: Path) -> None:
    reference = scenario(InMemoryStore(index={"dims": 128, "embed": _embed, "fields": ["text"]}))
    engine = MemoryEngine.open(tmp_path / "s", embedder="hashing")
    ours = MemoryStore(engine=engine)
    try:
        assert scenario(ours) == reference
    finally:
        ours.close()
        engine.close()


def test_every_store_passes_the_scenarios(store: BaseStore) -> None:
    """The scenarios also run standalone on each store (so a failure names the store)."""
    for scenario in SCENARIOS:
        scenario(store)
