"""Input checks shared by every public entry point: text that SQLite, JSON and a terminal can hold safely.

Decisions (documented in docs/operations.md, "Input rules"):

* **Lone surrogates** (``"\\ud800"``, what a bad decode leaves) cannot be stored as UTF-8: rejected with a typed
  error instead of a ``UnicodeEncodeError`` half-way through a write.
* **NUL bytes** are rejected, not stripped: SQLite and C tools cut text at NUL, and a prompt rendered from such
  text would differ from what was stored. Remove them before writing (``text.replace("\\x00", "")``).

>>> from memory_ext.errors import InvalidTurnError
>>> check_text("content", "hello", InvalidTurnError)
'hello'
>>> check_text("content", "a\\x00b", InvalidTurnError)
Traceback (most recent call last):
...
memory_ext.errors.InvalidTurnError: content: got <3 characters: 'a\\x00b'>; contains a NUL character at position 1; ...
"""

from __future__ import annotations

from typing import Any

from .errors import PREVIEW_CHARS, Redacted, ValidationError

__all__ = ["check_page", "check_text", "first_bad_char"]


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


def check_page(limit: Any, offset: Any) -> None:
    """``limit`` (None or an integer >= 0) and ``offset`` (an integer >= 0) of a listing call."""
    from .errors import InvalidArgumentError

    for name, value, optional in (("limit", limit, True), ("offset", offset, False)):
        if value is None and optional:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise InvalidArgumentError(name, value, "give an integer >= 0" + (" or None" if optional else ""))


def _preview(text: str) -> Redacted:
    """Rejected user text as an error keeps it, even when short: its length and a short prefix."""
    return Redacted(f"<{len(text)} characters: {text[:PREVIEW_CHARS]!r}…>" if len(text) > PREVIEW_CHARS
                    else f"<{len(text)} characters: {text!r}>")
