"""Joint held-out selection (``memext bench select``): a candidate is a default only without a held-out loss."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memory_ext.bench.cli import main
from memory_ext.bench.select import decide, held_out_gain


def test_a_gain_that_holds_on_one_fold_only_is_not_counted() -> None:
    # the candidate wins on fold 0's questions and loses on fold 1's: chosen on one fold, scored on the other
    rows = {"base": [{"m": 0.5}, {"m": 0.5}, {"m": 0.5}, {"m": 0.5}],
            "c": [{"m": 1.0}, {"m": 0.0}, {"m": 1.0}, {"m": 0.0}]}
    assert held_out_gain(rows, [0, 1, 0, 1], "base", "c", ("m",)) < 0
    assert held_out_gain(rows, [0, 0, 0, 0], "base", "base", ("m",)) == 0


def test_a_loss_on_any_data_set_disqualifies() -> None:
    best, ok = decide({"locomo": {"a": 0.02, "b": 0.01}, "madial": {"a": -0.01, "b": 0.0},
                       "small": {"a": 0.05, "b": 0.02}})
    assert best == "b" and ok == {"a": False, "b": True}
    assert decide({"small": {"a": 0.0}}) == (None, {"a": False})


def test_a_candidate_with_a_lower_mean_on_a_data_set_is_not_picked() -> None:
    """keyword 1.0 of a real selection: lower LoCoMo and small-store means, a held-out gain of exactly 0 there
    (the baseline wins every training fold), a small MADial gain: not a default."""
    rows = {"base": [{"m": 0.8}] * 4, "kw": [{"m": 0.78}] * 4}
    assert held_out_gain(rows, [0, 0, 1, 1], "base", "kw", ("m",)) == 0.0
    gains = {"locomo": {"kw": 0.0}, "madial": {"kw": 0.0033}, "small": {"kw": 0.0}}
    means = {"locomo": {"base": 0.8065, "kw": 0.7933}, "madial": {"base": 0.6066, "kw": 0.6099},
             "small": {"base": 0.5984, "kw": 0.5906}}
    assert decide(gains) == ("kw", {"kw": True})  # the gains alone cannot see the losses
    assert decide(gains, means, "base") == (None, {"kw": False})
    means["locomo"]["kw"] = means["small"]["kw"] = 0.81
    assert decide(gains, means, "base") == ("kw", {"kw": True})


def test_memext_bench_select_on_the_small_suite(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    grid = tmp_path / "grid.json"
    grid.write_text(json.dumps({"candidates": {"default": {}, "no-answer-prior": {
        "recall": {"strategy": {"answer": 0.0}}}}}), encoding="utf-8")
    out = tmp_path / "select.json"
    assert main(["select", "--grid", str(grid), "--embedder", "hashing", "--no-progress", "--json", str(out)]) == 0
    result = json.loads(out.read_text(encoding="utf-8"))
    assert list(result["datasets"]) == ["small"]
    small = result["datasets"]["small"]
    assert set(small["means"]) == {"default", "no-answer-prior"} and set(small["gains"]) == {"no-answer-prior"}
    assert result["default"] in ("default", "no-answer-prior")
    assert result["default"] == "default" or result["qualifies"]["no-answer-prior"]
    assert "| default |" in capsys.readouterr().out
    assert main(["select", "--grid", str(grid), "--no-small", "--embedder", "hashing"]) == 2
