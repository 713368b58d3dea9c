"""Updates without an LLM: a later statement that restates the same subject with another value comes first.

"The standup moves to 10:15" after "Our team standup is at 9:30", "I'm leasing a Tesla Model 3 now" after "I drive
a 2015 Honda Civic", "评审会改到周五上午十点了" after "周三下午三点和客户开项目评审会": the two statements share an
**anchor** (a content word or name, a Chinese character pair that is no function word) and each holds **values of
one type** — times (weekdays, months, clock times, dates, 周三, 下午, 十号), quantities (numbers, 三千五) or names
(capitalised words, Latin names inside Chinese, Chinese place names) — and the later one holds a value of that type
the earlier one does not. That is the frame of an update, read from the two texts (:func:`restates`): no list of
"moved to / switched to / 改到" phrases, so the many ways people say a change are covered alike.

:func:`newest_first` applies it to the best turns of a ranking: for a question about the present the later of two
such statements by the same speaker is put just above the earlier (only among the :data:`UPDATE_TOP` best turns,
and only through an anchor no third of them holds: a store whose turns all share a theme and differ in dates —
a diary, MADial's memories — is left in its order, and so is a store without an assistant's turns: memories
written one by one, not a conversation); for a question about the past (:func:`asks_past`:
"before", "used to", 以前, 原来) the earlier above the later.

The same frame marks the older statement superseded at write time (:mod:`memory_ext.ingest.supersede`: there the
values must stand in a sentence that shares the subject, and a theme is counted over every statement of the
speaker); subjects keep two people apart ("I live in Porto" / "My sister Lena lives in Coimbra"), a name said to
the listener ("Thanks, Mel!") and a time that dates a story ("last Friday", 上周二) are no values.

>>> restates("Our team standup is at 9:30 every morning.", "From next week the standup moves to 10:15.")
True
>>> restates("I go to the gym on Mondays.", "At the gym I mostly do deadlifts.")
False
>>> restates("我每周一和周四晚上去健身房。", "最近加班多，健身改成周末早上了。")
True
>>> asks_past("Where did Lena live before?"), asks_past("Where does Lena live now?")
(True, False)
"""

from __future__ import annotations

import functools
import itertools
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Final

import numpy as np

from ..ingest.claim_words import PEOPLE, ZH_CITIES
from ..ingest.claims import statement_subjects
from ..store.catalog import KIND_CODES, Catalog
from .things import thing_kinds

__all__ = ["Frame", "Value", "asks_past", "frame_of", "newest_first", "restates", "said_of", "stem", "updates",
           "value_spans"]

_TURN: Final = KIND_CODES["turn"]
MARGIN: Final = 1e-4
UPDATE_TOP: Final = 5
"""Only the order of this many best turns changes: which turns a search returns stays the ranking's."""

_EN_TIME: Final = re.compile(
    r"\b(?:mon|tues|wednes|thurs|fri|satur|sun)days?\b|\b(?:january|february|march|april|may|june|july|august"
    r"|september|october|november|december)\b|\b\d{1,2}(?::\d{2})?\s*(?:am|pm)\b|\b\d{1,2}:\d{2}\b"
    r"|\b\d{1,2}(?:st|nd|rd|th)\b|\b(?:noon|midnight|morning|mornings|afternoons?|evenings?|nights?|weekends?)\b"
    r"|\b(?-i:Mon|Tue|Tues|Wed|Thu|Thur|Thurs|Fri|Sat|Sun|Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sep|Sept|Oct|Nov|Dec)\b",
    re.IGNORECASE)
_ZH_NUM: Final = "[0-9一二三四五六七八九十两百千万零半]"
_ZH_TIME: Final = re.compile(
    rf"(?:周|星期|礼拜)[一二三四五六日天末]|[上下中]午|早上|晚上|傍晚|凌晨|{_ZH_NUM}+(?:点|号|日|月)(?:半|{_ZH_NUM}+分)?")
_NUMBER: Final = re.compile(
    r"\d[\d,.]*|[一二三四五六七八九十两][一二三四五六七八九十两百千万零]*[百千万][一二三四五六七八九]?")
_EN_NAME: Final = re.compile(r"(?<![.!?]\s)(?<!^)\b(?!I\b)[A-Z][\w'-]*|\b[a-z]+[A-Z]\w*")
_LATIN_IN_ZH: Final = re.compile(r"[A-Za-z][A-Za-z0-9-]*(?:\s+[A-Z0-9][A-Za-z0-9-]*)*")
_CJK_WORD: Final = re.compile(r"[\u4e00-\u9fff]+")
_CITY_RE: Final = re.compile("|".join(sorted(ZH_CITIES, key=len, reverse=True)))
_HAN: Final = re.compile(r"[\u3400-\u9fff]")
_NARRATED: Final = re.compile(r"(?:\blast|\bthis past|上)\s*$", re.IGNORECASE)
_AGO: Final = re.compile(r"\s*(?:ago\b|前)")
"""A time said as when something happened ("last Friday", "two weeks ago", 上周二) dates a story; it is no value a
later statement could change, as "on Fridays" or "下周二" is."""
_VOCATIVE: Final = re.compile(r"(?:^|[.!?]\s+)(?:(?:OK|[A-Za-z][a-z]*),?\s+)?([A-Z][a-z]+)\s*(?=[,!?])"
                              r"|,\s*([A-Z][a-z]+)\s*(?:[.!?]+|$)")
"""A name said to the listener ("Hey Caroline!", "Thanks, Mel!", "Wow Jon, same here"): whom a turn speaks to is
no subject it speaks of. The word before the name is a greeting or an interjection, never an initialism: "VS
Code, with the vim extension." names an editor, it speaks to no one."""
_ZH_OBJECT: Final = re.compile(r"[一两这那](?:辆|台|部|家|款|套|只|条)(?:新的)?([^，。！？,.!?；;：:\s]{2,10})")
"""A thing counted by its measure word (一辆比亚迪海豹, 一家外企, 一台ThinkPad): the measure word is the grammar
of Chinese naming a thing, so what follows it is a value."""
_EN_WORD: Final = re.compile(r"[a-z][a-z'-]+")
_EN_FUNCTION: Final = frozenset(
    "the and for you are was were with that this have has had from they them their will would what when where "
    "your yours just been like about into then than there here also very really some more most much many any "
    "our ours its it's i'm i've i'll we're we've you're she's he's that's not but all can could should did does "
    "doing done got get gets now new old one two too yes out off over under after before still again every each "
    "since until because while which who whom whose how why let let's said says say told tell she his her him hers "
    "herself himself".split())
_ZH_FUNCTION: Final = frozenset(
    "我你他她它们的了是在有和也都就还不没这那个一上下来去到说要会能给把被让对吧呢啊吗么着过得地很太又再才")
_PAST_RE: Final = re.compile(
    r"\b(?:before|previous(?:ly)?|used?\s+to|formerly|originally|earlier|former|old)\b"
    r"|以前|之前|原来|原先|过去|以往|旧的?",
    re.IGNORECASE)


@dataclass(frozen=True)
class Frame:
    """What :func:`frame_of` read of a statement: its anchors and its values by type."""

    anchors: frozenset[str]
    values: Mapping[str, frozenset[str]]
    subjects: frozenset[str] | None = frozenset()
    """Who it is about (:func:`memory_ext.ingest.claims.statement_subjects`); None: it states nothing current."""


def _norm(value: str) -> str:
    return re.sub(r"\s+", " ", value.strip().casefold())


_POSSESSIVE: Final = re.compile(r"['\u2019]s$")
""""Clara's visit" names Clara: the same name as "Clara is visiting", not another one."""
_SENTENCE_END: Final = re.compile(r"(?<=[.!?;。！？；])\s*")


def said_of(older: Frame, newer: str, common: frozenset[str] | set[str] = frozenset()) -> Frame:
    """The frame of the sentences of ``newer`` that share an anchor with ``older`` (``common`` left out): a value
    the later turn gives in a sentence about something else changes nothing of the earlier ("The Lisbon conference
    was great. Next: find a vegetarian restaurant in Paris for Clara's visit." after "My sister Clara is visiting
    me in Paris on December 12; she is vegetarian.": Lisbon is no new place for Clara's visit).

    >>> older = frame_of("My sister Clara is visiting me in Paris.")
    >>> sorted(said_of(older, "The Lisbon trip was great. Next is Clara's visit to Paris.").values["name"])
    ['clara', 'paris']
    """
    sentences = [t for t in _SENTENCE_END.split(newer) if t.strip()]
    if len(sentences) < 2:
        return frame_of(newer)
    linked = {stem(a) for a in older.anchors} - set(common)
    kept = [t for t in sentences if {stem(a) for a in frame_of(t).anchors} & linked]
    return frame_of(" ".join(kept)) if kept else _SAYS_NOTHING


_VALUE_KINDS: Final = ("time", "number", "name", "object")
_SAYS_NOTHING: Final = Frame(anchors=frozenset(), values=MappingProxyType({k: frozenset() for k in _VALUE_KINDS}),
                             subjects=None)
"""The frame of no sentence: no anchor, no value, nothing current (:func:`updates` finds no update in it)."""
FRAME_CACHE: Final = 8192
"""Frames kept (:func:`frame_of` is a function of the text; searches read the same turns again)."""
STEM_CACHE: Final = 65536
"""Stems kept (:func:`stem`)."""


@functools.lru_cache(maxsize=FRAME_CACHE)
def frame_of(text: str) -> Frame:
    """The anchors and typed values of one statement (see the module docstring; cached: its values are read-only)."""
    values: dict[str, set[str]] = {k: set() for k in _VALUE_KINDS}
    zh = bool(_HAN.search(text))
    narrated: set[str] = set()
    for m in (_ZH_TIME if zh else _EN_TIME).finditer(text):
        told = _NARRATED.search(text[:m.start()]) or _AGO.match(text, m.end())
        (narrated if told else values["time"]).add(_norm(m.group()))
    if zh:
        values["time"].update(_norm(m.group()) for m in _EN_TIME.finditer(text))
    masked = (_ZH_TIME if zh else _EN_TIME).sub(" ", text)
    values["number"].update(_norm(m.group()).replace(",", "") for m in _NUMBER.finditer(masked))
    if zh:
        values["name"].update(_norm(m.group()) for m in _LATIN_IN_ZH.finditer(text))
        values["name"].update(m.group() for m in _CITY_RE.finditer(text))
        values["object"].update(m.group(1) for m in _ZH_OBJECT.finditer(text))
    else:
        values["name"].update(_POSSESSIVE.sub("", _norm(m.group())) for m in _EN_NAME.finditer(text.strip()))
    addressed = {_norm(g) for m in _VOCATIVE.finditer(text.strip()) for g in m.groups() if g}
    values["name"] -= addressed | narrated
    anchors: set[str] = set()
    for word in _EN_WORD.findall(text.casefold()):
        word = word.strip("'-").removesuffix("'s")
        if len(word) >= 3 and word not in _EN_FUNCTION:
            anchors.add(word)
    anchors |= {name for name in values["name"] if " " not in name}
    anchors -= addressed
    anchors |= thing_kinds(text)  # "an iPhone 12" and "a Pixel 8": one attribute, the phone (rank/things.py)
    for run in re.findall(r"[\u3400-\u9fff]+", text):
        anchors.update(a + b for a, b in itertools.pairwise(run)
                       if a not in _ZH_FUNCTION and b not in _ZH_FUNCTION)
    return Frame(anchors=frozenset(anchors), values=MappingProxyType({k: frozenset(v) for k, v in values.items()}),
                 subjects=statement_subjects(text))


_MONTH: Final = (r"(?:(?i:january|february|april|june|july|august|september|october|november|december)"
                 r"|May|March|Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sep|Sept|Oct|Nov|Dec)")
_DAY: Final = r"\d{1,2}(?:st|nd|rd|th)?"
_SPANS: Final = (
    ("date", re.compile(rf"\b(?P<m>{_MONTH})\b(?:\s+(?P<d>{_DAY})\b(?:\s*(?:-|–|to|until|through)\s*(?P<e>{_DAY})\b)?)?"
                        rf"|\b(?P<d2>{_DAY})\s+(?:of\s+)?(?P<m2>{_MONTH})\b|\b\d{{1,2}}(?:st|nd|rd|th)\b"
                        r"|\b\d{4}-\d{2}-\d{2}\b")),
    ("weekday", re.compile(r"(?i:\b(?:mon|tues|wednes|thurs|fri|satur|sun)days?\b|\bweekends?\b)"
                           r"|\b(?:Mon|Tue|Tues|Wed|Thu|Thur|Thurs|Fri|Sat|Sun)\b")),
    ("clock", re.compile(r"(?i:\b\d{1,2}(?::\d{2})?\s*(?:am|pm)\b|\b\d{1,2}:\d{2}\b|\bnoon\b|\bmidnight\b"
                         r"|(?<=\bat\s)\d{1,2}\b(?![:.,]?\d|\s*(?:%|percent|euros?|dollars?|people|kids)\b))")),
    ("part", re.compile(r"(?i:\b(?:morning|afternoon|evening|night)s?\b|\btonight\b)")),
    ("weekday", re.compile(r"(?:周|星期|礼拜)[一二三四五六日天末]")),
    ("part", re.compile(r"[上下中]午|早上|晚上|傍晚|凌晨|夜里")),
    ("clock", re.compile(rf"{_ZH_NUM}+点(?:半|{_ZH_NUM}+分|钟)?")),
    ("date", re.compile(rf"{_ZH_NUM}+月(?:(?P<zd>{_ZH_NUM}+)[号日])?|(?P<zd2>{_ZH_NUM}+)[号日]")),
)
"""Times by what they tell: a date, a weekday, a clock time, a part of the day. A later statement changes a time
when it gives another value of one of these ("Friday" for "Thursday"); a clock time where the earlier statement
gave only a date adds a detail."""
_DAY_KEY: Final = re.compile(r"(?:st|nd|rd|th)$")
_EN_NAME_SPAN: Final = re.compile(r"(?<![.!?]\s)(?<!^)\b(?!I\b)[A-ZÀ-ÖØ-Þ][\w'-]*|\b[a-z]+[A-Z]\w*")


@dataclass(frozen=True)
class Value:
    """A typed value of a statement and where it stands: ``kind`` is ``date``, ``weekday``, ``clock``, ``part``
    (of the day), ``number``, ``name`` or ``object`` (a thing a Chinese measure word counts)."""

    kind: str
    value: str
    start: int


def _time_values(kind: str, m: re.Match[str]) -> list[str]:
    """A date is its day when it has one ("November 20", "the 20th", 十一月二十号 and 二十号 are all ``20`` /
    ``二十``), its month when not: a later statement that gives the day alone restates it."""
    if kind == "weekday":
        word = m.group().casefold()
        return ["weekend" if word.startswith("weekend") else word[:3]] if word.isascii() else [word]
    if kind != "date":
        return [_norm(m.group())]
    if not m.group().isascii():
        day = m.group("zd") or m.group("zd2")
        return [day or m.group()]
    days = [_DAY_KEY.sub("", d) for d in (m.group("d"), m.group("e"), m.group("d2")) if d]
    month = m.group("m") or m.group("m2")
    if not days and not month:
        return [_DAY_KEY.sub("", m.group().casefold())]
    return days or [month.casefold()[:3]]


def value_spans(sentence: str) -> list[Value]:
    """The typed values of one sentence with their offsets, as :func:`frame_of` reads them but finer: times by
    what they tell (:data:`_SPANS`), a number that is part of a name ("TP 433", "iPhone 12") or of a date is no
    quantity, a possessive is its name ("Clara's" is ``clara``), a name that is a month or a day is a time.

    >>> [(v.kind, v.value) for v in value_spans("My flight to Lisbon is TP 433 on November 20 at 07:10.")]
    [('date', '20'), ('clock', '07:10'), ('name', 'lisbon'), ('name', 'tp')]
    >>> [(v.kind, v.value) for v in value_spans("评审会改到周五上午十点了。")]
    [('weekday', '周五'), ('part', '上午'), ('clock', '十点')]
    """
    zh = bool(_HAN.search(sentence))
    out: list[Value] = []
    taken: list[tuple[int, int]] = []
    for kind, pattern in _SPANS:
        for m in pattern.finditer(sentence):
            if any(m.start() < e and s < m.end() for s, e in taken):
                continue
            taken.append(m.span())
            if _NARRATED.search(sentence[:m.start()]) or _AGO.match(sentence, m.end()):
                continue  # "last Friday", 上周二: when a story happened
            out.extend(Value(kind, v, m.start()) for v in _time_values(kind, m))
    names: list[tuple[int, int]] = []
    addressed = {_norm(g) for m in _VOCATIVE.finditer(sentence) for g in m.groups() if g}
    if zh:
        found = [(m.span(), _norm(m.group())) for m in _LATIN_IN_ZH.finditer(sentence)]
        found += [(m.span(), m.group()) for m in _CITY_RE.finditer(sentence)]
        out.extend(Value("object", m.group(1), m.start(1)) for m in _ZH_OBJECT.finditer(sentence))
    else:
        found = [(m.span(), _norm(m.group()).removesuffix("'s").removesuffix("\u2019s").strip("'\u2019"))
                 for m in _EN_NAME_SPAN.finditer(sentence)]
    for (start, end), name in found:
        if name and name not in addressed and not any(start < e and s < end for s, e in taken):
            names.append((start, end))
            out.append(Value("name", name, start))
    for m in _NUMBER.finditer(sentence):
        before = sentence[:m.start()]
        if (any(m.start() < e and s < m.end() for s, e in taken) or re.search(r"[A-Za-z]$", before)
                or any(e <= m.start() <= e + 1 for _, e in names)):
            continue  # a time's, or a name's ("TP 433", "iPhone 12", "MU5101")
        out.append(Value("number", _norm(m.group()).replace(",", "").rstrip("."), m.start()))
    return out


@functools.lru_cache(maxsize=STEM_CACHE)
def stem(word: str) -> str:
    """A crude English stem (``moves`` -> ``mov``), so "moved" and "moves" are one anchor."""
    for suffix in ("ing", "ed", "es", "s"):
        if len(word) > len(suffix) + 3 and word.endswith(suffix):
            return word[: -len(suffix)]
    return word


def _tail(subject: str) -> str:
    return subject.rsplit(":", 1)[-1]


def _same_tail(s: str, t: str) -> bool:
    """"mom" and "self:mom"; a Chinese kinship word and its doubled form (妈 / 妈妈, 妹 / 妹妹)."""
    a, b = _tail(s), _tail(t)
    return a == b or (bool(_CJK_WORD.fullmatch(a + b)) and (a * 2 == b or b * 2 == a))


def _one_subject(s: str, t: str, other: Frame) -> bool:
    if s == t or (s != "self" and t != "self" and _same_tail(s, t)):
        return True  # "Mom's flight" (mom) after "my mom is flying" (self:mom)
    if {s, t} & {"self"} and (s.startswith("self:") or t.startswith("self:")):
        return _tail(s if s != "self" else t) not in PEOPLE  # my phone is mine; my sister is someone else
    return not s.startswith("self") and s != "assistant" and s in other.anchors  # "Lena moved" / "my sister Lena"


def _same_subject(a: Frame, b: Frame) -> bool:
    """Whether two statements can be about one subject: one names none, or a subject of one is a subject of the
    other ("I" and "my phone"; "Mom" and "my mom") or a word of it ("Lena moved" after "my sister Lena lives").
    "I live in Porto" and "My sister Lena lives in Coimbra" are about two people."""
    if not a.subjects or not b.subjects:
        return True
    return any(_one_subject(s, t, b) or _one_subject(t, s, a) for s in a.subjects for t in b.subjects)


def _new_object(value: str, older: Frame) -> bool:
    head = value.split("的", 1)[-1] if "的" in value[:4] else value
    return head[:2] not in older.anchors


def updates(a: Frame, b: Frame, common: frozenset[str] | set[str] = frozenset()) -> bool:
    """Whether ``b`` (the later statement) restates the subject of ``a`` with another value of one type;
    ``common``: stemmed anchors that link nothing (a theme)."""
    if a.subjects is None or b.subjects is None:
        return False
    value_words = {w for f in (a, b) for kind in ("time", "number") for v in f.values[kind] for w in v.split()}
    shared = ({stem(w) for w in a.anchors - value_words} & {stem(w) for w in b.anchors - value_words}) - common
    names = {stem(n) for f in (a, b) for n in f.values["name"] - f.values["time"]}
    names |= {stem(s) for f in (a, b) for s in f.subjects or () if not s.startswith("self") and s != "assistant"}
    named = (shared & names) | ({stem(n) for n in a.values["name"] & b.values["name"] - b.values["time"]} - common)
    if not (named or shared) or not _same_subject(a, b):
        return False  # a named thing or a word both speak of, by the same subject ("I take the train to Lyon" is
        # not news about "my sister lives in Lyon")
    for kind in ("time", "number", "name", "object"):
        old, new = a.values[kind], b.values[kind]
        if not old or not new - old:
            continue
        if kind == "name" and not new - old - {w for w in b.anchors if w in a.anchors}:
            continue
        if kind == "object" and not any(_new_object(v, a) for v in new - old):
            continue
        return True
    return False


def restates(older: str, newer: str) -> bool:
    """Whether ``newer`` states the subject of ``older`` again with another value of the same type (in a sentence
    about it: :func:`said_of`)."""
    frame = frame_of(older)
    return updates(frame, said_of(frame, newer))


def asks_past(query: str) -> bool:
    """Whether ``query`` asks about how things were before (then the earlier statement comes first)."""
    return bool(_PAST_RE.search(query))


def newest_first(cat: Catalog, total: np.ndarray, text_of: Callable[[Sequence[int]], Mapping[int, str]], *,
                 top: int = UPDATE_TOP, past: bool = False) -> dict[int, int]:
    """Among the ``top`` best of ``total``: for each pair of user turns by one speaker where the later
    :func:`restates` the earlier through an anchor no third of those turns holds, put the later just above the
    earlier (``past``: the earlier above the later), in place. Only the order inside the ``top`` changes, never
    which turns are in it. Returns {raised position: the position it was put above}."""
    if not cat.assistant.any():
        return {}  # standalone memories, not a conversation: a later one is another memory, not a correction
    finite = np.flatnonzero(np.isfinite(total))
    best = finite[np.argsort(-total[finite], kind="stable")[:top]]
    turns = [int(p) for p in best if cat.kind[p] == _TURN and not cat.assistant[p]]
    if len(turns) < 2:
        return {}
    texts = text_of(turns)
    frames = {p: frame_of(texts[p]) for p in turns if p in texts}
    counts: dict[str, int] = {}
    for frame in frames.values():
        for anchor in {stem(a) for a in frame.anchors}:
            counts[anchor] = counts.get(anchor, 0) + 1
    common = {a for a, n in counts.items() if n > 2}  # shared by a third turn: the store's theme, not a subject
    out: dict[int, int] = {}
    order = sorted(frames, key=lambda p: (np.nan_to_num(cat.ts[p], nan=-np.inf), p))
    for i, old in enumerate(order):
        for new in order[i + 1:]:
            if cat.speaker[old] != cat.speaker[new] or not updates(frames[old], said_of(frames[old], texts[new],
                                                                                        common), common):
                continue
            up, down = (old, new) if past else (new, old)
            if total[up] <= total[down]:
                total[up] = total[down] + MARGIN
                out[up] = down
    return out
