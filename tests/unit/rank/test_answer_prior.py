"""A turn that answers a question takes in the evidence of that question (``Strategy.answer``).

In a conversation the turn that matches a question best is often the other speaker's question about the same
thing ("What did you take away from it?"), and what the question is after is the reply. The catalog links each
turn to the question it answers (``Catalog.reply_to``: the turn before it in its session, by another speaker or
role, asking something), and the ranking adds ``answer`` × the question's fused score to the reply's.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from memory_ext import MemoryEngine, Turn
from memory_ext.plan.strategy import STRATEGIES, Strategy
from memory_ext.rank.zscore import rank_turns
from memory_ext.recall.base import Hits
from memory_ext.store.catalog import Catalog


def _catalog(batches: list[list[tuple[str, str, str, bool]]]) -> Catalog:
    """Turn records (session, speaker, role, asks) appended batch by batch, rids 1..n."""
    cat = Catalog(generation=(0, 0))
    rid = 0
    for batch in batches:
        rows = []
        for session, speaker, role, asks in batch:
            rid += 1
            rows.append((rid, "turn", rid, session, speaker, 100.0 * rid, role, False, None, False, asks))
        cat._append(rows)
    return cat


def test_each_turn_is_linked_to_the_question_it_answers() -> None:
    cat = _catalog([
        [("s1", "Mel", "user", True),         # 0 asks
         ("s1", "Caro", "assistant", False),  # 1 answers 0
         ("s1", "Caro", "assistant", True),   # 2 asks, but answers nobody (1 asked nothing)
         ("s1", "Caro", "assistant", False),  # 3 same speaker as the question before: no answer
         ("s2", "Mel", "user", True)],        # 4 asks in another session
        [("s2", "Caro", "assistant", False),  # 5 answers 4, across two appends
         ("s1", "Mel", "user", False)],       # 6 the turn before it in s1 (3) asked nothing
    ])
    assert cat.reply_to.tolist() == [-1, 0, -1, -1, -1, 4, -1]


def test_the_reply_takes_in_the_question_s_evidence() -> None:
    cat = _catalog([[("s1", "Mel", "user", True), ("s1", "Caro", "assistant", False),
                     ("s1", "Mel", "user", False), ("s1", "Caro", "assistant", False)]])
    hits = {"keyword": Hits(np.array([1, 2, 3, 4], np.int64), np.array([5.0, 1.0, 2.0, 0.0]))}
    plain = Strategy(window=0.0, session=0.0, speaker=0.0, time=0.0, derived=0.0, answer=0.0)
    off = rank_turns(cat, hits, {}, plain)
    on = rank_turns(cat, hits, {}, Strategy(window=0.0, session=0.0, speaker=0.0, time=0.0, derived=0.0,
                                            answer=1.0, answer_floor=0.5))
    assert off.answer is None and off.fused[0] > 0.5
    assert on.answer is not None and on.answer.tolist() == [0.0, 1.0 * (off.fused[0] - 0.5), 0.0, 0.0]
    assert np.allclose(on.total, off.total + on.answer)
    assert int(np.argmax(on.total[1:])) + 1 == 1  # the reply now leads the turns that ask nothing
    # a question that matches no better than the floor lends its reply nothing
    high = rank_turns(cat, hits, {}, Strategy(window=0.0, session=0.0, speaker=0.0, time=0.0, derived=0.0,
                                              answer=1.0, answer_floor=float(off.fused[0]) + 0.1))
    assert high.answer is not None and not high.answer.any()


BOOK = [
    ("Caroline", "I loved \"Becoming Nicole\" by Amy Ellis Nutt. It's a real inspiring true story about a trans girl "
                 "and her family."),
    ("Melanie", "That sounds awesome! What did you take away from the book to use in your life?"),
    ("Caroline", "It taught me self-acceptance and how to find support. Tough times don't last, hope and love exist."),
    ("Melanie", "So true. My kids and I finished another painting last weekend, a sunset over the lake."),
    ("Caroline", "Lovely! Painting together sounds like a great way to spend the weekend."),
]


def test_a_search_ranks_the_answer_above_the_question_that_asked_for_it(tmp_path: Path) -> None:
    ranks = {}
    for answer in (0.0, STRATEGIES["single"].answer):
        with MemoryEngine.open(tmp_path / f"a{answer}", embedder="hashing",
                               config={"recall": {"strategy": {"answer": answer}}}) as engine:
            engine.add_turns([Turn(role="user" if who == "Caroline" else "assistant", speaker=who, content=text,
                                   session_id="s1", timestamp=f"2023-05-08T13:0{i}:00Z")
                              for i, (who, text) in enumerate(BOOK)], "u", wait=True)
            result = engine.search("What did Caroline take away from the book Becoming Nicole?", "u", explain=True)
            texts = [item.text for item in result.items]
            ranks[answer] = next(i for i, t in enumerate(texts) if t.startswith("It taught me"))
            reply = result.items[ranks[answer]]
            assert reply.explanation is not None
            assert (reply.explanation["routes"]["query"]["answer"] > 0) == (answer > 0)
    assert STRATEGIES["single"].answer > 0
    assert ranks[STRATEGIES["single"].answer] < ranks[0.0]


def test_each_turn_knows_its_neighbours_in_its_session_across_appends() -> None:
    """``prev_turn`` / ``next_turn``: the turns before and after in the same session, interleaved sessions and a
    record that is not a turn skipped; a snapshot taken before an append keeps its own ``next_turn``."""
    cat = _catalog([[("a", "u", "user", False), ("b", "u", "user", False), ("a", "x", "assistant", False)]])
    snapshot = cat.next_turn
    cat._append([(4, "fact", 1, "a", "u", 400.0, "user", False, None, False, False)])  # a derived record
    cat._append([(5, "turn", 5, "b", "x", 500.0, "assistant", False, None, False, False),
                 (6, "turn", 6, "a", "u", 600.0, "user", False, None, False, False)])
    assert cat.prev_turn.tolist() == [-1, -1, 0, -1, 1, 2]
    assert cat.next_turn.tolist() == [2, 4, 5, -1, -1, -1]
    assert snapshot.tolist() == [2, -1, -1]
