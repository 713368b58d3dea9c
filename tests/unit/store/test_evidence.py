"""Evidence nodes (store) and the evidence recall channel, on a real SQLite truth store."""

from __future__ import annotations

import doctest
import sqlite3
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import memory_ext.ingest.evidence_keys as evidence_keys
import memory_ext.recall.evidence as recall_evidence
import memory_ext.store.evidence as store_evidence
from memory_ext.ingest.evidence_keys import node_keys, window_keys
from memory_ext.models import EvidenceRoute
from memory_ext.recall.base import Hits, RecallContext, RecallRequest
from memory_ext.recall.evidence import EvidenceRecaller, query_keys, query_tags
from memory_ext.registry import recallers
from memory_ext.store.evidence import EvidenceIndex, EvidenceSnapshot
from memory_ext.store.sqlite import TruthStore

DAY = 86_400.0
T0 = datetime(2023, 5, 8, 13, 56, tzinfo=UTC).timestamp()  # a Monday


@dataclass(frozen=True)
class EvidenceContext(RecallContext):
    """RecallContext plus the field the engine will add."""

    evidence_index: EvidenceIndex | None = None


@pytest.fixture()
def store(tmp_path: Path) -> Iterator[TruthStore]:
    s = TruthStore(tmp_path / "store")
    s.add_schema(EvidenceIndex.create_schema)
    yield s
    s.close()


@pytest.fixture()
def index() -> EvidenceIndex:
    return EvidenceIndex()


def namespace(store: TruthStore, user: str) -> int:
    with store.transaction("ns") as conn:
        return store.ensure_namespace(conn, (user, ""))


_counter = iter(range(10**9))


def add(store: TruthStore, index: EvidenceIndex, ns_id: int,
        rows: Sequence[tuple[str | None, str, float | None]], *, session: str = "s1",
        neighbours: Sequence[Sequence[str]] | None = None) -> list[int]:
    """Insert ``(speaker, text, ts)`` turn records and index their evidence nodes; returns their rids."""
    records = [{"id": f"rec_{next(_counter)}", "kind": "turn", "text": text,
                "index_text": f"{speaker}: {text}" if speaker else text, "ref_ts": ts, "turn_ids": [],
                "speaker": speaker, "session_id": session} for speaker, text, ts in rows]
    with store.transaction("add") as conn:
        rids = store.insert_records(conn, ns_id, records)
        items: list[dict[str, Any]] = [{"rid": rid, "text": text, "speaker": speaker, "ref_ts": ts,
                                        "session_id": session}
                                       for rid, (speaker, text, ts) in zip(rids, rows, strict=True)]
        if neighbours is not None:
            for item, nb in zip(items, neighbours, strict=True):
                item["neighbours"] = list(nb)
        index.add(conn, ns_id, keyed(conn, index, ns_id, items))
    return rids


def keyed(conn: sqlite3.Connection, index: EvidenceIndex, ns_id: int,
          items: Sequence[dict[str, Any]]) -> list[tuple[int, list[str]]]:
    """``(rid, node keys)`` of items, as the write pipeline derives them (known entities from the index)."""
    return list(zip((it["rid"] for it in items), window_keys(items, index.known_entities(conn, ns_id)), strict=True))


def context(store: TruthStore, index: EvidenceIndex) -> EvidenceContext:
    return EvidenceContext(store=store, keyword_index=None, vector_index=None, embedder=None,  # type: ignore[arg-type]
                           evidence_index=index)


def recall(store: TruthStore, index: EvidenceIndex, ns_id: int, query: str, *, limit: int = 10,
           allowed: Sequence[int] | None = None, route: EvidenceRoute | None = None) -> dict[int, float]:
    hits = EvidenceRecaller(context(store, index)).recall(
        RecallRequest(query=query, ns_id=ns_id, limit=limit, allowed=allowed, route=route))
    assert isinstance(hits, Hits) and hits.fill == 0.0
    return dict(hits.ranked())


def day_route(*days: tuple[int, int, int]) -> EvidenceRoute:
    start = datetime(*days[0], tzinfo=UTC)
    end = datetime(*days[-1], tzinfo=UTC).timestamp() + DAY
    return EvidenceRoute(goal="other", name="when", queries=("q",),
                         time_filter=(start, datetime.fromtimestamp(end, UTC)))


def rows_of(store: TruthStore) -> list[tuple[object, ...]]:
    conn = store.reader()
    out: list[tuple[object, ...]] = []
    for table in ("evidence_nodes", "evidence_postings"):
        out += conn.execute(f"SELECT * FROM {table}").fetchall()
    return out


# ---------------------------------------------------------------------------------------------- nodes


def test_doctests() -> None:
    for module in (store_evidence, evidence_keys, recall_evidence):
        assert doctest.testmod(module, optionflags=doctest.ELLIPSIS).failed == 0


def test_nodes_of_english_turns() -> None:
    keys = node_keys("Wow! I ran a charity race for mental health last Saturday.", speaker="Melanie", ref_ts=T0)
    assert {"e:melanie", "t:event", "et:melanie|event", "m:2023-05"} <= set(keys)
    assert {"d:2023-05-08", "d:2023-05-06"} <= set(keys)  # own day and the resolved "last Saturday"
    assert {"ev:melanie|2023-05-08", "ev:melanie|2023-05-06"} <= set(keys)
    assert not any(k.startswith("t:question") for k in node_keys("Did you go?", speaker="Ana", ref_ts=T0))

    keys = node_keys("Tennis is my favourite sport, I love the Berlin Open.", speaker="Ana", ref_ts=T0)
    assert {"e:ana", "e:berlin open", "t:preference", "et:ana|preference", "et:berlin open|preference"} <= set(keys)
    # a role label is not an entity; no timestamp -> no day, month or event frame
    keys = node_keys("You will love Lisbon in spring.", speaker="assistant")
    assert "e:assistant" not in keys and "e:lisbon" in keys
    assert not any(k[:2] in ("d:", "m:") or k.startswith("ev:") for k in keys)
    # a month-level expression gives months, not days; a year gives nothing
    keys = node_keys("We moved to Porto last month, and next year we go to Rome.", speaker="Ana", ref_ts=T0)
    assert "m:2023-04" in keys and not any(k.startswith("d:2023-04") for k in keys)
    assert not any(k.startswith(("m:2024", "d:2024")) for k in keys)
    # confidence below 0.5 ("the other day") gives no node
    assert [k for k in node_keys("I saw Marco the other day.", speaker="Ana", ref_ts=T0) if k.startswith("d:")] \
        == ["d:2023-05-08"]


def test_nodes_of_chinese_turns() -> None:
    keys = node_keys("上周六我和李明去了西湖，玩得很开心。", speaker="小红", ref_ts=T0)
    assert {"e:小红", "e:西湖", "t:event", "t:emotion", "et:小红|event", "d:2023-05-06", "d:2023-05-08",
            "m:2023-05", "ev:小红|2023-05-06", "ev:西湖|2023-05-06"} <= set(keys)
    keys = node_keys("我最喜欢吃火锅，去年夏天在成都吃过。", speaker="小红", ref_ts=T0)
    assert {"e:小红", "t:preference", "et:小红|preference", "m:2022-06", "m:2022-07", "m:2022-08"} <= set(keys)


def test_event_frames_span_the_neighbours() -> None:
    keys = node_keys("That sounds like so much fun!", speaker="Ana", ref_ts=T0,
                     neighbours=["Yesterday Marco and I hiked in Sintra.", ("Lisbon was great.", "Ben")])
    # entities of the neighbours join the record's frames, on its day and the days they name
    assert {"ev:marco|2023-05-07", "ev:sintra|2023-05-08", "ev:ben|2023-05-08", "ev:ana|2023-05-07"} <= set(keys)
    assert "e:marco" not in keys  # ... but the record itself does not name them
    # within a batch, adjacent items of the same session are the neighbours
    items = [{"rid": 1, "text": "I visited Sintra yesterday.", "speaker": "Ana", "ref_ts": T0, "session_id": "a"},
             {"rid": 2, "text": "How was it?", "speaker": "Ben", "ref_ts": T0 + 60, "session_id": "a"},
             {"rid": 3, "text": "Rome is nice.", "speaker": "Cleo", "ref_ts": T0 + 90, "session_id": "b"}]
    k1, k2, k3 = evidence_keys.window_keys(items)
    assert "ev:sintra|2023-05-07" in k2 and "ev:ana|2023-05-08" in k2 and "ev:ben|2023-05-07" in k2
    assert not any("rome" in k or "cleo" in k for k in k1 + k2)
    assert not any("sintra" in k for k in k3)


def test_query_tags() -> None:
    assert query_tags("What sport does Ana enjoy?") == ["preference"]
    assert query_tags("Where did Ana go last week?") == ["event"]
    assert query_tags("小红喜欢吃什么？") == ["preference"]
    assert query_tags("Is it raining?") == []


# --------------------------------------------------------------------------------------------- recall


def test_registered() -> None:
    assert recallers.resolve("recall", "evidence") is EvidenceRecaller
    assert EvidenceRecaller.channel == "evidence"
    with pytest.raises(ValueError, match="evidence index"):
        EvidenceRecaller(object())


def test_entity_and_tag_rank_above_either_alone(store: TruthStore, index: EvidenceIndex) -> None:
    ns = namespace(store, "u1")
    both, entity_only, tag_only, neither, other = add(store, index, ns, [
        ("Ana", "Tennis is my favourite sport, I play it every weekend.", T0),
        ("Ana", "I went to the dentist this morning.", T0 + 60),
        ("Ben", "I really enjoy jazz concerts.", T0 + 120),
        ("Ben", "The weather is awful today.", T0 + 180),
        ("Cleo", "I love baking bread.", T0 + 240),
    ])
    got = recall(store, index, ns, "What sport does Ana enjoy?")
    assert neither not in got
    assert got[both] > got[entity_only] and got[both] > got[tag_only] and got[both] > got[other]
    assert next(iter(got)) == both
    keys = EvidenceRecaller(context(store, index)).keys(
        RecallRequest(query="What sport does Ana enjoy?", ns_id=ns, limit=5))
    assert keys == ["e:ana", "t:preference", "et:ana|preference"]
    # rarer nodes count more: Ben is named twice, Cleo once
    got = recall(store, index, ns, "Cleo or Ben?")
    assert got[other] > got[tag_only]
    # nothing of the query is known -> no hit
    assert recall(store, index, ns, "Is Zoe around?") == {}
    assert recall(store, index, ns, "") == {}


def test_chinese_query(store: TruthStore, index: EvidenceIndex) -> None:
    ns = namespace(store, "zh")
    hotpot, trip, other = add(store, index, ns, [
        ("小红", "我最喜欢吃火锅。", T0),
        ("小红", "上周六我去了西湖。", T0 + 60),
        ("李明", "我也喜欢看电影。", T0 + 120),
    ])
    got = recall(store, index, ns, "小红喜欢吃什么？")
    assert next(iter(got)) == hotpot and got[hotpot] > got[trip] and got[hotpot] > got[other]


def test_day_and_month_nodes_with_a_time_filter(store: TruthStore, index: EvidenceIndex) -> None:
    ns = namespace(store, "u1")
    same_day, resolved, same_month, other_month = add(store, index, ns, [
        ("Ana", "Lunch with the team was fun.", T0 - DAY),  # written on 7 May
        ("Ana", "Yesterday I painted the fence.", T0),  # 8 May, about 7 May
        ("Ana", "The garden is blooming.", T0 + 10 * DAY),
        ("Ana", "I started a new job.", T0 + 40 * DAY),
    ])
    route = day_route((2023, 5, 7))
    got = recall(store, index, ns, "What happened?", route=route)
    assert set(got) == {same_day, resolved, same_month}
    assert got[same_day] > got[same_month] and got[resolved] > got[same_month]
    # the route's filter plus an entity: the event frame adds to the entity
    got = recall(store, index, ns, "What did Ana do?", route=route)
    assert set(got) == {same_day, resolved, same_month, other_month}
    assert min(got[same_day], got[resolved]) > got[same_month] > got[other_month]
    # a month-long filter reaches every day of the month; a year-long one only months
    june = EvidenceRoute(goal="other", name="when", queries=("q",),
                         time_filter=(datetime(2023, 6, 1, tzinfo=UTC), datetime(2023, 7, 1, tzinfo=UTC)))
    assert list(recall(store, index, ns, "anything?", route=june)) == [other_month]
    year = EvidenceRoute(goal="other", name="when", queries=("q",),
                         time_filter=(datetime(2023, 1, 1, tzinfo=UTC), datetime(2024, 1, 1, tzinfo=UTC)))
    assert set(recall(store, index, ns, "anything?", route=year)) == {same_day, resolved, same_month, other_month}
    # the route's speakers are entities
    spoken = EvidenceRoute(goal="speaker", name="speaker:Ana", queries=("q",), speakers=("Ana",))
    assert set(recall(store, index, ns, "anything?", route=spoken)) == {same_day, resolved, same_month, other_month}


def test_event_frames_rank_the_right_day(store: TruthStore, index: EvidenceIndex) -> None:
    ns = namespace(store, "u1")
    hiked, later, reply = add(store, index, ns, [
        ("Ana", "Yesterday Marco and I hiked in Sintra.", T0),
        ("Ana", "Marco is cooking tonight.", T0 + 20 * DAY),
        ("Ben", "That sounds amazing!", T0 + 60),
    ], neighbours=[[], [], ["Yesterday Marco and I hiked in Sintra."]])
    conn = store.reader()
    assert "ev:marco|2023-05-07" in index.nodes_of(conn, ns, hiked)
    assert "ev:marco|2023-05-07" in index.nodes_of(conn, ns, reply)
    assert "e:marco" not in index.nodes_of(conn, ns, reply)
    got = recall(store, index, ns, "What did Marco do?", route=day_route((2023, 5, 7)))
    assert next(iter(got)) == hiked
    assert got[hiked] > got[reply] > 0 and got[hiked] > got[later]


def test_namespace_isolation(store: TruthStore, index: EvidenceIndex) -> None:
    a, b = namespace(store, "alice"), namespace(store, "bob")
    (ra,) = add(store, index, a, [("Ana", "I love tennis.", T0)])
    (rb,) = add(store, index, b, [("Ana", "I love tennis.", T0)])
    assert set(recall(store, index, a, "Does Ana love tennis?")) == {ra}
    assert set(recall(store, index, b, "Does Ana love tennis?")) == {rb}
    with store.transaction("forget") as conn:
        index.drop_namespace(conn, b)
    assert recall(store, index, b, "Does Ana love tennis?") == {}
    assert set(recall(store, index, a, "Does Ana love tennis?")) == {ra}
    assert index.record_count(store.reader(), a) == 1 and index.record_count(store.reader(), b) == 0


def test_remove_deletes_node_names(store: TruthStore, index: EvidenceIndex) -> None:
    ns = namespace(store, "u1")
    (secret,) = add(store, index, ns, [("Ana", "My password hint is Zanzibar.", T0)])
    (kept,) = add(store, index, ns, [("Ana", "I love tennis.", T0 + 40 * DAY)])
    assert any("zanzibar" in str(r) for r in rows_of(store))
    with store.transaction("forget") as conn:
        index.remove(conn, ns, [secret, 12345])
    assert not any("zanzibar" in str(r).lower() for r in rows_of(store))
    assert not any("2023-05-08" in str(r) for r in rows_of(store))  # its day went with it
    assert index.nodes_of(store.reader(), ns, secret) == []
    assert recall(store, index, ns, "Zanzibar?") == {}
    assert set(recall(store, index, ns, "Ana?")) == {kept}
    assert index.node_info(store.reader(), ns, ["e:ana", "e:zanzibar"]) == {"e:ana": 1}
    with store.transaction("forget") as conn:
        index.remove(conn, ns, [kept])
    assert rows_of(store) == []
    assert recall(store, index, ns, "Ana?") == {}


def test_readd_replaces_nodes(store: TruthStore, index: EvidenceIndex) -> None:
    ns = namespace(store, "u1")
    (rid,) = add(store, index, ns, [("Ana", "I love Lisbon.", T0)])
    with store.transaction("add") as conn:
        index.add(conn, ns, keyed(conn, index, ns, [{"rid": rid, "text": "I visited Porto.", "speaker": "Ana",
                                                     "ref_ts": T0, "session_id": "s1"}]))
    nodes = index.nodes_of(store.reader(), ns, rid)
    assert "e:porto" in nodes and "e:lisbon" not in nodes
    assert index.node_info(store.reader(), ns, ["e:lisbon", "e:ana"]) == {"e:ana": 1}
    assert index.record_count(store.reader(), ns) == 1


def test_allowed(store: TruthStore, index: EvidenceIndex) -> None:
    ns = namespace(store, "u1")
    r1, r2, r3 = add(store, index, ns, [("Ana", "I love tennis.", T0), ("Ana", "I love golf.", T0 + 60),
                                        ("Ana", "I love chess.", T0 + 120)])
    assert set(recall(store, index, ns, "What does Ana love?", allowed=[r2, 99999])) == {r2}
    assert recall(store, index, ns, "What does Ana love?", allowed=[]) == {}
    assert set(recall(store, index, ns, "What does Ana love?")) == {r1, r2, r3}


def test_snapshot_syncs_incrementally(store: TruthStore, index: EvidenceIndex,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    ns, other = namespace(store, "u1"), namespace(store, "u2")
    loads: list[int] = []
    real_load = EvidenceSnapshot.load.__func__  # type: ignore[attr-defined]

    def counting_load(cls: type[EvidenceSnapshot], conn: Any, ns_id: int, stats: Any) -> EvidenceSnapshot:
        loads.append(ns_id)
        return real_load(cls, conn, ns_id, stats)

    monkeypatch.setattr(EvidenceSnapshot, "load", classmethod(counting_load))
    first = add(store, index, ns, [("Ana", "I love tennis.", T0)])
    s1 = index.snapshot(store.reader(), ns)
    assert s1 is not None and loads == [ns]
    assert index.snapshot(store.reader(), ns) is s1  # unchanged: the same object
    add(store, index, other, [("Ana", "I love golf.", T0)])  # another namespace's write
    second = add(store, index, ns, [("Ana", "I visited Porto yesterday.", T0 + DAY),
                                    ("Ben", "I love Porto too.", T0 + DAY + 60)])
    s2 = index.snapshot(store.reader(), ns)
    assert s2 is not s1 and loads == [ns]  # extended, not reloaded
    assert set(recall(store, index, ns, "Ana and Porto?")) == {*first, *second}
    # the extended snapshot answers exactly like a fresh load
    fresh = EvidenceIndex()
    for query, route in [("What does Ana love?", None), ("Porto?", None), ("Who?", day_route((2023, 5, 8))),
                         ("Ana?", day_route((2023, 5, 9)))]:
        assert recall(store, index, ns, query, route=route) == pytest.approx(
            recall(store, fresh, ns, query, route=route))
    assert s2.df[s2.index["e:porto"]] == 2 and s2.df[s2.index["e:ana"]] == 2
    # a delete reloads
    before = len(loads)
    with store.transaction("forget") as conn:
        index.remove(conn, ns, first)
    s3 = index.snapshot(store.reader(), ns)
    assert s3 is not None and len(loads) == before + 1 and "t:preference" in s3.index
    assert set(recall(store, index, ns, "Ana?")) == {second[0]}
    # a write by another EvidenceIndex (another process) is seen too
    third = add(store, fresh, ns, [("Ana", "Cats!", T0 + 3 * DAY)])
    assert set(recall(store, index, ns, "Ana?")) == {second[0], *third}


def test_snapshot_is_reused_at_ten_thousand_records(store: TruthStore, index: EvidenceIndex) -> None:
    """What keeps recall fast at scale: one snapshot serves every recall until a write (timing: memext bench)."""
    ns = namespace(store, "big")
    rng = np.random.default_rng(0)
    names = ["Ana", "Ben", "Cleo", "Dara"] + [f"Person{i}" for i in range(200)]
    tags = ["preference", "event", "emotion", "plan"]
    n = 10_000
    with store.transaction("add") as conn:  # bulk rows written directly: this measures recall, not extraction
        index.add(conn, ns, keyed(conn, index, ns, [{"rid": 1, "text": "seed", "speaker": "Ana", "ref_ts": None,
                                                     "session_id": None}]))
        keys = [f"e:{k}" for k in (x.lower() for x in names)] + [f"t:{t}" for t in tags]
        keys += [f"et:{e.lower()}|{t}" for e in names for t in tags]
        keys += [f"d:2023-05-{d:02d}" for d in range(1, 29)] + ["m:2023-05"]
        conn.executemany("INSERT OR IGNORE INTO evidence_nodes(ns_id, key, n_records) VALUES (?,?,0)",
                         [(ns, k) for k in keys])
        nid = dict(conn.execute("SELECT key, nid FROM evidence_nodes WHERE ns_id=?", (ns,)).fetchall())
        postings = []
        for rid in range(2, n + 2):
            e, t, d = names[int(rng.integers(len(names)))].lower(), tags[int(rng.integers(4))], int(rng.integers(1, 29))
            postings += [(ns, rid, nid[k]) for k in (f"e:{e}", f"t:{t}", f"et:{e}|{t}", f"d:2023-05-{d:02d}",
                                                      "m:2023-05")]
        conn.executemany("INSERT INTO evidence_postings(ns_id, rid, nid) VALUES (?,?,?)", postings)
        conn.execute("UPDATE evidence_stats SET n_records=?, last_pid=(SELECT max(pid) FROM evidence_postings)"
                     " WHERE ns_id=?", (n + 1, ns))
    recaller = EvidenceRecaller(context(store, index))
    request = RecallRequest(query="What sport does Ana enjoy?", ns_id=ns, limit=10, route=day_route((2023, 5, 7)))
    hits = recaller.recall(request)  # loads the snapshot
    assert len(hits.rids) > 1000
    snap = index.snapshot(store.reader(), ns)
    assert snap is not None
    for _ in range(20):
        assert recaller.recall(request).ranked() == hits.ranked()
    assert index.snapshot(store.reader(), ns) is snap  # 21 recalls, no reload
    assert set(query_keys(snap, "What sport does Ana enjoy?")) == {"e:ana", "t:preference", "et:ana|preference"}
