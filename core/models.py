"""The data model of memory-ext (pydantic v2).

Values (``Namespace``, ``Turn``, ``ChannelError``, ``RetrievedItem``, ...) are frozen. Validation errors are
raised as :mod:`memory_ext.errors` types that name the field, the value and the fix.

**Time rule.** Every timestamp is stored as an aware UTC datetime. A *naive* datetime (no ``tzinfo``) is taken
to be UTC, never the machine's local time, so the same data gives the same store on every machine. Pass an aware
datetime to use another zone. ISO-8601 strings and POSIX epoch numbers are accepted too.

>>> from memory_ext import Namespace, Turn
>>> Namespace("alice").key
('alice', '')
>>> Turn(role="user", content="I moved to Lisbon last May").role.value
'user'
"""

from __future__ import annotations

import math
import unicodedata
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from .errors import InvalidNamespaceError, InvalidTurnError
from .validate import check_json, check_text

__all__ = [
    "ActionState",
    "ChannelError",
    "EvidenceRoute",
    "IndexHook",
    "MemoryFile",
    "Namespace",
    "QuestionType",
    "RecordKind",
    "RetrievedItem",
    "Role",
    "RouteGoal",
    "SearchPlan",
    "SearchResult",
    "TOOL_METADATA_KEYS",
    "Turn",
    "to_utc",
]

MAX_ID_LENGTH = 256
MIN_TIME = datetime(1000, 1, 1, tzinfo=UTC)
MAX_TIME = datetime(9998, 12, 31, tzinfo=UTC)
"""Timestamps outside these are refused: every period key (ISO week, month) of a time in range is valid."""


class Role(StrEnum):
    """Who produced a turn."""

    USER = "user"
    ASSISTANT = "assistant"
    SYSTEM = "system"
    TOOL = "tool"


class RecordKind(StrEnum):
    """What a record is: the one vocabulary of record kinds. Turns are ranked; every other kind is evidence for
    the turn it is anchored to: its ±1-turn ``window``, the kinds derived from what a user stated (``fact`` ...
    ``failure_pattern``), and the memory files' summary layers ``l0`` (title) and ``l1`` (abstract).

    >>> RecordKind.FACT.code, RecordKind.FACT.derived, RecordKind.WINDOW.derived, RecordKind.L1.code
    (2, True, False, 8)
    """

    TURN = "turn"
    WINDOW = "window"
    FACT = "fact"
    PREFERENCE = "preference"
    EVENT = "event"
    PROCEDURE = "procedure"
    FAILURE_PATTERN = "failure_pattern"
    L0 = "l0"
    L1 = "l1"

    @property
    def code(self) -> int:
        """The kind's number in the record catalog (an ``int8`` column; the order of the members)."""
        return _KIND_ORDER.index(self)

    @property
    def derived(self) -> bool:
        """Derived from a turn's statement by the LLM-free extractors (:mod:`memory_ext.ingest.kinds`)."""
        return self in _STATED

    @property
    def stated(self) -> bool:
        """What a user stated: such a record, and its turn, is never made cold (:mod:`memory_ext.store.tiers`)."""
        return self in _STATED


_KIND_ORDER: tuple[RecordKind, ...] = tuple(RecordKind)
_STATED = frozenset({RecordKind.FACT, RecordKind.PREFERENCE, RecordKind.EVENT, RecordKind.PROCEDURE,
                     RecordKind.FAILURE_PATTERN})


class QuestionType(StrEnum):
    """What a question asks for, as a planner classifies it (``SearchPlan.question_type``); each type has its
    ranking strategy (:data:`memory_ext.plan.strategy.STRATEGIES`)."""

    SINGLE = "single"
    AGGREGATE = "aggregate"
    TEMPORAL = "temporal"
    COMPARISON = "comparison"
    PERSONALIZED_ADVICE = "personalized_advice"
    PRIOR_ASSISTANT_RESPONSE = "prior_assistant_response"
    OTHER = "other"


def to_utc(value: Any, field: str = "timestamp") -> datetime | None:
    """Normalise a timestamp to an aware UTC datetime (naive datetimes are taken as UTC).

    >>> to_utc("2023-05-08T13:56:00").isoformat()
    '2023-05-08T13:56:00+00:00'
    """
    if value is None:
        return None
    if isinstance(value, datetime):
        dt = value
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        if not math.isfinite(value):
            raise InvalidTurnError(field, value, "give a finite POSIX time, an ISO-8601 string or a datetime")
        try:
            dt = datetime.fromtimestamp(float(value), tz=UTC)
        except (OverflowError, OSError, ValueError):
            raise InvalidTurnError(field, value, f"give a POSIX time between {MIN_TIME.timestamp():.0f} and "
                                                 f"{MAX_TIME.timestamp():.0f} (years 1000-9998)") from None
    elif isinstance(value, str):
        try:
            dt = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
        except ValueError:
            raise InvalidTurnError(
                field, value, "give an ISO-8601 string such as '2023-05-08T13:56:00', a datetime or a POSIX time"
            ) from None
    else:
        raise InvalidTurnError(field, value, "give a datetime, an ISO-8601 string or a POSIX time")
    try:
        dt = dt.replace(tzinfo=UTC) if dt.tzinfo is None else dt.astimezone(UTC)
        in_range = MIN_TIME <= dt <= MAX_TIME
    except (OverflowError, ValueError):
        in_range = False
    if not in_range:
        raise InvalidTurnError(field, value, f"give a time between {MIN_TIME.date()} and {MAX_TIME.date()}")
    return dt


def check_id(value: Any, field: str, *, required: bool) -> str | None:
    """Validate a namespace/session id: non-empty, at most 256 characters, no control characters."""
    if value is None:
        if required:
            raise InvalidNamespaceError(field, value, "give a non-empty string id")
        return None
    if not isinstance(value, str):
        raise InvalidNamespaceError(field, value, "ids are strings")
    if not value.strip():
        raise InvalidNamespaceError(field, value, "give a non-empty id (not only whitespace)")
    if len(value) > MAX_ID_LENGTH:
        raise InvalidNamespaceError(field, value, f"ids are at most {MAX_ID_LENGTH} characters (got {len(value)})")
    if any(unicodedata.category(ch) in ("Cc", "Cf", "Cs") for ch in value):
        raise InvalidNamespaceError(field, value, "remove control characters from the id")
    return value


class _Value(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    def __init__(self, /, **data: Any) -> None:
        # BaseModel's own signature, declared so that type checkers let the subclasses' own ``__init__`` pass
        # their fields to it (pydantic's dataclass transform would give this field-less base a no-argument one).
        super().__init__(**data)


class Namespace(_Value):
    """Who a memory belongs to: ``(user_id, agent_id=None, session_id=None)``.

    The storage partition is ``(user_id, agent_id)``: a search sees exactly the rows of that pair, never another
    user's or another agent's. ``session_id`` narrows further: on write it is the session of turns that carry
    none; on search and forget it restricts to that session.

    >>> Namespace("alice", agent_id="travel-bot").key
    ('alice', 'travel-bot')
    """

    user_id: str
    agent_id: str | None = None
    session_id: str | None = None

    def __init__(self, user_id: str | None = None, agent_id: str | None = None, session_id: str | None = None,
                 **kw: Any) -> None:
        if user_id is None and "user_id" in kw:
            user_id = kw.pop("user_id")
        super().__init__(user_id=check_id(user_id, "namespace.user_id", required=True),
                         agent_id=check_id(agent_id, "namespace.agent_id", required=False),
                         session_id=check_id(session_id, "namespace.session_id", required=False), **kw)

    @property
    def key(self) -> tuple[str, str]:
        """The storage partition key ``(user_id, agent_id or '')``."""
        return (self.user_id, self.agent_id or "")

    @classmethod
    def coerce(cls, value: Namespace | str | dict[str, Any]) -> Namespace:
        """Accept a Namespace, a plain user-id string or a mapping."""
        if isinstance(value, Namespace):
            return value
        if isinstance(value, str):
            return cls(value)
        if isinstance(value, dict):
            unknown = set(value) - {"user_id", "agent_id", "session_id"}
            if unknown:
                raise InvalidNamespaceError("namespace", value, f"unknown keys {sorted(unknown)}; "
                                                               "use user_id, agent_id, session_id")
            return cls(**value)
        raise InvalidNamespaceError("namespace", value, "pass a Namespace, a user-id string or a dict")


TOOL_METADATA_KEYS: tuple[str, ...] = ("tool_name", "tool_call_id", "is_error")
"""The ``Turn.metadata`` keys reserved for a tool turn's fields (:attr:`Turn.tool_name`, :attr:`Turn.tool_call_id`,
:attr:`Turn.is_error`). A turn is stored with these fields inside its metadata JSON under these keys (no schema
change: SQLite, PostgreSQL, export/import and the metadata filters see them there, and a search item's
``metadata`` carries them); a turn read back, or built from a metadata that holds them, has them as fields."""


class Turn(_Value):
    """One conversation turn, kept losslessly.

    A tool turn (``role="tool"``, the result of a tool call) says which tool it answers (``tool_name``), which call
    (``tool_call_id``, the id in the calling turn's ``tool_calls``) and whether the result is an error
    (``is_error``: LangChain's ``ToolMessage.status == "error"``, LlamaIndex's ``is_error``, MCP's ``isError``).

    >>> Turn(role="user", content="hi", speaker="Ana", external_id="D1:1").speaker
    'Ana'
    >>> failed = Turn(role="tool", content="HTTP 422: check_in must be YYYY-MM-DD", tool_name="book_hotel",
    ...               tool_call_id="call_1", is_error=True)
    >>> failed.is_error, failed.stored_metadata()
    (True, {'tool_name': 'book_hotel', 'tool_call_id': 'call_1', 'is_error': True})
    >>> Turn(role="tool", content="ok", metadata={"tool_name": "book_hotel"}).tool_name   # as stored
    'book_hotel'
    """

    role: Role
    content: str
    speaker: str | None = None
    timestamp: datetime | None = None
    session_id: str | None = None
    external_id: str | None = None
    tool_calls: tuple[dict[str, Any], ...] = ()
    attachments: tuple[dict[str, Any], ...] = ()
    metadata: dict[str, Any] = Field(default_factory=dict)
    id: str | None = None
    tool_name: str | None = None
    """The tool whose result this turn is (a tool turn); None otherwise."""
    tool_call_id: str | None = None
    """The id of the call this tool turn answers (as in the calling turn's ``tool_calls``)."""
    is_error: bool = False
    """True when this tool turn's result is an error, as the framework flagged it."""

    def __init__(self, role: Any = None, content: Any = None, **kw: Any) -> None:
        if role is None and "role" in kw:
            role = kw.pop("role")
        if content is None and "content" in kw:
            content = kw.pop("content")
        if isinstance(role, str):
            role = role.strip().lower()
        valid_roles = [r.value for r in Role]
        if role not in valid_roles:
            raise InvalidTurnError("role", role, "valid roles: " + ", ".join(valid_roles))
        if not isinstance(content, str):
            raise InvalidTurnError("content", content, "content must be a string")
        if not content.strip() and not kw.get("tool_calls") and not kw.get("attachments"):
            raise InvalidTurnError("content", content, "give non-empty text (or tool_calls / attachments)")
        check_text("content", content, InvalidTurnError)  # no NUL, no lone surrogate (memory_ext.validate)
        if "timestamp" in kw:
            kw["timestamp"] = to_utc(kw["timestamp"])
        for name in ("speaker", "external_id"):
            if kw.get(name) is not None and not isinstance(kw[name], str):
                raise InvalidTurnError(name, kw[name], f"{name} must be a string or None")
            check_text(name, kw.get(name), InvalidTurnError)
        if kw.get("session_id") is not None:
            check_id(kw["session_id"], "session_id", required=False)
        check_json("metadata", kw.get("metadata"), InvalidTurnError, what="metadata")
        _tool_fields(kw)
        for name in ("tool_calls", "attachments"):  # each item nests at most MAX_JSON_DEPTH levels
            if isinstance(kw.get(name), (list, tuple)):
                for i, item in enumerate(kw[name]):
                    check_json(f"{name}[{i}]", item, InvalidTurnError, what=name)
        super().__init__(role=role, content=content, **kw)

    def stored_metadata(self) -> dict[str, Any]:
        """The metadata as it is stored: ``metadata`` with the tool fields that are set under
        :data:`TOOL_METADATA_KEYS`."""
        extra: dict[str, Any] = {}
        if self.tool_name is not None:
            extra["tool_name"] = self.tool_name
        if self.tool_call_id is not None:
            extra["tool_call_id"] = self.tool_call_id
        if self.is_error:
            extra["is_error"] = True
        return {**self.metadata, **extra} if extra else dict(self.metadata)

    @classmethod
    def coerce(cls, value: Turn | dict[str, Any], index: int = 0) -> Turn:
        """Accept a Turn or a mapping; errors name the position (``turns[3].role``). In a mapping, MCP's
        ``isError`` (a tool result's error flag) is taken for ``is_error``.

        >>> Turn.coerce({"role": "tool", "content": "HTTP 503", "tool_name": "search", "isError": True}).is_error
        True
        """
        if isinstance(value, Turn):
            return value
        if not isinstance(value, dict):
            raise InvalidTurnError(f"turns[{index}]", value, "each turn is a Turn or a mapping with role and content")
        if "isError" in value and "is_error" not in value:
            value = {("is_error" if k == "isError" else k): v for k, v in value.items()}
        try:
            return cls(**value)
        except InvalidTurnError as exc:
            raise type(exc)(f"turns[{index}].{exc.field}", exc.value, exc.fix) from None
        except Exception as exc:  # noqa: BLE001 -- pydantic, datetime and ** raise several types; each is a bad turn
            raise InvalidTurnError(f"turns[{index}]", value, f"fix the turn's fields ({exc})") from None


def _tool_fields(kw: dict[str, Any]) -> None:
    """Check the tool fields of a turn's keyword arguments and lift those its metadata holds under the reserved
    keys (:data:`TOOL_METADATA_KEYS`) into them: a stored turn reads back with the fields it was written with.
    A metadata value of another type (not a non-empty string, not a bool for ``is_error``) stays metadata."""
    meta = kw.get("metadata")
    if isinstance(meta, dict) and any(k in meta for k in TOOL_METADATA_KEYS):
        meta = dict(meta)
        for key in TOOL_METADATA_KEYS:
            value = meta.get(key)
            if not (isinstance(value, bool) if key == "is_error" else isinstance(value, str) and value.strip()):
                continue
            del meta[key]
            given = kw.get(key)
            if given is None or (key == "is_error" and given is False):
                kw[key] = value
            elif given != value:
                raise InvalidTurnError(f"metadata.{key}", value, f"{key} is a field of the turn ({given!r}); "
                                                                 f"drop metadata[{key!r}] or make it equal")
        kw["metadata"] = meta
    for name in ("tool_name", "tool_call_id"):
        value = kw.get(name)
        if value is not None and (not isinstance(value, str) or not value.strip()):
            raise InvalidTurnError(name, value, f"{name} is a non-empty string or None")
        check_text(name, value, InvalidTurnError)
    if "is_error" in kw and not isinstance(kw["is_error"], bool):
        raise InvalidTurnError("is_error", kw["is_error"], "is_error is True or False")


Period = Literal["daily", "weekly", "monthly", "context"]


class IndexHook(_Value):
    """What the system prompt shows of a memory file (its id is the file's id).

    ``title`` is the L0 layer, ``abstract`` the L1; ``retrieve(hook.id)`` returns the whole file (L2).
    ``status`` is ``open`` (a daily file still growing), ``closed``, ``merged`` (into a weekly file),
    ``evicted`` (its low-value turns moved to the cold tier by the monthly eviction) or ``main`` (a monthly file).
    """

    id: str
    namespace: Namespace
    period: Period
    period_key: str
    """``2026-11-30`` (daily), ``2026-W48`` (weekly), ``2026-11`` (monthly), the archive time (context)."""
    status: str
    title: str = ""
    abstract: str = ""
    key_facts: tuple[str, ...] = ()
    entities: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    importance: int = 50
    """0-100; set it with ``engine.set_importance(hook_id, value)``."""
    access_count: int = 0
    token_count: int = 0
    truncated: bool = False
    start: datetime | None = None
    end: datetime | None = None
    archived_at: datetime | None = None
    sources: tuple[str, ...] = ()
    """The files this one was merged from (weekly: daily files; monthly: weekly files)."""
    merged_into: str | None = None
    summary_source: str = "heuristic"


class MemoryFile(_Value):
    """A whole memory file, as ``engine.retrieve(hook_id)`` returns it.

    ``turns`` are the file's turns in order; a turn cut by the hard token threshold appears as the part that
    belongs to this file (``metadata["part"]`` says which characters). ``text`` renders the file as Markdown;
    ``raw`` is the verbatim context saved by ``pre_compress`` (None for other files).
    """

    hook: IndexHook
    turns: tuple[Turn, ...] = ()
    text: str = ""
    raw: str | None = None
    meta: dict[str, Any] = Field(default_factory=dict)

    @property
    def id(self) -> str:
        return self.hook.id


class ActionState(_Value):
    """What the agent is doing now; it changes what retrieval looks for.

    Build it by hand, or derive it from an agent's recent turns and its tools' schemas with
    :func:`memory_ext.derive_action_state` (what the LangChain middleware and the LlamaIndex memory do).

    >>> ActionState(last_tool_name="flight_search", failure_signal="timeout").failure_signal
    'timeout'
    """

    current_subgoal: str | None = None
    tentative_action: str | None = None
    last_tool_name: str | None = None
    last_tool_args: dict[str, Any] | None = None
    """The arguments of the last tool call (parameter name -> value, as the call gave them); None: no call."""
    last_tool_result: str | None = None
    missing_slots: tuple[str, ...] = ()
    slot_hints: dict[str, str] | None = None
    """What each missing slot asks for (slot -> its parameter's description in the tool's schema, as
    :func:`memory_ext.derive_action_state` finds it); a slot route searches for a value of that description."""
    known_constraints: tuple[str, ...] = ()
    available_tools: tuple[str, ...] = ()
    failure_signal: str | None = None
    token_budget: int | None = None
    recent_context: str | None = None
    recent_calls: tuple[dict[str, Any], ...] = ()
    """The calls of the recent turns, oldest first, the last call included (``{"name": tool, "args": {...}}``, at
    most :data:`memory_ext.plan.derive.RECENT_CALLS`): what the agent has done so far in the task. The next-step
    route and the procedure lift read it (the pages of tools already used describe steps behind the agent)."""


class RouteGoal(StrEnum):
    """What evidence need a route of a :class:`SearchPlan` serves (a ``str``: ``route.goal == "query"`` holds).

    The main route (``QUERY``) is the question itself; the others are secondary needs a planner adds.
    """

    QUERY = "query"
    """The question itself: the main route of every plan."""
    SPEAKER = "speaker"
    """One of several speakers the question names (a comparison): that speaker's evidence."""
    OPENING = "opening"
    """The first sentences of a conversation excerpt: the topic raised."""
    FOCUS = "focus"
    """The last sentences of a conversation excerpt: where the conversation is now."""
    ACTION = "action"
    """What the agent is doing (its :class:`ActionState`)."""
    SLOT = "slot"
    """One missing slot of the agent's action."""
    OTHER = "other"
    """A further need a planner named itself (an LLM planner's extra routes); ``EvidenceRoute.name`` says which."""


MAIN_ROUTE_WEIGHT = 1.0
"""Weight of the main route (goal ``query``) in the fusion of routes."""
SECONDARY_ROUTE_WEIGHT = 0.5
"""Weight of every other route (speakers, action, slots, conversation parts) next to the main route."""


class EvidenceRoute(_Value):
    """One evidence need of a plan, as its planner typed it.

    ``name`` tells routes of one plan apart (``"query"``, ``"speaker:Ana"``, ``"slot:date"``, or a name an LLM
    planner chose); it defaults to the goal and labels the route's channel calls (``keyword@action``) and its
    parts of ``explain``. ``speakers`` are the speakers the route is about (their turns get a boost, and the
    evidence channel looks their entities up); ``boost_kinds`` the derived record kinds whose match lifts the
    turn they come from (an action with a failure pulls failure patterns and procedures); ``weight`` how much the
    route counts when routes are fused — when left out, :data:`MAIN_ROUTE_WEIGHT` for the main route and
    :data:`SECONDARY_ROUTE_WEIGHT` for any other.

    >>> route = EvidenceRoute(goal="speaker", name="speaker:Ana", queries=("Ana's dog",), speakers=("Ana",))
    >>> route.goal == "speaker", route.weight, EvidenceRoute(goal="query", queries=("q",)).name
    (True, 0.5, 'query')
    """

    goal: RouteGoal
    name: str = ""
    queries: tuple[str, ...]
    speakers: tuple[str, ...] = ()
    boost_kinds: tuple[RecordKind, ...] = ()
    weight: float = Field(default=MAIN_ROUTE_WEIGHT, ge=0.0, allow_inf_nan=False)
    time_filter: tuple[datetime, datetime] | None = None

    @model_validator(mode="before")
    @classmethod
    def _defaults_by_goal(cls, data: Any) -> Any:
        """``name`` defaults to the goal, ``weight`` to the main or the secondary route weight."""
        if isinstance(data, dict) and "goal" in data:
            goal = str(data["goal"].value if isinstance(data["goal"], RouteGoal) else data["goal"])
            data = dict(data)
            if not data.get("name"):
                data["name"] = goal
            if data.get("weight") is None:
                data["weight"] = MAIN_ROUTE_WEIGHT if goal == RouteGoal.QUERY else SECONDARY_ROUTE_WEIGHT
        return data


class SearchPlan(_Value):
    """How a search was carried out: the question type and the routes (evidence needs), main route first."""

    question_type: str = "other"
    routes: tuple[EvidenceRoute, ...] = ()
    planner: str = "basic"


class ChannelError(_Value):
    """A recall channel (or a model) that failed during one search; the result is degraded, not empty."""

    channel: str
    error_type: str
    message: str


class RetrievedItem(_Value):
    """One ranked memory. ``turn_ids`` and ``external_ids`` list the turns it covers, most relevant first.

    ``score`` is a bounded relevance in [0, 1], never higher than the score of the item above it, and comparable
    across queries and store sizes well enough for a threshold (:mod:`memory_ext.rank.calibration`): with the e5
    embedder it is a logistic function of the query-item cosine and of the share of the query's words the item
    contains (fitted leave-one-conversation-out on stores of 3 to ~400 turns: at 0.5, at least 90 % of rank-1
    gold kept and 70 % of off-topic results dropped at every size measured, docs/benchmarks.md); with other
    embedders, a logistic of the item's fused score (``zscore`` fusion) or its RRF score over the highest a
    turn could reach (``rrf``). ``raw_score`` is the unbounded value that ordered the pool (fused, or the
    reranker's blend), also in ``explanation``.

    ``metadata`` is the ``Turn.metadata`` of the item's source turn (filter on it with
    ``search(filters={"metadata": {...}})``).

    >>> item = RetrievedItem(id="r1", text="I'm allergic to shellfish.", score=0.93, metadata={"topic": "health"})
    >>> item.face_metadata()["topic"], item.face_metadata()["score"]
    ('health', 0.93)
    """

    id: str
    text: str
    score: float
    kind: RecordKind = RecordKind.TURN
    turn_ids: tuple[str, ...] = ()
    external_ids: tuple[str | None, ...] = ()
    session_id: str | None = None
    timestamp: datetime | None = None
    speaker: str | None = None
    role: Role | None = None
    channels: dict[str, int] = Field(default_factory=dict)
    """channel name -> 1-based rank in that channel."""
    explanation: dict[str, Any] | None = None
    raw_score: float | None = None
    """The unbounded score that ordered the candidates (fused z-score sum, RRF score, or reranked blend)."""
    metadata: dict[str, Any] = Field(default_factory=dict)
    """The metadata of the item's source turn, as it was stored (a tool turn's ``tool_name``, ``tool_call_id`` and
    ``is_error`` under those keys, :data:`TOOL_METADATA_KEYS`)."""
    tool_calls: tuple[dict[str, Any], ...] = ()
    """The tool calls of the item's source turn (an assistant turn that called tools may have no text)."""

    def face_metadata(self) -> dict[str, Any]:
        """JSON-friendly metadata of the item, as the framework faces attach it to documents and nodes: the
        turn's own ``metadata`` keys, then (winning on a clash) ``id``, ``score``, ``raw_score``, ``kind``,
        ``channels``, ``turn_ids``, ``external_ids``, ``session_id``, ``timestamp`` and ``date`` (ISO 8601),
        ``speaker``, ``role`` and ``source`` (the turn's ``metadata["source"]`` if it has one, else
        ``memory://<session or ->/<first turn id>``)."""
        stamp = self.timestamp.isoformat() if self.timestamp else None
        source = self.metadata.get("source")
        if not isinstance(source, str) or not source:
            source = f"memory://{self.session_id or '-'}/{self.turn_ids[0] if self.turn_ids else self.id}"
        return {
            **self.metadata,
            "id": self.id,
            "score": self.score,
            "raw_score": self.raw_score,
            "kind": str(self.kind),
            "channels": dict(self.channels),
            "turn_ids": list(self.turn_ids),
            "external_ids": list(self.external_ids),
            "session_id": self.session_id,
            "timestamp": stamp,
            "date": stamp,
            "speaker": self.speaker,
            "role": str(self.role) if self.role is not None else None,
            "source": source,
        }


class SearchResult(_Value):
    """What ``MemoryEngine.search`` returns."""

    query: str
    items: tuple[RetrievedItem, ...] = ()
    context: str = ""
    plan: SearchPlan | None = None
    channel_errors: tuple[ChannelError, ...] = ()
    warnings: tuple[str, ...] = ()
    timings_ms: dict[str, float] = Field(default_factory=dict)
    trace: dict[str, Any] | None = None
    """With ``search(..., trace=True)``: the plan, each route's channel candidates and its best turns, and the
    stage timings. Kept in memory only; nothing is written anywhere."""
    pending: int = 0
    """Records of the namespace whose vectors (or sparse encodings) the background indexer has not written yet:
    the search found them only through the channels that need no model (keyword, time, graph, evidence)."""

    @property
    def degraded(self) -> bool:
        """True when a channel, model or fallback made this result weaker than configured."""
        return bool(self.channel_errors)

    def with_pending(self, pending: int, waited_ms: float | None) -> SearchResult:
        """This result with ``pending`` records and, when the search waited for the indexer, the wait's timing."""
        if waited_ms is None and not pending:
            return self
        timings = self.timings_ms if waited_ms is None else {**self.timings_ms, "pending_wait": waited_ms}
        return self.model_copy(update={"pending": pending, "timings_ms": timings})
