"""Input checks shared by every public entry point: text that SQLite, JSON and a terminal can hold safely.

Decisions (documented in docs/operations.md, "Input rules"):

* **Lone surrogates** (``"\\ud800"``, what a bad decode leaves) cannot be stored as UTF-8: rejected with a typed
  error instead of a ``UnicodeEncodeError`` half-way through a write.
* **NUL bytes** are rejected, not stripped: SQLite and C tools cut text at NUL, and a prompt rendered from such
  text would differ from what was stored. Remove them before writing (``text.replace("\\x00", "")``).
* **JSON values** (``Turn.metadata``, ``tool_calls``, ``attachments``, search filters) follow the same rule in
  every key and string, hold only finite numbers, and nest at most :data:`MAX_JSON_DEPTH` levels
  (``limits.max_metadata_depth`` and ``limits.max_metadata_bytes`` cap a stored turn's metadata further):
  :func:`check_json`. It walks the value with an explicit stack, so a value nested 100 000 levels deep is refused,
  not a ``RecursionError``.
* **Rows stored before these rules** are repaired when read (:func:`repair_json`, :func:`repair_text`): lone
  surrogates become U+FFFD, non-finite numbers None, and what lies deeper than :data:`MAX_JSON_DEPTH` its JSON
  text, so a poisoned row can never make a read fail.

>>> from memory_ext.errors import InvalidTurnError
>>> check_text("content", "hello", InvalidTurnError)
'hello'
>>> check_text("content", "a\\x00b", InvalidTurnError)
Traceback (most recent call last):
...
memory_ext.errors.InvalidTurnError: content: got <3 characters: 'a\\x00b'>; contains a NUL character at position 1; ...
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from .errors import PREVIEW_CHARS, Redacted, ValidationError

__all__ = ["MAX_JSON_DEPTH", "MAX_PAGE", "check_json", "check_page", "check_text", "first_bad_char", "repair_json",
           "repair_text", "stored_json"]

MAX_JSON_DEPTH = 100
"""Deepest nesting of a JSON value any call accepts (an object or array is one level); ``limits.max_metadata_depth``
may only lower it. Deeper values cannot be serialised by pydantic (its limit is about 255 levels, counted from the
response model) or encoded by ``json`` without hitting Python's recursion limit."""
MAX_PAGE = 2**62
"""Largest ``limit`` / ``offset`` of a listing call (SQLite integers are 64-bit)."""
_KEY_CHARS = 40


def first_bad_char(text: str) -> tuple[int, str] | None:
    """``(position, problem)`` of the first NUL or lone surrogate in ``text`` (None when it is clean)."""
    nul = text.find("\x00")
    try:
        text.encode("utf-8")
        bad = -1
    except UnicodeEncodeError as exc:
        bad = exc.start
    if nul < 0 and bad < 0:
        return None
    if bad < 0 or (0 <= nul < bad):
        return nul, "a NUL character"
    return bad, f"a lone surrogate U+{ord(text[bad]):04X} (not valid Unicode text)"


def check_text(field: str, value: Any, error: type[ValidationError] = ValidationError) -> Any:
    """Raise ``error`` naming ``field`` when the string ``value`` holds a NUL or a lone surrogate; else return it."""
    if isinstance(value, str):
        found = first_bad_char(value)
        if found is not None:
            pos, problem = found
            fix = ("remove NUL characters (text.replace('\\x00', '')) before writing" if "NUL" in problem else
                   "decode the input properly (e.g. bytes.decode('utf-8', errors='replace'))")
            raise error(field, _preview(value), f"contains {problem} at position {pos}; {fix}")
    return value


def _check_encodable(field: str, value: str, error: type[ValidationError]) -> None:
    """:func:`check_text` for lone surrogates only."""
    if repair_text(value) is not value:
        check_text(field, value.replace("\x00", " "), error)


def check_page(limit: Any, offset: Any) -> None:
    """``limit`` (None or an integer >= 0) and ``offset`` (an integer >= 0) of a listing call."""
    from .errors import InvalidArgumentError

    for name, value, optional in (("limit", limit, True), ("offset", offset, False)):
        if value is None and optional:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_PAGE:
            raise InvalidArgumentError(name, value, f"give an integer between 0 and {MAX_PAGE}"
                                                    + (" or None" if optional else ""))


def _child(path: str, key: Any) -> str:
    """``path.key`` (``path[3]`` for a list index); long keys are cut so the field name stays readable."""
    if isinstance(key, int) and not isinstance(key, bool):
        return f"{path}[{key}]"
    text = repair_text(str(key))
    return f"{path}.{text if len(text) <= _KEY_CHARS else text[:_KEY_CHARS] + '…'}"


def _cut(path: str) -> str:
    """A field path short enough for a message (a path 100 levels deep keeps its start and its end)."""
    return path if len(path) <= 3 * _KEY_CHARS else f"{path[:2 * _KEY_CHARS]}…{path[-_KEY_CHARS:]}"


def check_json(field: str, value: Any, error: type[ValidationError] = ValidationError, *,
               max_depth: int = MAX_JSON_DEPTH, max_bytes: int | None = None, what: str = "value",
               nul: bool = True) -> Any:
    """Raise ``error`` unless ``value`` can be stored as JSON text and read back by every face; else return it.

    Refused, with the path of the culprit as the field (``metadata.a.b``, ``tool_calls[0].args``): a NUL or a
    lone surrogate in a key or a string, a non-finite number, a key that is not a string (or a number, bool or
    None, which JSON writes as strings), nesting deeper than ``max_depth`` (an object or array is one level), and,
    with ``max_bytes``, more than that many bytes of UTF-8 JSON. ``nul=False`` lets NUL characters through.
    Values JSON cannot hold natively (datetimes, ...) are kept: they are stored as their ``str``.

    >>> from memory_ext.errors import InvalidTurnError
    >>> check_json("metadata", {"topic": "travel", "tags": ["a", "b"]}, InvalidTurnError)
    {'topic': 'travel', 'tags': ['a', 'b']}
    >>> check_json("metadata", {"a": {"b": "x\\x00"}}, InvalidTurnError)
    Traceback (most recent call last):
    ...
    memory_ext.errors.InvalidTurnError: metadata.a.b: got <2 characters: 'x\\x00'>; contains a NUL character ...
    >>> check_json("metadata", {"a": {"b": {}}}, InvalidTurnError, max_depth=2)
    Traceback (most recent call last):
    ...
    memory_ext.errors.InvalidTurnError: metadata.a.b: got <dict nested deeper than 2 levels>; nested deeper than 2 ...
    """
    text = check_text if nul else _check_encodable
    depth_hint = " (limits.max_metadata_depth)" if what in ("metadata", "tool_calls", "attachments") else ""
    stack: list[tuple[str, Any, int]] = [(field, value, 0)]
    while stack:
        path, item, depth = stack.pop()
        where = _cut(path)
        if isinstance(item, str):
            text(where, item, error)
        elif isinstance(item, float) and not math.isfinite(item):
            raise error(where, item, "numbers must be finite (JSON has no NaN or Infinity): store such a value as a "
                                     "string or None")
        elif isinstance(item, (Mapping, list, tuple)):
            if depth + 1 > max_depth:
                raise error(where, Redacted(f"<{type(item).__name__} nested deeper than {max_depth} levels>"),
                            f"nested deeper than {max_depth} levels{depth_hint}: store the deep part as a JSON "
                            f"string, or flatten it")
            if isinstance(item, Mapping):
                for key, sub in item.items():
                    if isinstance(key, str):
                        text(f"{where}.<key>", key, error)
                    elif not (key is None or isinstance(key, (int, float, bool))):
                        raise error(where, Redacted(f"<a {type(key).__name__} key>"),
                                    f"{what} keys are strings (got a {type(key).__name__} key)")
                    elif isinstance(key, float) and not math.isfinite(key):
                        raise error(where, key, f"{what} keys are strings or finite numbers")
                    stack.append((_child(path, key), sub, depth + 1))
            else:
                stack.extend((f"{path}[{i}]", sub, depth + 1) for i, sub in enumerate(item))
    if max_bytes is not None:
        size = len(json.dumps(value, default=str, ensure_ascii=False).encode("utf-8"))
        if size > max_bytes:
            raise error(field, Redacted(f"<{size} bytes of JSON>"),
                        f"the {what} is {size} bytes as JSON; the limit is {max_bytes} (limits.max_metadata_bytes): "
                        f"store less, or keep large payloads in content or attachments")
    return value


def repair_text(text: str) -> str:
    """``text`` with each lone surrogate replaced by U+FFFD (a surrogate *pair* becomes the character it encodes).

    >>> repair_text("ok \\ud800!"), repair_text("\\ud83d\\ude00")
    ('ok \ufffd!', '😀')
    """
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def repair_json(value: Any, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """A copy of a JSON value every face can serialise: keys and strings through :func:`repair_text`, non-finite
    numbers as None, and each container deeper than ``max_depth`` replaced by its JSON text. Clean values come
    back as they are (the same object).

    >>> repair_json({"k": "\\ud800", "n": float("nan"), "ok": [1, "a"]})
    {'k': '\ufffd', 'n': None, 'ok': [1, 'a']}
    >>> repair_json({"a": {"b": {"c": 1}}}, max_depth=2)
    {'a': {'b': '{"c": 1}'}}
    """
    if not _needs_repair(value, max_depth):
        return value
    return _repaired(value, max_depth)


def _needs_repair(value: Any, max_depth: int) -> bool:
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, str):
            if repair_text(item) is not item:
                return True
        elif isinstance(item, float):
            if not math.isfinite(item):
                return True
        elif isinstance(item, (dict, list)):
            if depth + 1 > max_depth:
                return True
            if isinstance(item, dict):
                stack.extend((k, depth) for k in item)
                stack.extend((v, depth + 1) for v in item.values())
            else:
                stack.extend((v, depth + 1) for v in item)
    return False


def _repaired(value: Any, max_depth: int) -> Any:
    """Rebuild ``value`` bottom-up with an explicit stack (a stored value may be nested ~1000 levels deep)."""
    def leaf(item: Any) -> Any:
        if isinstance(item, str):
            return repair_text(item)
        if isinstance(item, float) and not math.isfinite(item):
            return None
        return item

    def too_deep(item: Any) -> str:
        text = json.dumps(item, default=str, allow_nan=True, check_circular=False)  # ensure_ascii: always encodable
        return text

    root: list[Any] = [None]
    # each frame: (container to fill, key or index, source item, depth of the source item)
    work: list[tuple[Any, Any, Any, int]] = [(root, 0, value, 0)]
    while work:
        target, slot, item, depth = work.pop()
        if isinstance(item, (dict, list)):
            if depth + 1 > max_depth:
                try:
                    target[slot] = too_deep(item)
                except (RecursionError, ValueError, TypeError):
                    target[slot] = "<nested too deep to show>"
                continue
            if isinstance(item, dict):
                new: dict[Any, Any] = {}
                target[slot] = new
                for k, v in item.items():
                    key = leaf(k)
                    new[key] = None
                    work.append((new, key, v, depth + 1))
            else:
                items: list[Any] = [None] * len(item)
                target[slot] = items
                work.extend((items, i, v, depth + 1) for i, v in enumerate(item))
        else:
            target[slot] = leaf(item)
    return root[0]


def stored_json(text: str, empty: Any) -> Any:
    """A JSON column read back for the faces: ``json.loads`` then :func:`repair_json`; text that no longer parses
    (nested beyond Python's recursion limit by an older writer) reads as ``empty()``.

    >>> stored_json('{"k": "\\\\ud800"}', dict)
    {'k': '\ufffd'}
    """
    if text in ("[]", "{}"):
        return empty()
    try:
        value = json.loads(text)
    except (RecursionError, ValueError):
        return empty()
    if "\\u" not in text and "NaN" not in text and "Infinity" not in text and \
            text.count("[") + text.count("{") <= MAX_JSON_DEPTH:
        return value  # nothing to repair: the common case costs a few substring scans
    return repair_json(value)


def _preview(text: str) -> Redacted:
    """Rejected user text as an error keeps it, even when short: its length and a short prefix."""
    return Redacted(f"<{len(text)} characters: {text[:PREVIEW_CHARS]!r}…>" if len(text) > PREVIEW_CHARS
                    else f"<{len(text)} characters: {text!r}>")
