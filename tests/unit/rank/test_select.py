"""Route quotas and the episode budget: pure functions, and their effect in a search."""

from __future__ import annotations

from pathlib import Path

from memory_ext import ActionState, MemoryEngine, Turn
from memory_ext.rank.select import apply_episode_budget, apply_route_quotas


def test_route_quota_brings_in_a_routes_best_item_and_keeps_the_top() -> None:
    order = [10, 11, 12, 13, 14]
    assert apply_route_quotas(order, {"action": [50, 51]}, quota=1, k=3) == [10, 50, 11]
    assert apply_route_quotas(order, {"action": [50, 51]}, quota=2, k=3) == [10, 50, 51]
    assert apply_route_quotas(order, {"action": [12]}, quota=1, k=3) == [10, 12, 11]  # lifted below the best
    assert apply_route_quotas(order, {"action": [10]}, quota=1, k=3) == [10, 11, 12]  # already first
    assert apply_route_quotas(order, {"a": [50], "b": [60]}, quota=1, k=2)[0] == 10  # the best item stays
    assert apply_route_quotas(order, {"action": []}, quota=1, k=3) == [10, 11, 12]
    assert apply_route_quotas(order, {"action": [50]}, quota=0, k=3) == [10, 11, 12]
    out = apply_route_quotas([1, 2, 3, 4], {"x": [7, 8], "y": [8, 9]}, quota=1, k=4)
    assert len(out) == len(set(out)) == 4 and {7, 8} & set(out) and {8, 9} & set(out)


def test_route_quotas_and_budget_are_prefix_stable_in_k() -> None:
    # one ranking whatever k is: a search for k items returns the first k of a search for more
    order = [1, 2, 3, 4, 5, 6, 7, 8]
    cases = [({"action": [40, 3]}, 1), ({"action": [40], "slot:date": [41, 42]}, 1), ({"a": [6, 50], "b": [7]}, 2),
             ({"x": [2]}, 1)]
    for route_best, quota in cases:
        full = apply_route_quotas(order, route_best, quota=quota, k=20)
        for k in range(1, 12):
            assert apply_route_quotas(order, route_best, quota=quota, k=k) == full[:k], (route_best, k)
    # the k=2 and k=3 searches of the issue: the k=3 one keeps what the k=2 one returned
    two = apply_route_quotas(order, {"action": [40], "slot:x": [41]}, quota=1, k=2)
    three = apply_route_quotas(order, {"action": [40], "slot:x": [41]}, quota=1, k=3)
    assert three[:2] == two == [1, 40] and three == [1, 40, 41]
    # a conversation route keeps its item at the bottom of a 10-item result, an agent's route right below the top
    order = list(range(1, 21))
    both = apply_route_quotas(order, {"action": [40], "opening": [41]}, quota=1, k=10,
                              first_slot={"action": 1, "opening": 8})
    assert both == [1, 40, 2, 3, 4, 5, 6, 7, 41, 8]
    assert apply_route_quotas(order, {"action": [40], "opening": [41]}, quota=1, k=5,
                              first_slot={"action": 1, "opening": 8}) == both[:5]
    episodes = {1: "a", 2: "a", 3: "a", 4: "b", 5: "a"}
    full = apply_episode_budget([1, 2, 3, 4, 5], episodes, budget=2, k=5)
    assert full == [1, 2, 4, 3, 5]
    assert all(apply_episode_budget([1, 2, 3, 4, 5], episodes, budget=2, k=k) == full[:k] for k in range(1, 6))


def test_episode_budget_caps_one_session_and_never_empties_a_result() -> None:
    episodes = {1: "a", 2: "a", 3: "a", 4: "b", 5: "a", 6: "c"}
    assert apply_episode_budget([1, 2, 3, 4, 5, 6], episodes, budget=2, k=4) == [1, 2, 4, 6]
    assert apply_episode_budget([1, 2, 3], {1: "a", 2: "a", 3: "a"}, budget=1, k=3) == [1, 2, 3]
    assert apply_episode_budget([1, 2, 3], episodes, budget=None, k=2) == [1, 2]


def test_search_gives_the_action_route_its_quota(tmp_path: Path) -> None:
    chat = [Turn(role="user", session_id=f"s{i}", content=f"The quarterly report draft {i} needs charts")
            for i in range(8)]
    chat.append(Turn(role="assistant", session_id="ops", content="The deploy script failed with a timeout on "
                                                                 "the staging cluster; retrying with --wait fixed it"))
    state = ActionState(current_subgoal="quarterly report charts", failure_signal="timeout")
    results = {}
    for quota in (0, 1):
        with MemoryEngine.open(tmp_path / str(quota), embedder="hashing",
                               config={"recall": {"route_quota": quota}}) as engine:
            engine.add_turns(chat, "ana")
            results[quota] = [i.text for i in engine.search("quarterly report charts", "ana", k=3,
                                                            action_state=state).items]
    # the deploy failure (its lesson, which reads the turn) is among the 3 only with the quota
    assert any("timeout" in text for text in results[1])
    assert not any("timeout" in text for text in results[0])


def test_search_episode_budget_spreads_results_over_sessions(tmp_path: Path) -> None:
    chat = [Turn(role="user", session_id="trip", content=f"Packing list item {i} for the Lisbon trip")
            for i in range(6)]
    chat.append(Turn(role="user", session_id="work", content="The Lisbon office opens in May"))
    with MemoryEngine.open(tmp_path, embedder="hashing", config={"recall": {"episode_budget": 2}}) as engine:
        engine.add_turns(chat, "ana")
        items = engine.search("Lisbon", "ana", k=3).items
        assert sum(i.session_id == "trip" for i in items) == 2 and any(i.session_id == "work" for i in items)
