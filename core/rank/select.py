"""Final selection rules after fusion and MMR: per-route quotas and the episode budget (pure functions).

* **Route quotas.** A plan may have several routes (the question, one per named speaker, the agent's action, one
  per missing slot). Summing route scores lets the main route crowd the others out; a quota guarantees each
  secondary route its best ``quota`` items (when it found any with positive evidence) from a fixed place on: the
  agent's routes right below the best item overall, the conversation's routes at the bottom of a 10-item result.
* **Episode budget.** At most ``budget`` items from one episode (one session of raw dialogue), so a long
  conversation about one thing cannot fill the whole result; items over budget are replaced by the next best
  items of other episodes (when there are none, the over-budget items follow: the budget never empties a result).

Both build one ranking whatever ``k`` is and return its first ``k``: a search for k items returns the first k
of a search for more.

>>> apply_route_quotas([1, 2, 3, 4], {"action": [9, 7]}, quota=1, k=3)
[1, 9, 2]
>>> apply_episode_budget([1, 2, 3, 4, 5], {1: "a", 2: "a", 3: "a", 4: "b", 5: "a"}, budget=2, k=3)
[1, 2, 4]
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

__all__ = ["AGENT_QUOTA_SLOT", "CONVERSATION_QUOTA_SLOT", "apply_episode_budget", "apply_route_quotas"]

AGENT_QUOTA_SLOT = 1
"""The first place (0-based) of the items the action state asks for precisely keep (an action route after a failure
or a tool call, a missing slot): right below the best item, so a lesson or a slot's value reaches even a short
result."""
CONVERSATION_QUOTA_SLOT = 8
"""The first place (0-based) of the items the other routes keep (named speakers, an excerpt's opening and focus, a
subgoal): the bottom of a 10-item result, where they always were (LoCoMo and MADial are measured at 10)."""


def apply_route_quotas(order: Sequence[int], route_best: Mapping[str, Sequence[int]], *, quota: int,
                       k: int, first_slot: Mapping[str, int] | None = None) -> list[int]:
    """The first ``k`` of one ranking built from ``order`` so every route of ``route_best`` has ``quota`` of its
    best items near the top.

    ``route_best`` lists each secondary route's candidates best first (only those with positive evidence). The
    ranking is built once, independently of ``k`` — so a search for k items returns the first k of a search for
    more: the best item overall comes first; then, place by place, the next item of ``order`` — unless a route
    (in name order) still lacks items at its *slot*. ``first_slot`` gives each route the first place (0-based)
    its items may be lifted to (default 1: right below the best item); the ``i``-th of the ``n`` routes sharing a
    first slot ``f`` has its ``j``-th needed item at ``f + i + j * n`` (routes interleaved), so with k above the
    last slot every route has its quota among the k; an item of ``order`` that a route lists counts for that
    route where it naturally stands. Deterministic.
    """
    order = list(dict.fromkeys(order))
    if quota <= 0 or not route_best or not order:
        return order[:k]
    goals = sorted(route_best)
    lists = {g: list(dict.fromkeys(route_best[g])) for g in goals}
    firsts = {g: max(1, (first_slot or {}).get(g, 1)) for g in goals}
    slot: dict[tuple[str, int], int] = {}
    for f in set(firsts.values()):
        group = [g for g in goals if firsts[g] == f]
        slot.update({(g, j): f + i + j * len(group) for i, g in enumerate(group) for j in range(quota)})
    have = dict.fromkeys(goals, 0)
    out: list[int] = []
    placed: set[int] = set()

    def take(r: int) -> None:
        out.append(r)
        placed.add(r)
        for g in goals:
            if r in lists[g] and have[g] < quota:
                have[g] += 1

    take(order[0])  # the best item overall always stays first
    rest = iter(order[1:])
    pending = next(rest, None)
    while pending is not None or any(have[g] < quota and any(r not in placed for r in lists[g]) for g in goals):
        due = next((g for g in goals if have[g] < quota and slot[(g, have[g])] <= len(out)
                    and any(r not in placed for r in lists[g])), None)
        if due is not None:
            take(next(r for r in lists[due] if r not in placed))
            continue
        if pending is None:  # the ranking is exhausted: the routes' remaining needs follow
            g = next(g for g in goals if have[g] < quota and any(r not in placed for r in lists[g]))
            take(next(r for r in lists[g] if r not in placed))
            continue
        if pending not in placed:
            take(pending)
        pending = next(rest, None)
        if len(out) >= k and all(have[g] >= quota or slot[(g, have[g])] >= k for g in goals):
            break
    return out[:k]


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
    # not enough other episodes: the over-budget items follow, in rank order (the same ranking for every k)
    return (chosen + over)[:k]
