"""Conformance, writes: ``add_turns`` results and idempotent ingest, reading turns back, stats and namespaces,
``update`` / ``history`` / ``delete`` — the same test code on SQLite and on PostgreSQL (``store_target``)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest

from memory_ext import MemoryEngine, Namespace, Turn
from memory_ext.errors import InvalidQueryError
from tests.conftest import CONVERSATIONS, StoreTarget, make_turns
from tests.postgres.conformance_kit import store_rows, table_counts, texts

pytestmark = pytest.mark.postgres

T0 = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)


@pytest.fixture
def engine(store_target: StoreTarget):
    with store_target.open() as eng:
        yield eng


def test_add_turns_returns_one_id_per_turn_and_the_records_written(engine: MemoryEngine) -> None:
    result = engine.add_turns(make_turns("ana"), "ana")
    n = len(CONVERSATIONS["ana"])
    assert len(result.turn_ids) == n == len(set(result.turn_ids)) and result.existing_ids == ()
    assert result.new_ids == result.turn_ids and len(result.record_ids) >= n
    stored = engine.get_turns("ana")
    assert [t.id for t in stored] == list(result.turn_ids)
    assert [(t.role, t.speaker, t.content) for t in stored] == [tuple(x) for x in CONVERSATIONS["ana"]]
    assert [t.timestamp for t in stored] == [T0 + timedelta(minutes=i) for i in range(n)]
    assert {t.session_id for t in stored} == {"ana-s1"} and stored[3].external_id == "ana:3"
    engine.flush()
    hit = engine.search("beagle puppy Toby", "ana", k=1).items[0]
    assert hit.turn_ids[0] == result.turn_ids[0] and hit.id in result.record_ids and hit.external_ids == ("ana:0",)


def test_turns_keep_every_field(engine: MemoryEngine) -> None:
    call = {"name": "search_flights", "arguments": {"from": "LIS", "to": "HND"}, "result": {"n": 2}}
    turn = Turn(role="assistant", speaker="TravelBot", content="NH204 leaves at 09:05 — 出发时间 09:05.",
                timestamp=T0, session_id="trip", external_id="msg-1", tool_calls=(call,),
                attachments=({"type": "image", "name": "bp.png"},),
                metadata={"thinking": "morning flights", "score": 0.5, "tags": ["a", "b"], "nested": {"k": None}})
    engine.add_turns([turn], "ana")
    (back,) = engine.get_turns("ana")
    assert back.model_dump(exclude={"id"}) == turn.model_dump(exclude={"id"})


def test_a_repeated_external_id_is_not_stored_again(engine: MemoryEngine) -> None:
    first = engine.add_turns(make_turns("ana"), "ana")
    counts = table_counts(engine)
    again = engine.add_turns(make_turns("ana"), "ana")
    assert again.turn_ids == first.turn_ids and again.existing_ids == first.turn_ids
    assert again.record_ids == () and again.new_ids == ()
    assert table_counts(engine)["turns"] == counts["turns"] and table_counts(engine)["records"] == counts["records"]
    top = engine.search("What dog did Ana adopt?", "ana", k=2).items
    assert len({item.turn_ids[0] for item in top}) == 2


def test_a_batch_mixing_new_and_known_turns_stores_only_the_new_ones(engine: MemoryEngine) -> None:
    turns = make_turns("ana")
    engine.add_turns(turns[:3], "ana")
    result = engine.add_turns(turns, "ana")
    assert len(result.turn_ids) == len(turns) and len(result.existing_ids) == 3
    assert result.new_ids == result.turn_ids[3:]
    assert [t.content for t in engine.get_turns("ana")] == [c for _, _, c in CONVERSATIONS["ana"]]


def test_the_same_external_id_in_another_session_or_namespace_is_another_turn(engine: MemoryEngine) -> None:
    engine.add_turns([Turn(role="user", content="note one", external_id="k", session_id="a")], "ana")
    other = engine.add_turns([Turn(role="user", content="note two", external_id="k", session_id="b")], "ana")
    ben = engine.add_turns([Turn(role="user", content="note one", external_id="k", session_id="a")], "ben")
    agent = engine.add_turns([Turn(role="user", content="note one", external_id="k", session_id="a")],
                             Namespace("ana", "helper"))
    assert other.existing_ids == () and ben.existing_ids == () and agent.existing_ids == ()
    assert [t.content for t in engine.get_turns("ana")] == ["note one", "note two"]


def test_identical_consecutive_turns_are_stored_once(engine: MemoryEngine) -> None:
    turn = Turn(role="user", speaker="Ana", content="I adopted a beagle called Toby", session_id="s1")
    first = engine.add_turns([turn], "ana")
    again = engine.add_turns([turn, turn], "ana")
    assert again.turn_ids == first.turn_ids * 2 and again.existing_ids == first.turn_ids
    other = engine.add_turns([turn.model_copy(update={"speaker": "Ben"}), turn], "ana")
    assert other.existing_ids == ()
    assert len(engine.get_turns("ana")) == 3


def test_consecutive_dedup_can_be_switched_off(store_target: StoreTarget) -> None:
    turn = Turn(role="user", content="ok", session_id="s1")
    with store_target.open(config={"ingest": {"dedup_consecutive": False}}) as eng:
        eng.add_turns([turn, turn], "ana")
        assert len(eng.get_turns("ana")) == 2


def test_get_turns_pages_and_sessions(engine: MemoryEngine) -> None:
    engine.add_turns(make_turns("ana"), "ana")
    engine.add_turns([Turn(role="user", content=f"later note {i}", session_id="s2") for i in range(3)], "ana")
    everything = [t.content for t in engine.get_turns("ana")]
    assert len(everything) == len(CONVERSATIONS["ana"]) + 3
    assert [t.content for t in engine.get_turns("ana", limit=3)] == everything[:3]
    assert [t.content for t in engine.get_turns("ana", limit=4, offset=5)] == everything[5:9]
    assert [t.content for t in engine.get_turns("ana", offset=8)] == everything[8:]
    assert engine.get_turns("ana", offset=100) == []
    assert [t.content for t in engine.get_turns(Namespace("ana", session_id="s2"))] == [f"later note {i}"
                                                                                         for i in range(3)]
    assert [t.content for t in engine.get_turns(Namespace("ana", session_id="s2"), limit=1, offset=1)] == \
        ["later note 1"]
    assert engine.get_turns("nobody") == []


def test_stats_and_namespaces(engine: MemoryEngine) -> None:
    for user in CONVERSATIONS:
        engine.add_turns(make_turns(user), user)
    engine.add_turns(make_turns("ben"), Namespace("ben", "coach"))
    engine.flush()
    stats = engine.stats()
    total = sum(len(c) for c in CONVERSATIONS.values()) + len(CONVERSATIONS["ben"])
    assert stats.namespaces == 4 and stats.turns == total and stats.records >= total
    assert stats.vectors == stats.records  # every record has its vector once flushed
    assert stats.embedder_id and stats.embedder_id.startswith("hashing") and stats.disk_bytes > 0
    assert sorted((n.user_id, n.agent_id or "") for n in engine.namespaces()) == [
        ("ana", ""), ("ben", ""), ("ben", "coach"), ("chen", "")]
    assert engine.pending() == 0


def test_async_twins_write_and_read(engine: MemoryEngine) -> None:
    async def run() -> list[str]:
        await engine.aadd_turns(make_turns("chen"), "chen", wait=True)
        found = await engine.asearch("peanut allergy", "chen", k=1)
        turns = await engine.aget_turns("chen", limit=1)
        return [found.items[0].text, turns[0].content]

    assert asyncio.run(run()) == [CONVERSATIONS["chen"][0][2]] * 2


# -- update / history / delete ---------------------------------------------------------------------------------
def test_update_writes_a_new_version_and_keeps_the_old_one_for_as_of(engine: MemoryEngine) -> None:
    engine.add_turns(make_turns("ana", T0), "ana")
    updated = engine.update("ana", "ana:2", content="My sister Lena is moving to Nairobi in June.",
                            timestamp=T0 + timedelta(days=30))
    now = engine.search("Where is Lena moving?", "ana", k=5).items
    assert "Nairobi" in now[0].text and not any("Lena is moving to Porto" in i.text for i in now)
    assert now[0].turn_ids[0] == updated.turn_ids[0]
    then = engine.search("Where is Lena moving?", "ana", k=5, as_of=T0 + timedelta(days=1)).items
    assert "Lena is moving to Porto" in then[0].text and not any("Nairobi" in i.text for i in then)
    assert sum("Lena" in t.content for t in engine.get_turns("ana")) == 2
    history = engine.history("ana", "ana:2")
    assert [(v.operation, v.current) for v in history] == [("add", False), ("update", True)]
    assert history[0].valid_to == T0 + timedelta(days=30) and "Porto" in (history[0].content or "")
    assert history[1].turn_id == updated.turn_ids[0] and engine.get_turns("ana")[-1].external_id == "ana:2"


def test_update_by_search_result_id_or_turn_id_and_of_metadata(engine: MemoryEngine) -> None:
    added = engine.add_turns([Turn(role="user", content="I drink my coffee black", metadata={"topic": "food"})],
                             "ana")
    hit = engine.search("how do I take my coffee?", "ana", k=1).items[0]
    second = engine.update("ana", hit.id, content="I drink my coffee with oat milk now")
    third = engine.update("ana", second.turn_ids[0], metadata={"topic": "drinks"})
    top = engine.search("how do I take my coffee?", "ana", k=3).items
    assert [(i.text, i.metadata) for i in top] == [("I drink my coffee with oat milk now", {"topic": "drinks"})]
    assert texts(engine.search("coffee", "ana", k=3, filters={"metadata": {"topic": "drinks"}})) == [top[0].text]
    assert engine.search("coffee", "ana", k=3, filters={"metadata": {"topic": "food"}}).items == ()
    versions = engine.history("ana", added.turn_ids[0])
    assert [v.operation for v in versions] == ["add", "update", "update"]
    assert versions[-1].turn_id == third.turn_ids[0] and versions[0].memory_id == added.turn_ids[0]
    assert versions[-1].metadata == {"topic": "drinks"}


def test_unknown_or_empty_updates_are_typed_errors_and_write_nothing(engine: MemoryEngine) -> None:
    engine.add_turns(make_turns("ana"), "ana", wait=True)
    before = store_rows(engine)
    for call in (lambda: engine.update("ana", "no-such-memory", content="x"),
                 lambda: engine.update("ana", "ana:0"),
                 lambda: engine.update("nobody", "ana:0", content="x"),
                 lambda: engine.update("ben", "ana:0", content="x"),
                 lambda: engine.update("ana", "ana:0", metadata=["not", "a", "dict"]),  # type: ignore[arg-type]
                 lambda: engine.history("ana", "no-such-memory"),
                 lambda: engine.delete("ana", ["no-such-memory"]),
                 lambda: engine.delete("ana", ["ana:0", "no-such-memory"])):
        with pytest.raises(InvalidQueryError):
            call()
    assert store_rows(engine) == before


def test_delete_removes_exactly_those_memories(engine: MemoryEngine) -> None:
    for user in CONVERSATIONS:
        engine.add_turns(make_turns(user), user)
    engine.update("ana", "ana:0", content="I adopted a beagle puppy called Biscuit last weekend.")
    engine.flush()
    before = {t.external_id: t.id for t in engine.get_turns("ana")}
    receipt = engine.delete("ana", ["ana:0", "ana:4"])
    assert receipt.turns == 3  # both versions of the beagle, and the cello
    after = {t.external_id: t.id for t in engine.get_turns("ana")}
    assert after == {k: v for k, v in before.items() if k not in ("ana:0", "ana:4")}
    assert not any("beagle" in i.text or "cello" in i.text or "Biscuit" in i.text
                   for i in engine.search("beagle cello Biscuit", "ana", k=20).items)
    assert len(engine.get_turns("ben")) == len(CONVERSATIONS["ben"])
    assert [(v.operation, v.content) for v in engine.history("ana", "ana:0")] == \
        [("add", None), ("update", None), ("delete", None)]
    rows = store_rows(engine)
    assert not any("Biscuit" in repr(r) or "cello" in repr(r) for table in rows.values() for r in table)
    with pytest.raises(InvalidQueryError):
        engine.delete("ana", ["ana:0"])


def test_delete_leaves_the_rest_of_the_namespace_alone(engine: MemoryEngine) -> None:
    engine.add_turns([Turn(role="user", content=f"note {i} about city {i}", external_id=f"n{i}",
                           timestamp=T0 + timedelta(hours=i)) for i in range(40)], "ana", wait=True)
    records = {r[0] for r in engine._store.reader().execute("SELECT id FROM records")}
    engine.delete("ana", ["n20"])
    kept = {r[0] for r in engine._store.reader().execute("SELECT id FROM records")}
    assert kept <= records and 1 <= len(records - kept) <= 6


def test_forgetting_the_namespace_forgets_its_history(engine: MemoryEngine) -> None:
    engine.add_turns(make_turns("ana"), "ana")
    engine.update("ana", "ana:2", content="Lena moved to Oslo")
    engine.forget("ana")
    engine.add_turns(make_turns("ana"), "ana")
    assert [v.operation for v in engine.history("ana", "ana:2")] == ["add"]


def test_async_update_history_delete(engine: MemoryEngine) -> None:
    async def run() -> list[str]:
        await engine.aadd_turns([Turn(role="user", content="My locker code is 4471", external_id="locker")],
                                Namespace("ana"))
        await engine.aupdate("ana", "locker", content="My locker code is 9902")
        ops = [v.operation for v in await engine.ahistory("ana", "locker")]
        await engine.adelete("ana", ["locker"])
        return ops + [v.operation for v in await engine.ahistory("ana", "locker")]

    assert asyncio.run(run()) == ["add", "update", "add", "update", "delete"]


def test_a_superseded_statement_shows_in_its_history(engine: MemoryEngine) -> None:
    added = engine.add_turns([Turn(role="user", speaker="Ana", content="I live in Paris.", timestamp=T0),
                              Turn(role="user", speaker="Ana", content="I moved to Berlin last week.",
                                   timestamp=T0 + timedelta(days=31))], "ana")
    history = engine.history("ana", added.turn_ids[0])
    assert [(v.operation, v.timestamp) for v in history] == [("add", T0), ("supersede", T0 + timedelta(days=31))]
    assert history[0].valid_to == T0 + timedelta(days=31) and history[0].current


def test_the_same_writes_store_the_same_records_on_both(both_targets: tuple[StoreTarget, StoreTarget]) -> None:
    """Every derived record (windows, facts, preferences, events, layers...) comes out of the same turns the same
    way: kinds, texts, counts and AddResults agree between the backends."""
    config = {"globals": {"layers_index_enabled": True, "evidence_enabled": True, "graph_enabled": True}}
    out = []
    for target in both_targets:
        with target.open(config=config) as engine:
            results = [engine.add_turns(make_turns(user), user) for user in CONVERSATIONS]
            results.append(engine.add_turns(make_turns("ana"), "ana"))  # idempotent: nothing new
            engine.add_turns([Turn(role="user", speaker="Ana", content="I moved to Berlin last week.",
                                   timestamp=T0 + timedelta(days=40), session_id="ana-s2")], "ana")
            engine.flush()
            records = sorted(engine._store.reader().execute(
                "SELECT kind, text, session_id, speaker, valid_to IS NULL FROM records").fetchall(), key=repr)
            stats = engine.stats()
            out.append(([(len(r.turn_ids), len(r.record_ids), len(r.existing_ids)) for r in results],
                        [tuple(bool(v) if i == 4 else v for i, v in enumerate(r)) for r in records],
                        (stats.namespaces, stats.turns, stats.records, stats.vectors)))
    assert out[0][0] == out[1][0]
    assert out[0][2] == out[1][2]
    assert out[0][1] == out[1][1]
    assert {r[0] for r in out[0][1]} > {"turn", "window"}  # derived kinds too
