"""What a turn says about itself, for summaries and the lifecycle: content tags, chit-chat, high value.

:class:`TurnLike` is what these functions (and :mod:`memory_ext.lifecycle.summary`) read of a turn;
:class:`PlainTurn` is a minimal one.

>>> turn_tags(PlainTurn("We decided to book https://example.com/hotel for 140 EUR."))
['url', 'decision', 'number']
>>> is_chitchat(PlainTurn("thanks!")), is_high_value(PlainTurn("ok", metadata={"importance": 90}))
(True, True)
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Protocol

from memory_ext.text.entities import extract_tags

__all__ = ["EnZhPattern", "PlainTurn", "TurnInfo", "TurnLike", "analyze_turn", "is_chat_only", "is_chitchat",
           "is_high_value", "looks_like_json", "turn_tags"]


# ------------------------------------------------------------------------------------------------- types


class TurnLike(Protocol):
    """What the summary reads of a turn (the engine's ``TurnRow`` has it; read-only is enough)."""

    @property
    def role(self) -> str: ...
    @property
    def speaker(self) -> str | None: ...
    @property
    def content(self) -> str: ...
    @property
    def ts(self) -> float | None: ...
    @property
    def tool_calls(self) -> Sequence[Mapping[str, Any]]: ...
    @property
    def attachments(self) -> Sequence[Mapping[str, Any]]: ...
    @property
    def metadata(self) -> Mapping[str, Any]: ...


@dataclass(frozen=True)
class PlainTurn:
    """A minimal :class:`TurnLike`, for callers without a stored turn (and for examples and tests).

    >>> PlainTurn("ok").role
    'user'
    """

    content: str
    role: str = "user"
    speaker: str | None = None
    ts: float | None = None
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    attachments: list[dict[str, Any]] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)


# --------------------------------------------------------------------------------------------- patterns

_FENCE_RE: Final = re.compile(r"```.*?(?:```|\Z)", re.DOTALL)
_INDENTED_RE: Final = re.compile(r"(?:^(?: {4}|\t)[^\n]*[(){}\[\]=;:][^\n]*\n?){2,}", re.MULTILINE)
_CODE_LINE_RE: Final = re.compile(
    r"^\s*(?:def\s+\w+\s*\(|class\s+\w+\s*[(:]|import\s+[\w.]+\s*$|from\s+[\w.]+\s+import\s"
    r"|(?:const|let|var)\s+\w+\s*=|function\s+\w+\s*\(|#include\s*<)",
    re.MULTILINE,
)
_URL_RE: Final = re.compile(r"\bhttps?://\S+|\bwww\.[^\s/]+\.\S+", re.IGNORECASE)
class EnZhPattern:
    """An English pattern run on the lower-cased text (no IGNORECASE, anchored at word starts: several times
    faster than one case-insensitive alternation) and a Chinese one run only on non-ASCII text."""

    __slots__ = ("en", "zh")

    def __init__(self, en: str, zh: str = "") -> None:
        self.en = re.compile(rf"(?<![^\W_])(?:{en})")
        self.zh = re.compile(zh) if zh else None

    def search(self, text: str) -> bool:
        if self.en.search(text.lower()):
            return True
        return self.zh is not None and not text.isascii() and self.zh.search(text) is not None


DECISION_RE: Final = EnZhPattern(
    r"(?:we|i)(?:['’]ve| have)?\s+(?:finally\s+|just\s+)?decided\b|decided\s+(?:to|on|that)\b"
    r"|let['’]?s\s+(?:go\s+with|use|pick|take|book)\b|(?:i|we)['’]ll\s+(?:use|go\s+with|take|pick)\b"
    r"|(?:i|we)\s+will\s+(?:use|go\s+with)\b|settled\s+on\b|we\s+agreed\b|final\s+decision\b"
    r"|we['’]re\s+going\s+with\b|decision\s*:",
    r"决定|就用|就选|就定|就订|定下来|确定了|选定|敲定",
)
_ERROR_RE: Final = EnZhPattern(
    r"traceback \(most recent call last\)|[a-z]{2,}(?:error|exception)\b|(?:failed|failure|fails)\b"
    r"|error\s*[:\d]|exit (?:code|status) [1-9]",
    r"报错|错误|失败|异常|出错",
)
_JSON_ERROR_RE: Final = re.compile(r'"(?:error|errors|exception)"\s*:(?!\s*(?:null|false|\[\]|\{\}|""))')
_THINKING_KEYS: Final = ("thinking", "reasoning", "reasoning_content", "thoughts", "chain_of_thought")

# Chit-chat vocabulary: greetings, acknowledgements, thanks, laughter, and the filler words they combine with
# ("thank you so much", "sounds good to me", "hi there"). "no"/"nope" are left out on purpose: a refusal is
# information.
_CHAT_WORDS: Final = frozenset(
    """
    ok okay k kk okey okie oki alright allright right sure yes yeah yep yup ya yah aye fine
    hi hello hey heya hiya howdy yo there everyone all guys folks bye goodbye cya later soon night morning
    afternoon evening good great nice cool awesome perfect excellent lovely wonderful amazing fantastic
    thanks thank thx ty tysm tnx cheers appreciated appreciate it you very much so lot a lots ton tons
    welcome np problem worries no-problem got understood noted roger copy gotcha makes sense sounds seems
    that's thats this is me to for the indeed exactly totally absolutely definitely of course true agreed
    lol lmao haha hahaha hehe heh hah xd wow oh ah ahh ooh aw aww hmm hm mm mhm uh um umm yay woo
    see ya again talk take care have day weekend will do too same back i i'm we you're it's that's
    """.split()
)
# "of course" and friends are words of the set; "no problem" needs "no" only after it is tokenised together.
_CHAT_PHRASES_EN: Final = re.compile(r"\bno\s+(?:problem|worries|prob|probs)\b", re.IGNORECASE)
_ZH_CHAT: Final = (
    "没问题|不客气|不用谢|辛苦了|辛苦啦|知道了|明白了|收到了|好的呀|好滴|好嘞|好哒|好吧|好呀|好的|好啊|好"
    "|嗯嗯|嗯|哦哦|哦|噢|喔|啊|呀|哈哈|哈|嘿|嗨|哇|呵呵|嘻嘻|谢谢你|谢谢|多谢|感谢|谢啦|谢了|你好|您好|大家好"
    "|早上好|晚上好|早安|晚安|早|拜拜|再见|回见|可以|行|成|对的|对|是的|是|了解|明白|收到|懂了|"
    "了|啦|吧|呢|的|哟|咯|喽|么|嘛|非常|太|很|真|哒"
)
_ZH_CHAT_RE: Final = re.compile(rf"(?:{_ZH_CHAT})+")
_EMOTICON_RE: Final = re.compile(r"[:;=8xX][-'^]?[)(\]\[dDpP/\\|*oO3]+|<3|\^_*\^|:\w+:")
_WORDISH_RE: Final = re.compile(r"[^\W_]+(?:['’][^\W_]+)*")


# ------------------------------------------------------------------------------------------ turn helpers


def _has_code(text: str) -> bool:
    return "```" in text or bool(_INDENTED_RE.search(text)) or bool(_CODE_LINE_RE.search(text))


def looks_like_json(text: str) -> bool:
    s = text.strip()
    if not s or s[0] not in "{[":
        return False
    if len(s) > 200:  # a large payload: not prose whether or not it parses
        return True
    try:
        json.loads(s)
    except ValueError:
        return False
    return True


def _strip_code(text: str) -> str:
    """The prose of ``text``: fenced and indented code blocks, code lines and URLs removed."""
    if "```" in text:
        text = _FENCE_RE.sub("\n", text)
    if "    " in text or "\t" in text:
        text = _INDENTED_RE.sub("\n", text)
    if _CODE_LINE_RE.search(text):
        text = "\n".join(line for line in text.split("\n") if not _CODE_LINE_RE.match(line))
    return text


def is_chat_only(text: str) -> bool:
    """Whether ``text`` holds nothing but greetings, acknowledgements, thanks, laughter, emoji or punctuation."""
    if len(text) > 160:
        return False
    t = _EMOTICON_RE.sub(" ", text).lower()
    if not t.isascii():
        t = _ZH_CHAT_RE.sub(" ", t)
    if "no" in t:
        t = _CHAT_PHRASES_EN.sub(" ", t)
    # emoji, punctuation and symbols are not words; a digit, a CJK character left over or any other word is content
    return all(w.replace("’", "'") in _CHAT_WORDS for w in _WORDISH_RE.findall(t))


# ------------------------------------------------------------------------------------------ public turn API


@dataclass(frozen=True)
class TurnInfo:
    """What the summary needs of one turn, computed once."""

    tags: list[str]
    code: bool
    chitchat: bool
    prose: str  # the text that may become sentences: no code, no JSON payload, nothing of system turns


def analyze_turn(turn: TurnLike) -> TurnInfo:
    content = turn.content or ""
    payload = looks_like_json(content)
    code = not payload and _has_code(content)
    prose = "" if payload else _strip_code(content) if code else content
    tags: list[str] = []
    if turn.tool_calls or turn.role == "tool":
        tags.append("tool_call")
    if code:
        tags.append("code_block")
    content_tags = extract_tags(prose) if prose else []
    url = "url" in content_tags or (("http" in content or "www." in content) and bool(_URL_RE.search(content)))
    if url:
        tags.append("url")
    if "question" in content_tags:
        tags.append("question")
    if turn.attachments:
        tags.append("attachment")
    if prose and DECISION_RE.search(prose):
        tags.append("decision")
    if (_ERROR_RE.search(content) or (payload and _JSON_ERROR_RE.search(content))
            or any(isinstance(c, Mapping) and c.get("error") for c in turn.tool_calls or ())):
        tags.append("error")
    metadata = turn.metadata or {}
    if any(metadata.get(key) for key in _THINKING_KEYS):
        tags.append("thinking")
    tags.extend(t for t in content_tags if t not in tags and t not in ("url", "question", "code"))
    if "code" in content_tags and not code:  # inline code: `x`, a.b(), =>
        tags.append("code")
    chitchat = (not (turn.tool_calls or turn.attachments or turn.role == "tool" or code or url or payload)
                and is_chat_only(content))
    if turn.role == "system":
        prose = ""
    return TurnInfo(tags=tags, code=code, chitchat=chitchat, prose=prose)


def turn_tags(turn: TurnLike) -> list[str]:
    """Tags of one turn: structural ones first, then the content tags of ``extract_tags``.

    ``tool_call`` (tool calls, or a ``tool`` turn), ``code_block`` (fences, indented code, code lines),
    ``url``, ``question``, ``attachment``, ``decision`` ("we decided", "let's go with", "I'll use", 决定,
    就用), ``error`` (tracebacks, "...Error", "failed", 报错, an ``"error"`` key in a JSON tool result),
    ``thinking`` (metadata holds thinking or reasoning), then ``extract_tags``' content tags of the prose
    (``number``, ``plan``, ``preference``, ``emotion``, ``event``; ``code`` for inline code outside a code
    block). A JSON payload (a tool result) gets no content tags.

    >>> turn_tags(PlainTurn("Let's go with Postgres? See https://example.com", metadata={"reasoning": "..."}))
    ['url', 'question', 'decision', 'thinking']
    >>> turn_tags(PlainTurn("```py\\nraise ValueError('x')\\n```"))
    ['code_block', 'error']
    """
    return list(analyze_turn(turn).tags)


def is_chitchat(turn: TurnLike) -> bool:
    """Whether the turn carries no information at all.

    True only without tool calls (and not a ``tool`` turn), attachments, code or links, when the content is
    nothing but greetings, acknowledgements, thanks, laughter or emoji, in English or Chinese. A refusal
    ("no", "不行") is information, so it is not chit-chat; an empty turn is.

    >>> [is_chitchat(PlainTurn(t)) for t in ["ok", "thanks! 👍", "好的，谢谢", "ok, book the 9am flight"]]
    [True, True, True, False]
    """
    if turn.tool_calls or turn.attachments or turn.role == "tool":
        return False
    content = turn.content or ""
    if not is_chat_only(content):  # the cheap test first: most turns fail it
        return False
    return not (_has_code(content) or _URL_RE.search(content))


def _importance(metadata: Mapping[str, Any]) -> float | None:
    value = metadata.get("importance")
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
        return None
    if isinstance(value, float) and 0.0 < value <= 1.0:  # a fraction (the records' 0.5 scale)
        return value * 100.0
    return float(value)


def is_high_value(turn: TurnLike, *, importance_threshold: int = 70) -> bool:
    """Whether the turn should be kept in full: tool calls, code, attachments, decisions, or
    ``metadata["importance"] >= importance_threshold`` (0-100; a float in (0, 1] counts as a fraction).

    >>> is_high_value(PlainTurn("We decided to use SQLite.")), is_high_value(PlainTurn("nice weather"))
    (True, False)
    >>> is_high_value(PlainTurn("note", metadata={"importance": 85}))
    True
    """
    if turn.tool_calls or turn.role == "tool" or turn.attachments:
        return True
    content = turn.content or ""
    if DECISION_RE.search(content) or (_has_code(content) and not looks_like_json(content)):
        return True
    importance = _importance(turn.metadata or {})
    return importance is not None and importance >= importance_threshold
