"""Planners: the ``Planner`` protocol, the heuristic planner, and an LLM planner that falls back to it.

A planner turns a query (with the reference time, the namespace's speakers and the agent's action state) into a
:class:`~memory_ext.models.SearchPlan` and, when it had to degrade, a
:class:`~memory_ext.models.ChannelError` with ``channel="planner"`` saying why — together a :class:`PlanOutcome`.

:class:`LLMPlanner` asks any :class:`~memory_ext.llm.LLM` for a plan as JSON (the schema is in the prompt and
in ``json_schema``), repairs common breakage (code fences, prose around the object, single quotes, trailing
commas), validates it, retries once with the validation error, and caches successful plans per (query, action
state, speakers, day of ``now``). On any error or timeout it returns the fallback (heuristic) plan and the reason.

>>> from datetime import datetime, UTC
>>> from memory_ext.llm import ScriptedLLM
>>> llm = ScriptedLLM(['```json\\n{"question_type": "temporal", "routes": [{"goal": "query", '
...                    '"queries": ["Caroline support group"], "speakers": ["caroline"], '
...                    '"time_filter": {"start": "2023-05-01", "end": "2023-05-08"}}]}\\n```'])
>>> planner = LLMPlanner(llm)
>>> plan, error = planner.plan("When did Caroline go to the support group last week?",
...                            now=datetime(2023, 5, 8, tzinfo=UTC), speakers=["Caroline", "Melanie"])
>>> plan.question_type, plan.planner, plan.routes[0].goal, plan.routes[0].speakers, error
('temporal', 'llm:scripted', <RouteGoal.QUERY: 'query'>, ('Caroline',), None)
>>> plan.routes[0].time_filter[1].isoformat()
'2023-05-09T00:00:00+00:00'
>>> plan, error = LLMPlanner(ScriptedLLM([TimeoutError("slow")])).plan("Where does Lena live?", now=None,
...                                                                    speakers=[])
>>> plan.planner, error.channel, error.error_type
('heuristic', 'planner', 'TimeoutError')
"""

from __future__ import annotations

import json
import re
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from datetime import UTC, date, datetime, timedelta
from typing import Any, NamedTuple, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, field_validator
from pydantic import ValidationError as PydanticValidationError

from ..errors import ConfigError
from ..llm import LLM, InvalidAnswer, ask_json, parse_json_object
from ..models import (
    MAIN_ROUTE_WEIGHT,
    SECONDARY_ROUTE_WEIGHT,
    ActionState,
    ChannelError,
    EvidenceRoute,
    RouteGoal,
    SearchPlan,
)
from .heuristic import plan_search
from .strategy import QUESTION_TYPES

__all__ = ["HeuristicPlanner", "LLMPlanner", "PlanOutcome", "Planner", "parse_json_object", "plan_json_schema"]

MAX_QUERIES_PER_ROUTE = 4
MAX_SPEAKERS_IN_PROMPT = 50

_TYPE_GLOSSES = {
    "single": "one fact",
    "aggregate": "counting or listing several facts, possibly across conversations",
    "temporal": "when something happened, or how long ago/between",
    "comparison": "comparing two or more people or things",
    "personalized_advice": "a recommendation or advice for the user, based on what is known about them",
    "prior_assistant_response": "what the assistant itself said, recommended or wrote before",
    "other": "anything else (statements, chit-chat)",
}


class PlanOutcome(NamedTuple):
    """What a planner returns: the plan, and a ``ChannelError(channel="planner")`` when it had to degrade."""

    plan: SearchPlan
    error: ChannelError | None = None


@runtime_checkable
class Planner(Protocol):
    """Turns a query into a search plan. ``now`` resolves relative time ("last week"); ``speakers`` are the
    namespace's known speakers (for ``EvidenceRoute.speakers``); ``action_state`` is what the agent is doing.
    A planner never raises for a bad model answer: it degrades and says so in :attr:`PlanOutcome.error`."""

    def plan(self, query: str, *, now: datetime | None, speakers: Sequence[str] = (),
             action_state: ActionState | None = None) -> PlanOutcome:
        """The plan for ``query``."""
        ...


class HeuristicPlanner:
    """The rule-based planner (:func:`memory_ext.plan.heuristic.plan_search`): no model, never degraded.

    >>> HeuristicPlanner().plan("When did Lena move?", now=None).plan.question_type
    'temporal'
    """

    name = "heuristic"

    def plan(self, query: str, *, now: datetime | None, speakers: Sequence[str] = (),
             action_state: ActionState | None = None) -> PlanOutcome:
        return PlanOutcome(plan_search(query, now=now, speakers=speakers, action_state=action_state))

    def __repr__(self) -> str:
        return "HeuristicPlanner()"


# ---------------------------------------------------------------------------------------------- the schema


def plan_json_schema(max_routes: int = 4) -> dict[str, Any]:
    """The JSON schema the LLM is asked to answer with (question types from ``QUESTION_TYPES``)."""
    day = {"type": "string", "description": "ISO 8601 date or date-time; naive times are UTC"}
    return {
        "type": "object",
        "properties": {
            "question_type": {"type": "string", "enum": list(QUESTION_TYPES)},
            "routes": {
                "type": "array", "minItems": 1, "maxItems": max_routes,
                "items": {
                    "type": "object",
                    "properties": {
                        "goal": {"type": "string"},
                        "queries": {"type": "array", "items": {"type": "string"}, "minItems": 1,
                                    "maxItems": MAX_QUERIES_PER_ROUTE},
                        "speakers": {"type": "array", "items": {"type": "string"}},
                        "time_filter": {"anyOf": [
                            {"type": "null"},
                            {"type": "object", "properties": {"start": day, "end": day},
                             "required": ["start", "end"]},
                        ]},
                    },
                    "required": ["goal", "queries"],
                },
            },
        },
        "required": ["question_type", "routes"],
    }


# ------------------------------------------------------------------------------ validation of the answer

_DAY = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_MONTH = re.compile(r"^\d{4}-\d{2}$")
_YEAR = re.compile(r"^\d{4}$")


def _parse_bound(text: str, *, is_end: bool) -> datetime:
    """An ISO date/date-time as aware UTC. A bare date, month or year covers all of it: as an ``end`` it means
    the end of that period (the filter's end is exclusive)."""
    s = text.strip()
    if _YEAR.match(s):
        start = datetime(int(s), 1, 1, tzinfo=UTC)
        return start.replace(year=start.year + 1) if is_end else start
    if _MONTH.match(s):
        year, month = int(s[:4]), int(s[5:])
        start = datetime(year, month, 1, tzinfo=UTC)
        if not is_end:
            return start
        return datetime(year + month // 12, month % 12 + 1, 1, tzinfo=UTC)
    value = datetime.fromisoformat(s)  # ValueError names the bad text
    value = value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
    if is_end and _DAY.match(s):
        value += timedelta(days=1)
    return value


class _Route(BaseModel):
    model_config = ConfigDict(extra="ignore")

    goal: str | None = None
    queries: list[str] = []
    speakers: list[str] = []
    constraints: list[str] = []
    """The older answer form of speakers: ``"speaker:<Name>"`` strings (anything else is dropped)."""
    time_filter: tuple[datetime, datetime] | None = None

    @field_validator("queries", "speakers", "constraints", mode="before")
    @classmethod
    def _one_or_many(cls, value: Any) -> Any:
        return [] if value is None else [value] if isinstance(value, str) else value

    @field_validator("time_filter", mode="before")
    @classmethod
    def _span(cls, value: Any) -> Any:
        if value is None or value == {} or value == []:
            return None
        if isinstance(value, Mapping):
            if "start" not in value or "end" not in value:
                raise ValueError('time_filter needs both "start" and "end" (or null)')
            value = (value["start"], value["end"])
        if not isinstance(value, (list, tuple)) or len(value) != 2 or not all(isinstance(v, str) for v in value):
            raise ValueError('time_filter must be {"start": "<ISO date>", "end": "<ISO date>"} or null')
        start, end = _parse_bound(value[0], is_end=False), _parse_bound(value[1], is_end=True)
        if end <= start:
            raise ValueError(f"time_filter end {value[1]!r} is not after start {value[0]!r}")
        return (start, end)


class _Plan(BaseModel):
    model_config = ConfigDict(extra="ignore")

    question_type: str | None = None
    routes: list[_Route] = []

    @field_validator("question_type", mode="before")
    @classmethod
    def _known_type(cls, value: Any) -> Any:
        if value is None:
            return None
        if not isinstance(value, str):  # a ValueError, not a TypeError: pydantic reports only the former
            raise ValueError(f"question_type must be a string, one of: {', '.join(QUESTION_TYPES)}")
        key = re.sub(r"[\s-]+", "_", value.strip().lower())
        if key not in QUESTION_TYPES:
            raise ValueError(f"question_type {value!r} is not one of: {', '.join(QUESTION_TYPES)}")
        return key


class _InvalidAnswer(InvalidAnswer):
    """The LLM's answer is not a usable plan (after repair)."""


def _validate(value: Any) -> _Plan:
    try:
        return _Plan.model_validate(value)
    except PydanticValidationError as exc:
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc']) or 'answer'}: {e['msg']}"
                             for e in exc.errors()[:5])
        raise _InvalidAnswer(problems) from None


# ------------------------------------------------------------------------------------------ the LLM planner


class LLMPlanner:
    """Plans with an LLM; any error, timeout or unusable answer falls back to ``fallback`` and says why.

    - ``llm`` — any :class:`~memory_ext.llm.LLM` (``LangChainLLM``, ``LlamaIndexLLM``, ``ScriptedLLM``, ...);
    - ``fallback`` — the planner used when the LLM fails (default :class:`HeuristicPlanner`); it also supplies
      the question type and routes an otherwise valid answer leaves out, and the ``action`` route when an action
      state is given and the LLM planned none;
    - ``timeout_s`` — the deadline for the whole plan (the one retry included); past it the fallback is used;
    - ``cache_size`` — successful plans kept, least recently used first out (0 disables); failures are never
      cached, so a provider that recovers is used again at the next search;
    - ``max_routes`` — at most this many routes are kept (the first is the main need, ``goal="query"``).

    The answer's routes become typed :class:`~memory_ext.models.EvidenceRoute` objects: the first is the main route
    (goal ``query``, weight ``MAIN_ROUTE_WEIGHT``), the others keep the name the LLM gave them, a goal of
    :class:`~memory_ext.models.RouteGoal` when the name is one (else ``other``) and weight
    ``SECONDARY_ROUTE_WEIGHT``. A route's ``speakers`` (names; ``"speaker:<Name>"`` constraints are read too)
    are kept with the namespace's spelling, and dropped when the namespace does not have them (when ``speakers``
    is given). Time filters are aware UTC ``[start, end)``; a bare ISO date as ``end`` includes that day.
    """

    def __init__(self, llm: LLM, *, fallback: Planner | None = None, timeout_s: float = 10.0,
                 cache_size: int = 256, max_routes: int = 4) -> None:
        if not callable(getattr(llm, "complete", None)):
            raise ConfigError("llm", llm, "pass an object with complete(prompt, *, system, json_schema, timeout) "
                                          "(memory_ext.llm.LLM), e.g. LangChainLLM(chat_model)")
        if isinstance(timeout_s, bool) or not isinstance(timeout_s, (int, float)) or not timeout_s > 0:
            raise ConfigError("timeout_s", timeout_s, "give a number of seconds > 0")
        if isinstance(cache_size, bool) or not isinstance(cache_size, int) or cache_size < 0:
            raise ConfigError("cache_size", cache_size, "give an integer >= 0 (0 disables the cache)")
        if isinstance(max_routes, bool) or not isinstance(max_routes, int) or max_routes < 1:
            raise ConfigError("max_routes", max_routes, "give an integer >= 1")
        self.llm = llm
        self.fallback: Planner = fallback if fallback is not None else HeuristicPlanner()
        self.timeout_s = float(timeout_s)
        self.cache_size = cache_size
        self.max_routes = max_routes
        self.name = f"llm:{getattr(llm, 'id', type(llm).__name__)}"
        self._schema = plan_json_schema(max_routes)
        self._cache: OrderedDict[tuple[Any, ...], SearchPlan] = OrderedDict()
        self._lock = threading.Lock()

    # -- public ---------------------------------------------------------------------------------------------
    def plan(self, query: str, *, now: datetime | None, speakers: Sequence[str] = (),
             action_state: ActionState | None = None) -> PlanOutcome:
        """The LLM's plan, or the fallback's plan with a ``ChannelError(channel="planner")`` saying why."""
        speakers = tuple(speakers)
        key = (query, action_state.model_dump_json() if action_state is not None else None,
               now.date() if now is not None else None, speakers)
        with self._lock:
            cached = self._cache.get(key)
            if cached is not None:
                self._cache.move_to_end(key)
                return PlanOutcome(cached)
        try:
            plan = self._plan_with_llm(query, now=now, speakers=speakers, action_state=action_state)
        except Exception as exc:  # noqa: BLE001  any failure of the model degrades to the fallback plan, reported
            outcome = self.fallback.plan(query, now=now, speakers=speakers, action_state=action_state)
            error_type = "InvalidPlan" if isinstance(exc, _InvalidAnswer) else type(exc).__name__
            reason = f"{exc}" or error_type
            return PlanOutcome(outcome.plan, ChannelError(
                channel="planner", error_type=error_type,
                message=f"LLM planner {self.name!r} failed ({reason}); used the {outcome.plan.planner} plan"))
        if self.cache_size:
            with self._lock:
                self._cache[key] = plan
                self._cache.move_to_end(key)
                while len(self._cache) > self.cache_size:
                    self._cache.popitem(last=False)
        return PlanOutcome(plan)

    def clear_cache(self) -> None:
        """Forget every cached plan."""
        with self._lock:
            self._cache.clear()

    def __repr__(self) -> str:
        return (f"LLMPlanner(llm={self.name[4:]!r}, fallback={self.fallback!r}, timeout_s={self.timeout_s:g}, "
                f"cache_size={self.cache_size}, max_routes={self.max_routes})")

    # -- the model call ---------------------------------------------------------------------------------------
    def _plan_with_llm(self, query: str, *, now: datetime | None, speakers: tuple[str, ...],
                       action_state: ActionState | None) -> SearchPlan:
        prompt = self._prompt(query, now, speakers, action_state)
        parsed = ask_json(self.llm, prompt, validate=_validate, timeout=self.timeout_s, system=_SYSTEM,
                          json_schema=self._schema, invalid=_InvalidAnswer, what="a valid plan")
        return self._to_plan(parsed, query, now=now, speakers=speakers, action_state=action_state)

    def _prompt(self, query: str, now: datetime | None, speakers: tuple[str, ...],
                action_state: ActionState | None) -> str:
        lines = ["Plan a search of the agent's long-term memory of past conversations for this question.", "",
                 f"Question: {query}"]
        if now is not None:
            today: date = now.date()
            lines.append(f"Today: {today.isoformat()} ({today.strftime('%A')})")
        if speakers:
            shown = ", ".join(speakers[:MAX_SPEAKERS_IN_PROMPT])
            lines.append(f"Known speakers: {shown}" + (" ..." if len(speakers) > MAX_SPEAKERS_IN_PROMPT else ""))
        state = _state_fields(action_state)
        if state:
            lines.append(f"Agent state: {json.dumps(state, ensure_ascii=False)}")
        types = "; ".join(f"{t} = {_TYPE_GLOSSES[t]}" for t in QUESTION_TYPES)
        lines += ["", "Answer with one JSON object:",
                  f'- "question_type": one of {types}.',
                  (f'- "routes": 1 to {self.max_routes} independent evidence needs, the main one first with goal '
                   '"query"; one route per person or thing when comparing. Each route has "goal" (a few words), '
                   f'"queries" (1 to {MAX_QUERIES_PER_ROUTE} keyword-rich search strings in the language of the '
                   'memories), "speakers" (the names of the known speakers the route is about, else []) and '
                   '"time_filter" ({"start": ISO date, "end": ISO date} when the question '
                   "names a time period, resolved against today, end inclusive; else null).")]
        if state:
            lines.append('- Add a route with goal "action" for what the agent state needs (past failures of '
                         "this tool or action, procedures, missing details).")
        lines += ["", f"JSON schema: {json.dumps(self._schema, separators=(',', ':'))}"]
        return "\n".join(lines)

    # -- from the validated answer to a SearchPlan -------------------------------------------------------------
    def _to_plan(self, parsed: _Plan, query: str, *, now: datetime | None, speakers: tuple[str, ...],
                 action_state: ActionState | None) -> SearchPlan:
        fallback_plan: SearchPlan | None = None

        def fallback() -> SearchPlan:
            nonlocal fallback_plan
            if fallback_plan is None:
                fallback_plan = self.fallback.plan(query, now=now, speakers=speakers, action_state=action_state).plan
            return fallback_plan

        canonical = {s.strip().casefold(): s.strip() for s in speakers if s.strip()}
        routes: list[EvidenceRoute] = []
        goals: set[str] = set()
        for raw in parsed.routes:
            if len(routes) == self.max_routes:
                break
            queries = tuple(dict.fromkeys(q.strip() for q in raw.queries if q.strip()))[:MAX_QUERIES_PER_ROUTE]
            named = [*raw.speakers, *(_constraint_speaker(c) for c in raw.constraints)]
            route_speakers = tuple(dict.fromkeys(
                s for s in (_speaker(n, canonical) for n in named if n is not None) if s is not None))
            name = "query" if not routes else (raw.goal or "").strip() or f"route {len(routes) + 1}"
            while name in goals:
                name = f"{name} ({len(routes) + 1})"
            goals.add(name)
            main = not routes
            routes.append(EvidenceRoute(goal=RouteGoal.QUERY if main else _goal_of(name), name=name,
                                        queries=queries or (query,), speakers=route_speakers,
                                        weight=MAIN_ROUTE_WEIGHT if main else SECONDARY_ROUTE_WEIGHT,
                                        time_filter=raw.time_filter))
        if not routes:
            routes = list(fallback().routes[:self.max_routes])
        if _state_fields(action_state) and not any(r.goal == "action" for r in routes):
            action = next((r for r in fallback().routes if r.goal == "action"), None)
            if action is not None and self.max_routes > 1:
                routes = [*routes[:self.max_routes - 1], action]
        question_type = parsed.question_type or fallback().question_type
        return SearchPlan(question_type=question_type, routes=tuple(routes), planner=self.name)


_SYSTEM = ("You plan searches over an AI agent's long-term memory of conversations. Reply with exactly one JSON "
           "object that matches the given schema: no prose, no code fences.")


def _state_fields(state: ActionState | None) -> dict[str, Any]:
    if state is None:
        return {}
    return {k: v for k, v in state.model_dump(mode="json").items() if v not in (None, "", [], ())}


def _constraint_speaker(text: str) -> str | None:
    """The name of a ``speaker:<Name>`` constraint (the older answer form), or None for any other constraint."""
    kind, sep, value = text.partition(":")
    return value if sep and kind.strip().lower() == "speaker" else None


def _speaker(name: str, canonical: Mapping[str, str]) -> str | None:
    """The namespace's spelling of a speaker's name, or None when it is empty or not a known speaker."""
    value = name.strip()
    if not value:
        return None
    if not canonical:
        return value
    return canonical.get(value.casefold())


def _goal_of(name: str) -> RouteGoal:
    """The goal of a secondary route the LLM named ``name``: ``action``, ``opening`` or ``focus`` by that exact
    name, ``speaker`` / ``slot`` by the prefix ``speaker:`` / ``slot:``, else ``other``."""
    if name in (RouteGoal.ACTION, RouteGoal.OPENING, RouteGoal.FOCUS):
        return RouteGoal(name)
    prefix, sep, _ = name.partition(":")
    if sep and prefix in (RouteGoal.SPEAKER, RouteGoal.SLOT):
        return RouteGoal(prefix)
    return RouteGoal.OTHER
