"""Reranking: the fair pool, apply_rerank's combination and degradation, and the LLM / callable rerankers."""

from __future__ import annotations

import doctest
import math

import numpy as np
import pytest

import memory_ext.rank.rerank as rerank_module
from memory_ext.errors import ConfigError
from memory_ext.llm import LLMCall, ScriptedLLM
from memory_ext.models import ChannelError
from memory_ext.rank.rerank import (
    CallableReranker,
    Candidate,
    InvalidScores,
    LLMReranker,
    Reranker,
    RerankOutcome,
    apply_rerank,
    fair_pool,
)
from tests.conftest import Gate

# ---------------------------------------------------------------------------------------------------- helpers


def pool_of(keys: list[int]) -> list[Candidate]:
    """Candidates in fused order: key k has text "doc k" and fused score len - position."""
    return [Candidate(key=k, text=f"doc {k}", score=float(len(keys) - i)) for i, k in enumerate(keys)]


def by_key(scores: dict[int, float]) -> CallableReranker:
    """A reranker that gives each candidate the score its key has in ``scores`` (text "doc k")."""
    return CallableReranker(lambda q, texts: [scores[int(t.split()[1])] for t in texts], id="by-key")


class Flaky:
    """A reranker that raises on its first call and scores by key afterwards (reversed fused preference)."""

    id = "flaky"

    def __init__(self) -> None:
        self.calls = 0

    def rerank(self, query, candidates, *, timeout=None):
        self.calls += 1
        if self.calls == 1:
            raise ConnectionError("model server down")
        return [float(c.key) for c in candidates]


# ------------------------------------------------------------------------------------------------- fair_pool


def test_fair_pool_represents_a_channel_whose_best_items_are_far_down_the_fused_order() -> None:
    fused = list(range(100))
    rankings = {"dense": list(range(30)), "keyword": [97, 95, 93, 91, 89, 0, 1]}
    pool = fair_pool(rankings, fused, 6)
    assert len(pool) == 6
    assert {97, 95, 93} <= set(pool)  # the keyword channel's three best, although they are fused 91st-98th
    assert {0, 1, 2} <= set(pool)
    # a plain "top of the fused order" pool would have missed them entirely
    assert not {97, 95, 93} & set(fused[:6])


def test_fair_pool_round_robin_skips_duplicates_and_a_short_channel_does_not_block_others() -> None:
    fused = list(range(50))
    rankings = {"a": [40], "b": [0, 1, 2, 3, 4, 5], "c": [0, 45, 46, 47, 48], "d": []}
    pool = fair_pool(rankings, fused, 8)
    # round 1: a->40, b->0, c->(0 taken) 45; round 2: b->1, c->46; round 3: b->2, c->47; round 4: b->3
    assert pool == [0, 1, 2, 3, 40, 45, 46, 47]


def test_fair_pool_is_deterministic_and_independent_of_mapping_order() -> None:
    fused = list(range(40))
    rankings = {"keyword": [39, 38, 37, 36], "dense": [5, 6, 7], "graph": [20, 21]}
    first = fair_pool(rankings, fused, 7)
    assert first == fair_pool(rankings, fused, 7)
    assert first == fair_pool(dict(reversed(list(rankings.items()))), fused, 7)
    assert first == sorted(first, key=fused.index)  # returned in fused order


@pytest.mark.parametrize("size", [0, 1, 3, 10, 12, 50])
def test_fair_pool_respects_size_and_only_holds_keys_of_the_fused_order(size: int) -> None:
    fused = [10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21]
    rankings = {"dense": [99, 21, 20, 21], "keyword": [98, 10, 19]}  # 98, 99 are not rankable
    pool = fair_pool(rankings, fused, size)
    assert len(pool) == min(size, len(fused))
    assert len(set(pool)) == len(pool)
    assert set(pool) <= set(fused)
    if size >= 4:
        assert {21, 20, 10, 19} <= set(pool)


def test_fair_pool_tops_up_from_the_fused_order_when_channels_run_dry() -> None:
    assert fair_pool({"dense": [7]}, [1, 2, 3, 7, 8], 3) == [1, 2, 7]
    assert fair_pool({}, [4, 3, 2], 2) == [4, 3]
    assert fair_pool({"dense": [1, 2]}, [], 5) == []
    assert fair_pool({"dense": [1, 2]}, [1, 2], -1) == []


# ---------------------------------------------------------------------------------------------- apply_rerank


def test_apply_rerank_moves_what_the_reranker_prefers_to_the_top() -> None:
    cands = pool_of([1, 2, 3, 4, 5])
    reranker = by_key({1: 0.1, 2: 0.2, 3: 0.3, 4: 0.9, 5: 5.0})
    outcome = apply_rerank(reranker, "q", cands, weight=1.0, timeout=None)
    assert isinstance(outcome, RerankOutcome)
    assert outcome.error is None
    assert outcome.order == [5, 4, 3, 2, 1]
    assert set(outcome.scores) == {1, 2, 3, 4, 5}
    assert outcome.scores[5] > outcome.scores[4] > outcome.scores[1]
    assert outcome.rerank_scores[5] == 5.0


def test_apply_rerank_weight_blends_standardised_scores() -> None:
    cands = [Candidate(1, "doc 1", 10.0), Candidate(2, "doc 2", 0.0)]  # z(fused) = [1, -1]
    reranker = by_key({1: 0.0, 2: 100.0})  # z(rerank) = [-1, 1]
    assert apply_rerank(reranker, "q", cands, weight=0.6, timeout=None).order == [2, 1]
    assert apply_rerank(reranker, "q", cands, weight=0.4, timeout=None).order == [1, 2]
    outcome = apply_rerank(reranker, "q", cands, weight=0.75, timeout=None)
    assert outcome.scores[2] == pytest.approx(0.75 * 1 + 0.25 * -1)
    assert outcome.scores[1] == pytest.approx(0.75 * -1 + 0.25 * 1)


def test_weight_zero_keeps_the_fused_order_without_calling_the_reranker() -> None:
    calls: list[int] = []

    def score(q, texts):
        calls.append(len(texts))
        return list(range(len(texts)))  # would reverse the order

    cands = pool_of([8, 3, 5, 1])
    outcome = apply_rerank(CallableReranker(score, id="rev"), "q", cands, weight=0.0, timeout=None)
    assert outcome.order == [8, 3, 5, 1]
    assert outcome.error is None
    assert calls == []


def test_the_rest_of_the_fused_order_follows_the_reranked_pool() -> None:
    fused_order = [1, 2, 3, 4, 5, 6, 7]
    pool = fair_pool({"dense": [1, 2], "keyword": [7]}, fused_order, 3)
    assert pool == [1, 2, 7]
    cands = [Candidate(k, f"doc {k}", float(10 - k)) for k in pool]
    outcome = apply_rerank(by_key({1: 0.0, 2: 1.0, 7: 9.0}), "q", cands, timeout=None, fused_order=fused_order)
    assert outcome.order == [7, 2, 1, 3, 4, 5, 6]
    failed = apply_rerank(by_key({}), "q", cands, timeout=None, fused_order=fused_order)  # KeyError inside
    assert failed.order == fused_order
    assert failed.error is not None and failed.error.error_type == "KeyError"
    assert failed.scores == {1: 9.0, 2: 8.0, 7: 3.0}
    assert apply_rerank(by_key({1: 0.0, 2: 1.0, 7: 9.0}), "q", cands, weight=0.0, timeout=None,
                        fused_order=fused_order).order == fused_order


def test_ties_in_the_reranker_keep_the_fused_order() -> None:
    cands = pool_of([4, 9, 2])
    outcome = apply_rerank(by_key({4: 1.0, 9: 1.0, 2: 1.0}), "q", cands, timeout=None)
    assert outcome.order == [4, 9, 2]
    assert outcome.error is None


def test_empty_pool_is_not_an_error() -> None:
    outcome = apply_rerank(by_key({}), "q", [], timeout=None, fused_order=[3, 1])
    assert outcome == RerankOutcome(order=[3, 1], scores={}, error=None)


def _fail(reranker, cands, **kw) -> RerankOutcome:
    outcome = apply_rerank(reranker, "where did Lena move?", cands, timeout=kw.pop("timeout", None), **kw)
    assert outcome.order == [c.key for c in sorted(cands, key=lambda c: -c.score)]
    assert outcome.scores == {c.key: c.score for c in cands}
    assert isinstance(outcome.error, ChannelError)
    assert outcome.error.channel == "rerank"
    assert outcome.rerank_scores == {}
    return outcome


@pytest.mark.parametrize(("fn", "error_type", "words"), [
    (lambda q, texts: (_ for _ in ()).throw(RuntimeError("CUDA out of memory")), "RuntimeError", "CUDA"),
    (lambda q, texts: [1.0, 2.0], "InvalidScores", "expected 4 scores, got 2"),
    (lambda q, texts: [1.0, float("nan"), 2.0, 3.0], "InvalidScores", "NaN"),
    (lambda q, texts: [1.0, float("inf"), 2.0, 3.0], "InvalidScores", "infinite"),
    (lambda q, texts: None, "InvalidScores", "got NoneType"),
    (lambda q, texts: ["high", "low", "mid", "x"], "InvalidScores", "not numbers"),
    (lambda q, texts: np.ones((4, 2)), "InvalidScores", "shape"),
])
def test_reranker_failures_keep_the_fused_order_and_report_why(fn, error_type: str, words: str) -> None:
    cands = pool_of([10, 20, 30, 40])
    outcome = _fail(CallableReranker(fn, id="cross"), cands)
    assert outcome.error.error_type == error_type
    assert words in outcome.error.message
    assert "'cross'" in outcome.error.message


def test_a_reranker_that_returns_a_column_vector_is_accepted() -> None:
    cands = pool_of([1, 2, 3])
    outcome = apply_rerank(CallableReranker(lambda q, t: np.array([[0.0], [1.0], [2.0]]), id="col"), "q", cands,
                           timeout=None)
    assert outcome.error is None and outcome.order == [3, 2, 1]


def test_a_reranker_that_breaks_the_protocol_is_reported_not_raised() -> None:
    class Wrong:
        id = "wrong"

        def rerank(self, query, candidates):  # no timeout keyword
            return [1.0] * len(candidates)

    outcome = _fail(Wrong(), pool_of([1, 2]))
    assert outcome.error.error_type == "TypeError"


def test_a_slow_reranker_times_out_and_the_fused_order_is_kept(gate: Gate) -> None:
    def slow(q, texts):
        gate.wait()
        return [float(i) for i in range(len(texts))]

    cands = pool_of([1, 2, 3])
    outcome = _fail(CallableReranker(slow, id="slow"), cands, timeout=0.05)
    assert gate.entered and not gate.finished  # came back without waiting for the scores
    assert outcome.error.error_type == "TimeoutError"


def test_a_failure_does_not_switch_the_reranker_off() -> None:
    cands = pool_of([1, 2, 3])
    flaky = Flaky()
    first = apply_rerank(flaky, "q", cands, timeout=1.0)
    assert first.error is not None and first.error.error_type == "ConnectionError"
    assert first.order == [1, 2, 3]
    second = apply_rerank(flaky, "q", cands, timeout=1.0)
    assert second.error is None
    assert second.order == [3, 2, 1]
    assert flaky.calls == 2
    # and after any failed reranker, a working one is used as normal
    _fail(CallableReranker(lambda q, t: [], id="bad"), cands)
    assert apply_rerank(by_key({1: 0, 2: 5, 3: 1}), "q", cands, timeout=1.0).order == [2, 3, 1]


def test_non_finite_fused_scores_do_not_poison_the_combination() -> None:
    cands = [Candidate(1, "doc 1", 3.0), Candidate(2, "doc 2", -math.inf), Candidate(3, "doc 3", 1.0)]
    outcome = apply_rerank(by_key({1: 0.0, 2: 0.0, 3: 0.0}), "q", cands, weight=0.5, timeout=None)
    assert outcome.order == [1, 3, 2]
    assert all(math.isfinite(s) for s in outcome.scores.values())


@pytest.mark.parametrize("weight", [-0.1, 1.5, float("nan"), True, "1"])
def test_bad_weight_is_a_value_error(weight) -> None:
    with pytest.raises(ValueError, match="weight"):
        apply_rerank(by_key({1: 1.0}), "q", pool_of([1]), weight=weight, timeout=None)


def test_duplicate_candidate_keys_are_a_value_error() -> None:
    with pytest.raises(ValueError, match="duplicate"):
        apply_rerank(by_key({1: 1.0}), "q", [Candidate(1, "doc 1", 1.0), Candidate(1, "doc 1", 0.5)], timeout=None)


# ------------------------------------------------------------------------------------------- the rerankers


def test_rerankers_satisfy_the_protocol() -> None:
    assert isinstance(CallableReranker(lambda q, t: [], id="x"), Reranker)
    assert isinstance(LLMReranker(ScriptedLLM([])), Reranker)
    assert isinstance(Flaky(), Reranker)
    assert LLMReranker(ScriptedLLM([], id="gpt")).id == "llm:gpt"


def test_callable_reranker_validates_its_arguments() -> None:
    with pytest.raises(ConfigError):
        CallableReranker("not callable", id="x")  # type: ignore[arg-type]
    with pytest.raises(ConfigError):
        CallableReranker(lambda q, t: [], id="")
    with pytest.raises(ConfigError):
        LLMReranker(object())  # type: ignore[arg-type]
    with pytest.raises(ConfigError):
        LLMReranker(ScriptedLLM([]), batch_size=0)
    with pytest.raises(ConfigError):
        LLMReranker(ScriptedLLM([]), max_chars_per_candidate=5)


def test_callable_reranker_passes_query_and_texts() -> None:
    seen = []
    reranker = CallableReranker(lambda q, texts: seen.append((q, texts)) or np.arange(len(texts)), id="np")
    assert reranker.rerank("query", pool_of([1, 2])) == [0.0, 1.0]
    assert seen == [("query", ["doc 1", "doc 2"])]


CANDS = [Candidate(1, "Lena likes green tea", 3.0), Candidate(2, "We discussed the weather", 2.0),
         Candidate(3, "Lena moved to Lisbon in May", 1.0)]


def test_llm_reranker_good_json() -> None:
    llm = ScriptedLLM(['{"scores": [3, 0, 10]}'])
    outcome = apply_rerank(LLMReranker(llm), "Where did Lena move?", CANDS, timeout=5.0)
    assert outcome.error is None
    assert outcome.order == [3, 1, 2]
    assert outcome.rerank_scores == {1: 3.0, 2: 0.0, 3: 10.0}
    assert len(llm.calls) == 1
    call = llm.calls[0]
    assert "Where did Lena move?" in call.prompt
    assert "[1] Lena likes green tea" in call.prompt and "[3] Lena moved to Lisbon in May" in call.prompt
    assert call.json_schema is not None and call.json_schema["properties"]["scores"]["minItems"] == 3
    assert call.timeout is not None and 0 < call.timeout <= 5.0


def test_llm_reranker_repairs_fences_and_accepts_a_numbered_mapping() -> None:
    assert LLMReranker(ScriptedLLM(["Sure!\n```json\n{'scores': [1, 2, 3,],}\n```"])).rerank("q", CANDS) == [1, 2, 3]
    assert LLMReranker(ScriptedLLM(['{"scores": {"3": 9, "1": 4, "2": "0"}}'])).rerank("q", CANDS) == [4, 0, 9]


def test_llm_reranker_retries_once_after_a_malformed_answer() -> None:
    llm = ScriptedLLM(["I think memory 3 is best.", '{"scores": [1, 0, 9]}'])
    outcome = apply_rerank(LLMReranker(llm), "Where did Lena move?", CANDS, timeout=5.0)
    assert outcome.error is None
    assert outcome.order == [3, 1, 2]
    assert len(llm.calls) == 2
    assert "not usable" in llm.calls[1].prompt and "I think memory 3 is best." in llm.calls[1].prompt


def test_llm_reranker_retries_a_wrong_count_too() -> None:
    llm = ScriptedLLM(['{"scores": [1, 9]}', '{"scores": [1, 0, 9]}'])
    assert LLMReranker(llm).rerank("q", CANDS) == [1.0, 0.0, 9.0]
    assert "has 2 numbers, expected 3" in llm.calls[1].prompt


def test_llm_reranker_malformed_twice_is_an_error_outcome() -> None:
    llm = ScriptedLLM(["no idea", '{"scores": [1, "lots", 2]}', '{"scores": [1, 2, 3]}'])
    outcome = _fail(LLMReranker(llm), CANDS)
    assert outcome.error.error_type == "InvalidScores"
    assert "also after one retry" in outcome.error.message
    assert len(llm.calls) == 2  # one retry, not more
    with pytest.raises(InvalidScores):
        LLMReranker(ScriptedLLM(["{}", "[]"])).rerank("q", CANDS)


def test_llm_reranker_exception_is_an_error_outcome_and_the_next_call_works() -> None:
    llm = ScriptedLLM([ConnectionError("provider down"), '{"scores": [0, 0, 7]}'])
    reranker = LLMReranker(llm)
    outcome = _fail(reranker, CANDS)
    assert outcome.error.error_type == "ConnectionError"
    assert "provider down" in outcome.error.message and "llm:scripted" in outcome.error.message
    assert len(llm.calls) == 1  # an exception is not retried
    again = apply_rerank(reranker, "q", CANDS, timeout=None)
    assert again.error is None and again.order == [3, 1, 2]


def test_llm_reranker_timeout_is_an_error_outcome(gate: Gate) -> None:
    def hang(call: LLMCall) -> str:  # a client that ignores its timeout
        gate.wait()
        return '{"scores": [0, 0, 9]}'

    outcome = _fail(LLMReranker(ScriptedLLM(hang)), CANDS, timeout=0.05)
    assert gate.entered and not gate.finished  # came back without waiting for the answer
    assert outcome.error.error_type == "TimeoutError"


def test_llm_reranker_batches_and_clips_candidates() -> None:
    def answer(call):
        n = call.prompt.count("\n[")
        return {"scores": [float(int(line.split()[2])) for line in call.prompt.splitlines()
                           if line.startswith("[")][:n]}

    cands = [Candidate(k, f"doc {k} " + "x" * 1000, 0.0) for k in range(5)]
    llm = ScriptedLLM(answer)
    reranker = LLMReranker(llm, batch_size=2, max_chars_per_candidate=50)
    assert reranker.rerank("q", cands) == [0.0, 1.0, 2.0, 3.0, 4.0]
    assert len(llm.calls) == 3
    for call in llm.calls:
        items = [line for line in call.prompt.splitlines() if line.startswith("[")]
        assert 1 <= len(items) <= 2
        assert all(len(line) <= len("[1] ") + 50 and line.endswith("…") for line in items)


def test_module_docstring_examples() -> None:
    result = doctest.testmod(rerank_module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.attempted >= 10
    assert result.failed == 0
