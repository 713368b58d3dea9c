"""Does a turn fill the slot a question asks for? (pure functions, no model)

A question near a chat's topic whose answer the chat does not hold ("What airline is mom flying?" over "Mom's
flight got rebooked: she lands at Heathrow…", "陈静的生日是哪天？" over "我最好的朋友叫陈静，她在深圳当律师。")
has a high cosine and covers most of its words in the topic's turns: what is missing is the *slot*, the one thing
asked. :func:`answer_slot` reads it from the question:

* its **kind**, when the question word fixes one a value can be checked for: ``time`` (when, what time, 什么时候,
  哪天, 几点, a birthday, 生日), ``phone`` (a phone number, 电话, 手机号: a run of digits, not the rent),
  ``number`` (how many / much / old, 多少, 几个, a budget, 价格), ``name`` (what's X's name, called, 叫什么,
  姓什么), ``person`` (who, 谁; a name or a person word) and ``reason`` (why, how come, what made…, 为什么,
  怎么会: a cause or purpose, "because", "since we", "too noisy", 因为, 所以, 太…了, "下午喝会失眠"; read only to
  order the best turns, :data:`ORDER_ONLY`);
* its **focus**, the noun naming the thing asked ("what *laptop*", "which *phone*", "what's my *postcode*",
  "什么*交通工具*", "哪个*车次*", "我的*血型*是什么").

:func:`fills` reads the turn: a slot with a kind is filled by a value of that kind the question does not already
hold (a time, a number that is no time, a reason, a capitalised name, 叫/姓 + a name, a Latin name in Chinese, a
person word that is not the question's own person: "我儿子小宇" names 小宇 of "小宇的班主任是谁", it is no answer to
it); a
focus by the focus word itself, or by a name that may be an instance of it ("which phone" — "a Pixel 8",
"什么牌子" — "La Sportiva", "什么车" — "一辆比亚迪海豹"). A name is no instance when it is a place and no place is
asked ("what airline": "she lands at *Heathrow*", "哪个车次": "*北京*南站"), when it owns something ("*Anya's*
place" for "what book"), or when the turn speaks only of things of another kind (:mod:`memory_ext.rank.things`:
"I'm on a *Pixel 8* now" names a phone, not the laptop of "What laptop do I use?"). A question with neither (where,
how, yes/no) gives no slot, and every turn passes.

The calibration (:mod:`memory_ext.rank.calibration`) lowers the logit of an item that does not fill its question's
slot by ``recall.answer_slot_logit``, and of every item when none of a result's fills it (:func:`fills_each`): a
score, not a ranking.

>>> answer_slot("What airline is mom flying?")
AnswerSlot(kind=None, focus=('airline',))
>>> answer_slot("陈静的生日是哪天？")  # 生日 names a time: the kind says it all
AnswerSlot(kind='time', focus=())
>>> fills(answer_slot("陈静的生日是哪天？"), "我最好的朋友叫陈静，她在深圳当律师。", "陈静的生日是哪天？")
False
>>> fills(answer_slot("when do I water plants"), "I water them every Sunday.", "when do I water plants")
True
>>> fills(answer_slot("Where does Lena live now?"), "Lena moved to Coimbra.", "Where does Lena live now?") is None
True
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from ..ingest.claim_words import PEOPLE, ZH_CITIES
from ..text import extract_entities, segment, tokenize
from .things import thing_kinds

__all__ = ["SLOT_TOP", "UNSAID_KINDS", "AnswerSlot", "answer_slot", "fills", "fills_each", "named_slot", "shown_slot",
           "slot_first"]

SLOT_CACHE: Final = 8192
"""Questions and texts whose slot and names are kept (functions of the text; searches read the same turns)."""
KINDS: Final = ("time", "phone", "number", "name", "person", "reason")
ORDER_ONLY: Final = frozenset(("reason",))
"""Kinds read only to order the best turns (:func:`slot_first`), never to score one
(:func:`fills_each`, :func:`named_slot`): a reason is often told without a word that marks it ("I wanted a
fresh start"), so a turn without one may still be the answer."""


@dataclass(frozen=True)
class AnswerSlot:
    """What a question asks for: the kind of value (None: any) and the words naming the thing asked."""

    kind: str | None
    focus: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return self.kind is not None or bool(self.focus)


# ----------------------------------------------------------------------------------------------- the question

_EN_KIND: Final = (
    ("reason", re.compile(r"^\W*why\b|\bhow come\b|\bfor what reason\b|\bwhat(?:'s| is| was| were)? the reasons?\b"
                          r"|^\W*what (?:made|makes|caused|causes|led|leads|prompted|prompts|motivated|motivates"
                          r"|drove|drives)\b", re.I)),
    ("phone", re.compile(r"\b(?:phone|telephone|mobile|cell|contact) (?:number|no)\b", re.I)),
    ("time", re.compile(r"^\W*when\s+(?:do|does|did|is|are|was|were|am|will|would|can|could|should|has|have"
                        r"|had)\b|^\W*when(?:'s)?\b.*\?|\bwhat (?:time|date|day|year|month)\b"
                        r"|\bwhich (?:year|month|day|date)\b|\bhow long ago\b|\bsince when\b", re.I)),
    ("number", re.compile(r"\bhow (?:many|much|old|far|tall|big|heavy|long)\b", re.I)),
    ("name", re.compile(r"\b(?:named?|called)\b(?!\s+(?:['\"‘“]|(?-i:[A-Z])))", re.I)),  # not "a file called 'X'"
    ("person", re.compile(r"^\W*who(?:m|se)?\b", re.I)),
)
_ZH_KIND: Final = (
    ("reason", re.compile(r"为什么|为啥|为何|怎么会|怎么(?:不|没)|干嘛|干吗|什么原因|啥原因|原因是")),
    ("phone", re.compile(r"电话|手机号|联系方式")),
    ("time", re.compile(r"什么时候|哪天|哪一天|几号|几点|几月|哪年|哪一年|何时|什么时间")),
    ("number", re.compile(r"多少|几[个岁次口人天年位名台辆分块元]|多大|多高|多重|多远|多长")),
    ("name", re.compile(r"叫什么|叫啥|什么名字|名字|姓什么|姓啥")),
    ("person", re.compile(r"谁")),
)
_EN_NAME_VERB: Final = re.compile(r"\W*name\s+(?:one|two|three|a|an|the|some|any|all|each|every|\d+)\b", re.I)
_NOUN_KIND: Final = {
    # nouns naming a value of one kind: "What's my landlord's phone number?", "陈静的生日是哪天？"
    "time": ("birthday", "date", "deadline", "anniversary", "生日", "日期", "时间"),
    "number": ("budget", "price", "cost", "salary", "rent", "fee", "number", "age", "weight", "height", "score",
               "postcode", "zip", "预算", "价格", "工资", "房租", "费用", "号码", "电话", "年龄", "体重", "身高",
               "分数", "车牌号", "邮编"),
    "name": ("name", "名字"),
}
_EN_AUX: Final = frozenset(
    "is are was were do does did am 's has have had will would can could should of the a an my your "
    "our their his her its this that".split())
_EN_NP_STOP: Final = frozenset(
    "at in on for of from to with about by do does did is are was were will would can could i you we he she they "
    "it my your".split())
_EN_WHAT: Final = re.compile(r"\b(?:what|which)\b((?:\s+[a-z][\w'-]*){1,3}?)\s+"
                             r"(?:do|does|did|is|are|was|were|am|has|have|had|will|would|can|could)\b", re.I)
_EN_WHATS: Final = re.compile(r"\bwhat(?:'s|\s+is|\s+was|\s+are|\s+were)\s+((?:[\w'-]+\s*){1,6})", re.I)
_ZH_FOCUS: Final = re.compile(
    r"(?:(?<!为)什么|哪个|哪家|哪款|哪种|哪所|哪(?![里儿天一年些位])|啥)([\u4e00-\u9fff]{1,6})")
_ZH_SUBJECT: Final = re.compile(r"([\u4e00-\u9fff]{2,8}?)(?:是|叫)(?:什么|多少|哪|谁|啥)")
_ZH_FUNCTION: Final = frozenset("的了是在有和也都就还不没这那个一吗呢吧啊么着过去来做用我你他她它们家")
_KIND_OF: Final = re.compile(r"\b(?:kinds?|types?|sorts?)\s+of\b")
_ZH_NOT_FOCUS: Final = frozenset(("时候", "时间", "名字", "地方", "样", "么", "里", "儿", "天", "一天"))


def _en_focus(question: str) -> list[str]:
    """The head noun of the thing an English question asks for ("what's my landlord's phone number" -> number,
    "which insurance company do I use" -> company); [] when it names none."""
    low = _KIND_OF.sub(" ", question.lower())
    words: list[str] = []
    m = _EN_WHATS.search(low)
    if m:  # "what's my landlord's phone number" -> phone number
        for word in m.group(1).split():
            word = word.strip("?.!,")
            if word in _EN_NP_STOP and words:
                break
            if word.endswith("'s"):  # a possessor: the thing asked is what follows
                words = []
            elif word and word not in _EN_AUX:
                words.append(word)
    else:
        m = _EN_WHAT.search(low)
        if m:  # "what laptop do I use", "which insurance company do I use"; not "what made Gina choose"
            for word in m.group(1).split():
                word = word.strip("?.!,")
                if word in _EN_NP_STOP or word in _EN_AUX:
                    break
                words.append(word)
    return words[-1:]


def _zh_focus(question: str) -> list[str]:
    """The nouns a Chinese question asks about: the word after 什么 / 哪个 (什么交通工具, 哪个车次) and the
    subject of "X是什么 / X叫什么" (我的血型是什么, 客户公司叫什么)."""
    out: list[str] = []
    for m in _ZH_FOCUS.finditer(question):
        words = segment.lcut(m.group(1))
        if words and words[0] not in _ZH_NOT_FOCUS and words[0] not in _ZH_FUNCTION:
            out.append(words[0])
    for m in _ZH_SUBJECT.finditer(question):
        run = m.group(1)
        cut = max((i for i, c in enumerate(run) if c in _ZH_FUNCTION), default=-1)
        if len(run) - cut - 1 >= 2:
            out.append(run[cut + 1:])
    return out


_SENTENCE_END: Final = re.compile(
    r"(?<!\b[A-Z][a-z]\.)(?<!\b[A-Z][a-z][a-z]\.)(?<!\b[A-Z]\.)(?<=[.!?])\s+|(?<=[。！？])")
"""Where a sentence ends: not after a title or an initial ("Dr. Okafor", "Mrs. Hall", "J. Smith")."""


def _asked(text: str) -> str:
    """The part of ``text`` that asks: its sentences ending in a question mark, or the whole of a one-sentence
    text ("when do I water plants"); "" for several sentences none of which asks (an agent's instructions, a
    role-play brief mentioning a phone number, asks for no value)."""
    sentences = [s.strip() for s in _SENTENCE_END.split(text.strip()) if s.strip()]
    asking = [s for s in sentences if s.endswith(("?", "？"))]
    if asking:
        return " ".join(asking)
    return text if len(sentences) <= 1 else ""


@functools.lru_cache(maxsize=SLOT_CACHE)
def answer_slot(question: str) -> AnswerSlot:
    """The kind of value and the focus words ``question`` asks for (see the module docstring).

    >>> answer_slot("What's my landlord's phone number?")
    AnswerSlot(kind='phone', focus=('number',))
    >>> answer_slot("我妈坐哪个车次？"), answer_slot("小宇的班主任是谁？").kind
    (AnswerSlot(kind=None, focus=('车次',)), 'person')
    >>> answer_slot("why did we move").kind, bool(answer_slot("does she eat pork?"))
    ('reason', False)
    """
    question = _asked(question)
    if not question:
        return AnswerSlot(kind=None)
    zh = bool(re.search(r"[\u4e00-\u9fff]", question))
    kind = next((name for name, pattern in (_ZH_KIND if zh else _EN_KIND) if pattern.search(question)), None)
    if kind == "name" and _EN_NAME_VERB.match(question) and not dict(_EN_KIND)["name"].search(question, 5):
        kind = None  # "Name one of the accessories I added": an imperative, no name asked
    focus = _zh_focus(question) if zh else _en_focus(question)
    if kind is None:
        for name, nouns in _NOUN_KIND.items():
            if any(f == n or (zh and f.endswith(n)) for f in focus for n in nouns) or (
                    not zh and focus and focus[-1] in nouns):
                kind = name
                break
    if kind is not None and kind != "number":
        focus = [f for f in focus if f not in _NOUN_KIND.get(kind, ())]
    return AnswerSlot(kind=kind, focus=tuple(dict.fromkeys(focus)))


# --------------------------------------------------------------------------------------------------- the turn

_EN_TIME: Final = re.compile(
    r"\b(?:mon|tues|wednes|thurs|fri|satur|sun)days?\b|\b(?:january|february|march|april|may|june|july|august"
    r"|september|october|november|december)\b|\b\d{1,2}(?::\d{2})?\s*(?:am|pm)\b|\b\d{1,2}:\d{2}\b"
    r"|\b\d{1,2}(?:st|nd|rd|th)\b|\b(?:noon|midnight|mornings?|afternoons?|evenings?|nights?|weekends?|tonight"
    r"|today|tomorrow|yesterday|weekly|daily|monthly|yearly|annually)\b|\b(?:19|20)\d\d\b"
    r"|\b(?:last|next|this|every|each)\s+(?:week|month|year|day|time|spring|summer|fall|autumn|winter)\b"
    r"|\b\w+\s+(?:days?|weeks?|months?|years?)\s+ago\b|\b(?:spring|summer|autumn|winter)\b|\bago\b"
    r"|\b(?-i:Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sep|Sept|Oct|Nov|Dec)\b|\b\d{1,4}[/-]\d{1,2}(?:[/-]\d{1,4})?\b",
    re.IGNORECASE)
_ZH_NUM: Final = "[0-9０-９一二三四五六七八九十两百千万零半几]"
_ZH_TIME: Final = re.compile(
    rf"[每上下这本]?(?:周|星期|礼拜)[一二三四五六日天末]|[上下中]午|早上|晚上|傍晚|凌晨|今天|明天|昨天|前天|后天|今晚|"
    rf"[上下这本每]个?(?:周|星期|月|礼拜)|(?:今|明|去|前)年|每天|每年|每晚|春节|国庆|元旦|中秋|"
    rf"{_ZH_NUM}+(?:点|号|日|月|年)(?:半|{_ZH_NUM}+分)?|{_ZH_NUM}+(?:天|周|个月|年)(?:前|后|以后|之后)")
_NUMBER: Final = re.compile(r"\d|[一二三四五六七八九十两半][一二三四五六七八九十两百千万零]*|[百千万]")
_EN_NUMBER_WORD: Final = re.compile(
    r"\b(?:one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|(?:thir|four|fif|six|seven|eigh|nine)teen"
    r"|(?:twen|thir|for|fif|six|seven|eigh|nine)ty|hundred|thousand|million|billion|dozen|half|a couple|a few"
    r"|several|once|twice)\b", re.I)
_EN_CALLED: Final = re.compile(r"\b(?:called|named|name is|name's)\s+\"?([A-Za-z][\w'-]*)")
_ZH_CALLED: Final = re.compile(r"(?:叫|姓|名叫|叫做)([\u4e00-\u9fffA-Za-z]{1,4})")
_LATIN: Final = re.compile(r"[A-Za-z][A-Za-z0-9-]+")
_MODEL: Final = re.compile(r"\b[a-z]+[A-Z][\w-]*|\b[A-Z]+\d[\w-]*")
_ZH_OBJECT: Final = re.compile(r"[一两这那](?:辆|台|部|家|款|套|只|条|所|位)")
_EN_REASON: Final = re.compile(
    r"\b(?:because|cause|cuz|due to|owing to|thanks to|so that|so as to|in order to|as a result|that's why"
    r"|which is why|the reason|for the sake of)\b|[,;]\s*so\s+(?:i|i'm|i'll|i've|we|we're|you|he|she|they|it|that"
    r"|my|our)\b|\bsince\s+(?:i'm|i am|we're|we are|you're|he's|she's|it's|it is|they're|there's|there are)\b"
    r"|\btoo\s+(?!(?:and|but|or|as|so|i|me|the|a|an|when|while|with|for|in|on|at|to|now|then|if|that|this|my"
    r"|our|lol|haha)\b)[a-z]|\b(?:failed|error|exception|refused|denied|rejected)\s*[:—(]\s*\S", re.I)
"""A turn giving a reason: a cause or purpose ("because", "due to", "so that", ", so I", "since it's" — a "since"
with a past tense mostly tells a time: "since we last talked", "since I moved"), an excess ("The old flat was
too noisy anyway.", not "I had a mentor too when…") or an error message's cause ("flight_search failed: timeout
after 30s")."""
_ZH_REASON: Final = re.compile(
    r"因为|由于|所以|因此|为了|原因|导致|以免|免得|省得|不然|否则|(?<![恐哪])怕|(?<!太)太(?![太阳空极湖平原])"
    r"|(?:[了喝吃用做看玩睡熬抽碰]|就|才|容易|总|老是?)会(?![议员计儿])")
"""因为, 所以, 为了, 怕, 太…了 and a consequence ("下午喝会失眠", "吃了就会胖")."""
_PHONE: Final = re.compile(r"\+?\d(?:[\d\s().-]{4,}\d)")
_PLACE_FOCUS: Final = frozenset((
    "place", "city", "town", "country", "airport", "station", "hotel", "restaurant", "cafe", "bar", "school",
    "university", "college", "gym", "office", "company", "employer", "shop", "store", "hospital", "clinic", "venue",
    "destination", "address", "street", "neighborhood", "neighbourhood", "room", "building", "park", "club",
    "地方", "城市", "国家", "机场", "车站", "酒店", "餐厅", "饭店", "学校", "大学", "公司", "医院", "健身房",
    "会议室", "楼", "地址", "小区", "店", "站"))
"""Focus words a place may be an instance of ("which hotel": "at the Ritz"); for any other thing ("what airline",
"哪个车次") a place is no answer: "she lands at Heathrow", "北京南站"."""
_EN_AT: Final = re.compile(r"\b(?:at|in|to|from|into|near|via|around|outside)\s+(?:the\s+)?$", re.I)


def _values(text: str, kind: str, question: str, zh: bool) -> bool:
    """Whether ``text`` holds a value of ``kind`` that ``question`` does not already hold."""
    q_low = question.casefold()
    if kind == "reason":
        return bool((_ZH_REASON if zh else _EN_REASON).search(text))
    if kind == "time":
        return bool(_EN_TIME.search(text) or (zh and _ZH_TIME.search(text)))
    if kind == "phone":  # a phone number is a run of digits, not the rent nor a date
        return bool(_PHONE.search(text))
    if kind == "number":
        masked = (_ZH_TIME if zh else _EN_TIME).sub(" ", text)
        return bool(_NUMBER.search(masked) or _EN_NUMBER_WORD.search(masked))
    names = _names(text, zh)
    fresh = [n for n in names if n.casefold() not in q_low]
    if kind == "name":
        called = (_ZH_CALLED if zh else _EN_CALLED).findall(text)
        return any(c.casefold() not in q_low and c[:1] not in ("什", "啥") for c in called) or bool(
            [n for n in fresh if " " not in n and not zh])
    # person: a name, or a person word that is not the question's own person (apposition: "我儿子小宇")
    if fresh:
        return True
    low = text.casefold()
    q_words = set(tokenize(question))
    for word in PEOPLE:
        at = low.find(word)
        if at < 0 or word in q_low:
            continue
        if not zh and not re.search(rf"\b{re.escape(word)}s?\b", low):
            continue
        after = low[at + len(word): at + len(word) + 12]
        if any(w and after.lstrip(" ,").startswith(w) for w in q_words):
            continue  # "my daughter Mia" when Mia is asked about
        return True
    return False


@functools.lru_cache(maxsize=SLOT_CACHE)
def _names(text: str, zh: bool) -> tuple[str, ...]:
    """Names in ``text``: capitalised words and runs, Latin words inside Chinese, cities, proper nouns."""
    out = [e for e in extract_entities(text) if not _NUMBER.match(e)]
    out += _MODEL.findall(text)  # iPhone, M3, X1: spelled like a product, not a word
    if zh:
        out += _LATIN.findall(text)
        out += [c for c in ZH_CITIES if c in text]
    return tuple(out)


def _places(text: str, zh: bool) -> set[str]:
    """Names ``text`` gives to places: Chinese cities (北京, and 北京南站 beginning with one), English names right after
    a preposition of place ("lands at Heathrow", "a flat in Leeds")."""
    if zh:
        return {n for n in _names(text, zh) if any(n.startswith(c) for c in ZH_CITIES)}
    out: set[str] = set()
    for name in _names(text, zh):
        at = text.find(name)
        if at >= 0 and _EN_AT.search(text[:at]):
            out.add(name)
    return out


def _instances(text: str, focus: tuple[str, ...], question: str, zh: bool,
               places: frozenset[str] = frozenset()) -> list[str]:
    """The names in ``text`` that may be an instance of the thing ``focus`` names: not one the question holds, not
    a place unless a place is asked ("what airline": not "Heathrow"; ``places``: names other texts give to places),
    not an owner ("Anya's place" says where, not which book)."""
    q_low = question.casefold()
    names = [n for n in _names(text, zh) if n.casefold() not in q_low]
    if any(f in _PLACE_FOCUS or (zh and f[-1:] in _PLACE_FOCUS) for f in focus):
        return names
    places = places | _places(text, zh)
    return [n for n in names if n not in places and not re.search(rf"\b{re.escape(n)}['\u2019]s\b", text)]


def _other_kind(text: str, focus: tuple[str, ...]) -> bool:
    """Whether ``text`` speaks only of things of another kind than the one ``focus`` names (a phone for "what
    laptop", :mod:`memory_ext.rank.things`)."""
    asked = thing_kinds(" ".join(focus))
    if not asked:
        return False
    told = thing_kinds(text)
    return bool(told) and not told & asked


def _has_focus(text: str, focus: tuple[str, ...], zh: bool) -> bool:
    if zh:
        return any(f in text or (len(f) >= 3 and f[-2:] in text) for f in focus)
    words = set(tokenize(text))
    return any(set(tokenize(f)) & words for f in focus)


def fills(slot: AnswerSlot, text: str, question: str, *, places: frozenset[str] = frozenset()) -> bool | None:
    """Whether ``text`` fills ``slot`` (see the module docstring); None when the question asks no slot.

    >>> q = "What's the budget for the Acme project?"
    >>> fills(answer_slot(q), "Kenji from Acme will join remotely.", q)
    False
    >>> q = "我开什么车？"
    >>> fills(answer_slot(q), "卡罗拉卖掉了，上周提了一辆比亚迪海豹。", q)
    True
    """
    if not slot:
        return None
    zh = bool(re.search(r"[\u4e00-\u9fff]", question))
    if slot.kind is not None:
        return _values(text, slot.kind, question, zh)
    if _has_focus(text, slot.focus, zh):
        return True
    if _other_kind(text, slot.focus):
        return False  # "I'm on a Pixel 8 now" names a phone, not the laptop asked
    if zh and _ZH_OBJECT.search(text):
        return True  # "一辆比亚迪海豹": a counted thing
    return bool(_instances(text, slot.focus, question, zh, places))


_NAMED_FOCUS: Final = frozenset((
    "airline", "brand", "company", "employer", "bank", "insurer", "hotel", "restaurant", "cafe", "app", "school",
    "university", "college", "team", "band", "book", "novel", "movie", "film", "show", "series", "game", "model",
    "flight", "train", "airport", "station", "city", "country", "username", "handle", "email", "account",
    "牌子", "品牌", "公司", "航空公司", "航班", "车次", "酒店", "餐厅", "学校", "大学", "型号", "银行", "书", "电影",
    "城市", "账号", "用户名", "邮箱"))
"""Things whose instances are said by their names ("which airline": Lufthansa, "哪个车次": G102, "什么牌子": La
Sportiva): a turn holding the answer holds a name. "what job", "what diet", "什么工作" are answered by common
nouns ("a lawyer", "pescatarian", 律师) that :func:`fills` cannot see."""


def named_slot(slot: AnswerSlot) -> bool:
    """Whether a turn answering ``slot`` would hold something :func:`fills` sees: a value of a kind (a time, a
    number, a phone number, a name, a person) or the name of a thing whose instances have names (an airline, a
    train, a phone or a laptop: :data:`_NAMED_FOCUS`, :mod:`memory_ext.rank.things`).

    >>> named_slot(answer_slot("What airline is mom flying?")), named_slot(answer_slot("陈静做什么工作"))
    (True, False)
    """
    if slot.kind is not None:
        return slot.kind not in ORDER_ONLY
    return any(f in _NAMED_FOCUS or f[-2:] in _NAMED_FOCUS or thing_kinds(f) for f in slot.focus)


UNSAID_KINDS: Final = frozenset(("time", "number"))
"""Kinds of value a turn often answers without saying them: between people, when something happened is the date of
the session ("When did Jon start reading 'The Lean Startup'?": "I just started it!"), and a count is shown or
implied ("How many children does Melanie have?": a photo of the kids)."""


def shown_slot(slot: AnswerSlot) -> bool:
    """Whether a turn that answers ``slot`` says the answer in words :func:`fills` sees, so that a result none of
    whose turns fills it lacks the answer: :func:`named_slot`, except a time or a number (:data:`UNSAID_KINDS`).

    >>> shown_slot(answer_slot("What airline is mom flying?")), shown_slot(answer_slot("When did Jon start it?"))
    (True, False)
    """
    return named_slot(slot) and slot.kind not in UNSAID_KINDS


def fills_each(question: str, texts: Sequence[str]) -> list[bool | None]:
    """:func:`fills` for each of ``texts`` (the items of one result), a name one of them gives to a place being a
    place in all ("Updated — Heathrow, the 13th." after "she lands at Heathrow"); all None when the question asks
    no slot.

    >>> fills_each("What airline is mom flying?", ["She lands at Heathrow at noon.", "Updated — Heathrow, noon."])
    [False, False]
    """
    slot = answer_slot(question)
    if not slot or slot.kind in ORDER_ONLY:
        return [None] * len(texts)
    zh = bool(re.search(r"[\u4e00-\u9fff]", question))
    places = frozenset(p for t in texts for p in _places(t, zh)) if slot.kind is None else frozenset()
    return [fills(slot, t, question, places=places) for t in texts]


_DEICTIC: Final = re.compile(
    r"\b(?:yesterday|today|tonight|tomorrow|recently|lately|(?:last|this|past)\s+(?:week(?:end)?|month|year|night|"
    r"morning|afternoon|evening|time|spring|summer|fall|autumn|winter|(?:mon|tues|wednes|thurs|fri|satur|sun)day)"
    r"(?!\s+of\b)|(?:a|an|one|two|three|four|five|six|seven|eight|nine|ten|a few|several|\d+)\s+(?:days?|weeks?|"
    r"months?|years?)\s+ago)\b|昨天|今天|今晚|前天|刚才|最近|上周|上个?月|去年|前年|"
    + _ZH_NUM + r"+(?:天|周|个月|年)前",
    re.IGNORECASE)
"""Times that date what a turn tells by the day it was said ("Lost my job yesterday", "上周"): in a conversation
between people, when something happened is the session's date, so such a turn is no better answer to "when" than
its neighbour ("I just joined a new activist group"). :func:`slot_first` moves a turn only for a time of the
calendar or the clock ("every Sunday", "六月二十号")."""

SLOT_TOP: Final = 3
""":func:`slot_first` looks this deep: the answer the e5 ranking puts just under a turn of its topic."""


def slot_first(question: str, texts: Sequence[str], *, top: int = SLOT_TOP) -> int | None:
    """The index (below 0, within ``top``) of the turn to put first: the first of ``texts`` (a ranking's best
    turns, best first) that fills the slot of a question asking for a kind of value (a time, a number, a name, a
    person, a reason) when the first one does not ("when do I water plants": "I water them every Sunday." above "I
    keep a monstera and two snake plants"; "why did we move": "The old flat was too noisy anyway." above "We've
    moved! New address is…"), or that names the thing asked when its instances have names (:func:`named_slot`:
    "what book am I reading": "I'm reading The Left Hand of Darkness…" above "Club meets… at Anya's place"); None
    to keep the order. A question naming a thing said by a common noun ("what job", "什么工作") is left alone.

    >>> slot_first("雅思考试是哪天？", ["我在准备雅思考试，目标是总分七分。", "加油！", "考试定在六月二十号。"])
    2
    >>> slot_first("为什么下午不喝咖啡", ["我只喝燕麦拿铁。", "好的。", "下午喝会失眠。"])
    2
    >>> slot_first("what job does Anya have", ["She lives in Leeds.", "She's a nurse."]) is None
    True
    """
    slot = answer_slot(question)
    if not texts or (slot.kind is None and not named_slot(slot)):
        return None
    zh = bool(re.search(r"[\u4e00-\u9fff]", question))
    head = texts[:top]
    places = frozenset(p for t in head for p in _places(t, zh)) if slot.kind is None else frozenset()
    if fills(slot, head[0], question, places=places) is not False:
        return None
    if head[0].rstrip().endswith(("?", "？")):
        return None  # the best turn asks the same thing: what lies below it may be another event's date
    return next((i for i in range(1, len(head))
                 if fills(slot, _DEICTIC.sub(" ", head[i]) if slot.kind == "time" else head[i], question,
                          places=places)), None)
