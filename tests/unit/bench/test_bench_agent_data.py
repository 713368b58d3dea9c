"""The agent data as conversations to ingest whole (``memext bench ingest --data DIR``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memory_ext.bench.agent_data import load_agent_conversations
from memory_ext.bench.datasets import DatasetError
from memory_ext.bench.ingest import run_ingest
from memory_ext.embed import HashingEmbedder

DATA = Path(__file__).resolve().parents[3].parent / "shared" / "data" / "agent_dev"


def make_layout(root: Path) -> Path:
    """A tiny folder in the upstream schemas: a τ-bench trajectory with a failed and a fixed call, two τ²
    documents and a task, a BFCL prereq conversation, and a When2Call item."""
    (root / "tau_bench_airline").mkdir(parents=True)
    call = {"id": "c1", "type": "function", "function": {"name": "book_reservation",
                                                         "arguments": json.dumps({"date": "05/13"})}}
    fixed = {"id": "c2", "type": "function", "function": {"name": "book_reservation",
                                                          "arguments": json.dumps({"date": "2024-05-13"})}}
    traj = [{"role": "system", "content": "# Airline policy\nBe helpful."},
            {"role": "user", "content": "Book me a flight on May 13."},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "c1", "name": "book_reservation",
             "content": "Error: flight HAT123 not available on date 05/13"},
            {"role": "assistant", "content": None, "tool_calls": [fixed]},
            {"role": "tool", "tool_call_id": "c2", "name": "book_reservation", "content": '{"ok": true}'}]
    (root / "tau_bench_airline" / "gpt-4o-airline.json").write_text(json.dumps(
        [{"task_id": 0, "trial": t, "reward": 1.0, "info": {}, "traj": traj} for t in range(2)]))
    docs = root / "tau2_banking_knowledge" / "documents"
    docs.mkdir(parents=True)
    for i in range(2):
        (docs / f"doc_{i}.json").write_text(json.dumps({"id": f"doc_{i}", "title": f"Disputes {i}",
                                                         "content": "Tool arguments for X: - user_id " * 50}))
    (root / "tau2_banking_knowledge" / "tasks.json").write_text(json.dumps(
        [{"id": "task_001", "user_scenario": {"instructions": "You want to dispute a charge."}}]))
    prereq = root / "bfcl" / "memory_prereq_conversation"
    prereq.mkdir(parents=True)
    (prereq / "memory_customer.json").write_text(json.dumps(
        {"id": "memory_prereq_0-customer-0", "question": [[{"role": "user", "content": "My name is Ana."}],
                                                           [{"role": "user", "content": "I live in Porto."}]]}) + "\n")
    (root / "when2call").mkdir()
    (root / "when2call" / "when2call_test_llm_judge.jsonl").write_text(json.dumps(
        {"question": "What's the weather?", "orig_question": "What's the weather in Lisbon?"}) + "\n")
    return root


def test_every_file_becomes_turns(tmp_path: Path) -> None:
    convs = {c.id: c for c in load_agent_conversations(make_layout(tmp_path / "agent"))}
    assert sorted(convs) == ["bfcl", "tau2_banking_knowledge", "tau_bench_airline", "when2call"]
    tau = convs["tau_bench_airline"].turns
    assert sum(t.role == "system" for t in tau) == 1  # the policy once
    assert [t.role for t in tau[1:6]] == ["user", "assistant", "tool", "assistant", "tool"]
    assert "call book_reservation" in tau[2].text and tau[3].speaker == "book_reservation"
    assert {t.session_id for t in tau} == {"tau-0-0", "tau-0-1"}
    assert len(convs["tau2_banking_knowledge"].turns) == 3 and len(convs["bfcl"].turns) == 2
    assert len(convs["when2call"].turns) == 2
    with pytest.raises(DatasetError, match="layout"):
        load_agent_conversations(tmp_path)


def test_the_ingest_bench_indexes_every_turn(tmp_path: Path) -> None:
    convs = load_agent_conversations(make_layout(tmp_path / "agent"))
    result = run_ingest(convs, ["memory-ext", "vector"], HashingEmbedder(64), messages=2, batch=2, batches=1,
                        queries=1)
    mx = result["systems"]["memory-ext"]
    assert mx["turns"] == sum(len(c.turns) for c in convs) == result["systems"]["vector"]["turns"]
    assert mx["without_vector"] == 0 and mx["quarantined"] == 0


@pytest.mark.skipif(not DATA.is_dir(), reason="../shared/data/agent_dev is not here")
def test_the_real_agent_data_loads() -> None:
    convs = {c.id: c for c in load_agent_conversations(DATA)}
    assert len(convs["tau2_banking_knowledge"].turns) >= 698  # every document
    trajectories = json.loads((DATA / "tau_bench_airline" / "gpt-4o-airline.json").read_text())
    results = [m for t in trajectories for m in t["traj"] if m["role"] == "tool" and m["content"].strip()]
    assert sum(t.role == "tool" for t in convs["tau_bench_airline"].turns) == len(results)
