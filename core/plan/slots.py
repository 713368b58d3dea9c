"""Missing slots before a call: which tool a request is about to call, and which of its required parameters the
conversation has not given a value for — read from the tools' JSON schemas (names, descriptions, types, enums),
never from a list of known tools.

* **Which tool** (:func:`rank_tools`): the request's words against each tool's name (counted
  :data:`NAME_WEIGHT` times), its description and its parameters' names and descriptions, each word weighted by
  how few of the offered tools use it; a description sentence two tools share word for word (a product's
  preamble) is left out. A word's general synonyms (:data:`SYNONYM_GROUPS`: purchase / buy, erase / remove)
  match at :data:`SYNONYM_WEIGHT`.
* **Which parameters are given** (:func:`given_params`): a parameter is given when an earlier call of the
  conversation passed it, when one of its enum values is said, when a value of its shape is said (a date, a time,
  a place; :data:`VALUE_SHAPES`), or when a value — a quoted string, a number, an identifier-like token (a file
  name, a code, ``snake_case``, ``ALLCAPS``), a proper name — stands right after a word that names it (its name's
  words and the head of its description: "a file named 'notes.txt'", "100 shares", "ticker AAPL"; the last word
  of "the special word is analysis."). A number
  gives a numeric parameter only; a value is given to the one parameter whose naming word stands nearest. A
  parameter the request names by an indefinite reference ("a different file", :func:`asked_params`) is asked
  for anew, even when an earlier call passed one.
* **Missing** (:func:`missing_params`): the unsupplied required parameters of the best-ranked tools (those
  scoring at least :data:`TOOL_SCORE_RATIO` of the best), the best tool's first, at most :data:`MAX_MISSING`;
  each with a hint of what its value is (:func:`slot_hint`: its description, enum values and type). A parameter
  the request names by an open reference ("some shares": the number of shares to trade) comes first, whichever
  tool ranks first (:func:`referenced_params`); a request of several steps ("refuel it …; then start the
  engine") adds each clause's clear best tool after the request's own.
* **The value, later** (:func:`states_value`): whether a memory's text states a value for a slot — the same
  reading, applied to the memory; and :func:`open_references`, the things a request names without saying which
  ("a specific term"), whose values a memory may state too; :func:`fits_format`, whether a value has the form
  the slot's description spells out ("the 3 letter code of the airport"). Used by the read pipeline's slot lift
  (:mod:`memory_ext.retrieval.slots`).

English phrasing (the value shapes, the indefinite words); the tool schemas may be in any language.

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

import functools
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Final

__all__ = ["MAX_MISSING", "TOOL_SCORE_RATIO", "ParamSpec", "asked_params", "fits_format", "given_params",
           "given_values",
           "hint_param", "is_new", "missing_params", "missing_slots", "open_references", "param_cues", "param_specs",
           "rank_tools", "referenced_params", "restates_given",
           "slot_hint", "stated_values", "states_value", "value_cues"]

MAX_MISSING: Final = 3
"""At most this many missing slots are derived for a request."""
TOOL_SCORE_RATIO: Final = 0.75
"""Tools scoring at least this share of the best tool's score are candidates for the call to come."""
CUE_WINDOW: Final = 4
"""A value gives a parameter when it stands at most this many tokens after a word naming it (or 1 before)."""
NAME_WEIGHT: Final = 2.0
"""A request word found in a tool's name counts this many times its weight (once in a description)."""
_PRONOUNS: Final = frozenset("i me my we us our he him his she her they them their it its you your".split())
_NOT_NOUN: Final = re.compile(r"(?:ing|ed|ly|ive)$")
"""A word ending so (a participle, an adverb, an adjective) ends a noun phrase rather than heading it."""
PHRASE_WORDS: Final = 3
"""An indefinite reference's noun phrase has at most this many words; its noun is the last."""
INDEFINITE_WINDOW: Final = 2
"""An indefinite word ("a", "some", "different") names a parameter when one of its words follows within this
many tokens."""
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


@lru_cache(maxsize=8192)
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


_SENTENCE_RE: Final = re.compile(r"(?<=[.!?:])\s+")


def _sentences(text: str) -> list[str]:
    return [x.strip() for x in _SENTENCE_RE.split(text) if x.strip()]


def _boilerplate(specs: Sequence[Any]) -> set[str]:
    """The description sentences two or more tools share word for word (a product's preamble: "This tool
    belongs to …"): they tell no tool from another."""
    seen: dict[str, int] = {}
    for s in specs:
        for sentence in set(_sentences(s.description)):
            seen[sentence] = seen.get(sentence, 0) + 1
    return {x for x, n in seen.items() if n >= 2}


def _tool_text(spec: Any, shared: set[str] = frozenset()) -> tuple[set[str], set[str], set[str]]:  # type: ignore[assignment]
    params = getattr(spec, "params", ()) or ()
    own = " ".join(x for x in _sentences(spec.description) if x not in shared)
    return (set(_words(spec.name)), set(_words(own)),
            {w for p in params for w in _words(p.name) + _words(p.description.split("[")[0])})


@lru_cache(maxsize=64)
def _tool_index(specs: tuple[Any, ...]) -> tuple[list[tuple[set[str], set[str], set[str]]], dict[str, float]]:
    """Each tool's word bags (name, own description, parameters) and each word's inverse document frequency among
    the tools; cached per tool list (an agent offers the same tools at every step)."""
    shared = _boilerplate(specs)
    bags = [_tool_text(s, shared) for s in specs]
    df: dict[str, int] = {}
    for name, desc, params in bags:
        for w in name | desc | params:
            df[w] = df.get(w, 0) + 1
    n = len(specs)
    return bags, {w: math.log((n + 1) / c) for w, c in df.items()}


ACTION_SYNONYMS: Final = True
"""Whether a request word also matches a tool's name or description by its synonyms (:data:`SYNONYM_GROUPS`)."""
SYNONYM_WEIGHT: Final = 0.5
"""A synonym's match counts this share of the word's own."""
SYNONYM_GROUPS: Final = (
    # general English action words and their near-synonyms (a thesaurus's view; no tool's or benchmark's words)
    "buy purchase acquire procure", "sell liquidate", "remove delete erase discard eliminate",
    "create make draft generate", "display show view peek print", "find locate search seek look",
    "check verify confirm validate inspect examine", "send message inform notify tell",
    "cost price fare airfare fee charge", "copy duplicate backup clone replicate", "move transfer relocate",
    "change modify edit update alter adjust", "cancel abort revoke", "book reserve",
    "start begin launch initiate ignite", "stop halt terminate", "compare juxtapose contrast",
    "calculate compute estimate determine", "authenticate login sign", "limit cap ceiling",
    "fill refuel replenish refill", "write record save store", "list catalogue catalog enumerate",
    "add append include insert attach", "distance far mileage", "status condition state",
)
_SYNONYMS: Final = {w: g for g in (frozenset(_norm(x) for x in grp.split()) for grp in SYNONYM_GROUPS) for w in g}


def rank_tools(request: str, specs: Sequence[Any]) -> list[tuple[float, Any]]:
    """The tools ``request`` may call next, best first, as ``(score, spec)`` with a positive score: each request
    word found in a tool counts its inverse document frequency among the tools, :data:`NAME_WEIGHT` times in the
    name, once in the description or a parameter's name or description (``specs``:
    :class:`~memory_ext.plan.derive.ToolSpec`); a description sentence two tools share word for word is left
    out."""
    asked = set(_words(request))
    if not asked or not specs:
        return []
    bags, idf = _tool_index(tuple(specs))
    alike = {a for w in asked for a in _SYNONYMS.get(w, ())} - asked if ACTION_SYNONYMS else set()
    scored = []
    for i, (name, desc, params) in enumerate(bags):
        score = sum(idf[w] * (NAME_WEIGHT if w in name else 1.0) for w in asked & (name | desc | params))
        score += SYNONYM_WEIGHT * sum(idf[w] * (NAME_WEIGHT if w in name else 1.0)
                                      for w in alike & (name | desc | params))
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
    (frozenset({"price", "cost", "fee", "fare", "budget", "payment"}), re.compile(
        r"[$€£¥]\s?\d[\d,]*(?:\.\d+)?|\b\d[\d,]*(?:\.\d+)?\s*(?:USD|EUR|GBP|JPY|CNY|dollars?|euros?|pounds?|bucks)\b",
        re.IGNORECASE)),  # a sum of money
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
    stop: bool = False  # punctuation right after it
    start: int = 0  # where it starts in the text


COPULA_VALUES: Final = True
"""Whether the one plain word a sentence ends on right after "<thing> is" is a value ("The special word is
analysis.", "The mode is eco."): a stated value needs no quotes or capitals. Agent suites, dev: slots hit@1 hashing
0.661 -> 0.670 (BFCL 0.390 -> 0.407), e5 0.606 -> 0.615 (hit@3 0.752 -> 0.761), no fold lower; the other suites and
the small-store suite unchanged (hashing)."""
_COPULA: Final = frozenset("is was are be".split())


def _copula_value(raw: str, before: Sequence[_Token], rest: str) -> bool:
    word = raw.rstrip(".!;")
    return len(before) >= 2 and before[-1].text.lower() in _COPULA and before[-2].value is None \
        and before[-2].text.lower() not in _STOP and before[-2].norm not in _PRONOUNS and word.isalpha() \
        and word.lower() not in _STOP and re.match(r"\s*(?:[.!;]|$)", rest) is not None


@lru_cache(maxsize=512)
def _tokens(text: str) -> tuple[_Token, ...]:
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
        elif COPULA_VALUES and _copula_value(raw, out, text[m.end():]):
            kind = "string"  # the one word a sentence ends on after "<thing> is" ("The special word is analysis.")
        out.append(_Token(raw, _norm(raw.strip("'\"‘“’”").rstrip(".,:;/-")), kind,
                          stop=bool(re.match(r"\s*[.,;:!?)]", text[m.end():m.end() + 3])) or raw[-1] in ".,;:!?",
                          start=m.start()))
        starts = bool(_SENTENCE_END.search(raw)) or after in ".!?"
    return tuple(out)


def param_cues(param: ParamSpec) -> frozenset[str]:
    """The words that name ``param`` in a request: its name's words and the first content words of its
    description (before any enum list).

    >>> sorted(param_cues(ParamSpec("amount", "Number of shares to trade.", "integer")))
    ['amount', 'shar', 'trad']

    A word the description qualifies by "of" ("The *name* of the product", "*Number* of shares") only heads the
    thing the parameter is (the product, shares): "My name is Karan" names no product.
    """
    return _param_cues(param.name, param.description)


@lru_cache(maxsize=4096)
def _param_cues(name: str, description: str) -> frozenset[str]:
    head = re.split(r"[.\[(]|\benum\b", description, maxsplit=1, flags=re.I)[0]
    if OF_HEADS:
        head = _OF_HEAD.sub(" ", head)
    return frozenset(set(_words(name)) | set(_words(head)[:DESCRIPTION_CUES]))


OF_HEADS: Final = True
"""Whether a description word qualified by "of" ("The *name* of the product") is left out of a parameter's cues.
Same agent-suite rankings at the slot lift's 0.5 (hashing and e5, dev); at a lift of 1.0 it keeps When2Call hit@1
0.94 instead of 0.82 (hashing; "My name is Karan" read as a product, a game, a workspace)."""
_OF_HEAD: Final = re.compile(r"\b[A-Za-z]+\s+of\b(?=\s+\S)", re.I)


def _is_numeric(param: ParamSpec) -> bool:
    return param.type in ("integer", "number", "float", "int", "double")


def _shape_spans(param: ParamSpec, text: str) -> list[tuple[int, int]] | None:
    """Where ``text`` holds values of the shape ``param``'s name asks for (:data:`VALUE_SHAPES`); None when its
    name asks for no shape."""
    words = {w.lower() for w in _WORD_RE.findall(param.name.replace("_", " "))}
    for names, shape in VALUE_SHAPES:
        if words & names:
            return [m.span() for m in shape.finditer(text)]
    return None


def _in_description(tok: _Token, param: ParamSpec) -> bool:
    """Whether a value is one the parameter's description gives as an example ("such as 'NYSE', 'NASDAQ'")."""
    value = tok.text.strip("'\"‘“’”.,;:!?")
    if len(value) < 2 or value.lower() in _STOP:
        return False  # ("OR" is no example of "'clothing', or 'furniture'")
    for m in re.finditer(rf"(?<!\w){re.escape(value)}(?!\w)", param.description, re.I):
        # as an example: quoted, or after "e.g." / "such as" / … — not a word of the description's own sentence
        # ("ID of the ticket" gives no value "ID")
        if param.description[m.start() - 1:m.start()] in ("'", '"', "‘", "“") \
                or _EXAMPLE_CUE.search(param.description[max(0, m.start() - 40):m.start()]) \
                or _in_list(param.description, m.start(), m.end()):
            return True
    return False


def _in_list(text: str, start: int, end: int) -> bool:
    """Whether ``text[start:end]`` stands in a list of values (an enum a hint spells out: "USD RMB EUR JPY"): at
    least two of the two words on either side are names or codes (a capital, a digit)."""
    around = text[max(0, start - 40):start].split()[-2:] + text[end:end + 40].split()[:2]
    return sum(bool(re.fullmatch(r"[\"'‘“]?(?:[A-Z][\w-]*|\d[\w.-]*)[\"'’”]?[,;]?", w)) for w in around) >= 2


_EXAMPLE_CUE: Final = re.compile(r"e\.g\.|\bi\.e\.|such as|for (?:example|instance)|\blike\b|\binclud|\bexamples?\b"
                                 r"|\benum\b|\boptions\b|\bone of\b|\bvalues?\b", re.I)


def given_params(params: Sequence[ParamSpec], text: str, *, cue_words: set[str] | None = None) -> set[str]:
    """The names of ``params`` that ``text`` (what the user said) gives a value for: an enum value said, a value
    of the parameter's shape (:data:`VALUE_SHAPES`; such a value gives no other parameter), a value its
    description names as an example, or a value right after a word naming it (:func:`param_cues`); a value goes to
    the parameter whose naming word is nearest, a number to a numeric parameter only.

    >>> ps = (ParamSpec("file_name", "The name of the file.", "string"),
    ...       ParamSpec("folder", "The folder to search in.", "string"))
    >>> sorted(given_params(ps, "Find a file named 'findings_report' within a folder."))
    ['file_name']
    """
    return set(given_values(params, text, cue_words=cue_words))


def given_values(params: Sequence[ParamSpec], text: str, *,
                 cue_words: set[str] | None = None) -> dict[str, list[str]]:
    """What :func:`given_params` reads, with the values: parameter name -> the values ``text`` gives it (as
    written, quotes off).

    >>> given_values((ParamSpec("amount", "Number of shares to trade.", "integer"),), "I want 100 shares.")
    {'amount': ['100']}
    """
    toks = _tokens(text)
    given: dict[str, list[str]] = {}
    cues = {p.name: param_cues(p) if cue_words is None else param_cues(p) & cue_words for p in params}
    taken: list[tuple[int, int]] = []  # the spans of values a shape gave: not a value for another parameter
    for p in params:
        # an enum value said gives one parameter: "1500 USD" is the base currency or the target, not both
        said_enum = next((m.span() for v in p.enum for m in re.finditer(rf"(?<!\w){re.escape(v)}(?!\w)", text, re.I)
                          if not any(a <= m.start() < b for a, b in taken)), None)
        spans = _shape_spans(p, text)
        if said_enum or spans:
            found = (spans or []) + ([said_enum] if said_enum else [])
            given.setdefault(p.name, []).extend(text[a:b] for a, b in found)
            taken += found
    for i, tok in enumerate(toks):
        if tok.value is None or any(a <= tok.start < b for a, b in taken):
            continue
        example = next((p for p in params if _in_description(tok, p)), None)
        if example is not None:  # a value the parameter's description names as an example
            given.setdefault(example.name, []).append(_bare(tok.text))
            continue
        best: tuple[int, str] | None = None
        bare = _bare(tok.text).lower()
        for p in params:
            if tok.text[0] not in "'\"‘“" and bare in _own_words(p.name, p.description):
                continue  # a word naming the parameter ("user ID"), not its value (unless quoted)
            if p.type and tok.value == "number" and not _is_numeric(p) and not p.name.lower().endswith("id"):
                continue  # (a parameter of unknown type takes any value)
            if tok.value == "string" and _is_numeric(p):
                continue
            for j in range(max(0, i - CUE_WINDOW), min(len(toks), i + 2)):
                if j != i and toks[j].value is None and toks[j].norm in cues[p.name]:
                    d = i - j if j < i else 2 * (j - i)
                    # at the same distance, a parameter without a value yet ("my name is Theodore Collins": the
                    # first name, then the last)
                    if best is None or d < best[0] or (ONE_VALUE_EACH and d == best[0] and best[1] in given
                                                       and p.name not in given):
                        best = (d, p.name)
        if best is not None:
            given.setdefault(best[1], []).append(_bare(tok.text))
    return given


ONE_VALUE_EACH: Final = True
"""Whether a value that two parameters' naming words reach at the same distance goes to the one without a value
yet ("my name is Theodore Collins" gives ``first_name`` and ``last_name``), rather than to the first again."""


@lru_cache(maxsize=1024)
def _own_words(name: str, description: str) -> frozenset[str]:
    """The words of a parameter's name and description, lower case, as written."""
    return frozenset(w.lower() for w in re.findall(r"[^\W_]+", f"{name.replace('_', ' ')} {description}"))


def _bare(value: str) -> str:
    return value.strip("'\"‘“’”.,;:!?")


def states_value(text: str, slots: Sequence[str], hints: Mapping[str, str] | None = None, *,
                 about: str | None = None) -> tuple[str, ...]:
    """The ``slots`` (parameter names; ``hints``: what each one's value is, its description) that ``text`` states
    a value for: a value of its type (:func:`hint_param`; any type when the hint gives none) right after a word
    naming the slot (:func:`given_params`).

    >>> states_value("I want 100 shares.", ["amount"], {"amount": "Number of shares to trade."})
    ('amount',)
    >>> states_value("The share I want to purchase is from a big company.", ["amount"],
    ...              {"amount": "Number of shares to trade."})
    ()
    """
    given = stated_values(text, slots, hints, about=about)
    return tuple(s for s in slots if s in given)


def stated_values(text: str, slots: Sequence[str], hints: Mapping[str, str] | None = None, *,
                  about: str | None = None) -> dict[str, list[str]]:
    """What :func:`states_value` reads, with the values: slot -> the values ``text`` states for it."""
    frozen = _stated_values(text, tuple(slots), tuple((s, (hints or {}).get(s, "")) for s in slots), about)
    return {slot: list(values) for slot, values in frozen}


@functools.lru_cache(maxsize=8192)
def _stated_values(text: str, slots: tuple[str, ...], hints: tuple[tuple[str, str], ...],
                   about: str | None) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """:func:`stated_values`, cached: every search of a store reads the same stored turns for the same slots."""
    params = [hint_param(s, h) for s, h in hints]
    given = given_values(params, text, cue_words=None if about is None else set(_words(about)))
    return tuple((slot, tuple(values)) for slot, values in given.items())


def is_new(value: str, said: str) -> bool:
    """Whether ``value`` is not in ``said`` (what the conversation has said so far) as a whole word, letter case
    and a number's ``$`` or thousands commas aside: a turn stating it tells the agent something it lacks.

    >>> is_new("AAPL", "buy some shares of aapl"), is_new("100", "buy 1000 shares"), is_new("$1,500", "1500 USD")
    (False, True, False)
    """
    bare = _bare(value).lower().lstrip("$€£¥").replace(",", "")
    if not bare:
        return False
    plain = said.lower().replace(",", "")
    return re.search(rf"(?<![\w.]){re.escape(bare)}(?![\w]|\.\d)", plain) is None


def value_cues(text: str) -> dict[str, set[str]]:
    """The content words that stand next to a value in ``text`` (at most :data:`CUE_WINDOW` tokens before it or
    one after: "100 *shares*", "the *stock* should be NVDA"), each with its values (quotes off, lower case): the
    things ``text`` gives a value of, whatever the tool.

    >>> sorted(value_cues("Buy 50 shares at a price of $95 each."))
    ['buy', 'each', 'pric', 'shar']
    >>> value_cues("I want 100 shares.")["shar"]
    {'100'}
    """
    toks = _tokens(text)
    out: dict[str, set[str]] = {}
    for i, tok in enumerate(toks):
        if tok.value is None:
            continue
        for j in range(max(0, i - CUE_WINDOW), min(len(toks), i + 2)):
            t = toks[j]
            if j != i and t.value is None and len(t.norm) >= 3 and t.text.lower() not in _STOP \
                    and t.norm not in _PRONOUNS and t.text.rstrip(".,;:!?").isalpha():
                out.setdefault(t.norm, set()).add(_bare(tok.text).lower())
    return out


def restates_given(text: str, request: str, said: str = "") -> bool:
    """Whether ``text`` gives another value of a thing ``request`` already gives one of (a word standing next to
    a value in both, :func:`value_cues`, with a value in ``text`` that neither ``request`` nor ``said`` has):
    "I want 100 shares." after "Buy 50 shares" is an answer to another request, not this one's missing value.

    >>> request = "Buy 50 shares of it."
    >>> restates_given("I want 100 shares.", request), restates_given("I want 50 shares.", request)
    (True, False)
    >>> restates_given("I want 100 shares.", "Buy some shares at $700 per share.")  # a price, not a number of shares
    False
    """
    given = _value_cues(request)
    if not given:
        return False
    return any(cue in given and any(is_new(v, f"{request}\n{said}") and _kind(v) in {_kind(g) for g in given[cue]}
                                    for v in values)
               for cue, values in _value_cues(text).items())


@functools.lru_cache(maxsize=8192)
def _value_cues(text: str) -> dict[str, set[str]]:
    """:func:`value_cues`, cached (read only: callers do not change it)."""
    return value_cues(text)


def _kind(value: str) -> str:
    """A value's kind: a sum of money, a number or a string ("$700 per share" is not a number of shares)."""
    if value[:1] in "$€£¥" or _MONEY_RE.search(value):
        return "money"
    return "number" if _NUMBER_RE.fullmatch(value) else "string"


_MONEY_RE: Final = re.compile(r"\d\s*(?:usd|eur|gbp|jpy|cny|dollars?|euros?|pounds?|bucks)\b", re.I)


_INDEFINITE: Final = frozenset("a an some another different certain specific particular new other".split())


def asked_params(params: Sequence[ParamSpec], request: str) -> set[str]:
    """The names of ``params`` that ``request`` names without a value, by an indefinite reference ("a different
    file", "a specific term", "some folder", "a new file"): what it asks for is not a value given before.

    >>> ps = (ParamSpec("file_name", "The name of the file.", "string"),)
    >>> asked_params(ps, "Sort a different file."), asked_params(ps, "Sort the file 'a.txt'.")
    ({'file_name'}, set())
    """
    toks = _tokens(request)
    given = given_params(params, request)
    out = set()
    for p in params:
        if p.name in given:
            continue
        cues = param_cues(p)
        for i, tok in enumerate(toks):
            if tok.text.lower() in _INDEFINITE and any(
                    t.value is None and t.norm in cues for t in toks[i + 1:i + 1 + INDEFINITE_WINDOW]):
                out.add(p.name)
                break
    return out


_DETERMINERS: Final = frozenset("a an some any another certain specific particular different".split())
_MODIFIERS: Final = frozenset("specific certain particular different new other another same few little one two "
                              "more most good great nice quick rough".split())


_ADVERBS: Final = frozenset("now right here there today tonight tomorrow then too also again soon later please "
                             "quickly asap first instead anyway already yet still just only even back away".split())
"""Words that end a noun phrase ("some shares *right now*": the thing is the shares)."""


OPEN_QUANTITIES: Final = True
"""Whether an amount named by a demonstrative without antecedent ("a stretch of *that much miles*") or a quantity
of a named thing ("some Tesla share at $700") is an open reference: the noun is what a later turn must give."""
_PREPOSITIONS: Final = frozenset("without within about over under before after across through during until "
                                 "since than like".split())
"""Words that end a noun phrase after its noun ("that much miles *without* a stop")."""
_DEMONSTRATIVES: Final = frozenset("that this".split())
_QUANTIFIERS: Final = frozenset("much many".split())
_OTHER_THING: Final = frozenset("at per each".split())
"""After an open reference, a value behind one of these is another thing's (a price per unit), not the noun's."""


def _is_name_modifier(toks: Sequence[_Token], j: int) -> bool:
    """Whether ``toks[j]`` is a proper name standing before a plain noun ("some *Tesla* share")."""
    raw = toks[j].text
    return toks[j].value == "string" and raw[:1].isupper() and raw.isalpha() and not toks[j].stop \
        and j + 1 < len(toks) and toks[j + 1].value is None and toks[j + 1].text.rstrip(".,;:!?").isalpha() \
        and toks[j + 1].text.lower() not in _STOP


def open_references(request: str) -> list[str]:
    """The things ``request`` names without saying which: the nouns of its indefinite references ("a specific
    term", "some shares", "a different file", "a certain level"), when no value follows them. They are what a
    later turn must give ("The term is 'Progress'", "100 shares").

    >>> open_references("Highlight the lines featuring a specific term, and buy some shares.")
    ['term', 'shares']
    >>> open_references("Find a file named 'notes.txt'.")
    []
    """
    toks = _tokens(request)
    out: list[str] = []
    for i, tok in enumerate(toks):
        det = tok.text.lower()
        j = i + 1
        if OPEN_QUANTITIES and det in _DEMONSTRATIVES and j < len(toks) and toks[j].text.lower() in _QUANTIFIERS:
            j += 1  # "that much", "this many": an amount the conversation has not said
        elif det not in _DETERMINERS:
            continue
        while j < len(toks) and j <= i + 2 and toks[j].text.lower() in _MODIFIERS:
            j += 1
        phrase: list[str] = []  # the noun phrase: up to PHRASE_WORDS plain words, its noun the last
        while j < len(toks) and len(phrase) < PHRASE_WORDS:
            raw = toks[j].text
            word = raw.rstrip(".,;:!?").lower()
            if OPEN_QUANTITIES and det == "some" and not phrase and _is_name_modifier(toks, j):
                j += 1  # "some Tesla share": the name says whose, the number is still open
                continue
            if toks[j].value is not None or not word.isalpha() or word in _STOP or word in _PRONOUNS \
                    or word in _DETERMINERS or (phrase and (_NOT_NOUN.search(word) or word in _ADVERBS
                                                            or word in _PREPOSITIONS)):
                break
            phrase.append(word)
            j += 1
            if toks[j - 1].stop:
                break  # punctuation ends the phrase
        after = toks[j + 1:j + CUE_WINDOW]
        if OPEN_QUANTITIES and j < len(toks) and toks[j].text.lower() in _OTHER_THING:
            after = ()  # "some shares at $700": the value is the price's, not the shares'
        if not phrase or len(phrase[-1]) < 3 or (j < len(toks) and toks[j].value is not None) \
                or any(t.value is not None for t in after):
            continue  # a value follows: given, not open ("a file named 'x'")
        if phrase[-1] not in out:
            out.append(phrase[-1])
    return out


def slot_hint(param: ParamSpec) -> str:
    """What a value of ``param`` is, in words: the head of its description (before any enum list), its enum
    values and its JSON type in parentheses; the slot route searches for it and :func:`states_value` reads it.

    >>> slot_hint(ParamSpec("mode", "The mode to set. [Enum]: engage, release", "string", ("engage", "release")))
    'The mode to set. engage release (string)'
    """
    head = re.split(r"\[|\benum\b|\boptions are\b", param.description, maxsplit=1, flags=re.I)[0]
    head = " ".join(head.split())[:HINT_MAX_CHARS].strip()
    kind = f"({param.type})" if param.type else ""
    return " ".join(p for p in (head, " ".join(param.enum[:8]), kind) if p)


def hint_param(slot: str, hint: str = "") -> ParamSpec:
    """The parameter a :func:`slot_hint` describes (its description and type; the enum values stay in the text).

    >>> hint_param("amount", "Number of shares to trade. (integer)")
    ParamSpec(name='amount', description='Number of shares to trade.', type='integer', enum=())
    """
    found = _HINT_TYPE.search(hint)
    if found is None:
        return ParamSpec(slot, hint.strip())
    return ParamSpec(slot, hint[:found.start()].strip(), found.group(1))


_HINT_TYPE: Final = re.compile(r"\((string|integer|number|float|int|double|boolean|array|object|dict)\)\s*$")


def missing_params(request: str, specs: Sequence[Any], *, said: str | None = None,
                   passed: Iterable[str] = ()) -> list[ParamSpec]:
    """The required parameters of the tools ``request`` is about to call (:func:`rank_tools`: the best and those
    within :data:`TOOL_SCORE_RATIO` of it) that are not given (:func:`given_params` over ``said``, by default the
    request) and were not ``passed`` by an earlier call — unless the request asks for a new one
    (:func:`asked_params`); the best tool's first, at most :data:`MAX_MISSING`. Before them, the parameters the
    request's open references name (:func:`referenced_params`); after them, those of each clause's clear best tool
    in a request of several steps (:data:`CLAUSE_TOOLS`)."""
    ranked = rank_tools(request, specs)
    if not ranked:
        return []
    done = set(passed)
    out: list[ParamSpec] = referenced_params(request, ranked) if OPEN_REFERENCE_SLOTS else []
    tools = [spec for score, spec in ranked if score >= TOOL_SCORE_RATIO * ranked[0][0]]
    if CLAUSE_TOOLS:  # a request of several steps: each step's best tool too
        clauses = _clauses(request)
        for clause in clauses if len(clauses) > 1 else ():
            best = rank_tools(clause, specs)
            # the clause's tool when it clearly is one: well ahead of the clause's next tool and not far behind the
            # request's best
            if best and best[0][1] not in tools and best[0][0] >= CLAUSE_SHARE * ranked[0][0] \
                    and (len(best) == 1 or best[0][0] >= CLAUSE_MARGIN * best[1][0]):
                tools.append(best[0][1])
    for spec in tools:
        if len(out) >= MAX_MISSING:
            break
        params = _params_of(spec)
        said_now = given_params(tuple(params.values()), request)
        before = said_now if said is None else given_params(tuple(params.values()), said)
        asked = asked_params(tuple(params.values()), request)
        names = {p.name for p in out}
        # what the request asks for anew ("a different file") is missing even when said or passed before
        out += [params[r] for r in spec.required if r not in said_now and r not in names
                and (r in asked or (r not in before and r not in done))]
    if not out and FALLBACK_RATIO < TOOL_SCORE_RATIO:
        # the request's best tools lack nothing (it gives or the conversation gave all they need): the call it asks
        # for is the next tool down that lacks something and that a request word names, which the best tools' names
        # do not ("please *book* a ticket" after the flight's cost)
        asked = set(_words(request))
        named = {w for spec in tools for w in _words(spec.name)}
        for score, spec in ranked:
            if spec in tools:
                continue
            if score < FALLBACK_RATIO * ranked[0][0]:
                break
            if not (set(_words(spec.name)) & asked) - named:
                continue
            params = _params_of(spec)
            before = given_params(tuple(params.values()), request if said is None else said)
            out = [params[r] for r in spec.required if r not in before and r not in done]
            if out:
                break
    return out[:MAX_MISSING]


FALLBACK_RATIO: Final = 0.6
"""When the best tools lack nothing, the next tool scoring at least this share of the best that lacks something
and whose name holds a request word the best tools' names lack gives the missing slots (1.0: none)."""


CLAUSE_TOOLS: Final = True
"""Whether each clause of a request of several steps ("refuel it to a certain level; then start the engine")
adds its best tool's missing parameters after those of the request's best tools."""
CLAUSE_SHARE: Final = 0.5
"""A clause's best tool scores at least this share of the request's best tool's score to count."""
CLAUSE_MARGIN: Final = 2.0
"""… and at least this many times its clause's second tool's score."""
_CLAUSE_RE: Final = re.compile(r"(?<=[.!?;])\s+|(?:^|,?\s+)(?:and then|then|after that|following that|afterwards|"
                               r"once (?:that|done)|and also|also)\b,?\s*", re.I)


def _clauses(request: str) -> list[str]:
    return [c.strip() for c in _CLAUSE_RE.split(request) if c and len(c.strip()) > 3]


OPEN_REFERENCE_SLOTS: Final = True
"""Whether the parameters the request's open references name (:func:`referenced_params`) come first among the
missing slots."""


def _params_of(spec: Any) -> dict[str, ParamSpec]:
    params = {p.name: p for p in getattr(spec, "params", ()) or ()}
    for name in spec.required:
        params.setdefault(name, ParamSpec(name))
    return params


def referenced_params(request: str, ranked: Sequence[tuple[float, Any]]) -> list[ParamSpec]:
    """The required parameters ``request`` names by an open reference (:func:`open_references`: "some shares", "a
    comment", "a different file") that it does not give: for each reference, the parameter of a ranked tool
    (``ranked``: :func:`rank_tools`) whose name holds its noun, else whose description's head does
    (:func:`param_cues`); the better-ranked tool's first. Such a parameter is what the request lacks whichever tool
    its other words pick.

    >>> from memory_ext.plan.derive import tool_specs
    >>> tools = tool_specs([
    ...     {"name": "get_available_stocks", "description": "Get a list of stock symbols in a sector.", "parameters":
    ...      {"properties": {"sector": {"type": "string"}}, "required": ["sector"]}},
    ...     {"name": "place_order", "description": "Place an order.", "parameters": {"properties": {
    ...      "amount": {"type": "integer", "description": "Number of shares to trade."}}, "required": ["amount"]}}])
    >>> [p.name for p in referenced_params("List technology stocks and buy some shares.",
    ...                                    rank_tools("List technology stocks and buy some shares.", tools))]
    ['amount']
    """
    refs = [_norm(r) for r in open_references(request)]
    out: list[ParamSpec] = []
    for ref in refs:
        best: tuple[int, int, ParamSpec, dict[str, ParamSpec]] | None = None
        for i, (_score, spec) in enumerate(ranked):
            params = _params_of(spec)
            for name in spec.required:
                p = params[name]
                if ref not in param_cues(p):
                    continue
                key = (0 if ref in _words(p.name) else 1, i)
                if best is None or key < best[:2]:
                    best = (*key, p, params)
        # given or not is read among all the tool's parameters: a value goes to the one whose naming word is nearest
        if best is not None and best[2].name not in {p.name for p in out} \
                and best[2].name not in given_params(tuple(best[3].values()), request):
            out.append(best[2])
    return out


def missing_slots(request: str, specs: Sequence[Any], *, said: str | None = None,
                  passed: Iterable[str] = ()) -> tuple[str, ...]:
    """The names of :func:`missing_params`."""
    return tuple(p.name for p in missing_params(request, specs, said=said, passed=passed))


_FORMAT_LETTERS: Final = re.compile(r"\b(\d|two|three|four|five)[- ]letters?\b", re.I)
_FORMAT_LIST: Final = re.compile(r"format (?:of |like |as )?['\"]?([A-Za-z]+(?:,\s*[A-Za-z]+)+)", re.I)
_NUMBER_WORDS: Final = {"two": 2, "three": 3, "four": 4, "five": 5}
_LEADING_PREPOSITION: Final = re.compile(r"^(?:to|from|in|at|near)\s+", re.I)


def fits_format(value: str, hint: str, text: str = "") -> bool | None:
    """Whether ``value`` (as :func:`stated_values` reads it from ``text``) has the form the slot's hint spells out:
    "the 3 letter code of the airport" (LAX), "in the format YYYY-MM-DD" (2026-11-15), "HH:MM", "in the format of
    'City, State'" (the value followed by commas in ``text``: "Berkeley, CA"); None when the hint spells out none.

    >>> fits_format("to LAX", "The 3 letter code of the arriving airport"), fits_format("to Los", "The 3 letter code")
    (True, False)
    >>> fits_format("Berkeley", "The city, in the format of 'City, State'", "Find a salon in Berkeley, CA.")
    True
    >>> fits_format("Rivermist", "The destination to navigate") is None
    True
    """
    bare = _LEADING_PREPOSITION.sub("", _bare(value)).strip()
    found = _FORMAT_LETTERS.search(hint)
    if found:
        n = _NUMBER_WORDS.get(found.group(1).lower()) or int(found.group(1))
        return len(bare) == n and bare.isalpha() and bare.isupper()
    if "YYYY-MM-DD" in hint.upper():
        return re.fullmatch(r"\d{4}-\d{1,2}-\d{1,2}", bare) is not None
    if "HH:MM" in hint.upper():
        return re.fullmatch(r"\d{1,2}:\d{2}", bare) is not None
    found = _FORMAT_LIST.search(hint)
    if found and text:
        parts = found.group(1).count(",") + 1
        tail = r",\s*[A-Za-z0-9][\w .'-]*?" * (parts - 1)
        return re.search(rf"(?<!\w){re.escape(bare)}[\w .'-]*?{tail}(?:[.?!;]|\s*$|,)", text) is not None
    return None
