"""Conformance, one store and several engines: a read-only opener sees the writer's data as it changes (both
backends), and — PostgreSQL only, where there is no process lock — two writer engines on one schema see each
other's writes, updates and forgets through their in-process caches, which stay in sync by the stored counters.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import closing
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from memory_ext import MemoryEngine, Namespace, Turn
from memory_ext.errors import ReadOnlyStoreError, StoreError
from tests.conftest import CONVERSATIONS, StoreTarget, fresh_schema, make_turns
from tests.postgres.conformance_kit import assert_same_ranking, store_rows, texts

pytestmark = pytest.mark.postgres

T0 = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
QUESTIONS = [("ana", "What dog did Ana adopt?"), ("ana", "Lena Porto bakery"), ("ben", "marathon training"),
             ("ben", "cat coffee laptop"), ("chen", "peanut allergy")]


def test_a_read_only_opener_sees_the_writers_data_as_it_changes(store_target: StoreTarget) -> None:
    with store_target.open() as writer:
        for user in CONVERSATIONS:
            writer.add_turns(make_turns(user, T0), user)
        writer.flush()
        with store_target.open(read_only=True) as reader:
            for user, q in QUESTIONS:  # warms the reader's caches
                assert_same_ranking(writer.search(q, user, k=6), reader.search(q, user, k=6), what=q)
            assert [t.id for t in reader.get_turns("ana")] == [t.id for t in writer.get_turns("ana")]
            assert [h.id for h in reader.hooks("ana")] == [h.id for h in writer.hooks("ana")]
            assert reader.stats().turns == writer.stats().turns
            # the writer moves on: a new turn, an update, a forget — the open reader follows
            writer.add_turns([Turn(role="user", speaker="Ana", content="We named the kitten Pimenta yesterday.",
                                   timestamp=T0 + timedelta(days=2), session_id="ana-s2")], "ana", wait=True)
            writer.update("ana", "ana:2", content="My sister Lena is moving to Nairobi in June.",
                          timestamp=T0 + timedelta(days=3))
            writer.forget("ben", record_ids=[writer.search("marathon", "ben", k=1).items[0].id])
            writer.flush()
            assert "Pimenta" in reader.search("kitten name", "ana", k=1).items[0].text
            lena = reader.search("Where is Lena moving?", "ana", k=5).items
            assert "Nairobi" in lena[0].text and not any("Lena is moving to Porto" in i.text for i in lena)
            assert not any("marathon" in t for t in texts(reader.search("marathon training", "ben", k=10)))
            assert [v.operation for v in reader.history("ana", "ana:2")] == ["add", "update"]
            for user, q in [*QUESTIONS, ("ana", "kitten name")]:
                assert_same_ranking(writer.search(q, user, k=6), reader.search(q, user, k=6), what=q)
            for call in (lambda: reader.add_turns(make_turns("chen"), "chen"),
                         lambda: reader.update("ana", "ana:0", content="x"),
                         lambda: reader.delete("ana", ["ana:0"]),
                         lambda: reader.forget("ana"),
                         lambda: reader.compact("ana", "weekly"),
                         lambda: reader.pre_compress("ana", "User: hi\nAssistant: hello")):
                with pytest.raises(ReadOnlyStoreError):
                    call()
        assert len(writer.get_turns("ana")) == len(CONVERSATIONS["ana"]) + 2


@pytest.fixture
def two_writers(postgres_dsn: str, pg_schema: str) -> Iterator[tuple[MemoryEngine, MemoryEngine]]:
    target = StoreTarget("postgres", postgres_dsn, {"storage": {"backend": "postgres", "postgres_schema": pg_schema}})
    a = target.open()
    b = target.open()
    try:
        yield a, b
    finally:
        b.close()
        a.close()


def test_two_writer_engines_on_one_schema_see_each_others_writes(
        two_writers: tuple[MemoryEngine, MemoryEngine]) -> None:
    a, b = two_writers
    a.add_turns(make_turns("ana", T0), "ana", wait=True)
    b.add_turns(make_turns("ben", T0), "ben", wait=True)
    for engine in (a, b):  # each warms its caches on both namespaces
        assert "beagle" in engine.search("What dog did Ana adopt?", "ana", k=1).items[0].text
        assert "60 kilometres" in " ".join(texts(engine.search("How far does Ben run?", "ben", k=3)))
    # interleaved writes to one namespace: one sequence, in commit order
    a.add_turns([Turn(role="user", content="First: the plumber comes on Monday.", session_id="s2")], "ana")
    b.add_turns([Turn(role="user", content="Second: the piano tuner comes on Tuesday.", session_id="s2")], "ana")
    a.add_turns([Turn(role="user", content="Third: the window cleaner comes on Wednesday.", session_id="s2")], "ana")
    a.flush()
    b.flush()
    order = [t.content.split(":")[0] for t in a.get_turns(Namespace("ana", session_id="s2"))]
    assert order == ["First", "Second", "Third"] == \
        [t.content.split(":")[0] for t in b.get_turns(Namespace("ana", session_id="s2"))]
    for engine in (a, b):
        assert "piano tuner" in engine.search("piano tuner", "ana", k=1).items[0].text
        assert "window cleaner" in engine.search("window cleaner", "ana", k=1).items[0].text
    for user, q in [*QUESTIONS[:4], ("ana", "who comes on which day")]:
        assert_same_ranking(a.search(q, user, k=8), b.search(q, user, k=8), what=q)
    # idempotent ingest across engines: B knows A's external ids
    again = b.add_turns(make_turns("ana", T0), "ana")
    assert again.new_ids == () and len(again.existing_ids) == len(CONVERSATIONS["ana"])
    # an update by one, the history and the search of the other
    b.update("ana", "ana:2", content="My sister Lena is moving to Nairobi in June.", timestamp=T0 + timedelta(days=9))
    lena = a.search("Where is Lena moving?", "ana", k=5).items
    assert "Nairobi" in lena[0].text and not any("Lena is moving to Porto" in i.text for i in lena)
    assert [v.operation for v in a.history("ana", "ana:2")] == ["add", "update"]
    # a forget by one: gone for the other's warm caches too
    hit = b.search("piano tuner", "ana", k=1).items[0]
    receipt = a.forget("ana", record_ids=[hit.id])
    assert receipt.turns == 1
    assert not any("piano" in t for t in texts(b.search("piano tuner Tuesday", "ana", k=20)))
    a.forget("ben")
    assert b.search("marathon kilometres", "ben", k=5).items == () and b.get_turns("ben") == []
    assert_same_ranking(a.search("beagle Toby", "ana", k=8), b.search("beagle Toby", "ana", k=8))
    # the memory files are shared too
    assert sorted(h.id for h in a.hooks("ana", include_merged=True)) == \
        sorted(h.id for h in b.hooks("ana", include_merged=True))


def test_two_writer_engines_writing_at_once_lose_nothing(two_writers: tuple[MemoryEngine, MemoryEngine],
                                                         postgres_dsn: str) -> None:
    a, b = two_writers
    errors: list[BaseException] = []

    def write(engine: MemoryEngine, who: str) -> None:
        try:
            for i in range(12):
                engine.add_turns([Turn(role="user", content=f"{who} note {i}: the train to city {i} leaves at {i}:15",
                                       external_id=f"{who}-{i}", session_id=f"s{i % 2}")],
                                 "shared" if i % 3 else f"own-{who}")
        except BaseException as exc:  # noqa: BLE001  reported below
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(a, "alpha")), threading.Thread(target=write, args=(b, "beta")),
               threading.Thread(target=write, args=(a, "gamma"))]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert errors == []
    a.flush()
    b.flush()
    shared = [t.external_id for t in b.get_turns("shared")]
    assert len(shared) == len(set(shared)) == 3 * 8
    assert len(a.get_turns("own-beta")) == 4 and len(b.get_turns("own-alpha")) == 4
    assert a.stats().turns == b.stats().turns == 36 and a.stats().vectors == a.stats().records
    # what they wrote searches like one store given the same turns in the same (commit) order by one writer: windows
    # span the writers' interleaved turns, so that order — not who wrote — decides the rankings. The replay is a
    # PostgreSQL schema too: near-tied turns ("beta note 7" / "beta note 11") are ordered by the last bits of their
    # cosines, which pgvector computes in single precision and numpy in double, and the second hop weighs its
    # feedback turns by rank — backend parity is the other conformance tests' subject, concurrency is this one's
    with closing(fresh_schema(postgres_dsn)) as schemas, \
            StoreTarget("postgres", postgres_dsn, {"storage": {"backend": "postgres",
                                                               "postgres_schema": next(schemas)}}).open() as replay:
        for turn in b.get_turns("shared"):
            replay.add_turns([turn.model_copy(update={"id": None})], "shared")
        replay.flush()
        for who in ("alpha", "beta", "gamma"):
            query = f"{who} note 5 city 5"
            top = b.search(query, "shared", k=3)
            assert f"{who}-5" in [i.external_ids[0] for i in top.items]
            assert_same_ranking(top, replay.search(query, "shared", k=3), what=query)
            assert_same_ranking(a.search(f"{who} train city", "shared", k=10),
                                replay.search(f"{who} train city", "shared", k=10), what=who)


CHILD = r"""
import json, sys
from memory_ext import MemoryEngine, Turn
dsn, schema, start, n = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
config = {"storage": {"backend": "postgres", "postgres_schema": schema}}
with MemoryEngine.open(dsn, config=config, embedder="hashing") as engine:
    for i in range(start, start + n):
        engine.add_turns([Turn(role="user", content=f"child note {i}: the ferry to island {i} leaves at {i}:40",
                               external_id=f"child-{i}", session_id="ferries")], "ana")
    if start == 0:
        engine.update("ana", "ana:2", content="My sister Lena is moving to Nairobi in June.")
        engine.forget("ana", record_ids=[engine.search("cello practice", "ana", k=1).items[0].id])
    engine.flush()
    print(json.dumps({"turns": len(engine.get_turns("ana"))}), flush=True)
"""


def _child(dsn: str, schema: str, start: int, n: int) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    return subprocess.Popen([sys.executable, "-c", CHILD, dsn, schema, str(start), str(n)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)


def test_another_process_writes_and_this_engines_warm_caches_follow(postgres_dsn: str, pg_schema: str) -> None:
    """Caches stay correct when another *process* writes (issue 17: "prove it across processes"): a child engine
    adds turns, updates a memory and forgets one while this engine holds warm snapshots of the namespace; then
    both write at once. This engine's answers equal those of an engine opened afterwards (cold caches)."""
    target = StoreTarget("postgres", postgres_dsn, {"storage": {"backend": "postgres", "postgres_schema": pg_schema}})
    with target.open() as engine:
        engine.add_turns(make_turns("ana", T0), "ana", wait=True)
        questions = ["ferry to island 3", "Where is Lena moving?", "cello practice evening", "beagle Toby"]
        warm = [engine.search(q, "ana", k=6) for q in questions]  # every cache of the namespace loaded
        assert not any("ferry" in t for t in texts(warm[0]))
        child = _child(postgres_dsn, pg_schema, 0, 6)
        out, err = child.communicate(timeout=300)
        assert child.returncode == 0, err
        assert json.loads(out)["turns"] == len(CONVERSATIONS["ana"]) + 6 - 1 + 1  # +6 ferries, -cello, +update
        assert "ferry to island 3" in engine.search("ferry to island 3", "ana", k=1).items[0].text
        lena = engine.search("Where is Lena moving?", "ana", k=5).items
        assert "Nairobi" in lena[0].text and not any("Lena is moving to Porto" in i.text for i in lena)
        assert not any("cello" in t for t in texts(engine.search("cello practice evening", "ana", k=20)))
        # both processes write at once: nothing lost, one sequence
        child = _child(postgres_dsn, pg_schema, 100, 10)
        for i in range(10):
            engine.add_turns([Turn(role="user", content=f"parent note {i}: the bus to town {i} leaves at {i}:05",
                                   external_id=f"parent-{i}", session_id="buses")], "ana")
        out, err = child.communicate(timeout=300)
        assert child.returncode == 0, err
        engine.flush()
        stored = engine.get_turns("ana")
        ids = [t.external_id for t in stored]
        assert len(ids) == len(CONVERSATIONS["ana"]) + 6 + 10 + 10  # -cello, +the update's new version
        assert len(set(ids)) == len(ids) - 1  # the update's two versions share ana:2
        assert {f"child-{i}" for i in range(100, 110)} | {f"parent-{i}" for i in range(10)} <= set(ids)
        final = [*questions, "bus to town 7", "ferry to island 104", "parent note child note"]
        answers = [engine.search(q, "ana", k=8) for q in final]
    with target.open(read_only=True) as cold:
        for q, a in zip(final, answers, strict=True):
            assert_same_ranking(a, cold.search(q, "ana", k=8), what=q)


def test_many_threads_search_one_engine_at_once(store_target: StoreTarget) -> None:
    """A web server's worker threads share one engine: 40 threads (more than storage.postgres_pool_size) search
    at once while a writer adds turns; every search answers, none degraded, each as the engine answers alone."""
    with store_target.open(config={"globals": {"graph_enabled": True, "evidence_enabled": True}}) as engine:
        for user in CONVERSATIONS:
            engine.add_turns(make_turns(user, T0), user, wait=True)
        expected = {(u, q): engine.search(q, u, k=5) for u, q in QUESTIONS}
        start = threading.Barrier(41)
        failures: list[str] = []

        def search(i: int) -> None:
            user, q = QUESTIONS[i % len(QUESTIONS)]
            start.wait(timeout=60)
            try:
                for _ in range(3):
                    got = engine.search(q, user, k=5)
                    if got.channel_errors:
                        failures.append(f"{q}: degraded {got.channel_errors}")
                    elif [x.text for x in got.items] != [x.text for x in expected[user, q].items]:
                        failures.append(f"{q}: {[x.text for x in got.items]}")
            except Exception as exc:  # noqa: BLE001  collected and reported below
                failures.append(f"{q}: {type(exc).__name__}: {exc}")

        def write() -> None:
            start.wait(timeout=60)
            for i in range(5):
                engine.add_turns([Turn(role="user", content=f"Dana's note {i} about the peanut-free garden party")],
                                 "dana")

        threads = [threading.Thread(target=search, args=(i,)) for i in range(40)] + [threading.Thread(target=write)]
        for th in threads:
            th.start()
        for th in threads:
            th.join(timeout=300)
        assert not any(th.is_alive() for th in threads)
        assert failures == []
        assert len(engine.get_turns("dana")) == 5


def test_threads_that_come_and_go_do_not_use_up_the_connections(store_target: StoreTarget) -> None:
    """A thread per request: 60 short-lived threads, one after another, each search once and end. Each thread's
    read connection goes back when it ends (on PostgreSQL the pool holds 16), so the last one answers as the
    first did."""
    with store_target.open() as engine:
        engine.add_turns(make_turns("ana", T0), "ana", wait=True)
        expected = [i.text for i in engine.search("What dog did Ana adopt?", "ana", k=3).items]
        answers: list[Any] = []

        def request() -> None:
            try:
                got = engine.search("What dog did Ana adopt?", "ana", k=3)
                answers.append("degraded" if got.channel_errors else [i.text for i in got.items])
            except Exception as exc:  # noqa: BLE001  collected and compared below
                answers.append(f"{type(exc).__name__}: {exc}")

        for _ in range(60):
            th = threading.Thread(target=request)
            th.start()
            th.join(timeout=120)
        assert answers == [expected] * 60


OPENER = r"""
import sys
from memory_ext import MemoryEngine, Turn
config = {"storage": {"backend": "postgres", "postgres_schema": sys.argv[2]}}
with MemoryEngine.open(sys.argv[1], config=config, embedder="hashing") as engine:
    engine.add_turns([Turn(role="user", content=f"process {sys.argv[3]} booked the train to Lyon",
                           external_id=f"p{sys.argv[3]}")], "ana", wait=True)
print("ok", flush=True)
"""


def test_four_processes_create_one_store_at_once(postgres_dsn: str, pg_schema: str) -> None:
    """The first opens of a new schema race (schema, tables, migrations, store id): one store comes out."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    procs = [subprocess.Popen([sys.executable, "-c", OPENER, postgres_dsn, pg_schema, str(i)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=env) for i in range(4)]
    outs = [p.communicate(timeout=300) for p in procs]
    assert [(p.returncode, out.strip()) for p, (out, _) in zip(procs, outs, strict=True)] == [(0, "ok")] * 4, outs
    target = StoreTarget("postgres", postgres_dsn, {"storage": {"backend": "postgres", "postgres_schema": pg_schema}})
    with target.open(read_only=True) as engine:
        assert sorted(t.external_id or "" for t in engine.get_turns("ana")) == ["p0", "p1", "p2", "p3"]
        assert engine.stats().vectors == engine.stats().records
        assert len(engine.search("train to Lyon", "ana", k=10).items) == 4


def test_two_engines_compacting_at_once_merge_each_week_once(two_writers: tuple[MemoryEngine, MemoryEngine]) -> None:
    """A cron on each of two hosts runs ``maybe_compact`` at the same moment: each week is merged once."""
    a, b = two_writers
    monday = datetime(2026, 3, 2, 9, tzinfo=UTC)
    for week in range(3):
        for day in range(3):
            ts = monday + timedelta(weeks=week, days=day)
            a.add_turns([Turn(role="user", content=f"Week {week} day {day}: the plumber fixed sink number {day}.",
                              timestamp=ts, session_id=f"w{week}"),
                         Turn(role="assistant", content=f"Noted the repair of sink {day} in week {week}.",
                              timestamp=ts + timedelta(minutes=1), session_id=f"w{week}")], "ana")
    now = monday + timedelta(weeks=3, days=1)
    reports: list[Any] = []
    go = threading.Barrier(2)

    def compact(engine: MemoryEngine) -> None:
        go.wait(timeout=60)
        reports.append(engine.maybe_compact("ana", now=now))

    threads = [threading.Thread(target=compact, args=(e,)) for e in (a, b)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=300)
    assert len(reports) == 2
    weeklies = [h for h in b.hooks("ana", include_merged=True) if h.period == "weekly"]
    assert sorted(h.period_key for h in weeklies) == ["2026-W10", "2026-W11", "2026-W12"]
    assert sum(1 for r in reports for s in r.steps if s.get("changed") and "W" in s["period"]) == 3
    assert {h.id for h in a.hooks("ana")} == {h.id for h in weeklies}
    assert all(h.status == "merged" for h in a.hooks("ana", include_merged=True) if h.period == "daily")


def test_an_eviction_by_one_engine_reaches_the_others_ranking(two_writers: tuple[MemoryEngine, MemoryEngine],
                                                               postgres_dsn: str, pg_schema: str) -> None:
    """The monthly eviction moves records to the cold tier (a ranking prior): an engine with warm caches ranks
    with the new flags, like the engine that evicted and like one opened afterwards."""
    from tests.postgres.test_conformance_lifecycle import PLAIN, build_february

    a, b = two_writers
    build_february(a)
    a.compact("ana", "weekly", now=datetime(2026, 3, 10, tzinfo=UTC))
    before = [b.search(p, "ana", k=8) for p in PLAIN]  # b's caches: every record warm
    step = a.compact("ana", "monthly", key="2026-02", now=datetime(2026, 3, 10, tzinfo=UTC)).steps[0]
    assert step["cold_turns"] > 0
    after_a, after_b = [a.search(p, "ana", k=8) for p in PLAIN], [b.search(p, "ana", k=8) for p in PLAIN]
    target = StoreTarget("postgres", postgres_dsn, {"storage": {"backend": "postgres", "postgres_schema": pg_schema}})
    with target.open(read_only=True) as c:
        after_c = [c.search(p, "ana", k=8) for p in PLAIN]
    raw = [[(i.text, round(i.raw_score or 0.0, 6)) for i in r.items] for r in (*after_a, *after_b, *after_c)]
    n = len(PLAIN)
    assert raw[:n] == raw[n:2 * n] == raw[2 * n:]
    assert raw[:n] != [[(i.text, round(i.raw_score or 0.0, 6)) for i in r.items] for r in before]


def test_two_engines_racing_on_the_same_memories(two_writers: tuple[MemoryEngine, MemoryEngine]) -> None:
    """The same message delivered to two hosts at once is stored once (external_id); two updates of one memory
    at once give two versions after the first, the later one current."""
    a, b = two_writers
    go = threading.Barrier(2)
    results: dict[str, Any] = {}

    def ingest(name: str, engine: MemoryEngine) -> None:
        go.wait(timeout=60)
        results[name] = engine.add_turns(make_turns("ana", T0), "ana")

    threads = [threading.Thread(target=ingest, args=(n, e)) for n, e in (("a", a), ("b", b))]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=300)
    assert results["a"].turn_ids == results["b"].turn_ids
    assert sorted([len(results["a"].new_ids), len(results["b"].new_ids)]) == [0, len(CONVERSATIONS["ana"])]
    assert len(b.get_turns("ana")) == len(CONVERSATIONS["ana"])

    def update(name: str, engine: MemoryEngine, city: str) -> None:
        go.wait(timeout=60)
        results[name] = engine.update("ana", "ana:2", content=f"My sister Lena is moving to {city} in June.")

    threads = [threading.Thread(target=update, args=("ua", a, "Nairobi")),
               threading.Thread(target=update, args=("ub", b, "Quito"))]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=300)
    history = a.history("ana", "ana:2")
    assert [v.operation for v in history] == ["add", "update", "update"]
    assert [v.current for v in history] == [False, False, True]
    last = history[-1].content or ""
    top = b.search("Where is Lena moving?", "ana", k=5).items
    assert top[0].text == last and not any(("Nairobi" in i.text or "Quito" in i.text) and i.text != last
                                           for i in top)


def _terminate(dsn: str, pids: list[int] | None = None) -> int:
    """End server sessions, as a server restart or an administrator does (every other client's, or ``pids``)."""
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        if pids is None:
            row = conn.execute("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE pid <>"
                               " pg_backend_pid() AND backend_type = 'client backend'").fetchone()
        else:
            row = conn.execute("SELECT count(pg_terminate_backend(pid)) FROM unnest(%s::int[]) AS pid",
                               (pids,)).fetchone()
    return int(row[0]) if row else 0


def test_the_engine_carries_on_after_its_connections_are_lost(postgres_dsn: str, pg_schema: str,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """The server restarts (every session ends) between calls: the next search and write simply work. A write
    whose connection is lost mid-transaction fails, leaves nothing, and the next one works."""
    target = StoreTarget("postgres", postgres_dsn, {"storage": {"backend": "postgres", "postgres_schema": pg_schema}})
    with target.open() as engine:
        engine.add_turns(make_turns("ana", T0), "ana", wait=True)
        expected = [i.text for i in engine.search("What dog did Ana adopt?", "ana", k=3).items]
        for round_ in range(2):
            assert _terminate(postgres_dsn) >= 2  # the writer and at least one reader
            got = engine.search("What dog did Ana adopt?", "ana", k=3)
            assert not got.channel_errors and [i.text for i in got.items] == expected
            thing = ("the kettle whistles", "the radiator hums")[round_]
            engine.add_turns([Turn(role="user", content=f"After the restart {thing} again.")], "ana", wait=True)
            assert thing in engine.search(thing, "ana", k=1).items[0].text
        # lost in the middle of a write
        before = store_rows(engine)
        graph = next(i for i in engine._indexes if type(i).__name__ == "EntityGraph")
        real = graph.index

        def dies(conn: Any, ns_id: int, batch: Any) -> None:
            _terminate(postgres_dsn, [engine._store._raw.info.backend_pid])
            real(conn, ns_id, batch)

        monkeypatch.setattr(graph, "index", dies)
        with pytest.raises(StoreError):
            engine.add_turns([Turn(role="user", content="The ferry to Tróia leaves at noon.")], "ana")
        monkeypatch.undo()
        assert store_rows(engine) == before
        engine.add_turns([Turn(role="user", content="The ferry to Tróia leaves at noon.")], "ana", wait=True)
        assert "Tróia" in engine.search("ferry Tróia", "ana", k=1).items[0].text
        assert engine.forget("ana", record_ids=[engine.search("kettle", "ana", k=1).items[0].id]).turns == 1


def test_a_stuck_writer_elsewhere_cannot_hang_this_engine(postgres_dsn: str, pg_schema: str) -> None:
    """Another host's engine holds the write lock and hangs: searches go on, and a write gives up after
    ``storage.postgres_lock_timeout_s`` with a typed error and writes nothing; once the lock is free it works."""
    import psycopg

    from memory_ext.errors import StoreError

    config = {"storage": {"backend": "postgres", "postgres_schema": pg_schema, "postgres_lock_timeout_s": 0.5}}
    target = StoreTarget("postgres", postgres_dsn, config)
    with target.open() as engine:
        engine.add_turns(make_turns("ana", T0), "ana", wait=True)
        before = store_rows(engine)
        with psycopg.connect(postgres_dsn, autocommit=True) as stuck:
            stuck.execute("SELECT pg_advisory_lock(%s)", (engine._store.lock_key,))
            assert "beagle" in engine.search("What dog did Ana adopt?", "ana", k=1).items[0].text
            with pytest.raises(StoreError, match="postgres_lock_timeout_s"):
                engine.add_turns([Turn(role="user", content="The plumber comes on Monday.")], "ana")
            with pytest.raises(StoreError):
                engine.forget("ana")
            assert store_rows(engine) == before
        engine.add_turns([Turn(role="user", content="The plumber comes on Monday.")], "ana", wait=True)
        assert "plumber" in engine.search("plumber", "ana", k=1).items[0].text
