"""Defect 2 of issue 14: ``engine.forget`` reaches the LangGraph store's items, whether or not a ``MemoryStore``
is open in the forgetting process (they are rows of the truth store, removed in the forget's transaction)."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("langgraph")

from langchain_memory_ext import MemoryStore
from memory_ext import MemoryEngine, Namespace
from tests.fault.faultkit import scan_bytes

VALUE = {"text": "Ana keeps the spare key under the capybarafern pot"}
NEEDLE = b"capybarafern"


def test_forget_of_the_namespace_removes_the_items_of_an_open_store(tmp_path: Path) -> None:
    engine = MemoryEngine.open(tmp_path, embedder="hashing")
    store = MemoryStore(engine=engine, user_id="ana")
    bob = MemoryStore(engine=engine, user_id="bob")
    store.put(("memories",), "key", VALUE)
    store.put(("memories",), "plain", VALUE, index=False)  # never archived in the engine: only in the table
    bob.put(("memories",), "boat", {"text": "Bob keeps his boat in Porto"})
    receipt = engine.forget(Namespace("ana"))
    assert receipt.purge_complete and engine.get_items("ana", [(("memories",), "plain")]) == [None]
    assert store.get(("memories",), "key") is None and store.get(("memories",), "plain") is None
    assert store.search(("memories",), query="spare key") == []
    assert bob.get(("memories",), "boat") is not None  # another partition keeps its items
    store.close()
    bob.close()
    engine.close()
    assert scan_bytes(tmp_path, [NEEDLE]) == {}


def test_forget_reaches_the_items_when_no_store_is_open(tmp_path: Path) -> None:
    with MemoryEngine.open(tmp_path, embedder="hashing") as engine:
        store = MemoryStore(engine=engine, user_id="ana")
        store.put(("memories",), "key", VALUE)
        store.close()
    with MemoryEngine.open(tmp_path, embedder="hashing") as engine:  # another process, say `memext forget`
        receipt = engine.forget(Namespace("ana"))
        assert receipt.purge_complete and engine.search_items("ana") == []
        assert MemoryStore(engine=engine, user_id="ana").get(("memories",), "key") is None
    assert scan_bytes(tmp_path, [NEEDLE]) == {}


def test_forgetting_a_session_or_a_record_removes_only_those_items(tmp_path: Path) -> None:
    with MemoryEngine.open(tmp_path, embedder="hashing") as engine:
        store = MemoryStore(engine=engine, user_id="ana")
        store.put(("memories",), "key", VALUE)
        store.put(("trips",), "lyon", {"text": "Ana takes the train to Lyon on Friday"})
        store.put(("trips",), "porto", {"text": "Ana flies to Porto in May"})
        engine.forget(Namespace("ana", session_id="memories"))
        assert store.get(("memories",), "key") is None and store.get(("trips",), "lyon") is not None
        hit = engine.search("train to Lyon", "ana", k=1).items[0]
        engine.forget("ana", record_ids=[hit.id])
        assert store.get(("trips",), "lyon") is None and store.get(("trips",), "porto") is not None
        store.delete(("trips",), "porto")  # the store's own delete still rebuilds its session
        assert store.get(("trips",), "porto") is None
