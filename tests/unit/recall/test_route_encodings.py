"""A conversation excerpt's route texts are encoded together (dense and sparse, one batch) when the embedder can,
with the same results as the channels' own encodings; failures still degrade and report; questions stay as they
were (one dense query encoding, no sparse one)."""

from __future__ import annotations

import doctest
import threading
import zlib
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest

from memory_ext import HashingEmbedder, MemoryEngine, Turn
from memory_ext.embed import DenseSparseEmbedder, check_vectors
from memory_ext.recall import RecallContext, encodings
from memory_ext.recall.encodings import RouteEncodings, split_texts
from memory_ext.recall.sparse import sparse_key
from memory_ext.recall.vector import dense_key
from tests.conftest import Gate

T0 = datetime(2023, 3, 1, tzinfo=UTC)

# MADial-style memories of one child (time, scene, emotion, event) and dialogue excerpts that should recall them
MEMORIES = [
    "2023-03-07 活动类 开心 小明在学校运动会上得了跳远第一名，感到非常开心。",
    "2023-04-02 喜好类 开心 小明在新开的面包店尝了抹茶蛋糕，觉得特别好吃。",
    "2023-05-15 活动类 紧张 小明第一次在全班同学面前表演魔术，手一直在发抖。",
    "2023-06-01 活动类 开心 小明和爸爸去海边放风筝，风筝飞得很高。",
    "2023-07-20 情感类 难过 小明的小狗豆豆生病了，他一整天都很担心。",
    "2023-08-11 学习类 骄傲 小明数学考试考了满分，老师在班上表扬了他。",
    "2023-09-03 活动类 开心 小明参加了社区的乐高比赛，搭了一座大桥。",
    "2023-10-18 喜好类 开心 小明在动物园看到了大熊猫吃竹子。",
]
EXCERPT = ("嘿，你知道吗？元旦晚会我要表演魔术！真是太棒了，观众一定会被你吸引。我有点紧张，你有什么建议吗？"
           "表演前深呼吸，想象自己是无所畏惧的魔术师。对了，我要穿什么好呢？穿上你最喜欢的表演服吧。")
EXCERPT_2 = "我今天又去海边了！风好大啊。你还记得上次放风筝吗？记得，风筝飞得很高。我们下次一起去吧？好呀。"
QUESTION = "When did Caroline go to the support group?"


class SparseHashing(HashingEmbedder):
    """Hashing vectors and a sparse encoding of the same features (CJK characters and bigrams, latin words);
    records every call: ``(method, query?, texts)``."""

    def __init__(self) -> None:
        super().__init__(dim=64)
        self.calls: list[tuple[str, bool, tuple[str, ...]]] = []
        self._calls_lock = threading.Lock()

    def _record(self, method: str, query: bool, texts: Sequence[str]) -> None:
        with self._calls_lock:
            self.calls.append((method, query, tuple(texts)))

    def query_calls(self) -> list[tuple[str, tuple[str, ...]]]:
        """The encoding calls a search made (the indexer's document calls left out)."""
        return [(method, texts) for method, query, texts in self.calls if query]

    def embed_query(self, text: str) -> np.ndarray:
        self._record("embed_query", True, [text])
        return super().embed_query(text)

    def embed_sparse(self, texts: Sequence[str]) -> list[tuple[np.ndarray, np.ndarray]]:
        self._record("embed_sparse", True, texts)  # a search's sparse encodings are query encodings
        return [self._sparse(t) for t in texts]

    def _sparse(self, text: str) -> tuple[np.ndarray, np.ndarray]:
        counts: dict[int, float] = {}
        for feat in self._features(text):
            i = zlib.crc32(feat.encode("utf-8")) % 4096
            counts[i] = counts.get(i, 0.0) + 1.0
        idx = np.array(sorted(counts), dtype=np.int32)
        return idx, np.array([counts[i] for i in idx], dtype=np.float32)


class BatchingHashing(SparseHashing):
    """The same encodings, also made together (a :class:`DenseSparseEmbedder`)."""

    def embed_with_sparse(self, pairs: Sequence[tuple[str, str]], *, query: bool = False
                          ) -> tuple[np.ndarray, list[tuple[np.ndarray, np.ndarray]]]:
        self._record("embed_with_sparse", query, [d for d, _ in pairs])
        dense = [HashingEmbedder.embed_query(self, d) for d, _ in pairs] if query else \
            list(HashingEmbedder.embed_documents(self, [d for d, _ in pairs]))
        return np.stack(dense), [self._sparse(s) for _, s in pairs]


class FailingBatch(BatchingHashing):
    """Indexes as usual, then its query encodings fail."""

    def embed_with_sparse(self, pairs: Sequence[tuple[str, str]], *, query: bool = False
                          ) -> tuple[np.ndarray, list[tuple[np.ndarray, np.ndarray]]]:
        if query:
            raise ConnectionError("e5 worker process died")
        return super().embed_with_sparse(pairs, query=query)


class HangingBatch(BatchingHashing):
    """Its query encodings wait on a gate (a stuck model)."""

    def __init__(self, gate: Gate) -> None:
        super().__init__()
        self.gate = gate

    def embed_with_sparse(self, pairs: Sequence[tuple[str, str]], *, query: bool = False
                          ) -> tuple[np.ndarray, list[tuple[np.ndarray, np.ndarray]]]:
        if query:
            self.gate.wait()
        return super().embed_with_sparse(pairs, query=query)


def _engine(path: Path, embedder: SparseHashing, config: dict | None = None) -> MemoryEngine:
    # the turns' sparse encodings at write, so that every encoding a search makes is one of its route texts'
    config = {**(config or {}), "ingest": {**(config or {}).get("ingest", {}), "sparse_encodings": "at_write"}}
    eng = MemoryEngine.open(path, embedder=embedder, config=config)
    eng.add_turns([Turn(role="user", speaker="小明", content=m, timestamp=T0 + timedelta(days=i))
                   for i, m in enumerate(MEMORIES)], "xiaoming", wait=True)
    embedder.calls.clear()
    return eng


def _route_texts(eng: MemoryEngine, query: str) -> list[str]:
    plan = eng.search(query, "xiaoming", k=1).plan
    return list(dict.fromkeys(" ".join(r.queries) for r in plan.routes))


def test_the_fakes_are_what_they_stand_for() -> None:
    assert isinstance(BatchingHashing(), DenseSparseEmbedder)
    assert not isinstance(SparseHashing(), DenseSparseEmbedder)


def test_an_excerpt_search_encodes_its_route_texts_in_one_batch(tmp_path: Path) -> None:
    emb = BatchingHashing()
    with _engine(tmp_path / "s", emb) as eng:
        res = eng.search(EXCERPT, "xiaoming", k=3, trace=True)
        routes = list(dict.fromkeys(" ".join(r.queries) for r in res.plan.routes))
        assert len(routes) == 3  # the excerpt, its opening and its focus
        calls = emb.query_calls()
        # no channel encoded on its own: every route text once, dense and sparse together
        assert {method for method, _ in calls} == {"embed_with_sparse"}
        encoded = [t for _, texts in calls for t in texts]
        assert sorted(encoded) == sorted(routes)
        assert len(calls) == min(encodings.ENCODING_GROUPS, len(routes))
        assert {"vector", "vector@opening", "vector@focus", "sparse", "sparse@opening",
                "sparse@focus"} <= set(res.trace["channels"])
        assert not res.degraded
        assert "魔术" in res.items[0].text
        emb.calls.clear()
        again = eng.search(EXCERPT, "xiaoming", k=3)  # the next search finds them in the cache
        assert emb.query_calls() == [] and again.items == res.items


def test_one_group_is_one_call_for_every_route_text(tmp_path: Path) -> None:
    emb = BatchingHashing()
    with _engine(tmp_path / "s", emb) as eng:
        texts = _route_texts(eng, EXCERPT_2)
        emb.calls.clear()
        ctx = RecallContext(store=None, keyword_index=None, vector_index=None, embedder=emb)  # type: ignore[arg-type]
        batch = RouteEncodings(ctx, texts, groups=1)
        batch.ensure(texts[1])
        assert emb.query_calls() == [("embed_with_sparse", tuple(texts))]
        for text in texts:
            batch.ensure(text)  # made already: no other call
            assert np.array_equal(ctx.query_vectors[dense_key(emb, text)].vector,  # type: ignore[attr-defined]
                                  check_vectors(emb, emb._embed(text), 1)[0])  # what the vector channel makes
            [(idx, val)] = ctx.query_vectors[sparse_key(emb, text)].vector  # type: ignore[attr-defined]
            assert np.array_equal(idx, emb._sparse(text)[0])
            assert np.isclose(float(np.linalg.norm(val)), 1.0)
        assert len(emb.query_calls()) == 1


@pytest.mark.parametrize("query", [EXCERPT, EXCERPT_2])
def test_batched_results_equal_the_channels_own_encodings(tmp_path: Path, query: str) -> None:
    batching, plain = BatchingHashing(), SparseHashing()
    with _engine(tmp_path / "a", batching) as a, _engine(tmp_path / "b", plain) as b:
        got, want = a.search(query, "xiaoming", k=5, explain=True), b.search(query, "xiaoming", k=5, explain=True)
        assert {m for m, _ in batching.query_calls()} == {"embed_with_sparse"}
        assert {m for m, _ in plain.query_calls()} == {"embed_query", "embed_sparse"}  # six calls, one per need
        assert len(plain.query_calls()) == 6
        assert [i.external_ids for i in got.items] == [i.external_ids for i in want.items]
        assert [i.score for i in got.items] == [i.score for i in want.items]
        assert [i.explanation for i in got.items] == [i.explanation for i in want.items]
        assert got.context == want.context


def test_a_failing_batch_degrades_every_channel_that_needed_it_and_says_why(tmp_path: Path) -> None:
    emb = FailingBatch()
    with _engine(tmp_path / "s", emb) as eng:
        res = eng.search(EXCERPT, "xiaoming", k=3)
        failed = {e.channel: e for e in res.channel_errors}
        assert set(failed) == {"vector", "vector@opening", "vector@focus", "sparse", "sparse@opening",
                               "sparse@focus"}
        assert all(e.error_type == "ConnectionError" and "worker process died" in e.message
                   for e in failed.values())
        assert res.degraded and res.items  # the keyword channels still answer: never "no memories"
        assert "魔术" in res.items[0].text and "vector" not in res.items[0].channels


def test_a_stuck_batch_times_out_as_channel_failures(tmp_path: Path, gate: Gate) -> None:
    emb = HangingBatch(gate)
    with _engine(tmp_path / "s", emb, config={"recall": {"channel_timeout_s": 0.3}}) as eng:
        res = eng.search(EXCERPT, "xiaoming", k=3)
        assert gate.entered and not gate.finished  # the search did not wait for the stuck model (the fixture
        # opens the gate after the engine is closed: the abandoned calls must not race the store's close)
        timed_out = {e.channel for e in res.channel_errors if e.error_type == "TimeoutError"}
        assert {"vector", "sparse", "vector@focus", "sparse@opening"} <= timed_out
        assert res.items and "魔术" in res.items[0].text


@pytest.mark.parametrize("embedder", [BatchingHashing, SparseHashing])
def test_a_question_gets_one_dense_encoding_and_no_sparse_one(tmp_path: Path, embedder: type[SparseHashing]) -> None:
    emb = embedder()
    with _engine(tmp_path / "s", emb) as eng:
        for question in (QUESTION, "小明什么时候去海边放风筝的？"):
            emb.calls.clear()
            res = eng.search(question, "xiaoming", k=3)
            assert len(res.plan.routes) == 1
            assert emb.query_calls() == [("embed_query", (question,))]


def test_texts_are_split_by_length_into_at_most_the_groups_asked() -> None:
    texts = [EXCERPT, "嘿，你知道吗？", "对了，我要穿什么好呢？ 穿上你最喜欢的表演服吧。"]
    assert split_texts(texts, 2) == [[EXCERPT], texts[1:]]
    assert split_texts(texts, 1) == [texts]
    assert split_texts(texts, 5) == [[t] for t in [EXCERPT, texts[2], texts[1]]]
    assert split_texts(texts[:1], 2) == [texts[:1]]


def test_the_module_examples_hold() -> None:
    result = doctest.testmod(encodings)
    assert result.attempted >= 4 and result.failed == 0


class QueriesHashing(SparseHashing):
    """The same encodings; it also embeds several queries in one call (``embed_queries``, as e5 does)."""

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        self._record("embed_queries", True, texts)
        return np.stack([HashingEmbedder.embed_query(self, t) for t in texts])


def test_several_dense_route_texts_are_embedded_in_one_call(tmp_path: Path) -> None:
    # no sparse encoding to make (the sparse channel off): the excerpt's three route texts still share one call
    off = {"globals": {"sparse_enabled": False}}
    batching, plain = QueriesHashing(), SparseHashing()
    with _engine(tmp_path / "a", batching, off) as a, _engine(tmp_path / "b", plain, off) as b:
        got, want = a.search(EXCERPT, "xiaoming", k=5, explain=True), b.search(EXCERPT, "xiaoming", k=5, explain=True)
        routes = list(dict.fromkeys(" ".join(r.queries) for r in got.plan.routes))
        assert len(routes) == 3
        assert batching.query_calls() == [("embed_queries", tuple(routes))]
        assert sorted(t for m, [t] in plain.query_calls()) == sorted(routes)  # one embed_query per route text
        assert [i.external_ids for i in got.items] == [i.external_ids for i in want.items]
        assert [i.score for i in got.items] == [i.score for i in want.items]
        batching.calls.clear()
        assert a.search(QUESTION, "xiaoming", k=3).items is not None
        assert batching.query_calls() == [("embed_query", (QUESTION,))]  # one text: the channel's own call
