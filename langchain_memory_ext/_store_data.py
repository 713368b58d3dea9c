"""Pure pieces of :class:`~langchain_memory_ext.MemoryStore`: namespaces, values, filters, index text.

No I/O here: the store's sync and async paths, and its tests, share every decision. Values travel to the engine as
JSON data (:func:`to_data`): datetimes, tuples, sets and a few other types are tagged so they come back as they
went in (:func:`from_data`); a filter's values are tagged the same way (:func:`to_filter`), so an equality filter
on a datetime matches. The filter itself is evaluated by the engine, in SQL (:mod:`memory_ext.store.metadata_filter`).

>>> from_data(to_data({"when": datetime(2026, 3, 1, tzinfo=UTC), "tags": ("a", "b")}))
{'when': datetime.datetime(2026, 3, 1, 0, 0, tzinfo=datetime.timezone.utc), 'tags': ('a', 'b')}
>>> to_filter({"year": {"$gte": 2025}, "kind": {"$in": ("a", "b")}})
{'year': {'$gte': 2025}, 'kind': {'$in': ['a', 'b']}}
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

from langgraph.store.base import GetOp, ListNamespacesOp, Op, PutOp, SearchOp
from langgraph.store.base.embed import get_text_at_path, tokenize_path

from memory_ext.errors import InvalidNamespaceError, InvalidQueryError

__all__ = [
    "check_labels",
    "check_op",
    "from_data",
    "index_text",
    "join_namespace",
    "texts_to_embed",
    "to_data",
    "to_filter",
    "utc",
]

_TYPE_TAG = "__memory_ext_type__"


# -- namespaces --------------------------------------------------------------------------------------------------
def join_namespace(namespace: Sequence[str]) -> str:
    """``("users", "ana")`` -> ``"users.ana"`` (labels never contain ``"."``)."""
    return ".".join(namespace)


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


def to_data(value: Mapping[str, Any]) -> dict[str, Any]:
    """A store value as JSON data; datetimes, tuples, sets and a few other types are tagged so they come back
    as they went in (``InMemoryStore`` returns the very objects)."""
    out: dict[str, Any] = _to_json(value, "value")
    return out


def from_data(data: Mapping[str, Any]) -> dict[str, Any]:
    """The value :func:`to_data` was made from."""
    out: dict[str, Any] = json.loads(json.dumps(data), object_hook=_from_json)
    return out


def to_filter(flt: Mapping[str, Any]) -> dict[str, Any]:
    """A LangGraph filter with its values as :func:`to_data` stores them (the lists of ``$in``/``$nin`` stay
    lists)."""

    def encode(spec: Any, path: str) -> Any:
        if isinstance(spec, Mapping):
            return {k: [_to_json(x, f"{path}.{k}") for x in v] if k in ("$in", "$nin") and isinstance(v, (list, tuple))
                    else [encode(x, f"{path}.{k}") for x in v] if k in ("$and", "$or") and isinstance(v, (list, tuple))
                    else encode(v, f"{path}.{k}") for k, v in spec.items()}
        return _to_json(spec, path)

    out: dict[str, Any] = encode(flt, "filter")
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


def utc(value: datetime) -> datetime:
    """An aware UTC datetime (a naive one is taken as UTC)."""
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
