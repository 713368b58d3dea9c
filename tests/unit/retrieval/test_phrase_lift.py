"""The question lift: a pool turn that repeats a run of the question's own words moves up (retrieval/phrases.py)."""

from __future__ import annotations

import numpy as np

from memory_ext import EvidenceRoute, SearchPlan
from memory_ext.retrieval.fuse import Fused
from memory_ext.retrieval.phrases import lift_phrases, question_only, shared_runs
from memory_ext.store.catalog import Catalog

# a multiple-choice question: every choice pulls the turns about it, the answer says the stem in its own words
QUESTION = ("What is the patient's biggest focus right now regarding health? Is it getting more sleep, good diet, "
            "managing stress, or reducing screen time?")
TEXTS = {
    1: "Sleep has become another priority. I've had to work on my sleep hygiene, no screens an hour before bed.",
    2: "Stress can really make my blood pressure worse, so managing stress is part of my routine now.",
    3: "I cut back my screen time in the evening and I get more sleep than I used to.",
    4: "Let me break it down for you. My biggest focus right now is on maintaining a good diet.",
    5: "The biggest challenge for me is motivation: some days I just don't feel like cooking.",
}


def catalog(n: int) -> Catalog:
    cat = Catalog(generation=(0, 0))
    cat._append([(i + 1, "turn", i + 1, "s1", None, 100.0 * (i + 1), "user", False, None) for i in range(n)])
    return cat


def fused_pool(cat: Catalog, rids: list[int]) -> Fused:
    scores = [float(len(rids) - i) for i in range(len(rids))]
    total = np.full(len(cat), -np.inf)
    total[cat.pos_of(np.asarray(rids, np.int64))] = scores
    return Fused(total=total, rids=rids, scores=scores)


def text_of(cat: Catalog):
    return lambda positions: {p: TEXTS[int(cat.rids[p])] for p in positions}


def question() -> SearchPlan:
    return SearchPlan(routes=(EvidenceRoute(goal="query", queries=(QUESTION,)),))


def test_runs_of_the_question_words_in_order() -> None:
    texts = [TEXTS[i] for i in (1, 2, 3, 4, 5)]
    # "biggest focus right now": four content words; "managing stress" and "screen time" are only two words in a row
    assert shared_runs(QUESTION, texts) == [0, 0, 0, 4, 0]
    # a run of stop words, or one content word, is no run; punctuation breaks one
    other = "Nothing to see here."
    assert shared_runs("what is it that you do?", ["What is it that you do, then?", other]) == [0, 0]
    assert shared_runs("when did I go to the new gym", ["I went to the new gym", other]) == [2, 0]
    assert shared_runs("sleep, good diet", ["sleep good diet", other]) == [0, 0]
    # a question asked for the memory, it does not hold it
    asked = ["That sounds awesome! What did you take away from the book to use in your life?",
             "It taught me self-acceptance. I took away from the book how to find support.", other]
    assert shared_runs("What did Caroline take away from the book Becoming Nicole?", asked) == [0, 2, 0]
    assert shared_runs("我什么时候去健身？", ["我每周一和周四晚上去健身房。", "我什么时候去健身都行"]) == [0, 0]


def test_a_run_most_of_the_pool_repeats_counts_for_nothing() -> None:
    texts = ["I love the espresso machine I ordered.", "The espresso machine has not arrived.", "My grinder broke."]
    assert shared_runs("Which event did I want the espresso machine for?", texts) == [0, 0, 0]


def test_the_answer_in_the_question_words_moves_up_and_the_scores_stay() -> None:
    cat = catalog(5)
    before = fused_pool(cat, [1, 3, 2, 5, 4])  # the choices' turns first, the answer last
    after = lift_phrases(before, cat, question(), QUESTION, text_of(cat), weight=1.0)
    assert after.rids[:2] == [4, 1]  # -ln(5) + 3 > 0: above the first
    assert after.scores == before.scores
    for rid, score in zip(after.rids, after.scores, strict=True):
        assert after.total[cat.pos_of(np.asarray([rid], np.int64))[0]] == score
    assert lift_phrases(before, cat, question(), QUESTION, text_of(cat), weight=0.5).rids[:2] == [1, 4]


def test_agent_states_excerpts_and_weight_zero_are_left_alone() -> None:
    cat = catalog(5)
    before = fused_pool(cat, [1, 3, 2, 5, 4])
    assert lift_phrases(before, cat, question(), QUESTION, text_of(cat), weight=0.0) is before
    for goal in ("action", "slot", "other", "opening", "focus"):
        plan = SearchPlan(routes=(*question().routes, EvidenceRoute(goal=goal, queries=("x",), weight=0.5)))
        assert not question_only(plan)
        assert lift_phrases(before, cat, plan, QUESTION, text_of(cat), weight=1.0) is before
    assert lift_phrases(before, cat, question(), "Do I like tea?", text_of(cat), weight=1.0) is before
