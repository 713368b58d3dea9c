"""Personal kinds: the preferences, facts and events a person states about themselves, with the claims each
fact or preference makes (from :mod:`memory_ext.ingest.claims`, the extractor supersession reads too).

The record text comes from the rules here ("Ana lives in Lisbon", "用户住在杭州"); the ``claims`` of a fact or
preference record are those the claims extractor reads in the same clause, so the record is superseded when its
statement is (:mod:`memory_ext.lifecycle.supersede`).

>>> from memory_ext.ingest.turns import view_turn
>>> t = view_turn({"id": "t1", "role": "user", "speaker": "Ana", "content": "I live in Oslo.", "ts": 1.7e9,
...                "session_id": "s"}, 0)
>>> [(r.kind.value, r.text, [(c.subject, c.attribute, c.value) for c in r.claims]) for r in personal_records(t)]
[('fact', 'Ana lives in Oslo', [('self', 'residence', 'oslo')])]
"""

from __future__ import annotations

import re
from collections.abc import Collection
from datetime import UTC, datetime, timedelta
from typing import Any, Final

from memory_ext.ingest.claims import extract_claims
from memory_ext.ingest.derive import DerivedRecord
from memory_ext.ingest.turns import (
    ASSISTANT_NAMES,
    FENCE_RE,
    SPACE_RE,
    TurnView,
    clean,
    make_record,
    sentences_of,
    trim_words,
)
from memory_ext.text.entities import extract_entities
from memory_ext.text.script import HAN, has_han
from memory_ext.text.sentences import is_question
from memory_ext.text.timeexpr import extract_times

__all__ = ["is_personal_source", "personal_records", "short_entities"]

#: Lowest confidence of a time expression that makes an event.
EVENT_MIN_CONFIDENCE: Final = 0.5


_HYPOTHETICAL_RE: Final = re.compile(
    r"(?<![^\W_])(?:if|would|might|maybe|perhaps|imagine|suppose|supposing|hypothetically|unless|whether|wish"
    r"|wonder|pretend)\b|\b(?:i|we|you)['’]d\b|如果|假如|要是|假设|万一|想象|也许|或许|可能|的话",
    re.IGNORECASE,
)

_PRONOUN_OBJ: Final = frozenset(
    "it it's its you him her them us me what how when where why everything anything something nothing all "
    "everyone someone talking chatting seeing hearing reading_this".split())


# ------------------------------------------------------------------------------------------ preferences

_ADV: Final = (r"(?:(?:really|absolutely|just|also|totally|truly|genuinely|still|so|do|definitely|generally|usually"
                r"|kind\s+of|actually)\s+)*")
_PREF_EN_RE: Final = re.compile(
    rf"\bI\s+{_ADV}(?P<verb>love|adore|like|enjoy|prefer|hate|dislike|detest|loathe|can['’]?t\s+stand"
    rf"|cannot\s+stand|don['’]?t\s+(?:really\s+)?(?:like|enjoy)|do\s+not\s+(?:like|enjoy)|never\s+(?:liked|enjoyed))"
    r"\s+(?P<obj>[^,.;!?…]+)"
    r"|\bI(?:['’]m|\s+am)\s+(?:(?:so|very|really|severely|a\s+bit|also)\s+)*(?P<allergic>allergic)\s+to\s+"
    r"(?P<aobj>[^,.;!?…]+)"
    r"|\bI(?:['’]m|\s+am)\s+(?:a\s+|an\s+)?(?:(?:big|huge|great|massive|die-hard)\s+)?(?P<fan>fan)\s+of\s+"
    r"(?P<fobj>[^,.;!?…]+)"
    r"|\b[Mm]y\s+(?:absolute\s+|all-time\s+)?(?P<fav>favou?rite)\s+(?P<what>[\w' -]{2,30}?)\s+(?:is|are)\s+"
    r"(?P<val>[^,.;!?…]+)",
)
_PREF_EN_VERB: Final = {
    "love": "loves", "adore": "adores", "like": "likes", "enjoy": "enjoys", "prefer": "prefers", "hate": "hates",
    "dislike": "dislikes", "detest": "detests", "loathe": "loathes",
}
_CUT_EN_RE: Final = re.compile(
    r"\s+(?:but|because|since|so|when|although|though|which|who|whereas|while|as\s+well|and\s+(?:i|we|it|that)"
    r"|if|unless|except)\b.*$", re.IGNORECASE)
_PREF_ZH_RE: Final = re.compile(
    r"我(?P<adv>(?:很|非常|特别|超级|超|最|也|还|真的|挺|比较|更|一直|从小就|就)*)"
    r"(?P<verb>不太喜欢|不喜欢|喜欢|爱吃|爱喝|爱看|爱玩|热爱|偏爱|讨厌|受不了|忍受不了|反感)"
    r"(?P<obj>[^，。！？；,.!?;\s]{1,24})"
    r"|我对(?P<aobj>[^，。！？；,.!?;\s]{1,16})过敏"
)
_CUT_ZH_RE: Final = re.compile(r"(?:但是|但|因为|所以|不过|可是|而且).*$")
_ZH_PRONOUN_OBJ: Final = ("你", "他", "她", "它", "这个", "那个", "这样", "那样", "这里", "那里", "上了", "上")


def _preference(sentence: str, who: str, who_zh: str) -> str | None:
    m = _PREF_EN_RE.search(sentence)
    if m:
        if m.group("allergic"):
            obj = trim_words(_CUT_EN_RE.sub("", m.group("aobj")))
            return f"{who} is allergic to {obj}" if obj else None
        if m.group("fan"):
            obj = trim_words(_CUT_EN_RE.sub("", m.group("fobj")))
            return f"{who} is a fan of {obj}" if obj and obj.split()[0].lower() not in _PRONOUN_OBJ else None
        if m.group("fav"):
            what, val = trim_words(m.group("what"), 4), trim_words(_CUT_EN_RE.sub("", m.group("val")))
            if not what or not val or val.split()[0].lower() in _PRONOUN_OBJ:
                return None
            return f"{who}'s favourite {what} is {val}"
        verb = SPACE_RE.sub(" ", m.group("verb").lower().replace("’", "'"))
        obj = trim_words(_CUT_EN_RE.sub("", m.group("obj")))
        if not obj:
            return None
        words = obj.split()
        first = words[0].lower().strip("'’")
        if first in _PRONOUN_OBJ or (first in ("that", "this", "these", "those") and (
                len(words) == 1 or words[1].lower() in ("you", "i", "we", "he", "she", "they", "it", "is", "was"))):
            return None
        if verb.startswith(("don't", "dont", "do not", "never")):
            base = "enjoy" if "enjoy" in verb else "like"
            return f"{who} doesn't {base} {obj}"
        if verb.startswith(("can't", "cant", "cannot")):
            return f"{who} can't stand {obj}"
        return f"{who} {_PREF_EN_VERB.get(verb, verb)} {obj}"
    if not sentence.isascii():
        m = _PREF_ZH_RE.search(sentence)
        if m:
            if m.group("aobj"):
                return f"{who_zh}对{m.group('aobj')}过敏"
            obj = _CUT_ZH_RE.sub("", m.group("obj")).rstrip("了的啊呀呢吧")
            if not obj or obj.startswith(_ZH_PRONOUN_OBJ) or obj in ("吃", "玩", "看"):
                return None
            adv = m.group("adv") if m.group("adv") in ("最", "更", "特别", "非常", "很") else ""
            return f"{who_zh}{adv}{m.group('verb')}{obj}"
    return None


# ------------------------------------------------------------------------------------------ facts

_FACT_EN_RE: Final = re.compile(
    r"\bI\s+(?:currently\s+|still\s+|now\s+)?(?P<live>live|am\s+living|['’]m\s+living)\s+in\s+(?P<lobj>[^,.;!?…]+)"
    r"|\bI\s+(?:currently\s+|still\s+|now\s+)?work\s+(?P<wprep>at|for|as)\s+(?P<wobj>[^,.;!?…]+)"
    r"|\bI(?:['’]m|\s+am)\s+(?P<age>\d{1,3})\s*(?:years?\s+old|yo)\b"
    r"|\bI(?:['’]m|\s+am)\s+(?:originally\s+)?from\s+(?P<from>[^,.;!?…]+)"
    r"|\bI\s+(?P<born>was\s+born|grew\s+up)\s+in\s+(?P<bobj>[^,.;!?…]+)"
    r"|\bI(?:['’]m|\s+am)\s+(?:currently\s+|now\s+)?(?P<art>a|an)\s+(?P<role>[^,.;!?…]+)"
    r"|\bI(?:['’]m|\s+am)\s+(?:now\s+|currently\s+)?(?P<state>married|single|divorced|engaged|widowed|vegetarian|vegan"
    r"|pregnant|retired|unemployed|left-handed|right-handed|lactose\s+intolerant|diabetic|an\s+only\s+child)\b"
    r"|\b[Mm]y\s+(?P<what>(?:[\w-]+(?:['’]s)?\s+){0,2}[\w-]+)\s+(?:is|are)\s+(?:called\s+|named\s+)?(?P<val>[^,.;!?…]+)"
    r"|\bI\s+(?:also\s+|still\s+)?(?P<have>have|own)\s+(?P<num>a|an|one|two|three|four|five|six|\d{1,2})\s+(?P<hobj>[^,.;!?…]+)"
    r"|\bI\s+(?:also\s+)?(?P<verb>speak|drive|study|teach|play)\s+(?P<vobj>[^,.;!?…]+)",
)
_ROLE_REJECT: Final = frozenset(
    "bit little lot kind sort huge big total complete bad good great quick fan new first second last few couple "
    "lot real".split())
_MY_REJECT: Final = frozenset(
    "point question guess bad pleasure thought thoughts concern problem issue plan plans day week weekend life "
    "hope worry fear mind heart idea gut goal dream answer turn fault mistake".split())
_HAVE_REJECT: Final = frozenset(
    "question questions idea feeling lot bit few couple meeting problem doubt quick good great hard tough busy "
    "favor favour chance moment minute second suggestion request follow-up followup".split())
#: First words that make "my X is ..." / "I play ..." not a fact about the speaker.
_VALUE_REJECT: Final = _PRONOUN_OBJ | {"not", "so", "very", "too", "really", "pretty", "going", "getting", "like"}
_VERB_OBJ_REJECT: Final = _PRONOUN_OBJ | {"with", "a", "to"}
_FACT_VERB: Final = {"speak": "speaks", "drive": "drives", "study": "studies", "teach": "teaches", "play": "plays",
                     "have": "has", "own": "owns"}
_FACT_ZH_RE: Final = re.compile(
    r"我(?:现在|目前|一直|也)?住在(?P<live>[^，。！？；,.!?;\s]{2,16})"
    r"|我(?:现在|目前|一直|也)?在(?P<work>[^，。！？；,.!?;\s]{2,16}?)(?P<wverb>工作|上班|上学|读书|实习|当老师|教书)"
    r"|我的(?P<what>[^，。！？；,.!?;\s的]{1,8}?)(?P<cop>是|叫)(?P<val>[^，。！？；,.!?;\s]{1,16})"
    r"|我叫(?P<name>[^，。！？；,.!?;\s]{2,6})"
    r"|我(?:来自|老家在|老家是|出生在|出生于)(?P<home>[^，。！？；,.!?;\s]{2,16})"
    r"|我有(?P<num>[一两二三四五六七八九十\d]+)(?P<cls>[个只条位本件辆台家套])(?P<hobj>[^，。！？；,.!?;\s]{1,10})"
    r"|我是(?:一名|一个|一位|个)?(?P<role>[^，。！？；,.!?;\s]{2,12})"
)
_ZH_ROLE_REJECT: Final = (*"说不在因觉想来要真很挺太第这那怎为对从把被也还就刚才否会能", "一个人")
_ZH_HAVE_REJECT: Final = ("问题", "想法", "事", "点", "些")


def _object(raw: str, max_words: int, reject: Collection[str] = ()) -> str:
    """``raw`` cut before its first connective ("but", "because"...) and trimmed to ``max_words``; empty when
    nothing is left or its first word is in ``reject``."""
    obj = trim_words(_CUT_EN_RE.sub("", raw), max_words)
    return "" if not obj or obj.split()[0].lower() in reject else obj


def _fact(sentence: str, who: str, who_zh: str) -> str | None:
    m = _FACT_EN_RE.search(sentence)
    if m:
        g = m.groupdict()
        if g["live"]:
            obj = _object(g["lobj"], 6)
            return f"{who} lives in {obj}" if obj else None
        if g["wprep"]:
            obj = _object(g["wobj"], 6, _PRONOUN_OBJ)
            return f"{who} works {g['wprep']} {obj}" if obj else None
        if g["age"]:
            return f"{who} is {g['age']} years old"
        if g["from"]:
            obj = _object(g["from"], 5, _PRONOUN_OBJ)
            return f"{who} is from {obj}" if obj else None
        if g["born"]:
            obj = _object(g["bobj"], 6)
            return f"{who} {SPACE_RE.sub(' ', g['born'])} in {obj}" if obj else None
        if g["art"]:
            obj = _object(g["role"], 5, _ROLE_REJECT)
            return f"{who} is {g['art']} {obj}" if obj else None
        if g["state"]:
            return f"{who} is {SPACE_RE.sub(' ', g['state'])}"
        if g["what"]:
            what = g["what"]
            head = what.split()[-1].lower().replace("’", "'").removesuffix("'s")
            if head in _MY_REJECT or what.split()[0].lower() in _MY_REJECT or what.lower().startswith("favo"):
                return None
            val = _object(g["val"], 6, _VALUE_REJECT)
            return f"{who}'s {what} is {val}" if val else None
        if g["have"]:
            obj = _object(g["hobj"], 5, _HAVE_REJECT)
            return f"{who} {_FACT_VERB[g['have']]} {g['num']} {obj}" if obj else None
        if g["verb"]:
            obj = _object(g["vobj"], 5, _VERB_OBJ_REJECT)
            return f"{who} {_FACT_VERB[g['verb']]} {obj}" if obj else None
    if not sentence.isascii():
        m = _FACT_ZH_RE.search(sentence)
        if m:
            g = m.groupdict()
            if g["live"]:
                return f"{who_zh}住在{_CUT_ZH_RE.sub('', g['live'])}"
            if g["work"]:
                return f"{who_zh}在{g['work']}{g['wverb']}"
            if g["what"]:
                return f"{who_zh}的{g['what']}{g['cop']}{_CUT_ZH_RE.sub('', g['val'])}"
            if g["name"]:
                return f"{who_zh}叫{g['name']}"
            if g["home"]:
                return f"{who_zh}来自{_CUT_ZH_RE.sub('', g['home'])}"
            if g["num"]:
                obj = _CUT_ZH_RE.sub("", g["hobj"])
                if not obj or obj.startswith(_ZH_HAVE_REJECT):
                    return None
                return f"{who_zh}有{g['num']}{g['cls']}{obj}"
            if g["role"]:
                role = _CUT_ZH_RE.sub("", g["role"]).rstrip("了的啊呀呢吧")
                if len(role) < 2 or role.startswith(_ZH_ROLE_REJECT):
                    return None
                return f"{who_zh}是{role}"
    return None


# ------------------------------------------------------------------------------------------ events

_EN_SUBJECT_RE: Final = re.compile(r"(?<![\w'’])(?:I|[Ww]e)(?![\w])")
_IRREGULAR: Final = (
    "went|ran|met|saw|got|took|made|bought|won|began|came|did|gave|left|found|flew|drove|wrote|ate|spent|sold|"
    "threw|built|caught|brought|taught|became|swam|sang|rode|lost|broke|held|kept|paid|sent|told|felt|heard|"
    "read|won|quit|hit|had|moved|finished|started|visited|attended|joined")
_EN_EVENT_VERB_RE: Final = re.compile(
    rf"(?<![\w'’])(?:I|[Ww]e)(?:\s+(?:just|finally|also|actually|recently|both|all))?"
    rf"(?:\s+[a-z]+ed\b|\s+(?:{_IRREGULAR})\b|\s+will\s+\w+|['’]ll\s+\w+|(?:['’]m|['’]re|\s+am|\s+are)\s+(?:going|gonna"
    r"|planning|about|flying|driving|heading|visiting|moving|starting|leaving|getting|having|taking|meeting|"
    r"attending|running|hosting|traveling|travelling|seeing)\b|\s+(?:plan|planned|intend|hope)\s+to\b"
    r"|(?:['’]ve|\s+have|\s+had)\s+(?:just\s+)?[a-z]+(?:ed|en|un|ought|one|ot)\b|\s+was\s+(?:at|in)\b)"
)
_EN_EVENT_REJECT_RE: Final = re.compile(
    r"(?<![\w'’])I\s+(?:really\s+)?(?:loved|liked|enjoyed|hated|wanted|needed|wished|hoped|guessed|wondered"
    r"|tried|used|supposed)\b")
_ZH_EVENT_RE: Final = re.compile(r"我(?:们)?[^，。！？；,.!?;]{0,8}?"
                                 r"(?:了|过|要|会|将|打算|准备|计划|去|参加|买|见|搬|开始|结束)")
_FUTURE_RE: Final = re.compile(r"\b(?:will|going\s+to|gonna|plan|planning|about\s+to)\b|['’]ll\b"
                               r"|要|会|将|打算|准备|计划")


def _date_label(m: Any) -> str:
    start = m.start.date()
    last = (m.end - timedelta(days=1)).date()
    if m.granularity == "day" or start == last:
        return start.isoformat()
    if m.granularity == "month" and start.day == 1 and (last + timedelta(days=1)).day == 1:
        return start.strftime("%Y-%m")
    if m.granularity == "year" and start.month == 1 and start.day == 1 and last.month == 12 and last.day == 31:
        return str(start.year)
    return f"{start.isoformat()}..{last.isoformat()}"


_EN_GIST_LEAD_RE: Final = re.compile(r"^I(?:['’]m|\s+am|['’]ve|\s+have|\s+)\s*")


def _event(sentence: str, ts: float, who: str, who_zh: str) -> tuple[str, str, bool] | None:
    """(text, date label, future?) of an event in a first-person sentence with a time expression."""
    zh = has_han(sentence)
    if zh:
        if "我" not in sentence or not _ZH_EVENT_RE.search(sentence):
            return None
    elif not _EN_EVENT_VERB_RE.search(sentence) or _EN_EVENT_REJECT_RE.search(sentence):
        return None
    mentions = [m for m in extract_times(sentence, datetime.fromtimestamp(ts, UTC))
                if m.confidence >= EVENT_MIN_CONFIDENCE]
    if not mentions:
        return None
    m = mentions[0]
    rest = sentence[: m.span[0]] + " " + sentence[m.span[1]:]
    if zh:
        pos = rest.find("我")
        gist = rest[pos:].strip()
        gist = gist[1:] if gist.startswith("我") and not gist.startswith("我们") else gist
        gist = clean(SPACE_RE.sub("", gist).strip("，,。.！!；;、"), 60)
        name = who_zh
    else:
        sm = _EN_SUBJECT_RE.search(rest)
        if sm is None:
            return None
        gist = rest[sm.start():]
        gist = _EN_GIST_LEAD_RE.sub("", gist) if gist.startswith("I") else gist
        gist = trim_words(SPACE_RE.sub(" ", gist).strip(" ,.!;:"), 12)
        gist = re.sub(r"\s+(?:on|in|at|during|from|since|by)$", "", gist)
        name = who
    if len(gist) < 2:
        return None
    label = _date_label(m)
    return f"{name}: {gist} ({label})", label, bool(_FUTURE_RE.search(sentence))


# ------------------------------------------------------------------------------------------ personal kinds


_BORN_RE: Final = re.compile(r"\bborn\b|出生")
_EN_CLAUSE_RE: Final = re.compile(r"(?:,\s*|\s+)(?:and|but|also|plus)\s+(?=I\b|I['’]|[Mm]y\b)")
_ZH_CLAUSE_RE: Final = re.compile(r"[，,、]\s*(?=(?:[^，,、]{0,6})我)")


def _clauses(sentence: str) -> list[str]:
    """The clauses of a sentence that start a new first-person statement ("..., and I'm allergic to X")."""
    parts = _EN_CLAUSE_RE.split(sentence)
    if not sentence.isascii():
        parts = [c for p in parts for c in _ZH_CLAUSE_RE.split(p)]
    return [p for p in parts if p.strip()]


_HAN_RUN_RE: Final = re.compile(f"[{HAN}，。！？；：、“”‘’（）《》「」『』]+")


def short_entities(text: str, speaker: str | None = None) -> list[str]:
    """Entities of a short text without jieba: the Chinese proper nouns of a turn come with its turn record
    (the derived record is anchored to it), so Han runs are left out here and the jieba model never loads
    for a derived record."""
    if not text.isascii():
        text = _HAN_RUN_RE.sub(" , ", text)
    return extract_entities(text, speaker=speaker)[:8]


def personal_records(t: TurnView) -> list[DerivedRecord]:
    content = t.content
    if not content or len(content) > 4000:
        return []
    lower = content.lower()
    if "I" not in content and "my" not in lower and "we" not in lower and "我" not in content:
        return []
    who = t.speaker or "the user"
    who_zh = t.speaker or "用户"
    out: list[DerivedRecord] = []
    seen: set[tuple[str, str]] = set()
    if "```" in content:
        content = FENCE_RE.sub(" ", content)
    for raw in sentences_of(content):
        sentence = raw.strip()
        low = sentence.lower()
        if len(sentence) < 4 or ("I" not in sentence and "my" not in low and "we" not in low and "我" not in sentence):
            continue
        if is_question(sentence, loose=True) or _HYPOTHETICAL_RE.search(sentence):
            continue
        body = sentence.rstrip(".!?…。！？；; ")
        found: list[tuple[str, str, list[str], str]] = []
        for clause in _clauses(body):
            pref = _preference(clause, who, who_zh)
            if pref:
                found.append(("preference", pref, ["preference"], clause))
            ev = _event(clause, t.ts, who, who_zh) if t.ts is not None else None
            if ev:
                found.append(("event", ev[0], ["event", "plan" if ev[2] else "past", ev[1]], clause))
            if not pref and (not ev or _BORN_RE.search(clause)):
                fact = _fact(clause, who, who_zh)
                if fact:
                    found.append(("fact", fact, ["fact"], clause))
        for kind, text, tags, clause in found:
            if (kind, text) in seen:
                continue
            seen.add((kind, text))
            index = f"{text} | {t.speaker + ': ' if t.speaker else ''}{sentence} [{kind}]"
            # what the statement claims, for supersession; events are never superseded
            claims = extract_claims(clause, speaker=t.speaker) if kind != "event" else ()
            out.append(make_record(kind, t, text, index, (), tags, short_entities(sentence, t.speaker), claims))
    return out


def is_personal_source(t: TurnView) -> bool:
    if t.role == "user":
        return True
    return (t.role == "assistant" and not t.calls and t.speaker is not None
            and t.speaker.lower() not in ASSISTANT_NAMES)

