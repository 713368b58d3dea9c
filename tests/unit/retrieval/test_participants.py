"""Participants (who a text is about) and the excerpt lift that puts memories with the same people first."""

from __future__ import annotations

import numpy as np
import pytest

from memory_ext import EvidenceRoute, SearchPlan
from memory_ext.retrieval.fuse import Fused
from memory_ext.retrieval.participants import lift_participants, shared_counts
from memory_ext.store.catalog import Catalog
from memory_ext.text.participants import participants

EXCERPT = "为什么爸爸妈妈总是吵架呢？感觉他们一直在闹别扭。哎，这确实挺难受的。我只想和他们一起玩。"


def excerpt_plan() -> SearchPlan:
    return SearchPlan(routes=(EvidenceRoute(goal="query", queries=(EXCERPT,)),
                              EvidenceRoute(goal="opening", queries=("为什么爸爸妈妈总是吵架呢？",), weight=0.5),
                              EvidenceRoute(goal="focus", queries=("我只想和他们一起玩。",), weight=0.5)))


def question_plan() -> SearchPlan:
    return SearchPlan(routes=(EvidenceRoute(goal="query", queries=("爸爸喜欢什么？",)),))


def catalog(n: int) -> Catalog:
    cat = Catalog(generation=(0, 0))
    cat._append([(i + 1, "turn", i + 1, "s1", None, 100.0 * (i + 1), "user", False, None) for i in range(n)])
    return cat


TEXTS = {1: "Bart在房间听见争吵，十分焦虑。", 2: "Bart参加了一次远足活动，走错了路感到非常焦虑。",
         3: "Bart和妈妈一起看《辛普森一家》，感到非常开心。", 4: "Bart和爸爸一起去游泳，感觉非常开心。",
         5: "Bart在海边放风筝，感到非常开心。"}


def fused_pool(cat: Catalog) -> Fused:
    rids = [1, 2, 5, 3, 4]
    scores = [5.0, 4.0, 3.0, 2.0, 1.0]
    total = np.full(len(cat), -np.inf)
    total[cat.pos_of(np.asarray(rids, np.int64))] = scores
    return Fused(total=total, rids=rids, scores=scores)


def text_of(cat: Catalog):
    return lambda positions: {p: TEXTS[int(cat.rids[p])] for p in positions}


@pytest.mark.parametrize(("text", "keys"), [
    ("我今天和我最好的朋友吵架了", {"friend"}),
    ("Lisa和邻居李大爷一起在小区花园种花", {"neighbour"}),
    ("爷爷奶奶带Lisa一起种花", {"grandparent"}),
    ("Bart和表哥Oliver一起玩了一下午", {"cousin"}),
    ("我好想养一只大狗狗，但是妈妈说我们家太小了", {"pet", "mother"}),
    ("My mum and my teacher met Jimmy's dog.", {"mother", "teacher", "pet"}),
    ("Please upgrade my Gold Card plan, Sophie from Support said so.", set()),
    ("Why? Thanks, I went hiking alone.", set()),
])
def test_participants_by_role_and_name(text: str, keys: set[str]) -> None:
    assert participants(text) == keys


def test_a_key_most_texts_name_counts_for_nothing() -> None:
    texts = ["Bart和爸爸一起去游泳", "Bart在海边放风筝", "Bart和妈妈一起看动画片"]
    assert shared_counts("Bart说爸爸妈妈总是吵架", texts) == [1, 0, 1]  # Bart: named by all three
    assert shared_counts("今天天气很好", texts) == [0, 0, 0]
    assert shared_counts("爸爸", []) == []


def test_an_excerpt_pool_puts_the_same_people_first_and_keeps_its_scores() -> None:
    cat = catalog(5)
    before = fused_pool(cat)
    after = lift_participants(before, cat, excerpt_plan(), EXCERPT, text_of(cat), weight=1.0)
    assert after.rids[:3] == [1, 3, 4]  # the mother (rank 3) and the father (rank 4) pass ranks 1 and 2, not rank 0
    assert sorted(after.rids) == sorted(before.rids)
    assert after.scores == before.scores  # the same scores, handed out in the new order
    for rid, score in zip(after.rids, after.scores, strict=True):
        assert after.total[cat.pos_of(np.asarray([rid], np.int64))[0]] == score
    strong = lift_participants(before, cat, excerpt_plan(), EXCERPT, text_of(cat), weight=5.0)
    assert strong.rids[:2] == [3, 4]


def test_questions_no_people_and_weight_zero_leave_the_pool_alone() -> None:
    cat = catalog(5)
    before = fused_pool(cat)
    assert lift_participants(before, cat, question_plan(), "爸爸喜欢什么？", text_of(cat), weight=1.0) is before
    assert lift_participants(before, cat, excerpt_plan(), EXCERPT, text_of(cat), weight=0.0) is before
    nobody = "今天下雨了。我在家看书。书很好看。我很喜欢。"
    assert lift_participants(before, cat, excerpt_plan(), nobody, text_of(cat), weight=1.0) is before


def test_an_agent_state_route_keeps_the_order_its_own_lifts_made() -> None:
    cat = catalog(5)
    before = fused_pool(cat)
    for goal in ("action", "slot", "other"):
        plan = SearchPlan(routes=(*excerpt_plan().routes, EvidenceRoute(goal=goal, queries=("book_hotel",))))
        assert lift_participants(before, cat, plan, EXCERPT, text_of(cat), weight=1.0) is before
