"""RRF against a hand-computed example, and the weight semantics."""

from __future__ import annotations

import pytest

from memory_ext.rank.fusion import rrf


def test_hand_computed_example() -> None:
    rankings = {"keyword": ["a", "b", "c"], "vector": ["c", "a", "d"]}
    fused = rrf(rankings, k=60)
    scores = {f.id: f.score for f in fused}
    assert scores["a"] == pytest.approx(1 / 61 + 1 / 62)
    assert scores["c"] == pytest.approx(1 / 63 + 1 / 61)
    assert scores["b"] == pytest.approx(1 / 62)
    assert scores["d"] == pytest.approx(1 / 63)
    assert [f.id for f in fused] == ["a", "c", "b", "d"]
    assert fused[0].contributions == {"keyword": (1, pytest.approx(1 / 61)), "vector": (2, pytest.approx(1 / 62))}


def test_inputs_are_not_mutated_and_duplicates_count_once() -> None:
    rankings = {"keyword": ["a", "a", "b"]}
    rrf(rankings)
    assert rankings == {"keyword": ["a", "a", "b"]}
    assert rrf(rankings)[1].contributions["keyword"][0] == 3  # 'b' keeps its position


def test_weights_change_the_order_and_zero_removes_a_channel() -> None:
    rankings = {"keyword": ["a", "x"], "vector": ["b", "y"]}
    assert rrf(rankings, weights={"keyword": 3.0, "vector": 1.0})[0].id == "a"
    assert rrf(rankings, weights={"keyword": 1.0, "vector": 3.0})[0].id == "b"
    zero = rrf(rankings, weights={"keyword": 1.0, "vector": 0.0})
    assert [f.id for f in zero] == [f.id for f in rrf({"keyword": ["a", "x"]})]
    assert all("vector" not in f.contributions for f in zero)


def test_k_must_be_positive() -> None:
    with pytest.raises(ValueError):
        rrf({"a": ["x"]}, k=0)
