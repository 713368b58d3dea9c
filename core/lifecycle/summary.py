"""Index-hook summaries of a memory file's turns: a title (L0), an abstract (L1), key facts, entities and tags.

:func:`summarize` is the deterministic heuristic (no model). It splits the turns into sentences (English on
``.!?`` and line breaks, Chinese on ``。！？；`` and line breaks; code blocks and JSON tool results are not
sentences), scores each sentence by how informative it is, and builds the hook from the best ones:

* **score** -- the sentence's distinct content tokens (:func:`~memory_ext.text.tokenize.tokenize`), each
  weighted by ``log(1 + df) * log(1 + N / df)`` where ``df`` is the number of the file's N sentences that hold
  it (Luhn's mid-frequency idea: a word in every sentence says little, a word said once may be noise, the
  topic words recur a few times), summed and divided by the square root of the token count; then multiplied
  by bonuses for entities, numbers, dates and times, decisions, preferences and plans and for sentences of a
  turn that calls a tool, and by penalties for questions without content and greetings. Chit-chat sentences
  ("ok", "thanks!", "好的") score zero.
* **abstract** -- the best sentences, redundant ones (token Jaccard > 0.5 with one already taken) skipped,
  within :data:`ABSTRACT_MAX_CHARS`, put back in conversation order.
* **title** -- the key phrase of the best sentence (openers such as "Hi!", "Can you please", "帮我" cut, then
  cut at a clause boundary to fit), followed by the file's most salient entity when it is not in the phrase
  and there is room: ``"Find flights to Tokyo for March 3; 800 EUR"``. At most :data:`TITLE_MAX_CHARS`
  characters, :data:`TITLE_MAX_CJK_CHARS` for a mostly Chinese title.
* **key facts** -- up to five short sentences carrying decisions, numbers, dates, names or preferences (not
  questions), plus one fact naming the tools called (``"called flight_search(to=Tokyo, max_eur=800)"``).
* **entities** -- :func:`~memory_ext.text.entities.extract_entities` over the turns (code and JSON left out),
  ranked by the number of turns naming them, ties broken by first mention; speakers come last.
* **tags** -- the union of :func:`turn_tags`.

:func:`summarize_with_llm` asks an :class:`~memory_ext.llm.LLM` for the same fields as JSON, repairs and
validates the answer, retries once, and falls back to :func:`summarize` with the reason on any failure.

>>> turns = [PlainTurn("Hi! How are you?"),
...          PlainTurn("Great, thanks!", role="assistant"),
...          PlainTurn("Can you find flights from Berlin to Tokyo on March 3? My budget is 800 EUR."),
...          PlainTurn("Searching.", role="assistant", tool_calls=[{"name": "flight_search",
...                    "arguments": {"to": "Tokyo", "max_eur": 800}}]),
...          PlainTurn("We decided to go with ANA NH204 at 9:05 for 742 EUR.", role="assistant")]
>>> hook = summarize(turns)
>>> hook.title
'Find flights from Berlin to Tokyo on March 3; 800 EUR'
>>> "How are you" in hook.abstract, "742 EUR" in hook.abstract
(False, True)
>>> hook.key_facts[-1]
'called flight_search(to=Tokyo, max_eur=800)'
>>> hook.tags[:3]
('decision', 'tool_call', 'question')
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from memory_ext.lifecycle.turn_signals import (
    DECISION_RE,
    EnZhPattern,
    PlainTurn,
    TurnInfo,
    TurnLike,
    analyze_turn,
    is_chat_only,
    is_chitchat,
    is_high_value,
    looks_like_json,
    turn_tags,
)
from memory_ext.llm import LLM, InvalidAnswer, ask_json
from memory_ext.text.entities import EN_STOP_CAPS, extract_entities
from memory_ext.text.script import CJK_RE
from memory_ext.text.sentences import is_question, sentences
from memory_ext.text.tokenize import cjk_ratio, estimate_tokens, tokenize

__all__ = [
    "ABSTRACT_MAX_CHARS",
    "MAX_ENTITIES",
    "MAX_KEY_FACTS",
    "MAX_TAGS",
    "TITLE_MAX_CHARS",
    "TITLE_MAX_CJK_CHARS",
    "HookSummary",
    "PlainTurn",
    "TurnLike",
    "hook_json_schema",
    "is_chitchat",
    "is_high_value",
    "summarize",
    "summarize_with_llm",
    "turn_tags",
]

TITLE_MAX_CHARS: Final = 60
TITLE_MAX_CJK_CHARS: Final = 30
ABSTRACT_MAX_CHARS: Final = 300
KEY_FACT_MAX_CHARS: Final = 150
MAX_KEY_FACTS: Final = 5
MAX_ENTITIES: Final = 12
MAX_TAGS: Final = 12
ENTITY_MAX_CHARS: Final = 60


@dataclass(frozen=True)
class HookSummary:
    """The summary shown in an index hook.

    ``title`` (L0) has at most 60 characters (30 when mostly Chinese); ``abstract`` (L1) at most 300;
    ``key_facts`` up to 5 short sentences; ``entities`` up to 12, most salient first; ``tags`` content tags
    (:func:`turn_tags`); ``source`` is ``"heuristic"`` or the id of the LLM that wrote it.
    """

    title: str
    abstract: str
    key_facts: tuple[str, ...] = ()
    entities: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    source: str = "heuristic"


# --------------------------------------------------------------------------------------------- patterns

# Numbers, money, clock times, dates (English and Chinese).
_NUMBER_RE: Final = re.compile(r"\d|[二两三四五六七八九十百千万]+[个只条位本件张次天年岁公米元块万千点号月]")
_DATE_RE: Final = EnZhPattern(
    r"(?:jan|feb|mar|apr|may|jun|jul|aug|sep|sept|oct|nov|dec)[a-z]*\.?\s+\d{1,2}\b"
    r"|\d{1,2}(?:st|nd|rd|th)?\s+(?:of\s+)?(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\b"
    r"|(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday|tomorrow|tonight|next\s+(?:week|month|year))\b"
    r"|\d{4}-\d{2}-\d{2}\b|\d{1,2}[:.]\d{2}\b|\d{1,2}\s?(?:am|pm)\b",
    r"[0-9一二三四五六七八九十]+月[0-9一二三四五六七八九十]+[日号]|(?:下|这|上)?(?:周|星期|礼拜)[一二三四五六日天]"
    r"|明天|后天|下周|下个月|明年|[0-9一二三四五六七八九十]+点",
)
_GREETING_RE: Final = EnZhPattern(
    r"how\s+are\s+you\b|hope\s+you(?:['’]re|\s+are)\s+(?:doing\s+)?(?:well|good|great|fine)\b"
    r"|(?:i['’]m|i\s+am)\s+(?:doing\s+)?(?:well|good|great|fine)\b"
    r"|nice\s+to\s+(?:meet|see|hear)\b|how['’]s\s+it\s+going\b|good\s+(?:morning|afternoon|evening)\b",
    r"你好|您好|最近怎么样|好久不见|早上好|晚上好",
)
_FILLER_RE: Final = EnZhPattern(
    r"let\s+me\s+(?:check|search|look|see|find|think)\b|one\s+moment\b|give\s+me\s+a\s+(?:second|moment)\b"
    r"|here\s+(?:is|are)\s+(?:the|some|what)\b|happy\s+to\s+help\b|how\s+can\s+i\s+help\b",
    r"稍等|我查一下|我来查|我看看|我找找|让我想想",
)
_CURRENCY_CODES: Final = frozenset(("EUR", "USD", "GBP", "JPY", "CNY", "RMB", "CHF", "AUD", "CAD", "HKD", "SGD", "KRW",
                                     "INR"))
_CURRENCY_AMOUNT_RE: Final = re.compile(
    r"(?<![\w.])\d[\d,]*(?:\.\d+)?\s?(?:EUR|USD|GBP|JPY|CNY|RMB|CHF|AUD|CAD|HKD|SGD|KRW|INR)\b"
    r"|\b(?:EUR|USD|GBP|JPY|CNY|RMB|CHF|AUD|CAD|HKD|SGD|KRW|INR)\s?\d[\d,]*(?:\.\d+)?(?![\w.])")
_LATIN_NAME_IN_CJK_RE: Final = re.compile(r"(?<![A-Za-z0-9_])[A-Z][A-Za-z0-9+#]*[A-Za-z0-9+#](?![A-Za-z0-9_])")
_CJK_CHAR_RE: Final = CJK_RE
_END_PUNCT: Final = ".!?…。！？；;:"
_END_PUNCT_TUPLE: Final = tuple(_END_PUNCT)
_EN_LEAD_RE: Final = re.compile(
    r"^(?:(?:hi|hello|hey|ok(?:ay)?|so|well|sure|great|thanks|thank you|please|alright|right|yes|yeah|um|uh"
    r"|oh|btw|also|and|but|now|anyway|actually|by the way)\b[\s,!.:;-]*)+",
    re.IGNORECASE,
)
_EN_REQUEST_RE: Final = re.compile(
    r"^(?:(?:can|could|would|will)\s+you\s+(?:please\s+)?(?:help\s+me\s+)?"
    r"|(?:please\s+)?help\s+me\s+(?:to\s+)?|i(?:['’]d|\s+would)\s+like\s+(?:you\s+)?to\s+"
    r"|i\s+(?:want|need)\s+(?:you\s+)?to\s+|i\s+(?:need|want)\s+(?=(?:a|an|some)\s)|i(?:['’]m|\s+am)\s+looking\s+for\s+|let['’]?s\s+|please\s+|i\s+think\s+|we\s+need\s+to\s+)",
    re.IGNORECASE,
)
_ZH_LEAD_RE: Final = re.compile(r"^(?:(?:好的|好|嗯嗯|嗯|哦|那|那么|然后|另外|对了|请问|请|麻烦你|麻烦"
                                r"|能不能|可以|你能|你可以)[，,、\s]*)*"
                                r"(?:帮我|帮忙|给我|我想要|我想|我要|我们)?")
_DANGLING: Final = frozenset(
    ("a", "an", "the", "on", "of", "in", "at", "to", "for", "with", "from", "by", "and", "or", "but", "my", "our",
     "your", "their", "his", "her", "its", "this", "that", "is", "are", "was", "were", "be", "as", "into"))
_CLAUSE_RE: Final = re.compile(r"[,;:，；：、]\s*|\s+[-–—]\s+|\s+(?:and|but|so|because|which)\s+")
def tool_names(turn: TurnLike) -> list[str]:
    names = []
    for call in turn.tool_calls or ():
        if not isinstance(call, Mapping):
            continue
        fn = call.get("function")
        name = call.get("name") or call.get("tool") or (fn.get("name") if isinstance(fn, Mapping) else None)
        if isinstance(name, str) and name.strip():
            names.append(name.strip())
    return names
def _tool_args(call: Mapping[str, Any]) -> Mapping[str, Any] | None:
    fn = call.get("function")
    args = call.get("arguments", call.get("args", call.get("input")))
    if args is None and isinstance(fn, Mapping):
        args = fn.get("arguments")
    if isinstance(args, str):
        try:
            args = json.loads(args)
        except ValueError:
            return None
    return args if isinstance(args, Mapping) else None


# ------------------------------------------------------------------------------------------ sentences


@dataclass
class _Sentence:
    text: str
    index: int  # position in the conversation
    turn: int
    tokens: frozenset[str]
    score: float = 0.0
    fact_score: float = 0.0
    topic_score: float = 0.0
    decision: bool = False
    question: bool = False


def _split_sentences(text: str) -> list[str]:
    out = []
    for s in sentences(text, hard="。！？；", soft=".!?…", closers="\"'”’)]"):
        part = s.text.strip(" \t\r\n-*•>#")
        if len(part) >= 2:
            out.append(part)
    return out


def _is_cjk(text: str) -> bool:
    return cjk_ratio(text) > 0.25


def _clip(text: str, limit: int, *, ellipsis: bool = True) -> str:
    """``text`` in at most ``limit`` characters, cut at a clause or word boundary when possible."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    room = limit - (1 if ellipsis else 0)
    head = text[:room]
    best = -1
    for m in _CLAUSE_RE.finditer(head):
        if m.start() >= room * 0.5:
            best = m.start()
    if best < 0 and not _is_cjk(head):
        space = head.rfind(" ")
        best = space if space >= room * 0.5 else -1
    cut = head[:best] if best > 0 else head
    cut = cut.rstrip(" ,;:，；：、-–—")
    words = cut.split(" ")
    while len(words) > 2 and words[-1].lower() in _DANGLING:  # "... a KeyError on the" -> "... a KeyError"
        words.pop()
    cut = " ".join(words).rstrip(" ,;:-–—")
    return cut + ("…" if ellipsis else "")


def _entities(prose: str, known: set[str]) -> list[str]:
    """``extract_entities`` of the prose, plus amounts in currency codes ("800 EUR", which it leaves as a bare
    "EUR") and Latin names inside Chinese text ("从MySQL迁移到PostgreSQL", which it cannot see); bare currency
    codes are dropped."""
    found = extract_entities(prose, known=known)
    extra: list[str] = []
    if _CURRENCY_AMOUNT_RE.search(prose):
        extra.extend(m.group().replace("  ", " ") for m in _CURRENCY_AMOUNT_RE.finditer(prose))
    if not prose.isascii() and _CJK_CHAR_RE.search(prose):
        extra.extend(m.group() for m in _LATIN_NAME_IN_CJK_RE.finditer(prose)
                     if m.group().lower() not in EN_STOP_CAPS)
    out = [e for e in found if e.upper() not in _CURRENCY_CODES]
    seen = {e.casefold() for e in out}
    for e in extra:
        if e.casefold() not in seen:
            seen.add(e.casefold())
            out.append(e)
    return out


def _collect(turns: Sequence[TurnLike]) -> tuple[list[_Sentence], list[TurnInfo], list[list[str]]]:
    """The sentences, the analysis of each turn and the entities of each turn."""
    sentences: list[_Sentence] = []
    infos: list[TurnInfo] = []
    entities: list[list[str]] = []
    known = {t.speaker for t in turns if t.speaker}
    for ti, turn in enumerate(turns):
        info = analyze_turn(turn)
        infos.append(info)
        prose = info.prose if info.prose.strip() and not info.chitchat else ""
        entities.append(_entities(prose, known) if prose else [])
        if not prose:
            continue
        names = [e for e in entities[-1] if not any(c.isdigit() for c in e)]
        for text in _split_sentences(prose):
            bare = text
            for name in names:  # "Hello Lena!" is a greeting: names alone are no content
                if name in bare:
                    bare = bare.replace(name, " ")
            if is_chat_only(bare):
                continue
            toks = frozenset(tokenize(text))
            if toks:
                sentences.append(_Sentence(text, len(sentences), ti, toks))
    return sentences, infos, entities


def _score(sentences: list[_Sentence], turns: Sequence[TurnLike], infos: list[TurnInfo],
           entities: list[list[str]]) -> None:
    """Set each sentence's ``score`` (abstract), ``topic_score`` (title) and ``fact_score`` (key facts)."""
    n = len(sentences)
    df: dict[str, int] = {}
    for s in sentences:
        for t in s.tokens:
            df[t] = df.get(t, 0) + 1
    # Luhn: mid-frequency words carry the topic; a word in every sentence or a one-off counts less
    weight = {t: math.log1p(d) * math.log1p(n / d) for t, d in df.items()}
    lead_user = 0
    for s in sentences:
        base = sum(weight[t] for t in s.tokens) / math.sqrt(len(s.tokens))
        text = s.text
        lower = text.lower()
        turn = turns[s.turn]
        tags = infos[s.turn].tags
        ents = sum(1 for e in entities[s.turn] if e.lower() in lower)
        number = bool(_NUMBER_RE.search(text))
        date = bool(_DATE_RE.search(text))
        s.decision = bool(DECISION_RE.search(text))
        s.question = is_question(text)
        pref = "preference" in tags or "plan" in tags or "event" in tags
        tool = bool(turn.tool_calls)
        bonus = (1.0 + 0.25 * min(ents, 3) + 0.3 * number + 0.3 * date + 0.6 * s.decision + 0.25 * tool
                 + 0.15 * pref)
        penalty = 1.0
        if s.question and len(s.tokens) <= 2:  # "How can I help?"
            penalty *= 0.3
        if _GREETING_RE.search(text):
            penalty *= 0.3
        elif _FILLER_RE.search(text):  # "Let me check that.", "稍等"
            penalty *= 0.5
        if turn.role == "tool":
            penalty *= 0.5
        s.score = base * bonus * penalty
        # The title names the topic: what the conversation is about rather than its outcome. Task chats state
        # it in the user's first informative sentences (lead bias); decisions go to the abstract and facts.
        topic = base * (1.0 + 0.25 * min(ents, 3) + 0.3 * number + 0.3 * date) * penalty
        if turn.role == "user" and penalty == 1.0 and lead_user < 2:
            lead_user += 1
            topic *= 1.4
        if s.decision:
            topic *= 0.8
        limit = TITLE_MAX_CJK_CHARS if _is_cjk(text) else TITLE_MAX_CHARS
        s.topic_score = topic / (1.0 + max(0, len(text) - limit) / limit)  # a title is cut from a short one
        signals = 2.0 * s.decision + 1.0 * number + 1.0 * date + 0.5 * min(ents, 2) + 0.5 * pref
        s.fact_score = 0.0 if s.question or signals == 0 else s.score * (1.0 + signals)


def _pick(sentences: list[_Sentence], key: str, limit_chars: int | None, limit_count: int,
          floor: float = 0.0) -> list[_Sentence]:
    ranked = sorted((s for s in sentences if getattr(s, key) > 0), key=lambda s: (-getattr(s, key), s.index))
    if not ranked:
        return []
    top = getattr(ranked[0], key)
    chosen: list[_Sentence] = []
    used = 0
    for s in ranked:
        if len(chosen) >= limit_count or getattr(s, key) < top * floor:
            break
        if any(len(s.tokens & c.tokens) / len(s.tokens | c.tokens) > 0.5 for c in chosen):
            continue
        length = len(s.text) + (1 if chosen else 0)
        if limit_chars is not None and chosen and used + length > limit_chars:
            continue
        chosen.append(s)
        used += length
    return sorted(chosen, key=lambda s: s.index)


def _with_end(text: str) -> str:
    if text.endswith(_END_PUNCT_TUPLE):
        return text
    return text + ("。" if _is_cjk(text) else ".")


def _join(parts: list[str]) -> str:
    out = ""
    for part in parts:
        if (out and not (_is_cjk(out[-1]) or out[-1] in "。！？；")) or (out and not _is_cjk(part[:1])):
            out += " "
        out += part
    return out


def _abstract(chosen: list[_Sentence]) -> str:
    parts = [_with_end(" ".join(s.text.split())) for s in chosen]
    text = _join(parts)
    if len(text) > ABSTRACT_MAX_CHARS:
        text = _clip(text, ABSTRACT_MAX_CHARS)
    return text


def _title_limit(text: str) -> int:
    return TITLE_MAX_CJK_CHARS if _is_cjk(text) else TITLE_MAX_CHARS


def _fit_title(title: str) -> str:
    title = " ".join(title.split()).strip(" ,;:，；：、")
    for _ in range(3):
        limit = _title_limit(title)
        if len(title) <= limit:
            break
        title = _clip(title, limit, ellipsis=False)
    return title


def _key_phrase(text: str) -> str:
    phrase = " ".join(text.split())
    if _is_cjk(phrase):
        phrase = _ZH_LEAD_RE.sub("", phrase) or phrase
        clauses = [c for c in re.split(r"[，,；;：:。！？!?]", phrase) if c.strip()]
    else:
        stripped = _EN_LEAD_RE.sub("", phrase)
        stripped = _EN_REQUEST_RE.sub("", stripped) or stripped
        phrase = stripped or phrase
        clauses = [c for c in re.split(r"(?<=[.!?])\s+|[;:]\s+|\s+[-–—]\s+", phrase) if c.strip()]
    head = clauses[0] if clauses else phrase
    # add the next clause while it fits: "查一下下周五的机票，预算三千元" reads better whole
    limit = _title_limit(phrase)
    for nxt in clauses[1:]:
        sep = "，" if _is_cjk(head) else "; "
        if len(head) + len(sep) + len(nxt) > limit or len(head) >= limit * 0.6:
            break
        head = head + sep + nxt
    head = head.strip().rstrip(_END_PUNCT + "，,")
    if head and head[0].isascii() and head[0].islower():
        head = head[0].upper() + head[1:]
    return _fit_title(head)


def _tool_fact(turns: Sequence[TurnLike]) -> str | None:
    seen: dict[str, str] = {}
    for turn in turns:
        for call in turn.tool_calls or ():
            if not isinstance(call, Mapping):
                continue
            names = tool_names(PlainTurn("", tool_calls=[dict(call)]))
            if not names or names[0] in seen:
                continue
            args = _tool_args(call)
            shown = ""
            if args:
                items = []
                for k, v in list(args.items())[:4]:
                    if isinstance(v, (str, int, float, bool)) and len(str(v)) <= 30:
                        items.append(f"{k}={v}")
                shown = "(" + ", ".join(items) + ")" if items else ""
            seen[names[0]] = names[0] + shown
    if not seen:
        return None
    text = "called " + ", ".join(seen.values())
    if len(text) > KEY_FACT_MAX_CHARS:
        text = "called " + ", ".join(seen)
    return _clip(text, KEY_FACT_MAX_CHARS)


def _rank_entities(turns: Sequence[TurnLike], entities: list[list[str]], best: list[_Sentence]) -> list[str]:
    count: dict[str, int] = {}
    first: dict[str, int] = {}
    spelled: dict[str, str] = {}
    order = 0
    for names in entities:
        for name in dict.fromkeys(n.strip() for n in names):
            if not name or len(name) > ENTITY_MAX_CHARS:
                continue
            key = name.casefold()
            spelled.setdefault(key, name)
            count[key] = count.get(key, 0) + 1
            if key not in first:
                first[key] = order
                order += 1
    best_text = " ".join(s.text for s in best).casefold()
    speakers = {t.speaker.casefold() for t in turns if t.speaker}
    ranked = sorted(count, key=lambda k: (k in speakers, -(count[k] + (0.5 if k in best_text else 0)), first[k]))
    out = [spelled[k] for k in ranked]
    for speaker in dict.fromkeys(t.speaker for t in turns if t.speaker):
        if speaker.casefold() not in count:
            out.append(speaker)
    return out[:MAX_ENTITIES]


_TAG_ORDER: Final = ("decision", "tool_call", "code_block", "error", "attachment", "url", "thinking", "question")


def _merge_tags(tags: list[list[str]]) -> list[str]:
    counts: dict[str, int] = {}
    for turn in tags:
        for tag in turn:
            counts[tag] = counts.get(tag, 0) + 1
    structural = [t for t in _TAG_ORDER if t in counts]
    content = sorted((t for t in counts if t not in _TAG_ORDER), key=lambda t: -counts[t])
    return (structural + content)[:MAX_TAGS]


def summarize(turns: Sequence[TurnLike]) -> HookSummary:
    """The heuristic summary of ``turns`` (no model; deterministic). See the module docstring for how.

    A file of nothing but chit-chat gets the title ``"Small talk"`` (``"闲聊"`` when Chinese) and no abstract.

    >>> summarize([PlainTurn("帮我查一下下周五从上海到东京的机票，预算三千元。"),
    ...            PlainTurn("好的", role="assistant")]).title
    '查一下下周五从上海到东京的机票，预算三千元'
    >>> summarize([PlainTurn("hi"), PlainTurn("hello! 👋", role="assistant")]).title
    'Small talk'
    """
    turns = list(turns)
    sentences, infos, entities = _collect(turns)
    _score(sentences, turns, infos, entities)
    tags = [info.tags for info in infos]
    chosen = _pick(sentences, "score", ABSTRACT_MAX_CHARS, 6, floor=0.3)
    abstract = _abstract(chosen)
    ranked_entities = _rank_entities(turns, entities, chosen)

    facts: list[tuple[int, str]] = []
    tool_fact = _tool_fact(turns)
    fact_room = MAX_KEY_FACTS - (1 if tool_fact else 0)
    for s in _pick(sentences, "fact_score", None, fact_room):
        facts.append((s.index, _clip(_with_end(" ".join(s.text.split())), KEY_FACT_MAX_CHARS)))
    key_facts = [text for _, text in sorted(facts)]
    if tool_fact:
        key_facts.append(tool_fact)

    all_text = " ".join(t.content or "" for t in turns)
    if sentences:
        top = max(sentences, key=lambda s: (s.topic_score, -s.index))
        title = _key_phrase(top.text)
        limit = _title_limit(title)
        extra = next((e for e in ranked_entities[:4]
                      if e.casefold() not in title.casefold() and e.casefold() not in {
                          (t.speaker or "").casefold() for t in turns}), None)
        if extra:
            sep = "，" if _is_cjk(title) else "; "
            if len(title) + len(sep) + len(extra) <= limit:
                title = title + sep + extra
    elif tool_fact:
        title = _fit_title(tool_fact[0].upper() + tool_fact[1:])
    elif ranked_entities:
        title = _fit_title(", ".join(ranked_entities[:3]))
    else:
        title = "闲聊" if _is_cjk(all_text) else "Small talk"
    return HookSummary(title=title or "Conversation", abstract=abstract, key_facts=tuple(key_facts),
                       entities=tuple(ranked_entities), tags=tuple(_merge_tags(tags)))


# ------------------------------------------------------------------------------------------ the LLM path


def hook_json_schema() -> dict[str, Any]:
    """The JSON schema :func:`summarize_with_llm` asks the LLM to answer with."""
    strings = {"type": "array", "items": {"type": "string"}}
    return {
        "type": "object",
        "properties": {
            "title": {"type": "string", "maxLength": TITLE_MAX_CHARS},
            "abstract": {"type": "string", "maxLength": ABSTRACT_MAX_CHARS},
            "key_facts": {**strings, "maxItems": MAX_KEY_FACTS},
            "entities": {**strings, "maxItems": MAX_ENTITIES},
            "tags": {**strings, "maxItems": MAX_TAGS},
        },
        "required": ["title", "abstract", "key_facts", "entities", "tags"],
    }


_SYSTEM: Final = ("You write index entries for an AI agent's long-term memory of conversations. Reply with exactly "
                  "one JSON object matching the given schema: no prose, no code fences.")
_TURN_MAX_CHARS: Final = 1500
_TOOL_RESULT_MAX_CHARS: Final = 300


class _InvalidHook(InvalidAnswer):
    """The LLM's answer is not a usable summary (after repair)."""


def _render_turn(i: int, turn: TurnLike) -> str:
    who = turn.role + (f" ({turn.speaker})" if turn.speaker else "")
    content = (turn.content or "").strip()
    limit = _TOOL_RESULT_MAX_CHARS if turn.role == "tool" or looks_like_json(content) else _TURN_MAX_CHARS
    if len(content) > limit:
        content = content[:limit] + f" … [{len(content) - limit} characters cut]"
    parts = [f"[{i}] {who}: {content}"]
    for call in turn.tool_calls or ():
        if isinstance(call, Mapping):
            name = (tool_names(PlainTurn("", tool_calls=[dict(call)])) or ["?"])[0]
            args = json.dumps(_tool_args(call) or {}, ensure_ascii=False, default=str)
            parts.append(f"    -> called {name} {args[:200]}")
    if turn.attachments:
        parts.append(f"    [{len(turn.attachments)} attachment(s)]")
    return "\n".join(parts)


def _turn_value(turn: TurnLike, sentence_scores: dict[int, float], index: int) -> float:
    value = sentence_scores.get(index, 0.0)
    if is_high_value(turn):
        value += 1.0 + value
    if is_chitchat(turn):
        value = 0.0
    return value


def _render(turns: Sequence[TurnLike], max_input_tokens: int) -> tuple[str, int]:
    """The transcript for the prompt, cut to ``max_input_tokens``; and the number of turns left out."""
    rendered = [_render_turn(i + 1, t) for i, t in enumerate(turns)]
    costs = [estimate_tokens(r) + 1 for r in rendered]
    if sum(costs) <= max_input_tokens:
        return "\n".join(rendered), 0
    sentences, infos, entities = _collect(turns)
    _score(sentences, turns, infos, entities)
    best: dict[int, float] = {}
    for s in sentences:
        best[s.turn] = max(best.get(s.turn, 0.0), s.score)
    order = sorted(range(len(turns)), key=lambda i: (-_turn_value(turns[i], best, i), i))
    keep: set[int] = set()
    used = 0
    for i in order:
        if used + costs[i] <= max_input_tokens:
            keep.add(i)
            used += costs[i]
    if not keep:
        raise ValueError(f"max_input_tokens={max_input_tokens} fits no turn of the conversation")
    lines: list[str] = []
    gap = 0
    for i, text in enumerate(rendered):
        if i in keep:
            if gap:
                lines.append(f"[... {gap} turn(s) left out ...]")
                gap = 0
            lines.append(text)
        else:
            gap += 1
    if gap:
        lines.append(f"[... {gap} turn(s) left out ...]")
    return "\n".join(lines), len(turns) - len(keep)


def _prompt(transcript: str, total: int, left_out: int, schema: Mapping[str, Any]) -> str:
    lines = ["Summarise this conversation for the index of a long-term memory file.", ""]
    if left_out:
        lines += [(f"The conversation has {total} turns; it was cut to fit: {total - left_out} turns are shown, "
                   f"chosen as the most informative, and {left_out} are left out (marked)."), ""]
    lines += ["Conversation:", transcript, "",
              "Answer with one JSON object, in the language of the conversation:",
              (f'- "title": a specific title of at most {TITLE_MAX_CHARS} characters ({TITLE_MAX_CJK_CHARS} '
               "if Chinese) naming the main topic and outcome, not the greeting;"),
              f'- "abstract": at most {ABSTRACT_MAX_CHARS} characters: what was asked, done and decided;',
              (f'- "key_facts": up to {MAX_KEY_FACTS} short factual sentences (decisions, numbers, names, '
               "dates, preferences; name the tools called);"),
              f'- "entities": up to {MAX_ENTITIES} people, places, products, projects, most salient first;',
              '- "tags": a few short lower-case topic tags.', "",
              f"JSON schema: {json.dumps(schema, separators=(',', ':'))}"]
    return "\n".join(lines)


def _strings(value: Any, limit: int, max_chars: int) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, (list, tuple)):
        raise _InvalidHook(f"expected a list of strings, got {type(value).__name__}")
    out: list[str] = []
    seen: set[str] = set()
    for item in value:
        if not isinstance(item, str):
            continue  # repair: drop non-strings
        item = " ".join(item.split())
        if item and item.casefold() not in seen:
            seen.add(item.casefold())
            out.append(_clip(item, max_chars))
        if len(out) == limit:
            break
    return out


def _tag(text: str) -> str:
    return re.sub(r"[\s\-]+", "_", text.strip().lower().lstrip("#"))[:40]


def _validate(obj: dict[str, Any], heuristic_tags: list[str]) -> tuple[str, str, list[str], list[str], list[str]]:
    title = obj.get("title")
    if not isinstance(title, str) or not title.strip():
        raise _InvalidHook('"title" must be a non-empty string')
    abstract = obj.get("abstract", "")
    if abstract is None:
        abstract = ""
    if not isinstance(abstract, str):
        raise _InvalidHook('"abstract" must be a string')
    abstract = " ".join(abstract.split())
    if len(abstract) > ABSTRACT_MAX_CHARS:
        abstract = _clip(abstract, ABSTRACT_MAX_CHARS)
    facts = _strings(obj.get("key_facts"), MAX_KEY_FACTS, KEY_FACT_MAX_CHARS)
    entities = _strings(obj.get("entities"), MAX_ENTITIES, ENTITY_MAX_CHARS)
    tags = list(dict.fromkeys(heuristic_tags + [t for t in map(_tag, _strings(obj.get("tags"), MAX_TAGS, 40)) if t]))
    return _fit_title(title), abstract, facts, entities, tags[:MAX_TAGS]


def summarize_with_llm(turns: Sequence[TurnLike], llm: LLM, *, timeout: float = 20.0,
                       max_input_tokens: int = 6000) -> tuple[HookSummary, str | None]:
    """The LLM's summary of ``turns`` and ``None``; or :func:`summarize`'s and the reason it fell back.

    The LLM gets the transcript (long tool results and turns cut; past ``max_input_tokens`` only the most
    informative turns, and the prompt says so) and the JSON schema. Its answer is repaired (code fences, prose
    around the object, single quotes, trailing commas; over-long fields clipped, non-strings dropped,
    duplicates removed), and one retry is made when it has no usable JSON object or title. ``timeout`` bounds
    the whole call, retry included. The tags are the structural tags of :func:`turn_tags` plus the LLM's.

    >>> from memory_ext.llm import ScriptedLLM
    >>> llm = ScriptedLLM(['{"title": "Tokyo flight booked", "abstract": "Booked NH204.", "key_facts": '
    ...                    '["Flight NH204 at 9:05", 7], "entities": ["Tokyo"], "tags": ["Travel"]}'], id="m")
    >>> hook, why = summarize_with_llm([PlainTurn("Book NH204 to Tokyo")], llm)
    >>> hook.title, hook.key_facts, hook.tags, hook.source, why
    ('Tokyo flight booked', ('Flight NH204 at 9:05',), ('number', 'travel'), 'm', None)
    >>> hook, why = summarize_with_llm([PlainTurn("Book NH204 to Tokyo")], ScriptedLLM([RuntimeError("down")]))
    >>> hook.source, why
    ('heuristic', 'LLM failed (RuntimeError: down); used the heuristic summary')
    """
    turns = list(turns)
    llm_id = str(getattr(llm, "id", type(llm).__name__))
    try:
        heuristic_tags = _merge_tags([turn_tags(t) for t in turns])
        transcript, left_out = _render(turns, max_input_tokens)
        schema = hook_json_schema()
        prompt = _prompt(transcript, len(turns), left_out, schema)
        fields = ask_json(llm, prompt, validate=lambda obj: _validate(obj, heuristic_tags), timeout=timeout,
                          system=_SYSTEM, json_schema=schema, invalid=_InvalidHook)
    except Exception as exc:  # noqa: BLE001  any failure of the model degrades to the heuristic, reported
        kind = "InvalidAnswer" if isinstance(exc, _InvalidHook) else type(exc).__name__
        return summarize(turns), f"LLM failed ({kind}: {exc}); used the heuristic summary"
    title, abstract, facts, entities, tags = fields
    return HookSummary(title=title, abstract=abstract, key_facts=tuple(facts), entities=tuple(entities),
                       tags=tuple(tags), source=llm_id), None
