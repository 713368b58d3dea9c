"""``memext bench store`` runs and reports the LangGraph store's put / update / delete cost (the cost itself is
read from the benchmark, never asserted in a unit test)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memory_ext.cli import main


def test_bench_store_reports_every_operation(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("langgraph")
    out = tmp_path / "store.json"
    assert main(["bench", "store", "--items", "40", "--ops", "3", "--json", str(out), "--workdir", str(tmp_path)]) == 0
    result = json.loads(out.read_text(encoding="utf-8"))
    assert result["items"] == 40 and set(result["timings"]) == {"put", "update", "delete"}
    assert all(t["p50_ms"] > 0 for t in result["timings"].values()) and result["delete_vs_put"] > 0
    assert "| delete |" in capsys.readouterr().out
    assert list(tmp_path.iterdir()) == [out]  # the store it built is removed
