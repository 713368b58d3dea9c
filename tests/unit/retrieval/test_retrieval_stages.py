"""The read pipeline's stages, each run alone on hand-made inputs (no engine)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest

from memory_ext import EngineConfig, EvidenceRoute, SearchPlan
from memory_ext.plan.strategy import Strategy
from memory_ext.rank.zscore import rank_turns
from memory_ext.recall.base import Hits, RecallContext
from memory_ext.recall.channels import CHANNEL_SPECS, ChannelSet
from memory_ext.recall.keyword import KeywordRecaller
from memory_ext.recall.layers import TurnsRecaller
from memory_ext.recall.temporal import TemporalRecaller
from memory_ext.retrieval.explain import channel_ranks, explain_zscore
from memory_ext.retrieval.fuse import channel_label, fuse, score_routes
from memory_ext.retrieval.recall import Recalled, call_name, plan_calls
from memory_ext.retrieval.scope import Scope, flag_mask
from memory_ext.retrieval.select import quotas_and_budget, select
from memory_ext.store.catalog import Catalog
from memory_ext.store.keyword import KeywordIndex
from memory_ext.store.sqlite import TruthStore
from memory_ext.store.timeindex import TimeIndex

PLAIN = Strategy(window=0.0, session=0.0, speaker=0.0, time=0.0, derived=0.0)
MAIN = EvidenceRoute(goal="query", queries=("what pet does Ana have",))
ACTION = EvidenceRoute(goal="action", queries=("vet appointment",), boost_kinds=("failure_pattern",))  # after a tool


def catalog(sessions: list[str], *, cold: tuple[int, ...] = (), valid_to: dict[int, float] | None = None) -> Catalog:
    """Turn records with rids 1..n, one per session entry, written at t = 100 * rid."""
    cat = Catalog(generation=(0, 0))
    cat._append([(i + 1, "turn", i + 1, s, "Ana", 100.0 * (i + 1), "user", (i + 1) in cold,
                  (valid_to or {}).get(i + 1)) for i, s in enumerate(sessions)])
    return cat


def recalled(*route_hits: dict[str, Hits]) -> Recalled:
    results = {f"{ch}#{i}": h for i, hits in enumerate(route_hits) for ch, h in hits.items()}
    return Recalled(results=results, route_hits=tuple(route_hits))


def hits(scores: dict[int, float]) -> Hits:
    return Hits(np.array(list(scores), np.int64), np.array(list(scores.values())), fill=0.0)


# -- score and fuse ---------------------------------------------------------------------------------------------


def test_zscore_fusion_sums_the_routes_by_their_weight() -> None:
    cat = catalog(["s1", "s1", "s2", "s2"])
    main_hits = {"keyword": hits({1: 3.0, 2: 1.0})}
    action_hits = {"keyword": hits({4: 2.0, 3: 1.0})}
    plan = SearchPlan(routes=(MAIN, ACTION))
    scored = score_routes(cat, plan, recalled(main_hits, action_hits), strategy=PLAIN, weights={}, scope=Scope(),
                          channel_kinds={}, fusion="zscore", limit=10)
    alone_main = rank_turns(cat, main_hits, {}, PLAIN).total
    alone_action = rank_turns(cat, action_hits, {}, PLAIN).total
    assert np.array_equal(scored.total, 1.0 * alone_main + 0.5 * alone_action)  # an independent computation
    assert list(scored.per_route) == ["query", "action"] and scored.routes["action"] is ACTION
    fused = fuse(cat, scored, Scope(), fusion="zscore", rrf_k=60, weights={}, pool_size=3, as_of=None)
    assert fused.rids == [1, 4, 2] and fused.scores == sorted(fused.scores, reverse=True)
    # the route weight is the planner's: a heavier action route takes the lead
    heavy = SearchPlan(routes=(MAIN, ACTION.model_copy(update={"weight": 3.0})))
    rescored = score_routes(cat, heavy, recalled(main_hits, action_hits), strategy=PLAIN, weights={},
                            scope=Scope(), channel_kinds={}, fusion="zscore", limit=10)
    assert fuse(cat, rescored, Scope(), fusion="zscore", rrf_k=60, weights={}, pool_size=3,
                as_of=None).rids[0] == 4


def test_rrf_fusion_weighs_each_channel_call_by_route_and_channel() -> None:
    cat = catalog(["s1", "s1", "s1"])
    main_hits = {"keyword": hits({1: 3.0, 2: 2.0}), "vector": hits({2: 0.9, 3: 0.5, 1: 0.1})}
    action_hits = {"keyword": hits({3: 5.0})}
    plan = SearchPlan(routes=(MAIN, ACTION))
    scored = score_routes(cat, plan, recalled(main_hits, action_hits), strategy=PLAIN, weights={"vector": 2.0},
                          scope=Scope(), channel_kinds={}, fusion="rrf", limit=10)
    assert scored.rrf_parts == {"keyword": [1, 2], "vector": [2, 3, 1], "keyword@action": [3]}
    fused = fuse(cat, scored, Scope(), fusion="rrf", rrf_k=60, weights={"vector": 2.0}, pool_size=3, as_of=None)
    by_hand = {1: 1 / 61 + 2 / 63, 2: 1 / 62 + 2 / 61, 3: 2 / 62 + 0.5 / 61}
    assert fused.rids == sorted(by_hand, key=lambda r: -by_hand[r])
    assert fused.scores == pytest.approx([by_hand[r] for r in fused.rids])
    assert fused.details[3]["channels"]["keyword@action"] == {"rank": 1, "weight": 0.5,
                                                               "contribution": pytest.approx(0.5 / 61)}


def test_a_superseded_turn_lifts_its_successor_then_the_cold_prior_and_the_scope_mask_apply() -> None:
    cat = catalog(["s1", "s1", "s1"], cold=(1,))
    cat.successor = {0: 1}  # rid 1 was superseded by rid 2
    scored = score_routes(cat, SearchPlan(routes=(MAIN,)), recalled({"keyword": hits({1: 3.0, 2: 1.0, 3: 2.0})}),
                          strategy=PLAIN, weights={}, scope=Scope(), channel_kinds={}, fusion="zscore", limit=10)
    scope = Scope(flags=flag_mask(cat, as_of=None), cold_penalty=1.0)
    fused = fuse(cat, scored, scope, fusion="zscore", rrf_k=60, weights={}, pool_size=3, as_of=None)
    # the cold statement is demoted, not gone; its successor ranks where it stood
    assert fused.rids[0] == 2 and sorted(fused.rids) == [1, 2, 3]
    assert fused.total[1] == pytest.approx(scored.total[0] + 1e-6)
    assert fused.total[0] == pytest.approx(scored.total[0] - 1.0)
    assert fused.supersedes == {1: "lifted above superseded record rid 1"}
    assert np.isfinite(scored.total[0])  # the stage's input is not changed
    as_of_scope = Scope(flags=flag_mask(cat, as_of=150.0), cold_penalty=1.0)
    as_of = fuse(cat, scored, as_of_scope, fusion="zscore", rrf_k=60, weights={}, pool_size=3, as_of=150.0)
    assert as_of.rids == [1] and not as_of.supersedes  # as_of: what was true then, no lifting


def test_flag_mask_is_as_of_only_the_cold_tier_masks_nothing() -> None:
    cat = catalog(["s1", "s1", "s1"], cold=(2,), valid_to={1: 250.0})
    assert flag_mask(cat, as_of=None) is None
    # at t=220 turn 1 (valid until 250) holds, turn 3 (said at 300) was not said yet
    assert flag_mask(cat, as_of=220.0).tolist() == [True, True, False]
    assert Scope(flags=np.array([False, False, False])).returns_nothing(cat)
    assert not Scope().returns_nothing(cat)


# -- select ----------------------------------------------------------------------------------------------------


def test_quotas_give_a_secondary_route_its_best_turn() -> None:
    cat = catalog(["a", "a", "a", "b", "b"])
    plan = SearchPlan(routes=(MAIN, ACTION))
    scored = score_routes(cat, plan, recalled({"keyword": hits({1: 5.0, 2: 4.0, 3: 3.0, 4: 2.0})},
                                              {"keyword": hits({5: 1.0})}),
                          strategy=PLAIN, weights={}, scope=Scope(), channel_kinds={}, fusion="zscore", limit=10)
    order = [1, 2, 3, 4, 5]
    quota = quotas_and_budget(cat, order, scored.per_route, scored.routes, scored.total, 3, episode_budget=None,
                              route_quota=1)
    assert quota == [1, 5, 2]  # the action route's only match comes right below the best item
    none = quotas_and_budget(cat, order, scored.per_route, scored.routes, scored.total, 3, episode_budget=None,
                             route_quota=0)
    assert none == [1, 2, 3]


def test_select_keeps_the_pool_scores_and_ranks_quota_items_below_them(tmp_path: Path) -> None:
    cat = catalog(["a", "a", "b"])
    plan = SearchPlan(routes=(MAIN, ACTION))
    scored = score_routes(cat, plan, recalled({"keyword": hits({1: 5.0, 2: 4.0})}, {"keyword": hits({3: 1.0})}),
                          strategy=PLAIN, weights={}, scope=Scope(), channel_kinds={}, fusion="zscore", limit=10)
    config = EngineConfig.from_dict({"recall": {"mmr_lambda": 1.0, "route_quota": 1}}).recall
    store = TruthStore(tmp_path / "s")
    try:
        chosen = select(store, 1, cat, [1, 2], [2.0, 1.0], per_route=scored.per_route, routes=scored.routes,
                        total=scored.total, k=2, config=config, use_vectors=False)
    finally:
        store.close()
    assert chosen.rids == [1, 3] and chosen.scores == [2.0, 1.0 - 1e-3] and chosen.mmr == {}


# -- recall planning ---------------------------------------------------------------------------------------------


def test_channel_calls_follow_the_channel_table(tmp_path: Path) -> None:
    store = TruthStore(tmp_path / "s")
    try:
        ctx = RecallContext(store=store, keyword_index=KeywordIndex(), vector_index=None, embedder=None,
                            time_index=TimeIndex())
        built = {"keyword": KeywordRecaller(ctx), "turns": TurnsRecaller(ctx), "temporal": TemporalRecaller(ctx)}
        channels = ChannelSet(recallers=built, specs={name: CHANNEL_SPECS[name] for name in built})
        cat = catalog(["s1", "s1"])
        when = (datetime(2026, 3, 1, tzinfo=UTC), datetime(2026, 3, 2, tzinfo=UTC))
        speaker = EvidenceRoute(goal="speaker", name="speaker:Ana", queries=MAIN.queries, speakers=("Ana",))
        dated = EvidenceRoute(goal="slot", name="slot:date", queries=("date",), time_filter=when)
        plan = SearchPlan(routes=(MAIN, speaker, dated))
        calls = plan_calls(plan, cat, 1, channels, limit=50, layer_min_chars=600, evidence_is_empty=lambda: False)
    finally:
        store.close()
    # the time channel only for the dated route; the speaker route shares the main route's calls (same text)
    assert calls.route_calls == ({"keyword": "keyword", "turns": "turns"}, {"keyword": "keyword", "turns": "turns"},
                                 {"keyword": "keyword@slot:date", "turns": "turns@slot:date",
                                  "temporal": "temporal@slot:date"})
    assert sorted(calls.calls) == ["keyword", "keyword@slot:date", "temporal@slot:date", "turns", "turns@slot:date"]
    assert calls.channel_kinds["turns"].tolist() == [True, True] and not calls.warnings


def test_visible_names_of_calls_and_channels() -> None:
    speaker = EvidenceRoute(goal="speaker", name="speaker:Ana", queries=("q",))
    assert call_name("keyword", MAIN, 0) == "keyword" and call_name("vector", ACTION, 1) == "vector@action"
    assert call_name("keyword", speaker, 2) == "keyword@route2"
    assert channel_label("keyword", speaker) == "keyword@speaker:Ana" and channel_label("graph", MAIN) == "graph"


# -- explain ----------------------------------------------------------------------------------------------------


def test_explain_is_assembled_from_the_route_scores() -> None:
    cat = catalog(["s1", "s1", "s1"])
    plan = SearchPlan(routes=(MAIN, ACTION))
    scored = score_routes(cat, plan, recalled({"keyword": hits({1: 3.0, 2: 1.0})}, {"keyword": hits({3: 2.0})}),
                          strategy=PLAIN, weights={"keyword": 2.0}, scope=Scope(), channel_kinds={},
                          fusion="zscore", limit=10)
    parts = explain_zscore(0, scored.per_route, scored.routes, {"keyword": 2.0})
    assert parts["route_weights"] == {"query": 1.0, "action": 0.5}
    assert parts["routes"]["query"]["channels"]["keyword"]["weight"] == 2.0
    assert parts["routes"]["query"]["route_score"] == pytest.approx(float(scored.per_route["query"].total[0]))
    ranks = channel_ranks(cat, scored, CHANNEL_SPECS, [1, 3])
    assert ranks == {1: {"keyword": 1}, 3: {"keyword@action": 1}}  # keyword lists matches only


def test_episode_budget_reaches_the_k_returned() -> None:
    """At most ``episode_budget`` of the k items come from one session while other sessions have candidates."""
    cat = catalog(["a", "a", "a", "b", "c"])
    plan = SearchPlan(routes=(MAIN,))
    scored = score_routes(cat, plan, recalled({"keyword": hits({1: 5.0, 2: 4.0, 3: 3.0, 4: 2.0, 5: 1.0})}),
                          strategy=PLAIN, weights={}, scope=Scope(), channel_kinds={}, fusion="zscore", limit=10)
    order = [1, 2, 3, 4, 5]
    one = quotas_and_budget(cat, order, scored.per_route, scored.routes, scored.total, 3, episode_budget=1,
                            route_quota=1)
    assert one == [1, 4, 5]
    two = quotas_and_budget(cat, order, scored.per_route, scored.routes, scored.total, 4, episode_budget=2,
                            route_quota=1)
    assert two == [1, 2, 4, 5]
    # too few sessions: the over-budget items fill the rest in rank order
    assert quotas_and_budget(cat, [1, 2, 3], scored.per_route, scored.routes, scored.total, 3, episode_budget=1,
                             route_quota=1) == [1, 2, 3]


def test_strategy_overrides_apply_to_every_question_type() -> None:
    from memory_ext.errors import ConfigError
    from memory_ext.plan.strategy import STRATEGIES, strategy_for

    overrides = EngineConfig.from_dict({"recall": {"strategy": {"speaker": 2.0}}}).recall.strategy
    assert strategy_for("temporal", overrides).speaker == 2.0
    assert strategy_for("temporal", overrides).time == STRATEGIES["temporal"].time  # the rest is the type's own
    assert strategy_for("single", {}) is STRATEGIES["single"]
    with pytest.raises(ConfigError, match="speakers"):
        EngineConfig.from_dict({"recall": {"strategy": {"speakers": 2.0}}})


def test_the_fusion_is_one_strategy_object() -> None:
    from memory_ext.retrieval.fuse import RRFFusion, ZScoreFusion, fusion_for

    rrf = fusion_for("rrf", rrf_k=10)
    assert isinstance(rrf, RRFFusion) and rrf.rrf_k == 10 and not rrf.reranks
    assert isinstance(fusion_for("zscore"), ZScoreFusion) and fusion_for("zscore").reranks
    assert fusion_for(rrf) is rrf
    with pytest.raises(ValueError, match="zscore"):
        fusion_for("borda")
    # the object and its name fuse alike; a smaller rrf_k weighs the first ranks more
    cat = catalog(["s1", "s1", "s2"])
    route_hits = {"keyword": hits({1: 3.0, 2: 2.0, 3: 1.0}), "vector": hits({3: 0.9, 2: 0.8, 1: 0.1})}
    by_name = score_routes(cat, SearchPlan(routes=(MAIN,)), recalled(route_hits), strategy=PLAIN, weights={},
                           scope=Scope(), channel_kinds={}, fusion="rrf", limit=10)
    by_object = score_routes(cat, SearchPlan(routes=(MAIN,)), recalled(route_hits), strategy=PLAIN, weights={},
                             scope=Scope(), channel_kinds={}, fusion=rrf, limit=10)
    assert by_name.rrf_parts == by_object.rrf_parts == {"keyword": [1, 2, 3], "vector": [3, 2, 1]}
    pooled = fuse(cat, by_object, Scope(), fusion=rrf, weights={"vector": 2.0}, pool_size=3, as_of=None)
    assert pooled.rids[0] == 3 and pooled.details[3]["rrf_k"] == 10
