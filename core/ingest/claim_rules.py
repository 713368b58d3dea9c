"""The rules of the claims extractor (:mod:`memory_ext.ingest.claims`): the :class:`Claim` type, value
normalisation, and one table of rules per language -- a pattern anchored on a verb or noun ("live in", "在...工作",
"favourite ... is"), what must precede it (a subject, "be", "have") and a handler that reads the value after it.

>>> rule = EN_RULES[0]
>>> rule.pattern.search("I live in Oslo").group(), rule.kind
('live in', 'subj')
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from memory_ext.ingest.claim_words import (
    CATEGORY_CANON,
    CN_DIGITS,
    EN_JOBS,
    EN_STUDENT,
    GENERIC_EN,
    NAME_STOP,
    PRONOUNS_EN,
    ZH_CITIES,
    ZH_JOBS,
)
from memory_ext.text.script import HAN

__all__ = ["EN_RULES", "ZH_RULES", "Claim", "Rule", "Subject", "canon_category", "normalize_value"]


@dataclass(frozen=True)
class Claim:
    """One atomic fact read from a chat line.

    >>> Claim("self", "residence", "paris")
    Claim(subject='self', attribute='residence', value='paris', negated=False, span=(0, 0))
    """

    subject: str
    attribute: str
    value: str
    negated: bool = False
    span: tuple[int, int] = (0, 0)


# --------------------------------------------------------------------------- normalisation

_TRAIL_PUNCT = ".,!?;:。，！？；：、~…\"'“”‘’()（）[]【】「」 \t"
_ARTICLE = re.compile(r"^(?:(?:the|a|an)\s+)+", re.IGNORECASE)
_CORP = re.compile(r"[\s,]+(?:inc|ltd|llc|corp|corporation|gmbh|co|plc|ag|s\.?a)\.?$", re.IGNORECASE)
_ZH_CORP = re.compile(r"(?:有限公司|股份有限公司|集团公司)$")


def normalize_value(value: str) -> str:
    """Lower-case, strip articles, surrounding punctuation and extra spaces.

    >>> normalize_value("  The Berlin. ")
    'berlin'
    >>> normalize_value("New   York City!")
    'new york city'
    """
    v = value.strip().strip(_TRAIL_PUNCT)
    v = _ARTICLE.sub("", v)
    v = re.sub(r"\s+", " ", v).strip(_TRAIL_PUNCT)
    return v.casefold()


# --------------------------------------------------------------------------- lexicons

_HAN = HAN
_HAS_HAN = re.compile(f"[{_HAN}]")

_ZH_JOB_RE = re.compile(f"(?:{ZH_JOBS})$")
_ZH_STUDENT = re.compile(r"(?:学生|大学生|研究生|博士生|本科生)$")
_ZH_GENERIC_PLACE = re.compile(
    r"^(?:一|这|那|哪|家$|家里|宿舍|附近|旁边|隔壁|楼|酒店|宾馆|外面|外地|本地|当地|新家|新房|新公司|公司$|"
    r"单位$|学校$|这儿|那儿|这里|那里|某|别的|其他|一起)"
)


@dataclass(frozen=True)
class Subject:
    """Who a clause is about, read before a rule's anchor: ``self``, ``assistant``, ``self:sister`` or a name."""

    subject: str
    negated: bool
    has_be: bool
    start: int
    has_have: bool = False


# --------------------------------------------------------------------------- value helpers

_EN_CUT = re.compile(
    r"[\s]+(?:with|for|because|since|when|where|which|who|that|and|but|so|as|after|before|until|last|next|"
    r"this|these|yesterday|today|tonight|tomorrow|now|recently|already|too|again|anymore|any\s+more|ago|"
    r"about|around|near|in|on|at|from|to|by|of|than|more|better|less|very|a\s+lot|lol|haha|though|either|"
    r"right|actually|nowadays|currently|full[- ]time|part[- ]time|permanently|finally|at\s+all|these\s+days|"
    r"(?:\d+|one|two|three|four|five|six|seven|eight|nine|ten|a|an|a\s+few|a\s+couple(?:\s+of)?|several|"
    r"many)\s+(?:years?|months?|weeks?|days?))\b|[,.;!?]",
    re.IGNORECASE,
)
_CAP_TOKEN = r"(?:(?!I\b)[A-Z0-9][\w.&'\-]*|[a-z]+[A-Z][\w\-]*)"
_PROPER = re.compile(
    rf"\s*(?:the\s+)?({_CAP_TOKEN}(?:\s+(?:(?:of|de|la|del|du|von|van|am|upon)\s+)?(?:{_CAP_TOKEN}|&))*)"
)
_MONTHS = re.compile(
    r"\s+(?:January|February|March|April|May|June|July|August|September|October|November|December|"
    r"Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday)\b.*$"
)


def _en_phrase(rest: str, max_words: int = 5) -> str | None:
    m = _EN_CUT.search(" " + rest)
    chunk = (" " + rest)[: m.start()] if m else " " + rest
    v = normalize_value(chunk)
    if not v or len(v.split()) > max_words:
        return None
    return v


def _en_proper(rest: str) -> tuple[str, int] | None:
    m = _PROPER.match(rest)
    if not m:
        return None
    raw = _MONTHS.sub("", m.group(1)).rstrip(".")
    v = normalize_value(raw)
    if not v or v in {"i"}:
        return None
    return v, m.start(1) + len(raw)


_ZH_PARTICLES = re.compile(r"[了啦呢啊呀哦嘛哈～~!！。.，,]+$")
_ZH_VALUE_CUT = re.compile(
    r"(?:了|啦|呢|啊|呀|哦|嘛|的时候|已经|快|有|好几|很多|很|也|和|跟|去了|来了|工作|上班|住|生活|待|呆|"
    r"[0-9一二三四五六七八九十两几半多]+(?:年|个月|月|周|天|星期|岁)|，|。|！|？|\s|,|!|\?|了)"
)


def _zh_value(rest: str, max_len: int = 12) -> tuple[str, int] | None:
    lead = re.match(r"^[了到去在:：\s]*", rest)
    start = lead.end() if lead else 0
    m = _ZH_VALUE_CUT.search(rest, start)
    end = m.start() if m else len(rest)
    v = normalize_value(rest[start:end])
    if not v or len(v) > max_len:
        return None
    return v, end


# --------------------------------------------------------------------------- rules

Emit = list[tuple[str, str, bool, int]]  # (attribute, value, polarity_negated, value_end_in_clause)
Handler = Callable[[re.Match[str], str, Subject], Emit]


@dataclass(frozen=True)
class Rule:
    pattern: re.Pattern[str]
    handler: Handler
    kind: str = "subj"  # "subj" (subject before the verb) or "poss" (possessor before a noun)
    need_be: bool = False
    extra_mid: frozenset[str] = frozenset()
    need_have: bool = False


def _proper_attr(attr: str) -> Handler:
    def handle(m: re.Match[str], clause: str, subj: Subject) -> Emit:
        rest = clause[m.end() :]
        r = _en_proper(rest)
        if r is None and not re.search(r"[A-Z]", clause):
            r = _en_lower_proper(rest)
        if r is None:
            return []
        v, end = r
        if attr == "employer":
            v = _CORP.sub("", v)
        return [(attr, v, False, m.end() + end)]

    return handle


def _en_lower_proper(rest: str) -> tuple[str, int] | None:
    """Fallback for all-lower-case chat ("i live in berlin"): a short bare noun phrase."""
    if re.match(r"\s*(?:a|an|the|my|our|his|her|their|this|that|some)\b", rest, re.IGNORECASE):
        return None
    v = _en_phrase(rest, 3)
    if v is None or any(w in GENERIC_EN or w in PRONOUNS_EN for w in v.split()):
        return None
    return v, rest.find(v.split()[-1]) + len(v.split()[-1])


def _en_job(lexicon_needed: bool) -> Handler:
    def handle(m: re.Match[str], clause: str, subj: Subject) -> Emit:
        rest = clause[m.end() :]
        v = _en_phrase(rest, 4)
        if v is None:
            return []
        head = v.split()[-1]
        if lexicon_needed and head not in EN_JOBS:
            return []
        if v.split()[0] in PRONOUNS_EN or head in {"fan", "person", "bit", "lot", "mess"}:
            return []
        vend = m.end() + rest.lower().find(v.split()[-1]) + len(head)
        out: Emit = [("job_title", v, False, vend)]
        after = re.match(r"\s+(?:at|for|with|in)\s+", clause[vend:])
        if after:
            r = _en_proper(clause[vend + after.end() :])
            if r:
                attr = "school" if head in EN_STUDENT else "employer"
                if attr != "employer" or after.group().strip() != "in":
                    out.append((attr, _CORP.sub("", r[0]), False, vend + after.end() + r[1]))
        return out

    return handle


def _const(attr: str, value: str, neg: bool = False) -> Handler:
    def handle(m: re.Match[str], clause: str, subj: Subject) -> Emit:
        return [(attr, value, neg, m.end())]

    return handle


def _group_const(attr: str, mapping: dict[str, str]) -> Handler:
    def handle(m: re.Match[str], clause: str, subj: Subject) -> Emit:
        key = m.group("v").lower().replace("-", " ")
        return [(attr, mapping.get(key, key), False, m.end())]

    return handle


_REL_EN = {"taken": "in a relationship", "in a relationship": "in a relationship"}
_DIET_EN = {"pescetarian": "pescatarian"}


def _en_age(m: re.Match[str], clause: str, subj: Subject) -> Emit:
    n = int(m.group("v"))
    rest = clause[m.end() :].strip(" .!,").lower()
    if not (0 < n < 120):
        return []
    if m.group("yo") is None and rest not in {"", "now", "today", "already", "this year", "as of today", "lol"}:
        return []
    return [("age", str(n), False, m.end())]


def en_name(m: re.Match[str], clause: str, subj: Subject) -> Emit:
    rest = clause[m.end() :]
    nm = re.match(r"\s*((?:[A-Z][\w'\-]*)(?:\s+[A-Z][\w'\-]*){0,2})", rest)
    if not nm or nm.group(1) in NAME_STOP:
        return []
    return [("name", normalize_value(nm.group(1)), False, m.end() + nm.end())]


def _en_opinion(m: re.Match[str], clause: str, subj: Subject) -> Emit:
    verb = m.group("v").lower()
    neg = verb.startswith(("hat", "dislik", "detest", "despis", "can", "loath"))
    if neg and subj.negated:  # "I don't hate X" is not "I like X"
        return []
    rest = clause[m.end() :]
    v = _en_phrase(rest, 5)
    if v is None:
        return []
    v = v.removeprefix("to ")
    if not v or v.split()[0] in PRONOUNS_EN or v.split()[0] in {"to", "being", "be", "how", "when", "if"}:
        return []
    return [("opinion:" + v, "like", neg, m.end() + len(rest.rstrip()))]


def _en_favorite(m: re.Match[str], clause: str, subj: Subject) -> Emit:
    cat = canon_category(m.group("cat").lower())
    rest = clause[m.end() :]
    v = _en_phrase(rest, 5)
    if v is None or v.split()[0] in PRONOUNS_EN:
        return []
    return [("favorite:" + cat, v, False, m.end() + len(rest.rstrip()))]


def canon_category(cat: str) -> str:
    cat = cat.strip()
    if cat.endswith("s") and not cat.endswith("ss") and cat not in {"series"} and len(cat) > 3:
        cat = cat[:-1]
    return CATEGORY_CANON.get(cat, cat)


_PHONE = re.compile(r"\+?\d[\d\s\-().]{5,}\d")
_EMAIL = re.compile(r"[\w.+\-]+@[\w\-]+(?:\.[\w\-]+)+")


def _phone(m: re.Match[str], clause: str, subj: Subject) -> Emit:
    p = _PHONE.search(clause, m.end())
    if not p or p.start() - m.end() > 3:
        return []
    raw = p.group()
    digits = ("+" if raw.startswith("+") else "") + re.sub(r"\D", "", raw)
    return [("phone", digits, False, p.end())]


def _email(m: re.Match[str], clause: str, subj: Subject) -> Emit:
    e = _EMAIL.search(clause, m.end())
    if not e or e.start() - m.end() > 3:
        return []
    return [("email", e.group().lower().rstrip("."), False, e.end())]


def _en_pet(m: re.Match[str], clause: str, subj: Subject) -> Emit:
    kind = m.group("v").lower()
    name = m.group("n")
    val = kind + (":" + name.lower() if name else "")
    return [("pet", val, False, m.end())]


def _en_car(m: re.Match[str], clause: str, subj: Subject) -> Emit:
    r = _en_proper(clause[m.end() :])
    if r is None:
        return []
    return [("car", r[0], False, m.end() + r[1])]


def _en_meat(m: re.Match[str], clause: str, subj: Subject) -> Emit:
    # "I eat meat" -> not vegetarian; "I don't eat meat" -> vegetarian (subject negation flips)
    return [("diet", "vegetarian", True, m.end())]


EN_RULES: list[Rule] = [
    Rule(
        re.compile(r"\b(?:live|lives|living|reside|resides|residing)\s+in\b", re.IGNORECASE), _proper_attr("residence")
    ),
    Rule(re.compile(r"\blived\s+in\b", re.IGNORECASE), _proper_attr("residence"), need_have=True),
    Rule(re.compile(r"\b(?:moved|relocated)\s+(?:back\s+)?(?:here\s+)?to\b", re.IGNORECASE), _proper_attr("residence")),
    Rule(re.compile(r"\bbased\s+(?:in|out\s+of)\b", re.IGNORECASE), _proper_attr("residence"), need_be=True),
    Rule(re.compile(r"\bsettled\s+(?:down\s+)?in\b", re.IGNORECASE), _proper_attr("residence")),
    Rule(re.compile(r"\bwork(?:s|ing)?\s+(?:at|for)\b", re.IGNORECASE), _proper_attr("employer")),
    Rule(re.compile(r"\b(?:joined|employed\s+(?:at|by))\b", re.IGNORECASE), _proper_attr("employer")),
    Rule(
        re.compile(
            r"\b(?:got|landed|accepted|took|started)\s+(?:a\s+|an\s+|the\s+|my\s+)?(?:new\s+)?"
            r"(?:job|position|role|offer)\s+(?:at|with)\b",
            re.IGNORECASE,
        ),
        _proper_attr("employer"),
    ),
    Rule(re.compile(r"\bstarted\s+(?:working\s+)?at\b", re.IGNORECASE), _proper_attr("employer")),
    Rule(re.compile(r"\bwork(?:s|ing)?\s+in\s+(?=[A-Z])"), _proper_attr("work_location")),
    Rule(
        re.compile(r"\b(?:study|studies|studying)\s+at\b|\battend(?:s|ing)?\b", re.IGNORECASE), _proper_attr("school")
    ),
    Rule(re.compile(r"\b(?:an?)\s+", re.IGNORECASE), _en_job(True), need_be=True),
    Rule(re.compile(r"\bwork(?:s|ing)?\s+as\s+(?:an?\s+)?", re.IGNORECASE), _en_job(False)),
    Rule(re.compile(r"\b(?:became|become)\s+(?:an?\s+)?", re.IGNORECASE), _en_job(True)),
    Rule(re.compile(r"\b(?:got|was|been|get)\s+promoted\s+to\s+(?:an?\s+)?", re.IGNORECASE), _en_job(False)),
    Rule(re.compile(r"\bname\s+is\b|\bname's\b", re.IGNORECASE), en_name, kind="poss"),
    Rule(re.compile(r"\b(?:called|named)\b|\bgo(?:es)?\s+by\b", re.IGNORECASE), en_name, need_be=False),
    Rule(
        re.compile(r"(?<![\w.$£€])(?P<v>\d{1,3})(?P<yo>\s*(?:years?|yrs?)\s+old|\s*y/?o\b)?(?![\w.%])", re.IGNORECASE),
        _en_age,
        need_be=True,
    ),
    Rule(re.compile(r"\b(?:just\s+)?turned\s+(?P<v>\d{1,3})(?P<yo>)(?![\w.%])", re.IGNORECASE), _en_age),
    Rule(
        re.compile(
            r"\b(?P<v>single|married|engaged|divorced|widowed|separated|taken|in\s+a\s+relationship)\b(?![-\w])",
            re.IGNORECASE,
        ),
        _group_const("relationship_status", _REL_EN),
        need_be=True,
    ),
    Rule(
        re.compile(r"\bgot\s+(?P<v>married|engaged|divorced)\b", re.IGNORECASE),
        _group_const("relationship_status", _REL_EN),
    ),
    Rule(re.compile(r"\bbroke\s+up\b", re.IGNORECASE), _const("relationship_status", "single")),
    Rule(
        re.compile(r"\b(?:have|has)\s+a\s+(?:new\s+)?(?:girlfriend|boyfriend|partner)\b", re.IGNORECASE),
        _const("relationship_status", "in a relationship"),
    ),
    Rule(
        re.compile(
            r"\b(?:(?:went|gone|became|become|turned|going)\s+)?(?P<v>vegetarian|vegan|pescatarian|pescetarian)\b"
            r"(?!\s+(?:food|restaurants?|place|options?|dish(?:es)?|meals?|recipes?|burgers?|cheese|friends?|diet))",
            re.IGNORECASE,
        ),
        _group_const("diet", _DIET_EN),
        extra_mid=frozenset({"a", "an", "strict", "full", "fully", "strictly"}),
    ),
    Rule(re.compile(r"\beat(?:s|ing)?\s+meat\b", re.IGNORECASE), _en_meat),
    Rule(
        re.compile(
            r"\b(?P<v>love|loves|like|likes|enjoy|enjoys|adore|adores|hate|hates|dislike|dislikes|detest|"
            r"detests|despise|despises|loathe|loathes|(?:can't|cannot|can\s+not)\s+stand)\b",
            re.IGNORECASE,
        ),
        _en_opinion,
    ),
    Rule(
        re.compile(
            r"\b(?:all[- ]time\s+|absolute\s+|current\s+|new\s+)?(?:favou?rite|fave)\s+"
            r"(?P<cat>(?:[a-z]+\s+){0,2}?[a-z]+)\s+(?:is|are|'s)\b",
            re.IGNORECASE,
        ),
        _en_favorite,
        kind="poss",
    ),
    Rule(
        re.compile(
            r"\b(?:(?:phone|cell|mobile)\s+)?(?:number|phone)\s+is\b|\b(?:text|call|reach)\s+me\s+at\b", re.IGNORECASE
        ),
        _phone,
        kind="poss",
    ),
    Rule(re.compile(r"\b(?:e-?mail)(?:\s+address)?\s+is\b", re.IGNORECASE), _email, kind="poss"),
    Rule(
        re.compile(
            r"\b(?:have|has|got|adopted)\s+(?:a|an|one)\s+(?:new\s+|little\s+|old\s+|[a-z]+\s+)?"
            r"(?P<v>dog|cat|puppy|kitten|rabbit|bunny|hamster|parrot|turtle|fish|bird|horse)\b"
            r"(?:\s+(?:named|called)\s+(?P<n>[A-Z][a-z]+))?",
            re.IGNORECASE,
        ),
        _en_pet,
    ),
    Rule(re.compile(r"\bdrive(?:s)?\s+(?:an?\s+)?(?=[A-Z])"), _en_car),
    Rule(re.compile(r"\bcar\s+is\s+(?:an?\s+)?", re.IGNORECASE), _en_car, kind="poss"),
]

# Special English patterns handled outside the subject framework.
EN_CALL_ME = re.compile(r"\bcalls?\s+me\b", re.IGNORECASE)
EN_FAV_REV = re.compile(
    r"^\s*(?P<val>[\w'\- ]{1,40}?)\s+(?:is|are)\s+(?:still\s+|now\s+|definitely\s+)?(?P<poss>my)\s+"
    r"(?:all[- ]time\s+|absolute\s+)?(?:favou?rite|fave)\s+(?P<cat>(?:[a-z]+\s+){0,2}?[a-z]+)\s*$",
    re.IGNORECASE,
)


# ---- Chinese handlers


def _zh_rule_value(m: re.Match[str], clause: str) -> tuple[str, int] | None:
    """(value, end) of a Chinese rule: its ``v`` group when it has one, else the phrase after the anchor."""
    if "v" in m.groupdict() and m.group("v"):
        return normalize_value(m.group("v")), m.end("v")
    r = _zh_value(clause[m.end() :])
    return None if r is None else (r[0], m.end() + r[1])


def _zh_place(attr: str) -> Handler:
    def handle(m: re.Match[str], clause: str, subj: Subject) -> Emit:
        r = _zh_rule_value(m, clause)
        if r is None:
            return []
        v = re.sub(r"^(?:了|到|去|在)", "", r[0])
        if not v or _ZH_GENERIC_PLACE.match(v):
            return []
        return [(attr, v, False, r[1])]

    return handle


_ZH_ORG_SUFFIX = re.compile(
    r"(?:公司|集团|银行|医院|学校|大学|学院|研究所|研究院|工厂|厂|事务所|科技|局|部|中心|工作室|店|馆|报社|电视台)$"
)


def _zh_employer(m: re.Match[str], clause: str, subj: Subject) -> Emit:
    r = _zh_rule_value(m, clause)
    if r is None:
        return []
    v, end = re.sub(r"^(?:了|到|去)", "", r[0]), r[1]
    if not v or _ZH_GENERIC_PLACE.match(v) or len(v) > 12:
        return []
    if _ZH_ORG_SUFFIX.search(v) or not _HAS_HAN.search(v):
        return [("employer", _CORP.sub("", _ZH_CORP.sub("", v)), False, end)]
    if v in ZH_CITIES:
        return [("work_location", v, False, end)]
    return [("employer", _ZH_CORP.sub("", v), False, end)]


def _zh_job(m: re.Match[str], clause: str, subj: Subject) -> Emit:
    v = _ZH_PARTICLES.sub("", m.group("v"))
    has_measure = bool(m.group("q"))
    org_g = m.groupdict().get("e")
    if org_g:
        org = normalize_value(org_g)
        if not _ZH_JOB_RE.search(v) or _ZH_GENERIC_PLACE.match(org) or org[0] in "你他她它我这那":
            return []
        return [("job_title", v, False, m.end("v")), ("employer", _ZH_CORP.sub("", org), False, m.end("v"))]
    if "的" in v:
        org, _, job = v.rpartition("的")
        if org and _ZH_JOB_RE.search(job) and len(org) <= 10 and org[0] not in "你他她它我这那":
            attr = "school" if _ZH_STUDENT.search(job) else "employer"
            return [("job_title", job, False, m.end("v")), (attr, org, False, m.end("v"))]
        return []
    if not v or len(v) > 10:
        return []
    if _ZH_JOB_RE.search(v) or (has_measure and 2 <= len(v) <= 6 and v[-1] != "人"):
        return [("job_title", v, False, m.end("v"))]
    return []


def zh_name(m: re.Match[str], clause: str, subj: Subject) -> Emit:
    v = re.sub(r"(?:吧|啊|哦|呀|就行了?|就好了?|就可以了?)$", "", m.group("v"))
    if not v or v[0] in "了去来做吃喝帮给把别不一起回到等快过出进看写买打拿陪跟和多少他她它你我们什":
        return []
    if _HAS_HAN.search(v) and len(v) > 4:
        return []
    return [("name", normalize_value(v), False, m.end("v"))]


def _cn_number(s: str) -> int | None:
    if s.isdigit():
        return int(s)
    total, cur = 0, 0
    for ch in s:
        if ch in CN_DIGITS:
            cur = CN_DIGITS[ch]
        elif ch == "十":
            total += (cur or 1) * 10
            cur = 0
        elif ch == "百":
            total += (cur or 1) * 100
            cur = 0
        else:
            return None
    return total + cur


def _zh_age(m: re.Match[str], clause: str, subj: Subject) -> Emit:
    rest = clause[m.end() :]
    if re.match(r"^(?:的|时|那|以前|之前|之后|以后|前|后|左右|生日)", rest):
        return []
    n = _cn_number(m.group("v"))
    if n is None or not (0 < n < 120):
        return []
    return [("age", str(n), False, m.end())]


def _zh_opinion(m: re.Match[str], clause: str, subj: Subject) -> Emit:
    verb = m.group("v")
    neg = verb in {"讨厌", "厌恶", "受不了", "忍受不了", "恨", "烦", "反感"}
    if neg and subj.negated:
        return []
    rest = clause[m.end() :]
    if rest.startswith("的"):
        return []
    obj = re.sub(r"^(?:上了|上|了)", "", rest)
    obj = re.sub(r"^(?:吃|喝|看|听|玩|去|做|打|逛|养|弹|踢|唱|读)", "", obj)
    obj = re.split(r"因为|所以|但|不过|的时候|，|,", obj)[0]
    obj = _ZH_PARTICLES.sub("", obj)
    obj = re.sub(r"(?:了|的)$", "", obj)
    obj = normalize_value(obj)
    if not obj or len(obj) > 10 or obj[0] in "你他她它我这那":
        return []
    return [("opinion:" + obj, "like", neg, m.end() + len(rest))]


def _zh_favorite(m: re.Match[str], clause: str, subj: Subject) -> Emit:
    cat = canon_category(m.group("cat"))
    rest = clause[m.end() :]
    v = _ZH_PARTICLES.sub("", rest)
    v = re.sub(r"(?:了|的)$", "", v)
    v = normalize_value(v)
    if not v or len(v) > 12:
        return []
    return [("favorite:" + cat, v, False, m.end() + len(rest))]


def _zh_pet(m: re.Match[str], clause: str, subj: Subject) -> Emit:
    kind = m.group("v")
    kind = {"狗狗": "狗", "小狗": "狗", "猫咪": "猫", "小猫": "猫"}.get(kind, kind)
    name = m.group("n")
    return [("pet", kind + (":" + normalize_value(name) if name else ""), False, m.end())]


def _zh_rel(value: str, neg: bool = False) -> Handler:
    return _const("relationship_status", value, neg)


ZH_VALUE_CHARS = f"[{_HAN}A-Za-z0-9&·\\- ]"
ZH_RULES: list[Rule] = [
    Rule(
        re.compile(r"(?:居住|住|定居|安家|落户)在|搬(?:家)?(?:到|去|回)了?|移居(?:到)?|定居(?=[^在])|家在"),
        _zh_place("residence"),
    ),
    Rule(
        re.compile(f"(?<![现正实存所自好])在(?P<v>{ZH_VALUE_CHARS}{{1,12}}?)(?:定居|安家|生活|住)(?!院)"),
        _zh_place("residence"),
    ),
    Rule(
        re.compile(f"(?<![现正实存所自好])在(?P<v>{ZH_VALUE_CHARS}{{1,14}}?)(?:工作|上班|任职|打工|供职|入职)"),
        _zh_employer,
    ),
    Rule(re.compile(r"(?:入职了?|加入了|跳槽(?:到|去)了?)"), _zh_employer),
    Rule(
        re.compile(
            f"(?<![现正实存所自好])在(?P<v>{ZH_VALUE_CHARS}{{1,14}}?)(?:读书|上学|念书|读研|读博|读大学|上大学|读本科|读研究生|留学)"
        ),
        _zh_place("school"),
    ),
    Rule(re.compile(f"是(?P<q>一名|一个|一位|名|个|位)?(?P<v>{ZH_VALUE_CHARS}{{1,12}}?)[了啦呢啊呀哦]*$"), _zh_job),
    Rule(re.compile(f"(?:当|做|干)了?(?P<q>)(?P<v>{ZH_VALUE_CHARS}{{1,8}}?)[了啦呢啊呀哦]*$"), _zh_job),
    Rule(re.compile(f"(?:工作|职业)是(?P<q>)(?P<v>{ZH_VALUE_CHARS}{{1,10}}?)[了啦呢啊呀哦]*$"), _zh_job, kind="poss"),
    Rule(re.compile(f"(?<!名字)(?<!叫)叫(?P<v>{ZH_VALUE_CHARS}{{1,12}}?)[吧啊哦呀]*$"), zh_name),
    Rule(re.compile(f"名字(?:是|叫)(?P<v>{ZH_VALUE_CHARS}{{1,12}}?)[吧啊哦呀]*$"), zh_name, kind="poss"),
    Rule(re.compile(r"(?:满)?(?P<v>\d{1,3}|[一二三四五六七八九十两百]{1,4})(?:周)?岁"), _zh_age),
    Rule(re.compile(r"单身"), _zh_rel("single")),
    Rule(re.compile(r"(?:结婚|成家)(?!纪念|照|证|典礼|礼物|戒指|对象|的|仪式|那)|已婚"), _zh_rel("married")),
    Rule(re.compile(r"离婚(?!的|协议|官司)|离异"), _zh_rel("divorced")),
    Rule(re.compile(r"订婚(?!的|宴|戒指)"), _zh_rel("engaged")),
    Rule(re.compile(r"分手了"), _zh_rel("single")),
    Rule(re.compile(r"(?:谈恋爱|脱单|有(?:男|女)朋友|有对象)"), _zh_rel("in a relationship")),
    Rule(re.compile(r"纯素(?:食)?(?:者|主义者)?"), _const("diet", "vegan")),
    Rule(re.compile(r"吃素|素食(?:者|主义者)"), _const("diet", "vegetarian")),
    Rule(re.compile(r"吃肉"), _const("diet", "vegetarian", True)),
    Rule(
        re.compile(r"(?P<v>喜欢|爱(?![人好心情情护惜国])|讨厌|厌恶|受不了|忍受不了|迷上了|爱上了|热爱|喜爱|恨|反感)"),
        _zh_opinion,
    ),
    Rule(re.compile(f"最?(?:喜欢|爱)的(?P<cat>[{_HAN}]{{1,6}}?)(?:是|就是)"), _zh_favorite, kind="poss"),
    Rule(
        re.compile(
            r"(?:养了|养着|养|有)(?:一|两|三|几)?(?:只|条|个|头)?(?:小)?"
            f"(?P<v>狗狗|小狗|狗|猫咪|小猫|猫|兔子|仓鼠|鹦鹉|乌龟|金鱼)(?:[，,]?(?:名)?叫(?P<n>[{_HAN}A-Za-z]{{1,4}}))?"
        ),
        _zh_pet,
    ),
    Rule(re.compile(r"(?:手机号码?|电话号码?|手机|电话|联系方式)(?:是|为|：|:)"), _phone, kind="poss"),
    Rule(re.compile(r"(?:邮箱|电子邮件|email|Email)(?:地址)?(?:是|为|：|:)"), _email, kind="poss"),
    Rule(re.compile(r"(?:开的车|车)是(?:一辆)?"), _zh_place("car"), kind="poss"),
    Rule(re.compile(f"是做(?P<q>)(?P<v>{ZH_VALUE_CHARS}{{1,8}}?)的[了啦呢啊呀哦]*$"), _zh_job),
    Rule(
        re.compile(
            f"(?<![现正实存所自好])在(?P<e>{ZH_VALUE_CHARS}{{1,12}}?)(?:做|当|担任)(?P<q>)(?P<v>{ZH_VALUE_CHARS}{{1,8}}?)[了啦呢啊呀哦]*$"
        ),
        _zh_job,
    ),
]
