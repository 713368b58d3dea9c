"""Reranking in the engine: it changes the order in the intended direction, explains itself, and a failing
reranker degrades the result (fused order, reported) without being switched off."""

from __future__ import annotations

from pathlib import Path

import pytest

from memory_ext import ConfigError, MemoryEngine, ScriptedLLM, Turn
from memory_ext.rank.rerank import CallableReranker

TURNS = [
    Turn(role="user", content="I booked a table at Nopa for Friday at 8pm", speaker="Ana"),
    Turn(role="user", content="The table lamp in my office is broken", speaker="Ana"),
    Turn(role="user", content="Table tennis practice moved to Thursdays", speaker="Ana"),
    Turn(role="user", content="My dinner reservation is under the name Ana Ruiz", speaker="Ana"),
    Turn(role="user", content="I water the plants every Sunday", speaker="Ana"),
]
RULES = {"rerank_enabled": True}


class Flaky:
    """A reranker that fails while ``broken`` is set, and otherwise prefers texts about dinner."""

    id = "flaky"

    def __init__(self) -> None:
        self.broken = False
        self.calls = 0

    def rerank(self, query, candidates, *, timeout=None):
        self.calls += 1
        if self.broken:
            raise RuntimeError("model server down")
        return [float("dinner" in c.text or "Nopa" in c.text) for c in candidates]


def _open(path: Path, **kw) -> MemoryEngine:
    engine = MemoryEngine.open(path, embedder="hashing", config={"globals": RULES}, **kw)
    engine.add_turns(TURNS, "ana")
    return engine


def test_reranker_moves_its_preferred_memories_up_and_explains(tmp_path: Path) -> None:
    with MemoryEngine.open(tmp_path / "plain", embedder="hashing") as plain:
        plain.add_turns(TURNS, "ana")
        before = [i.text for i in plain.search("table", "ana", k=3).items]
    flaky = Flaky()
    with _open(tmp_path / "rr", reranker=flaky) as engine:
        result = engine.search("table", "ana", k=3, explain=True)
        texts = [i.text for i in result.items]
        assert texts[0] in (TURNS[0].content, TURNS[3].content) and texts != before
        assert not result.degraded and "rerank" in result.timings_ms
        assert "rerank" in result.items[0].explanation and result.items[0].explanation["rerank"]["rerank_score"] == 1.0


def test_failing_reranker_keeps_the_fused_order_reports_and_is_tried_again(tmp_path: Path) -> None:
    with MemoryEngine.open(tmp_path / "plain", embedder="hashing") as plain:
        plain.add_turns(TURNS, "ana")
        fused = [i.id and i.text for i in plain.search("table", "ana", k=3).items]
    flaky = Flaky()
    with _open(tmp_path / "rr", reranker=flaky) as engine:
        flaky.broken = True
        failed = engine.search("table", "ana", k=3)
        assert [i.text for i in failed.items] == fused  # degraded, not empty
        assert failed.degraded and [e.channel for e in failed.channel_errors] == ["rerank"]
        assert "model server down" in failed.channel_errors[0].message
        flaky.broken = False
        again = engine.search("table", "ana", k=3)
        assert not again.degraded and flaky.calls == 2


def test_llm_reranker_is_used_when_no_reranker_is_given(tmp_path: Path) -> None:
    scores = '{"scores": [%s]}'
    llm = ScriptedLLM([scores % ", ".join(["0"] * 4 + ["10"])] + ["not json"] * 4)
    with _open(tmp_path / "llm", llm=llm) as engine:
        first = engine.search("table", "ana", k=2)
        assert llm.calls and not first.degraded
        second = engine.search("table", "ana", k=2)  # malformed twice: degraded, fused order
        assert second.degraded and second.channel_errors[0].channel == "rerank" and second.items


def test_rerank_needs_a_reranker_or_an_llm(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="rerank"):
        MemoryEngine.open(tmp_path / "x", embedder="hashing", config={"globals": RULES})
    with pytest.raises(ConfigError, match="reranker"):
        MemoryEngine.open(tmp_path / "y", embedder="hashing", config={"globals": RULES}, reranker=object())
    ok = CallableReranker(lambda q, texts: [len(t) for t in texts], id="length")
    MemoryEngine.open(tmp_path / "z", embedder="hashing", config={"globals": RULES}, reranker=ok).close()
