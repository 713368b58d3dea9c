"""``memext bench madial --kfolds K --candidates FILE``: configurations chosen on other folds, scored held-out."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memory_ext.bench.cli import main
from memory_ext.bench.kfolds import cross_validate
from tests.unit.bench.test_bench_smoke import _madial_folder


def test_a_candidate_that_wins_one_fold_only_is_not_credited_in_sample() -> None:
    # "lucky" is perfect on fold 0 and useless elsewhere; "steady" is good everywhere
    n = 10
    steady = [{"recall@5": 0.7, "recall@10": 0.8} for _ in range(n)]
    lucky = [{"recall@5": 1.0, "recall@10": 1.0} if i % 5 == 0 else {"recall@5": 0.0, "recall@10": 0.0}
             for i in range(n)]
    out = cross_validate({"steady": steady, "lucky": lucky}, folds=5, select=("recall@5", "recall@10"))
    assert out["chosen"] == ["steady"] * 5
    assert out["held_out"] == pytest.approx({"recall@5": 0.7, "recall@10": 0.8})
    # in-sample, the oracle per question would be better than what the procedure achieves held-out
    assert out["in_sample"]["lucky"]["recall@5"] == pytest.approx(0.2)


def test_held_out_is_the_chosen_candidates_score_on_each_left_out_fold() -> None:
    a = [{"m": 1.0}, {"m": 1.0}, {"m": 0.0}, {"m": 0.0}]
    b = [{"m": 0.0}, {"m": 0.0}, {"m": 1.0}, {"m": 1.0}]
    # folds: {0, 2} and {1, 3}; each fold's training half ties, and a tie goes to the first candidate
    out = cross_validate({"a": a, "b": b}, folds=2, select=("m",))
    assert out["chosen"] == ["a", "a"] and out["held_out"]["m"] == 0.5
    with pytest.raises(ValueError, match="same questions"):
        cross_validate({"a": a, "b": b[:3]}, folds=2, select=("m",))


def test_folds_command_reports_held_out_metrics(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    candidates = tmp_path / "candidates.json"
    candidates.write_text(json.dumps({"default": {}, "no-sparse": {"globals": {"sparse_enabled": False}}}),
                          encoding="utf-8")
    out = tmp_path / "folds.json"
    rankings = tmp_path / "rankings.jsonl"
    status = main(["madial", "--data", str(_madial_folder(tmp_path)), "--embedder", "hashing", "--kfolds", "3",
                   "--candidates", str(candidates), "--json", str(out), "--rankings", str(rankings),
                   "--no-progress"])
    assert status == 0
    result = json.loads(out.read_text(encoding="utf-8"))
    assert result["folds"] == 3 and result["n_questions"] == 3 and len(result["chosen"]) == 3
    assert set(result["in_sample"]) == {"default", "no-sparse"}
    assert all(0.0 <= v <= 1.0 for v in result["held_out"].values())
    assert "held-out" in capsys.readouterr().out
    systems = {json.loads(line)["system"] for line in rankings.read_text(encoding="utf-8").splitlines()}
    assert systems == {"memory-ext:default", "memory-ext:no-sparse"}


def test_folds_needs_candidates_and_enough_questions(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = str(_madial_folder(tmp_path))
    assert main(["madial", "--data", data, "--embedder", "hashing", "--kfolds", "3", "--no-progress"]) == 2
    assert "--candidates" in capsys.readouterr().err
    candidates = tmp_path / "c.json"
    candidates.write_text('{"default": {}}', encoding="utf-8")
    assert main(["madial", "--data", data, "--embedder", "hashing", "--kfolds", "9", "--candidates",
                 str(candidates), "--no-progress"]) == 2
    assert "between 2 and" in capsys.readouterr().err
    candidates.write_text('{"bad": {"recall": {"rrf_kk": 3}}}', encoding="utf-8")
    assert main(["madial", "--data", data, "--embedder", "hashing", "--kfolds", "2", "--candidates",
                 str(candidates), "--no-progress"]) == 2
    assert "rrf_kk" in capsys.readouterr().err


def test_one_grid_format_and_one_flag_for_both_kinds_of_folds(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    """``--folds K --grid`` reads the loco grid format (``{"candidates": ...}``) and lays it over ``--config``;
    ``loco`` is refused for MADial, a single fold and unknown selection metrics are refused with the fix named."""
    data = str(_madial_folder(tmp_path))
    grid = tmp_path / "grid.json"
    grid.write_text(json.dumps({"candidates": {"default": {}, "no-sparse": {"globals": {"sparse_enabled": False}}}}),
                    encoding="utf-8")
    config = tmp_path / "base.json"
    config.write_text(json.dumps({"recall": {"mmr_lambda": 0.9}}), encoding="utf-8")
    out = tmp_path / "folds.json"
    assert main(["madial", "--data", data, "--embedder", "hashing", "--folds", "3", "--grid", str(grid),
                 "--config", str(config), "--select", "recall@5", "--json", str(out), "--quiet",
                 "--no-progress"]) == 0
    result = json.loads(out.read_text(encoding="utf-8"))
    assert result["folds"] == 3 and result["select"] == ["recall@5"]
    assert set(result["in_sample"]) == {"default", "no-sparse"}
    # the older spelling is the same run
    old = tmp_path / "old.json"
    assert main(["madial", "--data", data, "--embedder", "hashing", "--kfolds", "3", "--candidates", str(grid),
                 "--config", str(config), "--select", "recall@5", "--json", str(old), "--quiet",
                 "--no-progress"]) == 0
    assert json.loads(old.read_text(encoding="utf-8"))["held_out"] == result["held_out"]
    capsys.readouterr()
    assert main(["madial", "--data", data, "--embedder", "hashing", "--folds", "loco", "--grid", str(grid),
                 "--no-progress"]) == 2
    assert "--folds K" in capsys.readouterr().err
    assert main(["madial", "--data", data, "--embedder", "hashing", "--folds", "3", "--grid", str(grid),
                 "--select", "evid_recall@5", "--no-progress"]) == 2
    assert "evid_recall@5" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["madial", "--data", data, "--embedder", "hashing", "--folds", "1", "--grid", str(grid)])
    assert "at least 2" in capsys.readouterr().err
