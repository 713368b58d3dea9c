"""``memext bench calibration``: keep/drop rates of a score threshold across store sizes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memory_ext.bench.calibration import fit_loco, rates
from memory_ext.bench.cli import main
from memory_ext.bench.datasets import load_locomo
from tests.unit.bench.test_bench_smoke import _locomo_file


def _two_conversations(tmp_path: Path) -> Path:
    one = json.loads(_locomo_file(tmp_path).read_text(encoding="utf-8"))[0]
    two = json.loads(json.dumps(one))
    two["sample_id"] = "conv-other"
    for session in ("session_1", "session_2"):
        for turn in two["conversation"][session]:
            turn["text"] = turn["text"].replace("Miso", "Pixel").replace("Lisbon", "Oslo")
    path = tmp_path / "two.json"
    path.write_text(json.dumps([one, two]), encoding="utf-8")
    return path


def test_calibration_command_reports_every_size(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = _two_conversations(tmp_path)
    out, rows_out = tmp_path / "cal.json", tmp_path / "rows.jsonl"
    status = main(["calibration", "--data", str(data), "--embedder", "hashing", "--sizes", "3,full",
                   "--per-size", "2", "--k", "3", "--json", str(out), "--rows", str(rows_out), "--no-progress"])
    assert status == 0
    result = json.loads(out.read_text(encoding="utf-8"))
    assert set(result["curve"]) == {"3", "0"}
    rows = [json.loads(line) for line in rows_out.read_text(encoding="utf-8").splitlines()]
    assert {r["conversation"] for r in rows} == {c.id for c in load_locomo(data)}
    assert {r["size"] for r in rows} == {3, 0}
    assert all(0.0 <= r["score"] <= 1.0 and 1 <= r["rank"] <= 3 for r in rows)
    assert any(r["on_topic"] for r in rows) and any(not r["on_topic"] for r in rows)
    assert not any(r["gold"] for r in rows if not r["on_topic"])
    assert "| full |" in capsys.readouterr().out


def test_calibration_needs_two_conversations(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["calibration", "--data", str(_locomo_file(tmp_path)), "--embedder", "hashing",
                 "--no-progress"]) == 2
    assert "two conversations" in capsys.readouterr().err


def _row(conv: str, size: int, on_topic: bool, cosine: float, cover: float = 0.0, *, near: bool = False,
         reference: float | None = None) -> dict[str, object]:
    return {"conversation": conv, "size": size, "on_topic": on_topic, "near": near, "rank": 1, "gold": on_topic,
            "score": 0.0, "cosine": cosine, "coverage": cover, "fused": None, "reference": reference}


def test_rates_and_a_leave_one_out_fit_that_separates_the_classes() -> None:
    rows = []
    for conv in ("a", "b"):
        for size in (3, 0):
            rows += [_row(conv, size, True, 0.85 + 0.002 * i, cover=0.5) for i in range(20)]
            rows += [_row(conv, size, False, 0.76 + 0.002 * i) for i in range(20)]
    first = rates(rows, 0.5)
    assert (first["gold_kept"], first["offtopic_dropped"], first["n_gold"], first["n_offtopic"]) == (0.0, 1.0, 80, 80)
    assert first["n_absent"] == 0
    fit = fit_loco(rows, extra=())
    for held in fit["held_out"].values():
        for per_size in held["per_size"].values():
            assert per_size["gold_kept"] >= 0.85 and per_size["offtopic_dropped"] == 1.0
    assert fit["all"]["scale"] > 0  # a higher cosine is more relevant


def test_the_reference_tells_a_question_whose_answer_is_absent_from_one_answered() -> None:
    """Gold items and the first results of questions without their answer have the same cosines; the questions
    without an answer sit closer to the reference (replies that say nothing). The fit learns to read it and drops
    them held out, keeping the gold."""
    rows = []
    for conv in ("a", "b"):
        for size in (3, 10):
            rows += [_row(conv, size, True, 0.86 + 0.002 * i, reference=0.76 + 0.001 * i) for i in range(20)]
            rows += [_row(conv, size, False, 0.86 + 0.002 * i, near=True, reference=0.84 + 0.001 * i)
                     for i in range(20)]
            rows += [_row(conv, size, False, 0.76 + 0.002 * i, reference=0.76) for i in range(20)]
    without, with_reference = fit_loco(rows, extra=(), near_weight=0.5), fit_loco(rows, near_weight=0.5)
    assert with_reference["all"]["reference_logit"] > 0 and without["all"]["reference_logit"] == 0
    for held in with_reference["held_out"].values():
        for per_size in held["per_size"].values():
            assert per_size["gold_kept"] == 1.0 and per_size["absent_dropped"] == 1.0
    assert any(per_size["absent_dropped"] < 0.5 for held in without["held_out"].values()
               for per_size in held["per_size"].values())


def test_calibration_refits_from_the_rows_of_an_earlier_run(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    rows = [_row(conv, size, on, 0.85 + 0.002 * i if on else 0.76 + 0.002 * i, reference=0.8)
            for conv in ("a", "b") for size in (3, 0) for on in (True, False) for i in range(10)]
    path = tmp_path / "rows.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    out = tmp_path / "fit.json"
    assert main(["calibration", "--from-rows", str(path), "--fit", "--embedder", "hashing", "--json", str(out)]) == 0
    fit = json.loads(out.read_text(encoding="utf-8"))["fit"]
    assert set(fit["held_out"]) == {"a", "b"} and fit["all"]["scale"] > 0
    assert "Fit on every conversation" in capsys.readouterr().out
    assert main(["calibration", "--embedder", "hashing"]) == 2
    assert "--from-rows" in capsys.readouterr().err
