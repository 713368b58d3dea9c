"""Search filters on records: validated once into a :class:`RecordFilter`, turned into SQL only here.

>>> f = RecordFilter.parse({"speaker": "Ana", "since": "2023-05-01"}, session_id=None)
>>> f.speakers, f.since, f.empty
(('Ana',), 1682899200.0, False)
>>> filter_sql(f)
('speaker IN (?) AND ref_ts >= ?', ['Ana', 1682899200.0])
>>> RecordFilter.parse({"colour": "red"}, session_id=None)  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
memory_ext.errors.InvalidQueryError: filters.colour: got 'red'; valid filter keys: session_id, speaker, ...
>>> RecordFilter.parse({"role": "robot"}, session_id=None)
Traceback (most recent call last):
...
memory_ext.errors.InvalidQueryError: filters.role: got 'robot'; valid roles: assistant, system, tool, user
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import InvalidQueryError, ValidationError
from ..models import Role, to_utc
from .catalog import KIND_CODES
from .metadata_filter import MetadataFilter, metadata_sql, parse_metadata_filter

__all__ = ["CLOSED_VALUES", "FILTER_KEYS", "RecordFilter", "filter_sql"]

FILTER_KEYS = ("session_id", "speaker", "role", "since", "until", "kinds", "metadata")
"""The keys ``MemoryEngine.search(filters=...)`` accepts."""
CLOSED_VALUES: dict[str, tuple[str, tuple[str, ...]]] = {
    "role": ("roles", tuple(sorted(r.value for r in Role))),
    "kinds": ("kinds", tuple(sorted(KIND_CODES))),
}
"""Filter keys whose values come from a closed set: a typo is an error, not a filter that matches nothing."""


def _as_list(name: str, value: Any) -> tuple[str, ...]:
    values = [value] if isinstance(value, str) else value
    if not isinstance(values, (list, tuple, set, frozenset)) or not values or \
            not all(isinstance(v, str) and v for v in values):
        raise InvalidQueryError(f"filters.{name}", value, "give a non-empty string or a list of strings")
    return tuple(values)


@dataclass(frozen=True)
class RecordFilter:
    """Which records a search may return: each non-empty field is one condition (all must hold)."""

    namespace_session: str | None = None
    """The session the search's namespace names (``Namespace.session_id``)."""
    session_ids: tuple[str, ...] = ()
    speakers: tuple[str, ...] = ()
    roles: tuple[str, ...] = ()
    """Source roles of the records (``user``, ``assistant``, ...)."""
    kinds: tuple[str, ...] = ()
    since: float | None = None
    """Earliest reference time (UTC epoch seconds), inclusive."""
    until: float | None = None
    """Latest reference time (UTC epoch seconds), inclusive."""
    metadata: MetadataFilter | None = None
    """Conditions on the metadata of the record's source turn (:mod:`memory_ext.store.metadata_filter`)."""

    @property
    def empty(self) -> bool:
        """True when the filter lets every record through."""
        return self == RecordFilter()

    @classmethod
    def parse(cls, filters: Mapping[str, Any] | None, session_id: str | None) -> RecordFilter:
        """Validate ``search(filters=...)`` (keys :data:`FILTER_KEYS`); bad input raises
        :class:`~memory_ext.errors.InvalidQueryError` naming the key, the value and the fix."""
        if filters is not None and not isinstance(filters, Mapping):
            raise InvalidQueryError("filters", filters, "pass a mapping such as {'session_id': 's1'}, or None")
        filters = dict(filters or {})
        unknown = set(filters) - set(FILTER_KEYS)
        if unknown:
            raise InvalidQueryError(f"filters.{sorted(unknown)[0]}", filters[sorted(unknown)[0]],
                                    "valid filter keys: " + ", ".join(FILTER_KEYS))
        lists = {key: _as_list(key, filters[key]) if filters.get(key) is not None else ()
                 for key in ("session_id", "speaker", "role", "kinds")}
        for key, (name, valid) in CLOSED_VALUES.items():
            bad = next((v for v in lists[key] if v not in valid), None)
            if bad is not None:
                raise InvalidQueryError(f"filters.{key}", bad, f"valid {name}: " + ", ".join(valid))
        bounds: dict[str, float | None] = {}
        for key in ("since", "until"):
            bounds[key] = None
            if filters.get(key) is not None:
                try:
                    ts = to_utc(filters[key], f"filters.{key}")
                except ValidationError as exc:
                    raise InvalidQueryError(exc.field, exc.value, exc.fix) from None
                assert ts is not None
                bounds[key] = ts.timestamp()
        metadata = parse_metadata_filter(filters["metadata"]) if filters.get("metadata") is not None else None
        return cls(namespace_session=session_id, session_ids=lists["session_id"], speakers=lists["speaker"],
                   roles=lists["role"], kinds=lists["kinds"], since=bounds["since"], until=bounds["until"],
                   metadata=metadata)


def filter_sql(record_filter: RecordFilter, dialect: str = "sqlite") -> tuple[str, list[Any]]:
    """A SQL condition on the ``records`` table (and its arguments); ``""`` when the filter is empty.
    ``dialect``: ``sqlite`` or ``postgres``, whose text the condition is written in (placeholders, the first turn
    of a record, the metadata conditions)."""
    postgres = dialect == "postgres"
    mark = "%s" if postgres else "?"
    clauses: list[str] = []
    args: list[Any] = []
    if record_filter.namespace_session is not None:
        clauses.append(f"session_id = {mark}")
        args.append(record_filter.namespace_session)
    for column, values in (("session_id", record_filter.session_ids), ("speaker", record_filter.speakers),
                           ("source_role", record_filter.roles), ("kind", record_filter.kinds)):
        if values:
            clauses.append(f"{column} IN ({','.join([mark] * len(values))})")
            args.extend(values)
    for column_op, bound in (("ref_ts >=", record_filter.since), ("ref_ts <=", record_filter.until)):
        if bound is not None:
            clauses.append(f"{column_op} {mark}")
            args.append(bound)
    if record_filter.metadata is not None:  # on the source turn's metadata (turns.id is unique: one index probe)
        where, meta_args = metadata_sql(record_filter.metadata, "t.metadata", dialect)
        first_turn = "((records.turn_ids)::jsonb ->> 0)" if postgres else "json_extract(records.turn_ids, '$[0]')"
        clauses.append(f"EXISTS (SELECT 1 FROM turns t WHERE t.id = {first_turn} AND {where})")
        args.extend(meta_args)
    return " AND ".join(clauses), args
