"""The claims extractor: (subject, attribute, value, polarity) facts read from first-person statements, in
English and Chinese, with no LLM.

A *claim* is a small fact read from one chat line with hand-written rules: "I live in Paris" gives
``Claim("self", "residence", "paris")``. The same claims feed the derived fact and preference records
(:mod:`memory_ext.ingest.kinds` attaches them to the records it derives) and supersession
(:mod:`memory_ext.lifecycle.supersede`, which compares them with :func:`memory_ext.lifecycle.conflicts.conflicts`),
so a fact record is superseded together with the turn it came from.

Precision comes first: questions, conditionals/hypotheticals, intentions ("I want to move to Berlin"), past
statements ("I used to live in Paris", "我以前住在北京") and unresolved pronouns ("he", "她") give no claim at all.
The word lists are in :mod:`memory_ext.ingest.claim_words`.

>>> [(c.subject, c.attribute, c.value) for c in extract_claims("I moved to Berlin last month.")]
[('self', 'residence', 'berlin')]
>>> [(c.attribute, c.value) for c in extract_claims("我搬到了上海")]
[('residence', '上海')]
"""

from __future__ import annotations

import re

from memory_ext.ingest.claim_rules import (
    EN_CALL_ME,
    EN_FAV_REV,
    EN_RULES,
    ZH_RULES,
    ZH_VALUE_CHARS,
    Claim,
    Rule,
    Subject,
    canon_category,
    en_name,
    normalize_value,
    zh_name,
)
from memory_ext.ingest.claim_words import EN_MID_OK, NAME_STOP, PRONOUNS_EN, ZH_KIN
from memory_ext.text.script import HAN, has_han
from memory_ext.text.sentences import is_question, sentences

__all__ = ["ATTRIBUTES", "Claim", "clause_subjects", "extract_claims", "normalize_value", "statement_subjects"]

_HAN_RUN_RE = re.compile(f"[{HAN}]+")


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

# --------------------------------------------------------------------------- sentence / clause splitting

_EN_HYPO = re.compile(
    r"\b(?:if|unless|suppose|supposing|imagine|assuming|hypothetically|wish|whether|pretend|"
    r"dream(?:ed|ing)? (?:of|about))\b",
    re.IGNORECASE,
)
_ZH_HYPO = re.compile(r"如果|要是|假如|假设|假使|万一|的话|倘若|若是|想象|梦想|但愿|要不是|除非|梦见|梦到")
_EN_PAST = re.compile(
    r"\b(?:used to|use to|back then|back in the day|when i was|as a (?:kid|child|teenager|teen)|"
    r"growing up|in the past|previously|formerly|at the time|in those days|before that)\b",
    re.IGNORECASE,
)
_ZH_PAST = re.compile(r"以前|之前|曾经|过去|原来|原先|当年|那时|小时候|从前|早年|年轻时|上学时|读书时|那会儿")
_EN_CLAUSE = re.compile(
    r"\s*[,;]\s*|:(?!\d)\s*|\s*[—–]\s*|\s+(?:but|although|though|whereas|while|because|since|so|yet)\s+"
    r"|\s+and\s+(?=(?:i|my|you|now|then)\b)",
    re.IGNORECASE,
)
_ZH_CLAUSE = re.compile(r"\s*[，,；;]\s*|但是|不过|可是|然而|而且|所以|因为|\s*（|）")
_EN_REPORT_END = re.compile(
    r"\b(?:said|says|say|thinks?|thought|told me|believes?|heard|guess|suppose)\s*$", re.IGNORECASE
)
_ZH_REPORT_END = re.compile(r"(?:说|觉得|认为|以为|听说|告诉我|问|想|知道|猜|相信|怀疑)\s*$")


def _sentences(text: str) -> list[tuple[int, str, str]]:
    """(offset, sentence, terminator): a period ends a sentence before white space only, not after "Mr"."""
    return [
        (s.start, s.body, s.terminator)
        for s in sentences(text, hard="。！？!?", soft=".", merge=True, abbreviations=True)
        if s.body.strip()
    ]


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
_EN_TOKEN = re.compile(r"[A-Za-z]+?(?=n't\b)|n't\b|'[a-z]+\b|[A-Za-z][A-Za-z\-]*|\S", re.IGNORECASE)
_EN_NEG = frozenset({"not", "n't", "never", "no"})
_EN_BE = frozenset({"am", "'m", "is", "'s", "are", "'re", "been"})
_EN_SUBJ_BLOCK = frozenset({"he", "she", "they", "we", "it", "there", "this", "that", "people", "someone"})


def _en_subject(pre: str, kind: str, inherited: str | None, extra: frozenset[str]) -> Subject | None:
    fm = _EN_FILLERS.match(pre)
    base = fm.end() if fm else 0
    toks = [(m.group(), m.start() + base) for m in _EN_TOKEN.finditer(pre[base:])]
    words = [t for t, _ in toks]
    low = [w.lower() for w in words]
    if kind == "poss":
        if low == ["my"]:
            return Subject("self", False, False, toks[0][1])
        if low == ["your"]:
            return Subject("assistant", False, False, toks[0][1])
        if 3 <= len(low) <= 5 and low[0] == "my" and low[-1] == "'s" and all(w.isalpha() for w in low[1:-1]):
            return Subject("self:" + " ".join(low[1:-1]), False, False, toks[0][1])
        if len(words) in (2, 3) and low[-1] == "'s" and all(_is_name(w) for w in words[:-1]):
            return Subject(" ".join(low[:-1]), False, False, toks[0][1])
        return None
    candidates: list[tuple[str, int]] = []
    if not words:
        if inherited is None:
            return None
        return Subject(inherited, False, False, base)
    first = low[0]
    if first == "i":
        candidates.append(("self", 1))
    elif first == "you":
        candidates.append(("assistant", 1))
    elif first == "my":
        for k in (1, 2, 3):
            if len(words) > k and all(w.isalpha() and w.islower() for w in words[1 : k + 1]):
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
    elif inherited is not None and all(w in EN_MID_OK or w in extra for w in low):
        candidates.append((inherited, 0))
    for subj, n in candidates:
        mid = low[n:]
        if all(w in EN_MID_OK or w in extra for w in mid):
            neg = sum(w in _EN_NEG for w in mid) % 2 == 1
            has_have = any(w in {"have", "'ve", "has"} for w in mid)
            return Subject(subj, neg, any(w in _EN_BE for w in mid), toks[0][1], has_have)
    return None


def _is_name(word: str) -> bool:
    return bool(re.fullmatch(r"[A-Z][a-z]+", word)) and word not in NAME_STOP


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
_ZH_SUBJ = re.compile(f"^(?:我(?:家的?|的)?(?P<kin>{ZH_KIN})?|(?P<you>你))")
_ZH_BLOCK = re.compile(r"^(?:我们|你们|他|她|它|大家|有人|谁|这|那|每|所有)")
_ZH_NAME_BAD_START = frozenset("我你他她它这那有没每大所在是的了不也都还就很最")


def _zh_subject(pre: str, kind: str, inherited: str | None) -> Subject | None:
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
            return Subject("assistant", False, False, off)
        kin = m.group("kin")
        return Subject("self:" + kin if kin else "self", False, False, off)
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
                cands.append(("self", 1))  # "我爸..." where kin was a false split is rare; keep self fallback
    elif s and s[0] not in _ZH_NAME_BAD_START:
        lat = re.match(r"[A-Z][a-z]+", s)
        if lat:
            cands.append((lat.group().lower(), lat.end()))
        else:
            for n in (2, 3, 4):
                if len(s) >= n and _HAN_RUN_RE.fullmatch(s[:n]):
                    cands.append((s[:n], n))
    if not s and inherited is not None:
        return Subject(inherited, False, False, off)
    if not cands and inherited is not None and _ZH_MID.fullmatch(s):
        cands.append((inherited, 0))
    for subj, n in cands:
        mid = s[n:]
        if _ZH_MID.fullmatch(mid):
            neg = (mid.count("不") + mid.count("没")) % 2 == 1
            return Subject(subj, neg, "是" in mid, off)
    return None


# --------------------------------------------------------------------------- extraction


def _name_subject(subject: str, speaker: str | None) -> str:
    if speaker and subject == speaker.strip().casefold():
        return "self"
    return subject


def _lead_subject(clause: str, zh: bool) -> str | bool | None:
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


def statement_subjects(text: str) -> frozenset[str] | None:
    """The explicit subjects ``text`` states something about as a current fact, or None when it states nothing
    current: a question, a conditional or hypothetical, or a sentence about how things used to be.

    Subjects are named as in claims: ``self`` ("I", "我"), ``self:sister`` ("my sister", "我妹妹"), a name
    ("lena"), ``assistant``; a clause led by a pronoun ("she", "we", "他") or by no subject adds none.

    >>> sorted(statement_subjects("My sister Lena lives in Porto, she teaches chemistry."))
    ['self:sister']
    >>> sorted(statement_subjects("我跳槽了，下周开始去一家新能源车企。"))
    ['self']
    >>> statement_subjects("Where does Lena live?") is None, statement_subjects("I used to live in Oslo.") is None
    (True, True)
    """
    text = text.replace("\u2019", "'").replace("\u2018", "'")
    subjects: set[str] = set()
    current = False
    for _, sent, term in _sentences(text):
        zh = has_han(sent)
        stated = "。" in term or "." in term  # "还是北京南站。" states; "还是北京南站" may ask
        if "?" in term or "？" in term or is_question(sent, loose=not stated):
            continue
        if _EN_HYPO.search(sent) or (zh and _ZH_HYPO.search(sent)):
            continue
        for _, clause in _clauses(sent, zh):
            if (_ZH_PAST if zh else _EN_PAST).search(clause):
                continue
            current = True
            lead = _lead_subject(clause, zh)
            if isinstance(lead, str):
                subjects.add(lead)
    return frozenset(subjects) if current else None


_EN_APPOSITION = re.compile(r"\s*(?i:my)\s+[a-z]+\s+([A-Z][a-z]+)\b")
_EN_POSSESSIVE = re.compile(r"\s*([A-Z][a-z]+)'s\s+([a-z]+)(?=\s+[A-Z][a-z]+\b)")
""""Leo's coach Mark": someone else, named (as "my sister Lena" is); "Lena's new flat" is still Lena's."""
_EN_NOUN_PHRASE = re.compile(r"\s*(?:(?i:the|a|an|this|that|these|those|our|their|his|her|its|some|each|every|no)\b"
                             r"|[A-Z0-9])")
"""A clause that starts with a noun phrase (an article, a determiner, a capitalised word or a number) has a subject
of its own; one that starts otherwise ("based in London", "booked from …") continues the clause before."""


def clause_subjects(sentence: str) -> list[tuple[int, str, str | None, str | None]]:
    """The clauses of one sentence: ``(offset, clause, subject, name)``, where ``subject`` is the explicit subject
    the clause starts with, named as in :func:`statement_subjects` (``leo:coach`` for "Leo's coach Mark"), the one
    before's for a clause that starts with neither a subject nor a noun phrase ("…, based in London"), None for a
    pronoun or an unnamed noun phrase ("the gym is …"); ``name`` is the name the subject is given ("My sister Lena
    lives ..." -> ``self:sister``, ``lena``).

    >>> [(c, s, n) for _, c, s, n in clause_subjects("My sister Lena moved, she lives in Porto.")]
    [('My sister Lena moved', 'self:sister', 'lena'), ('she lives in Porto.', None, None)]
    >>> [s for _, _, s, _ in clause_subjects("Leo's coach Mark moved, based in Madrid; the gym is new.")]
    ['leo:coach', 'leo:coach', None]
    """
    sentence = sentence.replace("\u2019", "'").replace("\u2018", "'")  # one character each: offsets hold
    zh = has_han(sentence)
    out: list[tuple[int, str, str | None, str | None]] = []
    previous: str | None = None
    for off, clause in _clauses(sentence, zh):
        lead = _lead_subject(clause, zh)
        fm = None if zh else _EN_FILLERS.match(clause)
        body = clause[fm.end() if fm else 0:]
        subject: str | None
        if isinstance(lead, str):
            subject = lead
            m = None if zh else _EN_POSSESSIVE.match(body)
            if m and m.group(1).lower() == subject:
                subject += ":" + m.group(2).lower()
        elif lead is None or (not zh and _EN_NOUN_PHRASE.match(body)):
            subject = None
        else:
            subject = previous  # no subject of its own: the one before's ("我妈改签了，变成十二号下午到")
        name: str | None = None
        if subject is not None and subject.startswith("self:") and not zh:
            m = _EN_APPOSITION.match(body)
            name = m.group(1).lower() if m and _is_name(m.group(1)) else None
        out.append((off, clause, subject, name))
        previous = subject
    return out


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
        zh = has_han(sent)
        if "?" in term or "？" in term or is_question(sent, loose=True):
            continue
        if _EN_HYPO.search(sent) or (zh and _ZH_HYPO.search(sent)):
            continue
        rules = ZH_RULES if zh else EN_RULES
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
    rules: list[Rule],
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
            if subj is None or (rule.need_be and not subj.has_be) or (rule.need_have and not subj.has_have):
                continue
            emitted = rule.handler(m, clause, subj)
            if not emitted:
                continue
            used.append((m.start(), m.end()))
            tail = clause[m.end() :].lower()
            anymore = (not zh) and bool(re.search(r"\b(?:anymore|any more|no longer)\b", tail))
            subject = _name_subject(subj.subject, speaker)
            for attr, value, pol_neg, vend in emitted:
                negated = subj.negated ^ pol_neg
                if anymore and not subj.negated and not pol_neg:
                    continue  # "I live in Paris anymore" is ungrammatical; be safe
                out.append(Claim(subject, attr, value, negated, (base + subj.start, base + max(vend, m.end()))))
    return out


_ZH_CALL_ME = re.compile(f"叫我(?P<v>{ZH_VALUE_CHARS}{{1,6}}?)[吧啊哦呀]*$")


def _zh_special(clause: str, base: int, used: list[tuple[int, int]]) -> list[Claim]:
    m = _ZH_CALL_ME.search(clause)
    if not m or re.search(r"别|不要|不|没", clause[: m.start()]):
        return []
    got = zh_name(m, clause, Subject("self", False, False, 0))
    if not got:
        return []
    used.append((m.start(), m.end()))
    return [Claim("self", "name", got[0][1], False, (base + m.start(), base + m.end()))]


def _en_special(clause: str, inherited: str | None, base: int, used: list[tuple[int, int]]) -> list[Claim]:
    out: list[Claim] = []
    m = EN_CALL_ME.search(clause)
    if m and not re.search(
        r"\b(?:don't|do not|never|not|didn't|will|gonna|can you|could you)\b", clause[: m.start()], re.IGNORECASE
    ):
        got = en_name(m, clause, Subject("self", False, False, 0))
        if got:
            _, v, _, end = got[0]
            if v not in {"later", "tomorrow", "tonight", "back", "sometime", "anytime"}:
                out.append(Claim("self", "name", v, False, (base + m.start(), base + end)))
                used.append((m.start(), m.end()))
    m = EN_FAV_REV.match(clause)
    if m:
        val = normalize_value(m.group("val"))
        fm = _EN_FILLERS.match(val)
        if fm:
            val = val[fm.end() :]
        if val and val.split()[0] not in PRONOUNS_EN and len(val.split()) <= 5:
            out.append(
                Claim("self", "favorite:" + canon_category(m.group("cat").lower()), val, False, (base, base + m.end()))
            )
            used.append((m.start("poss"), m.end()))
    return out
