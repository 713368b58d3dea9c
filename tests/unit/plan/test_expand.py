"""Query-time plan expansions: conjunctive splitting and class -> instance routes (issue 25)."""

from __future__ import annotations

from pathlib import Path

import pytest

from memory_ext import MemoryEngine, Turn
from memory_ext.errors import ConfigError
from memory_ext.models import EvidenceRoute, RouteGoal, SearchPlan
from memory_ext.plan.classes import classes_in
from memory_ext.plan.expand import MAX_CLASS_ROUTES, expand_plan, split_for
from memory_ext.plan.heuristic import plan_search


def _plan(question: str, speakers: tuple[str, ...] = ("Jon", "Gina")) -> SearchPlan:
    return plan_search(question, now=None, speakers=speakers, action_state=None)


def test_off_by_default_leaves_the_plan_unchanged() -> None:
    plan = _plan("What instruments does Jon play?")
    assert expand_plan(plan) is plan


def test_each_speaker_route_gets_its_own_sub_question() -> None:
    plan = _plan("What do Jon and Gina both have in common?")
    split = expand_plan(plan, split_conjunctions=True)
    by_name = {r.name: r.queries for r in split.routes}
    assert by_name["query"] == ("What do Jon and Gina both have in common?",)
    assert by_name["speaker:Jon"] == ("What do Jon have?",)
    assert by_name["speaker:Gina"] == ("What do Gina have?",)


def test_splitting_needs_two_named_speakers() -> None:
    plan = _plan("What has Jon painted?")
    assert expand_plan(plan, split_conjunctions=True).routes == plan.routes


@pytest.mark.parametrize(("question", "speaker", "expected"), [
    ("What subject have Caroline and Melanie both painted?", "Melanie", "What subject have Melanie painted?"),
    ("What is Jon's and Gina's favorite food?", "Gina", "What is Gina's favorite food?"),
    ("Where did Ana, Bo and Cy meet?", "Bo", "Where did Bo meet?"),
])
def test_split_for_removes_the_other_names(question: str, speaker: str, expected: str) -> None:
    assert split_for(question, speaker, ("Caroline", "Melanie", "Jon", "Gina", "Ana", "Bo", "Cy")) == expected


def test_a_class_route_asks_for_the_instances_with_the_main_routes_speakers() -> None:
    plan = _plan("What instruments does Jon play?")
    expanded = expand_plan(plan, expansion="lexicon", expansion_weight=0.8)
    extra = [r for r in expanded.routes if r.name.startswith("class:")]
    assert [r.name for r in extra] == ["class:instrument"]
    assert extra[0].goal is RouteGoal.OTHER and extra[0].weight == 0.8
    assert extra[0].speakers == ("Jon",) and "violin" in extra[0].queries[0]


def test_class_routes_are_bounded_and_weight_zero_adds_none() -> None:
    question = "Which cities, countries, sports, books and pets has Jon seen?"
    assert len(classes_in(question)) > MAX_CLASS_ROUTES
    plan = _plan(question)
    assert len(expand_plan(plan, expansion="lexicon").routes) == len(plan.routes) + MAX_CLASS_ROUTES
    assert expand_plan(plan, expansion="lexicon", expansion_weight=0.0).routes == plan.routes


def test_a_question_naming_no_class_gets_no_class_route() -> None:
    plan = SearchPlan(routes=(EvidenceRoute(goal="query", queries=("When did Jon go to Paris?",)),))
    assert expand_plan(plan, expansion="lexicon").routes == plan.routes


def test_the_expansion_brings_an_instance_turn_into_the_results(tmp_path: Path) -> None:
    turns = [Turn(role="user", speaker="Mel", content=text) for text in (
        "I went shopping for groceries this morning.",
        "The weather has been lovely all week.",
        "After work I relax by playing my violin for an hour.",
        "My sister called me about her new apartment.",
        "We watched a movie at the cinema on Friday.",
    )]
    question = "What instruments does Mel play?"
    found = {}
    for mode in ("off", "lexicon"):
        with MemoryEngine.open(tmp_path / mode, embedder="hashing",
                               config={"recall": {"expansion": mode, "expansion_weight": 1.0}}) as engine:
            engine.add_turns(turns, "mel")
            result = engine.search(question, "mel", k=1)
            found[mode] = result.items[0].text if result.items else ""
            if mode == "lexicon":
                assert any(r.name == "class:instrument" for r in result.plan.routes)
    assert "violin" in found["lexicon"]


def test_a_bad_expansion_mode_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError):
        MemoryEngine.open(tmp_path / "s", embedder="hashing", config={"recall": {"expansion": "wordnet"}})


EXCERPT = ("嘿，你知道吗？元旦晚会我要表演魔术！真是太棒了！我也会有点紧张呢。你有没有什么建议？"
           "试着在表演前深呼吸。")


def test_an_excerpt_gets_a_route_per_kind_of_experience_it_mentions() -> None:
    plan = plan_search(EXCERPT, now=None, speakers=(), action_state=None)
    assert expand_plan(plan) is plan
    expanded = expand_plan(plan, associative_weight=0.4)
    extra = [r for r in expanded.routes if r.name.startswith("kind:")]
    assert extra and extra[0].name == "kind:performance" and extra[0].weight == 0.4
    assert "跳舞" in extra[0].queries[0] and len(extra) <= MAX_CLASS_ROUTES


def test_a_question_gets_no_associated_kind_route() -> None:
    plan = _plan("Did Jon perform at the show?")
    assert expand_plan(plan, associative_weight=1.0).routes == plan.routes


def test_a_question_about_one_speaker_and_another_is_not_split() -> None:
    plan = _plan("What did Jon tell Gina about the store?")
    assert expand_plan(plan, split_conjunctions=True).routes == plan.routes
