"""The entity co-occurrence graph (store) and the graph recall channel, on a real SQLite truth store."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from memory_ext.errors import ConfigError
from memory_ext.ingest.evidence_keys import batch_entities
from memory_ext.recall.base import Hits, RecallContext, RecallRequest
from memory_ext.recall.graph import GraphRecaller
from memory_ext.registry import recallers
from memory_ext.store.graph import EntityGraph, entity_key, record_entities
from memory_ext.store.snapshots import chunks, marks
from memory_ext.store.sqlite import TruthStore

DAY = 86_400.0
T0 = 1_700_000_000.0


@dataclass(frozen=True)
class GraphContext(RecallContext):
    """RecallContext plus the field the engine will add."""

    graph_index: EntityGraph | None = None


@pytest.fixture()
def store(tmp_path: Path) -> Iterator[TruthStore]:
    s = TruthStore(tmp_path / "store")
    s.add_schema(EntityGraph.create_schema)
    yield s
    s.close()


class SQLGraph(EntityGraph):
    """The entity graph with a reference reader of its tables in plain SQL: what the tests check the stored
    graph and the in-memory snapshots against (the engine itself reads only snapshots)."""

    def entities_in(self, conn: sqlite3.Connection, ns_id: int, text: str) -> list[tuple[int, str]]:
        """The known entities of ``ns_id`` that ``text`` names, as ``(eid, display name)`` in order of mention.

        A key matches as a run of whole tokens (case-insensitive, possessives ignored) or, when written in CJK
        characters (two or more), as a substring; :func:`extract_entities`' names of the text are looked up
        too. Overlapping matches: the longer wins.
        """
        eids = self.match(conn, ns_id, text)
        names = self.display_names(conn, ns_id, eids)
        return [(eid, names[eid]) for eid in eids if eid in names]


    def display_names(self, conn: sqlite3.Connection, ns_id: int, eids: Sequence[int]) -> dict[int, str]:
        """eid -> display name, for the entities of ``ns_id`` among ``eids``."""
        return {eid: name for eid, (name, _) in self.entity_info(conn, ns_id, eids).items()}

    def entity_info(self, conn: sqlite3.Connection, ns_id: int, eids: Sequence[int]) -> dict[int, tuple[str, int]]:
        """eid -> (display name, number of records naming it), for the entities of ``ns_id`` among ``eids``."""
        out: dict[int, tuple[str, int]] = {}
        for part in chunks(sorted({int(e) for e in eids})):
            for eid, name, n in conn.execute(
                f"SELECT eid, name, n_records FROM graph_entities WHERE ns_id=? AND eid IN {marks(len(part))}",
                (ns_id, *part),
            ):
                out[int(eid)] = (name, int(n))
        return out

    def postings(
        self, conn: sqlite3.Connection, ns_id: int, eids: Sequence[int], *, limit: int | None = None
    ) -> dict[int, list[tuple[int, float | None]]]:
        """eid -> ``(rid, ts)`` of the records naming it, newest first (at most ``limit`` per entity)."""
        out: dict[int, list[tuple[int, float | None]]] = {}
        for eid in dict.fromkeys(int(e) for e in eids):
            rows = conn.execute(
                "SELECT rid, ts FROM graph_postings WHERE ns_id=? AND eid=? ORDER BY ts DESC, rid DESC LIMIT ?",
                (ns_id, eid, -1 if limit is None else int(limit)),
            )
            out[eid] = [(int(r), ts) for r, ts in rows]
        return out

    def neighbours(
        self,
        conn: sqlite3.Connection,
        ns_id: int,
        eids: Sequence[int],
        *,
        now: float | None = None,
        limit: int | None = None,
    ) -> dict[int, list[tuple[int, float]]]:
        """eid -> its neighbours ``(eid, weight)``, heaviest first (at most ``limit``), ties by eid.

        ``weight = count * recency(last_ts, now)``; ``now`` defaults to :meth:`reference_time`.
        """
        if now is None:
            now = self.reference_time(conn, ns_id)
        out: dict[int, list[tuple[int, float]]] = {}
        for eid in dict.fromkeys(int(e) for e in eids):
            rows = conn.execute(
                "SELECT b, count, last_ts FROM graph_edges WHERE ns_id=? AND a=?"
                " UNION ALL SELECT a, count, last_ts FROM graph_edges WHERE ns_id=? AND b=?",
                (ns_id, eid, ns_id, eid),
            ).fetchall()
            weighted = sorted(
                ((int(other), float(count) * self.recency(last_ts, now)) for other, count, last_ts in rows),
                key=lambda x: (-x[1], x[0]),
            )
            out[eid] = weighted if limit is None else weighted[:limit]
        return out

    def edge(self, conn: sqlite3.Connection, ns_id: int, a: int, b: int) -> tuple[int, float | None] | None:
        """``(count, last_ts)`` of the edge between entities ``a`` and ``b`` of ``ns_id``, or None."""
        lo, hi = (a, b) if a < b else (b, a)
        row = conn.execute(
            "SELECT count, last_ts FROM graph_edges WHERE ns_id=? AND a=? AND b=?", (ns_id, lo, hi)
        ).fetchone()
        return None if row is None else (int(row[0]), row[1])

    def find(self, conn: sqlite3.Connection, ns_id: int, name: str) -> int | None:
        """The eid of the entity of ``ns_id`` whose key equals ``name``'s, or None."""
        row = conn.execute(
            "SELECT eid FROM graph_entities WHERE ns_id=? AND key=?", (ns_id, entity_key(name))
        ).fetchone()
        return None if row is None else int(row[0])


@pytest.fixture()
def graph() -> SQLGraph:
    return SQLGraph()


def namespace(store: TruthStore, user: str) -> int:
    with store.transaction("ns") as conn:
        return store.ensure_namespace(conn, (user, ""))


_counter = iter(range(10**9))


def add(store: TruthStore, graph: SQLGraph, ns_id: int,
        rows: Sequence[tuple[str | None, str, float | None]]) -> list[int]:
    """Insert ``(speaker, text, ts)`` turn records and index their entities; returns their rids."""
    records = [{"id": f"rec_{next(_counter)}", "kind": "turn", "text": text,
                "index_text": f"{speaker}: {text}" if speaker else text, "ref_ts": ts, "turn_ids": [],
                "speaker": speaker} for speaker, text, ts in rows]
    with store.transaction("add") as conn:
        rids = store.insert_records(conn, ns_id, records)
        names = batch_entities([(text, speaker) for speaker, text, _ in rows], graph.known_keys(conn, ns_id))
        graph.add(conn, ns_id, [(rid, n, ts) for rid, n, (_, _, ts) in zip(rids, names, rows, strict=True)])
    return rids


def recall(store: TruthStore, graph: SQLGraph, ns_id: int, query: str, limit: int = 10,
           allowed: Sequence[int] | None = None) -> dict[int, float]:
    ctx = GraphContext(store=store, keyword_index=None, vector_index=None, embedder=None,  # type: ignore[arg-type]
                       graph_index=graph)
    hits = GraphRecaller(ctx).recall(RecallRequest(query=query, ns_id=ns_id, limit=limit, allowed=allowed))
    assert isinstance(hits, Hits) and hits.fill == 0.0
    return dict(hits.ranked())


def eid(store: TruthStore, graph: SQLGraph, ns_id: int, name: str) -> int:
    found = graph.find(store.reader(), ns_id, name)
    assert found is not None, name
    return found


def graph_rows(store: TruthStore) -> list[tuple[object, ...]]:
    conn = store.reader()
    out: list[tuple[object, ...]] = []
    for table in ("graph_entities", "graph_postings", "graph_edges", "graph_stats"):
        out += conn.execute(f"SELECT * FROM {table}").fetchall()
    return out


# ------------------------------------------------------------------------------------------------ store


def test_entity_keys_normalise_spellings() -> None:
    assert entity_key("Ana's") == entity_key(" ana ") == entity_key("ANA") == "ana"
    assert entity_key("Charlotte’s Web") == "charlotte web"
    assert entity_key("李明") == "李明"
    assert entity_key("!!") == ""
    assert record_entities("My brother Marco has 3 kids and $200.", speaker="Ana") == ["Ana", "Marco"]
    assert "assistant" not in {n.lower() for n in record_entities("Marco is nice.", speaker="assistant")}


def test_cooccurrence_edges_count_records_and_keep_the_latest_time(store: TruthStore, graph: SQLGraph) -> None:
    ns = namespace(store, "u1")
    add(store, graph, ns, [("Ana", "I cooked with Marco in Lisbon.", T0),
                           ("Ana", "Then Marco called me again.", T0 + 5 * DAY),
                           (None, "It was sunny in Lisbon.", T0 + 2 * DAY)])
    conn = store.reader()
    ana, marco, lisbon = (eid(store, graph, ns, n) for n in ("Ana", "Marco", "Lisbon"))
    assert graph.edge(conn, ns, ana, marco) == (2, T0 + 5 * DAY)
    assert graph.edge(conn, ns, marco, ana) == (2, T0 + 5 * DAY)
    assert graph.edge(conn, ns, ana, lisbon) == (1, T0)
    assert graph.edge(conn, ns, marco, lisbon) == (1, T0)
    assert graph.entity_info(conn, ns, [ana, marco, lisbon]) == {ana: ("Ana", 2), marco: ("Marco", 2),
                                                                 lisbon: ("Lisbon", 2)}
    assert graph.record_count(conn, ns) == 3
    assert graph.reference_time(conn, ns) == T0 + 5 * DAY
    # one entity named twice in a record ("Ana", "ana's") is one posting and no self-edge
    with store.transaction("add") as wconn:
        graph.add(wconn, ns, [(999, ["Ana", "ana's", "Marco"], T0)])
    assert graph.edge(store.reader(), ns, ana, marco) == (3, T0 + 5 * DAY)
    assert graph.entity_info(store.reader(), ns, [ana])[ana] == ("Ana", 3)
    assert store.reader().execute("SELECT count(*) FROM graph_edges WHERE a=b").fetchone()[0] == 0


def test_readding_a_record_replaces_its_entities(store: TruthStore, graph: SQLGraph) -> None:
    ns = namespace(store, "u1")
    with store.transaction("add") as conn:
        graph.add(conn, ns, [(1, ["Ana", "Marco"], T0)])
        graph.add(conn, ns, [(1, ["Ana", "Lena"], T0)])
    conn = store.reader()
    assert graph.find(conn, ns, "Marco") is None
    assert graph.edge(conn, ns, eid(store, graph, ns, "Ana"), eid(store, graph, ns, "Lena")) == (1, T0)
    assert graph.record_count(conn, ns) == 1


def test_neighbour_weight_is_count_times_recency(store: TruthStore) -> None:
    graph = SQLGraph(half_life_days=10)
    ns = namespace(store, "u1")
    add(store, graph, ns, [("Ana", "Old news from Marco.", T0),
                           ("Ana", "Say hi to Lena.", T0 + 10 * DAY),
                           ("Ana", "I saw Lena again.", T0 + 20 * DAY)])
    conn = store.reader()
    ana, marco, lena = (eid(store, graph, ns, n) for n in ("Ana", "Marco", "Lena"))
    weights = dict(graph.neighbours(conn, ns, [ana])[ana])
    assert weights[lena] == pytest.approx(2.0)  # two records, the latest is "now" (the newest in the namespace)
    assert weights[marco] == pytest.approx(0.25)  # one record, two half-lives old
    assert [e for e, _ in graph.neighbours(conn, ns, [ana], limit=1)[ana]] == [lena]
    later = dict(graph.neighbours(conn, ns, [ana], now=T0 + 30 * DAY)[ana])
    assert later[lena] == pytest.approx(1.0) and later[marco] == pytest.approx(0.125)
    with pytest.raises(ConfigError):
        EntityGraph(half_life_days=0)


def test_remove_deletes_postings_edges_and_orphan_names(store: TruthStore, graph: SQLGraph) -> None:
    ns = namespace(store, "u1")
    r_zed, r_both, r_late = add(store, graph, ns, [("Ana", "Today Zebulon visited Marco.", T0),
                                                   ("Ana", "I think Marco cooked.", T0 + DAY),
                                                   ("Ana", "Yes, Marco cooked again.", T0 + 3 * DAY)])
    other = SQLGraph()  # another process's copy: it must notice the delete
    assert [n for _, n in other.entities_in(store.reader(), ns, "Zebulon?")] == ["Zebulon"]
    ana, marco = eid(store, graph, ns, "Ana"), eid(store, graph, ns, "Marco")
    with store.transaction("forget") as conn:
        graph.remove(conn, ns, [r_zed, r_late, 12345])
    conn = store.reader()
    assert not any("zebulon" in str(v).casefold() for row in graph_rows(store) for v in row)
    assert graph.find(conn, ns, "Zebulon") is None
    assert other.entities_in(conn, ns, "Zebulon?") == []
    assert graph.edge(conn, ns, ana, marco) == (1, T0 + DAY)  # count decremented, last_ts recomputed
    assert {r for (r,) in conn.execute("SELECT rid FROM graph_postings WHERE ns_id=?", (ns,))} == {r_both}
    assert graph.entity_info(conn, ns, [ana, marco]) == {ana: ("Ana", 1), marco: ("Marco", 1)}
    assert graph.record_count(conn, ns) == 1 and graph.reference_time(conn, ns) == T0 + DAY
    with store.transaction("forget") as wconn:
        graph.remove(wconn, ns, [r_both])
    assert all(row[0] == ns and row[3] == 0 for row in graph_rows(store))  # only the zeroed stats row is left
    assert len(graph_rows(store)) == 1


def test_drop_namespace_leaves_other_namespaces(store: TruthStore, graph: SQLGraph) -> None:
    ns1, ns2 = namespace(store, "u1"), namespace(store, "u2")
    add(store, graph, ns1, [("Ana", "I hear Marco cooked paella.", T0)])
    r2 = add(store, graph, ns2, [("Bob", "My neighbour Marco fixed my bike.", T0)])
    assert graph.entities_in(store.reader(), ns1, "Marco")
    with store.transaction("forget") as conn:
        graph.drop_namespace(conn, ns1)
    conn = store.reader()
    assert conn.execute("SELECT count(*) FROM graph_entities WHERE ns_id=?", (ns1,)).fetchone()[0] == 0
    assert conn.execute("SELECT count(*) FROM graph_postings WHERE ns_id=?", (ns1,)).fetchone()[0] == 0
    assert graph.entities_in(conn, ns1, "Marco") == []
    assert set(recall(store, graph, ns2, "Marco")) == set(r2)


def test_entities_in_matches_whole_tokens_possessives_cjk_and_prefers_longer(store: TruthStore,
                                                                           graph: SQLGraph) -> None:
    ns = namespace(store, "u1")
    with store.transaction("add") as conn:
        graph.add(conn, ns, [(1, ["Ana", "Berlin", "Berlin Marathon", "李明", "北京", "北京大学", "Al"], T0)])
    conn = store.reader()

    def names(q: str) -> list[str]:
        return [n for _, n in graph.entities_in(conn, ns, q)]

    assert names("what did ana's brother say?") == ["Ana"]
    assert names("Banana bread") == []  # whole tokens only
    assert names("Was the berlin marathon hard?") == ["Berlin Marathon"]
    assert names("Berlin or the Berlin Marathon") == ["Berlin", "Berlin Marathon"]
    assert names("李明的哥哥在北京大学工作吗？") == ["李明", "北京大学"]
    assert names("Ana和李明") == ["Ana", "李明"]
    assert names("") == [] and names("   ") == []
    assert graph.entities_in(conn, namespace(store, "nobody"), "Ana") == []


def test_entities_in_with_ten_thousand_entities(store: TruthStore, graph: SQLGraph) -> None:
    ns = namespace(store, "u1")
    with store.transaction("add") as conn:
        graph.add(conn, ns, [(i, [f"Person{i}", f"Place{i % 500}"], T0 + i) for i in range(10_000)])
    conn = store.reader()
    assert [n for _, n in graph.entities_in(conn, ns, "Where did Person42 go?")] == ["Person42"]  # loads cache
    for i in range(200):  # among 10,500 known names, exactly the three named, in order (timing: memext bench)
        found = graph.entities_in(conn, ns, f"Did person{i} meet Person{i + 1} at place{i} last summer?")
        assert [n for _, n in found] == [f"Person{i}", f"Person{i + 1}", f"Place{i}"]
    # a write adds a name that the next query sees without a full reload
    with store.transaction("add") as wconn:
        graph.add(wconn, ns, [(20_000, ["Zorro"], T0)])
    assert [n for _, n in graph.entities_in(conn, ns, "zorro")] == ["Zorro"]


# ------------------------------------------------------------------------------------------------ recall


def test_recaller_is_registered_and_needs_a_graph(store: TruthStore) -> None:
    assert recallers.resolve("recall.graph_recaller", "graph") is GraphRecaller
    assert GraphRecaller.channel == "graph"
    plain = RecallContext(store=store, keyword_index=None, vector_index=None, embedder=None)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="graph"):
        GraphRecaller(plain)


def test_multi_hop_question_reaches_the_neighbours_record(store: TruthStore, graph: SQLGraph) -> None:
    ns = namespace(store, "u1")
    r_link, r_job, r_other, r_ana2 = add(store, graph, ns, [
        ("Ana", "My brother Marco is visiting next week.", T0),
        ("Marco", "I work as a chef at a seafood restaurant.", T0 + DAY),  # names only Marco (the speaker)
        ("Lena", "Porto was lovely.", T0 + DAY),  # unrelated
        ("Ana", "I started learning the cello.", T0 + 2 * DAY),
    ])
    scores = recall(store, graph, ns, "What does Ana's brother do?")
    assert r_job in scores and r_other not in scores
    assert scores[r_link] > scores[r_job] > 0  # hop 0 above hop 1
    assert scores[r_ana2] > scores[r_job]
    hop0 = recall(store, graph, ns, "Marco")
    assert set(hop0) >= {r_link, r_job}
    assert list(recall(store, graph, ns, "Ana", allowed=[r_job])) == [r_job]
    assert recall(store, graph, ns, "Ana", allowed=[]) == {}


def test_more_frequent_cooccurrence_ranks_higher(store: TruthStore, graph: SQLGraph) -> None:
    ns = namespace(store, "u1")
    rows = [("Ana", "Then Marco came for dinner.", T0)] * 3 + [("Ana", "Then Lena came for dinner.", T0)]
    add(store, graph, ns, rows)
    r_marco, r_lena = add(store, graph, ns, [(None, "I saw that Marco runs a bakery.", T0),
                                             (None, "I saw that Lena runs a bakery.", T0)])
    scores = recall(store, graph, ns, "Ana")
    assert scores[r_marco] > scores[r_lena] > 0
    assert max(scores[r_marco], scores[r_lena]) < min(v for r, v in scores.items() if r not in (r_marco, r_lena))


def test_recent_cooccurrence_ranks_higher(store: TruthStore, graph: SQLGraph) -> None:
    ns = namespace(store, "u1")
    add(store, graph, ns, [("Ana", "Then Marco came for dinner.", T0),
                           ("Ana", "Then Lena came for dinner.", T0 + 200 * DAY)])
    r_marco, r_lena = add(store, graph, ns, [(None, "I saw that Marco runs a bakery.", T0 + 200 * DAY),
                                             (None, "I saw that Lena runs a bakery.", T0 + 200 * DAY)])
    scores = recall(store, graph, ns, "Ana")
    assert scores[r_lena] > scores[r_marco] > 0
    # with a very long half-life the two edges weigh the same again
    flat = recall(store, SQLGraph(half_life_days=1e9), ns, "Ana")
    assert flat[r_lena] == pytest.approx(flat[r_marco])


def test_rare_seed_counts_more_than_a_common_one(store: TruthStore, graph: SQLGraph) -> None:
    ns = namespace(store, "u1")
    rids = add(store, graph, ns, [("Ana", f"Day {i} notes with Bo.", T0 + i) for i in range(4)])
    add(store, graph, ns, [(None, f"Day {i} notes.", T0 + i) for i in range(4, 20)])
    (r_rare,) = add(store, graph, ns, [("Ana", "Then Quentin phoned.", T0 + 30)])
    scores = recall(store, graph, ns, "Did Bo talk to Quentin?")
    assert scores[r_rare] > scores[rids[0]] > 0


def test_a_hub_is_neither_a_seed_nor_reached(store: TruthStore, graph: SQLGraph) -> None:
    """The speaker of a conversation is named in nearly every record: following her reaches everything, and the
    standardised channel would count that as evidence. Only the rare entity seeds the graph."""
    ns = namespace(store, "u1")
    add(store, graph, ns, [("Ana", f"Day {i} notes.", T0 + i) for i in range(20)])
    (r_rare,) = add(store, graph, ns, [("Ana", "Then Quentin phoned.", T0 + 30)])
    assert recall(store, graph, ns, "Did Ana talk to Quentin?") == {r_rare: pytest.approx(1.0)}
    assert recall(store, graph, ns, "What did Ana do?") == {}
    # a small namespace has no hubs: with three records, Ana seeds the graph
    ns2 = namespace(store, "u2")
    small = add(store, graph, ns2, [("Ana", f"Day {i} notes.", T0 + i) for i in range(3)])
    assert set(recall(store, graph, ns2, "What did Ana do?")) == set(small)


def test_hop_two_only_when_hops_zero_and_one_find_too_few(store: TruthStore, graph: SQLGraph) -> None:
    ns = namespace(store, "u1")
    r1, r2, r3 = add(store, graph, ns, [(None, "I think Ana met Marco.", T0),
                                        (None, "I think Marco met Lena.", T0),
                                        (None, "I hear Lena loves Kyoto.", T0)])
    scores = recall(store, graph, ns, "Ana", limit=10)
    assert scores[r1] > scores[r2] > scores[r3] > 0
    assert set(recall(store, graph, ns, "Ana", limit=2)) == {r1, r2}


def test_namespaces_are_isolated(store: TruthStore, graph: SQLGraph) -> None:
    ns1, ns2 = namespace(store, "u1"), namespace(store, "u2")
    r1 = add(store, graph, ns1, [("Ana", "I think Marco is a chef.", T0)])
    r2 = add(store, graph, ns2, [("Bob", "My friend Zoe is a pilot.", T0)])
    conn = store.reader()
    assert graph.entities_in(conn, ns2, "Ana and Marco") == []
    assert recall(store, graph, ns2, "What does Marco do?") == {}
    r2b = add(store, graph, ns2, [("Bob", "Today Marco from next door waved.", T0)])
    in_ns2 = recall(store, graph, ns2, "Marco")  # ns2's Marco, then Bob's other record through Bob (hop 1)
    assert list(in_ns2) == [*r2b, *r2]
    assert set(recall(store, graph, ns1, "Marco")) == set(r1)
    assert not set(recall(store, graph, ns2, "Bob")) & set(r1)
    assert set(recall(store, graph, ns2, "Bob")) == set(r2) | set(r2b)
    # the two namespaces' Marco are two entities, never joined by an edge
    m1, m2 = eid(store, graph, ns1, "Marco"), eid(store, graph, ns2, "Marco")
    assert m1 != m2 and graph.edge(conn, ns2, m1, m2) is None


def test_chinese_names(store: TruthStore, graph: SQLGraph) -> None:
    ns = namespace(store, "u1")
    r_link, r_job, r_other = add(store, graph, ns, [
        ("小红", "我哥哥李明下周来杭州看我。", T0),
        (None, "李明在医院当医生。", T0 + DAY),
        (None, "王芳喜欢画画。", T0),
    ])
    assert [n for _, n in graph.entities_in(store.reader(), ns, "李明是做什么的？")] == ["李明"]
    scores = recall(store, graph, ns, "李明是做什么的？")
    assert set(scores) >= {r_link, r_job} and r_other not in scores
    hop = recall(store, graph, ns, "小红的哥哥做什么工作？")
    assert hop[r_link] > hop[r_job] > 0


@pytest.mark.parametrize("query", ["", "   ", "What is the weather like?", "天气怎么样？"])
def test_no_seed_gives_empty_hits(store: TruthStore, graph: SQLGraph, query: str) -> None:
    ns = namespace(store, "u1")
    add(store, graph, ns, [("Ana", "I think Marco is a chef.", T0)])
    ctx = GraphContext(store=store, keyword_index=None, vector_index=None, embedder=None,  # type: ignore[arg-type]
                       graph_index=graph)
    hits = GraphRecaller(ctx).recall(RecallRequest(query=query, ns_id=ns, limit=5))
    assert hits.rids.size == 0 and hits.scores.size == 0 and hits.fill == 0.0
    assert hits.rids.dtype == np.int64


def test_empty_namespace_and_rolled_back_write(store: TruthStore, graph: SQLGraph) -> None:
    ns = namespace(store, "u1")
    assert recall(store, graph, ns, "Ana") == {}
    with pytest.raises(RuntimeError), store.transaction("add") as conn:
        graph.add(conn, ns, [(1, ["Ana"], T0)])
        raise RuntimeError("boom")
    graph.invalidate(ns)
    assert graph.entities_in(store.reader(), ns, "Ana") == []
    assert isinstance(store.reader(), sqlite3.Connection)


# ------------------------------------------------------------------------------------ in-memory snapshot


def ranked(store: TruthStore, graph: SQLGraph, ns_id: int, query: str, limit: int = 10,
           max_postings: int = 1000) -> list[tuple[int, float]]:
    ctx = GraphContext(store=store, keyword_index=None, vector_index=None, embedder=None,  # type: ignore[arg-type]
                       graph_index=graph)
    hits = GraphRecaller(ctx, max_postings=max_postings).recall(RecallRequest(query=query, ns_id=ns_id,
                                                                              limit=limit))
    return hits.ranked()


def same_ranking(a: list[tuple[int, float]], b: list[tuple[int, float]]) -> bool:
    return [r for r, _ in a] == [r for r, _ in b] and all(
        x == pytest.approx(y, rel=1e-12) for (_, x), (_, y) in zip(a, b, strict=True))


def test_snapshot_matches_the_tables(store: TruthStore) -> None:
    graph = SQLGraph(half_life_days=10)
    ns = namespace(store, "u1")
    add(store, graph, ns, [("Ana", "Old news from Marco.", T0), ("Ana", "Say hi to Lena.", T0 + 10 * DAY),
                           (None, "Lena and Marco in Porto.", None), ("Ana", "I saw Lena again.", T0 + 20 * DAY)])
    conn = store.reader()
    snap = graph.snapshot(conn, ns)
    assert snap is not None and snap.n_records == graph.record_count(conn, ns)
    for e in (eid(store, graph, ns, n) for n in ("Ana", "Marco", "Lena", "Porto")):
        i = snap.index[e]
        dst, weight = snap.neighbours(i)
        assert [(int(snap.eids[d]), pytest.approx(w)) for d, w in zip(dst, weight, strict=True)] == \
            graph.neighbours(conn, ns, [e])[e]
        assert [int(snap.rids[r]) for r in snap.postings(i)] == [r for r, _ in graph.postings(conn, ns, [e])[e]]
        assert snap.names[i] == graph.display_names(conn, ns, [e])[e]
        assert int(snap.df[i]) == graph.entity_info(conn, ns, [e])[e][1]
    assert graph.snapshot(conn, ns) is snap  # nothing changed: the same snapshot, no reload
    assert graph.snapshot(conn, namespace(store, "nobody")) is None


def test_add_after_a_search_is_seen_by_the_next_search_without_a_reload(store: TruthStore,
                                                                       graph: SQLGraph) -> None:
    ns = namespace(store, "u1")
    add(store, graph, ns, [("Ana", f"Day {i}: Marco cooked with Lena.", T0 + i * DAY) for i in range(30)])
    before = recall(store, graph, ns, "Zoltan")
    assert before == {}
    base = graph.snapshot(store.reader(), ns)
    (r_new,) = add(store, graph, ns, [("Ana", "Yesterday Zoltan met Marco.", T0 + 40 * DAY)])
    scores = recall(store, graph, ns, "Zoltan")
    assert r_new in scores and max(scores, key=scores.__getitem__) == r_new
    snap = graph.snapshot(store.reader(), ns)
    assert snap is not base and snap._p_rec is base._p_rec  # appended to, not reloaded
    fresh = SQLGraph()  # loads everything from the tables
    for q in ("Zoltan", "Ana", "Marco", "Lena and Zoltan"):
        assert same_ranking(ranked(store, graph, ns, q), ranked(store, fresh, ns, q)), q
    # another process's copy sees the write as well
    (r_late,) = add(store, fresh, ns, [("Ana", "Zoltan phoned Lena later.", T0 + 41 * DAY)])
    assert r_late in recall(store, graph, ns, "Zoltan")


def test_remove_invalidates_the_snapshot(store: TruthStore, graph: SQLGraph) -> None:
    ns = namespace(store, "u1")
    rids = add(store, graph, ns, [("Ana", "Today Zebulon visited Marco.", T0),
                                  ("Ana", "I think Marco cooked.", T0 + DAY),
                                  ("Ana", "Yes, Marco cooked again.", T0 + 3 * DAY)])
    other = SQLGraph()  # another process's copy: it must notice the delete through graph_stats
    assert set(recall(store, other, ns, "Marco")) == set(rids)
    assert rids[0] in recall(store, graph, ns, "Zebulon")
    with store.transaction("forget") as conn:
        graph.remove(conn, ns, [rids[0], rids[2]])
    for g in (graph, other):
        assert recall(store, g, ns, "Zebulon") == {}
        assert set(recall(store, g, ns, "Marco")) == {rids[1]}
        assert same_ranking(ranked(store, g, ns, "Ana"), ranked(store, SQLGraph(), ns, "Ana"))
    with store.transaction("forget") as conn:
        graph.drop_namespace(conn, ns)
    assert recall(store, graph, ns, "Marco") == {} and recall(store, other, ns, "Marco") == {}


def test_interleaved_writes_and_searches_rank_as_a_fresh_load(store: TruthStore) -> None:
    rng = np.random.default_rng(5)
    people = ["Ana", "Bob", "Cleo", "Dmitri", "Elif", "Farid", "Greta", "Hiro"]
    graph = SQLGraph(half_life_days=3)
    ns = namespace(store, "u1")
    queries = ["Ana", "What did Cleo tell Hiro?", "Greta", "Farid and Bob"]
    rid = 1000
    for step in range(40):
        with store.transaction("add") as conn:
            items = []
            for _ in range(int(rng.integers(1, 4))):
                rid += 1
                names = list(rng.choice(people, size=int(rng.integers(1, 4)), replace=False))
                ts = None if rng.random() < 0.1 else T0 + float(rng.integers(0, 50)) * DAY
                items.append((rid, names, ts))
            if step % 13 == 7:
                items.append((int(rng.integers(1, 500)), ["Ana", "Hiro"], T0))  # a rid below the others
            if step % 11 == 5:
                items.append((rid - 2, ["Cleo"], T0 + DAY))  # re-adding a record replaces it
            graph.add(conn, ns, items)
        fresh = SQLGraph(half_life_days=3)
        for q in queries:
            for limit, max_postings in ((50, 1000), (3, 4)):
                assert same_ranking(ranked(store, graph, ns, q, limit, max_postings),
                                    ranked(store, fresh, ns, q, limit, max_postings)), (step, q, limit)


def test_snapshot_is_reused_across_recalls_at_scale(store: TruthStore, graph: SQLGraph) -> None:
    """What keeps recall fast at scale: one snapshot serves every recall until a write (timing: memext bench)."""
    ns = namespace(store, "u1")
    rng = np.random.default_rng(1)
    hubs, people = ["Ana", "Bob"], [f"Person{i}" for i in range(3000)]
    rows = [(i, [hubs[i % 2], *(people[int(j)] for j in rng.zipf(1.3, 2) % 3000)], T0 + i)
            for i in range(1, 30_001)]
    with store.transaction("add") as conn:
        graph.add(conn, ns, rows)
    mentions: dict[str, set[int]] = {}
    for rid, names, _ in rows:
        for name in names:
            mentions.setdefault(name, set()).add(rid)
    recall(store, graph, ns, "Ana")  # loads the snapshot
    snap = graph.snapshot(store.reader(), ns)
    assert snap is not None
    hub = {name for name, rids in mentions.items() if len(rids) > 0.2 * len(rows)}  # never seeds (recall/graph.py)
    for i in range(100):
        asked = {f"Person{i}", f"Person{i * 7}"} - hub
        hits = recall(store, graph, ns, f"Did Ana meet Person{i} or Person{i * 7}?", limit=50)
        assert bool(hits) == any(name in mentions for name in asked), i
        about = set().union(*(mentions.get(name, set()) for name in asked))
        if about:  # the best hits are about the people asked for
            top = sorted(hits, key=lambda rid: -hits[rid])[:20]
            assert set(top) <= about, (i, sorted(set(top) - about))
    assert graph.snapshot(store.reader(), ns) is snap  # 101 recalls, no reload
    add(store, graph, ns, [("Ana", "Ana met Lena.", T0 + 40_000)])
    assert graph.snapshot(store.reader(), ns) is not snap  # a write gives a new snapshot
