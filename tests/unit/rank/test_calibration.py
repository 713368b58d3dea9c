"""Absolute scores: with e5, ``item.score`` comes from the query-item cosine and the query's coverage, not from
where the item stands among the store's other candidates, so it means the same in every store size."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from memory_ext import MemoryEngine
from memory_ext.bench.small import load_small_chats
from memory_ext.rank.calibration import bounded_scores, cosine_relevance, item_cosines, reference_cosine
from memory_ext.recall.base import Hits

E5 = "e5-small-q4-numpy-1:384"


def test_item_cosines_read_each_items_own_record_and_only_for_calibrated_embedders() -> None:
    hits = Hits(np.array([7, 3, 11], np.int64), np.array([0.81, 0.86, 0.74]))
    assert item_cosines(hits, [3, 11, 7], E5) == [0.86, 0.74, 0.81]
    assert item_cosines(hits, [5], E5) == [0.74]  # not listed: the lowest listed cosine
    assert item_cosines(hits, [3], "hashing-v1:256") is None
    assert item_cosines(None, [3], E5) is None and item_cosines(Hits.empty(), [3], E5) is None


def test_the_same_match_scores_the_same_whatever_the_other_candidates() -> None:
    alone = bounded_scores([0.4], texts=["I'm allergic to shellfish."], query="what can't Maya eat?",
                           cosines=[0.85])
    crowded = bounded_scores([25.0, 0.4, -3.0], texts=["x", "I'm allergic to shellfish.", "y"],
                             query="what can't Maya eat?", cosines=[0.9, 0.85, 0.7])
    assert alone[0] == crowded[1] == cosine_relevance(0.85, 0.0)  # the fused score plays no part
    assert crowded == sorted(crowded, reverse=True)
    assert cosine_relevance(0.95, 0.0) > cosine_relevance(0.85, 0.0) > cosine_relevance(0.75, 0.0)
    assert cosine_relevance(0.85, 1.0) > cosine_relevance(0.85, 0.0)


FILLER = ["We watched the new sci-fi film on Friday.", "The bakery on Elm Street closes at six.",
          "My laptop battery died during the meeting.", "I walked the dog along the river this morning.",
          "Our team finished the quarterly report early.", "The train to Leeds was delayed by an hour.",
          "I repainted the kitchen cabinets a pale green.", "Grandma sent a postcard from Madeira.",
          "The gym was crowded after work today.", "I finally fixed the squeaky bedroom door."]


def _scores(engine: MemoryEngine, query: str) -> dict[str, float]:
    return {i.text: i.score for i in engine.search(query, "maya", k=20).items}


@pytest.mark.parametrize("config", [None, {"ingest": {"sentence_vectors": 0}}], ids=["sentence-mixed", "turn-only"])
def test_a_memory_scores_alike_in_a_three_memory_store_and_a_bigger_one(tmp_path: Path,
                                                                        config: dict[str, object] | None) -> None:
    """The README's recipe, ``score_threshold: 0.5``, on the default e5 embedder: a question asked in the memory's
    words passes it, an off-topic one does not, and neither depends on how many other memories the store holds
    (the fused z-scores did: a three-memory store scored every answer low). Both vector kinds have their own
    constants: sentence-mixed turn vectors (the default) and the turns' own (``sentence_vectors: 0``)."""
    turns = ["I'm allergic to shellfish.", "My brother Tom lives in Lyon.", "I started learning the cello in May."]
    questions = ["where does Maya's brother live?", "is Maya allergic to anything?", "what can't Maya eat?"]
    scores = []
    for name, memories in (("small", turns), ("big", turns + FILLER)):
        with MemoryEngine.open(tmp_path / name, config=config) as engine:
            engine.add_turns([{"role": "user", "content": t} for t in memories], "maya", wait=True)
            scores.append({q: _scores(engine, q) for q in questions})
            off = engine.search("how do I reset my router password?", "maya", k=3).items
            assert all(i.score < 0.5 for i in off), [(i.text, i.score) for i in off]
    small, big = scores
    assert small[questions[0]][turns[1]] >= 0.5 and big[questions[0]][turns[1]] >= 0.5
    assert small[questions[1]][turns[0]] >= 0.5 and big[questions[1]][turns[0]] >= 0.5
    for q in questions:
        for text, score in small[q].items():
            if score >= 0.1:
                assert abs(big[q][text] - score) < 0.25, (q, text, score, big[q][text])


@pytest.mark.parametrize(("chat", "answered", "absent"), [
    ("en-pc", "what's my main computer", "What monitor do I have?"),
    ("zh-trip", "国庆旅行几个人", "我们坐什么交通工具去？"),
    ("zh-diet", "我晚上吃主食吗", "我现在体重多少？"),  # 0.95 before: Chinese cosines run high (CJK_LOGIT)
    # the agent's "congratulations to Lena" covers "Lena" but is no more relevant than the statement it answers
    ("en-lena", "Which city did Lena move to?", "What does Lena's husband do?"),
])
def test_a_question_near_the_chats_topic_whose_answer_is_absent_scores_below_half(tmp_path: Path, chat: str,
                                                                                  answered: str, absent: str) -> None:
    """The store holds the topic (computers, the holiday trip, Lena) but not the answer (a monitor, the transport,
    a husband): with the reference in the calibration and dependent turns scored no higher than their carriers,
    the best item of the absent answer's question scores below 0.5 (0.81, 0.72 and 0.88 before), the answered
    question's answer above it."""
    found = {c.id: c for c in load_small_chats("dev")}[chat]
    with MemoryEngine.open(tmp_path / "m") as engine:
        engine.add_turns([dict(t) for t in found.turns], chat, wait=True)
        assert engine.search(answered, chat, k=5).items[0].score >= 0.5
        assert engine.search(absent, chat, k=5).items[0].score < 0.5


def test_the_reference_is_how_close_a_query_already_is_to_text_that_says_nothing() -> None:
    from memory_ext.embed import resolve_embedder

    embedder, _ = resolve_embedder("e5")
    chatter, question = (reference_cosine(embedder.embed_query(q), embedder)
                         for q in ("好的，谢谢！", "Where is Coimbra?"))
    assert chatter is not None and question is not None and chatter > question
    assert reference_cosine(None, embedder) is None
    assert reference_cosine(embedder.embed_query("x"), object()) is None  # an embedder whose cosines are not calibrated
