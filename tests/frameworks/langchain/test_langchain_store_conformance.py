"""MemoryStore against LangGraph's InMemoryStore: the same scenarios, the same observable results.

Each scenario runs on a fresh store of each kind and returns what a LangGraph user observes (values, keys,
namespaces, None for missing items, errors). Orders are compared where LangGraph defines them (one namespace,
list_namespaces) and as sets where the reference's order is an implementation detail (across namespaces).
"""

from __future__ import annotations

import asyncio
import re
import uuid
import zlib
from collections.abc import Callable
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langgraph.store.base")

from langchain_core.embeddings import Embeddings
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
        out.append(_keys(store.search(prefix, filter=flt, limit=50)))  # the order too
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


def _outcome(call: Callable[[], Any]) -> Any:
    """A call's result, or ``"error"`` if it raised a ``TypeError``/``ValueError`` (the reference's types)."""
    try:
        return call()
    except (TypeError, ValueError):
        return "error"


def filter_order_across_namespaces(store: BaseStore) -> Any:
    """Filter-only search lists namespaces in the order they first appeared, items in insertion order; an
    update keeps an item's place, a delete and re-put moves it last."""
    store.put(("b",), "k1", {"n": 1})
    store.put(("a",), "k1", {"n": 2})
    store.put(("b",), "k2", {"n": 3})
    store.put(("a", "x"), "k3", {"n": 4})
    store.put(("b",), "k1", {"n": 5})  # update: same place
    store.put(("a",), "k0", {"n": 6})
    store.delete(("b",), "k2")
    store.put(("b",), "k2", {"n": 7})  # re-put after delete: last of its namespace
    return [_keys(store.search(())), _keys(store.search((), limit=3, offset=2)),
            _keys(store.search((), filter={"n": {"$gt": 2}})), _keys(store.search(("a",)))]


def comparison_on_missing_or_non_numeric_values(store: BaseStore) -> Any:
    """``$gte`` & co on a missing field or a value of another type: InMemoryStore raises (and compares numeric
    strings as numbers); memory-ext's one filter language (the store's and ``search(filters={"metadata": ...})``,
    evaluated in SQL) does not match such an item — see :func:`test_comparisons_follow_the_one_filter_language`."""
    ns = ("users", "ana", "memories")
    store.put(ns, "m1", {"year": 2024, "label": "a"})
    store.put(ns, "m2", {"year": "2026", "label": "b"})
    store.put(ns, "m3", {"label": "c"})
    return [
        _outcome(lambda: _keys(store.search(ns, filter={"year": {"$gte": 2025}}))),
        _outcome(lambda: _keys(store.search(ns, filter={"label": {"$gte": 1}}))),
        _outcome(lambda: _keys(store.search(ns, filter={"label": "a", "year": {"$gte": 2020}}))),  # m3 skipped
        _outcome(lambda: _keys(store.search(ns, filter={"year": {"$ne": 2024}}))),
        _outcome(lambda: _keys(store.search(ns, filter={"year": {"$eq": None}}))),
        _outcome(lambda: _keys(store.search(("empty",), filter={"year": {"$gte": 1}}))),
        _outcome(lambda: _keys(store.search(ns, filter={"year": {"$regex": "x"}}))),
    ]


def values_come_back_as_they_went_in(store: BaseStore) -> Any:
    value = {"when": datetime(2026, 3, 1, 9, 30, tzinfo=UTC), "day": date(2026, 3, 1), "naive": datetime(2026, 1, 1),
             "span": timedelta(hours=2), "id": uuid.UUID(int=7), "price": Decimal("9.90"), "raw": b"\x00\xff",
             "pair": (1, "a"), "tags": {"x"}, "nested": [{"at": time(9, 30)}], "ratio": float("inf"),
             "text": "naïve café 杭州 🙂"}
    store.put(("a",), "k", value)
    got = store.get(("a",), "k")
    assert got is not None
    found = store.search(("a",), filter={"when": datetime(2026, 3, 1, 9, 30, tzinfo=UTC)})
    return [got.value == value, {k: type(v).__name__ for k, v in got.value.items()},
            type(got.created_at).__name__, got.created_at.tzinfo is not None, _keys(found)]


def query_scores_with_an_index_config(store: BaseStore) -> Any:
    """With the same ``index`` configuration, a query ranks and scores as the reference does."""
    _fill(store)
    store.put(("users", "ana", "memories"), "m9", {"text": "unindexed Lena note", "year": 2020}, index=False)
    store.put(("users", "ana", "memories"), "m8", {"title": "Lena", "text": "Porto"}, index=["title"])
    out = []
    for prefix, query, flt, limit, offset in [
            (("users",), "where does Lena live in Porto", None, 10, 0),
            (("users",), "beagle puppy Toby", None, 2, 1), (("users", "ben"), "Berlin marathon", None, 10, 0),
            (("users",), "Ana", {"year": 2025}, 10, 0), (("users", "ana"), "Lena", None, 10, 0)]:
        hits = store.search(prefix, query=query, filter=flt, limit=limit, offset=offset)
        out.append([(i.namespace, i.key, None if i.score is None else round(i.score, 9)) for i in hits])
    return out


SCENARIOS: list[Callable[[BaseStore], Any]] = [
    get_put_update_delete, filter_only_search, pagination_in_one_namespace, list_namespaces,
    batch_reads_see_state_before_puts, async_api, invalid_input, query_top_hit, filter_order_across_namespaces,
    values_come_back_as_they_went_in,
]
#: Scenarios compared only when MemoryStore is given the reference's ``index`` configuration.
INDEX_SCENARIOS: list[Callable[[BaseStore], Any]] = [query_scores_with_an_index_config]
INDEX = {"dims": 128, "embed": _embed, "fields": ["text"]}


@pytest.mark.parametrize("with_index", [False, True], ids=["retrieval", "index-config"])
@pytest.mark.parametrize("scenario", SCENARIOS + INDEX_SCENARIOS, ids=lambda s: s.__name__)
def test_same_observable_results(scenario: Callable[[BaseStore], Any], with_index: bool, tmp_path: Path) -> None:
    if scenario in INDEX_SCENARIOS and not with_index:
        pytest.skip("memory-ext retrieval scores differently from the reference's cosine (by design)")
    reference = scenario(InMemoryStore(index=INDEX))  # type: ignore[arg-type]
    engine = MemoryEngine.open(tmp_path / "s", embedder="hashing")
    ours = MemoryStore(engine=engine, **({"index": INDEX} if with_index else {}))  # type: ignore[arg-type]
    try:
        assert scenario(ours) == reference
    finally:
        ours.close()
        engine.close()


@pytest.mark.parametrize("embed", ["function", "async function", "Embeddings"])
@pytest.mark.parametrize("fields", [["text"], ["$"], ["tags[*]", "meta.src"], ["{text,meta.src}"], None])
def test_index_config_embed_kinds_and_field_paths(embed: str, fields: list[str] | None, tmp_path: Path) -> None:
    """``embed`` as LangGraph accepts it (function, async function, ``Embeddings``) and ``fields`` as JSON paths
    (``get_text_at_path`` semantics): the same ranking and scores as the reference."""

    async def aembed(texts: list[str]) -> list[list[float]]:
        return _embed(texts)

    class HashEmbeddings(Embeddings):
        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            return _embed(texts)

        def embed_query(self, text: str) -> list[float]:
            return _embed([text])[0]

    made: Any = {"function": _embed, "async function": aembed, "Embeddings": HashEmbeddings()}[embed]
    index: Any = {"dims": 128, "embed": made, **({"fields": fields} if fields is not None else {})}

    def scenario(store: BaseStore) -> Any:
        _fill(store)
        return [[(i.key, round(i.score or 0, 9)) for i in store.search(("users",), query=q)]
                for q in ("Lena Porto", "family pets", "chat", "form")]

    engine = MemoryEngine.open(tmp_path / "s", embedder="hashing")
    ours = MemoryStore(engine=engine, index=index)
    try:
        if embed == "async function":  # InMemoryStore can only call an async embed from its async API
            assert asyncio.run(_ascenario(ours)) == asyncio.run(_ascenario(InMemoryStore(index=index)))
        else:
            assert scenario(ours) == scenario(InMemoryStore(index=index))
    finally:
        ours.close()
        engine.close()


async def _ascenario(store: BaseStore) -> Any:
    for ns, items in MEMORIES.items():
        for key, value in items.items():
            await store.aput(ns, key, value)
    return [[(i.key, round(i.score or 0, 9)) for i in await store.asearch(("users",), query=q)]
            for q in ("Lena Porto", "family pets")]


@pytest.mark.parametrize("kind", ["memory", "memory-ext"])
def test_every_store_passes_the_scenarios(kind: str, tmp_path: Path) -> None:
    """The scenarios also run standalone on a fresh store of each kind (so a failure names the store)."""
    for i, scenario in enumerate(SCENARIOS):
        if kind == "memory":
            scenario(InMemoryStore(index=INDEX))  # type: ignore[arg-type]
            continue
        with MemoryEngine.open(tmp_path / f"s{i}", embedder="hashing") as engine:
            st = MemoryStore(engine=engine)
            scenario(st)
            st.close()


def test_comparisons_follow_the_one_filter_language(tmp_path: Path) -> None:
    """Where InMemoryStore raises (a comparison with a missing or non-numeric value) MemoryStore follows memory-ext's
    filter semantics, the same as ``search(filters={"metadata": ...})``: such an item does not match, a key never
    set matches ``$ne`` and ``None``; equality results and the error on an unknown operator are the reference's."""
    reference = comparison_on_missing_or_non_numeric_values(InMemoryStore())
    with MemoryEngine.open(tmp_path / "s", embedder="hashing") as engine:
        ours = comparison_on_missing_or_non_numeric_values(MemoryStore(engine=engine))
    ns = ("users", "ana", "memories")
    assert reference[:2] == ["error", "error"] and ours[:2] == [[], []]
    assert ours[2:] == reference[2:] == [[(ns, "m1")], [(ns, "m2"), (ns, "m3")], [(ns, "m3")], [], "error"]
