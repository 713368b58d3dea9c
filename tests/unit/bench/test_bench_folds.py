"""``memext bench locomo --folds loco``: candidates chosen on the other conversations, scored on the one left out."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from test_bench_smoke import _locomo_file  # the same directory (pytest puts it on sys.path)

from memory_ext.bench.cli import main
from memory_ext.bench.datasets import BenchQuestion
from memory_ext.bench.folds import _ingest_key, select_loco
from memory_ext.bench.runner import LOCOMO, QuestionResult


def _two_conversations(tmp_path: Path) -> Path:
    """The smoke conversation twice, under two ids, the second with its sessions in the other order."""
    data = json.loads(_locomo_file(tmp_path).read_text(encoding="utf-8"))
    second = json.loads(json.dumps(data[0]))
    second["sample_id"] = "conv-tiny-2"
    conv = second["conversation"]
    conv["session_1"], conv["session_2"] = conv["session_2"], conv["session_1"]
    for session, number in (("session_1", 1), ("session_2", 2)):
        for i, turn in enumerate(conv[session], 1):
            turn["dia_id"] = f"D{number}:{i}"
    second["qa"] = [{"question": "Where is Clara visiting from?", "answer": "Toronto", "evidence": ["D1:7"],
                     "category": 4},
                    {"question": "What did Ana make in pottery class?", "answer": "a blue bowl",
                     "evidence": ["D2:9"], "category": 1}]
    path = tmp_path / "two.json"
    path.write_text(json.dumps([data[0], second]), encoding="utf-8")
    return path


def _result(conv: str, qid: str, recall10: float, category: str = "4") -> QuestionResult:
    question = BenchQuestion(qid=qid, text="q", gold=("D1:1",), category=category)
    return QuestionResult(conversation_id=conv, question=question, ranking=(), latency_ms=0.0,
                          metrics={"evid_recall@10": recall10})


def test_each_fold_uses_the_candidate_best_on_the_other_conversations() -> None:
    by_candidate = {
        "default": [_result("a", "1", 0.5), _result("b", "2", 0.5)],
        "wins-on-a": [_result("a", "1", 1.0), _result("b", "2", 0.0)],
        "wins-on-b": [_result("a", "1", 0.0), _result("b", "2", 0.9)],
    }
    folds = select_loco(by_candidate, ["a", "b"], LOCOMO, "evid_recall@10")
    # holding out a: chosen on b -> wins-on-b, which scores 0.0 on a; in-sample it would have taken wins-on-a
    assert [(f.held_out, f.chosen) for f in folds] == [("a", "wins-on-b"), ("b", "wins-on-a")]
    assert [r.metrics["evid_recall@10"] for f in folds for r in f.results] == [0.0, 0.0]
    # adversarial questions (category 5) are not part of the selection metric; ties go to the first listed
    tied = {"default": [_result("a", "1", 0.5), _result("b", "2", 0.5)],
            "same": [_result("a", "1", 0.5), _result("b", "2", 0.5), _result("b", "3", 1.0, category="5")]}
    assert [f.chosen for f in select_loco(tied, ["a", "b"], LOCOMO, "evid_recall@10")] == ["default", "default"]


def test_two_selection_metrics_select_by_their_mean() -> None:
    def result(conv: str, qid: str, at5: float, at10: float) -> QuestionResult:
        question = BenchQuestion(qid=qid, text="q", gold=("D1:1",), category="4")
        return QuestionResult(conversation_id=conv, question=question, ranking=(), latency_ms=0.0,
                              metrics={"evid_recall@5": at5, "evid_recall@10": at10})

    by_candidate = {"deep": [result("a", "1", 0.2, 1.0), result("b", "2", 0.2, 1.0)],    # mean 0.6
                    "sharp": [result("a", "1", 0.8, 0.8), result("b", "2", 0.8, 0.8)]}  # mean 0.8
    assert [f.chosen for f in select_loco(by_candidate, ["a", "b"], LOCOMO, "evid_recall@10")] == ["deep", "deep"]
    both = select_loco(by_candidate, ["a", "b"], LOCOMO, "evid_recall@5,evid_recall@10")
    assert [f.chosen for f in both] == ["sharp", "sharp"]
    with pytest.raises(ValueError, match="no metric recall@5"):
        select_loco(by_candidate, ["a", "b"], LOCOMO, "recall@5")


def test_query_time_settings_share_one_ingest() -> None:
    base: dict[str, Any] = {"ingest": {"windows": True}}
    assert _ingest_key({**base, "recall": {"mmr_lambda": 0.5}}) == _ingest_key(base)
    assert _ingest_key({**base, "globals": {"graph_enabled": True}}) == _ingest_key({**base, "globals": {}})
    assert _ingest_key({**base, "globals": {"evidence_enabled": True}}) != _ingest_key({**base, "globals": {}})


def test_folds_run_reports_held_out_results(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = _two_conversations(tmp_path)
    grid = tmp_path / "grid.json"
    grid.write_text(json.dumps({"candidates": {"default": {}, "no-window": {"recall": {"strategy": {"window": 0}}},
                                               "no-mmr": {"recall": {"mmr_lambda": 1.0}}}}), encoding="utf-8")
    out = tmp_path / "folds.json"
    status = main(["locomo", "--data", str(data), "--embedder", "hashing", "--folds", "loco", "--grid", str(grid),
                   "--json", str(out), "--no-progress", "--rankings", str(tmp_path / "r.jsonl")])
    assert status == 0
    result = json.loads(out.read_text(encoding="utf-8"))
    assert [f["held_out"] for f in result["folds"]] == ["conv-tiny", "conv-tiny-2"]
    assert all(f["chosen"] in ("default", "no-window", "no-mmr") for f in result["folds"])
    assert set(result["systems"]) == {"memory-ext[default]", "memory-ext[no-window]", "memory-ext[no-mmr]",
                                      "memory-ext (held-out)"}
    held = result["systems"]["memory-ext (held-out)"]["micro"]
    assert 0.0 < held["evid_recall@10"] <= 1.0
    # every candidate answered every question of both conversations
    rows = [json.loads(line) for line in (tmp_path / "r.jsonl").read_text(encoding="utf-8").splitlines()]
    assert {r["system"] for r in rows} == {"memory-ext[default]", "memory-ext[no-window]", "memory-ext[no-mmr]"}
    assert len(rows) == 3 * (6 + 2)
    assert "leave-one-conversation-out" in capsys.readouterr().out


def test_folds_need_a_grid_and_two_conversations(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = _two_conversations(tmp_path)
    assert main(["locomo", "--data", str(data), "--embedder", "hashing", "--folds", "loco"]) == 2
    grid = tmp_path / "grid.json"
    grid.write_text(json.dumps({"candidates": {"default": {}}}), encoding="utf-8")
    assert main(["locomo", "--data", str(data), "--embedder", "hashing", "--folds", "loco", "--grid", str(grid),
                 "--conversation-ids", "conv-tiny"]) == 2
    assert main(["locomo", "--data", str(data), "--embedder", "hashing", "--conversation-ids", "conv-nope"]) == 2
    assert "conv-nope" in capsys.readouterr().err
