"""The recall runner with channels that fail and hang, and the engine's degraded results."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from typing import ClassVar

import pytest

from memory_ext import MemoryEngine, RetrievalError
from memory_ext.recall.keyword import KeywordRecaller
from memory_ext.recall.runner import run_channels
from memory_ext.recall.vector import VectorRecaller
from memory_ext.registry import recallers
from tests.conftest import Gate


def test_failing_and_hanging_channels_become_channel_errors(gate: Gate) -> None:
    def hang() -> list[tuple[int, float]]:
        gate.wait()
        return [(9, 1.0)]

    def boom() -> list[tuple[int, float]]:
        raise ConnectionError("server gone")

    with ThreadPoolExecutor(4) as pool:
        run = run_channels(pool, {"ok": lambda: [(1, 0.5)], "boom": boom, "hang": hang}, timeout_s=0.3)
        assert gate.entered and not gate.finished  # the runner did not wait for the hanging channel
        gate.open()
    assert list(run.results) == ["ok"] and run.results["ok"].ranked() == [(1, 0.5)]
    errors = {e.channel: e for e in run.errors}
    assert errors["boom"].error_type == "ConnectionError" and "server gone" in errors["boom"].message
    assert errors["hang"].error_type == "TimeoutError" and "channel_timeout_s" in errors["hang"].message


@recallers.register("test_broken_vector")
class BrokenVector(VectorRecaller):
    def recall(self, request):  # type: ignore[no-untyped-def]
        raise RuntimeError("vector index corrupted")


@recallers.register("test_slow_keyword")
class SlowKeyword(KeywordRecaller):
    def recall(self, request):  # type: ignore[no-untyped-def]
        time.sleep(1.0)
        return super().recall(request)


def test_engine_degrades_when_one_channel_fails(tmp_path) -> None:  # type: ignore[no-untyped-def]
    with MemoryEngine.open(tmp_path / "s", embedder="hashing",
                           config={"recall": {"vector_recaller": "test_broken_vector"}}) as eng:
        eng.add_turns([{"role": "user", "content": "I adopted a beagle called Toby"},
                       {"role": "user", "content": "The weather is nice"}], "ana")
        res = eng.search("beagle Toby", "ana", k=3)
        assert res.degraded and res.channel_errors[0].channel == "vector"
        assert "corrupted" in res.channel_errors[0].message
        assert "Toby" in res.items[0].text and set(res.items[0].channels) == {"keyword"}


def test_engine_raises_when_every_channel_fails(tmp_path) -> None:  # type: ignore[no-untyped-def]
    config = {"recall": {"channel_timeout_s": 0.2, "vector_recaller": "test_broken_vector",
                         "keyword_recaller": "test_slow_keyword"}}
    with MemoryEngine.open(tmp_path / "s", embedder="hashing", config=config) as eng:
        eng.add_turns([{"role": "user", "content": "Toby is a beagle"}], "u")
        with pytest.raises(RetrievalError) as info:
            eng.search("beagle", "u")
        assert {e.channel for e in info.value.errors} == {"vector", "keyword"}
        assert "TimeoutError" in str(info.value) and "RuntimeError" in str(info.value)


def test_routes_with_the_same_text_share_one_channel_call(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from memory_ext import HashingEmbedder

    class Counting(HashingEmbedder):
        queries: ClassVar[list[str]] = []

        def embed_query(self, text):  # type: ignore[no-untyped-def]
            Counting.queries.append(text)
            time.sleep(0.05)  # parallel routes overlap
            return super().embed_query(text)

    with MemoryEngine.open(tmp_path / "s", embedder=Counting(64)) as eng:
        eng.add_turns([{"role": "user", "speaker": "Ann", "content": "I love hiking"},
                       {"role": "user", "speaker": "Bob", "content": "I love sailing"}], "u")
        res = eng.search("What do Ann and Bob both love?", "u", k=2, trace=True)
        assert len(res.plan.routes) == 3  # the query, one route per named speaker
        assert Counting.queries == ["What do Ann and Bob both love?"]
        assert sorted(res.trace["channels"]) == ["keyword", "vector"]  # one call per channel and text
