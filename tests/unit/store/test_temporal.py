"""The time index (store) and the temporal recall channel, on a real SQLite truth store."""

from __future__ import annotations

import doctest
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest

from memory_ext.models import EvidenceRoute
from memory_ext.plan.heuristic import plan_search
from memory_ext.recall import temporal as temporal_module
from memory_ext.recall.base import Hits, RecallContext, RecallRequest
from memory_ext.recall.temporal import TemporalRecaller
from memory_ext.registry import recallers
from memory_ext.store import timeindex as timeindex_module
from memory_ext.store.sqlite import TruthStore
from memory_ext.store.timeindex import TimeIndex, TimeSnapshot, record_spans

DAY = 86_400.0


def ts(*args: int) -> float:
    return datetime(*args, tzinfo=UTC).timestamp()  # type: ignore[misc]


def day(y: int, m: int, d: int) -> tuple[float, float]:
    start = datetime(y, m, d, tzinfo=UTC)
    return start.timestamp(), (start + timedelta(days=1)).timestamp()


#: Wednesday 2023-05-10 15:00 UTC: "last Saturday" is 2023-05-06.
NOW = datetime(2023, 5, 10, 15, 0, tzinfo=UTC)
SATURDAY = day(2023, 5, 6)


@dataclass(frozen=True)
class TimeContext(RecallContext):
    """RecallContext plus the field the engine will add."""

    time_index: TimeIndex | None = None


@pytest.fixture()
def store(tmp_path: Path) -> Iterator[TruthStore]:
    s = TruthStore(tmp_path / "store")
    s.add_schema(TimeIndex.create_schema)
    yield s
    s.close()


@pytest.fixture()
def index() -> TimeIndex:
    return TimeIndex()


def namespace(store: TruthStore, user: str) -> int:
    with store.transaction("ns") as conn:
        return store.ensure_namespace(conn, (user, ""))


_counter = iter(range(10**9))


def add(store: TruthStore, index: TimeIndex, ns_id: int, rows: Sequence[tuple[str, float | None]]) -> list[int]:
    """Insert ``(text, ref_ts)`` turn records and index their time spans; returns their rids."""
    records = [{"id": f"rec_{next(_counter)}", "kind": "turn", "text": text, "index_text": text, "ref_ts": ref,
                "turn_ids": [], "speaker": "Ana"} for text, ref in rows]
    with store.transaction("add") as conn:
        rids = store.insert_records(conn, ns_id, records)
        index.add(conn, ns_id, [(rid, index.spans_of(r["text"], r["ref_ts"]))
                                for rid, r in zip(rids, records, strict=True)])
    return rids


def route(window: tuple[float, float] | None) -> EvidenceRoute:
    tf = None if window is None else (datetime.fromtimestamp(window[0], UTC), datetime.fromtimestamp(window[1], UTC))
    return EvidenceRoute(goal="query", queries=("q",), time_filter=tf)


def recall(store: TruthStore, index: TimeIndex, ns_id: int, rt: EvidenceRoute | None,
           allowed: Sequence[int] | None = None, query: str = "q") -> list[tuple[int, float]]:
    ctx = TimeContext(store=store, keyword_index=None, vector_index=None, embedder=None,  # type: ignore[arg-type]
                      time_index=index)
    hits = TemporalRecaller(ctx).recall(RecallRequest(query=query, ns_id=ns_id, limit=10, allowed=allowed, route=rt))
    assert isinstance(hits, Hits) and hits.fill == 0.0
    assert hits.rids.dtype == np.int64 and hits.scores.dtype == np.float64
    return hits.ranked()


def dates(spans: Sequence[tuple[float, float, str, float, str | None]]) -> list[tuple[str, str, str, str | None]]:
    """(source, first day, last day inclusive, expr) of stored spans."""
    out = []
    for s, e, source, _, expr in spans:
        last = e - DAY if e > s else e
        out.append((source, datetime.fromtimestamp(s, UTC).date().isoformat(),
                    datetime.fromtimestamp(last, UTC).date().isoformat(), expr))
    return out


# ------------------------------------------------------------------------------------------------ store


def test_docstring_examples() -> None:
    for module in (timeindex_module, temporal_module):
        assert doctest.testmod(module, optionflags=doctest.ELLIPSIS).failed == 0


def test_spans_of_english_and_chinese_turns(store: TruthStore, index: TimeIndex) -> None:
    ns = namespace(store, "u1")
    monday = ts(2023, 5, 8, 13, 56)
    en, zh, low, none = add(store, index, ns, [
        ("I went to the museum yesterday, and I'm flying to Lisbon next month!", monday),
        ("去年夏天我们去了海边，上周六又去了一次。", monday),
        ("I ran into Tom the other day. Last summer we sailed to Crete.", monday),
        ("I went to the museum yesterday.", None),
    ])
    conn = store.reader()
    assert dates(index.spans(conn, ns, en)) == [
        ("mentioned", "2023-05-07", "2023-05-07", "yesterday"),
        ("said", "2023-05-08", "2023-05-08", None),
        ("mentioned", "2023-06-01", "2023-06-30", "next month"),
    ]
    assert dates(index.spans(conn, ns, zh)) == [
        ("mentioned", "2022-06-01", "2022-08-31", "去年夏天"),
        ("mentioned", "2023-05-06", "2023-05-06", "上周六"),
        ("said", "2023-05-08", "2023-05-08", None),
    ]
    # "the other day" (confidence 0.4) is below the 0.5 threshold; "last summer" (0.5) is kept
    assert [(src, expr) for src, *_, expr in dates(index.spans(conn, ns, low))] == [
        ("mentioned", "Last summer"), ("said", None)]
    said = next(s for s in index.spans(conn, ns, en) if s[2] == "said")
    assert said[0] == said[1] == monday and said[3] == 1.0
    assert index.spans(conn, ns, none) == []  # no ref_ts: nothing to resolve against, not indexed
    assert index.record_count(conn, ns) == 3
    # a stricter index keeps only the confident mentions
    assert [s.expr for s in record_spans("Last summer, yesterday", monday, min_confidence=0.8)] == ["yesterday", None]
    # the same span named twice is stored once
    assert len(record_spans("yesterday... yes, yesterday", monday)) == 2


def test_re_adding_a_record_replaces_its_spans(store: TruthStore, index: TimeIndex) -> None:
    ns = namespace(store, "u1")
    monday = ts(2023, 5, 8, 12)
    (rid,) = add(store, index, ns, [("I went hiking yesterday.", monday)])
    with store.transaction("re-add") as conn:
        index.add(conn, ns, [(rid, index.spans_of("We met last Saturday.", monday))])
    assert [x[-1] for x in dates(index.spans(store.reader(), ns, rid))] == ["last Saturday", None]
    assert index.record_count(store.reader(), ns) == 1
    with store.transaction("re-add") as conn:
        index.add(conn, ns, [(rid, index.spans_of("no time", None))])
    assert index.spans(store.reader(), ns, rid) == [] and index.record_count(store.reader(), ns) == 0


# ------------------------------------------------------------------------------------------------ recall


def conversation(store: TruthStore, index: TimeIndex, ns: int) -> dict[str, int]:
    rows = {
        "other": ("I went hiking yesterday, my legs hurt.", ts(2023, 5, 3, 20)),
        "said_1": ("Just got home, so tired. Making tea now.", ts(2023, 5, 6, 18)),
        "zh_about": ("我昨天去了陶艺工作坊，做了一个杯子。", ts(2023, 5, 7, 9)),
        "about": ("I went to the pottery workshop last Saturday, it was so relaxing!", ts(2023, 5, 8, 10)),
        "week": ("Last week was hectic at work.", ts(2023, 5, 8, 11)),
        "said_2": ("What should I cook for dinner?", ts(2023, 5, 6, 19)),
        "month": ("This month has been busy.", ts(2023, 5, 9, 8)),
        "untimed": ("Last Saturday I baked bread.", None),
    }
    rids = add(store, index, ns, list(rows.values()))
    return dict(zip(rows, rids, strict=True))


def test_last_saturday_finds_the_turns_about_it_first_then_turns_written_that_day(
        store: TruthStore, index: TimeIndex) -> None:
    ns = namespace(store, "u1")
    r = conversation(store, index, ns)
    for question in ("What did Ana do last Saturday?", "安娜上周六做了什么？"):
        plan = plan_search(question, now=NOW, speakers=("Ana",), action_state=None)
        assert plan.routes[0].time_filter == tuple(datetime.fromtimestamp(x, UTC) for x in SATURDAY)
        ranked = recall(store, index, ns, plan.routes[0], query=question)
        names = {v: k for k, v in r.items()}
        assert [names[rid] for rid, _ in ranked] == ["zh_about", "about", "said_1", "said_2", "week", "month"]
        scores = dict(ranked)
        assert scores[r["about"]] == pytest.approx(0.9) == scores[r["zh_about"]]  # a day mention, full confidence
        assert scores[r["said_1"]] == pytest.approx(0.4) == scores[r["said_2"]]
        assert scores[r["week"]] == pytest.approx(0.8 * (1 / 7) ** 0.5)
        assert scores[r["month"]] == pytest.approx(0.8 * (1 / 31) ** 0.5)
        assert r["other"] not in scores and r["untimed"] not in scores


def test_window_shapes_and_naive_bounds(store: TruthStore, index: TimeIndex) -> None:
    ns = namespace(store, "u1")
    r = conversation(store, index, ns)
    # a week-long window: every day mention inside it scores its confidence; "last week" fits exactly
    week = (ts(2023, 5, 1), ts(2023, 5, 8))
    scores = dict(recall(store, index, ns, route(week)))
    assert scores[r["about"]] == pytest.approx(0.9) and scores[r["week"]] == pytest.approx(0.8)
    assert scores[r["other"]] == pytest.approx(0.9)  # about 2023-05-02
    # the window is half-open: a turn written exactly at its end is outside, one at its start inside
    edge = dict(recall(store, index, ns, route((ts(2023, 5, 6, 18), ts(2023, 5, 6, 19)))))
    assert r["said_1"] in edge and r["said_2"] not in edge
    assert recall(store, index, ns, route((ts(2023, 5, 6, 19), ts(2023, 5, 6, 18)))) == []  # reversed: nothing
    # naive datetimes in the filter are UTC
    naive = EvidenceRoute(goal="query", queries=("q",), time_filter=(datetime(2023, 5, 6), datetime(2023, 5, 7)))
    assert recall(store, index, ns, naive) == recall(store, index, ns, route(SATURDAY))


def test_no_time_filter_gives_no_hits(store: TruthStore, index: TimeIndex) -> None:
    ns = namespace(store, "u1")
    conversation(store, index, ns)
    assert recall(store, index, ns, None) == []
    assert recall(store, index, ns, route(None)) == []
    empty_ns = namespace(store, "nobody")
    assert recall(store, index, empty_ns, route(SATURDAY)) == []


def test_recaller_is_registered_and_needs_a_time_index(store: TruthStore) -> None:
    assert recallers.resolve("recall.temporal_recaller", "temporal") is TemporalRecaller
    assert TemporalRecaller.channel == "temporal"
    with pytest.raises(ValueError, match="time_index"):
        TemporalRecaller(RecallContext(store=store, keyword_index=None, vector_index=None,  # type: ignore[arg-type]
                                       embedder=None))


def test_namespaces_are_isolated(store: TruthStore, index: TimeIndex) -> None:
    a, b = namespace(store, "a"), namespace(store, "b")
    ra = conversation(store, index, a)
    rb = conversation(store, index, b)
    hits_a = {rid for rid, _ in recall(store, index, a, route(SATURDAY))}
    hits_b = {rid for rid, _ in recall(store, index, b, route(SATURDAY))}
    assert hits_a and hits_b and hits_a.isdisjoint(hits_b)
    assert hits_a <= set(ra.values()) and hits_b <= set(rb.values())
    with store.transaction("forget") as conn:
        index.remove(conn, b, [ra["about"]])  # a's rid, through b: nothing happens
        index.drop_namespace(conn, b)
    assert {rid for rid, _ in recall(store, index, a, route(SATURDAY))} == hits_a
    assert recall(store, index, b, route(SATURDAY)) == []


def test_remove_and_drop(store: TruthStore, index: TimeIndex) -> None:
    ns = namespace(store, "u1")
    r = conversation(store, index, ns)
    before = dict(recall(store, index, ns, route(SATURDAY)))
    with store.transaction("forget") as conn:
        index.remove(conn, ns, [r["about"], r["said_1"], 10**9])
    after = dict(recall(store, index, ns, route(SATURDAY)))
    assert set(after) == set(before) - {r["about"], r["said_1"]}
    assert index.spans(store.reader(), ns, r["about"]) == []
    assert index.record_count(store.reader(), ns) == 5
    with store.transaction("forget") as conn:
        index.drop_namespace(conn, ns)
    assert recall(store, index, ns, route(SATURDAY)) == []
    assert index.record_count(store.reader(), ns) == 0
    assert store.reader().execute("SELECT count(*) FROM time_spans").fetchone()[0] == 0
    # the namespace is usable again after a drop
    (rid,) = add(store, index, ns, [("I went to the pottery workshop last Saturday.", ts(2023, 5, 8, 10))])
    assert recall(store, index, ns, route(SATURDAY)) == [(rid, pytest.approx(0.9))]


def test_allowed_filter(store: TruthStore, index: TimeIndex) -> None:
    ns = namespace(store, "u1")
    r = conversation(store, index, ns)
    allowed = [r["said_2"], r["month"], r["other"]]
    assert [rid for rid, _ in recall(store, index, ns, route(SATURDAY), allowed=allowed)] == [r["said_2"], r["month"]]
    assert [rid for rid, _ in recall(store, index, ns, route(SATURDAY), allowed=np.array(allowed))] == [
        r["said_2"], r["month"]]
    assert recall(store, index, ns, route(SATURDAY), allowed=[]) == []


def test_snapshot_is_synced_incrementally(store: TruthStore, index: TimeIndex, monkeypatch: pytest.MonkeyPatch) -> None:
    ns = namespace(store, "u1")
    loads = []
    real_load = TimeSnapshot.load.__func__  # type: ignore[attr-defined]

    def counting_load(cls: type[TimeSnapshot], *args: object) -> TimeSnapshot:
        loads.append(args[1])
        return real_load(cls, *args)

    monkeypatch.setattr(TimeSnapshot, "load", classmethod(counting_load))
    r = conversation(store, index, ns)
    conn = store.reader()
    first = index.snapshot(conn, ns)
    assert first is not None and len(loads) == 1 and first.n_records == 7
    assert index.snapshot(conn, ns) is first  # unchanged: the same object, no reload
    (new,) = add(store, index, ns, [("Last Saturday was my birthday!", ts(2023, 5, 9, 12))])
    second = index.snapshot(conn, ns)
    assert second is not first and len(loads) == 1  # appended, not reloaded
    assert second.n_records == 8 and len(second.rid) == len(first.rid) + 2 and second.max_rid == new
    assert len(first.rid) == first.n_spans  # the published snapshot was not changed
    assert dict(recall(store, index, ns, route(SATURDAY)))[new] == pytest.approx(0.9)
    # a delete bumps the version: the next read reloads
    with store.transaction("forget") as wconn:
        index.remove(wconn, ns, [r["about"]])
    third = index.snapshot(conn, ns)
    assert len(loads) == 2 and third is not None and third.version == second.version + 1
    assert r["about"] not in set(third.rid.tolist())
    # a record indexed out of order (rid below max_rid) is noticed: reloaded, not missed
    with store.transaction("late") as wconn:
        spans = index.spans_of("I went to the pottery workshop last Saturday.", ts(2023, 5, 8, 10))
        index.add(wconn, ns, [(r["about"], spans)])
    fourth = index.snapshot(conn, ns)
    assert len(loads) == 3 and r["about"] in set(fourth.rid.tolist())
    # a second index (another process) sees the same data
    other = TimeIndex()
    assert recall(store, other, ns, route(SATURDAY)) == recall(store, index, ns, route(SATURDAY))
    # invalidate forgets the cache
    index.invalidate()
    index.snapshot(conn, ns)
    assert len(loads) == 5  # one for `other`, one after invalidate


def test_snapshot_is_reused_at_10k_records(store: TruthStore, index: TimeIndex) -> None:
    """What keeps recall fast at scale: one snapshot serves every recall until a write (timing: memext bench)."""
    ns = namespace(store, "u1")
    texts = ["I went to the museum yesterday.", "How are you today?", "我们上周六去爬山了。", "Nothing special.",
             "Last week was busy.", "We are moving next month.", "Good morning!", "Let's talk about books."]
    base = ts(2023, 1, 1, 9)
    items = [(rid, index.spans_of(texts[rid % len(texts)], base + rid * 3600.0)) for rid in range(1, 10_001)]
    with store.transaction("bulk") as conn:
        index.add(conn, ns, items)
    rt_day, rt_month = route(day(2023, 6, 10)), route((ts(2023, 6, 1), ts(2023, 7, 1)))
    ctx = TimeContext(store=store, keyword_index=None, vector_index=None, embedder=None,  # type: ignore[arg-type]
                      time_index=index)
    channel = TemporalRecaller(ctx)
    allowed = list(range(1, 10_001, 2))
    requests = [RecallRequest(query="q", ns_id=ns, limit=50, route=rt) for rt in (rt_day, rt_month)]
    requests.append(RecallRequest(query="q", ns_id=ns, limit=50, route=rt_month, allowed=allowed))
    snap = None
    for req in requests:
        first = channel.recall(req)
        assert len(first.rids) > 0
        snap = snap or index.snapshot(store.reader(), ns)  # loaded by the first recall
        for _ in range(20):
            assert channel.recall(req).ranked() == first.ranked()
    assert snap is not None and index.snapshot(store.reader(), ns) is snap  # 63 recalls, no reload
    assert set(channel.recall(requests[2]).rids) <= set(allowed)
