"""The incremental per-namespace BM25 index, checked against rank_bm25.BM25Okapi as the reference."""

from __future__ import annotations

import functools
import random
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from rank_bm25 import BM25Okapi

from memory_ext.errors import ConfigError, InvalidQueryError
from memory_ext.store.keyword import KeywordIndex, bm25_idf, bm25_tf_weight, okapi_idf_floor
from memory_ext.text import tokenize

# ------------------------------------------------------------------------------------ a fixed corpus

_NAMES = ["Caroline", "Melanie", "Jon", "Gina", "Nate", "Joanna", "Tim", "John"]
_ACTIVITIES = [
    "went hiking", "painted a sunset", "ran a charity race", "visited the LGBTQ support group",
    "adopted a puppy", "baked sourdough bread", "started pottery classes", "played the violin",
    "read a mystery novel", "went camping by the lake", "opened a dance studio", "watched a horror movie",
    "fixed the old bike", "planted tomatoes", "learned to surf", "volunteered at the shelter",
]
_PLACES = ["in Paris", "at the beach", "downtown", "near the mountains", "at school", "at home", "in Boston"]
_TIMES = ["yesterday", "last weekend", "on Saturday", "two weeks ago", "this morning", "in May 2023"]
_FEELINGS = ["It was amazing!", "I felt so proud.", "Honestly it was exhausting.", "The kids loved it.",
             "I can't wait to do it again.", "It reminded me of my grandma.", "Not my best day, haha."]
_QUESTIONS = ["How was it?", "Did you take pictures?", "Who went with you?", "What made you try that?", ""]
_ZH_SUBJECTS = ["我", "Bart", "Lisa", "我们全家", "小明"]
_ZH_EVENTS = [
    "在圣诞节晚会上跳舞", "去新开的冰淇淋店吃了芒果冰淇淋", "在学校运动会上得了第一名", "养了一只小猫",
    "和朋友去北京旅游", "学会了弹钢琴", "在元旦晚会上表演魔术", "参加了英语演讲比赛", "给妈妈做了生日蛋糕",
    "周末去公园放风筝",
]
_ZH_FEELINGS = ["感觉非常开心。", "有点紧张。", "觉得很骄傲！", "真是太累了。", "希望下次还能去。"]


def _english_turn(rng: random.Random) -> str:
    return " ".join(
        [rng.choice(_NAMES) + ":", "I", rng.choice(_ACTIVITIES), rng.choice(_PLACES), rng.choice(_TIMES) + ".",
         rng.choice(_FEELINGS), rng.choice(_QUESTIONS)]
    ).strip()


def _chinese_turn(rng: random.Random) -> str:
    when = rng.choice(["昨天", "上周", "去年", ""])
    return rng.choice(_ZH_SUBJECTS) + when + rng.choice(_ZH_EVENTS) + "，" + rng.choice(_ZH_FEELINGS)


def make_corpus(n: int = 200, seed: int = 7) -> list[str]:
    """``n`` chat turns, about one in four Chinese, deterministic for a seed."""
    rng = random.Random(seed)
    return [_chinese_turn(rng) if rng.random() < 0.25 else _english_turn(rng) for _ in range(n)]


QUERIES = [
    "When did Caroline go to the LGBTQ support group?", "What did Melanie paint?", "Who adopted a puppy?",
    "hiking near the mountains", "sourdough bread", "Did Jon run a charity race in Boston?",
    "pottery classes at school", "violin", "mystery novel last weekend", "camping by the lake with kids",
    "dance studio downtown", "horror movie", "What did Gina plant?", "surf at the beach", "shelter volunteer",
    "grandma", "exhausting day", "proud of the kids", "Paris in May 2023", "Nate fixed a bike",
    "圣诞节晚会", "谁养了小猫？", "冰淇淋店", "北京旅游", "钢琴", "魔术表演", "英语演讲比赛", "生日蛋糕",
    "放风筝", "Bart 开心", "Tim and John went camping", "camping camping camping lake",
]


# ------------------------------------------------------------------------------------------ helpers


@pytest.fixture
def conn() -> Iterator[sqlite3.Connection]:
    c = sqlite3.connect(":memory:", isolation_level=None)
    KeywordIndex.create_schema(c)
    yield c
    c.close()


def _file_conn(path: Path) -> sqlite3.Connection:
    c = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=30)
    c.execute("PRAGMA journal_mode=WAL")
    return c


def _add(index: KeywordIndex, conn: sqlite3.Connection, ns_id: int, docs: list[tuple[int, str]]) -> None:
    conn.execute("BEGIN")
    index.add(conn, ns_id, docs)
    conn.execute("COMMIT")


@functools.cache
def _terms(text: str) -> tuple[str, ...]:
    return tuple(tokenize(text))


def _reference(docs: list[tuple[int, str]], query: str, k: int) -> list[tuple[int, float]]:
    """rank_bm25 top-k over ``docs`` among documents sharing a term with the query; ties by rid."""
    bm25 = BM25Okapi([list(_terms(text)) for _, text in docs])
    q = tokenize(query)
    scores = bm25.get_scores(q)
    terms = set(q)
    hits = [(rid, float(scores[i])) for i, (rid, text) in enumerate(docs) if terms & set(_terms(text))]
    return sorted(hits, key=lambda h: (-h[1], h[0]))[:k]


def _assert_same(got: list[tuple[int, float]], want: list[tuple[int, float]]) -> None:
    assert [rid for rid, _ in got] == [rid for rid, _ in want]
    assert np.allclose([s for _, s in got], [s for _, s in want], rtol=0, atol=1e-9)


# ---------------------------------------------------------------------------------- the BM25 formula


def test_formula_functions_match_rank_bm25() -> None:
    corpus = [["cat", "dog"], ["cat"], ["fish", "cat", "cat"], ["bird"], ["owl"], ["emu"]]
    ref = BM25Okapi(corpus)
    df = np.array([3, 1, 1, 1, 1, 1])  # cat, dog, fish, bird, owl, emu
    floor = okapi_idf_floor(df, 6, 0.25)
    idf = np.where(bm25_idf(df, 6) < 0, floor, bm25_idf(df, 6))
    assert np.allclose(idf[:3], [ref.idf["cat"], ref.idf["dog"], ref.idf["fish"]])


def test_idf_floor_stays_positive_in_a_tiny_corpus() -> None:
    """rank_bm25 gives a term in every document of a 3-document corpus a *negative* weight; we do not."""
    corpus = [["cat", "dog"], ["cat"], ["fish", "cat", "cat"]]
    ref = BM25Okapi(corpus)
    df = np.array([3, 1, 1])  # cat, dog, fish
    assert ref.idf["cat"] < 0
    floor = okapi_idf_floor(df, 3, 0.25)
    assert floor == 0.25
    floor = okapi_idf_floor(df, 3, 0.25)
    idf = np.where(bm25_idf(df, 3) < 0, floor, bm25_idf(df, 3))
    assert np.allclose(idf[1:], [ref.idf["dog"], ref.idf["fish"]])
    avgdl = 2.0
    score_doc3 = idf[0] * bm25_tf_weight(2, 3, avgdl, 1.5, 0.75) + idf[2] * bm25_tf_weight(1, 3, avgdl, 1.5, 0.75)
    assert score_doc3 > idf[2] * bm25_tf_weight(1, 3, avgdl, 1.5, 0.75)  # matching 'cat' adds, never subtracts


# ------------------------------------------------------------------------------ parity with rank_bm25


def test_top10_and_scores_match_rank_bm25(conn: sqlite3.Connection) -> None:
    docs = list(enumerate(make_corpus(), start=1))
    index = KeywordIndex()
    _add(index, conn, 1, docs)
    overlaps = []
    for query in QUERIES:
        got = index.search(conn, 1, query, 10)
        want = _reference(docs, query, 10)
        assert got, query
        overlaps.append(len({r for r, _ in got} & {r for r, _ in want}) / len(want))
        ref_scores = dict(_reference(docs, query, len(docs)))
        for rid, score in got:
            assert score == pytest.approx(ref_scores[rid], abs=1e-4), (query, rid)
    assert sum(overlaps) / len(overlaps) >= 0.9
    assert min(overlaps) == 1.0  # same formula, same tie rule: the rankings are identical


def test_every_score_matches_rank_bm25_including_the_negative_idf_floor(conn: sqlite3.Connection) -> None:
    # "cat" is in 4 of 5 documents: its raw IDF is negative and rank_bm25 floors it at eps * mean IDF
    docs = [(1, "cat dog"), (2, "cat cat fish"), (3, "cat bird"), (4, "cat"), (5, "horse")]
    index = KeywordIndex()
    _add(index, conn, 1, docs)
    for query in ["cat", "cat fish", "horse cat", "bird bird", "zebra"]:
        _assert_same(index.search(conn, 1, query, 10), _reference(docs, query, 10))


def test_documents_without_terms_still_count_in_n_like_rank_bm25(conn: sqlite3.Connection) -> None:
    docs = [(1, "cat dog"), (2, ""), (3, "the of and"), (4, "cat"), (5, "fish")]
    index = KeywordIndex()
    _add(index, conn, 1, docs)
    assert index.doc_count(conn, 1) == 5
    for query in ["cat", "cat fish", "dog"]:
        _assert_same(index.search(conn, 1, query, 10), _reference(docs, query, 10))


def test_repeated_query_terms_count_once_per_occurrence_like_rank_bm25(conn: sqlite3.Connection) -> None:
    docs = [(1, "camping trip by the lake"), (2, "lake house"), (3, "camping gear"), (4, "city trip")]
    index = KeywordIndex()
    _add(index, conn, 1, docs)
    once = dict(index.search(conn, 1, "camping lake", 10))
    twice = dict(index.search(conn, 1, "camping camping lake", 10))
    assert twice[3] == pytest.approx(2 * once[3])
    _assert_same(index.search(conn, 1, "camping camping lake", 10), _reference(docs, "camping camping lake", 10))


def test_only_documents_sharing_a_term_are_returned(conn: sqlite3.Connection) -> None:
    index = KeywordIndex()
    _add(index, conn, 1, [(1, "red apple"), (2, "green pear"), (3, "blue sky")])
    assert [rid for rid, _ in index.search(conn, 1, "apple pie", 10)] == [1]
    assert index.search(conn, 1, "zebra", 10) == []
    assert index.search(conn, 1, "", 10) == []
    assert index.search(conn, 1, "the of and", 10) == []


def test_doc_freqs_count_the_documents_holding_each_index_term(conn: sqlite3.Connection) -> None:
    index = KeywordIndex()
    docs = [(1, "red apple, red pie"), (2, "green apple"), (3, "blue sky"), (4, "apple tree in the sky")]
    _add(index, conn, 1, docs)
    _add(index, conn, 2, [(9, "apple apple")])
    terms = ["appl", "red", "sky", "zebra"]  # index terms: tokenize's (stemmed) output
    expected = [sum(t in _terms(text) for _, text in docs) for t in terms]
    assert expected == [3, 1, 2, 0]
    assert index.doc_freqs(conn, 1, terms) == expected
    conn.execute("BEGIN")
    index.remove(conn, 1, [1, 4])
    conn.execute("COMMIT")
    assert index.doc_freqs(conn, 1, terms) == [1, 0, 1, 0]
    assert index.doc_freqs(conn, 3, terms) == [0, 0, 0, 0] and index.doc_freqs(conn, 1, []) == []


def test_ties_are_broken_by_rid_ascending(conn: sqlite3.Connection) -> None:
    index = KeywordIndex()
    _add(index, conn, 1, [(30, "blue whale"), (10, "blue whale"), (20, "blue whale"), (40, "red fox")])
    got = index.search(conn, 1, "whale", 2)
    assert [rid for rid, _ in got] == [10, 20]
    assert got[0][1] == got[1][1]


def test_k_limits_and_invalid_k_is_rejected(conn: sqlite3.Connection) -> None:
    docs = list(enumerate(make_corpus(), start=1))
    index = KeywordIndex()
    _add(index, conn, 1, docs)
    assert len(index.search(conn, 1, "camping", 3)) == 3
    _assert_same(index.search(conn, 1, "camping", 3), _reference(docs, "camping", 3))
    for bad in (0, -1):
        with pytest.raises(InvalidQueryError, match="k"):
            index.search(conn, 1, "camping", bad)


def test_bad_parameters_are_rejected() -> None:
    with pytest.raises(ConfigError, match="k1"):
        KeywordIndex(k1=-1.0)
    with pytest.raises(ConfigError, match="b"):
        KeywordIndex(b=1.5)


@pytest.mark.parametrize(("k1", "b", "epsilon"), [(1.5, 0.75, 0.25), (1.2, 0.75, 0.25), (2.0, 0.3, 0.25),
                                                (1.5, 0.75, 0.5)])
def test_k1_b_and_epsilon_are_honoured(conn: sqlite3.Connection, k1: float, b: float, epsilon: float) -> None:
    # "cat" is in 4 of 5 documents: its IDF is floored at epsilon * mean IDF
    docs = [(1, "cat"), (2, "cat cat cat dog bird fish"), (3, "dog cat"), (4, "bird"), (5, "cat horse")]
    index = KeywordIndex(k1=k1, b=b, epsilon=epsilon)
    _add(index, conn, 1, docs)
    ref = BM25Okapi([list(_terms(t)) for _, t in docs], k1=k1, b=b, epsilon=epsilon).get_scores(["cat", "dog"])
    got = dict(index.search(conn, 1, "cat dog", 5))
    assert [got[rid] for rid in (1, 2, 3)] == pytest.approx(list(ref[:3]), abs=1e-12)
    default = dict(KeywordIndex().search(conn, 1, "cat dog", 5))
    assert (got == default) == ((k1, b, epsilon) == (1.5, 0.75, 0.25))


def test_allowed_filters_without_changing_scores(conn: sqlite3.Connection) -> None:
    docs = list(enumerate(make_corpus(), start=1))
    index = KeywordIndex()
    _add(index, conn, 1, docs)
    everything = dict(index.search(conn, 1, "camping lake kids", len(docs)))
    allowed = set(list(everything)[1::2]) | {9999}
    filtered = index.search(conn, 1, "camping lake kids", 5, allowed=allowed)
    assert len(filtered) == 5
    assert {rid for rid, _ in filtered} <= allowed
    for rid, score in filtered:
        assert score == everything[rid]
    assert index.search(conn, 1, "camping", 5, allowed=set()) == []


# -------------------------------------------------------------------------------------- namespaces


def test_namespaces_are_isolated(conn: sqlite3.Connection) -> None:
    corpus = make_corpus(300, seed=11)
    index = KeywordIndex()
    owner: dict[int, int] = {}
    docs_of: dict[int, list[tuple[int, str]]] = {1: [], 2: [], 3: []}
    for start in range(0, 300, 25):  # interleaved batches to three namespaces
        ns = 1 + (start // 25) % 3
        batch = [(rid, corpus[rid - 1]) for rid in range(start + 1, start + 26)]
        _add(index, conn, ns, batch)
        docs_of[ns].extend(batch)
        owner.update({rid: ns for rid, _ in batch})
        for query in QUERIES[:6]:
            for ns_id in (1, 2, 3):
                assert all(owner[rid] == ns_id for rid, _ in index.search(conn, ns_id, query, 20))
    for ns_id in (1, 2, 3):
        assert index.doc_count(conn, ns_id) == 100
        for query in QUERIES:
            # per-namespace statistics: exactly rank_bm25 over that namespace's documents alone
            _assert_same(index.search(conn, ns_id, query, 10), _reference(docs_of[ns_id], query, 10))
    assert index.search(conn, 4, "camping", 10) == [] and index.doc_count(conn, 4) == 0


def test_a_document_added_to_one_namespace_does_not_change_another(conn: sqlite3.Connection) -> None:
    index = KeywordIndex()
    _add(index, conn, 1, [(1, "camping by the lake"), (2, "city lights")])
    _add(index, conn, 2, [(3, "mountain camping")])
    before = index.search(conn, 1, "camping lake", 10)
    _add(index, conn, 2, [(4, "camping camping lake lake"), (5, "lake view")])
    assert index.search(conn, 1, "camping lake", 10) == before


def test_the_same_rid_may_live_in_two_namespaces(conn: sqlite3.Connection) -> None:
    index = KeywordIndex()
    _add(index, conn, 1, [(7, "red apple")])
    _add(index, conn, 2, [(7, "green apple")])
    assert [r for r, _ in index.search(conn, 1, "red", 5)] == [7]
    assert index.search(conn, 2, "red", 5) == []


# ------------------------------------------------------------------------------------- incremental


def test_incremental_adds_are_seen_and_scored_like_a_fresh_index(conn: sqlite3.Connection) -> None:
    docs = list(enumerate(make_corpus(), start=1))
    index = KeywordIndex()
    _add(index, conn, 1, docs[:50])
    _assert_same(index.search(conn, 1, "camping lake", 10), _reference(docs[:50], "camping lake", 10))
    _add(index, conn, 1, docs[50:120])
    _add(index, conn, 1, docs[120:])
    for query in QUERIES:
        _assert_same(index.search(conn, 1, query, 10), _reference(docs, query, 10))


def test_many_small_batches_between_searches(conn: sqlite3.Connection) -> None:
    # enough postings to pass through several tail merges
    docs = list(enumerate(make_corpus(6000, seed=3), start=1))
    index = KeywordIndex()
    for start in range(0, len(docs), 150):
        _add(index, conn, 1, docs[start : start + 150])
        index.search(conn, 1, QUERIES[start // 150 % len(QUERIES)], 10)
    for query in QUERIES[::3]:
        _assert_same(index.search(conn, 1, query, 10), _reference(docs, query, 10))


def test_re_adding_a_rid_replaces_its_text(conn: sqlite3.Connection) -> None:
    index = KeywordIndex()
    _add(index, conn, 1, [(1, "red apple"), (2, "green pear")])
    assert index.search(conn, 1, "apple", 5)[0][0] == 1
    _add(index, conn, 1, [(1, "yellow banana"), (3, "apple pie"), (3, "apple crumble")])  # last one wins
    assert index.doc_count(conn, 1) == 3
    assert [r for r, _ in index.search(conn, 1, "apple", 5)] == [3]
    assert index.search(conn, 1, "pie", 5) == []
    docs = [(1, "yellow banana"), (2, "green pear"), (3, "apple crumble")]
    _assert_same(index.search(conn, 1, "banana crumble pear", 5), _reference(docs, "banana crumble pear", 5))


def test_remove_and_drop_namespace(conn: sqlite3.Connection) -> None:
    docs = list(enumerate(make_corpus(), start=1))
    index = KeywordIndex()
    _add(index, conn, 1, docs)
    _add(index, conn, 2, [(1000, "camping camping")])
    index.search(conn, 1, "camping", 10)
    gone = [rid for rid, _ in docs[::2]]
    conn.execute("BEGIN")
    index.remove(conn, 1, [*gone, 424242])
    conn.execute("COMMIT")
    left = [d for d in docs if d[0] not in set(gone)]
    assert index.doc_count(conn, 1) == len(left)
    for query in QUERIES[:10]:
        _assert_same(index.search(conn, 1, query, 10), _reference(left, query, 10))
    conn.execute("BEGIN")
    index.drop_namespace(conn, 1)
    conn.execute("COMMIT")
    assert index.doc_count(conn, 1) == 0
    assert index.search(conn, 1, "camping", 10) == []
    assert [r for r, _ in index.search(conn, 2, "camping", 10)] == [1000]
    _add(index, conn, 1, [(5, "camping again")])  # a dropped namespace can be filled again
    assert [r for r, _ in index.search(conn, 1, "camping", 10)] == [5]


def test_invalidate_after_a_rolled_back_transaction(conn: sqlite3.Connection) -> None:
    index = KeywordIndex()
    _add(index, conn, 1, [(1, "red apple"), (2, "green pear")])
    conn.execute("BEGIN")
    index.add(conn, 1, [(3, "apple pie"), (4, "apple tart")])
    assert len(index.search(conn, 1, "apple", 10)) == 3  # the open transaction sees its own rows
    conn.execute("ROLLBACK")
    index.invalidate(1)
    assert [r for r, _ in index.search(conn, 1, "apple", 10)] == [1]
    _add(index, conn, 1, [(5, "apple cider")])
    _assert_same(index.search(conn, 1, "apple", 10),
                 _reference([(1, "red apple"), (2, "green pear"), (5, "apple cider")], "apple", 10))
    index.invalidate()  # all namespaces
    assert len(index.search(conn, 1, "apple", 10)) == 2


def test_a_second_instance_on_the_same_database_sees_writes_and_deletes(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    writer_conn, reader_conn = _file_conn(path), _file_conn(path)
    KeywordIndex.create_schema(writer_conn)
    writer, reader = KeywordIndex(), KeywordIndex()  # like two processes: no shared cache
    docs = list(enumerate(make_corpus(), start=1))
    _add(writer, writer_conn, 1, docs[:100])
    assert reader.search(reader_conn, 1, "camping", 5) == _reference(docs[:100], "camping", 5)
    _add(writer, writer_conn, 1, docs[100:])
    _assert_same(reader.search(reader_conn, 1, "camping", 5), _reference(docs, "camping", 5))
    # a delete in the other "process": the reader is never told, it notices the version change
    writer_conn.execute("BEGIN")
    writer.remove(writer_conn, 1, [rid for rid, _ in docs[:150]])
    writer_conn.execute("COMMIT")
    _assert_same(reader.search(reader_conn, 1, "camping", 5), _reference(docs[150:], "camping", 5))
    writer_conn.execute("BEGIN")
    writer.drop_namespace(writer_conn, 1)
    writer.add(writer_conn, 1, [(9000, "camping trip")])
    writer_conn.execute("COMMIT")
    assert [r for r, _ in reader.search(reader_conn, 1, "camping", 5)] == [9000]
    writer_conn.close()
    reader_conn.close()


def test_concurrent_searches_while_another_thread_adds(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    setup = _file_conn(path)
    KeywordIndex.create_schema(setup)
    setup.close()
    docs = list(enumerate(make_corpus(1500, seed=5), start=1))
    index = KeywordIndex()
    errors: list[BaseException] = []
    done = threading.Event()

    def write() -> None:
        c = _file_conn(path)
        try:
            for start in range(0, len(docs), 50):
                _add(index, c, 1, docs[start : start + 50])
        except BaseException as exc:  # noqa: BLE001  a thread's failure is surfaced by the assertion below
            errors.append(exc)
        finally:
            done.set()
            c.close()

    def read(seed: int) -> None:
        c = _file_conn(path)
        rng = random.Random(seed)
        try:
            while not done.is_set():
                for rid, _ in index.search(c, 1, rng.choice(QUERIES), 10):
                    assert 1 <= rid <= len(docs)
        except BaseException as exc:  # noqa: BLE001  a thread's failure is surfaced by the assertion below
            errors.append(exc)
        finally:
            c.close()

    threads = [threading.Thread(target=write)] + [threading.Thread(target=read, args=(s,)) for s in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not errors, errors
    final = _file_conn(path)
    for query in QUERIES[::4]:
        _assert_same(index.search(final, 1, query, 10), _reference(docs, query, 10))
    final.close()
