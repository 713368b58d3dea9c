"""Typed memories derived from turns at write time, with no LLM: facts, preferences, events, procedures and
failure patterns.

:func:`derive_kinds` reads the new turns of a namespace (with the turns before them as context) and returns
short records of the kinds of :class:`~memory_ext.models.RecordKind` that a turn record alone says poorly:

* **preference** -- a first-person like, dislike or allergy: "I love/like/enjoy/prefer/hate/can't stand X",
  "I'm allergic to X", "my favourite X is Y", 我喜欢/讨厌/更喜欢/受不了/对X过敏 -> ``"Ana prefers aisle seats"``.
* **fact** -- a first-person stable fact: "I live in / work at / work as / am from / was born in / grew up
  in", "I'm a nurse", "I'm 34 years old", "my X is Y", "I have two dogs", 我住在/我在X工作/我是/我的X是/我叫/
  我有两只猫 -> ``"Ana lives in Lisbon"``, ``"用户住在杭州"``.
* **event** -- a first-person thing that happened or will happen, with a time expression resolved against
  the turn's timestamp -> ``"Ana: ran a marathon (2023-05-06)"``, ``"用户: 要去北京 (2023-05-09)"``.
* **procedure** -- an assistant (or tool) answer to a stated request that holds steps (a numbered list,
  bullets for a how-to request, "first ... then ...", 首先...然后..., 第一步), shell commands or code, or
  that closes a tool-call sequence which succeeded -> ``"how to reset the router: unplug it; wait 30 s;
  plug it back"``, ``"how to find flights to Tokyo: call flight_search(to=Tokyo, timeout_s=30)"``.
* **failure_pattern** -- a tool call or action followed by an error (a tool result with an error key, an
  exception, a traceback, a timeout, an HTTP 4xx/5xx, "failed", 失败/报错/超时) and the fix that followed
  when there is one (the same or another tool succeeding, or a message proposing a fix) ->
  ``"flight_search failed with timeout (timeout contacting airline API); fix: retried flight_search with
  timeout_s=30"``.

Precision comes before recall: questions ("Do you like sushi?"), hypotheticals ("If I lived in Paris..."),
negated statements, other people's preferences, chit-chat and prose "failures" without a technical context
("I failed my exam") give nothing. Personal kinds come from user turns, and from assistant turns only when
they have a human speaker name (multi-party chat); the speaker's name is the subject of the text when known,
else "the user" (用户 in Chinese).

Each record is a dict like those of :mod:`memory_ext.ingest.derive` (``id``, ``kind``, ``text``,
``index_text``, ``ref_ts``, ``turn_ids`` with the source turn first, ``source_role``, ``speaker``,
``session_id``, ``anchor_turn_id`` = the source turn) plus ``tags`` and ``entities``. ``index_text`` always
holds the text, the source sentence or error line, the kind and, for procedures and failures, the tool names
and error keywords, so "flight_search timeout" finds the failure pattern.

>>> turns = [{"id": "t1", "role": "user", "speaker": "Ana", "content": "I prefer aisle seats. Thanks!",
...           "ts": 1683554160.0, "session_id": "s1"}]
>>> [(r["kind"], r["text"]) for r in derive_kinds(turns, 0)]
[('preference', 'Ana prefers aisle seats')]
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Final

from memory_ext.ingest.derive import new_id
from memory_ext.text.entities import extract_entities
from memory_ext.text.script import HAN, has_han
from memory_ext.text.sentences import is_question, sentences
from memory_ext.text.timeexpr import extract_times

__all__ = ["derive_kinds"]

#: How far (in turns) a request, a tool call or a fix may be from the turn that uses it.
LOOKBACK: Final = 8
LOOKAHEAD: Final = 8
#: Lowest confidence of a time expression that makes an event.
EVENT_MIN_CONFIDENCE: Final = 0.5
TEXT_MAX_CHARS: Final = 240
_ASSISTANT_NAMES: Final = frozenset({"assistant", "ai", "bot", "agent", "system", "tool", "model", "助手"})


# ------------------------------------------------------------------------------------------ turns


@dataclass(slots=True)
class _Call:
    name: str
    args: dict[str, Any] | None
    call_id: str | None
    error: str | None  # an error embedded in the call dict
    result: Any = None  # a result embedded in the call dict


@dataclass(slots=True)
class _T:
    index: int
    id: str
    role: str
    speaker: str | None
    content: str
    ts: float | None
    session: Any
    calls: list[_Call] = field(default_factory=list)
    metadata: Mapping[str, Any] = field(default_factory=dict)


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _parse_args(raw: Any) -> dict[str, Any] | None:
    if isinstance(raw, str):
        s = raw.strip()
        if not s.startswith("{") or len(s) > 20000:
            return None
        try:
            raw = json.loads(s)
        except ValueError:
            return None
    return dict(raw) if isinstance(raw, Mapping) else None


def _calls(raw: Any) -> list[_Call]:
    if not isinstance(raw, (list, tuple)):
        return []
    out = []
    for c in raw[:32]:
        if not isinstance(c, Mapping):
            continue
        fn = c.get("function")
        name = c.get("name") or c.get("tool") or c.get("tool_name")
        if not name and isinstance(fn, Mapping):
            name = fn.get("name")
        elif not name and isinstance(fn, str):
            name = fn
        if not isinstance(name, str) or not name.strip():
            continue
        args = c.get("arguments", c.get("args", c.get("input")))
        if args is None and isinstance(fn, Mapping):
            args = fn.get("arguments")
        err = c.get("error")
        if isinstance(err, Mapping):
            err = err.get("message") or err.get("type") or json.dumps(err, default=str)[:200]
        status = c.get("status")
        if not err and isinstance(status, str) and status.lower() in ("error", "failed", "failure", "timeout"):
            err = status
        call_id = c.get("id") or c.get("call_id") or c.get("tool_call_id")
        out.append(_Call(name.strip()[:80], _parse_args(args), str(call_id) if call_id else None,
                         str(err)[:300] if err else None, c.get("result", c.get("output"))))
    return out


def _norm(raw: Any, index: int) -> _T | None:
    if not isinstance(raw, Mapping):
        return None
    tid = raw.get("id")
    if not isinstance(tid, str) or not tid:
        return None
    ts = raw.get("ts")
    if isinstance(ts, datetime):
        ts = (ts if ts.tzinfo else ts.replace(tzinfo=UTC)).timestamp()
    elif isinstance(ts, bool) or not isinstance(ts, (int, float)) or ts != ts:
        ts = None
    speaker = raw.get("speaker")
    meta = raw.get("metadata")
    return _T(index=index, id=tid, role=_str(raw.get("role")).strip().lower() or "user",
              speaker=speaker.strip() or None if isinstance(speaker, str) else None,
              content=_str(raw.get("content")), ts=float(ts) if ts is not None else None,
              session=raw.get("session_id"), calls=_calls(raw.get("tool_calls")),
              metadata=meta if isinstance(meta, Mapping) else {})


# ------------------------------------------------------------------------------------------ shared text helpers

_SPACE_RE: Final = re.compile(r"\s+")
_FENCE_RE: Final = re.compile(r"```[^\n]*\n?(.*?)(?:```|\Z)", re.DOTALL)
_INLINE_CODE_RE: Final = re.compile(r"`([^`\n]{2,120})`")
_CHAT_RE: Final = re.compile(
    r"^(?:\W|_|ok|okay|k|sure|yes|yeah|yep|no problem|thanks|thank you|thx|cheers|great|cool|nice|awesome|perfect"
    r"|hi|hello|hey|bye|lol|haha|wow|got it|sounds good|好的|好|嗯|谢谢|多谢|哈哈|收到|明白|没问题|你好|再见|可以|行)+$",
    re.IGNORECASE,
)
_HYPOTHETICAL_RE: Final = re.compile(
    r"(?<![^\W_])(?:if|would|might|maybe|perhaps|imagine|suppose|supposing|hypothetically|unless|whether|wish"
    r"|wonder|pretend)\b|\b(?:i|we|you)['’]d\b|如果|假如|要是|假设|万一|想象|也许|或许|可能|的话",
    re.IGNORECASE,
)
_DANGLING: Final = frozenset(
    "a an the on of in at to for with from by and or but my our your this that last next is are was were be as "
    "so very really just".split())
_PRONOUN_OBJ: Final = frozenset(
    "it it's its you him her them us me what how when where why everything anything something nothing all "
    "everyone someone talking chatting seeing hearing reading_this".split())


def _clean(text: str, limit: int = 100) -> str:
    text = _SPACE_RE.sub(" ", text).strip(" \t,;:，；：、-–—\"“”")
    if len(text) > limit:
        cut = text[:limit]
        space = cut.rfind(" ")
        text = (cut[:space] if space > limit // 2 else cut).rstrip(" ,;:") + "…"
    return text


def _trim_words(text: str, max_words: int = 8) -> str:
    words = text.split()
    if len(words) > max_words:
        words = words[:max_words]
    while words and words[-1].lower().strip(",.;:") in _DANGLING:
        words.pop()
    return " ".join(words).strip(" ,;:.!")


def _sentences(text: str) -> list[str]:
    """The sentences of ``text`` with their end punctuation: every ``.`` and ``;`` ends one here."""
    return [s.text for s in sentences(text, hard=".!?…。！？；;", soft="", merge=True) if s.body]


def _chitchat(t: _T) -> bool:
    if t.calls or t.role == "tool":
        return False
    s = t.content.strip()
    return not s or len(s) <= 40 and bool(_CHAT_RE.match(s))


def _same_session(a: _T, b: _T) -> bool:
    return a.session == b.session


def _record(kind: str, source: _T, text: str, index_text: str, context: Sequence[_T], tags: list[str],
            entities: list[str]) -> dict[str, Any]:
    turn_ids = [source.id]
    for c in context:
        if c.id not in turn_ids:
            turn_ids.append(c.id)
    prefix = {"failure_pattern": "fail", "procedure": "proc"}.get(kind, kind[:4])
    return {
        "id": new_id(prefix),
        "kind": kind,
        "text": text[:TEXT_MAX_CHARS],
        "index_text": _SPACE_RE.sub(" ", index_text).strip(),
        "ref_ts": source.ts,
        "turn_ids": turn_ids,
        "source_role": source.role,
        "speaker": source.speaker,
        "session_id": source.session,
        "anchor_turn_id": source.id,
        "tags": list(dict.fromkeys(t for t in tags if t)),
        "entities": list(dict.fromkeys(e for e in entities if e)),
    }


# ------------------------------------------------------------------------------------------ preferences

_ADV: Final = r"(?:(?:really|absolutely|just|also|totally|truly|genuinely|still|so|do|definitely|generally|usually|kind\s+of|actually)\s+)*"
_PREF_EN_RE: Final = re.compile(
    rf"\bI\s+{_ADV}(?P<verb>love|adore|like|enjoy|prefer|hate|dislike|detest|loathe|can['’]?t\s+stand"
    rf"|cannot\s+stand|don['’]?t\s+(?:really\s+)?(?:like|enjoy)|do\s+not\s+(?:like|enjoy)|never\s+(?:liked|enjoyed))"
    r"\s+(?P<obj>[^,.;!?…]+)"
    r"|\bI(?:['’]m|\s+am)\s+(?:(?:so|very|really|severely|a\s+bit|also)\s+)*(?P<allergic>allergic)\s+to\s+(?P<aobj>[^,.;!?…]+)"
    r"|\bI(?:['’]m|\s+am)\s+(?:a\s+|an\s+)?(?:(?:big|huge|great|massive|die-hard)\s+)?(?P<fan>fan)\s+of\s+(?P<fobj>[^,.;!?…]+)"
    r"|\b[Mm]y\s+(?:absolute\s+|all-time\s+)?(?P<fav>favou?rite)\s+(?P<what>[\w' -]{2,30}?)\s+(?:is|are)\s+(?P<val>[^,.;!?…]+)",
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
            obj = _trim_words(_CUT_EN_RE.sub("", m.group("aobj")))
            return f"{who} is allergic to {obj}" if obj else None
        if m.group("fan"):
            obj = _trim_words(_CUT_EN_RE.sub("", m.group("fobj")))
            return f"{who} is a fan of {obj}" if obj and obj.split()[0].lower() not in _PRONOUN_OBJ else None
        if m.group("fav"):
            what, val = _trim_words(m.group("what"), 4), _trim_words(_CUT_EN_RE.sub("", m.group("val")))
            if not what or not val or val.split()[0].lower() in _PRONOUN_OBJ:
                return None
            return f"{who}'s favourite {what} is {val}"
        verb = _SPACE_RE.sub(" ", m.group("verb").lower().replace("’", "'"))
        obj = _trim_words(_CUT_EN_RE.sub("", m.group("obj")))
        if not obj:
            return None
        words = obj.split()
        first = words[0].lower().strip("'’")
        if first in _PRONOUN_OBJ or first in ("that", "this", "these", "those") and (
                len(words) == 1 or words[1].lower() in ("you", "i", "we", "he", "she", "they", "it", "is", "was")):
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
_ZH_ROLE_REJECT: Final = tuple("说不在因觉想来要真很挺太第这那怎为对从把被也还就刚才否会能") + ("一个人",)
_ZH_HAVE_REJECT: Final = ("问题", "想法", "事", "点", "些")


def _fact(sentence: str, who: str, who_zh: str) -> str | None:
    m = _FACT_EN_RE.search(sentence)
    if m:
        g = m.groupdict()
        if g["live"]:
            obj = _trim_words(_CUT_EN_RE.sub("", g["lobj"]), 6)
            return f"{who} lives in {obj}" if obj else None
        if g["wprep"]:
            obj = _trim_words(_CUT_EN_RE.sub("", g["wobj"]), 6)
            return f"{who} works {g['wprep']} {obj}" if obj and obj.split()[0].lower() not in _PRONOUN_OBJ else None
        if g["age"]:
            return f"{who} is {g['age']} years old"
        if g["from"]:
            obj = _trim_words(_CUT_EN_RE.sub("", g["from"]), 5)
            return f"{who} is from {obj}" if obj and obj.split()[0].lower() not in _PRONOUN_OBJ else None
        if g["born"]:
            obj = _trim_words(_CUT_EN_RE.sub("", g["bobj"]), 6)
            return f"{who} {_SPACE_RE.sub(' ', g['born'])} in {obj}" if obj else None
        if g["art"]:
            obj = _trim_words(_CUT_EN_RE.sub("", g["role"]), 5)
            if not obj or obj.split()[0].lower() in _ROLE_REJECT:
                return None
            return f"{who} is {g['art']} {obj}"
        if g["state"]:
            return f"{who} is {_SPACE_RE.sub(' ', g['state'])}"
        if g["what"]:
            what = g["what"]
            head = what.split()[-1].lower().replace("’", "'").removesuffix("'s")
            if head in _MY_REJECT or what.split()[0].lower() in _MY_REJECT or what.lower().startswith("favo"):
                return None
            val = _trim_words(_CUT_EN_RE.sub("", g["val"]), 6)
            if not val or val.split()[0].lower() in _PRONOUN_OBJ or val.split()[0].lower() in (
                    "not", "so", "very", "too", "really", "pretty", "going", "getting", "like"):
                return None
            return f"{who}'s {what} is {val}"
        if g["have"]:
            obj = _trim_words(_CUT_EN_RE.sub("", g["hobj"]), 5)
            if not obj or obj.split()[0].lower() in _HAVE_REJECT:
                return None
            return f"{who} {_FACT_VERB[g['have']]} {g['num']} {obj}"
        if g["verb"]:
            obj = _trim_words(_CUT_EN_RE.sub("", g["vobj"]), 5)
            if not obj or obj.split()[0].lower() in _PRONOUN_OBJ or obj.split()[0].lower() in ("with", "a", "to"):
                return None
            return f"{who} {_FACT_VERB[g['verb']]} {obj}"
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
_ZH_EVENT_RE: Final = re.compile(r"我(?:们)?[^，。！？；,.!?;]{0,8}?(?:了|过|要|会|将|打算|准备|计划|去|参加|买|见|搬|开始|结束)")
_FUTURE_RE: Final = re.compile(r"\b(?:will|going\s+to|gonna|plan|planning|about\s+to)\b|['’]ll\b|要|会|将|打算|准备|计划")


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
        gist = _clean(_SPACE_RE.sub("", gist).strip("，,。.！!；;、"), 60)
        name = who_zh
    else:
        sm = _EN_SUBJECT_RE.search(rest)
        if sm is None:
            return None
        gist = rest[sm.start():]
        gist = _EN_GIST_LEAD_RE.sub("", gist) if gist.startswith("I") else gist
        gist = _trim_words(_SPACE_RE.sub(" ", gist).strip(" ,.!;:"), 12)
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


def _entities(text: str, speaker: str | None = None) -> list[str]:
    """Entities of a short text without jieba: the Chinese proper nouns of a turn come with its turn record
    (the derived record is anchored to it), so Han runs are left out here and the jieba model never loads
    for a derived record."""
    if not text.isascii():
        text = _HAN_RUN_RE.sub(" , ", text)
    return extract_entities(text, speaker=speaker)[:8]


def _personal(t: _T) -> list[dict[str, Any]]:
    content = t.content
    if not content or len(content) > 4000:
        return []
    lower = content.lower()
    if "I" not in content and "my" not in lower and "we" not in lower and "我" not in content:
        return []
    who = t.speaker or "the user"
    who_zh = t.speaker or "用户"
    out: list[dict[str, Any]] = []
    seen: set[tuple[str, str]] = set()
    if "```" in content:
        content = _FENCE_RE.sub(" ", content)
    for raw in _sentences(content):
        sentence = raw.strip()
        low = sentence.lower()
        if len(sentence) < 4 or ("I" not in sentence and "my" not in low and "we" not in low and "我" not in sentence):
            continue
        if is_question(sentence, loose=True) or _HYPOTHETICAL_RE.search(sentence):
            continue
        body = sentence.rstrip(".!?…。！？；; ")
        found: list[tuple[str, str, list[str]]] = []
        for clause in _clauses(body):
            pref = _preference(clause, who, who_zh)
            if pref:
                found.append(("preference", pref, ["preference"]))
            ev = _event(clause, t.ts, who, who_zh) if t.ts is not None else None
            if ev:
                found.append(("event", ev[0], ["event", "plan" if ev[2] else "past", ev[1]]))
            if not pref and (not ev or _BORN_RE.search(clause)):
                fact = _fact(clause, who, who_zh)
                if fact:
                    found.append(("fact", fact, ["fact"]))
        for kind, text, tags in found:
            if (kind, text) in seen:
                continue
            seen.add((kind, text))
            index = f"{text} | {t.speaker + ': ' if t.speaker else ''}{sentence} [{kind}]"
            out.append(_record(kind, t, text, index, (), tags, _entities(sentence, t.speaker)))
    return out


def _personal_source(t: _T) -> bool:
    if t.role == "user":
        return True
    return (t.role == "assistant" and not t.calls and t.speaker is not None
            and t.speaker.lower() not in _ASSISTANT_NAMES)


# ------------------------------------------------------------------------------------------ errors

_ERR_CLASS_RE: Final = re.compile(r"\b([A-Z][A-Za-z0-9]*(?:Error|Exception|Timeout|Fault))\b")
_TIMEOUT_RE: Final = re.compile(r"\btim(?:e[sd]?\s*-?\s*out|eout|ing\s+out)\b|\bdeadline\s+exceeded\b|超时", re.IGNORECASE)
_HTTP_RE: Final = re.compile(
    r"\b(?:http(?:/\d(?:\.\d)?)?|status(?:[\s_]?code)?|code|error|response)[\s:=\"'#]*(?P<a>[45]\d\d)\b"
    r"|\b(?P<b>[45]\d\d)\s+(?:error|bad\s+request|unauthori[sz]ed|forbidden|not\s+found|too\s+many|internal"
    r"|service\s+unavailable|bad\s+gateway|gateway\s+timeout|conflict|unprocessable)",
    re.IGNORECASE,
)
_HTTP_NAMES: Final = {"400": "bad request", "401": "unauthorized", "403": "forbidden", "404": "not found",
                      "408": "timeout", "409": "conflict", "422": "invalid input", "429": "rate limit",
                      "500": "server error", "502": "bad gateway", "503": "service unavailable",
                      "504": "timeout"}
_ERR_WORDS_RE: Final = re.compile(
    r"(?P<trace>traceback \(most recent call last\))|(?P<failed>\bfail(?:ed|ure|s)?\b)|(?P<err>\berror\b)"
    r"|(?P<exc>\bexception\b)|(?P<exit>\bexit (?:code|status) [1-9]\d*)|(?P<conn>\bconnection (?:refused|reset|error))"
    r"|(?P<rate>\brate[\s-]?limit)|(?P<perm>\bpermission denied|\baccess denied|\bunauthori[sz]ed|\bforbidden)"
    r"|(?P<nf>\bnot found\b|\bno such file\b|command not found)|(?P<crash>\bcrash(?:ed|es)?\b)"
    r"|(?P<zh>失败|报错|出错|错误|异常|崩溃)",
    re.IGNORECASE,
)
_ERR_GROUP_NAMES: Final = {"trace": "exception", "failed": "failed", "err": "error", "exc": "exception",
                           "exit": "nonzero exit", "conn": "connection error", "rate": "rate limit",
                           "perm": "permission denied", "nf": "not found", "crash": "crash"}
_STRONG_PROSE_RE: Final = re.compile(
    r"traceback \(most recent call last\)|\b[A-Z][A-Za-z0-9]*(?:Error|Exception)\b|\berror\s*:|\bexit (?:code|status) [1-9]"
    r"|\b(?:failed|fails|crashed|timed out|errored)\b|报错|失败|超时|出错|异常|崩溃",
)
_JSON_ERR_KEYS: Final = ("error", "errors", "exception", "error_message", "errorMessage", "fault")
_NO_ERROR_RE: Final = re.compile(r"\b(?:no|0|zero|without)\s+(?:errors?|failures?|exceptions?)\b|没有(?:报错|错误|失败)")


@dataclass(slots=True)
class _Err:
    classes: list[str]
    gist: str


def _classes_of(text: str) -> list[str]:
    classes: list[str] = []
    if _TIMEOUT_RE.search(text):
        classes.append("timeout")
    for m in _HTTP_RE.finditer(text):
        code = m.group("a") or m.group("b")
        classes.append(f"http {code}")
        if code in _HTTP_NAMES:
            classes.append(_HTTP_NAMES[code])
        break
    for m in _ERR_CLASS_RE.finditer(text):
        classes.append(m.group(1))
        if len(classes) >= 4:
            break
    for m in _ERR_WORDS_RE.finditer(text):
        name = m.lastgroup or ""
        classes.append(m.group() if name == "zh" else _ERR_GROUP_NAMES.get(name, "error"))
        if len(classes) >= 6:
            break
    specific = [c for c in classes if c not in ("error", "failed", "exception")]
    generic = [c for c in classes if c in ("error", "failed", "exception")]
    return list(dict.fromkeys(specific + generic))[:5]


def _error_line(text: str) -> str:
    if "Traceback" in text:
        lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
        for ln in reversed(lines):
            if _ERR_CLASS_RE.search(ln) or ":" in ln:
                return _clean(ln, 120)
    for ln in text.splitlines():
        if _STRONG_PROSE_RE.search(ln) or _TIMEOUT_RE.search(ln) or _HTTP_RE.search(ln) or _ERR_WORDS_RE.search(ln):
            cm = _ERR_CLASS_RE.search(ln)
            if cm:
                return _clean(ln[cm.start():], 120)
            for s in _sentences(ln):
                if _STRONG_PROSE_RE.search(s) or _TIMEOUT_RE.search(s) or _HTTP_RE.search(s) or _ERR_WORDS_RE.search(s):
                    return _clean(s, 120)
            return _clean(ln, 120)
    return _clean(text, 120)


def _json_error(content: str) -> tuple[bool, str | None]:
    """(is JSON, error message or None)."""
    s = content.strip()
    if not s or s[0] not in "{[" or len(s) > 50000:
        return False, None
    try:
        data = json.loads(s)
    except ValueError:
        return False, None
    if not isinstance(data, Mapping):
        return True, None
    for key in _JSON_ERR_KEYS:
        v = data.get(key)
        if v and v not in ("null", "none", "None"):
            if isinstance(v, Mapping):
                v = v.get("message") or v.get("type") or v.get("code") or json.dumps(v, default=str)
            elif isinstance(v, list):
                v = v[0] if v else ""
                if isinstance(v, Mapping):
                    v = v.get("message") or json.dumps(v, default=str)
            return True, _clean(str(v), 120) or key
    status = data.get("status") or data.get("state")
    if isinstance(status, str) and status.lower() in ("error", "failed", "failure", "timeout", "timed_out"):
        msg = data.get("message") or data.get("detail") or status
        return True, _clean(f"{status}: {msg}" if msg != status else status, 120)
    code = data.get("status_code") or data.get("statusCode") or data.get("code") or (
        status if isinstance(status, int) else None)
    if isinstance(code, int) and 400 <= code < 600:
        msg = data.get("message") or data.get("detail") or ""
        return True, _clean(f"HTTP {code} {msg}", 120)
    if data.get("ok") is False or data.get("success") is False:
        msg = data.get("message") or data.get("detail") or data.get("reason") or "failed"
        return True, _clean(f"failed: {msg}", 120)
    return True, None


def _result_error(content: str) -> _Err | None:
    """The error of a tool result, or None when it succeeded."""
    is_json, msg = _json_error(content)
    if is_json:
        if msg is None:
            return None
        classes = _classes_of(msg) or ["error"]
        return _Err(classes, msg)
    if not content.strip() or _NO_ERROR_RE.search(content) and not _STRONG_PROSE_RE.search(_NO_ERROR_RE.sub("", content)):
        return None
    head = content[:2000]
    if not (_STRONG_PROSE_RE.search(head) or _TIMEOUT_RE.search(head) or _HTTP_RE.search(head)
            or re.match(r"\s*(?:error|exception|fatal)\b", head, re.IGNORECASE)):
        return None
    return _Err(_classes_of(head) or ["error"], _error_line(head))


_TECH_RE: Final = re.compile(r"`|\$ |\b(?:pip|npm|git|docker|python|node|api|http|sql|server|build|deploy|install"
                             r"|compile|script|command|request|endpoint|query|database|tool|function|package)\b",
                             re.IGNORECASE)


def _prose_error(t: _T, known_tools: Sequence[str]) -> _Err | None:
    """An error a user or assistant reports in prose, in a technical context only."""
    content = t.content
    if not content or len(content) > 20000:
        return None
    head = content[:4000]
    if not _STRONG_PROSE_RE.search(head) or _NO_ERROR_RE.search(head) and not _ERR_CLASS_RE.search(head):
        return None
    technical = ("Traceback" in head or _ERR_CLASS_RE.search(head) or _HTTP_RE.search(head)
                 or any(n in head for n in known_tools) or _TECH_RE.search(head))
    if not technical:
        return None
    return _Err(_classes_of(head) or ["error"], _error_line(head))


# ------------------------------------------------------------------------------------------ tool chains


def _args_gist(args: Mapping[str, Any] | None, limit: int = 60) -> str:
    if not args:
        return ""
    parts = []
    for k, v in list(args.items())[:6]:
        if isinstance(v, (dict, list)):
            v = json.dumps(v, ensure_ascii=False, default=str)
        parts.append(f"{k}={v}")
    return _clean(", ".join(parts), limit)


def _args_diff(old: Mapping[str, Any] | None, new: Mapping[str, Any] | None) -> str:
    if not new:
        return ""
    old = old or {}
    changed = {k: v for k, v in new.items() if k not in old or old[k] != v}
    return _args_gist(changed, 80)


def _answering_result(turns: Sequence[_T | None], k: int, call: _Call) -> _T | None:
    """The tool-result turn answering ``call`` (made at turn ``k``), if it is in the sequence."""
    src = turns[k]
    for j in range(k + 1, min(len(turns), k + 6)):
        r = turns[j]
        if r is None or src is None or not _same_session(r, src):
            continue
        if r.role != "tool":
            if r.calls or r.role == "user":
                break
            continue
        rid = r.metadata.get("tool_call_id") or r.metadata.get("call_id")
        rname = r.metadata.get("tool_name") or r.metadata.get("name") or r.metadata.get("tool") or r.speaker
        if call.call_id and rid:
            if str(rid) == call.call_id:
                return r
            continue
        if rname and rname != "tool" and rname != call.name and len(src.calls) > 1:
            continue
        return r
    return None


def _call_outcome(turns: Sequence[_T | None], k: int, call: _Call) -> tuple[str, _Err | None, _T | None]:
    """("ok" | "error" | "unknown", error, result turn) of a call made at turn ``k``."""
    if call.error:
        return "error", _Err(_classes_of(call.error) or ["error"], _clean(call.error, 120)), None
    if call.result is not None:
        text = call.result if isinstance(call.result, str) else json.dumps(call.result, default=str)
        err = _result_error(text)
        return ("error" if err else "ok"), err, None
    r = _answering_result(turns, k, call)
    if r is None:
        return "unknown", None, None
    err = _result_error(r.content)
    return ("error" if err else "ok"), err, r


def _tool_of_result(turns: Sequence[_T | None], i: int) -> tuple[str | None, _Call | None, _T | None]:
    """(tool name, the call, the calling turn) a tool-result turn answers."""
    r = turns[i]
    assert r is not None
    rid = r.metadata.get("tool_call_id") or r.metadata.get("call_id")
    rname = r.metadata.get("tool_name") or r.metadata.get("name") or r.metadata.get("tool")
    if not isinstance(rname, str) or not rname:
        rname = r.speaker if r.speaker and r.speaker.lower() not in _ASSISTANT_NAMES else None
    for k in range(i - 1, max(-1, i - LOOKBACK), -1):
        c = turns[k]
        if c is None or not _same_session(c, r):
            continue
        if c.calls:
            for call in c.calls:
                if rid and call.call_id == str(rid):
                    return call.name, call, c
            named = [call for call in c.calls if rname and call.name == rname]
            if named:
                return rname, named[0], c
            if not rid and not rname:
                return c.calls[-1].name, c.calls[-1], c
        if c.role == "user":
            break
    return rname, None, None


def _known_tools(turns: Sequence[_T | None]) -> list[str]:
    names: dict[str, None] = {}
    for t in turns:
        if t is not None:
            for c in t.calls:
                names[c.name] = None
    return list(names)


# ------------------------------------------------------------------------------------------ failure patterns

_FIX_CUE_RE: Final = re.compile(
    r"\b(?:fix(?:ed|es)?|solv(?:e|ed|es)|resolv(?:e|ed|es)|solution|workaround|instead|works\s+now|worked"
    r"|retry|retried|increas(?:e|ed|ing)|rais(?:e|ed|ing)\s+the|set\s+\w+|install(?:ed|ing)?|upgrad(?:e|ed|ing)"
    r"|downgrad(?:e|ed|ing)|switch(?:ed)?\s+to|use\s+\w+|add(?:ed)?\s+\w+|chang(?:e|ed)|run\s+`)"
    r"|解决|修复|改成|换成|改为|设置|安装|升级|重试|加上|就好了|可以了|正常了|改用",
    re.IGNORECASE,
)


def _command_gist(content: str) -> str:
    for m in _FENCE_RE.finditer(content):
        lines = [ln.strip().lstrip("$> ").strip() for ln in m.group(1).splitlines() if ln.strip()]
        lines = [ln for ln in lines if not ln.startswith("#")]
        if lines:
            return "`" + _clean("; ".join(lines[:2]), 90) + "`"
    for m in _INLINE_CODE_RE.finditer(content):
        code = m.group(1).strip()
        if " " in code or "=" in code or "-" in code:
            return f"`{_clean(code, 90)}`"
    return ""


def _fix_text(t: _T) -> str:
    content = t.content
    if not content or len(content) > 20000:
        return ""
    prose = _FENCE_RE.sub(" ", content) if "```" in content else content
    for raw in _sentences(prose):
        s = raw.strip()
        if _FIX_CUE_RE.search(s) and not is_question(s, loose=True) and not _STRONG_PROSE_RE.search(s):
            cmd = _command_gist(content)
            gist = _clean(s.rstrip("。.!！"), 100)
            return f"{gist} ({cmd})" if cmd and cmd.strip("`") not in gist else gist
    cmd = _command_gist(content)
    return f"run {cmd}" if cmd else ""


def _find_fix(turns: Sequence[_T | None], i: int, tool: str | None, failed: _Call | None
              ) -> tuple[str, list[_T], int | None]:
    """(fix gist, the turns that show it, index of the turn that gives it) for an error at turn ``i``."""
    src = turns[i]
    assert src is not None
    for k in range(i + 1, min(len(turns), i + LOOKAHEAD + 1)):
        t = turns[k]
        if t is None:
            continue
        if not _same_session(t, src):
            break
        if t.calls:
            for call in t.calls:
                status, _, result = _call_outcome(turns, k, call)
                if status == "ok":
                    if tool and call.name == tool:
                        diff = _args_diff(failed.args if failed else None, call.args)
                        gist = f"retried {call.name} with {diff}" if diff else f"retried {call.name}"
                    else:
                        gist = f"used {call.name}" + (f"({_args_gist(call.args)})" if call.args else "") + " instead"
                    return gist, [t] + ([result] if result else []), k
            continue
        if t.role == "tool":
            if _result_error(t.content) is not None:
                continue  # the same failure again (or a new one): keep looking for the fix
            continue
        if t.role == "user" and _prose_error(t, [tool] if tool else []) is not None:
            continue
        gist = _fix_text(t)
        if gist:
            return gist, [t], k
    return "", [], None


@dataclass(slots=True)
class _Failure:
    index: int
    tool: str | None
    call: _Call | None
    call_turn: _T | None
    err: _Err


def _failures(turns: Sequence[_T | None], start: int, known: Sequence[str]) -> list[_Failure]:
    out: list[_Failure] = []
    for i in range(max(0, start), len(turns)):
        t = turns[i]
        if t is None:
            continue
        if t.role == "tool":
            err = _result_error(t.content)
            if err is None:
                continue
            tool, call, call_turn = _tool_of_result(turns, i)
            out.append(_Failure(i, tool, call, call_turn, err))
            continue
        embedded = [c for c in t.calls if c.error]
        if embedded:
            c = embedded[0]
            out.append(_Failure(i, c.name, c, t, _Err(_classes_of(c.error or "") or ["error"],
                                                       _clean(c.error or "", 120))))
            continue
        if t.calls or t.role not in ("user", "assistant"):
            continue
        err = _prose_error(t, known)
        if err is None:
            continue
        tool = next((n for n in known if n in t.content), None)
        call = call_turn = None
        # commentary on a failure already recorded (a tool result just before): not a second failure
        if any(f.index >= i - 3 and (tool is None or f.tool == tool) for f in out):
            continue
        if tool is None:
            for k in range(i - 1, max(-1, i - 4), -1):
                c = turns[k]
                if c is not None and c.calls and _same_session(c, t):
                    tool, call, call_turn = c.calls[-1].name, c.calls[-1], c
                    break
        if tool is None:
            cmd = _command_gist(t.content)
            tool = cmd or None
        out.append(_Failure(i, tool, call, call_turn, err))
    return out


def _failure_records(turns: Sequence[_T | None], first: int) -> list[dict[str, Any]]:
    known = _known_tools(turns)
    out = []
    for f in _failures(turns, first - LOOKAHEAD, known):
        src = turns[f.index]
        assert src is not None
        fix, fix_turns, fix_at = _find_fix(turns, f.index, f.tool, f.call)
        if f.index >= first:
            source, context = src, [src]
        elif fix_at is not None and fix_at >= first:  # the fix arrived in this batch, the error before it
            source, context = turns[fix_at], [src]
            assert source is not None
        else:
            continue
        tool = f.tool or "action"
        classes = f.err.classes
        specific = [c for c in classes if c not in ("error", "failed", "exception")]
        err = ", ".join((specific or classes)[:2])
        gist = f.err.gist
        if f.tool and gist.startswith(f.tool):  # "flight_search failed: timeout ..." -> "timeout ..."
            gist = _clean(re.sub(r"^[\s:,-]*(?:failed|error|raised)?[\s:,-]*", "", gist[len(f.tool):]), 120) or gist
        text = f"{tool} failed with {err}" + (f" ({gist})" if gist and gist.lower() != err.lower() else "")
        text = _clean(text, 170)
        if fix:
            text += f"; fix: {_clean(fix, 110)}"
        ctx = context + ([f.call_turn] if f.call_turn is not None else []) + fix_turns
        tools = [tool] + [c.name for t in fix_turns for c in t.calls if c.name != tool]
        args = f" args: {_args_gist(f.call.args)}" if f.call and f.call.args else ""
        index = (f"{text} | tool {' '.join(tools)} failure error failed {' '.join(classes)}{args}"
                 f" | {_clean(src.content, 200)}")
        tags = ["failure", *(n.strip("`") for n in tools), *classes]
        out.append(_record("failure_pattern", source, text, index, ctx, tags, tools + [
            c for c in classes if _ERR_CLASS_RE.fullmatch(c)]))
    return out


# ------------------------------------------------------------------------------------------ procedures

_NUMBERED_RE: Final = re.compile(
    r"^\s*(?:\*\*)?(?:(?:step\s*)?\d{1,2}[.)、:：]|[①②③④⑤⑥⑦⑧⑨⑩]|第[一二三四五六七八九十\d]+步[:：,，、]?)(?:\*\*)?\s*(?P<s>\S.*)$",
    re.IGNORECASE | re.MULTILINE)
_BULLET_RE: Final = re.compile(r"^\s*[-*•]\s+(?P<s>\S.*)$", re.MULTILINE)
_SEQ_SPLIT_RE: Final = re.compile(
    r"(?:^|[\s,;.])(?:first(?:ly)?|then|next|after\s+that|afterwards|finally|lastly)\b[,:]?\s*"
    r"|首先|然后|接着|之后|最后|其次", re.IGNORECASE)
_SEQ_FIRST_RE: Final = re.compile(r"\bfirst(?:ly)?\b|首先|第一步", re.IGNORECASE)
_SEQ_THEN_RE: Final = re.compile(r"\bthen\b|\bnext\b|\bafter\s+that\b|\bfinally\b|然后|接着|之后|最后|其次",
                                 re.IGNORECASE)
_HOWTO_RE: Final = re.compile(
    r"\bhow\s+(?:do|can|should|would|to)\b|\bsteps?\b|\bset\s*up\b|\binstall|\bconfigur|\bfix|\bsolve|\bguide"
    r"|\bsetup\b|怎么|如何|怎样|步骤|教程|安装|配置|设置|解决", re.IGNORECASE)
_REQ_LEAD_RE: Final = re.compile(
    r"^(?:(?:hi|hey|hello|ok(?:ay)?|so|well|please|thanks|alright|btw|also)\b[\s,!.:;-]*)*"
    r"(?:(?:can|could|would|will)\s+you\s+(?:please\s+)?(?:help\s+me\s+|tell\s+me\s+|show\s+me\s+|explain\s+)?"
    r"|(?:please\s+)?(?:help\s+me\s+|tell\s+me\s+|show\s+me\s+)|i\s+(?:want|need|would\s+like|['’]d\s+like)\s+(?:you\s+)?to\s+"
    r"|i(?:['’]m|\s+am)\s+trying\s+to\s+)?"
    r"(?:how\s+(?:do|can|should|would)\s+(?:i|we|you|one)\s+|how\s+to\s+)?",
    re.IGNORECASE)
_REQ_LEAD_ZH_RE: Final = re.compile(
    r"^(?:(?:好的|好|嗯|那|那么|另外|对了|请问|请|麻烦你?|能不能|可以|你能|你可以|能否)[，,、\s]*)*"
    r"(?:帮我|帮忙|给我|告诉我|教我|我想|我要|我想知道)?(?:怎么|如何|怎样)?")


def _request_gist(t: _T) -> str:
    content = _FENCE_RE.sub(" ", t.content) if "```" in t.content else t.content
    for raw in _sentences(content):
        s = raw.strip()
        if not s or _CHAT_RE.match(s.rstrip(".!?！。？")):
            continue
        if s.isascii():
            g = _REQ_LEAD_RE.sub("", s, count=1)
        else:
            g = _REQ_LEAD_ZH_RE.sub("", s, count=1)
        g = g.strip().rstrip("?？.。!！").strip()
        g = re.sub(r"\s*(?:吗|呢|啊|呀)$", "", g)
        if len(g) >= 2:
            return _clean(g, 80)
    return ""


_STEP_END_RE: Final = re.compile(r"(.+?)(?:[.!?…](?=\s|$)|[。！？；\n]|$)", re.DOTALL)


def _steps(content: str, howto: bool) -> tuple[list[str], str]:
    """(steps, how they were found)."""
    if howto:  # a list answering "tell me about Kyoto" is a list of sights, not steps
        numbered = [m.group("s") for m in _NUMBERED_RE.finditer(content)]
        if len(numbered) >= 2:
            return numbered, "steps"
        bullets = [m.group("s") for m in _BULLET_RE.finditer(content)]
        if len(bullets) >= 2:
            return bullets, "steps"
    prose = _FENCE_RE.sub(" ", content) if "```" in content else content
    fm = _SEQ_FIRST_RE.search(prose)
    if fm and _SEQ_THEN_RE.search(prose, fm.end()):
        parts = [p for p in _SEQ_SPLIT_RE.split(prose[fm.start():]) if p and p.strip(" ,.;:，。；：")]
        parts = [_STEP_END_RE.match(p.strip()).group(1) for p in parts if p.strip()]
        if len(parts) >= 2:
            return parts, "sequence"
    cmd = _command_gist(content)
    if cmd:
        return [f"run {cmd}"], "command"
    return [], ""


def _procedure(turns: Sequence[_T | None], i: int) -> dict[str, Any] | None:
    t = turns[i]
    assert t is not None
    if t.role not in ("assistant", "tool") or t.calls or not t.content.strip():
        return None
    request: _T | None = None
    chain: list[tuple[int, _T]] = []
    for k in range(i - 1, max(-1, i - LOOKBACK - 1), -1):
        c = turns[k]
        if c is None or not _same_session(c, t):
            break
        if c.role == "user" and not _chitchat(c):
            request = c
            break
        if c.calls:
            chain.append((k, c))
    if request is None:
        return None
    report = _prose_error(request, _known_tools(turns[max(0, i - LOOKBACK):i]))
    if report is not None:
        specific = [c for c in report.classes if c not in ("error", "failed", "exception")]
        req = "fix " + (specific[0] if specific else _clean(report.gist, 60))
        howto = True
    else:
        req = _request_gist(request)
        howto = bool(_HOWTO_RE.search(request.content))
    if not req:
        return None
    content = t.content if len(t.content) <= 20000 else t.content[:20000]
    if t.role == "tool" and _json_error(content)[0]:
        return None
    steps, how = _steps(content, howto)
    if t.role == "tool" and how != "steps":
        return None
    tools: list[str] = []
    context: list[_T] = [request]
    calls_ok: list[str] = []
    for k, c in reversed(chain):
        for call in c.calls:
            status, _, result = _call_outcome(turns, k, call)
            context.append(c)
            if result is not None:
                context.append(result)
            if status == "ok":
                calls_ok.append(f"{call.name}({_args_gist(call.args, 50)})")
                tools.append(call.name)
    last_ok = False
    if chain:
        k, c = chain[0]
        last_ok = _call_outcome(turns, k, c.calls[-1])[0] == "ok"
    if not steps:
        if not (calls_ok and last_ok):
            return None
        steps, how = [f"call {' → '.join(calls_ok[:4])}"], "tools"
    if how == "command" and not (howto or calls_ok or _FIX_CUE_RE.search(content)):
        return None
    gist = "; ".join(_clean(s, 60).rstrip(".。") for s in steps[:6])
    text = f"how to {req}: {_clean(gist, 220)}" if req.isascii() else f"如何{req}：{_clean(gist, 220)}"
    cmd_heads = re.findall(r"`([a-z][\w.-]*)", gist)
    tools = list(dict.fromkeys(tools))
    index = f"{text} | procedure how to steps {req} {' '.join(tools)} {' '.join(calls_ok)}"
    return _record("procedure", t, text, index, context, ["procedure", *tools, *cmd_heads, how],
                   tools + _entities(req)[:6])


# ------------------------------------------------------------------------------------------ entry point


def derive_kinds(sequence: Sequence[dict[str, Any]], first: int) -> list[dict[str, Any]]:
    """Typed records (fact, preference, event, procedure, failure_pattern) of the turns ``sequence[first:]``.

    ``sequence`` is the namespace's recent turns, then the new batch: dicts with ``id``, ``role``,
    ``speaker``, ``content``, ``ts`` (epoch seconds), ``session_id``, ``tool_calls``, ``attachments`` and
    ``metadata``. The turns before ``first`` are context only (a request, a tool call, an error that the new
    turns fix). Never raises: malformed turns or tool calls give fewer records.
    """
    try:
        raw = list(sequence)
        first = max(0, int(first))
    except Exception:  # noqa: BLE001 -- odd input gives nothing
        return []
    turns = [_norm(r, n) for n, r in enumerate(raw)]
    out: list[dict[str, Any]] = []
    for i in range(first, len(turns)):
        t = turns[i]
        if t is None or _chitchat(t):
            continue
        try:
            if _personal_source(t):
                out.extend(_personal(t))
            proc = _procedure(turns, i)
            if proc is not None:
                out.append(proc)
        except Exception:  # noqa: BLE001 -- a bug on one odd turn must not lose the batch
            continue
    try:
        out.extend(_failure_records(turns, first))
    except Exception:  # noqa: BLE001
        pass
    return out
