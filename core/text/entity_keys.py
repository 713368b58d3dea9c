"""Entity keys and the one known-entity matcher.

An entity is stored and looked up under its *key* (:func:`entity_key`: NFKC, casefold, possessive 's and
punctuation dropped), so "Ana's" and "ANA" are one entity. :func:`match_known` finds the known keys a text
names — runs of whole tokens (case-insensitive) or, for keys written in CJK characters, substrings (李明 in
李明的哥哥), the longer match winning where two overlap — and serves every index that matches entities at query
time (the entity graph's key table, the evidence nodes' ``e:`` keys). :func:`record_entities` is what the write
pipeline extracts from a record: :func:`~memory_ext.text.entities.extract_entities` without quantities and
without role-label speakers.

>>> entity_key("Ana's"), entity_key("  ANA "), entity_key("Charlotte’s Web"), entity_key("李明")
('ana', 'ana', 'charlotte web', '李明')
>>> known = {"ana": 1, "berlin marathon": 2, "李明": 3}
>>> match_known("Ana ran the Berlin Marathon with 李明的哥哥", known.get, *key_extent(known))
[1, 2, 3]
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Collection, Iterable
from typing import Final, TypeVar

from .entities import extract_entities
from .script import CJK

__all__ = ["GENERIC_SPEAKERS", "MAX_CJK_KEY", "MAX_KEY_TOKENS", "entity_key", "is_cjk_key", "key_extent", "known_in",
           "match_known", "normalised_tokens", "record_entities"]

MAX_KEY_TOKENS: Final = 8
"""Longest key, in tokens, that :func:`match_known` looks for."""
MAX_CJK_KEY: Final = 12
"""Longest CJK key, in characters, matched as a substring."""

_CJK: Final = CJK
_TOKEN_RE: Final = re.compile(rf"[{_CJK}]+|[^\W_{_CJK}]+")
_CJK_RE: Final = re.compile(rf"[{_CJK}]")
_APOS: Final = str.maketrans({"’": "'", "‘": "'", "ʼ": "'", "`": "'"})
_POSSESSIVE_RE: Final = re.compile(r"'s\b")
# quantities ("3 kids", "$200", "60公里", "两只猫") are entities to extract_entities, but as graph nodes they
# join unrelated records ("3 kids" / "3 km") and only add noise
_QUANTITY_RE: Final = re.compile(r"^(?:[$€£¥]|(?:US|A|C)[$]|\d|[二两三四五六七八九十百千万]+"
                                  r"[个只条位本件张部辆台家杯盘首幅双套座所间棵朵匹头岁年天次])")
_EN_NUMBER_WORDS: Final = frozenset({
    "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve", "fifteen",
    "twenty", "thirty", "forty", "fifty", "hundred", "thousand", "dozen",
})
GENERIC_SPEAKERS: Final[frozenset[str]] = frozenset({"assistant", "user", "system", "ai", "bot", "human", "tool"})
"""Speaker labels that name a role, not a person: they would join every record of a conversation."""

T = TypeVar("T")


def normalised_tokens(text: str) -> list[tuple[int, int, str]]:
    """``(start, end, token)`` of the normalised text: NFKC, casefold, possessive 's cut, CJK runs apart."""
    s = _POSSESSIVE_RE.sub("", unicodedata.normalize("NFKC", text).casefold().translate(_APOS))
    return [(m.start(), m.end(), m.group()) for m in _TOKEN_RE.finditer(s)]


def entity_key(name: str) -> str:
    """The normalised form two spellings of one entity share ('' when the name has no letter or digit)."""
    return " ".join(t for _, _, t in normalised_tokens(name))


def is_cjk_key(key: str) -> bool:
    """A one-token key written in CJK characters (matched as a substring)."""
    return " " not in key and bool(_CJK_RE.search(key))


def key_extent(keys: Iterable[str], max_tokens: int = 1, max_cjk: int = 0) -> tuple[int, int]:
    """``(max_tokens, max_cjk)`` :func:`match_known` needs for ``keys``, grown from the given values."""
    for key in keys:
        max_tokens = min(max(max_tokens, key.count(" ") + 1), MAX_KEY_TOKENS)
        if is_cjk_key(key):
            max_cjk = min(max(max_cjk, len(key)), MAX_CJK_KEY)
    return max_tokens, max_cjk


def match_known(text: str, lookup: Callable[[str], T | None], max_tokens: int, max_cjk: int) -> list[T]:
    """The values ``lookup`` gives for the known keys ``text`` names, in order of mention, each once.

    A key matches as a run of at most ``max_tokens`` whole tokens or, when ``max_cjk >= 2``, as a CJK substring
    of at most ``max_cjk`` characters; where two matches overlap the longer wins.
    """
    if not text or not text.strip():
        return []
    toks = normalised_tokens(text)
    hits: list[tuple[int, int, T]] = []  # (start, end, value) in the normalised text
    for i in range(len(toks)):
        for n in range(1, min(max_tokens, len(toks) - i) + 1):
            value = lookup(" ".join(t for _, _, t in toks[i : i + n]))
            if value is not None:
                hits.append((toks[i][0], toks[i + n - 1][1], value))
        start, _, tok = toks[i]
        if max_cjk >= 2 and len(tok) > 2 and _CJK_RE.match(tok):
            for lo in range(len(tok) - 1):
                for hi in range(lo + 2, min(len(tok), lo + max_cjk) + 1):
                    if hi - lo == len(tok):
                        continue  # the whole token: matched above
                    value = lookup(tok[lo:hi])
                    if value is not None:
                        hits.append((start + lo, start + hi, value))
    hits.sort(key=lambda h: (h[0], h[0] - h[1]))
    out: list[T] = []
    covered_end = -1
    for start, end, value in hits:
        if start < covered_end:
            continue
        covered_end = end
        out.append(value)
    return list(dict.fromkeys(out))


def known_in(text: str, known: Collection[str]) -> Collection[str]:
    """The ``known`` keys among the single tokens of ``text`` (all :func:`record_entities` needs of a namespace's
    thousands of keys for one text)."""
    if not known:
        return ()
    return {t for _, _, t in normalised_tokens(text) if t in known}


def _is_quantity(name: str) -> bool:
    first = name.split(maxsplit=1)[0].lower() if name.split() else ""
    return bool(_QUANTITY_RE.match(name)) or first in _EN_NUMBER_WORDS


def record_entities(text: str, *, speaker: str | None = None, known: Collection[str] = ()) -> list[str]:
    """The entity names of one record: :func:`extract_entities` without quantities ("3 kids", "$200", "60公里")
    and without a role-label speaker ("assistant", "user").

    The speaker is kept when it is a name: it is what links a first-person statement ("my brother Marco...")
    to the person who made it.

    >>> record_entities("My brother Marco has 3 kids.", speaker="Ana")
    ['Ana', 'Marco']
    >>> record_entities("You will love Lisbon in spring.", speaker="assistant")
    ['Lisbon']
    """
    who = speaker if speaker and speaker.strip().casefold() not in GENERIC_SPEAKERS else None
    return [n for n in extract_entities(text, speaker=who, known=known) if not _is_quantity(n)]
