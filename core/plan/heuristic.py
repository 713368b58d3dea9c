"""The heuristic planner: question type by rules (English and Chinese), time filter, speakers, routes.

>>> classify_question("When did Caroline go to the support group?")
'temporal'
>>> classify_question("你之前推荐的那家餐厅叫什么？")
'prior_assistant_response'
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime

from ..models import (
    MAIN_ROUTE_WEIGHT,
    SECONDARY_ROUTE_WEIGHT,
    ActionState,
    EvidenceRoute,
    RecordKind,
    RouteGoal,
    SearchPlan,
)
from ..text.entities import query_names
from ..text.sentences import is_question, split_sentences
from ..text.timeexpr import extract_times
from .procedures import next_step_routes

__all__ = ["action_routes", "classify_question", "conversation_parts", "plan_search", "slot_query", "slot_routes",
           "split_sentences"]

TIME_FILTER_MIN_CONFIDENCE = 0.8
MAX_SLOT_ROUTES = 3
SLOT_ROUTE_WEIGHT = MAIN_ROUTE_WEIGHT
"""A missing slot's route weighs as much as the query: the request is what lacks the value, so a turn stating
it is at least as much what the agent needs as a turn like the request (BFCL miss_param dev, hashing: slots
hit@1 0.551 with the secondary weight 0.5, 0.598 with 1.0)."""
FOCUS_MIN_SENTENCES = 4
"""A query of at least this many sentences (a conversation excerpt, not a question) gets a ``focus`` route."""
FOCUS_SENTENCES = 2
"""The focus route searches the query's last sentences: where a long conversation currently is."""
OPENING_MIN_CHARS = 15
"""The opening route searches the query's first sentences (at least this many characters): the topic raised."""
MAX_TOOL_NAMES = 5
"""An action route names the available tools only when there are this few: a long tool list is noise."""
LESSON_CUE = "succeeded"
"""Added to an action route with a failure: the word a lesson's index holds and a failure without a fix lacks."""
ACTION_BOOST_KINDS = (RecordKind.FAILURE_PATTERN, RecordKind.PROCEDURE)
"""What an action route with a failure signal or a last tool name boosts: past failures and procedures."""

_NAME_PARTS = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+|[^\W\d_A-Za-z]+")
"""The words of a parameter name (``snake_case``, ``camelCase``)."""

_HINT_TYPE = re.compile(r"\s*\(\w+\)\s*$")
"""A slot hint's JSON type in parentheses at its end (not words a value statement says)."""

_RULES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("prior_assistant_response", re.compile(
        r"\byou (said|told|mentioned|recommended|suggested|wrote|gave)\b|\bdid you (say|recommend|suggest)\b|"
        r"你(之前|上次|刚才)?(说过|提到|推荐|建议|告诉)|你之前", re.I)),
    ("temporal", re.compile(
        r"\b(when|what (time|date|day|year|month)|which (year|month|day|date)|how long (ago|since|before|after)|"
        r"since when)\b|什么时候|哪天|哪一天|几号|几月|哪一年|哪年|多久|何时", re.I)),
    ("comparison", re.compile(
        r"\b(compare|compared|versus|vs\.?|difference between|differ|both|in common|which of)\b|"
        r"比较|区别|不同|哪个更|都喜欢|共同", re.I)),
    ("aggregate", re.compile(
        r"\b(how many|how often|how much|list|all the|what (are|were) some|what kinds?|which .*s\b did)|"
        r"多少次|几次|哪些|有多少|都有", re.I)),
    ("personalized_advice", re.compile(
        r"\b(should i|recommend|suggest|advice|what would you|any ideas|help me (choose|pick|decide))\b|"
        r"建议|推荐|应该|怎么办|帮我(选|挑|决定)", re.I)),
)


def conversation_parts(query: str) -> tuple[str, str] | None:
    """``(opening, focus)`` of a long conversational query, or ``None`` for a question or a short statement.

    The opening is the first sentences (``OPENING_MIN_CHARS`` characters at least): the topic someone raised.
    The focus is the last ``FOCUS_SENTENCES`` sentences: where the conversation is now.

    >>> conversation_parts("嘿！我今天和朋友去公园玩了捉迷藏！真好。你喜欢公园吗？喜欢。我们下次一起去吧？")
    ('嘿！ 我今天和朋友去公园玩了捉迷藏！', '喜欢。 我们下次一起去吧？')
    >>> conversation_parts("When did Caroline go to the support group?") is None
    True
    """
    sentences = split_sentences(query)
    if len(sentences) < FOCUS_MIN_SENTENCES:
        return None
    opening: list[str] = []
    for sentence in sentences[:-FOCUS_SENTENCES]:
        opening.append(sentence)
        if sum(map(len, opening)) >= OPENING_MIN_CHARS:
            break
    return " ".join(opening), " ".join(sentences[-FOCUS_SENTENCES:])


def classify_question(query: str) -> str:
    """One of ``memory_ext.plan.strategy.QUESTION_TYPES``, by ordered rules; no dataset categories."""
    for name, pattern in _RULES:
        if pattern.search(query):
            return name
    return "single" if is_question(query, loose=True) else "other"


def action_routes(query: str, state: ActionState) -> list[EvidenceRoute]:
    """The action route of an :class:`~memory_ext.models.ActionState` (the slot routes are added apart).

    With a failure, the route asks for the tool and its error alone (and for what succeeded); without one, for
    the tentative action, the last tool, the missing slots, and the available tools while no tool was called
    yet (when there are at most ``MAX_TOOL_NAMES``). A failure or a last tool makes it boost lessons and
    procedures. The subgoal, when it is not the query itself, is a route of its own (``subgoal``), so neither
    it nor a list of tools can dilute the action route.

    >>> [(r.name, r.queries) for r in action_routes("hotel in Lisbon?", ActionState(
    ...     current_subgoal="book a hotel in Lisbon", last_tool_name="book_hotel", failure_signal="HTTP 422",
    ...     available_tools=("book_hotel", "get_weather")))]
    [('action', ('book_hotel HTTP 422 succeeded',)), ('subgoal', ('book a hotel in Lisbon',))]
    """
    subgoal = (state.current_subgoal or "").strip()
    if state.failure_signal:
        # after a failure, what helps is what worked: a lesson's index says "succeeded" (ingest/failures.py)
        parts = [state.tentative_action, state.last_tool_name, state.failure_signal, LESSON_CUE]
    else:  # the step: a tool just used pulls procedures; the tools on offer count only before any call
        tools = state.available_tools if not state.last_tool_name and len(state.available_tools) <= MAX_TOOL_NAMES \
            else ()
        parts = [state.tentative_action, state.last_tool_name, *state.missing_slots, *tools]
    text = " ".join(p for p in parts if p)
    out: list[EvidenceRoute] = []
    if text.strip():
        kinds = ACTION_BOOST_KINDS if (state.failure_signal or state.last_tool_name) else ()
        out.append(EvidenceRoute(goal=RouteGoal.ACTION, queries=(text,), boost_kinds=kinds,
                                 weight=SECONDARY_ROUTE_WEIGHT))
    if subgoal and subgoal.casefold() != query.strip().casefold():
        out.append(EvidenceRoute(goal=RouteGoal.ACTION, name="subgoal", queries=(subgoal,),
                                 weight=SECONDARY_ROUTE_WEIGHT))
    return out


def slot_query(slot: str, state: ActionState) -> str:
    """What a slot route asks for: a value of the slot — its name's words and what its value is (the state's
    ``slot_hints``: the parameter's description) — in the context of the subgoal.

    >>> slot_query("file_name", ActionState(current_subgoal="Create a new file", missing_slots=("file_name",),
    ...                                     slot_hints={"file_name": "The name of the new file."}))
    'file name The name of the new file. Create a new file'
    """
    hint = _HINT_TYPE.sub("", (state.slot_hints or {}).get(slot, ""))
    words = " ".join(_NAME_PARTS.findall(slot.replace("_", " ")))
    context = state.current_subgoal or state.tentative_action or ""
    return " ".join(p for p in (words, hint, context) if p.strip())


def slot_routes(state: ActionState) -> list[EvidenceRoute]:
    """One route per missing slot (at most ``MAX_SLOT_ROUTES``): each is an evidence need of its own, a value of
    that slot (:func:`slot_query`), weighing ``SLOT_ROUTE_WEIGHT``.

    >>> [(r.name, r.weight) for r in slot_routes(ActionState(missing_slots=("symbol",)))]
    [('slot:symbol', 1.0)]
    """
    return [EvidenceRoute(goal=RouteGoal.SLOT, name=f"slot:{slot}", queries=(slot_query(slot, state),),
                          weight=SLOT_ROUTE_WEIGHT)
            for slot in state.missing_slots[:MAX_SLOT_ROUTES] if slot.strip()]


def plan_search(query: str, *, now: datetime | None, speakers: Sequence[str],
                action_state: ActionState | None) -> SearchPlan:
    """The plan: question type, the main route (with time filter and named speakers) and an action route.

    Routes are typed (:class:`~memory_ext.models.RouteGoal`): the main route weighs ``MAIN_ROUTE_WEIGHT``, every
    other route ``SECONDARY_ROUTE_WEIGHT``; the speakers a route is about are in ``speakers``, the record kinds an
    action route boosts in ``boost_kinds``.

    A time filter is set only for a time expression parsed with confidence >= 0.8, and it is applied as a boost,
    never as a gate, so a wrong filter cannot remove the answer. When the question names two or more speakers
    (a comparison), each gets a route of its own so one speaker's evidence cannot crowd out the other's.
    A conversation excerpt (``FOCUS_MIN_SENTENCES`` sentences or more) gets no time filter and two more routes,
    ``opening`` (the topic raised) and ``focus`` (its last sentences).
    """
    qtype = classify_question(query)
    excerpt = conversation_parts(query)
    time_filter = None
    # A conversation excerpt's "today" or "yesterday" dates its own story, not the memories it should recall.
    if now is not None and excerpt is None:
        mentions = [m for m in extract_times(query, now) if m.confidence >= TIME_FILTER_MIN_CONFIDENCE]
        if mentions:
            time_filter = (mentions[0].start, mentions[0].end)
    named = tuple(query_names(query, speakers)) if speakers else ()
    routes = [EvidenceRoute(goal=RouteGoal.QUERY, queries=(query,), speakers=named, time_filter=time_filter,
                            weight=MAIN_ROUTE_WEIGHT)]
    if len(named) >= 2:
        routes += [EvidenceRoute(goal=RouteGoal.SPEAKER, name=f"speaker:{n}", queries=(query,), speakers=(n,),
                                 time_filter=time_filter, weight=SECONDARY_ROUTE_WEIGHT) for n in named]
    if excerpt is not None:  # a conversation excerpt: its topic and its current point are evidence needs too
        routes += [EvidenceRoute(goal=RouteGoal.OPENING, queries=(excerpt[0],), weight=SECONDARY_ROUTE_WEIGHT),
                   EvidenceRoute(goal=RouteGoal.FOCUS, queries=(excerpt[1],), weight=SECONDARY_ROUTE_WEIGHT)]
    if action_state is not None:
        routes += [*action_routes(query, action_state), *next_step_routes(action_state)]
        routes += slot_routes(action_state)
    return SearchPlan(question_type=qtype, routes=tuple(routes), planner="heuristic")
