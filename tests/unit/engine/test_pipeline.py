"""The read path: windows, the planner, z-score turn ranking and its boosts, on small realistic chats."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest

from memory_ext import ActionState, InvalidQueryError, MemoryEngine, Turn
from memory_ext.ingest.derive import IngestTurn, derive_windows
from memory_ext.plan import STRATEGIES, Strategy, classify_question, plan_search
from memory_ext.rank.zscore import rank_turns, standardize
from memory_ext.recall.base import Hits
from memory_ext.store.catalog import Catalog

T0 = datetime(2023, 5, 8, 13, 0, tzinfo=UTC)


def _chat(tmp: Path, config: dict | None = None) -> MemoryEngine:
    eng = MemoryEngine.open(tmp / "s", embedder="hashing", config=config)
    day1 = [("Caroline", "I went to a support group meeting yesterday, it was so moving."),
            ("Melanie", "That sounds powerful. What was the best part?"),
            ("Caroline", "Hearing the transgender stories, they gave me courage."),
            ("Melanie", "I painted a sunrise over the lake last week, my kids loved it.")]
    day2 = [("Melanie", "We went camping in the mountains with the kids."),
            ("Caroline", "So fun! Did you see any wildlife?"),
            ("Melanie", "A family of deer at dawn, and the kids roasted marshmallows."),
            ("Caroline", "I'm researching adoption agencies, I want to be a mom.")]
    turns = [Turn(role="user", speaker=s, content=c, session_id="S1", timestamp=T0 + timedelta(seconds=i))
             for i, (s, c) in enumerate(day1)]
    turns += [Turn(role="user", speaker=s, content=c, session_id="S2",
                   timestamp=T0 + timedelta(days=20, seconds=i)) for i, (s, c) in enumerate(day2)]
    eng.add_turns(turns, "conv")
    return eng


def _seq(*specs: tuple[str, str, float]) -> list[IngestTurn]:
    return [IngestTurn(id=f"t{i}", session_id=s, role="user", speaker="A", content=c, ts=ts)
            for i, (s, c, ts) in enumerate(specs)]


def test_windows_join_neighbours_of_the_same_exchange_only() -> None:
    seq = _seq(("s1", "a", 0), ("s1", "b", 10), ("s2", "c", 20), ("s2", "d", 30), ("s2", "e", 99_999))
    wins = {w.anchor_turn_id: w.turn_ids for w in derive_windows(seq, first_center=0)}
    assert wins["t0"] == ["t0", "t1"]
    assert wins["t1"] == ["t1", "t0"]            # t2 is another session
    assert wins["t2"] == ["t2", "t3"]
    assert wins["t3"] == ["t3", "t2"]            # t4 is a day later: another exchange
    assert "t4" not in wins                      # the newest turn has no successor yet


def test_windows_are_the_same_whether_turns_arrive_one_by_one_or_in_a_batch(tmp_path: Path) -> None:
    texts = ["I adopted a beagle", "What is its name?", "Toby, he is two", "Cute! Does he bark?"]
    turns = [Turn(role="user", content=t, session_id="s", timestamp=T0 + timedelta(seconds=i))
             for i, t in enumerate(texts)]

    def windows(eng: MemoryEngine) -> list[str]:
        rows = eng._store.reader().execute("SELECT text FROM records WHERE kind='window' ORDER BY rid")
        return [r[0] for r in rows]

    with MemoryEngine.open(tmp_path / "a", embedder="hashing") as a, \
            MemoryEngine.open(tmp_path / "b", embedder="hashing") as b:
        a.add_turns(turns, "u")
        for t in turns:
            b.add_turns([t], "u")
        assert windows(a) == windows(b) and len(windows(a)) == 3


@pytest.mark.parametrize(("query", "qtype"), [
    ("When did Caroline go to the LGBTQ support group?", "temporal"),
    ("How many times has Melanie gone camping?", "aggregate"),
    ("What do Caroline and Melanie both like?", "comparison"),
    ("Should I book the ryokan or the hotel?", "personalized_advice"),
    ("What restaurant did you recommend last time?", "prior_assistant_response"),
    ("What is Melanie's favourite painting?", "single"),
    ("她什么时候去的北京？", "temporal"),
    ("你之前推荐的那家餐厅叫什么？", "prior_assistant_response"),
    ("他养了哪些宠物？", "aggregate"),
    ("I love rainy days", "other"),
])
def test_question_types(query: str, qtype: str) -> None:
    assert classify_question(query) == qtype
    assert qtype in STRATEGIES


def test_plan_time_filter_speakers_and_routes() -> None:
    plan = plan_search("What did Caroline do yesterday?", now=T0, speakers=["Caroline", "Melanie"],
                       action_state=None)
    main = plan.routes[0]
    assert main.time_filter == (datetime(2023, 5, 7, tzinfo=UTC), datetime(2023, 5, 8, tzinfo=UTC))
    assert main.speakers == ("Caroline",) and len(plan.routes) == 1
    vague = plan_search("What did Caroline do a few days ago?", now=T0, speakers=[], action_state=None)
    assert vague.routes[0].time_filter is None  # low confidence: no filter at all
    both = plan_search("What do Caroline and Melanie both enjoy?", now=T0, speakers=["Caroline", "Melanie"],
                       action_state=ActionState(failure_signal="timeout", missing_slots=("date",)))
    assert [r.name for r in both.routes] == ["query", "speaker:Caroline", "speaker:Melanie", "action", "slot:date"]
    assert [r.goal for r in both.routes] == ["query", "speaker", "speaker", "action", "slot"]
    assert [r.speakers for r in both.routes[1:3]] == [("Caroline",), ("Melanie",)]
    assert both.routes[3].queries == ("timeout succeeded",)  # the failure alone; the slot has its own route
    assert both.routes[3].boost_kinds == ("failure_pattern", "procedure")  # a failure pulls failure patterns
    assert both.routes[4].queries == ("date",)


def test_standardize_per_group() -> None:
    z = standardize(np.array([1.0, 3.0, 10.0, 10.0]), np.array([0, 0, 1, 1]))
    assert z.tolist() == [-1.0, 1.0, 0.0, 0.0]


def _catalog(n: int, speakers: list[str], ts: list[float]) -> Catalog:
    cat = Catalog(generation=(0, 0))
    cat._append([(i + 1, "turn", i + 1, "s", speakers[i], ts[i], "user", 0, None) for i in range(n)])
    return cat


def test_rank_turns_weights_and_boosts() -> None:
    cat = _catalog(4, ["A", "B", "A", "B"], [0, 100, 200, 300])
    kw = Hits(np.array([1, 2]), np.array([2.0, 1.0]), fill=0.0)
    vec = Hits(np.array([1, 2, 3, 4]), np.array([0.1, 0.2, 0.9, 0.3]))
    plain = Strategy(window=0.0, session=0.0, speaker=0.0, time=0.0)
    both = rank_turns(cat, {"keyword": kw, "vector": vec}, {"keyword": 1.0, "vector": 1.0}, plain)
    no_vec = rank_turns(cat, {"keyword": kw, "vector": vec}, {"keyword": 1.0, "vector": 0.0}, plain)
    only_kw = rank_turns(cat, {"keyword": kw}, {"keyword": 1.0}, plain)
    assert np.allclose(no_vec.total, only_kw.total)  # weight 0 removes the channel entirely
    assert int(np.argmax(both.total)) != int(np.argmax(no_vec.total))
    spk = rank_turns(cat, {"keyword": kw}, {}, Strategy(window=0.0, session=0.0, speaker=0.5, time=0.0),
                     speakers=["B"])
    assert np.allclose(spk.total - only_kw.total, [0, 0.5, 0, 0.5])
    soft = rank_turns(cat, {"keyword": kw}, {}, Strategy(window=0.0, session=0.0, speaker=0.0, time=1.0),
                      time_span=(250.0, 400.0))
    assert np.isfinite(soft.total).all()  # a time filter boosts, it never removes
    assert np.allclose(soft.total - only_kw.total, [0, 0, 0, 1.0])


def test_speaker_named_in_the_question_lifts_their_turns(tmp_path: Path) -> None:
    with _chat(tmp_path) as eng:
        res = eng.search("What did Melanie see with the kids?", "conv", k=3, now=T0 + timedelta(days=30))
        assert res.items[0].speaker == "Melanie"
        assert res.plan is not None and res.plan.routes[0].speakers == ("Melanie",)


def test_a_wrong_time_filter_never_removes_the_answer(tmp_path: Path) -> None:
    with _chat(tmp_path) as eng:
        now = T0 + timedelta(days=30)
        res = eng.search("When did Melanie go camping yesterday?", "conv", k=8, now=now)
        assert res.plan is not None and res.plan.routes[0].time_filter is not None
        assert any("camping" in i.text for i in res.items[:3])


def test_invalid_now_is_rejected(tmp_path: Path) -> None:
    with _chat(tmp_path) as eng, pytest.raises(InvalidQueryError) as info:
        eng.search("camping", "conv", now="last tuesday")
    assert info.value.field == "now"


def test_results_are_turns_with_their_own_turn_first(tmp_path: Path) -> None:
    with _chat(tmp_path) as eng:
        items = eng.search("deer at dawn marshmallows", "conv", k=8).items
        assert all(i.kind == "turn" and len(i.turn_ids) == 1 for i in items)
        assert len({i.turn_ids[0] for i in items}) == len(items)
        assert "deer" in items[0].text


def test_windows_can_be_switched_off(tmp_path: Path) -> None:
    with _chat(tmp_path, config={"ingest": {"windows": False, "derived_kinds": False}}) as eng:
        stats = eng.stats()
        assert stats.records == stats.turns == 8
        assert "deer" in eng.search("deer at dawn", "conv", k=1).items[0].text


def test_mean_window_vectors_need_no_model_call_and_match_their_turns(tmp_path: Path) -> None:
    from memory_ext import HashingEmbedder

    class CountingEmbedder(HashingEmbedder):
        texts = 0

        def embed_documents(self, texts):  # type: ignore[no-untyped-def]
            CountingEmbedder.texts += len(texts)
            return super().embed_documents(texts)

    emb = CountingEmbedder(64)
    turns = [Turn(role="user", content=c, session_id="s", timestamp=T0 + timedelta(seconds=i))
             for i, c in enumerate(["I adopted a beagle", "What is its name?", "Toby, he is two"])]
    with MemoryEngine.open(tmp_path / "s", embedder=emb, config={"ingest": {"window_vectors": "mean"}}) as eng:
        eng.add_turns(turns[:2], "u")
        eng.add_turns(turns[2:], "u", wait=True)  # the window of turn 2 needs turn 1's stored vector
        assert CountingEmbedder.texts == 3  # the turns only
        rows = eng._store.reader().execute(
            "SELECT r.kind, r.turn_ids, e.vector FROM records r JOIN embeddings e USING(rid) ORDER BY r.rid").fetchall()
    import json

    vec = {json.loads(t)[0]: np.frombuffer(v, np.float32) for k, t, v in rows if k == "turn"}
    windows = [(json.loads(t), np.frombuffer(v, np.float32)) for k, t, v in rows if k == "window"]
    assert len(windows) == 2
    for ids, v in windows:
        mean = np.mean([vec[i] for i in ids], axis=0)
        assert np.allclose(v, mean / np.linalg.norm(mean), atol=1e-6)


def test_session_prior_matches_a_direct_computation() -> None:
    from memory_ext.rank.zscore import session_prior

    rng = np.random.default_rng(3)
    codes = rng.integers(0, 7, 300)
    scores = rng.normal(size=300)
    rankable = rng.random(300) > 0.2
    got = session_prior(codes, scores, rankable)
    strength = {c: np.sort(scores[rankable & (codes == c)])[-3:].mean() for c in np.unique(codes[rankable])}
    vals = np.array(list(strength.values()))
    want = {c: (v - vals.mean()) / vals.std() for c, v in strength.items()}
    assert np.allclose([got[c] for c in want], list(want.values()))


def test_llm_planner_plans_and_a_failing_one_degrades_to_the_heuristic(tmp_path: Path) -> None:
    from memory_ext import ConfigError, ScriptedLLM

    good = ScriptedLLM([{"question_type": "single", "routes": [
        {"goal": "query", "queries": ["camping mountains deer"], "constraints": ["speaker:Melanie"],
         "time_filter": None}]}])
    config = {"globals": {"llm_planner_enabled": True}, "recall": {"planner_timeout_s": 2}}
    with pytest.raises(ConfigError, match="pass an LLM"):
        MemoryEngine.open(tmp_path / "x", embedder="hashing", config=config)
    eng = MemoryEngine.open(tmp_path / "s", embedder="hashing", config=config, llm=good)
    with eng:
        eng.add_turns([Turn(role="user", speaker="Melanie", content="We went camping in the mountains and saw deer"),
                       Turn(role="user", speaker="Caroline", content="I am researching adoption agencies")], "c")
        res = eng.search("what did she do on the trip?", "c", k=1)
        assert res.plan is not None and res.plan.planner.startswith("llm:") and not res.degraded
        assert res.plan.routes[0].queries == ("camping mountains deer",)
        assert "camping" in res.items[0].text
        assert len(good.calls) == 1
    broken = ScriptedLLM([RuntimeError("provider down")], repeat_last=True)
    with MemoryEngine.open(tmp_path / "s", embedder="hashing", config=config, llm=broken) as eng:
        res = eng.search("camping deer", "c", k=1)
        assert res.degraded and res.channel_errors[0].channel == "planner"
        assert res.plan is not None and res.plan.planner == "heuristic"
        assert "camping" in res.items[0].text  # degraded, not empty


def test_mmr_replaces_near_duplicates(tmp_path: Path) -> None:
    dup = "The hotel in Kyoto costs 180 euros per night near the temples"
    turns = [Turn(role="user", content=dup, session_id=f"s{i}", timestamp=T0 + timedelta(days=i)) for i in range(3)]
    turns.append(Turn(role="user", content="The Kyoto ryokan has a garden and costs less per night",
                      session_id="s9", timestamp=T0 + timedelta(days=9)))
    texts = {}
    for lam in (1.0, 0.3):
        with MemoryEngine.open(tmp_path / f"s{lam}", embedder="hashing",
                               config={"recall": {"mmr_lambda": lam}}) as eng:
            eng.add_turns(turns, "u")
            texts[lam] = [i.text for i in eng.search("Kyoto hotel per night", "u", k=2).items]
    assert texts[1.0] == [dup, dup]
    assert texts[0.3][0] == dup and texts[0.3][1] != dup  # a different memory is returned, not only reordered


def test_context_shows_found_turns_in_their_source_windows(tmp_path: Path) -> None:
    with _chat(tmp_path) as eng:
        res = eng.search("deer at dawn marshmallows", "conv", k=1)
        blocks = res.context.split("\n---\n")
        assert len(blocks) == 1
        lines = blocks[0].splitlines()
        assert len(lines) == 3 and "deer" in lines[1]          # the turn with one neighbour on each side
        assert "wildlife" in lines[0] and "adoption" in lines[2]
    with _chat(tmp_path / "b", config={"recall": {"context_window_turns": 0}}) as eng:
        assert len(eng.search("deer at dawn", "conv", k=1).context.splitlines()) == 1
    with _chat(tmp_path / "c", config={"recall": {"context_budget_tokens": 50}}) as eng:
        context = eng.search("deer at dawn marshmallows", "conv", k=5).context
        assert "deer" in context and len(context.split("\n---\n")) == 1   # the budget keeps the best block only


def test_context_windows_merge_and_stay_inside_the_session(tmp_path: Path) -> None:
    with _chat(tmp_path) as eng:
        res = eng.search("camping mountains deer wildlife kids", "conv", k=3)
        text = res.context
        assert text.count("deer at dawn") == 1                   # overlapping windows were merged
        assert "support group" not in text                      # session S1 never leaks into S2's window
