"""``memext bench serve`` end to end on a tiny store (counts only; the latencies are printed, never asserted)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memory_ext.cli import main


def test_bench_serve_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "serve.json"
    status = main(["bench", "serve", "--turns", "60", "--queries", "6", "--clients", "3", "--ops", "4",
                   "--embedder", "hashing", "--workdir", str(tmp_path), "--json", str(out)])
    assert status == 0
    result = json.loads(out.read_text())
    assert result["embedded"]["n"] == result["rest"]["n"] == 6
    concurrent = result["concurrent"]
    assert concurrent["errors"] == 0 and concurrent["lost_writes"] == 0
    assert concurrent["writes"]["n"] + concurrent["searches"]["n"] == 3 * 4
    assert concurrent["acknowledged_writes"] == concurrent["writes"]["n"] == 3
    printed = capsys.readouterr().out
    assert "REST p50 minus embedded p50" in printed and "| search (k=10) |" in printed
    assert list(tmp_path.iterdir()) == [out]  # the store was removed
