"""Missing slots before a call: which tool a request is about to call, and which of its required parameters the
conversation has not given a value for — read from the tools' JSON schemas (names, descriptions, types, enums),
never from a list of known tools.

* **Which tool** (:func:`rank_tools`): the request's words against each tool's name (counted twice), its
  description and its parameters' names and descriptions, each word weighted by how few of the offered tools
  use it (a word every tool's description shares — a product's preamble — counts for nothing).
* **Which parameters are given** (:func:`given_params`): a parameter is given when an earlier call of the
  conversation passed it, when one of its enum values is said, when a value of its shape is said (a date, a time,
  a place; :data:`VALUE_SHAPES`), or when a value — a quoted string, a number, an identifier-like token (a file
  name, a code, ``snake_case``, ``ALLCAPS``), a proper name — stands right after a word that names it (its name's
  words and the head of its description: "a file named 'notes.txt'", "100 shares", "ticker AAPL"). A number
  gives a numeric parameter only; a value is given to the one parameter whose naming word stands nearest.
* **Missing** (:func:`missing_slots`): the unsupplied required parameters of the best-ranked tools (those
  scoring at least :data:`TOOL_SCORE_RATIO` of the best), the best tool's first, at most :data:`MAX_MISSING`.

>>> from memory_ext.plan.derive import tool_specs
>>> tools = tool_specs([
...     {"name": "place_order", "description": "Place an order to buy or sell shares.", "parameters": {
...         "properties": {"symbol": {"type": "string", "description": "Symbol of the stock to trade."},
...                        "amount": {"type": "integer", "description": "Number of shares to trade."},
...                        "price": {"type": "number", "description": "Price per share."}},
...         "required": ["symbol", "amount", "price"]}},
...     {"name": "get_stock_info", "description": "Get the details of a stock.", "parameters": {
...         "properties": {"symbol": {"type": "string"}}, "required": ["symbol"]}}])
>>> missing_slots("Please buy 100 shares at a price of $150 each.", tools)
('symbol',)
>>> missing_slots("Buy some shares of the stock AAPL at a price of 150", tools)
('amount',)
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

__all__ = ["MAX_MISSING", "TOOL_SCORE_RATIO", "ParamSpec", "given_params", "missing_params", "missing_slots",
           "param_cues", "param_specs", "rank_tools", "slot_hint"]

MAX_MISSING: Final = 3
"""At most this many missing slots are derived for a request."""
TOOL_SCORE_RATIO: Final = 0.75
"""Tools scoring at least this share of the best tool's score are candidates for the call to come."""
CUE_WINDOW: Final = 4
"""A value gives a parameter when it stands at most this many tokens after a word naming it (or 1 before)."""
NAME_WEIGHT: Final = 2.0
"""A request word found in a tool's name counts this many times its weight (once in a description)."""
HINT_MAX_CHARS: Final = 120
"""A slot hint keeps at most this many characters of the parameter's description."""
DESCRIPTION_CUES: Final = 3
"""How many content words of a parameter's description name it, besides its own name's words."""

_STOP: Final = frozenset(
    "the a an and or for with from into onto this that these those you your can could please want need via all "
    "any one per api tool tools is are be to of in on at by as it its if use used using given specified specific "
    "which what when where will would should must may some new current default defaults true false none null".split())


@dataclass(frozen=True, slots=True)
class ParamSpec:
    """A tool parameter as its JSON schema gives it: name, description, JSON type and enum values."""

    name: str
    description: str = ""
    type: str = ""
    enum: tuple[str, ...] = ()


_ENUM_IN_TEXT: Final = re.compile(r"(?:\benum\b\]?|\boptions are|\bone of|\bpossible values)\s*:?\s*(.+)", re.I)


def param_specs(schema: Mapping[str, Any]) -> tuple[ParamSpec, ...]:
    """The parameters of a JSON schema (``properties``), with the enum values its ``enum`` lists or its
    description names ("[Enum]: a, b", "Options are: a, b").

    >>> param_specs({"properties": {"mode": {"type": "string", "description": "The mode. [Enum]: on, off"}}})
    (ParamSpec(name='mode', description='The mode. [Enum]: on, off', type='string', enum=('on', 'off')),)
    """
    props = schema.get("properties")
    if not isinstance(props, Mapping):
        return ()
    out = []
    for name, raw in props.items():
        prop = raw if isinstance(raw, Mapping) else {}
        desc = str(prop.get("description") or "")
        enum: list[str] = [str(v) for v in prop.get("enum") or () if isinstance(v, (str, int, float))]
        if not enum:
            found = _ENUM_IN_TEXT.search(desc)
            if found:
                enum = [v for v in (w.strip(" '\"[]().") for w in re.split(r",|\bor\b", found.group(1)[:200]))
                        if v and len(v) <= 30]
        out.append(ParamSpec(name=str(name), description=desc, type=str(prop.get("type") or ""), enum=tuple(enum)))
    return tuple(out)


_WORD_RE: Final = re.compile(r"[A-Za-z][a-z]+|[A-Z]+(?![a-z])|\d+|[^\W\d_A-Za-z]+")


def _norm(word: str) -> str:
    """A light English stem: plural and verb endings off, a final ``e`` off (``named`` / ``name``, ``files``)."""
    w = word.lower()
    for end in ("ies", "ing", "es", "ed", "s"):
        if w.endswith(end) and len(w) - len(end) >= 3:
            w = w[:-len(end)] + ("y" if end == "ies" else "")
            break
    return w[:-1] if w.endswith("e") and len(w) > 3 else w


def _words(text: str) -> list[str]:
    return [_norm(w) for w in _WORD_RE.findall(text.replace("_", " ").replace(".", " "))
            if len(w) >= 3 and w.lower() not in _STOP]


def _tool_text(spec: Any) -> tuple[set[str], set[str], set[str]]:
    params = getattr(spec, "params", ()) or ()
    return (set(_words(spec.name)), set(_words(spec.description)),
            {w for p in params for w in _words(p.name) + _words(p.description.split("[")[0])})


def rank_tools(request: str, specs: Sequence[Any]) -> list[tuple[float, Any]]:
    """The tools ``request`` may call next, best first, as ``(score, spec)`` with a positive score: each request
    word found in a tool counts its inverse document frequency among the tools, twice in the name, once in the
    description or a parameter's name or description (``specs``: :class:`~memory_ext.plan.derive.ToolSpec`)."""
    asked = set(_words(request))
    if not asked or not specs:
        return []
    bags = [_tool_text(s) for s in specs]
    df: dict[str, int] = {}
    for name, desc, params in bags:
        for w in name | desc | params:
            df[w] = df.get(w, 0) + 1
    n = len(specs)
    scored = []
    for i, (name, desc, params) in enumerate(bags):
        score = sum(math.log((n + 1) / df[w]) * (NAME_WEIGHT if w in name else 1.0)
                    for w in asked & (name | desc | params))
        if score > 0:
            scored.append((score, i))
    scored.sort(key=lambda si: (-si[0], si[1]))
    return [(s, specs[i]) for s, i in scored]


# ------------------------------------------------------------------------------------------ values in a request

_MONTHS: Final = ("jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?"
                  "|sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?")
VALUE_SHAPES: Final = (
    # (parameter name words, a shape of the value in the request): a parameter named so is given by such a value
    # (English requests; a date is not a time and a country is not a city)
    (frozenset({"date", "day"}), re.compile(
        rf"\b\d{{4}}-\d{{1,2}}-\d{{1,2}}\b|\b\d{{1,2}}/\d{{1,2}}(?:/\d{{2,4}})?\b|\b(?:{_MONTHS})\.?\s+\d{{1,2}}"
        rf"|\b\d{{1,2}}(?:st|nd|rd|th)?\s+(?:of\s+)?(?:{_MONTHS})\b|\b(?:today|tomorrow|tonight|yesterday)\b"
        r"|\b(?:this|next)\s+(?:week(?:end)?|monday|tuesday|wednesday|thursday|friday|saturday|sunday)\b"
        r"|今天|明天|后天|\d{1,2}月\d{1,2}日", re.IGNORECASE)),
    (frozenset({"time", "hour"}), re.compile(
        r"\b\d{1,2}(?::\d{2})?\s*(?:am|pm|a\.m\.|p\.m\.)|\b\d{1,2}:\d{2}\b|\b(?:noon|midnight)\b|\d{1,2}点",
        re.IGNORECASE)),
    (frozenset({"origin", "from", "departure", "source", "start"}), re.compile(r"\bfrom\s+[A-Z0-9][\w'.-]*")),
    (frozenset({"destination", "to", "arrival", "dest", "target"}), re.compile(r"\bto\s+[A-Z0-9][\w'.-]*")),
    (frozenset({"city", "location", "loc", "place", "where", "address", "area"}),
     re.compile(r"\b(?:in|near|from|to)\s+[A-Z][a-z][\w'.-]*")),  # a proper name (not "CA", not a venue "at")
)
"""Shapes of a value by the parameter's name words (the first group the name hits decides)."""

_TOKEN_RE: Final = re.compile(
    r"(?<![\w'])'[^'\n]{1,80}'(?![\w])|\"[^\"\n]{1,80}\"|[‘“][^’”\n]{1,80}[’”]"
    r"|[$€£¥]?\d[\d,]*(?:\.\d+)?%?|[@#]?[\w][\w@#.\-/:]*")
_NUMBER_RE: Final = re.compile(r"[$€£¥]?\d[\d,]*(?:\.\d+)?%?")
_CODE_RE: Final = re.compile(r"\w\.\w{2,5}$|_|\d|^[@#]|^[A-Z]{2,}$|[a-z][A-Z]")
_SENTENCE_END: Final = re.compile(r"[.!?:;]$")
_NOT_NAMES: Final = frozenset("i i'm i've i'd i'll ok okay please thanks hi hello hey".split())


@dataclass(frozen=True, slots=True)
class _Token:
    text: str
    norm: str
    value: str | None  # "number", "string" or None (a plain word)


def _tokens(text: str) -> list[_Token]:
    out: list[_Token] = []
    starts = True
    for m in _TOKEN_RE.finditer(text):
        raw = m.group(0)
        after = text[m.end():m.end() + 1]
        kind: str | None = None
        if raw[0] in "'\"‘“":
            kind = "string"
        elif _NUMBER_RE.fullmatch(raw):
            kind = "number"
        elif _CODE_RE.search(raw.rstrip(".,")):
            kind = "string"
        elif raw[0].isupper() and not starts and raw.lower() not in _NOT_NAMES:
            kind = "string"  # a proper name inside a sentence
        out.append(_Token(raw, _norm(raw.strip("'\"‘“’”")), kind))
        starts = bool(_SENTENCE_END.search(raw)) or after in ".!?"
    return out


def param_cues(param: ParamSpec) -> set[str]:
    """The words that name ``param`` in a request: its name's words and the first content words of its
    description (before any enum list).

    >>> sorted(param_cues(ParamSpec("amount", "Number of shares to trade.", "integer")))
    ['amount', 'number', 'shar', 'trad']
    """
    head = re.split(r"[.\[(]|\benum\b", param.description, maxsplit=1, flags=re.I)[0]
    return set(_words(param.name)) | set(_words(head)[:DESCRIPTION_CUES])


def _is_numeric(param: ParamSpec) -> bool:
    return param.type in ("integer", "number", "float", "int", "double")


def _shape_given(param: ParamSpec, text: str) -> bool | None:
    words = {w.lower() for w in _WORD_RE.findall(param.name.replace("_", " "))}
    for names, shape in VALUE_SHAPES:
        if words & names:
            return bool(shape.search(text))
    return None


def given_params(params: Sequence[ParamSpec], text: str) -> set[str]:
    """The names of ``params`` that ``text`` (what the user said) gives a value for: an enum value said, a value
    of the parameter's shape (:data:`VALUE_SHAPES`), or a value right after a word naming it (:func:`param_cues`);
    a value goes to the parameter whose naming word is nearest, a number to a numeric parameter only.

    >>> ps = (ParamSpec("file_name", "The name of the file.", "string"),
    ...       ParamSpec("folder", "The folder to search in.", "string"))
    >>> sorted(given_params(ps, "Find a file named 'findings_report' within a folder."))
    ['file_name']
    """
    toks = _tokens(text)
    low = text.lower()
    given: set[str] = set()
    cues = {p.name: param_cues(p) for p in params}
    for p in params:
        said_enum = any(re.search(rf"(?<!\w){re.escape(v.lower())}(?!\w)", low) for v in p.enum)
        if said_enum or _shape_given(p, text):
            given.add(p.name)
    for i, tok in enumerate(toks):
        if tok.value is None:
            continue
        best: tuple[int, str] | None = None
        for p in params:
            if tok.value == "number" and not _is_numeric(p) and not p.name.lower().endswith("id"):
                continue
            if tok.value == "string" and _is_numeric(p):
                continue
            for j in range(max(0, i - CUE_WINDOW), min(len(toks), i + 2)):
                if j != i and toks[j].value is None and toks[j].norm in cues[p.name]:
                    d = i - j if j < i else 2 * (j - i)
                    if best is None or d < best[0]:
                        best = (d, p.name)
        if best is not None:
            given.add(best[1])
    return given


def slot_hint(param: ParamSpec) -> str:
    """What a value of ``param`` is, in words: the head of its description (before any enum list) and its enum
    values; the slot route searches for it.

    >>> slot_hint(ParamSpec("mode", "The mode to set. [Enum]: engage, release", "string", ("engage", "release")))
    'The mode to set. engage release'
    """
    head = re.split(r"\[|\benum\b|\boptions are\b", param.description, maxsplit=1, flags=re.I)[0]
    head = " ".join(head.split())[:HINT_MAX_CHARS].strip()
    return " ".join(p for p in (head, " ".join(param.enum[:8])) if p)


def missing_params(request: str, specs: Sequence[Any], *, said: str | None = None,
                   passed: Iterable[str] = ()) -> list[ParamSpec]:
    """The required parameters of the tools ``request`` is about to call (:func:`rank_tools`: the best and those
    within :data:`TOOL_SCORE_RATIO` of it) that are not given (:func:`given_params` over ``said``, by default the
    request) and were not ``passed`` by an earlier call; the best tool's first, at most :data:`MAX_MISSING`."""
    ranked = rank_tools(request, specs)
    if not ranked:
        return []
    text = request if said is None else said
    done = set(passed)
    out: list[ParamSpec] = []
    for score, spec in ranked:
        if score < TOOL_SCORE_RATIO * ranked[0][0]:
            break
        params = {p.name: p for p in getattr(spec, "params", ()) or ()}
        for name in spec.required:
            params.setdefault(name, ParamSpec(name))
        given = given_params(tuple(params.values()), text)
        names = {p.name for p in out}
        out += [params[r] for r in spec.required if r not in given and r not in done and r not in names]
        if len(out) >= MAX_MISSING:
            break
    return out[:MAX_MISSING]


def missing_slots(request: str, specs: Sequence[Any], *, said: str | None = None,
                  passed: Iterable[str] = ()) -> tuple[str, ...]:
    """The names of :func:`missing_params`."""
    return tuple(p.name for p in missing_params(request, specs, said=said, passed=passed))
