"""The cold tier is a ranking prior in the fuse stage, in both fusions (no engine; hand-made catalog and hits)."""

from __future__ import annotations

import numpy as np
import pytest

from memory_ext import EvidenceRoute, SearchPlan
from memory_ext.plan.strategy import Strategy
from memory_ext.recall.base import Hits
from memory_ext.retrieval.fuse import fuse, score_routes
from memory_ext.retrieval.recall import Recalled
from memory_ext.retrieval.scope import Scope
from memory_ext.store.catalog import Catalog

PLAIN = Strategy(window=0.0, session=0.0, speaker=0.0, time=0.0, derived=0.0)
MAIN = EvidenceRoute(goal="query", queries=("what am I allergic to",))


def catalog(n: int, cold: tuple[int, ...]) -> Catalog:
    cat = Catalog(generation=(0, 0))
    cat._append([(i, "turn", i, "s1", "Maya", 100.0 * i, "user", i in cold, None) for i in range(1, n + 1)])
    return cat


def scored(cat: Catalog, scores: dict[int, float], fusion: str) -> object:
    hits = Hits(np.array(list(scores), np.int64), np.array(list(scores.values())), fill=0.0)
    recalled = Recalled(results={"keyword#0": hits}, route_hits=({"keyword": hits},))
    return score_routes(cat, SearchPlan(routes=(MAIN,)), recalled, strategy=PLAIN, weights={}, scope=Scope(),
                        channel_kinds={}, fusion=fusion, limit=10)


def test_zscore_a_strong_cold_match_still_ranks_first_a_close_one_drops() -> None:
    cat = catalog(4, cold=(1, 3))
    s = scored(cat, {1: 9.0, 2: 2.0, 3: 1.9, 4: 1.0}, "zscore")
    kwargs = {"fusion": "zscore", "rrf_k": 60, "weights": {}, "pool_size": 4, "as_of": None}
    prior = fuse(cat, s, Scope(cold_penalty=1.0), **kwargs)  # type: ignore[arg-type]
    none = fuse(cat, s, Scope(cold_penalty=0.0), **kwargs)  # type: ignore[arg-type]
    assert none.rids == [1, 2, 3, 4]
    assert prior.rids == [1, 2, 4, 3]  # the strong match overcomes the prior; a close cold one falls below
    assert prior.total[0] == pytest.approx(none.total[0] - 1.0) and prior.total[1] == none.total[1]


def test_rrf_divides_a_cold_score_and_hides_nothing() -> None:
    cat = catalog(4, cold=(2,))
    s = scored(cat, {1: 9.0, 2: 2.0, 3: 1.9, 4: 1.0}, "rrf")
    kwargs = {"fusion": "rrf", "rrf_k": 60, "weights": {}, "pool_size": 4, "as_of": None}
    prior = fuse(cat, s, Scope(cold_penalty=1.0), **kwargs)  # type: ignore[arg-type]
    none = fuse(cat, s, Scope(cold_penalty=0.0), **kwargs)  # type: ignore[arg-type]
    assert none.rids == [1, 2, 3, 4]
    assert prior.rids == [1, 3, 4, 2]  # 1/62 / 1.1 is below 1/64: about five ranks down
    assert dict(zip(prior.rids, prior.scores, strict=True))[2] == pytest.approx(1 / 62 / 1.1)
