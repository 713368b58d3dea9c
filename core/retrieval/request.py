"""Stage 0, the request: a search's arguments validated once into a :class:`SearchRequest`.

Bad input raises :class:`~memory_ext.errors.InvalidQueryError` (or :class:`~memory_ext.errors.InvalidNamespaceError`)
naming the argument, the value and the fix, before anything is read.

>>> from memory_ext.config import LimitsConfig
>>> request = parse_request("Where does Lena live?", "sam", k=3, limits=LimitsConfig(), now="2023-05-08")
>>> request.namespace.user_id, request.k, request.reference.isoformat(), request.record_filter.empty
('sam', 3, '2023-05-08T00:00:00+00:00', True)
>>> parse_request("  ", "sam", limits=LimitsConfig())
Traceback (most recent call last):
...
memory_ext.errors.InvalidQueryError: query: got '  '; give a non-empty question or statement
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from ..config import LimitsConfig
from ..errors import InvalidQueryError, ValidationError
from ..models import ActionState, Namespace, to_utc
from ..store.filters import RecordFilter
from ..validate import check_json, check_text

__all__ = ["SearchRequest", "coerce_action_state", "parse_request"]


@dataclass(frozen=True)
class SearchRequest:
    """What one search asks for, validated (see :meth:`memory_ext.MemoryEngine.search` for the meaning)."""

    query: str
    namespace: Namespace
    k: int
    action_state: ActionState | None
    reference: datetime
    """The "now" relative times in the query are resolved against (aware UTC)."""
    record_filter: RecordFilter
    as_of: float | None
    """UTC epoch seconds: return what was true then (None: what is true now)."""
    explain: bool = False
    trace: bool = False
    include_cold: bool = False
    min_score: float | None = None
    """Items whose bounded relevance (``score``) is below it are left out (None: every item is kept)."""


def coerce_action_state(value: ActionState | Mapping[str, Any] | None) -> ActionState | None:
    """An :class:`ActionState` from itself, a mapping of its fields, or None."""
    if value is None or isinstance(value, ActionState):
        return value
    if isinstance(value, Mapping):
        try:
            return ActionState(**value)
        except (TypeError, ValueError) as exc:  # pydantic's ValidationError is a ValueError
            raise InvalidQueryError("action_state", dict(value), f"fix the action state's fields ({exc})") from None
    raise InvalidQueryError("action_state", value, "pass an ActionState, a mapping of its fields, or None")


def parse_request(query: str, namespace: Namespace | str, *, limits: LimitsConfig, k: int = 10,
                  filters: Mapping[str, Any] | None = None,
                  action_state: ActionState | Mapping[str, Any] | None = None, explain: bool = False,
                  now: datetime | str | float | None = None, trace: bool = False, include_cold: bool = False,
                  as_of: datetime | str | float | None = None, min_score: float | None = None) -> SearchRequest:
    """Validate a search's arguments, in the order a caller reads them (namespace, query, k, action state,
    now, filters, as_of, min_score)."""
    ns = Namespace.coerce(namespace)
    if not isinstance(query, str) or not query.strip():
        raise InvalidQueryError("query", query, "give a non-empty question or statement")
    check_text("query", query, InvalidQueryError)  # no NUL, no lone surrogate (memory_ext.validate)
    if len(query) > limits.max_query_chars:
        raise InvalidQueryError("query", query, f"queries are at most {limits.max_query_chars} "
                                                "characters (limits.max_query_chars)")
    if isinstance(k, bool) or not isinstance(k, int) or k <= 0 or k > limits.max_k:
        raise InvalidQueryError("k", k, f"give an integer between 1 and {limits.max_k}")
    state = coerce_action_state(action_state)
    try:
        reference = to_utc(now, "now") if now is not None else datetime.now(UTC)
    except ValidationError as exc:
        raise InvalidQueryError(exc.field, exc.value, exc.fix) from None
    assert reference is not None
    if isinstance(filters, Mapping):
        check_json("filters", dict(filters), InvalidQueryError, what="filters")
    record_filter = RecordFilter.parse(filters, ns.session_id)
    try:
        as_of_dt = to_utc(as_of, "as_of") if as_of is not None else None
    except ValidationError as exc:
        raise InvalidQueryError(exc.field, exc.value, exc.fix) from None
    if min_score is not None and (isinstance(min_score, bool) or not isinstance(min_score, int | float)
                                  or not 0.0 <= min_score <= 1.0):
        raise InvalidQueryError("min_score", min_score, "give a number between 0 and 1 (item scores are bounded "
                                                        "relevances; 0.5 is the documented line), or None")
    return SearchRequest(query=query, namespace=ns, k=k, action_state=state, reference=reference,
                         record_filter=record_filter, as_of=as_of_dt.timestamp() if as_of_dt is not None else None,
                         explain=explain, trace=trace, include_cold=include_cold,
                         min_score=float(min_score) if min_score is not None else None)
