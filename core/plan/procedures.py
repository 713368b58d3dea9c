"""The next-step route: while an agent is in the middle of a task, the procedures that take what it has.

Between two tool calls an agent needs the procedure of its *next* step, whose tool it has not named yet (it
may not even know the tool: manuals often introduce tools of their own). What the state holds is the last call;
the route asks for the parameters that call worked with — the names of its arguments, those of an argument
given as a JSON object or string, as wrappers that call another tool pass them, and the tool or record an
argument names — and boosts ``procedure``
records: the documents that explain a tool (:mod:`memory_ext.ingest.manuals`, whose records list the
parameters a tool takes) and past procedures. The procedures that take what the agent already has (a
``user_id``, a ``transaction_id``) are the usual shape of "what comes after this step": when the call identified
records (arguments named ``*_id``), the route asks for those and the tool it named only — the call's other
inputs (a name, an address, a reason) were its own, and they pulled the pages about the same form.

Where the namespace holds no procedure record the route is left out (:func:`fit_to_store`, run by the search
pipeline once it knows the store). While the route is there (a call succeeded or is pending, nothing is missing,
nothing failed), the action route — which asks for the tool just used, the step already taken — is left out: the
documents that name the last tool describe the step behind the agent, and a generic tool name (a wrapper that runs
other tools) would fill the top with the wrapper's own pages (at weight 0.05 it still kept its quota item right
below the top: dropping it took τ² dev hit@1 / @3 / @10 from 0.276 / 0.375 / 0.607 to 0.311 / 0.429 / 0.618). After
a failure the action route asks for the lesson at its full weight and there is no next-step route; a missing slot
keeps the action route too.

τ²-bench banking_knowledge dev (hashing embedder, ``memext bench agent --suites procedures``, memory-ext with the
derived state): hit@10 0.372 before, 0.41 with the manuals' procedure records alone, 0.49 with this route and the
quiet action route (the numbers of the constants below), 0.52 when an argument that names a tool gives its value,
0.529 (hit@3 0.319 -> 0.351) when a value a log left out (``[hidden]``) gives nothing: its slot's name
(``agent_tool_name``) only found the wrapper's own pages. After a call whose values were all left out, the route
asks for the latest call before it that says something (``ActionState.recent_calls``): with the procedure lift
(:mod:`memory_ext.retrieval.procedures`), 0.646 -> 0.681; asking for the records identified, 0.717; with the route
at weight 1.0, 0.754 (hit@1 / @3 0.323 / 0.555; the request alone 0.230 / 0.300 / 0.389).

>>> from memory_ext.models import ActionState
>>> state = ActionState(current_subgoal="my cash back is wrong", last_tool_name="call_tool", last_tool_args={
...     "tool": "[hidden]", "arguments": '{"user_id": "u1", "transaction_id": "t9"}'})
>>> [(r.name, r.queries, [k.value for k in r.boost_kinds], r.weight) for r in next_step_routes(state)]
[('next-step', ('user_id transaction_id',), ['procedure'], 1.0)]
>>> next_step_routes(ActionState(last_tool_name="book_hotel", failure_signal="HTTP 422"))
[]
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any, Final

from ..models import MAIN_ROUTE_WEIGHT, ActionState, EvidenceRoute, RecordKind, RouteGoal, SearchPlan

__all__ = ["NEXT_STEP_ROUTE", "NEXT_STEP_WEIGHT", "argument_names", "fit_to_store", "next_step_routes", "used_tools"]

NEXT_STEP_ROUTE: Final = "next-step"
"""The name of the route (``EvidenceRoute.name``; ``keyword@next-step`` in explain)."""
MAX_ARGUMENT_NAMES: Final = 12
"""At most this many argument names go into the route's query."""
NEXT_STEP_WEIGHT: Final = MAIN_ROUTE_WEIGHT
"""The route's weight in the fusion (the main route weighs 1.0). Before the procedure lift, a heavier route found
more next steps but put them above what the request itself asks for (τ²-bench dev, hit@1 / @3 / @10: 0.265 / 0.311
/ 0.492 at 0.5, 0.230 / 0.274 / 0.555 at 1.0; the request alone 0.230 / 0.300 / 0.389). With the lift (tool pages
above prose), the quiet action route left out and the route asking for the records the call identified, the
route's pages compete with tool pages only, and weight helps every metric up to 1.0: 0.283 / 0.492 / 0.717 at
0.5, 0.323 / 0.555 / 0.754 at 1.0, 0.253 / 0.560 / 0.787 at 1.5 (hit@1 falls)."""


_IDENTIFIER_RE: Final = re.compile(r"[A-Za-z]+(?:_[A-Za-z]+)+(?:_\d+)?")
"""A name in code: words joined by underscores, perhaps a number at the end (``get_history``, ``lookup_v_2``); not
an id (``txn_a8f1``, ``cc_8903_silver``)."""


_ID_NAME_RE: Final = re.compile(r"(?:^|_)ids?$", re.IGNORECASE)
"""A parameter that identifies a record: ``user_id``, ``card_id``, ``transaction_ids``, ``id``."""
_PLACEHOLDER_RE: Final = re.compile(r"\[[^\[\]]*\]|<[^<>]*>|\*+|\.\.\.|…")
"""A value a log left out: a bracketed placeholder (``[hidden]``, ``<redacted>``), stars or an ellipsis."""


def _nested(value: Any) -> Mapping[str, Any] | None:
    if isinstance(value, Mapping):
        return value
    if isinstance(value, str) and value.lstrip()[:1] == "{":
        try:
            parsed = json.loads(value)
        except ValueError:
            return None
        return parsed if isinstance(parsed, Mapping) else None
    return None


def argument_names(args: Mapping[str, Any]) -> list[str]:
    """What a call's arguments say about the step: their names, with the names of an argument that is itself an
    object (a mapping, or a JSON object in a string) in its place, and the value of an argument that names
    something in code (a snake_case identifier: the tool a wrapper runs, a record's type) in its place; an argument
    whose value was left out (a placeholder such as ``[hidden]``) gives nothing.

    >>> argument_names({"tool_name": "get_history", "arguments": '{"user_id": "u1", "limit": 5}', "verbose": True})
    ['get_history', 'user_id', 'limit', 'verbose']
    >>> argument_names({"tool_name": "[hidden]", "arguments": '{"card_id": "c1"}'})
    ['card_id']
    """
    return _said(args) or [str(k) for k in args][:MAX_ARGUMENT_NAMES]  # every value left out: the slots' names


def _said(args: Mapping[str, Any]) -> list[str]:
    """:func:`argument_names` without the fallback: ``[]`` when every value was left out."""
    out: list[str] = []
    for key, value in args.items():
        inner = _nested(value)
        if inner:
            names = [str(k) for k in inner]
        elif isinstance(value, str) and _IDENTIFIER_RE.fullmatch(value.strip()):
            names = [value.strip()]
        elif isinstance(value, str) and _PLACEHOLDER_RE.fullmatch(value.strip()):
            names = []  # a value left out ("[hidden]", "<redacted>", "***"): its slot says nothing of the step
        else:
            names = [str(key)]
        out += [n for n in names if n not in out]
    return out[:MAX_ARGUMENT_NAMES]


def used_tools(state: ActionState) -> frozenset[str]:
    """The tools the agent has used in the recent turns: the calls' names (``recent_calls``, the last call) and
    the tools a wrapper call named in its arguments (a snake_case value: ``run_tool(name="get_history")``).

    >>> sorted(used_tools(ActionState(last_tool_name="call_tool", recent_calls=(
    ...     {"name": "log_in", "args": {"user_id": "u1"}},
    ...     {"name": "call_tool", "args": {"tool": "get_history", "arguments": '{"user_id": "u1"}'}}))))
    ['call_tool', 'get_history', 'log_in']
    """
    calls = [*state.recent_calls, {"name": state.last_tool_name or "", "args": state.last_tool_args or {}}]
    out = {str(c.get("name") or "") for c in calls}
    for c in calls:
        args = c.get("args")
        out.update(v.strip() for v in (args.values() if isinstance(args, Mapping) else ())
                   if isinstance(v, str) and _IDENTIFIER_RE.fullmatch(v.strip()))
    return frozenset(out - {""})


def next_step_routes(state: ActionState) -> list[EvidenceRoute]:
    """The ``next-step`` route of ``state`` (see the module docstring): ``[]`` after a failure, before any call
    or for a call without arguments."""
    if state.failure_signal or not (state.last_tool_name or state.tentative_action):
        return []
    args = state.last_tool_args or {}
    if args and not _said(args):  # a call whose values were all left out says nothing: the latest earlier one that does
        earlier = [c.get("args") for c in state.recent_calls[:-1] if isinstance(c.get("args"), Mapping)]
        args = next((a for a in reversed(earlier) if _said(a)), args)
    names = argument_names(args)
    ids = [n for n in names if _ID_NAME_RE.search(n)]
    if ids:  # the records the call identified are what the next step takes; its other inputs were its own
        names = [str(v).strip() for v in args.values() if isinstance(v, str) and _IDENTIFIER_RE.fullmatch(v.strip())
                 and str(v).strip() in names] + ids
    if not names:
        return []
    # goal "other": a guess at the next step keeps its quota item at the bottom of the result, not right below the
    # top where the precise needs of the state (a lesson, a missing slot) go (retrieval/select.py)
    return [EvidenceRoute(goal=RouteGoal.OTHER, name=NEXT_STEP_ROUTE, queries=(" ".join(names),),
                          boost_kinds=(RecordKind.PROCEDURE,), weight=NEXT_STEP_WEIGHT)]


def fit_to_store(plan: SearchPlan, *, has_procedures: bool) -> SearchPlan:
    """``plan`` as the namespace can serve its next-step route: where the namespace holds no procedure record the
    route is left out (it would only add noise); where it does and no slot is missing, the action route is left
    out (it asks for the step behind). A plan without a next-step route is returned as it is.

    >>> from memory_ext.models import ActionState
    >>> from memory_ext.plan.heuristic import plan_search
    >>> plan = plan_search("what next?", now=None, speakers=(), action_state=ActionState(
    ...     last_tool_name="lookup", last_tool_args={"user_id": "u1"}))
    >>> [(r.name, r.weight) for r in fit_to_store(plan, has_procedures=True).routes]
    [('query', 1.0), ('next-step', 1.0)]
    >>> [(r.name, r.weight) for r in fit_to_store(plan, has_procedures=False).routes]
    [('query', 1.0), ('action', 0.5)]
    """
    if not any(r.name == NEXT_STEP_ROUTE for r in plan.routes):
        return plan
    if not has_procedures:
        routes = [r for r in plan.routes if r.name != NEXT_STEP_ROUTE]
    elif any(r.goal == RouteGoal.SLOT for r in plan.routes):
        return plan
    else:
        routes = [r for r in plan.routes if not (r.goal == RouteGoal.ACTION and r.name == RouteGoal.ACTION.value)]
    return plan.model_copy(update={"routes": tuple(routes)})
