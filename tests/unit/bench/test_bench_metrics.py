"""Bench metric functions on hand-computed cases."""

from __future__ import annotations

import math

import numpy as np
import pytest

from memory_ext.bench.metrics import (
    evid_recall_at_k,
    flatten_ranking,
    locomo_question_metrics,
    madial_question_metrics,
    mean_metrics,
    mrr,
    ndcg_at_k,
    percentile,
    recall_all_at_k,
    recall_any_at_k,
)

RANKING = ["d3", "d1", "d7", "d2", "d9"]
GOLD = {"d1", "d2", "d4"}


def test_evid_recall_counts_gold_in_the_first_k() -> None:
    assert evid_recall_at_k(RANKING, GOLD, 1) == 0.0
    assert evid_recall_at_k(RANKING, GOLD, 2) == pytest.approx(1 / 3)
    assert evid_recall_at_k(RANKING, GOLD, 4) == pytest.approx(2 / 3)
    assert evid_recall_at_k(RANKING, GOLD, 100) == pytest.approx(2 / 3)  # d4 never retrieved


def test_recall_any_and_all() -> None:
    assert recall_any_at_k(RANKING, GOLD, 1) == 0.0
    assert recall_any_at_k(RANKING, GOLD, 2) == 1.0
    assert recall_all_at_k(RANKING, GOLD, 5) == 0.0
    assert recall_all_at_k(RANKING, {"d1", "d2"}, 4) == 1.0
    assert recall_all_at_k(RANKING, {"d1", "d2"}, 3) == 0.0


def test_ndcg_hand_computed() -> None:
    # gold d1 at rank 2 and d2 at rank 4; ideal: 3 gold at ranks 1..3
    dcg = 1 / math.log2(3) + 1 / math.log2(5)
    ideal = 1 + 1 / math.log2(3) + 1 / math.log2(4)
    assert ndcg_at_k(RANKING, GOLD, 10) == pytest.approx(dcg / ideal)
    # the ideal is capped at k: one gold in first place with k=1 is perfect
    assert ndcg_at_k(["d1", "x"], {"d1", "d2"}, 1) == pytest.approx(1.0)
    assert ndcg_at_k(["x", "y"], {"d1"}, 10) == 0.0


def test_mrr() -> None:
    assert mrr(RANKING, GOLD) == pytest.approx(0.5)
    assert mrr(["a", "b"], {"z"}) == 0.0
    assert mrr(["z"], {"z"}) == 1.0


def test_empty_gold_is_refused() -> None:
    with pytest.raises(ValueError, match="gold is empty"):
        evid_recall_at_k(RANKING, set(), 5)


def test_flatten_drops_repeats_and_none_in_rank_order() -> None:
    items = [("D1:4", "D1:3"), ("D1:3", "D2:1"), (None, "D1:4", "D3:9")]
    assert flatten_ranking(items) == ["D1:4", "D1:3", "D2:1", "D3:9"]


def test_at_k_means_the_first_k_turns_after_flattening() -> None:
    # a big item cannot buy coverage: its turns count one by one
    ranking = flatten_ranking([("a", "b", "c", "d", "e", "f"), ("g",)])
    assert evid_recall_at_k(ranking, {"g"}, 5) == 0.0
    assert evid_recall_at_k(ranking, {"g"}, 7) == 1.0


def test_locomo_question_metrics_keys_and_depth() -> None:
    ranking = [f"t{i}" for i in range(30)]
    out = locomo_question_metrics(ranking, {"t25"})
    assert set(out) == {*(f"{m}@{k}" for m in ("evid_recall", "recall_any", "recall_all") for k in (1, 5, 10, 20)),
                        "ndcg@10", "mrr"}
    assert out["mrr"] == 0.0  # MRR looks at the first max(k) = 20 turns only
    assert locomo_question_metrics(ranking, {"t4"})["mrr"] == pytest.approx(0.2)
    assert all(0.0 <= v <= 1.0 for v in out.values())


def test_madial_question_metrics() -> None:
    out = madial_question_metrics(["m3", "m1", "m9", "m4"], {"m1", "m4"})
    assert out["recall@1"] == 0.0
    assert out["recall@3"] == pytest.approx(0.5)
    assert out["recall@5"] == pytest.approx(1.0)
    assert out["mrr"] == pytest.approx(0.5)
    ideal = 1 + 1 / math.log2(3)
    assert out["ndcg@5"] == pytest.approx((1 / math.log2(3) + 1 / math.log2(5)) / ideal)


def test_mean_metrics_is_a_micro_average() -> None:
    rows = [{"a": 1.0, "b": 0.0}, {"a": 0.0, "b": 0.0}, {"a": 1.0, "b": 1.0}]
    assert mean_metrics(rows) == {"a": pytest.approx(2 / 3), "b": pytest.approx(1 / 3)}
    assert mean_metrics([]) == {}


@pytest.mark.parametrize("q", [0, 5, 50, 95, 100])
def test_percentile_matches_numpy(q: float) -> None:
    values = [3.0, 1.0, 4.0, 1.5, 9.0, 2.6, 5.0]
    assert percentile(values, q) == pytest.approx(float(np.percentile(values, q)))


def test_percentile_refuses_nonsense() -> None:
    with pytest.raises(ValueError):
        percentile([], 50)
    with pytest.raises(ValueError):
        percentile([1.0], 101)
