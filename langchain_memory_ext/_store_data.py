"""Pure pieces of :class:`~langchain_memory_ext.MemoryStore`: namespaces, filters, values, index text, vectors.

No I/O here: the store's sync and async paths, and its tests, share every decision. Filter semantics are
LangGraph's ``InMemoryStore`` ones (equality, nested mappings, lists compared element-wise, ``$eq``/``$ne``/
``$gt``/``$gte``/``$lt``/``$lte``; a comparison with a missing or non-numeric value is an error, as there).

>>> decode_value(encode_value({"when": datetime(2026, 3, 1, tzinfo=UTC), "tags": ("a", "b")}))
{'when': datetime.datetime(2026, 3, 1, 0, 0, tzinfo=datetime.timezone.utc), 'tags': ('a', 'b')}
>>> filter_matches({"year": 2026, "meta": {"src": "chat"}}, {"year": {"$gte": 2025}, "meta": {"src": "chat"}})
True
"""

from __future__ import annotations

import base64
import json
import math
import uuid
from collections.abc import Mapping, Sequence
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal
from typing import Any

from langgraph.store.base import GetOp, ListNamespacesOp, MatchCondition, Op, PutOp, SearchOp
from langgraph.store.base.embed import get_text_at_path, tokenize_path

from memory_ext.errors import InvalidNamespaceError, InvalidQueryError

__all__ = [
    "FilterComparisonError",
    "check_labels",
    "check_op",
    "cosine",
    "decode_value",
    "encode_value",
    "filter_matches",
    "index_text",
    "join_namespace",
    "namespace_matches",
    "split_namespace",
    "texts_to_embed",
    "utc",
]

OPERATORS = ("$eq", "$ne", "$gt", "$gte", "$lt", "$lte")
_TYPE_TAG = "__memory_ext_type__"


class FilterComparisonError(InvalidQueryError, TypeError):
    """A ``$gt``/``$gte``/``$lt``/``$lte`` filter met a value that is not a number (or is missing).

    ``InMemoryStore`` raises ``TypeError``/``ValueError`` there; this is both a memory-ext ``InvalidQueryError``
    (a ``ValueError``) and a ``TypeError``, so code written for either keeps working.
    """


# -- namespaces --------------------------------------------------------------------------------------------------
def join_namespace(namespace: Sequence[str]) -> str:
    """``("users", "ana")`` -> ``"users.ana"`` (labels never contain ``"."``)."""
    return ".".join(namespace)


def split_namespace(joined: str) -> tuple[str, ...]:
    return tuple(joined.split("."))


def check_labels(namespace: Sequence[str], field: str = "namespace") -> tuple[str, ...]:
    """LangGraph's label rules (non-empty strings without ``"."`` or NUL), also for ops passed to ``batch``."""
    for label in namespace:
        if not isinstance(label, str) or not label or "." in label or "\x00" in label:
            raise InvalidNamespaceError(f"{field} label", label,
                                        "namespace labels are non-empty strings without '.' or NUL")
    return tuple(namespace)


def check_op(op: Op) -> None:
    if isinstance(op, (GetOp, PutOp)):
        if not check_labels(op.namespace):
            raise InvalidNamespaceError("namespace", op.namespace, "give a non-empty namespace tuple")
        if isinstance(op, PutOp) and op.ttl is not None and (
                isinstance(op.ttl, bool) or not isinstance(op.ttl, (int, float)) or not op.ttl > 0):
            raise InvalidQueryError("ttl", op.ttl, "give a TTL in minutes (> 0), or None for no expiry")
    elif isinstance(op, SearchOp):
        check_labels(op.namespace_prefix, "namespace_prefix")
    elif isinstance(op, ListNamespacesOp):
        for condition in op.match_conditions or ():
            for label in condition.path:
                if label != "*":
                    check_labels((label,), "match_conditions.path")


def namespace_matches(condition: MatchCondition, namespace: tuple[str, ...]) -> bool:
    """Prefix/suffix match of a namespace, ``"*"`` matching any one label."""
    path = tuple(condition.path)
    if len(namespace) < len(path):
        return False
    if condition.match_type == "prefix":
        pairs = zip(namespace, path, strict=False)
    elif condition.match_type == "suffix":
        pairs = zip(reversed(namespace), reversed(path), strict=False)
    else:
        raise InvalidQueryError("match_type", condition.match_type, "use 'prefix' or 'suffix'")
    return all(p == "*" or n == p for n, p in pairs)


# -- filters -----------------------------------------------------------------------------------------------------
def _operator(value: Any, op: str, expected: Any, field: str) -> bool:
    if op == "$eq":
        return bool(value == expected)
    if op == "$ne":
        return bool(value != expected)
    if op not in OPERATORS:
        raise InvalidQueryError(f"filter.{field}.{op}", expected, "valid operators: " + ", ".join(OPERATORS))
    try:
        a, b = float(value), float(expected)
    except (TypeError, ValueError):
        raise FilterComparisonError(
            f"filter.{field}.{op}", value, f"{op} compares numbers and an item under the prefix has "
            f"{field}={value!r}; give every item a numeric {field!r}, or narrow the search first") from None
    return {"$gt": a > b, "$gte": a >= b, "$lt": a < b, "$lte": a <= b}[op]


def _value_matches(value: Any, expected: Any, field: str) -> bool:
    if isinstance(expected, Mapping):
        if any(str(k).startswith("$") for k in expected):
            return all(_operator(value, op, x, field) for op, x in expected.items())
        return isinstance(value, Mapping) and all(_value_matches(value.get(k), v, f"{field}.{k}")
                                                  for k, v in expected.items())
    if isinstance(expected, (list, tuple)):
        return (isinstance(value, (list, tuple)) and len(value) == len(expected)
                and all(_value_matches(v, e, field) for v, e in zip(value, expected, strict=True)))
    return bool(value == expected)


def filter_matches(value: Mapping[str, Any], flt: Mapping[str, Any] | None) -> bool:
    """Whether an item's value passes a LangGraph filter (evaluated in order, stopping at the first miss)."""
    return not flt or all(_value_matches(value.get(k), v, str(k)) for k, v in flt.items())


# -- values ------------------------------------------------------------------------------------------------------
def _tagged(kind: str, value: Any) -> dict[str, Any]:
    return {_TYPE_TAG: kind, "value": value}


def _to_json(value: Any, path: str) -> Any:
    if value is None or isinstance(value, (str, bool, int)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else _tagged("float", repr(value))
    if isinstance(value, Mapping):
        out = {}
        for k, v in value.items():
            if not isinstance(k, str):
                raise InvalidQueryError(f"{path}.{k!r}", k, "store values have string keys")
            out[k] = _to_json(v, f"{path}.{k}")
        return out
    if isinstance(value, list):
        return [_to_json(v, f"{path}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, tuple):
        return _tagged("tuple", [_to_json(v, f"{path}[{i}]") for i, v in enumerate(value)])
    if isinstance(value, (set, frozenset)):
        return _tagged(type(value).__name__, [_to_json(v, f"{path}[]") for v in value])
    if isinstance(value, datetime):
        return _tagged("datetime", value.isoformat())
    if isinstance(value, date):
        return _tagged("date", value.isoformat())
    if isinstance(value, time):
        return _tagged("time", value.isoformat())
    if isinstance(value, timedelta):
        return _tagged("timedelta", value.total_seconds())
    if isinstance(value, uuid.UUID):
        return _tagged("uuid", str(value))
    if isinstance(value, Decimal):
        return _tagged("decimal", str(value))
    if isinstance(value, bytes):
        return _tagged("bytes", base64.b64encode(value).decode("ascii"))
    raise InvalidQueryError(path, value, "store values hold JSON data, datetimes, dates, times, timedeltas, UUIDs, "
                                         "Decimals, bytes, tuples and sets; convert other objects first")


_DECODE: dict[str, Any] = {
    "float": float, "tuple": tuple, "set": set, "frozenset": frozenset, "datetime": datetime.fromisoformat,
    "date": date.fromisoformat, "time": time.fromisoformat, "timedelta": lambda s: timedelta(seconds=s),
    "uuid": uuid.UUID, "decimal": Decimal, "bytes": base64.b64decode,
}


def _from_json(obj: dict[str, Any]) -> Any:
    if len(obj) == 2 and obj.get(_TYPE_TAG) in _DECODE and "value" in obj:
        return _DECODE[obj[_TYPE_TAG]](obj["value"])
    return obj


def encode_value(value: Mapping[str, Any]) -> str:
    """A store value as JSON text; datetimes, tuples, sets and a few other types are tagged so they come back
    as they went in (``InMemoryStore`` returns the very objects)."""
    return json.dumps(_to_json(value, "value"), ensure_ascii=False)


def decode_value(text: str) -> dict[str, Any]:
    out: dict[str, Any] = json.loads(text, object_hook=_from_json)
    return out


# -- what is indexed ---------------------------------------------------------------------------------------------
def index_text(value: Mapping[str, Any], fields: Sequence[str] | None) -> str:
    """The text archived in the engine for search: the named fields, or every string in the value (else its
    JSON). ``"$"`` (the whole value) counts as "every string", which reads better than JSON."""
    if fields is not None and "$" not in fields:
        texts = [t for f in fields for t in get_text_at_path(value, tokenize_path(f)) if t]
        return "\n".join(texts)
    strings: list[str] = []

    def walk(v: Any) -> None:
        if isinstance(v, str):
            if v.strip():
                strings.append(v)
        elif isinstance(v, Mapping):
            for x in v.values():
                walk(x)
        elif isinstance(v, (list, tuple)):
            for x in v:
                walk(x)

    walk(value)
    return "\n".join(strings) or json.dumps(_to_json(value, "value"), ensure_ascii=False, sort_keys=True)


def texts_to_embed(value: Mapping[str, Any], fields: Sequence[str]) -> list[tuple[str, str]]:
    """``(path, text)`` pairs embedded for an item under an ``index`` configuration, as LangGraph's stores name
    them (a path that yields several texts gives ``path.0``, ``path.1``, ...)."""
    out: list[tuple[str, str]] = []
    for path in fields:
        texts = get_text_at_path(value, path if path == "$" else tokenize_path(path))
        if len(texts) > 1:
            out.extend((f"{path}.{i}", t) for i, t in enumerate(texts))
        elif texts:
            out.append((path, texts[0]))
    return out


def cosine(query: Sequence[float], vectors: Sequence[Any]) -> list[float]:
    """Cosine similarity of a query with each vector (0 for a zero vector), computed as ``InMemoryStore`` does."""
    import numpy as np

    if not vectors:
        return []
    q = np.asarray(query, dtype=float)
    m = np.asarray(vectors, dtype=float)
    norms = np.linalg.norm(m, axis=1)
    out = np.zeros_like(norms)
    mask = norms != 0
    out[mask] = np.dot(m[mask], q) / (norms[mask] * np.linalg.norm(q))
    return [float(x) for x in out]


def utc(value: datetime) -> datetime:
    """An aware UTC datetime (a naive one is taken as UTC)."""
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
