"""Routes are typed: a goal enum, the speakers, the kinds a route boosts and its weight, set by the planners."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from pydantic import ValidationError as PydanticValidationError

from memory_ext import (
    ActionState,
    EvidenceRoute,
    LLMPlanner,
    MemoryEngine,
    RecordKind,
    RouteGoal,
    ScriptedLLM,
    SearchPlan,
)
from memory_ext.plan.heuristic import plan_search

NOW = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
SPEAKERS = ("Caroline", "Melanie")


def test_the_heuristic_planner_types_every_route() -> None:
    plan = plan_search("What do Caroline and Melanie both enjoy?", now=NOW, speakers=SPEAKERS,
                       action_state=ActionState(last_tool_name="calendar", missing_slots=("date",)))
    assert [(r.goal, r.name) for r in plan.routes] == [
        (RouteGoal.QUERY, "query"), (RouteGoal.SPEAKER, "speaker:Caroline"), (RouteGoal.SPEAKER, "speaker:Melanie"),
        (RouteGoal.ACTION, "action"), (RouteGoal.SLOT, "slot:date")]
    assert [r.speakers for r in plan.routes] == [SPEAKERS, ("Caroline",), ("Melanie",), (), ()]
    assert [r.weight for r in plan.routes] == [1.0, 0.5, 0.5, 0.5, 1.0]  # a slot route weighs as the query
    assert plan.routes[3].boost_kinds == (RecordKind.FAILURE_PATTERN, RecordKind.PROCEDURE)  # a tool was used
    assert all(not r.boost_kinds for r in plan.routes if r.goal is not RouteGoal.ACTION)
    planning = plan_search("what next?", now=NOW, speakers=(), action_state=ActionState(
        current_subgoal="book the flights"))
    assert planning.routes[1].goal == "action" and planning.routes[1].boost_kinds == ()  # nothing failed, no tool
    same = plan_search("book the flights", now=NOW, speakers=(), action_state=ActionState(
        current_subgoal="book the flights"))
    assert len(same.routes) == 1  # the subgoal is the query: the main route asks for it already


def test_a_plan_serialises_to_json_and_back() -> None:
    plan = plan_search("What did Caroline do yesterday?", now=NOW, speakers=SPEAKERS,
                       action_state=ActionState(failure_signal="timeout"))
    data = plan.model_dump(mode="json")
    assert json.loads(json.dumps(data)) == data
    assert data["routes"][0] == {"goal": "query", "name": "query", "queries": ["What did Caroline do yesterday?"],
                                 "speakers": ["Caroline"], "boost_kinds": [], "weight": 1.0,
                                 "time_filter": ["2023-05-07T00:00:00Z", "2023-05-08T00:00:00Z"]}
    assert data["routes"][1]["boost_kinds"] == ["failure_pattern", "procedure"]
    assert "depth" not in data and "constraints" not in data["routes"][0]
    assert SearchPlan.model_validate(data) == plan


def test_route_defaults_and_validation() -> None:
    main = EvidenceRoute(goal="query", queries=("q",))
    slot = EvidenceRoute(goal=RouteGoal.SLOT, name="slot:date", queries=("date",))
    assert (main.name, main.weight, slot.weight) == ("query", 1.0, 0.5)
    assert main.goal == "query" and isinstance(main.goal, RouteGoal)  # a str enum: string comparisons hold
    with pytest.raises(PydanticValidationError, match="goal"):
        EvidenceRoute(goal="when", queries=("q",))
    with pytest.raises(PydanticValidationError, match="weight"):
        EvidenceRoute(goal="action", queries=("q",), weight=-1.0)
    with pytest.raises(PydanticValidationError, match="boost_kinds"):
        EvidenceRoute(goal="action", queries=("q",), boost_kinds=("gossip",))


def test_the_llm_planner_maps_its_answer_onto_typed_routes() -> None:
    answer = {"question_type": "comparison", "routes": [
        {"goal": "hobbies", "queries": ["Caroline Melanie hobbies"], "speakers": ["caroline", "Melanie", "Bob"]},
        {"goal": "action", "queries": ["calendar"]},
        {"goal": "speaker:Melanie", "queries": ["Melanie hobbies"], "constraints": ["speaker:melanie"]},
        {"goal": "what they share", "queries": ["both"]}]}
    plan, error = LLMPlanner(ScriptedLLM([answer])).plan("What hobbies do they share?", now=NOW, speakers=SPEAKERS)
    assert error is None
    assert [(r.goal, r.name, r.weight) for r in plan.routes] == [
        ("query", "query", 1.0), ("action", "action", 0.5), ("speaker", "speaker:Melanie", 0.5),
        ("other", "what they share", 0.5)]
    assert plan.routes[0].speakers == SPEAKERS  # the namespace's spelling; unknown speakers dropped
    assert plan.routes[2].speakers == ("Melanie",)  # the older "speaker:<Name>" form is still read


def test_route_speakers_and_boosted_kinds_reach_the_ranking(tmp_path) -> None:  # type: ignore[no-untyped-def]
    turns = [{"role": "user", "speaker": "Ana", "content": "The flight_search tool timed out again this morning."},
             {"role": "user", "speaker": "Ben", "content": "If flight_search times out, retry with a smaller date "
                                                           "range; that always worked."},
             {"role": "user", "speaker": "Ana", "content": "I booked a window seat to Lisbon."}]
    with MemoryEngine.open(tmp_path / "s", embedder="hashing") as eng:
        eng.add_turns(turns, "team")
        state = ActionState(last_tool_name="flight_search", failure_signal="timeout")
        res = eng.search("flight search problems", "team", k=3, action_state=state, explain=True)
        action = next(r for r in res.plan.routes if r.goal is RouteGoal.ACTION)
        assert action.boost_kinds and action.weight == 0.5
        weights = res.items[0].explanation["route_weights"]
        assert weights == {"query": 1.0, "action": 0.5}
        assert any("keyword@action" in item.channels for item in res.items)
        named = eng.search("What did Ben say about flight search?", "team", k=3, explain=True)
        assert named.plan.routes[0].speakers == ("Ben",)
        boosts = {item.speaker: item.explanation["routes"]["query"]["speaker_boost"] for item in named.items}
        assert boosts["Ben"] > 0 and boosts["Ana"] == 0  # the route's speaker lifts their turns only


@pytest.mark.parametrize("vectors", [False, True])
def test_a_slot_route_asks_the_keyword_channels_only_unless_configured(tmp_path, vectors: bool) -> None:
    from memory_ext import Turn

    config = {"recall": {"slot_route_vectors": vectors}}
    with MemoryEngine.open(tmp_path / "s", embedder="hashing", config=config) as eng:
        eng.add_turns([Turn(role="user", content="Book me a table for Friday at Da Enzo."),
                       Turn(role="user", content="My passport number is X1234567, issued in Lisbon."),
                       Turn(role="assistant", content="Sure, what time would you like?")], "u", wait=True)
        state = ActionState(current_subgoal="check in for my flight to Porto", last_tool_name="check_in",
                            missing_slots=("passport_number",),
                            slot_hints={"passport_number": "The traveller's passport number"})
        res = eng.search("check in for my flight to Porto", "u", k=3, action_state=state)
        calls = [name.removeprefix("channel.") for name in res.timings_ms if name.startswith("channel.")]
        assert "keyword@slot:passport_number" in calls
        assert ("vector@slot:passport_number" in calls) is vectors
        assert "vector" in calls and "vector@action" in calls  # the other routes keep their vectors
        assert "X1234567" in res.items[0].text  # the slot's value is found either way
