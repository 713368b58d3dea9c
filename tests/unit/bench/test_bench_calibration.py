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


def _row(conv: str, size: int, on_topic: bool, cosine: float, cover: float = 0.0) -> dict[str, object]:
    return {"conversation": conv, "size": size, "on_topic": on_topic, "rank": 1, "gold": on_topic,
            "score": 0.0, "cosine": cosine, "coverage": cover, "fused": None}


def test_rates_and_a_leave_one_out_fit_that_separates_the_classes() -> None:
    rows = []
    for conv in ("a", "b"):
        for size in (3, 0):
            rows += [_row(conv, size, True, 0.85 + 0.002 * i, cover=0.5) for i in range(20)]
            rows += [_row(conv, size, False, 0.76 + 0.002 * i) for i in range(20)]
    assert rates(rows, 0.5) == {"gold_kept": 0.0, "offtopic_dropped": 1.0, "n_gold": 80, "n_offtopic": 80}
    fit = fit_loco(rows)
    for held in fit["held_out"].values():
        for per_size in held["per_size"].values():
            assert per_size["gold_kept"] >= 0.85 and per_size["offtopic_dropped"] == 1.0
    _, scale, _ = fit["all"]
    assert scale > 0  # a higher cosine is more relevant
