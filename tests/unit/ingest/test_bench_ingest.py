"""``memext bench ingest``: every system writes the same turns; memory-ext is measured until fully indexed."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from memory_ext import HashingEmbedder
from memory_ext.bench.cli import main
from memory_ext.bench.datasets import BenchQuestion, BenchTurn, Conversation
from memory_ext.bench.ingest import format_ingest_markdown, run_ingest

T0 = datetime(2026, 3, 2, 9, 0)
LINES = ["I adopted a beagle called Toby.", "Congratulations, how old is he?", "Two months, he chews everything.",
         "My sister moves to Porto in June.", "Porto is lovely.", "I started the cello again.",
         "Every evening after work?", "Yes, half an hour.", "We booked a trip to Kyoto.", "Temples in spring!"]


def conversations(n_turns: int = 60) -> list[Conversation]:
    turns = [BenchTurn(external_id=f"D{1 + i // 10}:{i % 10 + 1}", text=f"{LINES[i % len(LINES)]} ({i})",
                       speaker="Ana" if i % 2 == 0 else "Ben", role="user" if i % 2 == 0 else "assistant",
                       timestamp=T0 + timedelta(days=i // 10, minutes=i), session_id=f"s{i // 10}")
             for i in range(n_turns)]
    questions = [BenchQuestion(qid=f"q{i}", text=f"What about {w}?", gold=("D1:1",), category="4")
                 for i, w in enumerate(["Toby", "Porto", "the cello", "Kyoto", "work", "spring"])]
    return [Conversation(id="c1", turns=turns, questions=questions, now=T0 + timedelta(days=9))]


def test_every_system_is_measured_side_by_side() -> None:
    systems = ["memory-ext", "vector", "langchain-vector", "llamaindex-vector"]
    result = run_ingest(conversations(), systems, HashingEmbedder(64), messages=5, batch=4, batches=2, queries=3)
    assert result["dataset"] == "ingest" and result["query_embed_ms"]["n"] == 3
    measured = set(result["systems"])
    assert {"memory-ext", "vector"} <= measured
    assert measured | set(result["skipped"]) == set(systems)
    assert not any(str(why).startswith("failed") for why in result["skipped"].values())
    for s in result["systems"].values():
        assert s["message_ms"]["n"] == 5 and s["batch_ms"]["n"] == 2 and s["batch_ms"]["turns"] == 4
        assert s["turns"] == 60 and s["turns_per_s"] > 0 and s["indexed_s"] > 0
    text = format_ingest_markdown(result)
    assert "| memory-ext |" in text and "× vector" in text


def test_the_command_line_writes_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    conv = conversations(40)[0]
    sessions: dict[str, list[dict[str, str]]] = {}
    for t in conv.turns:
        sessions.setdefault(t.session_id or "s0", []).append({"speaker": t.speaker or "", "dia_id": t.external_id,
                                                              "text": t.text})
    body: dict[str, object] = {"speaker_a": "Ana", "speaker_b": "Ben"}
    for i, (_, rows) in enumerate(sessions.items(), start=1):
        body[f"session_{i}"] = rows
        body[f"session_{i}_date_time"] = f"9:00 am on {i} May, 2023"
    data = tmp_path / "locomo.json"
    data.write_text(json.dumps([{"sample_id": "c1", "conversation": body,
                                 "qa": [{"question": "Who is Toby?", "answer": "a beagle", "evidence": ["D1:1"],
                                         "category": 4}]}]))
    out = tmp_path / "ingest.json"
    status = main(["ingest", "--data", str(data), "--embedder", "hashing", "--systems", "memory-ext,vector",
                   "--messages", "3", "--batch", "2", "--batches", "2", "--queries", "1", "--json", str(out)])
    assert status == 0
    saved = json.loads(out.read_text())
    assert set(saved["systems"]) == {"memory-ext", "vector"}
    assert "memext bench ingest" in capsys.readouterr().out
    assert main(["ingest", "--data", str(data), "--systems", "nope"]) == 2


def test_both_durabilities_are_measured_in_one_run() -> None:
    result = run_ingest(conversations(), ["memory-ext:full", "memory-ext:normal"], HashingEmbedder(64), messages=3,
                        batch=4, batches=1, queries=2)
    assert {n: s["durability"] for n, s in result["systems"].items()} == {"memory-ext:full": "full",
                                                                         "memory-ext:normal": "normal"}
    text = format_ingest_markdown(result)
    assert "| memory-ext (durability full) |" in text and "| memory-ext (durability normal) |" in text
