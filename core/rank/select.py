"""Final selection rules after fusion and MMR: per-route quotas and the episode budget (pure functions).

* **Route quotas.** A plan may have several routes (the question, one per named speaker, the agent's action, one
  per missing slot). Summing route scores lets the main route crowd the others out; a quota guarantees each
  secondary route its best ``quota`` items among the k returned (when it found any with positive evidence),
  replacing the lowest-ranked items that no route needs.
* **Episode budget.** At most ``budget`` items from one episode (one session of raw dialogue), so a long
  conversation about one thing cannot fill the whole result; items over budget are replaced by the next best
  items of other episodes (when there are none, the over-budget items stay: the budget never empties a result).

>>> apply_route_quotas([1, 2, 3, 4], {"action": [9, 7]}, quota=1, k=3)
[1, 2, 9]
>>> apply_episode_budget([1, 2, 3, 4, 5], {1: "a", 2: "a", 3: "a", 4: "b", 5: "a"}, budget=2, k=3)
[1, 2, 4]
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

__all__ = ["apply_episode_budget", "apply_route_quotas"]


def apply_route_quotas(order: Sequence[int], route_best: Mapping[str, Sequence[int]], *, quota: int,
                       k: int) -> list[int]:
    """The first ``k`` of ``order``, changed so every route of ``route_best`` has ``quota`` of its best items.

    ``route_best`` lists each secondary route's candidates best first (only those with positive evidence).
    Items a route needs displace, from the bottom up, items no route has claimed. Deterministic.
    """
    chosen = list(dict.fromkeys(order))[:k]
    if quota <= 0 or not route_best:
        return chosen
    protected: set[int] = set()
    wanted: list[int] = []
    for goal in sorted(route_best):
        mine = [r for r in route_best[goal] if r in chosen][:quota]
        protected.update(mine)
        need = quota - len(mine)
        for r in route_best[goal]:
            if need <= 0:
                break
            if r not in chosen and r not in wanted:
                wanted.append(r)
                need -= 1
    protected.update(chosen[:1])  # the best item overall always stays
    room = k - len(chosen)
    chosen += wanted[:room]
    wanted = wanted[room:]
    victims = [i for i in range(len(chosen) - 1, -1, -1) if chosen[i] not in protected][:len(wanted)]
    for i, r in zip(sorted(victims), wanted, strict=False):  # the route's best takes the highest freed place
        chosen[i] = r
    return chosen


def apply_episode_budget(order: Sequence[int], episode_of: Mapping[int, str | None], *, budget: int | None,
                         k: int) -> list[int]:
    """The first ``k`` of ``order`` with at most ``budget`` items per episode (None or 0: no budget)."""
    order = list(dict.fromkeys(order))
    if not budget:
        return order[:k]
    counts: dict[str | None, int] = {}
    chosen: list[int] = []
    over: list[int] = []
    for r in order:
        episode = episode_of.get(r)
        if counts.get(episode, 0) < budget:
            counts[episode] = counts.get(episode, 0) + 1
            chosen.append(r)
        else:
            over.append(r)
        if len(chosen) == k:
            return chosen
    # not enough other episodes: fill with the over-budget items, in rank order
    rank = {r: i for i, r in enumerate(order)}
    return sorted(chosen + over[:k - len(chosen)], key=rank.__getitem__)
