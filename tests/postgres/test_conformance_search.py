"""Conformance, search: the same turns written into a SQLite store and a PostgreSQL store rank the same memories
with the same scores (up to ties) — plain questions, speakers, times, explain, cold and ``as_of`` — and every
filter (record filters and metadata filters) selects the same memories on both backends.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from memory_ext import MemoryEngine, Turn
from memory_ext.errors import InvalidQueryError
from tests.conftest import CONVERSATIONS, StoreTarget, make_turns
from tests.postgres.conformance_kit import assert_same_ranking, locomo_conversation, texts

pytestmark = pytest.mark.postgres

QUESTIONS: list[tuple[str, str]] = [
    ("ana", "What dog did Ana adopt?"),
    ("ana", "Where is Lena moving and why?"),
    ("ana", "Which instrument is Ana practising?"),
    ("ana", "西湖在哪里？"),
    ("ana", "When does the sister move to Porto?"),
    ("ben", "How far does Ben run each week?"),
    ("ben", "What happened to the laptop?"),
    ("ben", "Ben最喜欢吃什么？"),
    ("chen", "What is Chen allergic to?"),
    ("chen", "Where did they buy a flat?"),
    ("chen", "女儿什么时候上小学？"),
    ("ana", "marathon"),  # another user's topic: whatever ana's store ranks, the same on both
]


@pytest.fixture
def pair(both_targets: tuple[StoreTarget, StoreTarget]) -> Iterator[tuple[MemoryEngine, MemoryEngine]]:
    """A SQLite and a PostgreSQL engine holding the three conversations, fully indexed."""
    engines = [t.open() for t in both_targets]
    try:
        for engine in engines:
            for user in CONVERSATIONS:
                engine.add_turns(make_turns(user), user)
            engine.flush()
        yield engines[0], engines[1]
    finally:
        for engine in engines:
            engine.close()


@pytest.mark.parametrize(("user", "question"), QUESTIONS, ids=[q for _, q in QUESTIONS])
def test_the_same_question_ranks_the_same_memories_on_both_backends(pair: tuple[MemoryEngine, MemoryEngine],
                                                                     user: str, question: str) -> None:
    lite, pg = pair
    now = datetime(2026, 3, 2, tzinfo=UTC)
    a, b = lite.search(question, user, k=8, now=now), pg.search(question, user, k=8, now=now)
    assert a.items, "the question finds something"
    assert_same_ranking(a, b, what=question)
    assert a.context == b.context
    assert (a.plan.question_type if a.plan else None) == (b.plan.question_type if b.plan else None)


def test_explanations_and_channel_ranks_agree(pair: tuple[MemoryEngine, MemoryEngine]) -> None:
    lite, pg = pair
    a = lite.search("Ana's sister Lena and the bakery job", "ana", k=5, explain=True)
    b = pg.search("Ana's sister Lena and the bakery job", "ana", k=5, explain=True)
    assert_same_ranking(a, b)
    assert [i.channels for i in a.items] == [i.channels for i in b.items]
    assert "Porto" in a.items[0].text and b.items[0].explanation is not None


def test_the_top_hit_answers_the_question_on_both(pair: tuple[MemoryEngine, MemoryEngine]) -> None:
    for engine in pair:
        assert "beagle" in engine.search("What dog did Ana adopt?", "ana", k=3).items[0].text
        assert "peanuts" in engine.search("What is Chen allergic to?", "chen", k=3).items[0].text
        assert "60 kilometres" in " ".join(texts(engine.search("How far does Ben run each week?", "ben", k=3)))


def test_a_longer_conversation_ranks_the_same(both_targets: tuple[StoreTarget, StoreTarget]) -> None:
    """A real conversation (LoCoMo dev, its first 200 turns over several sessions) and 25 of its questions."""
    data = locomo_conversation(max_turns=200)
    if data is None:
        pytest.skip("the shared LoCoMo dev data are not here (MEMEXT_SHARED_DATA)")
    turns, questions = data
    results: list[list[Any]] = []
    for target in both_targets:
        with target.open() as engine:
            added = engine.add_turns(turns, "conv", wait=True)
            assert len(added.turn_ids) == len(turns)
            results.append([engine.search(q, "conv", k=10) for q in questions[:25]])
    for q, a, b in zip(questions, results[0], results[1], strict=False):
        assert_same_ranking(a, b, what=q)


# -- filters ---------------------------------------------------------------------------------------------------
START = datetime(2026, 4, 1, 9, 0, tzinfo=UTC)
MEMORIES: list[tuple[str, str, str, dict[str, Any]]] = [  # (role, speaker, text, metadata)
    ("user", "Maya", "I'm allergic to shellfish.", {"topic": "health", "priority": 5, "source": "onboarding"}),
    ("user", "Maya", "My sister Clara lives in Lyon.", {"topic": "family", "priority": 3, "place": {"city": "Lyon"}}),
    ("user", "Maya", "Book the direct TAP flight to Lisbon on April 24.",
     {"topic": "travel", "priority": 4, "place": {"city": "Lisbon", "zone": {"code": 1100}},
      "tags": ["flight", "tap"]}),
    ("assistant", "Guide", "Casa do Chiado, four nights from April 25.",
     {"topic": "travel", "priority": 2.5, "place": {"city": "Lisbon"}}),
    ("user", "Maya", "The morning train to Porto leaves at 8:39.",
     {"topic": "travel", "priority": 1, "tags": ["train"]}),
    ("assistant", "Guide", "Reserve Cantinho do Avillez for May 1 at 8 pm.",
     {"topic": "food", "priority": 2, "confirmed": True}),
    ("user", "Maya", "Bring a type F plug adapter.", {"topic": "packing", "priority": "1", "confirmed": False}),
    ("user", "Maya", "Keep some cash for the trams and small cafes.", {"topic": "money", "due": "2026-04-20"}),
    ("user", "Maya", "The dentist moved my check-up to May 12.",
     {"topic": "health", "priority": 3, "due": "2026-05-12", "note": None}),
    ("assistant", "Guide", "Clara's birthday is on June 3, bring the Lisbon tiles.",
     {"topic": "family", "priority": 4, "due": "2026-06-03", "place": "Lyon"}),
    ("user", "Maya", "Ich nehme den Zug nach Lyon am Freitag.", {"topic": "travel", "lang": "de", "priority": 0}),
    ("user", "Maya", "旅行保险要在出发前续保。", {"topic": "admin", "lang": "zh", "priority": -1}),
    ("user", "Maya", "The 100% refund policy applies? Ask O'Brien.",
     {"topic": "money", "a.b": "dotted", "o'brien": "quote", "城市": "里斯本", "with space": 1, "pct": "100%?",
      "big": 9007199254740993, "ratio": 0.30000000000000004, "name": "apple", "nested": {"list": [1, {"k": "v"}]}}),
    ("user", "Maya", "Zebra crossings near the hotel are busy.",
     {"topic": "safety", "name": "Zebra", "ratio": 0.3, "big": 9007199254740992, "empty": "", "zero": 0}),
    ("user", "Maya", "The Ábaco bar serves late dinners.",
     {"topic": "food", "name": "Ábaco", "empty": [], "zero": False}),
]

METADATA_FILTERS: list[dict[str, Any]] = [
    {"topic": "travel"},
    {"topic": {"$eq": "health"}},
    {"topic": {"$ne": "travel"}},
    {"priority": {"$gt": 3}},
    {"priority": {"$gte": 2.5}},
    {"priority": {"$lt": 1}},
    {"priority": {"$lte": 2}},
    {"priority": {"$gte": 2, "$lt": 4}},
    {"priority": 1},
    {"priority": "1"},  # a string never equals a number
    {"priority": 2.0},  # 2 == 2.0
    {"priority": {"$gt": "0"}},  # a string bound compares with strings only
    {"topic": "travel", "priority": {"$gte": 2}},
    {"place": {"city": "Lisbon"}},
    {"place": {"city": {"$ne": "Lisbon"}}},
    {"place": {"zone": {"code": 1100}}},
    {"place": {"zone": {"code": {"$gt": 1000}}}},
    {"place": "Lyon"},  # a string value where others hold an object
    {"tags": ["flight", "tap"]},
    {"tags": ["tap", "flight"]},  # list equality is ordered
    {"confirmed": True},
    {"confirmed": False},
    {"confirmed": {"$ne": True}},
    {"note": None},
    {"never_set": None},
    {"never_set": "x"},
    {"never_set": {"$ne": 1}},
    {"due": {"$gte": "2026-05-01"}},
    {"due": {"$lt": 5}},
    {"topic": {"$in": ["food", "money", "admin"]}},
    {"topic": {"$nin": ["travel", "health", "family"]}},
    {"priority": {"$in": [1, 4, "1"]}},
    {"priority": {"$nin": [1, 2, 3]}},
    {"confirmed": {"$in": [True, None]}},
    {"lang": {"$in": ["de", "zh"]}, "priority": {"$lte": 0}},
    {"$or": [{"topic": "health"}, {"priority": {"$gte": 5}}]},
    {"$and": [{"topic": "travel"}, {"$or": [{"priority": 1}, {"priority": 4}]}]},
    {"$or": [{"place": {"city": "Lyon"}}, {"place": "Lyon"}, {"lang": "de"}]},
    {"$and": [{"$or": [{"topic": "family"}, {"topic": "health"}]}, {"due": {"$lt": "2026-06-01"}}]},
    {"topic": "nothing-like-this"},
    {"a.b": "dotted"},  # a key with a dot is one key, not a path
    {"o'brien": "quote"},
    {"城市": "里斯本"},
    {"with space": {"$gte": 1}},
    {"pct": "100%?"},  # placeholder and format characters inside a value
    {"pct": {"$in": ["100%?", "?"]}},
    {"big": 9007199254740993},  # beyond double precision: the exact integer
    {"big": {"$gt": 9007199254740992}},
    {"ratio": 0.30000000000000004},
    {"ratio": {"$lt": 0.30000000000000004}},
    {"name": {"$gt": "Z"}},  # strings compare by code point: "apple" and "Ábaco" sort after "Z"
    {"name": {"$lt": "a"}},
    {"name": {"$gte": "Zebra", "$lte": "apple"}},
    {"empty": ""},
    {"empty": []},
    {"zero": 0},
    {"zero": False},  # False is not 0
    {"nested": {"list": [1, {"k": "v"}]}},
    {"topic": {"$in": []}},
    {"topic": {"$nin": []}},
]

RECORD_FILTERS: list[dict[str, Any]] = [
    {"speaker": "Guide"},
    {"speaker": ["Maya", "Nobody"]},
    {"role": "assistant"},
    {"role": ["user"], "session_id": "trip"},
    {"session_id": ["plans"]},
    {"since": START + timedelta(hours=5)},
    {"until": (START + timedelta(hours=3)).isoformat()},
    {"since": START + timedelta(hours=2), "until": START + timedelta(hours=8)},
    {"kinds": ["turn"]},
    {"kinds": "window"},
    {"speaker": "Guide", "metadata": {"topic": "family"}},
    {"role": "user", "metadata": {"priority": {"$gte": 3}}, "until": START + timedelta(hours=9)},
]


@pytest.fixture
def filter_pair(both_targets: tuple[StoreTarget, StoreTarget]) -> Iterator[tuple[MemoryEngine, MemoryEngine]]:
    engines = [t.open() for t in both_targets]
    try:
        for engine in engines:
            engine.add_turns([Turn(role=role, speaker=speaker, content=text, metadata=meta,
                                   timestamp=START + timedelta(hours=i), session_id="trip" if i % 3 else "plans")
                              for i, (role, speaker, text, meta) in enumerate(MEMORIES)], "maya", wait=True)
            engine.add_turns([Turn(role="user", content="Lisbon tiles for the travel topic",
                                   metadata={"topic": "travel"})], "other", wait=True)  # never selected
        yield engines[0], engines[1]
    finally:
        for engine in engines:
            engine.close()


def _expected(flt: dict[str, Any]) -> set[str]:
    """What a metadata filter selects, by the documented semantics (JSON types; missing keys; ISO strings)."""
    def get(meta: dict[str, Any], path: tuple[str, ...]) -> tuple[bool, Any]:
        for key in path:
            if not isinstance(meta, dict) or key not in meta:
                return False, None
            meta = meta[key]
        return True, meta

    def same(found: bool, value: Any, want: Any) -> bool:
        if want is None:
            return not found or value is None
        if not found or isinstance(value, bool) != isinstance(want, bool):
            return False
        if isinstance(want, (int, float)) and not isinstance(want, bool):
            return isinstance(value, (int, float)) and value == want
        return type(value) is type(want) and value == want if not isinstance(want, list) else value == want

    def holds(meta: dict[str, Any], spec: dict[str, Any], path: tuple[str, ...] = ()) -> bool:
        for key, sub in spec.items():
            if key == "$or":
                if not any(holds(meta, s, path) for s in sub):
                    return False
                continue
            if key == "$and":
                if not all(holds(meta, s, path) for s in sub):
                    return False
                continue
            p = (*path, key)
            found, value = get(meta, p)
            if isinstance(sub, dict) and any(k.startswith("$") for k in sub):
                for op, want in sub.items():
                    if op == "$eq" and not same(found, value, want):
                        return False
                    if op == "$ne" and same(found, value, want):
                        return False
                    if op == "$in" and not any(same(found, value, w) for w in want):
                        return False
                    if op == "$nin" and any(same(found, value, w) for w in want):
                        return False
                    if op in ("$gt", "$gte", "$lt", "$lte"):
                        num = isinstance(want, (int, float))
                        ok_type = (isinstance(value, (int, float)) and not isinstance(value, bool)) if num \
                            else isinstance(value, str)
                        if not found or not ok_type:
                            return False
                        cmp = {"$gt": value > want, "$gte": value >= want, "$lt": value < want,
                               "$lte": value <= want}[op]
                        if not cmp:
                            return False
            elif isinstance(sub, dict):
                if not found or not isinstance(value, dict) or not holds(meta, sub, p):
                    return False
            elif not same(found, value, sub):
                return False
        return True

    return {text for _, _, text, meta in MEMORIES if holds(meta, flt)}


def _selected(engine: MemoryEngine, filters: dict[str, Any]) -> tuple[set[str], Any]:
    result = engine.search("what do I need to remember for the Lisbon trip", "maya", k=50, filters=filters)
    return {i.text for i in result.items if i.kind == "turn"}, result


@pytest.mark.parametrize("metadata_filter", METADATA_FILTERS, ids=repr)
def test_metadata_filters_select_the_same_memories_on_both(filter_pair: tuple[MemoryEngine, MemoryEngine],
                                                           metadata_filter: dict[str, Any]) -> None:
    lite, pg = filter_pair
    (a, ra), (b, rb) = (_selected(e, {"metadata": metadata_filter}) for e in (lite, pg))
    assert a == _expected(metadata_filter), "SQLite against the documented semantics"
    assert b == a, "PostgreSQL against SQLite"
    assert_same_ranking(ra, rb, what=repr(metadata_filter))


@pytest.mark.parametrize("record_filter", RECORD_FILTERS, ids=repr)
def test_record_filters_select_the_same_memories_on_both(filter_pair: tuple[MemoryEngine, MemoryEngine],
                                                         record_filter: dict[str, Any]) -> None:
    lite, pg = filter_pair
    (a, ra), (b, rb) = (_selected(e, record_filter) for e in (lite, pg))
    assert b == a
    assert_same_ranking(ra, rb, what=repr(record_filter))
    if record_filter.get("speaker") == "Guide":
        assert a and all(i.speaker == "Guide" for i in ra.items)
    if "since" in record_filter and isinstance(record_filter["since"], datetime):
        assert all(i.timestamp is None or i.timestamp >= record_filter["since"] for i in ra.items)


def test_items_carry_their_turns_metadata_on_both(filter_pair: tuple[MemoryEngine, MemoryEngine]) -> None:
    meta = {text: m for _, _, text, m in MEMORIES}
    for engine in filter_pair:
        result = engine.search("Where does Clara live?", "maya", k=5)
        assert result.items[0].text == "My sister Clara lives in Lyon."
        assert all(item.metadata == meta[item.text] for item in result.items if item.kind == "turn")


def test_a_session_namespace_searches_only_its_session(filter_pair: tuple[MemoryEngine, MemoryEngine]) -> None:
    lite, pg = filter_pair
    ns = {"user_id": "maya", "session_id": "plans"}
    a = lite.search("Lisbon trip plans", ns, k=20)
    b = pg.search("Lisbon trip plans", ns, k=20)
    assert a.items and all(i.session_id == "plans" for i in a.items)
    assert_same_ranking(a, b)


@pytest.mark.parametrize("bad", [{"priority": {"$near": 2}}, {"topic": {"$in": "travel"}}, {"$or": []},
                                 {"$not": {"topic": "x"}}, {'a"b': 1}])
def test_bad_metadata_filters_are_the_same_typed_error(filter_pair: tuple[MemoryEngine, MemoryEngine],
                                                       bad: dict[str, Any]) -> None:
    fields = []
    for engine in filter_pair:
        with pytest.raises(InvalidQueryError) as info:
            engine.search("trip", "maya", filters={"metadata": bad})
        fields.append(info.value.field)
    assert fields[0] == fields[1]


def test_as_of_and_supersession_rank_the_same(both_targets: tuple[StoreTarget, StoreTarget]) -> None:
    t0 = datetime(2026, 1, 5, 9, tzinfo=UTC)
    results = []
    for target in both_targets:
        with target.open() as engine:
            engine.add_turns([Turn(role="user", speaker="Ana", content="I live in Paris.", timestamp=t0),
                              Turn(role="user", speaker="Ana", content="I work as a nurse at the city hospital.",
                                   timestamp=t0 + timedelta(days=1)),
                              Turn(role="user", speaker="Ana", content="I moved to Berlin last week.",
                                   timestamp=t0 + timedelta(days=40))], "ana", wait=True)
            now = engine.search("Where does Ana live?", "ana", k=5)
            then = engine.search("Where does Ana live?", "ana", k=5, as_of=t0 + timedelta(days=2))
            assert "Berlin" in now.items[0].text
            assert not any("Berlin" in i.text for i in then.items)
            results.append((now, then))
    assert_same_ranking(results[0][0], results[1][0], what="now")
    assert_same_ranking(results[0][1], results[1][1], what="as_of")


# -- every channel, another fusion, the HNSW path --------------------------------------------------------------------
ALL_ON: dict[str, Any] = {"globals": {"graph_enabled": True, "evidence_enabled": True, "turns_channel_enabled": True,
                                      "layers_index_enabled": True}, "ingest": {"layer_min_chars": 50}}
CONFIGS: dict[str, dict[str, Any]] = {
    "every-channel": ALL_ON,
    "rrf": {"recall": {"fusion": "rrf"}, "globals": {"graph_enabled": True}},
    "hnsw": {"storage": {"pgvector_exact_max": 0}},  # PostgreSQL searches its HNSW index instead of every vector
}


@pytest.mark.parametrize("name", list(CONFIGS))
def test_every_channel_and_fusion_rank_the_same(both_targets: tuple[StoreTarget, StoreTarget], name: str) -> None:
    config = CONFIGS[name]
    results = []
    for target in both_targets:
        cfg = {k: v for k, v in config.items() if k != "storage" or target.backend == "postgres"}
        with target.open(config=cfg) as engine:
            for user in CONVERSATIONS:
                engine.add_turns(make_turns(user), user)
            engine.flush()
            now = datetime(2026, 3, 2, tzinfo=UTC)
            results.append([engine.search(q, u, k=8, now=now) for u, q in QUESTIONS] +
                           [engine.search("What did Ana say about Lena last weekend?", "ana", k=8, now=now,
                                          filters={"since": "2026-03-01", "speaker": "Ana"}),
                            engine.search("beagle", "ana", k=3, now=now, filters={"kinds": ["turn"]})])
            if name == "every-channel":
                channels = {c for r in results[-1] for i in r.items for c in i.channels}
                assert {"keyword", "vector"} < channels and len(channels) >= 4, channels
    for a, b in zip(results[0], results[1], strict=True):
        assert_same_ranking(a, b, what=f"{name}: {a.query}")
