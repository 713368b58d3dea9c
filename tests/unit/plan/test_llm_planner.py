"""The LLM planner: a good, malformed, partial, wrong, slow or absent answer each gives a valid plan."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime

import pytest

from memory_ext.errors import ConfigError
from memory_ext.llm import Delay, LLMCall, ScriptedLLM, acomplete, call_with_timeout
from memory_ext.models import ActionState, SearchPlan
from memory_ext.plan.heuristic import plan_search
from memory_ext.plan.llm_planner import (
    HeuristicPlanner,
    LLMPlanner,
    Planner,
    parse_json_object,
)
from memory_ext.plan.strategy import QUESTION_TYPES
from tests.conftest import Gate

NOW = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
SPEAKERS = ("Caroline", "Melanie")
QUERY = "When did Caroline go to the LGBTQ support group last week?"

GOOD = {
    "question_type": "temporal",
    "routes": [
        {"goal": "support group visit", "queries": ["Caroline LGBTQ support group", "support group meeting"],
         "constraints": ["speaker:caroline"], "time_filter": {"start": "2023-05-01", "end": "2023-05-07"}},
        {"goal": "Melanie's view", "queries": ["Melanie support group"], "constraints": ["speaker:Melanie"],
         "time_filter": None},
    ],
}


def plan_with(*steps, query: str = QUERY, action_state: ActionState | None = None, **kwargs):
    llm = ScriptedLLM(list(steps))
    planner = LLMPlanner(llm, **kwargs)
    plan, error = planner.plan(query, now=NOW, speakers=SPEAKERS, action_state=action_state)
    return plan, error, llm


def heuristic(query: str = QUERY, action_state: ActionState | None = None) -> SearchPlan:
    return plan_search(query, now=NOW, speakers=SPEAKERS, action_state=action_state)


def assert_valid(plan: SearchPlan, max_routes: int = 4) -> None:
    assert plan.question_type in QUESTION_TYPES
    assert 1 <= len(plan.routes) <= max_routes
    assert plan.routes[0].goal == "query" and plan.routes[0].weight == 1.0
    assert all(r.goal != "query" and r.weight == 0.5 for r in plan.routes[1:])
    assert len({r.name for r in plan.routes}) == len(plan.routes)
    for route in plan.routes:
        assert route.queries and all(q.strip() for q in route.queries)
        assert all(s in SPEAKERS for s in route.speakers)
        if route.time_filter is not None:
            start, end = route.time_filter
            assert start.tzinfo is not None and end > start


# -- answers that work --------------------------------------------------------------------------------------


def test_a_good_answer_becomes_the_plan() -> None:
    plan, error, llm = plan_with(GOOD)
    assert error is None
    assert_valid(plan)
    assert plan.planner == "llm:scripted" and plan.question_type == "temporal"
    main, other = plan.routes
    assert main.goal == "query"  # the engine weighs the route named "query" as the main one
    assert main.queries == ("Caroline LGBTQ support group", "support group meeting")
    assert main.speakers == ("Caroline",)  # the namespace's spelling of the name
    assert other.name == "Melanie's view" and other.goal == "other" and other.time_filter is None
    assert other.speakers == ("Melanie",)
    # the LLM was told the day, the speakers and the shape of the answer
    call = llm.calls[0]
    assert "2023-05-08 (Monday)" in call.prompt and "Caroline, Melanie" in call.prompt and QUERY in call.prompt
    assert call.json_schema["properties"]["question_type"]["enum"] == list(QUESTION_TYPES)
    assert call.system and 0 < call.timeout <= 10


def test_time_filters_are_parsed_as_aware_utc_half_open_spans() -> None:
    answer = {"question_type": "temporal", "routes": [
        {"goal": "query", "queries": ["a"], "time_filter": {"start": "2023-05-01", "end": "2023-05-07"}},
        {"goal": "month", "queries": ["b"], "time_filter": ["2023-04", "2023-04"]},
        {"goal": "exact", "queries": ["c"], "time_filter": {"start": "2023-05-01T10:00:00+02:00",
                                                            "end": "2023-05-01T12:00:00Z"}},
        {"goal": "naive", "queries": ["d"], "time_filter": {"start": "2022", "end": "2022-06-30T00:00"}},
    ]}
    plan, error, _ = plan_with(answer)
    assert error is None
    spans = [r.time_filter for r in plan.routes]
    assert spans[0] == (datetime(2023, 5, 1, tzinfo=UTC), datetime(2023, 5, 8, tzinfo=UTC))  # end day included
    assert spans[1] == (datetime(2023, 4, 1, tzinfo=UTC), datetime(2023, 5, 1, tzinfo=UTC))  # the whole month
    assert spans[2] == (datetime(2023, 5, 1, 8, tzinfo=UTC), datetime(2023, 5, 1, 12, tzinfo=UTC))
    assert spans[3] == (datetime(2022, 1, 1, tzinfo=UTC), datetime(2022, 6, 30, tzinfo=UTC))


@pytest.mark.parametrize("answer", [
    "```json\n" + json.dumps(GOOD) + "\n```",
    "Here is the plan:\n" + json.dumps(GOOD) + "\nLet me know if you need anything else {or not}.",
    str(GOOD),  # a Python dict: single quotes, None
    json.dumps(GOOD)[:-1] + ",}",  # a trailing comma
    json.dumps(GOOD).replace("null", "null ") + "\n\n```",
])
def test_malformed_json_is_repaired_without_a_retry(answer: str) -> None:
    plan, error, llm = plan_with(answer)
    assert error is None and len(llm.calls) == 1
    assert plan.question_type == "temporal" and plan.routes[0].speakers == ("Caroline",)
    assert plan.routes[0].time_filter == (datetime(2023, 5, 1, tzinfo=UTC), datetime(2023, 5, 8, tzinfo=UTC))


def test_parse_json_object_handles_nested_braces_inside_strings() -> None:
    assert parse_json_object('note: {"a": "x } y", "b": {"c": [1]}} trailing }') == {"a": "x } y", "b": {"c": [1]}}
    with pytest.raises(ValueError):
        parse_json_object("no json here")


def test_missing_fields_take_defaults() -> None:
    # no question type -> the heuristic's; a route without queries -> the query itself; no goal -> "query"
    plan, error, _ = plan_with({"routes": [{"constraints": "speaker:Caroline"}]})
    assert error is None and plan.planner == "llm:scripted"
    assert plan.question_type == heuristic().question_type == "temporal"
    assert plan.routes[0].queries == (QUERY,) and plan.routes[0].speakers == ("Caroline",)
    # no routes at all -> the heuristic's routes, with the LLM's question type
    plan, error, _ = plan_with({"question_type": "single"})
    assert error is None and plan.question_type == "single"
    assert plan.routes == heuristic().routes


def test_unusable_constraints_are_dropped_and_question_types_normalised() -> None:
    plan, error, _ = plan_with({"question_type": " Personalized Advice ", "routes": [
        {"goal": "query", "queries": ["x"], "constraints": ["speaker:Bob", "entity:pizza", "Caroline",
                                                            "speaker: MELANIE"]}]})
    assert error is None and plan.question_type == "personalized_advice"
    assert plan.routes[0].speakers == ("Melanie",)


def test_wrong_types_are_retried_once_with_the_validation_error() -> None:
    wrong = {"question_type": "temporal", "routes": {"goal": "query", "queries": [1, 2]}}
    plan, error, llm = plan_with(wrong, GOOD)
    assert error is None and plan.planner == "llm:scripted" and len(llm.calls) == 2
    retry = llm.calls[1].prompt
    assert retry.startswith(llm.calls[0].prompt) and "not a valid plan" in retry and "routes" in retry


@pytest.mark.parametrize("bad", [
    {"question_type": "when-question", "routes": []},
    {"question_type": "temporal", "routes": [{"queries": [{"q": 1}]}]},
    {"question_type": "temporal", "routes": [{"queries": ["x"], "time_filter": {"start": "2023-05-09",
                                                                                "end": "2023-05-01"}}]},
    {"question_type": "temporal", "routes": [{"queries": ["x"], "time_filter": {"start": "last week"}}]},
    "I cannot help with that.",
    ["not", "an", "object"],
])
def test_two_invalid_answers_fall_back_to_the_heuristic_with_a_reason(bad) -> None:
    plan, error, llm = plan_with(bad, bad)
    assert len(llm.calls) == 2
    assert plan == heuristic()
    assert error is not None and error.channel == "planner" and error.error_type == "InvalidPlan"
    assert "after one retry" in error.message and "heuristic plan" in error.message


# -- answers that do not come -------------------------------------------------------------------------------


@pytest.mark.parametrize("failure", [ConnectionError("provider down"), RuntimeError, LookupError("quota")])
def test_an_llm_that_raises_gives_the_heuristic_plan_and_the_reason(failure) -> None:
    plan, error, llm = plan_with(failure, GOOD)
    assert len(llm.calls) == 1  # an exception is not retried: only invalid answers are
    assert plan == heuristic() and plan.planner == "heuristic"
    expected = failure.__name__ if isinstance(failure, type) else type(failure).__name__
    assert error.channel == "planner" and error.error_type == expected
    if not isinstance(failure, type):
        assert str(failure) in error.message


def test_a_slow_llm_times_out_to_the_heuristic_plan() -> None:
    plan, error, llm = plan_with(Delay(5.0, then=GOOD), timeout_s=0.2)
    assert plan == heuristic() and error.error_type == "TimeoutError" and "0.2 s" in error.message
    assert 0 < llm.calls[0].timeout <= 0.2  # the client is told the planner's deadline, so it gives up in time


def test_a_hanging_llm_that_ignores_its_timeout_is_cut_off_by_the_planner(gate: Gate) -> None:
    def hang(call: LLMCall) -> dict[str, object]:  # a client that ignores its timeout
        gate.wait()
        return GOOD

    llm = ScriptedLLM(hang)
    plan, error = LLMPlanner(llm, timeout_s=0.2).plan(QUERY, now=NOW, speakers=SPEAKERS)
    assert gate.entered and not gate.finished  # the planner came back without waiting for the answer
    assert plan == heuristic() and error.error_type == "TimeoutError"
    assert llm.calls[0].timeout == pytest.approx(0.2, abs=0.05)


def test_the_retry_shares_the_deadline() -> None:
    plan, error, llm = plan_with("garbage", Delay(0.4, then=GOOD, ignore_timeout=True), timeout_s=0.2)
    assert len(llm.calls) == 2 and error.error_type == "TimeoutError" and plan == heuristic()


def test_a_llm_that_is_fast_enough_is_used() -> None:
    plan, error, _ = plan_with(Delay(0.05, then=GOOD), timeout_s=2.0)
    assert error is None and plan.planner == "llm:scripted"


# -- routes, action state, cache ----------------------------------------------------------------------------


def test_never_more_routes_than_the_limit() -> None:
    many = {"question_type": "comparison",
            "routes": [{"goal": "g", "queries": [f"q{i}"]} for i in range(7)]}
    plan, error, _ = plan_with(many, max_routes=3)
    assert error is None and len(plan.routes) == 3
    assert [r.name for r in plan.routes] == ["query", "g", "g (3)"]
    assert [r.goal for r in plan.routes] == ["query", "other", "other"]
    assert plan_with(many, max_routes=3)[2].calls[0].json_schema["properties"]["routes"]["maxItems"] == 3


def test_an_action_state_keeps_an_action_route_within_the_limit() -> None:
    state = ActionState(last_tool_name="flight_search", failure_signal="timeout", missing_slots=("date",))
    four = {"question_type": "single", "routes": [{"goal": f"g{i}", "queries": [f"q{i}"]} for i in range(4)]}
    plan, error, llm = plan_with(four, action_state=state)
    assert error is None and len(plan.routes) == 4
    action = [r for r in heuristic(action_state=state).routes if r.goal == "action"]
    assert plan.routes[-1] == action[0]
    assert '"failure_signal": "timeout"' in llm.calls[0].prompt
    # the LLM's own action route is kept as it is
    own = {"question_type": "single", "routes": [{"goal": "q", "queries": ["x"]},
                                                 {"goal": "action", "queries": ["flight_search timeout fix"]}]}
    plan, _, _ = plan_with(own, action_state=state)
    assert [r.queries for r in plan.routes] == [("x",), ("flight_search timeout fix",)]


def test_plans_are_cached_per_query_action_state_speakers_and_day() -> None:
    llm = ScriptedLLM([GOOD], repeat_last=True)
    planner = LLMPlanner(llm, cache_size=2)
    first = planner.plan(QUERY, now=NOW, speakers=SPEAKERS)
    later_same_day = planner.plan(QUERY, now=NOW.replace(hour=23), speakers=SPEAKERS)
    assert later_same_day == first and len(llm.calls) == 1
    planner.plan(QUERY, now=NOW.replace(day=9), speakers=SPEAKERS)
    planner.plan(QUERY, now=NOW, speakers=SPEAKERS, action_state=ActionState(failure_signal="timeout"))
    planner.plan(QUERY, now=NOW, speakers=("Caroline",))
    assert len(llm.calls) == 4
    planner.plan(QUERY, now=NOW, speakers=SPEAKERS)  # evicted by the two newer entries (cache_size=2)
    assert len(llm.calls) == 5
    planner.clear_cache()
    planner.plan(QUERY, now=NOW, speakers=SPEAKERS)
    assert len(llm.calls) == 6


def test_failures_are_not_cached_and_cache_size_0_disables_the_cache() -> None:
    llm = ScriptedLLM([ConnectionError("down"), GOOD, GOOD])
    planner = LLMPlanner(llm)
    assert planner.plan(QUERY, now=NOW, speakers=SPEAKERS).error is not None
    assert planner.plan(QUERY, now=NOW, speakers=SPEAKERS).error is None  # the provider recovered
    assert planner.plan(QUERY, now=NOW, speakers=SPEAKERS).plan.planner == "llm:scripted"
    assert len(llm.calls) == 2
    uncached = ScriptedLLM([GOOD], repeat_last=True)
    nocache = LLMPlanner(uncached, cache_size=0)
    nocache.plan(QUERY, now=NOW, speakers=SPEAKERS)
    nocache.plan(QUERY, now=NOW, speakers=SPEAKERS)
    assert len(uncached.calls) == 2


def test_a_custom_fallback_planner_is_used() -> None:
    class Fixed:
        def plan(self, query, *, now, speakers=(), action_state=None):
            return HeuristicPlanner().plan("how many pets?", now=now)

    assert isinstance(Fixed(), Planner) and isinstance(HeuristicPlanner(), Planner)
    plan, error = LLMPlanner(ScriptedLLM([OSError("x")]), fallback=Fixed()).plan(QUERY, now=NOW)
    assert plan.question_type == "aggregate" and error.error_type == "OSError"


def test_heuristic_planner_is_plan_search_and_never_degraded() -> None:
    assert HeuristicPlanner().plan(QUERY, now=NOW, speakers=SPEAKERS) == (heuristic(), None)


@pytest.mark.parametrize(("field", "value"), [("timeout_s", 0), ("timeout_s", True), ("cache_size", -1),
                                              ("max_routes", 0), ("max_routes", 2.5)])
def test_bad_settings_are_rejected(field: str, value) -> None:
    with pytest.raises(ConfigError, match=field):
        LLMPlanner(ScriptedLLM([]), **{field: value})
    with pytest.raises(ConfigError, match="llm"):
        LLMPlanner(object())


# -- the fake and the helpers -------------------------------------------------------------------------------


def test_scripted_llm_plays_functions_and_reports_an_exhausted_script() -> None:
    llm = ScriptedLLM(lambda call: "yes" if "?" in call.prompt else {"n": len(call.prompt)})
    assert llm.complete("ok?") == "yes" and json.loads(llm.complete("four")) == {"n": 4}
    assert llm.calls[0] == LLMCall(prompt="ok?")
    with pytest.raises(LookupError, match="1 step"):
        done = ScriptedLLM(["a"])
        done.complete("1")
        done.complete("2")
    with pytest.raises(TypeError, match="step must be"):
        ScriptedLLM([42]).complete("x")


def test_call_with_timeout_returns_raises_and_times_out() -> None:
    assert call_with_timeout(lambda: 3, 1.0) == 3
    assert call_with_timeout(lambda: 4, None) == 4
    with pytest.raises(KeyError):
        call_with_timeout(lambda: {}["x"], 1.0)
    with pytest.raises(TimeoutError, match=r"0\.05 s"):
        call_with_timeout(lambda: time.sleep(1), 0.05, "slow thing")


async def test_acomplete_uses_a_native_twin_or_a_worker_thread() -> None:
    class SyncOnly:
        id = "sync"

        def complete(self, prompt, *, system=None, json_schema=None, timeout=None):
            return prompt[::-1]

    assert await acomplete(SyncOnly(), "abc") == "cba"
    assert await acomplete(ScriptedLLM(["x"]), "p") == "x"


@pytest.mark.parametrize("name", ["memory_ext.llm", "memory_ext.plan.llm_planner"])
def test_docstring_examples(name: str) -> None:
    import doctest
    import importlib

    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.attempted and result.failed == 0
