"""LLM-free conflict detection for supersession, in English and Chinese.

A *claim* is a small (subject, attribute, value, polarity) fact read from one chat
line with hand-written rules: "I live in Paris" gives ``Claim("self", "residence",
"paris")``. Two claims *conflict* when they talk about the same subject and the
same single-valued attribute but state a different value (or the same value with
the opposite polarity). The engine uses this to mark the older memory superseded.

Precision comes first: questions, conditionals/hypotheticals, intentions
("I want to move to Berlin"), past statements ("I used to live in Paris",
"我以前住在北京") and unresolved pronouns ("he", "她") give no claim at all.

>>> new = extract_claims("I moved to Berlin last month.")
>>> old = extract_claims("I live in Paris")
>>> [(n.value, o.value) for n, o in find_conflicts(new, old)]
[('berlin', 'paris')]
>>> find_conflicts(extract_claims("我搬到了上海"), extract_claims("我住在北京"))[0][0].attribute
'residence'
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from memory_ext.text.script import HAN
from memory_ext.text.sentences import is_question, sentences

__all__ = [
    "ATTRIBUTES",
    "Claim",
    "conflicts",
    "extract_claims",
    "find_conflicts",
    "normalize_value",
]

#: The attribute keys this module can emit (``favorite:`` and ``opinion:`` take a suffix).
ATTRIBUTES: tuple[str, ...] = (
    "residence",
    "work_location",
    "employer",
    "job_title",
    "school",
    "name",
    "age",
    "relationship_status",
    "favorite:<category>",
    "opinion:<object>",
    "diet",
    "pet",
    "phone",
    "email",
    "car",
)

# Attributes where several values may hold at once: only same value + opposite polarity conflicts.
_ADDITIVE = frozenset({"pet"})
# value implied by another value of the same attribute (vegan -> vegetarian).
_IMPLIES: dict[tuple[str, str], frozenset[str]] = {
    ("diet", "vegan"): frozenset({"vegetarian"})
}


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
_CORP = re.compile(
    r"[\s,]+(?:inc|ltd|llc|corp|corporation|gmbh|co|plc|ag|s\.?a)\.?$", re.IGNORECASE
)
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

_EN_JOBS = frozenset(
    [
        "teacher",
        "engineer",
        "developer",
        "programmer",
        "nurse",
        "doctor",
        "physician",
        "surgeon",
        "lawyer",
        "attorney",
        "designer",
        "student",
        "accountant",
        "manager",
        "chef",
        "cook",
        "writer",
        "author",
        "journalist",
        "reporter",
        "scientist",
        "researcher",
        "professor",
        "lecturer",
        "consultant",
        "analyst",
        "architect",
        "pharmacist",
        "dentist",
        "artist",
        "musician",
        "photographer",
        "pilot",
        "driver",
        "firefighter",
        "officer",
        "cop",
        "electrician",
        "plumber",
        "carpenter",
        "farmer",
        "librarian",
        "cashier",
        "waiter",
        "waitress",
        "barista",
        "salesman",
        "saleswoman",
        "salesperson",
        "entrepreneur",
        "freelancer",
        "translator",
        "therapist",
        "psychologist",
        "psychiatrist",
        "veterinarian",
        "vet",
        "mechanic",
        "tutor",
        "intern",
        "ceo",
        "cto",
        "cfo",
        "coo",
        "founder",
        "cofounder",
        "co-founder",
        "editor",
        "marketer",
        "banker",
        "economist",
        "biologist",
        "chemist",
        "physicist",
        "mathematician",
        "paramedic",
        "soldier",
        "secretary",
        "receptionist",
        "clerk",
        "technician",
        "agent",
        "attendant",
        "recruiter",
        "administrator",
        "director",
        "executive",
        "coach",
        "trainer",
        "instructor",
        "bartender",
        "baker",
        "butcher",
        "tailor",
        "hairdresser",
        "barber",
        "dancer",
        "singer",
        "actor",
        "actress",
        "painter",
        "sculptor",
        "novelist",
        "poet",
        "blogger",
        "youtuber",
        "streamer",
        "influencer",
        "undergrad",
        "undergraduate",
        "postdoc",
        "lead",
        "supervisor",
        "contractor",
        "specialist",
        "coordinator",
        "assistant",
        "caregiver",
        "nanny",
        "housekeeper",
        "janitor",
        "courier",
        "postman",
        "policeman",
        "policewoman",
        "detective",
        "judge",
        "paralegal",
        "optometrist",
        "physiotherapist",
        "midwife",
        "investor",
        "trader",
        "broker",
        "auditor",
        "programmer",
        "sysadmin",
        "devops",
    ]
)
_EN_STUDENT = frozenset({"student", "undergrad", "undergraduate", "postdoc"})
_ZH_JOBS = (
    "医生|大夫|医师|老师|教师|护士|律师|工程师|程序员|设计师|学生|大学生|研究生|博士生|会计|经理|"
    "厨师|作家|记者|科学家|研究员|教授|顾问|分析师|建筑师|药剂师|牙医|艺术家|音乐家|摄影师|飞行员|"
    "司机|警察|消防员|电工|农民|图书管理员|收银员|服务员|销售|创业者|自由职业者|翻译|咨询师|兽医|"
    "机械师|家教|实习生|产品经理|数据科学家|老板|主管|公务员|文员|秘书|前台|快递员|外卖员|导游|演员|"
    "歌手|编辑|运营|架构师|保安|工人|码农|店长|主播|博主|律师助理|教练|会计师|画家|模特|空姐|乘务员|"
    "銀行職員|职员|专员|总监|总裁|董事长|法官|检察官|军人|店员|技术员|助理|营养师|心理医生"
)
_ZH_JOB_RE = re.compile(f"(?:{_ZH_JOBS})$")
_ZH_STUDENT = re.compile(r"(?:学生|大学生|研究生|博士生|本科生)$")
_ZH_KIN = (
    "妹妹|姐姐|哥哥|弟弟|爸爸|妈妈|爱人|父亲|母亲|爸|妈|老公|老婆|丈夫|妻子|太太|男朋友|女朋友|男友|女友|"
    "儿子|女儿|孩子|爷爷|奶奶|外公|外婆|姥姥|姥爷|室友|同事|老板|好朋友|朋友|闺蜜|表哥|表姐|表妹|表弟|"
    "堂哥|堂姐|叔叔|阿姨|舅舅|姑姑|邻居|狗狗|狗|猫咪|猫|宠物|兔子|车|对象"
)
_ZH_CITIES = frozenset(
    [
        "北京",
        "上海",
        "广州",
        "深圳",
        "杭州",
        "南京",
        "苏州",
        "成都",
        "重庆",
        "武汉",
        "西安",
        "天津",
        "长沙",
        "郑州",
        "青岛",
        "厦门",
        "大连",
        "沈阳",
        "哈尔滨",
        "昆明",
        "济南",
        "合肥",
        "福州",
        "宁波",
        "无锡",
        "东莞",
        "佛山",
        "珠海",
        "南宁",
        "贵阳",
        "兰州",
        "太原",
        "石家庄",
        "南昌",
        "海口",
        "三亚",
        "拉萨",
        "乌鲁木齐",
        "香港",
        "澳门",
        "台北",
        "新加坡",
        "东京",
        "大阪",
        "首尔",
        "纽约",
        "伦敦",
        "巴黎",
        "柏林",
        "罗马",
        "悉尼",
        "墨尔本",
        "多伦多",
        "温哥华",
        "洛杉矶",
        "旧金山",
        "西雅图",
        "波士顿",
        "芝加哥",
        "美国",
        "英国",
        "法国",
        "德国",
        "日本",
        "韩国",
        "中国",
        "加拿大",
        "澳大利亚",
        "意大利",
        "西班牙",
        "国内",
        "国外",
        "老家",
    ]
)
_ZH_GENERIC_PLACE = re.compile(
    r"^(?:一|这|那|哪|家$|家里|宿舍|附近|旁边|隔壁|楼|酒店|宾馆|外面|外地|本地|当地|新家|新房|新公司|公司$|"
    r"单位$|学校$|这儿|那儿|这里|那里|某|别的|其他|一起)"
)

_PRONOUNS_EN = frozenset(
    [
        "it",
        "this",
        "that",
        "these",
        "those",
        "them",
        "him",
        "her",
        "me",
        "us",
        "you",
        "what",
        "how",
        "when",
        "where",
        "who",
        "which",
        "myself",
        "yourself",
        "everything",
        "something",
        "anything",
        "nothing",
        "everyone",
        "someone",
        "anyone",
    ]
)
_NAME_STOP = frozenset(
    [
        "The",
        "This",
        "That",
        "These",
        "Those",
        "It",
        "He",
        "She",
        "They",
        "We",
        "There",
        "Here",
        "My",
        "Your",
        "His",
        "Her",
        "Our",
        "Their",
        "Everyone",
        "Someone",
        "Somebody",
        "Nobody",
        "People",
        "Who",
        "What",
        "Where",
        "When",
        "Why",
        "How",
        "Do",
        "Does",
        "Did",
        "If",
        "So",
        "And",
        "But",
        "Well",
        "Also",
        "Yes",
        "No",
        "Today",
        "Yesterday",
        "Tomorrow",
        "Now",
        "Then",
        "Oh",
        "Hey",
        "Hi",
        "Ok",
        "Okay",
        "Maybe",
        "Perhaps",
        "Actually",
        "Honestly",
        "Just",
        "Still",
        "Lol",
        "Please",
        "Thanks",
        "Thank",
        "Sorry",
        "Guess",
        "Anyway",
        "Btw",
        "Finally",
        "Recently",
        "Currently",
        "Last",
        "Next",
        "Since",
        "After",
        "Before",
        "Monday",
        "Tuesday",
        "Wednesday",
        "Thursday",
        "Friday",
        "Saturday",
        "Sunday",
        "Everybody",
        "Nothing",
        "Anyone",
        "Most",
        "Many",
        "Some",
        "All",
        "Both",
        "Each",
        "Every",
        "Let",
        "Not",
        "Never",
        "Sure",
        "Yeah",
        "Yep",
        "Nope",
    ]
)

# --------------------------------------------------------------------------- sentence / clause splitting

_EN_HYPO = re.compile(
    r"\b(?:if|unless|suppose|supposing|imagine|assuming|hypothetically|wish|whether|pretend|"
    r"dream(?:ed|ing)? (?:of|about))\b",
    re.IGNORECASE,
)
_ZH_HYPO = re.compile(
    r"如果|要是|假如|假设|假使|万一|的话|倘若|若是|想象|梦想|但愿|要不是|除非|梦见|梦到"
)
_EN_PAST = re.compile(
    r"\b(?:used to|use to|back then|back in the day|when i was|as a (?:kid|child|teenager|teen)|"
    r"growing up|in the past|previously|formerly|at the time|in those days|before that)\b",
    re.IGNORECASE,
)
_ZH_PAST = re.compile(
    r"以前|之前|曾经|过去|原来|原先|当年|那时|小时候|从前|早年|年轻时|上学时|读书时|那会儿"
)
_EN_CLAUSE = re.compile(
    r"\s*[,;]\s*|:(?!\d)\s*|\s*[—–]\s*|\s+(?:but|although|though|whereas|while|because|since|so|yet)\s+"
    r"|\s+and\s+(?=(?:i|my|you|now|then)\b)",
    re.IGNORECASE,
)
_ZH_CLAUSE = re.compile(r"\s*[，,；;]\s*|但是|不过|可是|然而|而且|所以|因为|\s*（|）")
_EN_REPORT_END = re.compile(
    r"\b(?:said|says|say|thinks?|thought|told me|believes?|heard|guess|suppose)\s*$",
    re.IGNORECASE,
)
_ZH_REPORT_END = re.compile(
    r"(?:说|觉得|认为|以为|听说|告诉我|问|想|知道|猜|相信|怀疑)\s*$"
)


def _sentences(text: str) -> list[tuple[int, str, str]]:
    """(offset, sentence, terminator): a period ends a sentence before white space only, not after "Mr"."""
    return [(s.start, s.body, s.terminator) for s in sentences(text, hard="。！？!?", soft=".", merge=True,
                                                               abbreviations=True) if s.body.strip()]


def _clauses(sentence: str, zh: bool) -> list[tuple[int, str]]:
    splitter = _ZH_CLAUSE if zh else _EN_CLAUSE
    out: list[tuple[int, str]] = []
    start = 0
    for m in splitter.finditer(sentence):
        if m.start() > start:
            out.append((start, sentence[start : m.start()]))
        start = m.end()
    if start < len(sentence):
        out.append((start, sentence[start:]))
    return out


# --------------------------------------------------------------------------- subject parsing

_EN_FILLERS = re.compile(
    r"^\s*(?:(?:so|and|but|well|actually|now|oh|also|btw|by the way|anyway|anyways|yeah|yes|yep|no|"
    r"nope|ok|okay|hey|hi|then|recently|currently|these days|nowadays|today|finally|guess what|fun fact|"
    r"update|fyi|as of (?:now|today)|last (?:week|month|year|summer|spring|fall|autumn|winter|weekend)|"
    r"this (?:week|month|year)|(?:a|one|two|three|four|five|six|\d+|a few|a couple of) "
    r"(?:days?|weeks?|months?|years?) ago|in (?:19|20)\d\d|oh yeah|good news|big news|news|"
    r"just so you know|for the record|honestly|to be honest|tbh)\b[\s,:!\-–—]*)+",
    re.IGNORECASE,
)
_EN_TOKEN = re.compile(
    r"[A-Za-z]+?(?=n't\b)|n't\b|'[a-z]+\b|[A-Za-z][A-Za-z\-]*|\S", re.IGNORECASE
)
_EN_MID_OK = frozenset(
    [
        "am",
        "'m",
        "is",
        "'s",
        "are",
        "'re",
        "have",
        "'ve",
        "has",
        "been",
        "do",
        "does",
        "not",
        "n't",
        "no",
        "longer",
        "never",
        "now",
        "currently",
        "just",
        "recently",
        "finally",
        "also",
        "still",
        "actually",
        "really",
        "officially",
        "already",
        "totally",
        "absolutely",
        "truly",
        "kind",
        "sort",
        "of",
        "kinda",
        "genuinely",
        "seriously",
        "honestly",
        "definitely",
        "certainly",
        "literally",
        "even",
        "only",
        "mostly",
        "basically",
        "pretty",
        "much",
        "so",
        "very",
        "always",
        "happily",
        "proudly",
        "legally",
        "technically",
        "newly",
        "both",
        "all",
        "presently",
        "again",
        "gladly",
        "madly",
        "happily",
        "permanently",
        "full-time",
        "fully",
    ]
)
_EN_NEG = frozenset({"not", "n't", "never", "no"})
_EN_BE = frozenset({"am", "'m", "is", "'s", "are", "'re", "been"})
_EN_SUBJ_BLOCK = frozenset(
    {"he", "she", "they", "we", "it", "there", "this", "that", "people", "someone"}
)


@dataclass(frozen=True)
class _Subj:
    subject: str
    negated: bool
    has_be: bool
    start: int
    has_have: bool = False


def _en_subject(
    pre: str, kind: str, inherited: str | None, extra: frozenset[str]
) -> _Subj | None:
    fm = _EN_FILLERS.match(pre)
    base = fm.end() if fm else 0
    toks = [(m.group(), m.start() + base) for m in _EN_TOKEN.finditer(pre[base:])]
    words = [t for t, _ in toks]
    low = [w.lower() for w in words]
    if kind == "poss":
        if low == ["my"]:
            return _Subj("self", False, False, toks[0][1])
        if low == ["your"]:
            return _Subj("assistant", False, False, toks[0][1])
        if (
            3 <= len(low) <= 5
            and low[0] == "my"
            and low[-1] == "'s"
            and all(w.isalpha() for w in low[1:-1])
        ):
            return _Subj("self:" + " ".join(low[1:-1]), False, False, toks[0][1])
        if (
            len(words) in (2, 3)
            and low[-1] == "'s"
            and all(_is_name(w) for w in words[:-1])
        ):
            return _Subj(" ".join(low[:-1]), False, False, toks[0][1])
        return None
    candidates: list[tuple[str, int]] = []
    if not words:
        if inherited is None:
            return None
        return _Subj(inherited, False, False, base)
    first = low[0]
    if first == "i":
        candidates.append(("self", 1))
    elif first == "you":
        candidates.append(("assistant", 1))
    elif first == "my":
        for k in (1, 2, 3):
            if len(words) > k and all(
                w.isalpha() and w.islower() for w in words[1 : k + 1]
            ):
                kin = " ".join(low[1 : k + 1])
                candidates.append(("self:" + kin, k + 1))
                if len(words) > k + 1 and _is_name(words[k + 1]):
                    candidates.append(("self:" + kin, k + 2))
    elif first in _EN_SUBJ_BLOCK:
        return None
    elif _is_name(words[0]):
        candidates.append((low[0], 1))
        if len(words) > 1 and _is_name(words[1]):
            candidates.append((low[0] + " " + low[1], 2))
    elif inherited is not None and all(w in _EN_MID_OK or w in extra for w in low):
        candidates.append((inherited, 0))
    for subj, n in candidates:
        mid = low[n:]
        if all(w in _EN_MID_OK or w in extra for w in mid):
            neg = sum(w in _EN_NEG for w in mid) % 2 == 1
            has_have = any(w in {"have", "'ve", "has"} for w in mid)
            return _Subj(subj, neg, any(w in _EN_BE for w in mid), toks[0][1], has_have)
    return None


def _is_name(word: str) -> bool:
    return bool(re.fullmatch(r"[A-Z][a-z]+", word)) and word not in _NAME_STOP


_ZH_FILLERS = re.compile(
    r"^(?:(?:所以|然后|后来|但是|不过|可是|其实|对了|嗯+|啊|哦|哈哈+|现在|目前|如今|最近|今年|去年|上个月|上周|"
    r"这个月|前几天|前阵子|这几年|终于|另外|还有|顺便说一下|告诉你|跟你说|好消息|而且|并且|总之|反正|说实话|"
    r"老实说|话说|对|是的|嗯嗯|诶|哎)[，,\s!！~：:]*)+"
)
_ZH_MID = re.compile(
    r"(?:现在|目前|如今|已经|也|还|都|一直|刚刚|刚|才|就|正在|正|今年|终于|最近|这几年|上个月|去年|前年|上周|"
    r"上礼拜|这个月|今天|昨天|前几天|前阵子|不再|再也不|再也没|并不|并没有|没有|不|没|其实|真的|确实|特别|非常|"
    r"很|超级|超|太|挺|最|比较|有点儿|有点|不太|真|好|实在|一点都不|一点也不|根本不|从来不|从不|已|又|重新|"
    r"还是|倒是|本来|总是|越来越|蛮|十分|相当|可|是|满|"
    r"(?:和|跟|与)(?:我的?)?(?:男朋友|女朋友|男友|女友|老公|老婆|丈夫|妻子|前任|对象))*"
)
_ZH_SUBJ = re.compile(f"^(?:我(?:家的?|的)?(?P<kin>{_ZH_KIN})?|(?P<you>你))")
_ZH_BLOCK = re.compile(r"^(?:我们|你们|他|她|它|大家|有人|谁|这|那|每|所有)")
_ZH_NAME_BAD_START = frozenset("我你他她它这那有没每大所在是的了不也都还就很最")


def _zh_subject(pre: str, kind: str, inherited: str | None) -> _Subj | None:
    fm = _ZH_FILLERS.match(pre)
    base = fm.end() if fm else 0
    s = pre[base:].strip()
    off = base + (len(pre[base:]) - len(pre[base:].lstrip()))
    if kind == "poss":
        s2 = s.removesuffix("的")
        m = _ZH_SUBJ.fullmatch(s2) if s2 else None
        if m is None or not s2:
            return None
        if m.group("you"):
            return _Subj("assistant", False, False, off)
        kin = m.group("kin")
        return _Subj("self:" + kin if kin else "self", False, False, off)
    if _ZH_BLOCK.match(s):
        return None
    cands: list[tuple[str, int]] = []
    m = _ZH_SUBJ.match(s)
    if m:
        if m.group("you"):
            cands.append(("assistant", m.end()))
        else:
            kin = m.group("kin")
            cands.append(("self:" + kin if kin else "self", m.end()))
            if kin:
                cands.append(
                    ("self", 1)
                )  # "我爸..." where kin was a false split is rare; keep self fallback
    elif s and s[0] not in _ZH_NAME_BAD_START:
        lat = re.match(r"[A-Z][a-z]+", s)
        if lat:
            cands.append((lat.group().lower(), lat.end()))
        else:
            for n in (2, 3, 4):
                if len(s) >= n and re.fullmatch(f"[{_HAN}]+", s[:n]):
                    cands.append((s[:n], n))
    if not s and inherited is not None:
        return _Subj(inherited, False, False, off)
    if not cands and inherited is not None and _ZH_MID.fullmatch(s):
        cands.append((inherited, 0))
    for subj, n in cands:
        mid = s[n:]
        if _ZH_MID.fullmatch(mid):
            neg = (mid.count("不") + mid.count("没")) % 2 == 1
            return _Subj(subj, neg, "是" in mid, off)
    return None


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

Emit = list[
    tuple[str, str, bool, int]
]  # (attribute, value, polarity_negated, value_end_in_clause)
Handler = Callable[[re.Match[str], str, _Subj], Emit]


@dataclass(frozen=True)
class _Rule:
    pattern: re.Pattern[str]
    handler: Handler
    kind: str = (
        "subj"  # "subj" (subject before the verb) or "poss" (possessor before a noun)
    )
    need_be: bool = False
    extra_mid: frozenset[str] = frozenset()
    need_have: bool = False


def _proper_attr(attr: str) -> Handler:
    def handle(m: re.Match[str], clause: str, subj: _Subj) -> Emit:
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


_GENERIC_EN = frozenset(
    [
        "fear",
        "peace",
        "hope",
        "town",
        "city",
        "house",
        "apartment",
        "flat",
        "dorm",
        "dorms",
        "suburbs",
        "countryside",
        "village",
        "home",
        "place",
        "area",
        "neighborhood",
        "neighbourhood",
        "building",
        "street",
        "office",
        "company",
        "startup",
        "bank",
        "hospital",
        "school",
        "store",
        "shop",
        "restaurant",
        "cafe",
        "hotel",
        "house",
        "room",
        "basement",
        "studio",
        "mess",
        "tech",
        "it",
        "finance",
        "marketing",
        "sales",
        "retail",
        "here",
        "there",
        "harmony",
        "denial",
        "luxury",
        "poverty",
        "silence",
    ]
)


def _en_lower_proper(rest: str) -> tuple[str, int] | None:
    """Fallback for all-lower-case chat ("i live in berlin"): a short bare noun phrase."""
    if re.match(
        r"\s*(?:a|an|the|my|our|his|her|their|this|that|some)\b", rest, re.IGNORECASE
    ):
        return None
    v = _en_phrase(rest, 3)
    if v is None or any(w in _GENERIC_EN or w in _PRONOUNS_EN for w in v.split()):
        return None
    return v, rest.find(v.split()[-1]) + len(v.split()[-1])


def _en_job(lexicon_needed: bool) -> Handler:
    def handle(m: re.Match[str], clause: str, subj: _Subj) -> Emit:
        rest = clause[m.end() :]
        v = _en_phrase(rest, 4)
        if v is None:
            return []
        head = v.split()[-1]
        if lexicon_needed and head not in _EN_JOBS:
            return []
        if v.split()[0] in _PRONOUNS_EN or head in {
            "fan",
            "person",
            "bit",
            "lot",
            "mess",
        }:
            return []
        vend = m.end() + rest.lower().find(v.split()[-1]) + len(head)
        out: Emit = [("job_title", v, False, vend)]
        after = re.match(r"\s+(?:at|for|with|in)\s+", clause[vend:])
        if after:
            r = _en_proper(clause[vend + after.end() :])
            if r:
                attr = "school" if head in _EN_STUDENT else "employer"
                if attr != "employer" or after.group().strip() != "in":
                    out.append(
                        (attr, _CORP.sub("", r[0]), False, vend + after.end() + r[1])
                    )
        return out

    return handle


def _const(attr: str, value: str, neg: bool = False) -> Handler:
    def handle(m: re.Match[str], clause: str, subj: _Subj) -> Emit:
        return [(attr, value, neg, m.end())]

    return handle


def _group_const(attr: str, mapping: dict[str, str]) -> Handler:
    def handle(m: re.Match[str], clause: str, subj: _Subj) -> Emit:
        key = m.group("v").lower().replace("-", " ")
        return [(attr, mapping.get(key, key), False, m.end())]

    return handle


_REL_EN = {"taken": "in a relationship", "in a relationship": "in a relationship"}
_DIET_EN = {"pescetarian": "pescatarian"}


def _en_age(m: re.Match[str], clause: str, subj: _Subj) -> Emit:
    n = int(m.group("v"))
    rest = clause[m.end() :].strip(" .!,").lower()
    if not (0 < n < 120):
        return []
    if m.group("yo") is None and rest not in {
        "",
        "now",
        "today",
        "already",
        "this year",
        "as of today",
        "lol",
    }:
        return []
    return [("age", str(n), False, m.end())]


def _en_name(m: re.Match[str], clause: str, subj: _Subj) -> Emit:
    rest = clause[m.end() :]
    nm = re.match(r"\s*((?:[A-Z][\w'\-]*)(?:\s+[A-Z][\w'\-]*){0,2})", rest)
    if not nm or nm.group(1) in _NAME_STOP:
        return []
    return [("name", normalize_value(nm.group(1)), False, m.end() + nm.end())]


def _en_call_me(m: re.Match[str], clause: str, subj: _Subj) -> Emit:
    return _en_name(m, clause, subj)


def _en_opinion(m: re.Match[str], clause: str, subj: _Subj) -> Emit:
    verb = m.group("v").lower()
    neg = verb.startswith(("hat", "dislik", "detest", "despis", "can", "loath"))
    if neg and subj.negated:  # "I don't hate X" is not "I like X"
        return []
    rest = clause[m.end() :]
    v = _en_phrase(rest, 5)
    if v is None:
        return []
    v = v.removeprefix("to ")
    if (
        not v
        or v.split()[0] in _PRONOUNS_EN
        or v.split()[0] in {"to", "being", "be", "how", "when", "if"}
    ):
        return []
    return [("opinion:" + v, "like", neg, m.end() + len(rest.rstrip()))]


def _en_favorite(m: re.Match[str], clause: str, subj: _Subj) -> Emit:
    cat = _canon_cat(m.group("cat").lower())
    rest = clause[m.end() :]
    v = _en_phrase(rest, 5)
    if v is None or v.split()[0] in _PRONOUNS_EN:
        return []
    return [("favorite:" + cat, v, False, m.end() + len(rest.rstrip()))]


_CAT_CANON = {
    "colour": "color",
    "颜色": "color",
    "食物": "food",
    "菜": "food",
    "电影": "movie",
    "film": "movie",
    "书": "book",
    "歌": "song",
    "歌曲": "song",
    "运动": "sport",
    "水果": "fruit",
    "动物": "animal",
    "饮料": "drink",
    "城市": "city",
    "季节": "season",
    "歌手": "singer",
    "乐队": "band",
    "电视剧": "tv show",
    "游戏": "game",
    "作家": "author",
    "writer": "author",
    "数字": "number",
    "花": "flower",
    "国家": "country",
    "video game": "game",
    "show": "tv show",
    "series": "tv show",
    "dish": "food",
    "meal": "food",
}


def _canon_cat(cat: str) -> str:
    cat = cat.strip()
    if (
        cat.endswith("s")
        and not cat.endswith("ss")
        and cat not in {"series"}
        and len(cat) > 3
    ):
        cat = cat[:-1]
    return _CAT_CANON.get(cat, cat)


def _en_fav_reverse(m: re.Match[str], clause: str, subj: _Subj) -> Emit:
    return []  # handled in _reverse_favorite (value precedes the anchor)


_PHONE = re.compile(r"\+?\d[\d\s\-().]{5,}\d")
_EMAIL = re.compile(r"[\w.+\-]+@[\w\-]+(?:\.[\w\-]+)+")


def _phone(m: re.Match[str], clause: str, subj: _Subj) -> Emit:
    p = _PHONE.search(clause, m.end())
    if not p or p.start() - m.end() > 3:
        return []
    raw = p.group()
    digits = ("+" if raw.startswith("+") else "") + re.sub(r"\D", "", raw)
    return [("phone", digits, False, p.end())]


def _email(m: re.Match[str], clause: str, subj: _Subj) -> Emit:
    e = _EMAIL.search(clause, m.end())
    if not e or e.start() - m.end() > 3:
        return []
    return [("email", e.group().lower().rstrip("."), False, e.end())]


def _en_pet(m: re.Match[str], clause: str, subj: _Subj) -> Emit:
    kind = m.group("v").lower()
    name = m.group("n")
    val = kind + (":" + name.lower() if name else "")
    return [("pet", val, False, m.end())]


def _en_car(m: re.Match[str], clause: str, subj: _Subj) -> Emit:
    r = _en_proper(clause[m.end() :])
    if r is None:
        return []
    return [("car", r[0], False, m.end() + r[1])]


def _en_meat(m: re.Match[str], clause: str, subj: _Subj) -> Emit:
    # "I eat meat" -> not vegetarian; "I don't eat meat" -> vegetarian (subject negation flips)
    return [("diet", "vegetarian", True, m.end())]


_EN_RULES: list[_Rule] = [
    _Rule(
        re.compile(
            r"\b(?:live|lives|living|reside|resides|residing)\s+in\b", re.IGNORECASE
        ),
        _proper_attr("residence"),
    ),
    _Rule(
        re.compile(r"\blived\s+in\b", re.IGNORECASE),
        _proper_attr("residence"),
        need_have=True,
    ),
    _Rule(
        re.compile(
            r"\b(?:moved|relocated)\s+(?:back\s+)?(?:here\s+)?to\b", re.IGNORECASE
        ),
        _proper_attr("residence"),
    ),
    _Rule(
        re.compile(r"\bbased\s+(?:in|out\s+of)\b", re.IGNORECASE),
        _proper_attr("residence"),
        need_be=True,
    ),
    _Rule(
        re.compile(r"\bsettled\s+(?:down\s+)?in\b", re.IGNORECASE),
        _proper_attr("residence"),
    ),
    _Rule(
        re.compile(r"\bwork(?:s|ing)?\s+(?:at|for)\b", re.IGNORECASE),
        _proper_attr("employer"),
    ),
    _Rule(
        re.compile(r"\b(?:joined|employed\s+(?:at|by))\b", re.IGNORECASE),
        _proper_attr("employer"),
    ),
    _Rule(
        re.compile(
            r"\b(?:got|landed|accepted|took|started)\s+(?:a\s+|an\s+|the\s+|my\s+)?(?:new\s+)?"
            r"(?:job|position|role|offer)\s+(?:at|with)\b",
            re.IGNORECASE,
        ),
        _proper_attr("employer"),
    ),
    _Rule(
        re.compile(r"\bstarted\s+(?:working\s+)?at\b", re.IGNORECASE),
        _proper_attr("employer"),
    ),
    _Rule(
        re.compile(r"\bwork(?:s|ing)?\s+in\s+(?=[A-Z])"), _proper_attr("work_location")
    ),
    _Rule(
        re.compile(
            r"\b(?:study|studies|studying)\s+at\b|\battend(?:s|ing)?\b", re.IGNORECASE
        ),
        _proper_attr("school"),
    ),
    _Rule(re.compile(r"\b(?:an?)\s+", re.IGNORECASE), _en_job(True), need_be=True),
    _Rule(
        re.compile(r"\bwork(?:s|ing)?\s+as\s+(?:an?\s+)?", re.IGNORECASE),
        _en_job(False),
    ),
    _Rule(
        re.compile(r"\b(?:became|become)\s+(?:an?\s+)?", re.IGNORECASE), _en_job(True)
    ),
    _Rule(
        re.compile(
            r"\b(?:got|was|been|get)\s+promoted\s+to\s+(?:an?\s+)?", re.IGNORECASE
        ),
        _en_job(False),
    ),
    _Rule(
        re.compile(r"\bname\s+is\b|\bname's\b", re.IGNORECASE), _en_name, kind="poss"
    ),
    _Rule(
        re.compile(r"\b(?:called|named)\b|\bgo(?:es)?\s+by\b", re.IGNORECASE),
        _en_name,
        need_be=False,
    ),
    _Rule(
        re.compile(
            r"(?<![\w.$£€])(?P<v>\d{1,3})(?P<yo>\s*(?:years?|yrs?)\s+old|\s*y/?o\b)?(?![\w.%])",
            re.IGNORECASE,
        ),
        _en_age,
        need_be=True,
    ),
    _Rule(
        re.compile(
            r"\b(?:just\s+)?turned\s+(?P<v>\d{1,3})(?P<yo>)(?![\w.%])", re.IGNORECASE
        ),
        _en_age,
    ),
    _Rule(
        re.compile(
            r"\b(?P<v>single|married|engaged|divorced|widowed|separated|taken|in\s+a\s+relationship)\b(?![-\w])",
            re.IGNORECASE,
        ),
        _group_const("relationship_status", _REL_EN),
        need_be=True,
    ),
    _Rule(
        re.compile(r"\bgot\s+(?P<v>married|engaged|divorced)\b", re.IGNORECASE),
        _group_const("relationship_status", _REL_EN),
    ),
    _Rule(
        re.compile(r"\bbroke\s+up\b", re.IGNORECASE),
        _const("relationship_status", "single"),
    ),
    _Rule(
        re.compile(
            r"\b(?:have|has)\s+a\s+(?:new\s+)?(?:girlfriend|boyfriend|partner)\b",
            re.IGNORECASE,
        ),
        _const("relationship_status", "in a relationship"),
    ),
    _Rule(
        re.compile(
            r"\b(?:(?:went|gone|became|become|turned|going)\s+)?(?P<v>vegetarian|vegan|pescatarian|pescetarian)\b"
            r"(?!\s+(?:food|restaurants?|place|options?|dish(?:es)?|meals?|recipes?|burgers?|cheese|friends?|diet))",
            re.IGNORECASE,
        ),
        _group_const("diet", _DIET_EN),
        extra_mid=frozenset({"a", "an", "strict", "full", "fully", "strictly"}),
    ),
    _Rule(re.compile(r"\beat(?:s|ing)?\s+meat\b", re.IGNORECASE), _en_meat),
    _Rule(
        re.compile(
            r"\b(?P<v>love|loves|like|likes|enjoy|enjoys|adore|adores|hate|hates|dislike|dislikes|detest|"
            r"detests|despise|despises|loathe|loathes|(?:can't|cannot|can\s+not)\s+stand)\b",
            re.IGNORECASE,
        ),
        _en_opinion,
    ),
    _Rule(
        re.compile(
            r"\b(?:all[- ]time\s+|absolute\s+|current\s+|new\s+)?(?:favou?rite|fave)\s+"
            r"(?P<cat>(?:[a-z]+\s+){0,2}?[a-z]+)\s+(?:is|are|'s)\b",
            re.IGNORECASE,
        ),
        _en_favorite,
        kind="poss",
    ),
    _Rule(
        re.compile(
            r"\b(?:(?:phone|cell|mobile)\s+)?(?:number|phone)\s+is\b|\b(?:text|call|reach)\s+me\s+at\b",
            re.IGNORECASE,
        ),
        _phone,
        kind="poss",
    ),
    _Rule(
        re.compile(r"\b(?:e-?mail)(?:\s+address)?\s+is\b", re.IGNORECASE),
        _email,
        kind="poss",
    ),
    _Rule(
        re.compile(
            r"\b(?:have|has|got|adopted)\s+(?:a|an|one)\s+(?:new\s+|little\s+|old\s+|[a-z]+\s+)?"
            r"(?P<v>dog|cat|puppy|kitten|rabbit|bunny|hamster|parrot|turtle|fish|bird|horse)\b"
            r"(?:\s+(?:named|called)\s+(?P<n>[A-Z][a-z]+))?",
            re.IGNORECASE,
        ),
        _en_pet,
    ),
    _Rule(re.compile(r"\bdrive(?:s)?\s+(?:an?\s+)?(?=[A-Z])"), _en_car),
    _Rule(re.compile(r"\bcar\s+is\s+(?:an?\s+)?", re.IGNORECASE), _en_car, kind="poss"),
]

# Special English patterns handled outside the subject framework.
_EN_CALL_ME = re.compile(r"\bcalls?\s+me\b", re.IGNORECASE)
_EN_FAV_REV = re.compile(
    r"^\s*(?P<val>[\w'\- ]{1,40}?)\s+(?:is|are)\s+(?:still\s+|now\s+|definitely\s+)?(?P<poss>my)\s+"
    r"(?:all[- ]time\s+|absolute\s+)?(?:favou?rite|fave)\s+(?P<cat>(?:[a-z]+\s+){0,2}?[a-z]+)\s*$",
    re.IGNORECASE,
)


# ---- Chinese handlers


def _zh_place(attr: str) -> Handler:
    def handle(m: re.Match[str], clause: str, subj: _Subj) -> Emit:
        if "v" in m.groupdict() and m.group("v"):
            v = normalize_value(m.group("v"))
            end = m.end("v")
        else:
            r = _zh_value(clause[m.end() :])
            if r is None:
                return []
            v, e = r
            end = m.end() + e
        v = re.sub(r"^(?:了|到|去|在)", "", v)
        if not v or _ZH_GENERIC_PLACE.match(v):
            return []
        return [(attr, v, False, end)]

    return handle


_ZH_ORG_SUFFIX = re.compile(
    r"(?:公司|集团|银行|医院|学校|大学|学院|研究所|研究院|工厂|厂|事务所|科技|局|部|中心|工作室|店|馆|报社|电视台)$"
)


def _zh_employer(m: re.Match[str], clause: str, subj: _Subj) -> Emit:
    if "v" in m.groupdict() and m.group("v"):
        v = normalize_value(m.group("v"))
        end = m.end("v")
    else:
        r = _zh_value(clause[m.end() :])
        if r is None:
            return []
        v, end = r[0], m.end() + r[1]
    v = re.sub(r"^(?:了|到|去)", "", v)
    if not v or _ZH_GENERIC_PLACE.match(v) or len(v) > 12:
        return []
    if _ZH_ORG_SUFFIX.search(v) or not _HAS_HAN.search(v):
        return [("employer", _CORP.sub("", _ZH_CORP.sub("", v)), False, end)]
    if v in _ZH_CITIES:
        return [("work_location", v, False, end)]
    return [("employer", _ZH_CORP.sub("", v), False, end)]


def _zh_job(m: re.Match[str], clause: str, subj: _Subj) -> Emit:
    v = _ZH_PARTICLES.sub("", m.group("v"))
    has_measure = bool(m.group("q"))
    org_g = m.groupdict().get("e")
    if org_g:
        org = normalize_value(org_g)
        if (
            not _ZH_JOB_RE.search(v)
            or _ZH_GENERIC_PLACE.match(org)
            or org[0] in "你他她它我这那"
        ):
            return []
        return [
            ("job_title", v, False, m.end("v")),
            ("employer", _ZH_CORP.sub("", org), False, m.end("v")),
        ]
    if "的" in v:
        org, _, job = v.rpartition("的")
        if (
            org
            and _ZH_JOB_RE.search(job)
            and len(org) <= 10
            and org[0] not in "你他她它我这那"
        ):
            attr = "school" if _ZH_STUDENT.search(job) else "employer"
            return [
                ("job_title", job, False, m.end("v")),
                (attr, org, False, m.end("v")),
            ]
        return []
    if not v or len(v) > 10:
        return []
    if _ZH_JOB_RE.search(v) or (has_measure and 2 <= len(v) <= 6 and "人" != v[-1]):
        return [("job_title", v, False, m.end("v"))]
    return []


def _zh_name(m: re.Match[str], clause: str, subj: _Subj) -> Emit:
    v = re.sub(r"(?:吧|啊|哦|呀|就行了?|就好了?|就可以了?)$", "", m.group("v"))
    if (
        not v
        or v[0]
        in "了去来做吃喝帮给把别不一起回到等快过出进看写买打拿陪跟和多少他她它你我们什"
    ):
        return []
    if _HAS_HAN.search(v) and len(v) > 4:
        return []
    return [("name", normalize_value(v), False, m.end("v"))]


_CN_DIGITS = {
    "零": 0,
    "一": 1,
    "二": 2,
    "两": 2,
    "三": 3,
    "四": 4,
    "五": 5,
    "六": 6,
    "七": 7,
    "八": 8,
    "九": 9,
}


def _cn_number(s: str) -> int | None:
    if s.isdigit():
        return int(s)
    total, cur = 0, 0
    for ch in s:
        if ch in _CN_DIGITS:
            cur = _CN_DIGITS[ch]
        elif ch == "十":
            total += (cur or 1) * 10
            cur = 0
        elif ch == "百":
            total += (cur or 1) * 100
            cur = 0
        else:
            return None
    return total + cur


def _zh_age(m: re.Match[str], clause: str, subj: _Subj) -> Emit:
    rest = clause[m.end() :]
    if re.match(r"^(?:的|时|那|以前|之前|之后|以后|前|后|左右|生日)", rest):
        return []
    n = _cn_number(m.group("v"))
    if n is None or not (0 < n < 120):
        return []
    return [("age", str(n), False, m.end())]


def _zh_opinion(m: re.Match[str], clause: str, subj: _Subj) -> Emit:
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


def _zh_favorite(m: re.Match[str], clause: str, subj: _Subj) -> Emit:
    cat = _canon_cat(m.group("cat"))
    rest = clause[m.end() :]
    v = _ZH_PARTICLES.sub("", rest)
    v = re.sub(r"(?:了|的)$", "", v)
    v = normalize_value(v)
    if not v or len(v) > 12:
        return []
    return [("favorite:" + cat, v, False, m.end() + len(rest))]


def _zh_pet(m: re.Match[str], clause: str, subj: _Subj) -> Emit:
    kind = m.group("v")
    kind = {"狗狗": "狗", "小狗": "狗", "猫咪": "猫", "小猫": "猫"}.get(kind, kind)
    name = m.group("n")
    return [
        ("pet", kind + (":" + normalize_value(name) if name else ""), False, m.end())
    ]


def _zh_rel(value: str, neg: bool = False) -> Handler:
    return _const("relationship_status", value, neg)


_ZH_V = f"[{_HAN}A-Za-z0-9&·\\- ]"
_ZH_RULES: list[_Rule] = [
    _Rule(
        re.compile(
            r"(?:居住|住|定居|安家|落户)在|搬(?:家)?(?:到|去|回)了?|移居(?:到)?|定居(?=[^在])|家在"
        ),
        _zh_place("residence"),
    ),
    _Rule(
        re.compile(
            f"(?<![现正实存所自好])在(?P<v>{_ZH_V}{{1,12}}?)(?:定居|安家|生活|住)(?!院)"
        ),
        _zh_place("residence"),
    ),
    _Rule(
        re.compile(
            f"(?<![现正实存所自好])在(?P<v>{_ZH_V}{{1,14}}?)(?:工作|上班|任职|打工|供职|入职)"
        ),
        _zh_employer,
    ),
    _Rule(re.compile(r"(?:入职了?|加入了|跳槽(?:到|去)了?)"), _zh_employer),
    _Rule(
        re.compile(
            f"(?<![现正实存所自好])在(?P<v>{_ZH_V}{{1,14}}?)(?:读书|上学|念书|读研|读博|读大学|上大学|读本科|读研究生|留学)"
        ),
        _zh_place("school"),
    ),
    _Rule(
        re.compile(
            f"是(?P<q>一名|一个|一位|名|个|位)?(?P<v>{_ZH_V}{{1,12}}?)[了啦呢啊呀哦]*$"
        ),
        _zh_job,
    ),
    _Rule(
        re.compile(f"(?:当|做|干)了?(?P<q>)(?P<v>{_ZH_V}{{1,8}}?)[了啦呢啊呀哦]*$"),
        _zh_job,
    ),
    _Rule(
        re.compile(f"(?:工作|职业)是(?P<q>)(?P<v>{_ZH_V}{{1,10}}?)[了啦呢啊呀哦]*$"),
        _zh_job,
        kind="poss",
    ),
    _Rule(
        re.compile(f"(?<!名字)(?<!叫)叫(?P<v>{_ZH_V}{{1,12}}?)[吧啊哦呀]*$"), _zh_name
    ),
    _Rule(
        re.compile(f"名字(?:是|叫)(?P<v>{_ZH_V}{{1,12}}?)[吧啊哦呀]*$"),
        _zh_name,
        kind="poss",
    ),
    _Rule(
        re.compile(r"(?:满)?(?P<v>\d{1,3}|[一二三四五六七八九十两百]{1,4})(?:周)?岁"),
        _zh_age,
    ),
    _Rule(re.compile(r"单身"), _zh_rel("single")),
    _Rule(
        re.compile(r"(?:结婚|成家)(?!纪念|照|证|典礼|礼物|戒指|对象|的|仪式|那)|已婚"),
        _zh_rel("married"),
    ),
    _Rule(re.compile(r"离婚(?!的|协议|官司)|离异"), _zh_rel("divorced")),
    _Rule(re.compile(r"订婚(?!的|宴|戒指)"), _zh_rel("engaged")),
    _Rule(re.compile(r"分手了"), _zh_rel("single")),
    _Rule(
        re.compile(r"(?:谈恋爱|脱单|有(?:男|女)朋友|有对象)"),
        _zh_rel("in a relationship"),
    ),
    _Rule(re.compile(r"纯素(?:食)?(?:者|主义者)?"), _const("diet", "vegan")),
    _Rule(re.compile(r"吃素|素食(?:者|主义者)"), _const("diet", "vegetarian")),
    _Rule(re.compile(r"吃肉"), _const("diet", "vegetarian", True)),
    _Rule(
        re.compile(
            r"(?P<v>喜欢|爱(?![人好心情情护惜国])|讨厌|厌恶|受不了|忍受不了|迷上了|爱上了|热爱|喜爱|恨|反感)"
        ),
        _zh_opinion,
    ),
    _Rule(
        re.compile(f"最?(?:喜欢|爱)的(?P<cat>[{_HAN}]{{1,6}}?)(?:是|就是)"),
        _zh_favorite,
        kind="poss",
    ),
    _Rule(
        re.compile(
            r"(?:养了|养着|养|有)(?:一|两|三|几)?(?:只|条|个|头)?(?:小)?"
            f"(?P<v>狗狗|小狗|狗|猫咪|小猫|猫|兔子|仓鼠|鹦鹉|乌龟|金鱼)(?:[，,]?(?:名)?叫(?P<n>[{_HAN}A-Za-z]{{1,4}}))?"
        ),
        _zh_pet,
    ),
    _Rule(
        re.compile(r"(?:手机号码?|电话号码?|手机|电话|联系方式)(?:是|为|：|:)"),
        _phone,
        kind="poss",
    ),
    _Rule(
        re.compile(r"(?:邮箱|电子邮件|email|Email)(?:地址)?(?:是|为|：|:)"),
        _email,
        kind="poss",
    ),
    _Rule(re.compile(r"(?:开的车|车)是(?:一辆)?"), _zh_place("car"), kind="poss"),
    _Rule(re.compile(f"是做(?P<q>)(?P<v>{_ZH_V}{{1,8}}?)的[了啦呢啊呀哦]*$"), _zh_job),
    _Rule(
        re.compile(
            f"(?<![现正实存所自好])在(?P<e>{_ZH_V}{{1,12}}?)(?:做|当|担任)(?P<q>)(?P<v>{_ZH_V}{{1,8}}?)[了啦呢啊呀哦]*$"
        ),
        _zh_job,
    ),
]


# --------------------------------------------------------------------------- extraction


def _name_subject(subject: str, speaker: str | None) -> str:
    if speaker and subject == speaker.strip().casefold():
        return "self"
    return subject


def _lead_subject(clause: str, zh: bool) -> str | None | bool:
    """The explicit subject a clause starts with; False when it has none."""
    if zh:
        fm = _ZH_FILLERS.match(clause)
        s = clause[fm.end() if fm else 0 :].lstrip()
        if _ZH_BLOCK.match(s):
            return None
        m = _ZH_SUBJ.match(s)
        if m:
            if m.group("you"):
                return "assistant"
            return "self:" + m.group("kin") if m.group("kin") else "self"
        return False
    fm = _EN_FILLERS.match(clause)
    s = clause[fm.end() if fm else 0 :]
    w = re.match(r"\s*([A-Za-z]+)", s)
    if not w:
        return False
    word = w.group(1)
    if word.lower() == "i":
        return "self"
    if word.lower() == "you":
        return "assistant"
    if word.lower() == "my":
        k = re.match(r"\s*my\s+([a-z]+)", s, re.IGNORECASE)
        return "self:" + k.group(1).lower() if k else False
    if word.lower() in _EN_SUBJ_BLOCK:
        return None
    if _is_name(word):
        return word.lower()
    return False


def extract_claims(text: str, *, speaker: str | None = None) -> list[Claim]:
    """Read the (subject, attribute, value) claims stated as current facts in ``text``.

    ``speaker`` (when known) maps a third-person mention of the speaker's own name to
    ``"self"``; first person is always ``"self"`` and "you" is ``"assistant"``.

    >>> [(c.subject, c.attribute, c.value) for c in extract_claims("My sister lives in Rome.")]
    [('self:sister', 'residence', 'rome')]
    >>> [(c.attribute, c.value) for c in extract_claims("我最喜欢的颜色是蓝色")]
    [('favorite:color', '蓝色')]
    >>> extract_claims("Do you live in Paris?")
    []
    """
    text = text.replace("\u2019", "'").replace("\u2018", "'")
    out: list[Claim] = []
    seen: set[tuple[str, str, str, bool]] = set()
    for s_off, sent, term in _sentences(text):
        zh = bool(_HAS_HAN.search(sent))
        if "?" in term or "？" in term or is_question(sent, loose=True):
            continue
        if _EN_HYPO.search(sent) or zh and _ZH_HYPO.search(sent):
            continue
        rules = _ZH_RULES if zh else _EN_RULES
        inherited: str | None = None
        prev_clause = ""
        for c_off, clause in _clauses(sent, zh):
            lead = _lead_subject(clause, zh)
            report = (_ZH_REPORT_END if zh else _EN_REPORT_END).search(prev_clause)
            if lead is False:
                inh = None if report else inherited
            else:
                inh = lead if isinstance(lead, str) else None
                inherited = inh
            prev_clause = clause
            if (_ZH_PAST if zh else _EN_PAST).search(clause):
                continue
            base = s_off + c_off
            used: list[tuple[int, int]] = []
            for claim in _clause_claims(clause, zh, rules, inh, speaker, base, used):
                key = (claim.subject, claim.attribute, claim.value, claim.negated)
                if key not in seen:
                    seen.add(key)
                    out.append(claim)
    return out


def _clause_claims(
    clause: str,
    zh: bool,
    rules: list[_Rule],
    inherited: str | None,
    speaker: str | None,
    base: int,
    used: list[tuple[int, int]],
) -> list[Claim]:
    out: list[Claim] = []
    if zh:
        out.extend(_zh_special(clause, base, used))
    else:
        out.extend(_en_special(clause, inherited, base, used))
    for rule in rules:
        for m in rule.pattern.finditer(clause):
            if any(m.start() < e and s < m.end() for s, e in used):
                continue
            pre = clause[: m.start()]
            if zh:
                subj = _zh_subject(pre, rule.kind, inherited)
            else:
                subj = _en_subject(pre, rule.kind, inherited, rule.extra_mid)
            if (
                subj is None
                or (rule.need_be and not subj.has_be)
                or (rule.need_have and not subj.has_have)
            ):
                continue
            emitted = rule.handler(m, clause, subj)
            if not emitted:
                continue
            used.append((m.start(), m.end()))
            tail = clause[m.end() :].lower()
            anymore = (not zh) and bool(
                re.search(r"\b(?:anymore|any more|no longer)\b", tail)
            )
            subject = _name_subject(subj.subject, speaker)
            for attr, value, pol_neg, vend in emitted:
                negated = subj.negated ^ pol_neg
                if anymore and not subj.negated and not pol_neg:
                    continue  # "I live in Paris anymore" is ungrammatical; be safe
                out.append(
                    Claim(
                        subject,
                        attr,
                        value,
                        negated,
                        (base + subj.start, base + max(vend, m.end())),
                    )
                )
    return out


_ZH_CALL_ME = re.compile(f"叫我(?P<v>{_ZH_V}{{1,6}}?)[吧啊哦呀]*$")


def _zh_special(clause: str, base: int, used: list[tuple[int, int]]) -> list[Claim]:
    m = _ZH_CALL_ME.search(clause)
    if not m or re.search(r"别|不要|不|没", clause[: m.start()]):
        return []
    got = _zh_name(m, clause, _Subj("self", False, False, 0))
    if not got:
        return []
    used.append((m.start(), m.end()))
    return [Claim("self", "name", got[0][1], False, (base + m.start(), base + m.end()))]


def _en_special(
    clause: str, inherited: str | None, base: int, used: list[tuple[int, int]]
) -> list[Claim]:
    out: list[Claim] = []
    m = _EN_CALL_ME.search(clause)
    if m and not re.search(
        r"\b(?:don't|do not|never|not|didn't|will|gonna|can you|could you)\b",
        clause[: m.start()],
        re.IGNORECASE,
    ):
        got = _en_name(m, clause, _Subj("self", False, False, 0))
        if got:
            _, v, _, end = got[0]
            if v not in {"later", "tomorrow", "tonight", "back", "sometime", "anytime"}:
                out.append(
                    Claim("self", "name", v, False, (base + m.start(), base + end))
                )
                used.append((m.start(), m.end()))
    m = _EN_FAV_REV.match(clause)
    if m:
        val = normalize_value(m.group("val"))
        fm = _EN_FILLERS.match(val)
        if fm:
            val = val[fm.end() :]
        if val and val.split()[0] not in _PRONOUNS_EN and len(val.split()) <= 5:
            out.append(
                Claim(
                    "self",
                    "favorite:" + _canon_cat(m.group("cat").lower()),
                    val,
                    False,
                    (base, base + m.end()),
                )
            )
            used.append((m.start("poss"), m.end()))
    return out


# --------------------------------------------------------------------------- conflicts


def _script(value: str) -> str:
    return "han" if _HAS_HAN.search(value) else "latin"


def conflicts(new: Claim, old: Claim) -> bool:
    """True when ``new`` contradicts ``old`` (so ``old`` should be superseded).

    Same subject and attribute, and either a different value (both affirmed; not for
    additive attributes such as ``pet``) or the same value with opposite polarity.
    Values written in different scripts ("柏林" vs "berlin") are not compared.

    >>> conflicts(Claim("self", "residence", "berlin"), Claim("self", "residence", "paris"))
    True
    >>> conflicts(Claim("self", "opinion:sushi", "like", True), Claim("self", "opinion:sushi", "like"))
    True
    >>> conflicts(Claim("self", "pet", "cat"), Claim("self", "pet", "dog"))
    False
    """
    if new.subject != old.subject or new.attribute != old.attribute:
        return False
    a, b = normalize_value(new.value), normalize_value(old.value)
    if a == b:
        return new.negated != old.negated
    if new.negated != old.negated:
        neg, pos = (new, old) if new.negated else (old, new)
        implied = _IMPLIES.get((pos.attribute, normalize_value(pos.value)), frozenset())
        return normalize_value(neg.value) in implied
    if new.negated or new.attribute in _ADDITIVE:
        return False
    return _script(a) == _script(b)


def find_conflicts(
    new_claims: Sequence[Claim], old_claims: Sequence[Claim]
) -> list[tuple[Claim, Claim]]:
    """All (new, old) pairs where the new claim contradicts the old one, in input order.

    >>> pairs = find_conflicts(extract_claims("I hate sushi"), extract_claims("I love sushi. I live in Oslo."))
    >>> [(n.attribute, n.negated, o.negated) for n, o in pairs]
    [('opinion:sushi', True, False)]
    """
    by_key: dict[tuple[str, str], list[Claim]] = {}
    for old in old_claims:
        by_key.setdefault((old.subject, old.attribute), []).append(old)
    out: list[tuple[Claim, Claim]] = []
    for new in new_claims:
        for old in by_key.get((new.subject, new.attribute), ()):
            if conflicts(new, old):
                out.append((new, old))
    return out
