"""The small-store suite (``memext bench small``): its data and what it measures."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memory_ext.bench.cli import main
from memory_ext.bench.small import PARTS, load_small_chats, run_small, summarize_small


def test_the_suite_holds_realistic_small_chats_in_two_disjoint_parts() -> None:
    parts = {part: load_small_chats(part) for part in PARTS}
    chats = [c for p in parts.values() for c in p]
    assert len(chats) >= 40
    assert not {c.id for c in parts["dev"]} & {c.id for c in parts["heldout"]}
    assert not {c.turns[0]["content"] for c in parts["dev"]} & {c.turns[0]["content"] for c in parts["heldout"]}
    for part in parts.values():
        assert {c.language for c in part} == {"en", "zh"}
        assert {q.kind for c in part for q in c.questions} >= {"fact", "update", "none"}
    for chat in chats:
        assert 3 <= len(chat.turns) <= 12
        for q in chat.questions:
            if q.kind != "none":
                assert q.answer is not None and chat.turns[q.answer]["role"] == "user"
            if q.kind == "update":
                assert q.replaced is not None and q.replaced < q.answer
                assert chat.turns[q.replaced]["timestamp"] < chat.turns[q.answer]["timestamp"]


def test_the_first_answer_is_the_statement_not_its_acknowledgement_or_the_old_value() -> None:
    chats = [c for c in load_small_chats("dev") if c.id in {"en-allergy", "en-lena", "zh-home", "zh-allergy"}]
    chats += [c for c in load_small_chats("heldout") if c.id in {"en-standup", "zh-meeting", "zh-allergy"}]
    rows = run_small(chats, embedder="e5")
    summary = summarize_small(rows)
    answered = [r for r in rows if r["kind"] in ("fact", "update", "past")]
    assert all(r["ok"] for r in answered), [r for r in answered if not r["ok"]]
    assert summary["repeated_context_lines"] == 0
    assert summary["questions"] == sum(len(c.questions) for c in chats)


def test_memext_bench_small_reports_each_part(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "small.json"
    rows = tmp_path / "rows.jsonl"
    assert main(["small", "--part", "dev", "--embedder", "hashing", "--json", str(out), "--rows", str(rows)]) == 0
    result = json.loads(out.read_text(encoding="utf-8"))
    assert list(result["parts"]) == ["dev"]
    assert {"fact_p@1", "update_acc", "no_answer<0.5", "repeated_context_lines"} <= set(result["parts"]["dev"])
    lines = rows.read_text(encoding="utf-8").splitlines()
    assert len(lines) == result["parts"]["dev"]["questions"]
    assert "| dev |" in capsys.readouterr().out
    assert main(["small", "--part", "test", "--embedder", "hashing"]) == 2
