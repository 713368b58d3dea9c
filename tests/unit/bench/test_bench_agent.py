"""``memext bench agent`` on a tiny synthetic folder with the layout of ``agent_dev/`` (and on the real dev data
when it is there)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from memory_ext import derive_action_state
from memory_ext.bench.agent import AGENT_SYSTEMS, SUITES, load_agent_data
from memory_ext.bench.cli import main
from memory_ext.plan.derive import turns_from_messages

DEV = Path(__file__).resolve().parents[3].parent / "shared" / "data" / "agent_dev"


def _call(name: str, **args: Any) -> dict[str, Any]:
    return {"role": "assistant", "content": "", "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}]}


def _tool(name: str, content: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": "call_1", "name": name, "content": content}


def _booking(task: int, total: int, paid: int, fixed: bool) -> dict[str, Any]:
    pay = [{"payment_id": "certificate_7504069", "amount": paid}]
    traj = [{"role": "system", "content": "# Airline Agent Policy"},
            {"role": "user", "content": f"Book flight HAT{task}01 from JFK to SEA, one way, economy"},
            _call("get_user_details", user_id=f"user_{task}"), _tool("get_user_details", '{"name": "Mia"}'),
            {"role": "assistant", "content": "The fare is in; shall I book it with your travel certificate?"},
            {"role": "user", "content": "Yes, please go ahead."},
            _call("book_reservation", flights=[f"HAT{task}01"], payment_methods=pay),
            _tool("book_reservation",
                  f"Error: payment amount does not add up, total price is {total}, but paid {paid}")]
    if fixed:
        traj += [_call("think", thought="the certificate does not cover it; add the credit card"), _tool("think", ""),
                 _call("book_reservation", flights=[f"HAT{task}01"],
                       payment_methods=[*pay, {"payment_id": "credit_card_4421486", "amount": total - paid}]),
                 _tool("book_reservation", '{"reservation_id": "HATHAT", "status": "confirmed"}')]
    traj += [{"role": "user", "content": "Thanks! ###STOP###"}]
    return {"task_id": task, "trial": 0, "reward": 1.0 if fixed else 0.0, "info": {}, "traj": traj}


def _jsonl(path: Path, rows: list[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


def make_dir(root: Path) -> Path:
    """A tiny folder with the layout, file names and schemas of agent_dev/."""
    tau = root / "tau_bench_airline"
    tau.mkdir(parents=True)
    (tau / "gpt-4o-airline.json").write_text(json.dumps(
        [_booking(0, 305, 255, True), _booking(2, 880, 500, False), _booking(4, 120, 60, True)]))
    tau2 = root / "tau2_banking_knowledge"
    (tau2 / "documents").mkdir(parents=True)
    docs = {
        "doc_disputes_001": ("Internal: Disputing a transaction", "Verify the customer, then call "
                             "get_user_dispute_history_7291 with user_id before filing a dispute."),
        "doc_cards_001": ("Gold Rewards Card", "Apply with apply_for_credit_card: card_type, customer_name, "
                          "annual_income."),
        "doc_verify_001": ("Identity verification", "Record every verification with log_verification."),
        "doc_branches_001": ("Branch hours", "Branches open at 9 on weekdays."),
    }
    for doc_id, (title, content) in docs.items():
        (tau2 / "documents" / f"{doc_id}.json").write_text(json.dumps({"id": doc_id, "title": title,
                                                                       "content": content}))
    (tau2 / "tasks.json").write_text(json.dumps([{
        "id": "task_001", "description": {}, "user_scenario": {"persona": "", "instructions":
            "You want to dispute a card transaction of $120 you do not recognise."},
        "evaluation_criteria": {"actions": [
            {"action_id": "1_0", "name": "log_verification", "arguments": {"user_id": "u1"}, "requestor": "assistant"},
            {"action_id": "1_1", "name": "unlock_discoverable_agent_tool",
             "arguments": {"agent_tool_name": "get_user_dispute_history_7291"}, "requestor": "assistant"},
            {"action_id": "1_2", "name": "call_discoverable_agent_tool", "arguments": {
                "agent_tool_name": "get_user_dispute_history_7291", "arguments": '{"user_id": "u1"}'},
             "requestor": "assistant"}]},
        "required_documents": ["doc_disputes_001", "doc_verify_001"]}]))
    bfcl = root / "bfcl"
    _jsonl(bfcl / "multi_turn_func_doc" / "gorilla_file_system.json", [
        {"name": "cd", "description": "Change directory", "parameters": {"type": "dict", "properties": {
            "folder": {"type": "string"}}, "required": ["folder"]}, "response": {}},
        {"name": "cat", "description": "Show a file's content", "parameters": {"type": "dict", "properties": {
            "file_name": {"type": "string"}}, "required": ["file_name"]}, "response": {}}])
    _jsonl(bfcl / "BFCL_v4_multi_turn_miss_param.json", [{
        "id": "multi_turn_miss_param_0", "question": [
            [{"role": "user", "content": "Go to the documents folder."}],
            [{"role": "user", "content": "Now show me the content of the file."}],
            [{"role": "user", "content": "The file is called budget_2024.txt"}]],
        "initial_config": {}, "path": [], "involved_classes": ["GorillaFileSystem"]}])
    _jsonl(bfcl / "possible_answer" / "BFCL_v4_multi_turn_miss_param.json", [{
        "id": "multi_turn_miss_param_0", "ground_truth": [["cd(folder='documents')"], [],
                                                          ["cat(file_name='budget_2024.txt')"]]}])
    _jsonl(bfcl / "BFCL_v4_memory.json", [{"id": "memory_0-customer-0", "question": [[
        {"role": "user", "content": "Where do I live?"}]], "involved_classes": ["MemoryAPI"], "scenario": "customer"}])
    _jsonl(bfcl / "possible_answer" / "BFCL_v4_memory.json", [{
        "id": "memory_0-customer-0", "ground_truth": ["Seattle"], "source": "I'm 35 years old, live in Seattle..."}])
    _jsonl(bfcl / "memory_prereq_conversation" / "memory_customer.json", [{
        "id": "memory_prereq_0-customer-0", "topic": "intro", "involved_classes": ["MemoryAPI"],
        "scenario": "customer", "question": [
            [{"role": "user", "content": "Hi! My name is Michael and I want a new espresso machine."}],
            [{"role": "user", "content": "I'm 35 years old, live in Seattle, and work as a designer."}],
            [{"role": "user", "content": "My kitchen counter is only 38 square feet."}]]}])
    tools = [{"name": "Movies_1_FindMovies", "description": "Search movies", "parameters": {
        "type": "dict", "required": ["location"], "properties": {"location": {"type": "string"},
                                                                 "theater_name": {"type": "string"}}}}]
    _jsonl(root / "when2call" / "when2call_test_llm_judge.jsonl", [
        {"uuid": f"u{i}", "source": "BFCL v2 Live Simple", "source_id": f"live_{i}", "question": q,
         "orig_question": o, "correct_answer": "request_for_info", "answers": {},
         "target_tool": json.dumps(tools[0]), "tools": [json.dumps(t) for t in tools], "held_out_param": "location"}
        for i, (q, o) in enumerate([
            ("Any regular movies at Century 20 Oakridge?", "Any regular movies in San Jose at Century 20 Oakridge?"),
            ("What's on at the AMC tonight?", "What's on in Berkeley, CA at the AMC tonight?")])])
    return root


def test_probes_cut_real_message_lists_with_gold_from_other_tasks(tmp_path: Path) -> None:
    data = load_agent_data(make_dir(tmp_path / "data"))
    assert {s: len(p) for s, p in data.probes.items()} == {"failures": 3, "procedures": 3, "slots": 3, "memory": 1}
    failure = next(p for p in data.probes["failures"] if p.id == "tau-2-0-6")
    # task 2's error (no fix of its own) against the other tasks: their fixes of the same error template
    assert failure.gold == {"tau-0-0-9", "tau-4-0-9"}
    assert next(p for p in data.probes["failures"] if p.id == "tau-0-0-6").gold == {"tau-4-0-9"}
    assert failure.messages[-1]["content"].startswith("Error: payment amount does not add up")
    assert all(t.session_id != "tau-2-0" for t in data.memories[failure.memory])
    # procedures: step k's tool is never in the messages, so never in the derived state
    step = next(p for p in data.probes["procedures"] if p.id == "task_001#2")
    assert step.gold == {"doc_disputes_001"}
    assert "get_user_dispute_history_7291" not in json.dumps(step.messages)
    state = derive_action_state(turns_from_messages(step.messages), step.tools)
    assert "get_user_dispute_history_7291" not in state.model_dump_json()
    assert state.last_tool_name == "unlock_discoverable_agent_tool"
    memory = data.probes["memory"][0]
    assert memory.gold == {"memory_prereq_0-customer-0-1-0"}


def test_cli_writes_every_suite_and_system_in_the_issue_shape(tmp_path: Path) -> None:
    out = tmp_path / "agent.json"
    status = main(["agent", "--data", str(make_dir(tmp_path / "data")), "--embedder", "hashing", "--json", str(out),
                   "--folds", "2", "--quiet", "--no-progress"])
    result = json.loads(out.read_text())
    assert status == 0 and not result["failed"]
    assert set(result["systems"]) == set(AGENT_SYSTEMS)
    for name, res in result["systems"].items():
        assert set(res["suites"]) == set(SUITES)
        for suite in SUITES:
            assert set(res["suites"][suite]) == {"hit@1", "hit@3", "hit@10", "mrr", "n"}, (name, suite)
        assert res["latency_ms"]["p95"] >= res["latency_ms"]["p50"] > 0
    assert result["folds"]["memory-ext"]["failures"]["hit@3"].keys() == {"min", "max", "sd"}
    ext, only = result["systems"]["memory-ext"]["suites"], result["systems"]["memory-ext-query-only"]["suites"]
    # the lesson (another task's failure and the retry that worked) answers each failure
    assert ext["failures"]["hit@3"] == 1.0 and ext["failures"]["n"] == only["failures"]["n"] == 3
    assert ext["memory"]["hit@3"] == 1.0


def test_unknown_suite_or_system_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = make_dir(tmp_path / "data")
    assert main(["agent", "--data", str(data), "--suites", "failures,nope", "--embedder", "hashing"]) == 2
    assert "nope" in capsys.readouterr().err
    assert main(["agent", "--data", str(tmp_path / "missing"), "--embedder", "hashing"]) == 2


@pytest.mark.skipif(not DEV.is_dir(), reason="the agent_dev data is not next to the repository")
def test_on_the_dev_data(tmp_path: Path) -> None:
    data = load_agent_data(DEV)
    # the counts the data's README gives (12 scorable errors, 427 procedure steps, 78 memory questions); slots: 50
    # When2Call items and the 59 BFCL miss_param cases whose follow-up states a value the conversation has not given
    # (as a whole word or number)
    assert {s: len(p) for s, p in data.probes.items()} == {"failures": 12, "procedures": 427, "slots": 109,
                                                          "memory": 78}
    out = tmp_path / "agent.json"
    assert main(["agent", "--data", str(DEV), "--suites", "memory", "--systems", "memory-ext,bm25",
                 "--embedder", "hashing", "--json", str(out), "--quiet", "--no-progress"]) == 0
    suites = {n: r["suites"]["memory"] for n, r in json.loads(out.read_text())["systems"].items()}
    assert suites["memory-ext"]["n"] == 78 and suites["memory-ext"]["hit@3"] >= suites["bm25"]["hit@3"] - 0.05


def test_a_slot_value_is_said_as_a_whole_word_or_number() -> None:
    from memory_ext.bench.agent import _says

    assert _says("let's fill it with 30 gallons.", "30") and not _says("the trip is about 300 miles.", "30")
    assert not _says("my token is 'abc123xyz456'.", "abc123xyz") and not _says("username msmith", "smith")
    assert _says("25.50 usd per share.", "25.5") and _says("i want $769 insurance", "769.0")


def test_a_store_cache_gives_the_same_results_without_ingesting_again(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """``--store-cache``: the first run builds and keeps each memory's store; the second copies them (no turn is
    written again) and ranks alike. A store built by other write-side code is not reused."""
    from memory_ext import MemoryEngine
    from memory_ext.bench import agent

    data, cache = make_dir(tmp_path / "data"), tmp_path / "cache"
    args = ["agent", "--data", str(data), "--embedder", "hashing", "--systems", "memory-ext,memory-ext-query-only",
            "--folds", "2", "--quiet", "--no-progress", "--store-cache", str(cache)]
    written: list[int] = []
    add_turns = MemoryEngine.add_turns

    def counting(self: Any, turns: Any, *a: Any, **kw: Any) -> Any:
        written.append(len(turns))
        return add_turns(self, turns, *a, **kw)

    monkeypatch.setattr(MemoryEngine, "add_turns", counting)
    assert main([*args, "--json", str(tmp_path / "a.json")]) == 0
    first = sum(written)
    stores = sorted(p.name for p in cache.iterdir())
    assert first > 0 and stores and all((cache / s / "COMPLETE").is_file() for s in stores)
    assert main([*args, "--json", str(tmp_path / "b.json")]) == 0
    assert sum(written) == first  # nothing ingested again, by either system
    a, b = (json.loads((tmp_path / f).read_text())["systems"] for f in ("a.json", "b.json"))
    assert {n: r["suites"] for n, r in a.items()} == {n: r["suites"] for n, r in b.items()}
    monkeypatch.setattr(agent, "write_side_fingerprint", lambda: "other-code")
    assert main([*args, "--json", str(tmp_path / "c.json")]) == 0
    assert sum(written) > first and len(list(cache.iterdir())) == 2 * len(stores)
