"""Conformance, forgetting: by record ids, by session, a whole namespace, by memory file — nothing of it is found
afterwards through any read API or left in any table of the store, the other namespaces search exactly as
before, and the receipt says what went; the same test code on SQLite and on PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

from memory_ext import MemoryEngine, Namespace, Turn
from memory_ext.errors import HookNotFoundError, InvalidQueryError
from tests.conftest import CONVERSATIONS, StoreTarget, make_turns
from tests.postgres.conformance_kit import assert_same_ranking, namespace_rows, store_rows, table_counts, texts

pytestmark = pytest.mark.postgres

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
OTHER_QUESTIONS = [("ben", "How far does Ben run each week?"), ("ben", "cat coffee laptop"),
                   ("chen", "What is Chen allergic to?"), ("chen", "flat in Lisbon")]


@pytest.fixture
def engine(store_target: StoreTarget) -> Iterator[MemoryEngine]:
    with store_target.open() as eng:
        for user in CONVERSATIONS:
            eng.add_turns(make_turns(user, T0), user)
        eng.add_turns([Turn(role="user", speaker="Ana", content="The quokkalantern festival is on Saturday.",
                            session_id="ana-s2", timestamp=T0 + timedelta(days=1), external_id="ana:s2:0"),
                       Turn(role="assistant", speaker="Assistant", content="I will remind you about the quokkalantern.",
                            session_id="ana-s2", timestamp=T0 + timedelta(days=1, minutes=1))], "ana")
        eng.add_turns(make_turns("ana", T0), Namespace("ana", "travel-agent"))  # same user, another agent
        eng.flush()
        yield eng


def _others(engine: MemoryEngine) -> list:
    return [engine.search(q, user, k=6) for user, q in OTHER_QUESTIONS] + \
        [engine.search("beagle Toby Lena", Namespace("ana", "travel-agent"), k=6)]


def _nowhere(engine: MemoryEngine, needles: list[str]) -> list[str]:
    """The tables holding any of ``needles`` (case-insensitive) in any column."""
    return sorted({table for table, rows in store_rows(engine).items() for row in rows
                   if any(n.lower() in repr(row).lower() for n in needles)})


def test_forget_by_record_id_removes_that_turn_everywhere(engine: MemoryEngine) -> None:
    before = _others(engine)
    hit = engine.search("cello practice", "ana", k=1).items[0]
    assert "cello" in hit.text
    counts = table_counts(engine)
    receipt = engine.forget("ana", record_ids=[hit.id])
    assert receipt.namespace == Namespace("ana") and receipt.turns == 1 and receipt.turn_ids == hit.turn_ids
    assert receipt.records >= 1 and hit.id in receipt.record_ids and len(receipt.record_ids) == receipt.records
    assert receipt.files_updated and not receipt.files_deleted and receipt.purge_complete
    assert receipt.stores[0] == "truth" and receipt.stores[-1] == "files" and "keyword" in receipt.stores
    assert table_counts(engine)["turns"] == counts["turns"] - 1
    assert not any("cello" in t for t in texts(engine.search("cello practice evening", "ana", k=20)))
    assert not any("cello" in t.content for t in engine.get_turns("ana"))
    assert all("cello" not in f.content for h in engine.hooks("ana") for f in engine.retrieve(h.id, "ana").turns)
    assert "cello" not in engine.render_prompt("ana", budget_tokens=4000)
    assert [t.content for t in engine.get_turns(Namespace("ana", "travel-agent"))][4] == CONVERSATIONS["ana"][4][2]
    for a, b in zip(before, _others(engine), strict=True):
        assert_same_ranking(a, b)
    assert _nowhere(engine, [hit.turn_ids[0]]) == []
    with pytest.raises(InvalidQueryError):
        engine.forget("ana", record_ids=[hit.id])  # gone: an unknown id now


def test_forget_a_session_removes_only_that_session(engine: MemoryEngine) -> None:
    before = _others(engine)
    receipt = engine.forget(Namespace("ana", session_id="ana-s2"))
    assert receipt.turns == 2 and receipt.namespace.session_id == "ana-s2" and receipt.files_deleted
    assert not any("quokkalantern" in t for t in texts(engine.search("quokkalantern festival", "ana", k=20)))
    assert [t.content for t in engine.get_turns("ana")] == [c for _, _, c in CONVERSATIONS["ana"]]
    assert engine.get_turns(Namespace("ana", session_id="ana-s2")) == []
    assert "beagle" in engine.search("What dog did Ana adopt?", "ana", k=1).items[0].text
    assert _nowhere(engine, ["quokkalantern"]) == []
    for a, b in zip(before, _others(engine), strict=True):
        assert_same_ranking(a, b)


def test_forget_a_whole_namespace(engine: MemoryEngine) -> None:
    before = _others(engine)
    stored = engine.get_turns("ana")
    hooks = [h.id for h in engine.hooks("ana", include_merged=True)]
    ns_id = engine._store.find_namespace(("ana", ""))
    assert ns_id is not None and {"turns", "records"} <= set(namespace_rows(engine, ns_id))
    receipt = engine.forget("ana")
    assert receipt.turns == len(stored) == len(CONVERSATIONS["ana"]) + 2
    assert sorted(receipt.turn_ids) == sorted(t.id for t in stored)
    assert sorted(receipt.files_deleted) == sorted(hooks) and receipt.files_updated == ()
    assert receipt.purge_complete and receipt.pending_purge == ()
    assert engine.get_turns("ana") == [] and engine.hooks("ana") == []
    assert not any(w in engine.render_prompt("ana", budget_tokens=4000) for w in ("quokka", "beagle", "cello"))
    assert engine.search("beagle Toby cello Lena quokkalantern", "ana", k=20).items == ()
    for hook in hooks:
        with pytest.raises(HookNotFoundError):
            engine.retrieve(hook, "ana")
    with pytest.raises(InvalidQueryError):
        engine.history("ana", "ana:0")
    assert len(engine.get_turns(Namespace("ana", "travel-agent"))) == len(CONVERSATIONS["ana"])
    for a, b in zip(before, _others(engine), strict=True):
        assert_same_ranking(a, b)
    assert _nowhere(engine, ["quokkalantern", *(t.id for t in stored)]) == []
    assert namespace_rows(engine, ns_id) == {}  # no row of the namespace in any table
    # the namespace can be written again and is searchable like a new one
    engine.add_turns(make_turns("ana", T0), "ana", wait=True)
    assert "beagle" in engine.search("What dog did Ana adopt?", "ana", k=1).items[0].text


def test_forget_by_memory_file(engine: MemoryEngine) -> None:
    day2 = next(h for h in engine.hooks("ana") if h.period_key == (T0 + timedelta(days=1)).date().isoformat())
    receipt = engine.forget("ana", hook_ids=[day2.id])
    assert receipt.files_deleted == (day2.id,) and receipt.turns == 2
    assert not any("quokkalantern" in t.content for t in engine.get_turns("ana"))
    assert _nowhere(engine, ["quokkalantern"]) == []
    assert len(engine.get_turns("ana")) == len(CONVERSATIONS["ana"])


def test_receipts_agree_between_the_backends(both_targets: tuple[StoreTarget, StoreTarget]) -> None:
    receipts = []
    for target in both_targets:
        with target.open() as eng:
            for user in CONVERSATIONS:
                eng.add_turns(make_turns(user, T0), user, wait=True)
            one = eng.forget("ben", record_ids=[eng.search("marathon in September", "ben", k=1).items[0].id])
            session = eng.forget(Namespace("chen", session_id="chen-s1"))
            whole = eng.forget("ana")
            nobody = eng.forget("nobody")
            receipts.append([(r.turns, r.records, len(r.files_deleted), len(r.files_updated), r.purge_complete,
                              tuple(s for s in r.stores if not s.startswith("vector")))
                             for r in (one, session, whole, nobody)])
            assert (nobody.turns, nobody.records) == (0, 0)
    assert receipts[0] == receipts[1]


def test_forget_errors_remove_nothing(engine: MemoryEngine) -> None:
    ana_record = engine.search("beagle", "ana", k=1).items[0].id
    ana_hook = engine.hooks("ana")[0].id  # (reading hooks may refresh an open file's hook: before the snapshot)
    before = store_rows(engine)
    for call in (lambda: engine.forget("ana", record_ids=["no-such-record"]),
                 lambda: engine.forget("ana", record_ids=[]),
                 lambda: engine.forget("ben", record_ids=[ana_record]),
                 lambda: engine.forget("ana", hook_ids=["zzzzzzzz"]),
                 lambda: engine.forget("ben", hook_ids=[ana_hook]),
                 lambda: engine.forget("nobody", record_ids=["x"])):
        with pytest.raises((InvalidQueryError, HookNotFoundError)):
            call()
    assert store_rows(engine) == before
