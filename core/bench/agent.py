"""``memext bench agent``: memory that serves an agent's next action, on public agent data.

Each probe is a real message list cut at a decision point; every system answers it from the same memory:

* ``failures`` (τ-bench airline, ``tau_bench_airline/gpt-4o-airline.json``): a trajectory cut right after a tool
  error (a result starting with ``Error``); the memory holds the tool-call and tool-result turns of the other
  tasks' trajectories (calls and results paired by position: gpt-4o reuses call ids in this file, so the ids are
  dropped); gold: the call that fixed the same error (same tool, same message with digit-holding words masked) in
  another task's trajectory — the first later successful call of that tool. Errors without such a fix are not
  scored.
* ``procedures`` (τ²-bench ``banking_knowledge``): at gold step k of a task, the messages are the task's
  ``instructions`` (the user's request) and the gold calls of steps 1..k-1 (any mention of step k's tool redacted);
  the memory is the 698 knowledge documents, given as manuals are given to an agent through the public API:
  :meth:`MemoryEngine.add_turns <memory_ext.MemoryEngine.add_turns>`, one ``system`` turn per document
  (``"title\\n\\ncontent"``, ``external_id`` = the document id, a session of its own so no window blends two
  documents); gold: the task's ``required_documents`` that name step k's tool.
* ``slots``: When2Call ``request_for_info`` (the question with a required parameter removed and the tools'
  schemas; memory: every item's ``orig_question`` as an earlier session; gold: this item's) and BFCL v4
  ``multi_turn_miss_param`` (cut at the user turn whose gold answer is empty, after the earlier turns and their
  gold calls; the classes' function docs as tools; memory: every case's next user turn, the one that supplies
  the parameter, as an earlier session; scored where that turn states a value of the next gold call literally,
  as a whole word or number, that the conversation has not given; gold: the memory turns that state it so).
* ``memory`` (BFCL v4 ``memory``): a question against the user turns of its scenario's prereq conversations;
  gold: the turns covering at least 80 % of the words of the answer's ``source``.

Systems: ``memory-ext`` (the engine; the query is the latest user message and the action state is derived from
the probe's messages and tools by :func:`memory_ext.derive_action_state`, the code the middleware runs — never
filled by hand), ``memory-ext-query-only`` (the latest user message, no state), and ``bm25``, ``vector``,
``langchain-ensemble`` (:mod:`memory_ext.bench.systems`) on the recent messages' text (the state's
``recent_context``, the readable last turns). An item is a hit when one of its turns is gold (a lesson covers
its error, both calls and the fix's result). Metrics per suite: hit@1/3/10, MRR (within 10) and ``n``; latency
per decision point (derivation + search for memory-ext, search for the baselines). Spread: probe i of a suite
goes to fold ``i % folds``; each fold's metrics are reported.

>>> mask_digits("Error: flight HAT123 not available on date 2024-05-13")
'Error: flight # not available on date #'
>>> parse_call("mv(source='a.pdf', destination='temp')", {})
('mv', {'source': 'a.pdf', 'destination': 'temp'})
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import re
import shutil
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from ..text.tokenize import EN_STOP_WORDS
from .datasets import BenchTurn
from .metrics import percentile

__all__ = ["AGENT_SYSTEMS", "SUITES", "AgentData", "Probe", "load_agent_data", "mask_digits", "parse_call",
           "run_agent_bench", "format_agent_markdown"]

SUITES = ("failures", "procedures", "slots", "memory")
AGENT_SYSTEMS = ("memory-ext", "memory-ext-query-only", "bm25", "vector", "langchain-ensemble")
DEPTH = 10
"""Rankings are scored to this depth (hit@10, MRR within 10)."""
T0 = datetime(2026, 1, 5, 9, tzinfo=UTC)
_WORDS = re.compile(r"[a-z0-9]+")
_BFCL_CLASS_FILES = {"GorillaFileSystem": "gorilla_file_system.json", "MathAPI": "math_api.json",
                     "MessageAPI": "message_api.json", "TwitterAPI": "posting_api.json",
                     "TicketAPI": "ticket_api.json", "TradingBot": "trading_bot.json",
                     "TravelAPI": "travel_booking.json", "VehicleControlAPI": "vehicle_control.json"}


class AgentDataError(ValueError):
    """The data folder does not have the layout of ``agent_dev/`` (a file is missing or unreadable)."""


@dataclass(frozen=True)
class MemTurn:
    """One memory turn: what memory-ext ingests (role, content, tool fields) and what the baselines index."""

    external_id: str
    role: str
    content: str
    session_id: str
    tool_calls: tuple[dict[str, Any], ...] = ()
    tool_name: str | None = None
    is_error: bool = False

    @property
    def document(self) -> str:
        """The baselines' text: the content, a call as ``name {arguments}``, a result as ``name: content``."""
        calls = " ".join(f"{c['name']} {json.dumps(c.get('arguments') or {}, ensure_ascii=False)}"
                         for c in self.tool_calls)
        head = f"{self.tool_name}: " if self.tool_name else ""
        return " ".join(p for p in (head + self.content, calls) if p.strip())


@dataclass(frozen=True)
class Probe:
    """A decision point: the agent's messages so far (OpenAI chat format), its tools, the memory it searches
    and the gold turn ids."""

    suite: str
    id: str
    memory: str
    messages: tuple[dict[str, Any], ...]
    gold: frozenset[str]
    tools: tuple[dict[str, Any], ...] | None = None


@dataclass
class AgentData:
    """The memories (by key) and the probes of every suite."""

    memories: dict[str, list[MemTurn]] = field(default_factory=dict)
    probes: dict[str, list[Probe]] = field(default_factory=dict)


def mask_digits(text: str) -> str:
    """The error template: every word holding a digit becomes ``#``."""
    return re.sub(r"\S*\d\S*", "#", text.strip())


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise AgentDataError(f"cannot read {path}: {exc}") from None


def _read_jsonl(path: Path) -> list[Any]:
    try:
        return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    except (OSError, ValueError) as exc:
        raise AgentDataError(f"cannot read {path}: {exc}") from None


# ------------------------------------------------------------------------------------------ failures (τ-bench)


def _tau_messages(traj: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The trajectory without the system policy and with call ids dropped (calls and results pair by position)."""
    out = []
    for m in traj:
        if m.get("role") == "system":
            continue
        m = {k: v for k, v in m.items() if k != "tool_call_id"}
        if m.get("tool_calls"):
            m["tool_calls"] = [{k: v for k, v in c.items() if k != "id"} for c in m["tool_calls"]]
        out.append(m)
    return out


def _call_of(m: Mapping[str, Any]) -> tuple[str, dict[str, Any]] | None:
    calls = m.get("tool_calls") or []
    if not calls:
        return None
    fn = calls[0].get("function") or {}
    try:
        args = json.loads(fn.get("arguments") or "{}")
    except ValueError:
        args = {}
    return str(fn.get("name") or ""), args if isinstance(args, dict) else {}


def _load_failures(root: Path, data: AgentData) -> None:
    trajs = _read_json(root / "tau_bench_airline" / "gpt-4o-airline.json")
    runs = []  # (task, trial, messages, [(call index, tool, args, result text)])
    for t in trajs:
        msgs = _tau_messages(t["traj"])
        steps = []
        for i, m in enumerate(msgs[:-1]):
            call = _call_of(m)
            if call is not None and msgs[i + 1].get("role") == "tool":
                steps.append((i, call[0], call[1], str(msgs[i + 1].get("content") or "")))
        runs.append((int(t["task_id"]), int(t["trial"]), msgs, steps))

    def ext(task: int, trial: int, i: int) -> str:
        return f"tau-{task}-{trial}-{i}"

    turns_of: dict[int, list[MemTurn]] = {}
    for task, trial, msgs, steps in runs:
        for i, tool, args, result in steps:
            sid = f"tau-{task}-{trial}"
            turns_of.setdefault(task, []).extend([
                MemTurn(ext(task, trial, i), "assistant", str(msgs[i].get("content") or ""), sid,
                        ({"name": tool, "arguments": args},)),
                MemTurn(ext(task, trial, i + 1), "tool", result, sid, tool_name=tool)])
    # fixes: (tool, template) -> call turns that followed that error with a success of the same tool
    fixes: dict[tuple[str, str], list[tuple[int, str]]] = {}
    for task, trial, _msgs, steps in runs:
        for n, (_i, tool, _args, result) in enumerate(steps):
            if not result.startswith("Error"):
                continue
            fix = next((j for j, t2, _a, r in steps[n + 1:] if t2 == tool and not r.startswith("Error")), None)
            if fix is not None:
                fixes.setdefault((tool, mask_digits(result)), []).append((task, ext(task, trial, fix)))
    probes = []
    for task, trial, msgs, steps in runs:
        for i, tool, _args, result in steps:
            if not result.startswith("Error"):
                continue
            gold = frozenset(e for other, e in fixes.get((tool, mask_digits(result)), []) if other != task)
            if not gold:
                continue
            key = f"failures:not-{task}"
            if key not in data.memories:
                data.memories[key] = [t for other, ts in sorted(turns_of.items()) if other != task for t in ts]
            probes.append(Probe("failures", ext(task, trial, i + 1), key, tuple(msgs[:i + 2]), gold))
    data.probes["failures"] = probes


# ------------------------------------------------------------------------------------------ procedures (τ²)


def _real_tool(action: Mapping[str, Any]) -> str:
    args = action.get("arguments") or {}
    for key in ("agent_tool_name", "discoverable_tool_name"):
        if isinstance(args.get(key), str) and args[key]:
            return str(args[key])
    return str(action.get("name") or "")


def _redact(value: Any, name: str) -> Any:
    if isinstance(value, str):
        return value.replace(name, "[hidden]")
    if isinstance(value, Mapping):
        return {k: _redact(v, name) for k, v in value.items()}
    if isinstance(value, list):
        return [_redact(v, name) for v in value]
    return value


def _load_procedures(root: Path, data: AgentData) -> None:
    folder = root / "tau2_banking_knowledge"
    docs = {}
    for path in sorted((folder / "documents").glob("*.json")):
        d = _read_json(path)
        docs[path.stem] = (str(d.get("title") or ""), str(d.get("content") or ""))
    if not docs:
        raise AgentDataError(f"no documents in {folder / 'documents'}")
    data.memories["procedures"] = [MemTurn(doc_id, "system", f"{title}\n\n{content}", doc_id)
                                   for doc_id, (title, content) in docs.items()]
    probes = []
    for task in _read_json(folder / "tasks.json"):
        actions = (task.get("evaluation_criteria") or {}).get("actions") or []
        intent = str((task.get("user_scenario") or {}).get("instructions") or "")
        required = [d for d in task.get("required_documents") or [] if d in docs]
        for k, action in enumerate(actions):
            tool = _real_tool(action)
            gold = frozenset(d for d in required if tool and tool in docs[d][0] + "\n" + docs[d][1])
            if not gold:
                continue
            msgs: list[dict[str, Any]] = [{"role": "user", "content": intent}]
            for prev in actions[:k]:
                args = _redact(prev.get("arguments") or {}, tool)
                msgs.append({"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": {
                    "name": _redact(str(prev.get("name") or ""), tool), "arguments": json.dumps(args)}}]})
            probes.append(Probe("procedures", f"{task['id']}#{k}", "procedures", tuple(msgs), gold))
    data.probes["procedures"] = probes


# ------------------------------------------------------------------------------------------ slots


def _tool_spec(doc: Mapping[str, Any]) -> dict[str, Any]:
    params = dict(doc.get("parameters") or {})
    if params.get("type") == "dict":
        params["type"] = "object"
    return {"name": doc["name"], "description": doc.get("description") or "", "parameters": params}


def parse_call(text: str, docs: Mapping[str, Mapping[str, Any]]) -> tuple[str, dict[str, Any]] | None:
    """A BFCL gold call in Python syntax (``"func(arg=value, ...)"``) as ``(name, arguments)``; positional
    arguments are named after the function doc's parameters, in order. None when it does not parse."""
    try:
        node = ast.parse(text.strip(), mode="eval").body
    except SyntaxError:
        return None
    if not isinstance(node, ast.Call):
        return None
    name = ast.unparse(node.func)
    names = list(((docs.get(name) or {}).get("parameters") or {}).get("properties") or {})
    args: dict[str, Any] = {}
    try:
        for i, a in enumerate(node.args):
            args[names[i] if i < len(names) else f"arg{i}"] = ast.literal_eval(a)
        for kw in node.keywords:
            if kw.arg:
                args[kw.arg] = ast.literal_eval(kw.value)
    except ValueError:
        return None
    return name, args


def _says(text: str, value: str) -> bool:
    """Whether ``text`` states ``value`` as a whole: not inside a longer word or number ("30" is not said by "300
    miles", "abc123xyz" not by "abc123xyz456", "smith" not by "msmith").

    A number is said by any writing of the same number ("25.50" says 25.5).

    >>> _says("i think the total trip is about 300 miles.", "30"), _says("let's fill it with 30 gallons.", "30")
    (False, True)
    >>> _says("25.50 usd per share you should purchase at.", "25.5")
    True
    """
    if re.search(rf"(?<!\w){re.escape(value)}(?!\w)", text):
        return True
    try:
        number = float(value)
    except ValueError:
        return False
    numbers = re.findall(r"(?<![\w.])\d[\d,]*(?:\.\d+)?(?![\w.]\w)", text)
    return any(float(n.replace(",", "")) == number for n in numbers)


def _load_slots(root: Path, data: AgentData) -> None:
    probes = []
    items = _read_jsonl(root / "when2call" / "when2call_test_llm_judge.jsonl")
    data.memories["slots:when2call"] = [MemTurn(f"w2c-{it['uuid']}", "user", str(it["orig_question"]),
                                                f"w2c-{it['uuid']}") for it in items]
    for it in items:
        tools = tuple(_tool_spec(json.loads(t)) for t in it.get("tools") or [])
        probes.append(Probe("slots", f"w2c-{it['uuid']}", "slots:when2call",
                            ({"role": "user", "content": str(it["question"])},),
                            frozenset({f"w2c-{it['uuid']}"}), tools))
    bfcl = root / "bfcl"
    cases = _read_jsonl(bfcl / "BFCL_v4_multi_turn_miss_param.json")
    answers = {a["id"]: a for a in _read_jsonl(bfcl / "possible_answer" / "BFCL_v4_multi_turn_miss_param.json")}
    doc_cache: dict[str, list[dict[str, Any]]] = {}
    memory: list[MemTurn] = []
    pending: list[tuple[str, tuple[dict[str, Any], ...], set[str], tuple[dict[str, Any], ...]]] = []
    for case in cases:
        gt = (answers.get(case["id"]) or {}).get("ground_truth") or []
        turns = case.get("question") or []
        m = next((j for j, calls in enumerate(gt) if not calls and j + 1 < len(turns)), None)
        if m is None:
            continue
        docs: dict[str, dict[str, Any]] = {}
        for cls in case.get("involved_classes") or []:
            file = _BFCL_CLASS_FILES.get(cls)
            if file is None:
                continue
            if file not in doc_cache:
                doc_cache[file] = _read_jsonl(bfcl / "multi_turn_func_doc" / file)
            docs.update({d["name"]: d for d in doc_cache[file]})
        msgs: list[dict[str, Any]] = []
        for j in range(m):
            msgs += [dict(x) for x in turns[j]]
            for call_text in gt[j]:
                call = parse_call(call_text, docs)
                if call is not None:
                    msgs.append({"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": {
                        "name": call[0], "arguments": json.dumps(call[1])}}]})
        msgs += [dict(x) for x in turns[m]]
        follow = " ".join(str(x.get("content") or "") for x in turns[m + 1])
        ext = f"{case['id']}-followup"
        memory.append(MemTurn(ext, "user", follow, ext))
        # the missing values: arguments of the next turn's gold calls that the follow-up states literally (as a
        # whole word or number: "30" is not in "300 miles"; not a function word such as "on", which any turn says)
        # and the conversation so far does not
        said = json.dumps(msgs).lower()
        values = set()
        for call_text in gt[m + 1]:
            call = parse_call(call_text, docs)
            for v in (call[1].values() if call else ()):
                v = str(v).lower() if isinstance(v, (str, int, float)) and not isinstance(v, bool) else ""
                if len(v) >= 2 and v not in EN_STOP_WORDS and _says(follow.lower(), v) and not _says(said, v):
                    values.add(v)
        if values:
            pending.append((case["id"], tuple(msgs), values, tuple(_tool_spec(d) for d in docs.values())))
    for case_id, msgs_t, values, tools_t in pending:
        gold = frozenset(t.external_id for t in memory if any(_says(t.content.lower(), v) for v in values))
        probes.append(Probe("slots", case_id, "slots:bfcl", msgs_t, gold, tools_t))
    data.memories["slots:bfcl"] = memory
    data.probes["slots"] = probes


# ------------------------------------------------------------------------------------------ memory (BFCL)


def _words(text: str) -> set[str]:
    return set(_WORDS.findall(text.lower()))


def _load_memory(root: Path, data: AgentData) -> None:
    bfcl = root / "bfcl"
    questions = _read_jsonl(bfcl / "BFCL_v4_memory.json")
    answers = {a["id"]: a for a in _read_jsonl(bfcl / "possible_answer" / "BFCL_v4_memory.json")}
    probes = []
    for q in questions:
        scenario = str(q.get("scenario") or "")
        key = f"memory:{scenario}"
        if key not in data.memories:
            turns = []
            for conv in _read_jsonl(bfcl / "memory_prereq_conversation" / f"memory_{scenario}.json"):
                for j, turn in enumerate(conv.get("question") or []):
                    for n, msg in enumerate(turn):
                        if msg.get("role") == "user" and str(msg.get("content") or "").strip():
                            turns.append(MemTurn(f"{conv['id']}-{j}-{n}", "user", str(msg["content"]), conv["id"]))
            data.memories[key] = turns
        source = _words(" ".join(str((answers.get(q["id"]) or {}).get("source") or "").split("...")))
        if not source:
            continue
        gold = frozenset(t.external_id for t in data.memories[key]
                         if len(source & _words(t.content)) >= 0.8 * len(source))
        if gold:
            msgs = tuple(dict(m) for turn in q.get("question") or [] for m in turn)
            probes.append(Probe("memory", q["id"], key, msgs, gold))
    data.probes["memory"] = probes


def load_agent_data(root: Path, suites: Sequence[str] = SUITES) -> AgentData:
    """The memories and probes of ``suites`` from a folder with the layout of ``agent_dev/``."""
    root = Path(root)
    if not root.is_dir():
        raise AgentDataError(f"{root} is not a folder (give the agent_dev data folder)")
    data = AgentData()
    loaders: dict[str, Callable[[Path, AgentData], None]] = {
        "failures": _load_failures, "procedures": _load_procedures, "slots": _load_slots, "memory": _load_memory}
    for suite in suites:
        if suite not in loaders:
            raise AgentDataError(f"unknown suite {suite!r}; valid suites: {', '.join(SUITES)}")
        loaders[suite](root, data)
    return data


# ------------------------------------------------------------------------------------------ systems


_READ_SIDE = ("bench", "server", "retrieval", "recall")
"""Parts of the package that never write a store (nothing under ``ingest``, ``store``, ``lifecycle`` or ``rank``
imports them): a change there keeps the cached stores of ``--store-cache``."""


def write_side_fingerprint() -> str:
    """A digest of the engine's source that can shape what a store holds after ingest: every module of the package
    but the read side (:data:`_READ_SIDE`, the CLI and the client). A cached store built by other code is never
    reused."""
    root = Path(__file__).resolve().parents[1]
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root)
        if rel.parts[0] in _READ_SIDE or rel.name in ("cli.py", "client.py"):
            continue
        digest.update(str(rel).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


class _MemoryExt:
    """The engine, one fresh store per memory; searches with the derived action state (or without it).

    With ``cache`` (``--store-cache DIR``) a memory's store, once built and fully indexed, is kept in ``DIR`` under
    a digest of its turns, the embedder, the configuration and :func:`write_side_fingerprint`; a later run (or the
    other memory-ext system) copies it instead of ingesting again — the e5 stores of the procedures and failures
    suites take about half an hour each on a busy 2-core machine. Searches then start on a store opened afresh."""

    def __init__(self, embedder: Any, config: Any, derived: bool, workdir: Path, cache: Path | None = None) -> None:
        from memory_ext import MemoryEngine

        self._open = MemoryEngine.open
        self.embedder, self.config, self.derived, self.workdir = embedder, config, derived, workdir
        self.cache = cache
        self.engine: Any = None

    def _cached(self, slug: str, turns: Sequence[MemTurn]) -> Path:
        digest = hashlib.sha256()
        config = self.config.model_dump_json() if hasattr(self.config, "model_dump_json") else repr(self.config)
        for part in (getattr(self.embedder, "id", repr(self.embedder)), config, write_side_fingerprint()):
            digest.update(part.encode())
        for t in turns:
            digest.update(json.dumps([t.role, t.content, t.session_id, t.external_id, t.tool_calls, t.tool_name,
                                      t.is_error], sort_keys=True, default=str).encode())
        assert self.cache is not None
        return self.cache / f"{slug}-{digest.hexdigest()[:20]}"

    def ingest(self, key: str, turns: Sequence[MemTurn]) -> None:
        from memory_ext import Turn

        self.close()
        kwargs: dict[str, Any] = {"config": self.config}
        if self.embedder is not None:
            kwargs["embedder"] = self.embedder
        slug = re.sub(r"\W", "_", key)
        path = self.workdir / slug
        cached = self._cached(slug, turns) if self.cache is not None else None
        if cached is not None and (cached / "COMPLETE").is_file():
            shutil.copytree(cached, path, ignore=shutil.ignore_patterns("COMPLETE", "LOCK"))
            self.engine = self._open(path, **kwargs)
            return
        self.engine = self._open(path, **kwargs)
        batch = [Turn(role=t.role, content=t.content or ("" if t.tool_calls else "(empty)"),
                      session_id=t.session_id, external_id=t.external_id,
                      timestamp=T0 + timedelta(seconds=n), tool_calls=t.tool_calls, tool_name=t.tool_name,
                      is_error=t.is_error) for n, t in enumerate(turns)]
        for start in range(0, len(batch), 500):
            self.engine.add_turns(batch[start:start + 500], "bench", wait=True)
        if cached is not None:  # kept once complete; searches start on the store opened afresh, as from the cache
            self.engine.flush()
            self.engine.close()
            partial = cached.with_name(f"{cached.name}.part{os.getpid()}")
            shutil.rmtree(partial, ignore_errors=True)
            shutil.copytree(path, partial, ignore=shutil.ignore_patterns("LOCK"))
            (partial / "COMPLETE").write_text(f"{len(turns)} turns\n")
            if not cached.exists():
                partial.rename(cached)
            shutil.rmtree(partial, ignore_errors=True)
            self.engine = self._open(path, **kwargs)

    def query(self, probe: Probe) -> list[tuple[str, ...]]:
        from memory_ext import derive_action_state
        from memory_ext.plan.derive import turns_from_messages

        turns = turns_from_messages(probe.messages)
        users = [t.content for t in turns if t.role.value == "user" and t.content.strip()]
        query = users[-1] if users else (turns[-1].content if turns else "")
        state = derive_action_state(turns, probe.tools) if self.derived else None
        result = self.engine.search(query, "bench", k=DEPTH, action_state=state)
        return [tuple(e for e in item.external_ids if e) for item in result.items]

    def close(self) -> None:
        if self.engine is not None:
            self.engine.close()
            self.engine = None


class _Baseline:
    """A :mod:`memory_ext.bench.systems` baseline on the recent messages' text."""

    def __init__(self, name: str, embedder: Any) -> None:
        from .systems import build_system

        self.system = build_system(name, embedder, DEPTH)

    def ingest(self, key: str, turns: Sequence[MemTurn]) -> None:
        self.system.ingest(key, [BenchTurn(external_id=t.external_id, text=t.document, role=t.role,
                                           session_id=t.session_id) for t in turns])

    def query(self, probe: Probe) -> list[tuple[str, ...]]:
        return [(e,) for e in self.system.query(recent_text(probe), DEPTH)]

    def close(self) -> None:
        self.system.close()


def recent_text(probe: Probe) -> str:
    """The baselines' query: the recent messages as readable lines (the derived state's ``recent_context``)."""
    from memory_ext import derive_action_state
    from memory_ext.plan.derive import turns_from_messages

    return derive_action_state(turns_from_messages(probe.messages)).recent_context or ""


# ------------------------------------------------------------------------------------------ scoring


def _rank(items: Sequence[tuple[str, ...]], gold: frozenset[str]) -> int | None:
    seen: set[str] = set()
    n = 0
    for ids in items:
        if not ids or set(ids) <= seen:
            continue  # an item whose turns were all shown already
        seen.update(ids)
        n += 1
        if gold & set(ids):
            return n
        if n >= DEPTH:
            break
    return None


def _metrics(ranks: Sequence[int | None]) -> dict[str, float]:
    n = len(ranks)
    if not n:
        return {"hit@1": 0.0, "hit@3": 0.0, "hit@10": 0.0, "mrr": 0.0, "n": 0}
    return {"hit@1": sum(r is not None and r <= 1 for r in ranks) / n,
            "hit@3": sum(r is not None and r <= 3 for r in ranks) / n,
            "hit@10": sum(r is not None and r <= 10 for r in ranks) / n,
            "mrr": sum(1.0 / r for r in ranks if r is not None) / n, "n": n}


def _spread(ranks: Sequence[int | None], folds: int) -> dict[str, Any]:
    per = [_metrics([r for i, r in enumerate(ranks) if i % folds == f]) for f in range(folds)]
    per = [p for p in per if p["n"]]
    out: dict[str, Any] = {"per_fold": per}
    for key in ("hit@1", "hit@3", "hit@10", "mrr"):
        values = [p[key] for p in per]
        out[key] = {"min": min(values, default=0.0), "max": max(values, default=0.0),
                    "sd": statistics.pstdev(values) if len(values) > 1 else 0.0}
    return out


def run_agent_bench(data: AgentData, systems: Sequence[str] = AGENT_SYSTEMS, *, embedder: Any = None,
                    config: Any = None, folds: int = 5, workdir: Path,
                    progress: Callable[[str], None] | None = None,
                    store_cache: Path | None = None) -> dict[str, Any]:
    """Every system on every probe of ``data``, the systems interleaved (each probe is asked of every system in
    turn, the first one rotating, so a busy machine slows them alike): ``{"systems": {name: {"suites": {suite:
    metrics}, "latency_ms": {...}, "sources": {memory key: metrics}}}, "folds": {name: {suite: spread}},
    "failed": {name: error}}`` (``sources``: the slots suite by data source,
    When2Call and BFCL, when both are there). ``store_cache``: a folder keeping memory-ext's built stores between
    runs (see :class:`_MemoryExt`)."""
    out: dict[str, Any] = {"systems": {}, "folds": {}, "failed": {}}
    by_memory: dict[str, list[Probe]] = {}
    for suite in data.probes:
        for p in data.probes[suite]:
            by_memory.setdefault(p.memory, []).append(p)
    ranks: dict[str, dict[str, dict[str, int | None]]] = {n: {s: {} for s in data.probes} for n in systems}
    latency: dict[str, dict[str, list[float]]] = {n: {s: [] for s in data.probes} for n in systems}
    live: dict[str, Any] = {}
    for name in systems:  # every system answers the same probe one after the other (interleaved timing)
        try:
            live[name] = (_MemoryExt(embedder, config, name == "memory-ext", workdir / name, store_cache)
                          if name in ("memory-ext", "memory-ext-query-only") else _Baseline(name, embedder))
        except Exception as exc:  # noqa: BLE001 -- one failed system is reported, the others still run
            out["failed"][name] = f"{type(exc).__name__}: {exc}"

    def fail(name: str, exc: Exception) -> None:
        out["failed"][name] = f"{type(exc).__name__}: {exc}"
        live.pop(name).close()

    try:
        for key, probes in by_memory.items():
            for name in list(live):
                if progress:
                    progress(f"{name}: {key} ({len(data.memories[key])} turns, {len(probes)} probes)")
                try:
                    live[name].ingest(key, data.memories[key])
                except Exception as exc:  # noqa: BLE001
                    fail(name, exc)
            for i, p in enumerate(probes):
                names = list(live)
                for name in names[i % len(names):] + names[:i % len(names)] if names else ():
                    if name not in live:
                        continue
                    try:
                        t0 = time.perf_counter()
                        items = live[name].query(p)
                        latency[name][p.suite].append((time.perf_counter() - t0) * 1000)
                    except Exception as exc:  # noqa: BLE001
                        fail(name, exc)
                        continue
                    ranks[name][p.suite][p.id] = _rank(items, p.gold)
    finally:
        for system in live.values():
            system.close()
    for name in systems:
        if name not in live:
            continue
        ordered = {s: [ranks[name][s][p.id] for p in data.probes[s]] for s in data.probes}
        every = [v for s in latency[name] for v in latency[name][s]]
        out["systems"][name] = {
            "suites": {s: _metrics(ordered[s]) for s in data.probes},
            "latency_ms": {"p50": percentile(every, 50), "p95": percentile(every, 95),
                           "mean": sum(every) / len(every) if every else 0.0,
                           "by_suite": {s: {"p50": percentile(v, 50), "p95": percentile(v, 95)}
                                        for s, v in latency[name].items()}}}
        out["folds"][name] = {s: _spread(ordered[s], folds) for s in data.probes}
        sources = _by_source(data, ranks[name])
        if sources:
            out["systems"][name]["sources"] = sources
    return out


def _by_source(data: AgentData, ranks: Mapping[str, Mapping[str, int | None]]) -> dict[str, dict[str, float]]:
    """The metrics of each data source of a suite that mixes two (``slots``: ``slots:when2call``,
    ``slots:bfcl``), by memory key."""
    out = {}
    for suite, probes in data.probes.items():
        keys = sorted({p.memory for p in probes})
        if suite == "slots" and len(keys) > 1:
            for key in keys:
                out[key] = _metrics([ranks[suite][p.id] for p in probes if p.memory == key])
    return out


def format_agent_markdown(result: Mapping[str, Any]) -> str:
    """The result as Markdown tables (one row per system and suite)."""
    lines = [f"# memext bench agent — {result.get('meta', {}).get('command', '')}", "",
             "| system | suite | n | hit@1 | hit@3 | hit@10 | MRR | hit@3 across folds (min–max) |",
             "|---|---|---|---|---|---|---|---|"]
    for name, res in result["systems"].items():
        for suite, m in res["suites"].items():
            spread = result.get("folds", {}).get(name, {}).get(suite, {}).get("hit@3", {})
            lines.append(f"| {name} | {suite} | {m['n']} | {m['hit@1']:.3f} | {m['hit@3']:.3f} | {m['hit@10']:.3f} "
                         f"| {m['mrr']:.3f} | {spread.get('min', 0):.2f}–{spread.get('max', 0):.2f} |")
    sourced = [(name, key, m) for name, res in result["systems"].items()
               for key, m in (res.get("sources") or {}).items()]
    if sourced:
        lines += ["", "| system | source | n | hit@1 | hit@3 | hit@10 | MRR |", "|---|---|---|---|---|---|---|"]
        lines += [f"| {name} | {key} | {m['n']} | {m['hit@1']:.3f} | {m['hit@3']:.3f} | {m['hit@10']:.3f} "
                  f"| {m['mrr']:.3f} |" for name, key, m in sourced]
    lines += ["", "| system | latency p50 ms | p95 ms |", "|---|---|---|"]
    for name, res in result["systems"].items():
        lat = res["latency_ms"]
        lines.append(f"| {name} | {lat['p50']:.1f} | {lat['p95']:.1f} |")
    for name, error in result.get("failed", {}).items():
        lines.append(f"\n**{name} failed**: {error}")
    return "\n".join(lines) + "\n"
