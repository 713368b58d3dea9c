"""ask_json: the one JSON call of the planner, summariser, reranker and eviction relevance."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from memory_ext import MemoryEngine, Turn
from memory_ext.lifecycle.summary import PlainTurn, summarize_with_llm
from memory_ext.llm import LLM, InvalidAnswer, ScriptedLLM, ask_json, parse_json
from memory_ext.plan.llm_planner import LLMPlanner
from memory_ext.rank.rerank import Candidate, InvalidScores, LLMReranker


class HangingLLM(LLM):
    """A client that ignores its timeout and answers only when released (as a hung provider does)."""

    id = "hanging"

    def __init__(self) -> None:
        self.release = threading.Event()
        self.prompts: list[str] = []

    def complete(self, prompt: str, *, system: str | None = None, json_schema: Mapping[str, Any] | None = None,
                 timeout: float | None = None) -> str:
        self.prompts.append(prompt)
        self.release.wait(5.0)
        # a valid late answer: without a deadline the caller would wait for it and use it
        return json.dumps({"scores": {fid: 1.0 for fid in re.findall(r'- id "([^"]+)"', prompt)}})


@pytest.fixture
def hanging() -> Any:
    llm = HangingLLM()
    yield llm
    llm.release.set()  # let the abandoned worker thread finish


def scores(value: dict[str, Any]) -> list[float]:
    return [float(s) for s in value["scores"]]


@pytest.mark.parametrize("answer", [
    '```json\n{"scores": [1, 2.5]}\n```',
    'Here are the scores: {"scores": [1, 2.5]} -- let me know if you need more.',
    "{'scores': [1, 2.5,],}",
    'Sure!\n```\n{"scores": [1, 2.5]}\n```\nThe second memory answers it.',
])
def test_repairs_fences_prose_quotes_and_trailing_commas(answer: str) -> None:
    llm = ScriptedLLM([answer])
    assert ask_json(llm, "Score the memories.", validate=scores, timeout=5.0) == [1.0, 2.5]
    assert len(llm.calls) == 1


def test_retries_once_with_the_error_and_the_previous_answer() -> None:
    llm = ScriptedLLM(["I cannot find any memories about that.", '{"scores": [4]}'])
    assert ask_json(llm, "Score the memory.", validate=scores, timeout=5.0) == [4.0]
    retry = llm.calls[1].prompt
    assert retry.startswith("Score the memory.")
    assert "no JSON object found" in retry and "I cannot find any memories" in retry


def test_a_wrong_shape_is_retried_too() -> None:
    llm = ScriptedLLM(['{"score": 4}', '{"scores": [4]}'])
    assert ask_json(llm, "Score it.", validate=scores, timeout=5.0) == [4.0]
    assert "'scores'" in llm.calls[1].prompt  # the KeyError is fed back


def test_two_bad_answers_raise_the_callers_error_type() -> None:
    llm = ScriptedLLM(["no", "still no"])
    with pytest.raises(InvalidScores, match="also after one retry"):
        ask_json(llm, "Score it.", validate=scores, timeout=5.0, invalid=InvalidScores)
    assert issubclass(InvalidScores, InvalidAnswer)


def test_the_llms_own_failure_propagates_without_retry() -> None:
    llm = ScriptedLLM([ConnectionError("provider down")])
    with pytest.raises(ConnectionError):
        ask_json(llm, "Score it.", validate=scores, timeout=5.0)
    assert len(llm.calls) == 1


def test_a_hanging_llm_is_cut_off_at_the_deadline(hanging: HangingLLM) -> None:
    with pytest.raises(TimeoutError, match="no answer within"):
        ask_json(hanging, "Score it.", validate=scores, timeout=0.05)
    assert len(hanging.prompts) == 1


def test_arrays_only_when_asked() -> None:
    assert parse_json("The scores: [3, 7]") == [3, 7]
    assert ask_json(ScriptedLLM(["[3, 7]"]), "Scores?", validate=list, timeout=5.0, array=True) == [3, 7]
    with pytest.raises(InvalidAnswer):
        ask_json(ScriptedLLM(["[3, 7]", "[3, 7]"]), "Scores?", validate=list, timeout=5.0)


def test_every_caller_falls_back_when_the_llm_hangs(hanging: HangingLLM, tmp_path: Path) -> None:
    plan, error = LLMPlanner(hanging, timeout_s=0.05).plan("Where does Lena live?", now=None)
    assert plan.planner == "heuristic" and error is not None and error.error_type == "TimeoutError"

    hook, why = summarize_with_llm([PlainTurn("Book NH204 to Tokyo")], hanging, timeout=0.05)
    assert hook.source == "heuristic" and why is not None and "TimeoutError" in why

    with pytest.raises(TimeoutError):
        LLMReranker(hanging).rerank("where does Lena live?", [Candidate(1, "Lena lives in Oslo", 1.0)],
                                    timeout=0.05)


def test_eviction_relevance_has_a_deadline(hanging: HangingLLM, tmp_path: Path) -> None:
    mon = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
    config = {"lifecycle": {"llm_relevance": True, "llm_timeout_s": 0.05}}
    with MemoryEngine.open(tmp_path / "s", embedder="hashing", config=config, llm=hanging) as e:
        for week in range(2):
            at = mon + timedelta(days=7 * week)
            e.add_turns([Turn(role="user", content=f"Week {week}: plan the Lisbon trip with Clara.", timestamp=at,
                              session_id=f"w{week}"),
                         Turn(role="assistant", content="Noted.", timestamp=at + timedelta(minutes=1),
                              session_id=f"w{week}")], "ana")
        e.add_turns([Turn(role="user", content="Clara's birthday dinner is next week.",
                          timestamp=mon + timedelta(days=45), session_id="apr")], "ana")
        now = mon + timedelta(days=60)
        e.compact("ana", "weekly", now=now)
        step = e.compact("ana", "monthly", key="2026-03", now=now).steps[0]
        assert e.retrieve(step["file"]).meta["relevance"] == "retrieval"  # the LLM was asked, then cut off
    assert any("Memory files" in p for p in hanging.prompts)
