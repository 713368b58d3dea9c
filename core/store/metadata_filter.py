"""Filters on the metadata of turns (``search(filters={"metadata": {...}})``): parsed once, turned into SQL here.

The language is LangGraph's store filter (``{"key": value}`` or ``{"key": {"$op": value}}`` with ``$eq``,
``$ne``, ``$gt``, ``$gte``, ``$lt``, ``$lte``), plus ``$in`` / ``$nin`` (a list of values) and ``$and`` /
``$or`` (a list of filters) for the LlamaIndex and LangChain translations. Several keys, or several operators
on one key, must all hold. A record is matched on the metadata of its source turn (a derived fact on the turn
it came from), in SQLite with ``json_extract`` — before ranking, never by over-fetching and dropping.
The same implementation filters the LangGraph store's items (``MemoryStore.search(filter=...)``, on the item's
JSON value: :mod:`memory_ext.store.items`), with the same semantics; its errors name ``filter`` instead of
``filters.metadata``.

Semantics (those of LangGraph's ``InMemoryStore`` where it defines them; of its ``PostgresStore`` — JSONB —
where the in-memory store raises):

* ``value`` / ``$eq``: equal, with JSON types (``1`` matches ``1`` and ``1.0``, not ``"1"``); a nested mapping
  matches a nested object key by key; a list matches an equal list. A key never set matches nothing
  (unless the value is ``None``).
* ``$ne`` / ``$nin``: not equal / in none of the values; a key never set matches (``None != value``).
* ``$gt`` ``$gte`` ``$lt`` ``$lte``: a number compares with numbers, a string with strings (ISO dates sort);
  a key never set, or of the other type, matches nothing (``InMemoryStore`` raises ``TypeError`` here).
* An unknown operator, an operator on a wrong value, a key with ``"``: :class:`~memory_ext.errors.InvalidQueryError`.

>>> f = parse_metadata_filter({"topic": "travel", "priority": {"$gte": 2}})
>>> sql, args = metadata_sql(f, "m")
>>> sql.count("json_extract"), args[:3]
(2, ['$."topic"', '$."topic"', 'travel'])
>>> parse_metadata_filter({"priority": {"$near": 2}})  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
memory_ext.errors.InvalidQueryError: filters.metadata.priority: got {'$near': 2}; operators are $eq, ...
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ..errors import InvalidQueryError

__all__ = ["OPERATORS", "Condition", "Group", "MetadataFilter", "metadata_sql", "parse_metadata_filter"]

OPERATORS = ("$eq", "$ne", "$gt", "$gte", "$lt", "$lte", "$in", "$nin")
"""The operators a metadata condition takes (LangGraph's six, plus ``$in`` and ``$nin``)."""
MAX_CONDITIONS = 200
"""A metadata filter holds at most this many conditions."""


@dataclass(frozen=True)
class Condition:
    """``path`` (keys from the top of the metadata) ``op`` ``value``."""

    path: tuple[str, ...]
    op: str
    value: Any


@dataclass(frozen=True)
class Group:
    """All (``and``) or any (``or``) of its parts."""

    mode: Literal["and", "or"]
    parts: tuple[Condition | Group, ...]


MetadataFilter = Group
"""A parsed metadata filter: a :class:`Group` of conditions and groups."""


_ROOT = "filters.metadata"


def _fail(field: str, value: Any, fix: str, root: str | None = None) -> InvalidQueryError:
    root = root or _ROOT
    return InvalidQueryError(f"{root}{'.' if field else ''}{field}", value, fix)


def _scalar(value: Any) -> bool:
    return value is None or isinstance(value, (str, int, float, bool))


def _json_value(field: str, value: Any) -> None:
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError):
        raise _fail(field, value, "give a JSON value (string, number, bool, None, list or mapping)") from None
    _number(field, value)


def _number(field: str, value: Any) -> None:
    """A number compared on its own must be finite and, if an integer, fit 64 bits (SQLite binds it as one)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return
    if isinstance(value, float) and not math.isfinite(value):
        raise _fail(field, value, "give a finite number")
    if isinstance(value, int) and not -(2**63) <= value < 2**63:
        raise _fail(field, value, "integers in a filter must fit 64 bits (-2**63 to 2**63 - 1)")


def _conditions(field: str, path: tuple[str, ...], spec: Any) -> list[Condition | Group]:
    """The conditions ``spec`` puts on the value at ``path``."""
    if isinstance(spec, Mapping) and any(isinstance(k, str) and k.startswith("$") for k in spec):
        out: list[Condition | Group] = []
        for op, value in spec.items():
            if op not in OPERATORS:
                raise _fail(field, dict(spec), "operators are " + ", ".join(OPERATORS))
            if op in ("$in", "$nin"):
                if not isinstance(value, (list, tuple)) or not all(_scalar(v) for v in value):
                    raise _fail(f"{field}.{op}", value, "give a list of strings, numbers, bools or None")
                for v in value:
                    _number(f"{field}.{op}", v)
            elif op in ("$gt", "$gte", "$lt", "$lte"):
                if isinstance(value, bool) or not isinstance(value, (int, float, str)):
                    raise _fail(f"{field}.{op}", value, "compare with a number or a string (an ISO date sorts)")
                _number(f"{field}.{op}", value)
            else:
                _json_value(f"{field}.{op}", value)
            out.append(Condition(path, op, value))
        return out
    if isinstance(spec, Mapping):  # a nested object, key by key (LangGraph's behaviour)
        return [Condition(path, "$object", None),
                *(c for key, sub in spec.items() for c in _conditions(f"{field}.{key}", (*path, _key(field, key)),
                                                                     sub))]
    _json_value(field, spec)
    return [Condition(path, "$eq", spec)]


def _key(field: str, key: Any) -> str:
    if not isinstance(key, str) or not key or '"' in key:
        raise _fail(field, key, 'metadata keys are non-empty strings without \'"\'')
    return key


def _join(field: str, key: str) -> str:
    return f"{field}.{key}" if field else key


def _group(filters: Any, field: str, mode: Literal["and", "or"]) -> Group:
    if not isinstance(filters, Mapping):
        raise _fail(field, filters, "give a mapping such as {'topic': 'travel', 'priority': {'$gte': 2}}")
    parts: list[Condition | Group] = []
    for key, spec in filters.items():
        if key in ("$and", "$or"):
            if not isinstance(spec, (list, tuple)) or not spec:
                raise _fail(_join(field, key), spec, "give a non-empty list of filters")
            sub = [_group(s, _join(field, f"{key}[{i}]"), "and") for i, s in enumerate(spec)]
            parts.append(Group("and" if key == "$and" else "or", tuple(sub)))
            continue
        if isinstance(key, str) and key.startswith("$"):
            raise _fail(_join(field, key), spec, "combine filters with $and or $or; operators go inside a key: "
                                                 "{'priority': {'$gte': 2}}")
        name = _key(field, key)
        parts += _conditions(_join(field, name), (name,), spec)
    return Group(mode, tuple(parts))


def _count(group: Group) -> int:
    return sum(_count(p) if isinstance(p, Group) else 1 for p in group.parts)


def parse_metadata_filter(filters: Any, *, field: str = _ROOT) -> MetadataFilter:
    """Validate ``filters["metadata"]`` (or, with ``field="filter"``, a LangGraph store filter on item values) into
    a :class:`MetadataFilter` (see the module docstring); errors name ``field`` and the path below it."""
    try:
        group = _group(filters, "", "and")
    except InvalidQueryError as exc:
        if field == _ROOT:
            raise
        raise InvalidQueryError(field + str(exc.field)[len(_ROOT):], exc.value, exc.fix) from None
    if _count(group) > MAX_CONDITIONS:
        raise _fail("", filters, f"a filter holds at most {MAX_CONDITIONS} conditions", field)
    return group


def _path(path: Sequence[str]) -> str:
    r"""SQLite's JSON path of ``path``. Each key is written as the stored metadata spells it — JSON-escaped
    (``json.dumps``' default ``ensure_ascii``: ``城市`` is stored as ``\u57ce\u5e02``) — because SQLite
    compares a path's label with a key's raw text: ``$."城市"`` would never match.

    >>> _path(["place", "城市"])
    '$."place"."\\u57ce\\u5e02"'
    """
    return "$" + "".join(f'."{json.dumps(k)[1:-1]}"' for k in path)


def _eq(column: str, path: str, value: Any) -> tuple[str, list[Any]]:
    """A condition true when the value at ``path`` equals ``value`` (False, never NULL)."""
    jt = f"json_type({column}, ?)"
    if value is None:
        return f"IFNULL({jt} = 'null', 1)", [path]
    if isinstance(value, bool):
        return f"IFNULL({jt} = ?, 0)", [path, "true" if value else "false"]
    if isinstance(value, (int, float)):
        return f"IFNULL({jt} IN ('integer', 'real') AND json_extract({column}, ?) = ?, 0)", [path, path, value]
    if isinstance(value, str):
        return f"IFNULL({jt} = 'text' AND json_extract({column}, ?) = ?, 0)", [path, path, value]
    kind = "array" if isinstance(value, (list, tuple)) else "object"
    return (f"IFNULL({jt} = '{kind}' AND json_extract({column}, ?) = json(?), 0)",
            [path, path, json.dumps(value, ensure_ascii=False)])


_COMPARE = {"$gt": ">", "$gte": ">=", "$lt": "<", "$lte": "<="}


def _condition_sql(c: Condition, column: str) -> tuple[str, list[Any]]:
    path = _path(c.path)
    if c.op == "$object":
        return f"IFNULL(json_type({column}, ?) = 'object', 0)", [path]
    if c.op == "$eq":
        return _eq(column, path, c.value)
    if c.op == "$ne":
        sql, args = _eq(column, path, c.value)
        return f"NOT {sql}", args
    if c.op in ("$in", "$nin"):
        parts = [_eq(column, path, v) for v in c.value]
        sql = "(" + " OR ".join(p[0] for p in parts) + ")" if parts else "0"
        args = [a for p in parts for a in p[1]]
        return (sql, args) if c.op == "$in" else (f"NOT {sql}", args)
    types = "'text'" if isinstance(c.value, str) else "'integer', 'real'"
    return (f"IFNULL(json_type({column}, ?) IN ({types}) AND json_extract({column}, ?) {_COMPARE[c.op]} ?, 0)",
            [path, path, c.value])


def _pg_value(column: str) -> str:
    """The JSONB value at a path (one placeholder: the path as a text array) of the JSON text ``column``."""
    return f"(({column})::jsonb #> %s::text[])"


def _pg_eq(x: str, path: list[str], value: Any) -> tuple[str, list[Any]]:
    """PostgreSQL (JSONB) twin of :func:`_eq`: JSON equality of the value at ``path`` and ``value``."""
    if value is None:
        return f"COALESCE(jsonb_typeof({x}) = 'null', TRUE)", [path]
    return f"COALESCE({x} = %s::jsonb, FALSE)", [path, json.dumps(value, ensure_ascii=False)]


def _pg_condition_sql(c: Condition, column: str) -> tuple[str, list[Any]]:
    x, path = _pg_value(column), list(c.path)
    if c.op == "$object":
        return f"COALESCE(jsonb_typeof({x}) = 'object', FALSE)", [path]
    if c.op in ("$eq", "$ne"):
        sql, args = _pg_eq(x, path, c.value)
        return (sql, args) if c.op == "$eq" else (f"NOT {sql}", args)
    if c.op in ("$in", "$nin"):
        parts = [_pg_eq(x, path, v) for v in c.value]
        sql = "(" + " OR ".join(p[0] for p in parts) + ")" if parts else "FALSE"
        args = [a for p in parts for a in p[1]]
        return (sql, args) if c.op == "$in" else (f"NOT {sql}", args)
    if isinstance(c.value, str):  # by code point, as SQLite does — whatever collation the database has
        return (f"COALESCE(CASE WHEN jsonb_typeof({x}) = 'string' THEN ({x} #>> '{{}}') COLLATE \"C\" "
                f"{_COMPARE[c.op]} %s END, FALSE)", [path, path, c.value])
    return (f"COALESCE(CASE WHEN jsonb_typeof({x}) = 'number' THEN ({x})::numeric {_COMPARE[c.op]} %s END, FALSE)",
            [path, path, c.value])


def metadata_sql(group: MetadataFilter, column: str, dialect: str = "sqlite") -> tuple[str, list[Any]]:
    """A SQL condition on the JSON text ``column`` (a turn's metadata) and its arguments, in SQLite's dialect or
    (``dialect="postgres"``) PostgreSQL's, where the same semantics are written with JSONB operators."""
    condition = _pg_condition_sql if dialect == "postgres" else _condition_sql
    parts = [metadata_sql(p, column, dialect) if isinstance(p, Group) else condition(p, column)
             for p in group.parts]
    if not parts:
        return ("TRUE" if dialect == "postgres" else "1"), []
    joiner = " AND " if group.mode == "and" else " OR "
    return "(" + joiner.join(p[0] for p in parts) + ")", [a for p in parts for a in p[1]]
