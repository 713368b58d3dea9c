"""The public agent data (``../shared/data/agent_dev``) as conversations to ingest whole (``memext bench ingest
--data DIR``).

Every file of the folder becomes turns, as an agent's memory would receive them:

* ``tau_bench_airline/gpt-4o-airline.json``: each trajectory one session of its messages (the user's, the
  assistant's with their tool calls named in the text, each tool result as a ``tool`` turn); the airline policy
  (the system message, the same in every trajectory) once, as the first conversation's first turn;
* ``tau2_banking_knowledge/documents/*.json``: the knowledge base, one turn per document (``# title`` and its
  markdown), and ``tasks.json``: each task's customer brief as a user turn;
* ``bfcl/memory_prereq_conversation/*.json``: each scenario's earlier sessions (user messages), and
  ``bfcl/BFCL_v4_multi_turn_miss_param.json`` and ``BFCL_v4_memory.json``: each case's user messages;
* ``when2call/when2call_test_llm_judge.jsonl``: each item's question and original question.

One :class:`~memory_ext.bench.datasets.Conversation` per data set (one store each), without questions: this
measures writes and indexing, not retrieval (``memext bench agent`` does that).

>>> from memory_ext.bench.agent_data import load_agent_conversations
>>> load_agent_conversations("/nonexistent")  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
memory_ext.bench.datasets.DatasetError: /nonexistent: not a folder in the layout of shared/data/agent_dev (...)
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .datasets import BenchTurn, Conversation, DatasetError

__all__ = ["load_agent_conversations"]

_FOLDERS = ("tau_bench_airline", "tau2_banking_knowledge", "bfcl", "when2call")


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _tau(path: Path) -> list[BenchTurn]:
    turns: list[BenchTurn] = []
    policy_done = False
    for t in json.loads(path.read_text(encoding="utf-8")):
        session = f"tau-{t['task_id']}-{t['trial']}"
        for i, m in enumerate(t["traj"]):
            role, content = m["role"], m.get("content") or ""
            if role == "system":
                if policy_done:
                    continue
                policy_done = True
            calls = [c["function"] for c in m.get("tool_calls") or []]
            if calls:
                content = (content + "\n" if content else "") + "\n".join(
                    f"call {c['name']}({c.get('arguments', '')})" for c in calls)
            if not content.strip():
                continue
            turns.append(BenchTurn(external_id=f"{session}:{i}", text=content, role=role, session_id=session,
                                   speaker=m.get("name") if role == "tool" else None))
    return turns


def _tau2(folder: Path) -> list[BenchTurn]:
    turns = []
    for path in sorted((folder / "documents").glob("*.json")):
        doc = json.loads(path.read_text(encoding="utf-8"))
        turns.append(BenchTurn(external_id=f"doc:{doc['id']}", text=f"# {doc['title']}\n\n{doc['content']}",
                               role="system", session_id="knowledge-base"))
    tasks = folder / "tasks.json"
    if tasks.exists():
        for task in json.loads(tasks.read_text(encoding="utf-8")):
            brief = _text(task["user_scenario"].get("instructions", ""))
            if brief.strip():
                turns.append(BenchTurn(external_id=f"task:{task['id']}", text=brief, role="user",
                                       session_id=task["id"]))
    return turns


def _bfcl_questions(path: Path, prefix: str) -> list[BenchTurn]:
    turns = []
    lines = path.read_text(encoding="utf-8").splitlines()
    for line in lines:
        if not line.strip():
            continue
        case = json.loads(line)
        for k, group in enumerate(case.get("question") or []):
            for j, m in enumerate(group):
                content = _text(m.get("content", ""))
                if content.strip():
                    turns.append(BenchTurn(external_id=f"{prefix}:{case['id']}:{k}:{j}", text=content,
                                           role=m.get("role", "user"), session_id=f"{prefix}-{case['id']}"))
    return turns


def _bfcl(folder: Path) -> list[BenchTurn]:
    turns: list[BenchTurn] = []
    for path in sorted((folder / "memory_prereq_conversation").glob("*.json")):
        turns += _bfcl_questions(path, "prereq")
    for name, prefix in (("BFCL_v4_multi_turn_miss_param.json", "miss"), ("BFCL_v4_memory.json", "memory")):
        if (folder / name).exists():
            turns += _bfcl_questions(folder / name, prefix)
    return turns


def _when2call(folder: Path) -> list[BenchTurn]:
    turns = []
    for path in sorted(folder.glob("*.jsonl")):
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines()):
            if not line.strip():
                continue
            item = json.loads(line)
            for field in ("orig_question", "question"):
                text = _text(item.get(field, ""))
                if text.strip():
                    turns.append(BenchTurn(external_id=f"w2c:{n}:{field}", text=text, role="user",
                                           session_id=f"w2c-{n}"))
    return turns


def load_agent_conversations(folder: str | Path) -> list[Conversation]:
    """One conversation per data set of an ``agent_dev``-layout folder (those present); see the module docstring."""
    root = Path(folder)
    if not root.is_dir() or not any((root / f).is_dir() for f in _FOLDERS):
        raise DatasetError(f"{folder}: not a folder in the layout of shared/data/agent_dev "
                           f"({', '.join(f + '/' for f in _FOLDERS)})")
    out = []
    tau = root / "tau_bench_airline" / "gpt-4o-airline.json"
    parts = [("tau_bench_airline", _tau(tau) if tau.exists() else []),
             ("tau2_banking_knowledge", _tau2(root / "tau2_banking_knowledge")
              if (root / "tau2_banking_knowledge").is_dir() else []),
             ("bfcl", _bfcl(root / "bfcl") if (root / "bfcl").is_dir() else []),
             ("when2call", _when2call(root / "when2call") if (root / "when2call").is_dir() else [])]
    for name, turns in parts:
        if turns:
            out.append(Conversation(id=name, turns=turns, questions=[], meta={"source": name}))
    return out
