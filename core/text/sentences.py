"""Sentences and questions, in English and Chinese: the one splitter and the one question test.

:func:`sentences` cuts a text at end punctuation and line breaks and keeps offsets. Callers differ in what ends a
sentence, so the terminators are arguments:

* ``hard`` characters end a sentence where they stand (``。！？`` -- Chinese puts no space after them);
* ``soft`` characters end it only before white space or the end of the text (``.`` -- so ``3.5`` and ``e.g``
  stay whole), optionally after closing quotes (``closers``: ``He said "hi." Then``);
* a run of terminators (``?!``, ``……``) is one terminator with ``merge=True``, one sentence each without;
* ``abbreviations=True`` does not end a sentence at the period of ``Mr.``, ``Dr.``, ``etc.`` or an initial.

:func:`split_sentences` is the common case (stripped sentences, empty ones dropped). :func:`is_question` tells a
question from a statement; :func:`is_sentence_start` whether a position starts a sentence.

>>> split_sentences("I went there. Did you like it? Yes! 3.5 is ok")
['I went there.', 'Did you like it?', 'Yes!', '3.5 is ok']
>>> [(s.start, s.body, s.terminator) for s in sentences("我住在北京。你呢？", merge=True)]
[(0, '我住在北京', '。'), (6, '你呢', '？')]
>>> is_question("Do you live in Paris"), is_question("我住在北京"), is_question("你住在哪里", loose=True)
(True, False, True)
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Final

__all__ = [
    "CHINESE_TERMINATORS",
    "SENTENCE_END",
    "Sentence",
    "is_question",
    "is_sentence_start",
    "sentences",
    "split_sentences",
]

CHINESE_TERMINATORS: Final = "。！？"
SENTENCE_END: Final = frozenset(".!?…\n" + CHINESE_TERMINATORS)
"""Characters after which the next word starts a sentence (for :func:`is_sentence_start`)."""
_OPENERS: Final = frozenset("\"'“‘([{«「『《*_-–— \t\r")
_ABBREVIATION_RE: Final = re.compile(r"(?:\b(?:Mr|Mrs|Ms|Dr|St|Mt|Jr|Sr|vs|etc|Prof|Inc|Ltd|Co|No)|\b[A-Z])\.$")


@dataclass(frozen=True, slots=True)
class Sentence:
    """One sentence of a text: ``text[start:end] == body + terminator`` (leading white space stays in the body).

    >>> s = sentences("Hi. I moved.")[1]
    >>> s.start, s.end, s.body, s.terminator, s.text
    (3, 12, ' I moved', '.', ' I moved.')
    """

    start: int
    end: int
    body: str
    terminator: str

    @property
    def text(self) -> str:
        """The body and its terminator."""
        return self.body + self.terminator


def sentences(text: str, *, hard: str = "。！？!?；;…", soft: str = ".", closers: str = "",
              merge: bool = False, abbreviations: bool = False) -> list[Sentence]:
    """The sentences of ``text`` with their offsets; a line break always ends one (and is in no sentence).

    Sentences with a blank body are kept when they have a terminator (``merge=False`` turns ``"?!"`` into
    ``"?"`` and ``"!"``); callers drop what they cannot use.

    >>> [s.text for s in sentences("Wait... what?! Mr. Li left.\\nOk", hard="?!", merge=True, abbreviations=True)]
    ['Wait...', ' what?!', ' Mr. Li left.', 'Ok']
    >>> [s.text for s in sentences('He said "hi." Then left', soft=".", closers='"')]
    ['He said "hi."', ' Then left']
    """
    out: list[Sentence] = []
    n = len(text)
    start = 0
    for m in _terminators(hard + soft, merge).finditer(text):
        i, j = m.span()
        if i < start:  # inside closing quotes already taken
            continue
        if text[i] == "\n":
            if text[start:i].strip():
                out.append(Sentence(start, i, text[start:i], ""))
            start = j
            continue
        if not any(c in hard for c in m.group()):  # soft terminators end a sentence before white space only
            k = j
            while k < n and text[k] in closers:
                k += 1
            if (k < n and not text[k].isspace()) or (abbreviations and text[i] == "."
                                                      and _ABBREVIATION_RE.search(text[start:i] + ".")):
                continue
            j = k
        out.append(Sentence(start, j, text[start:i], text[i:j]))
        start = j
    if text[start:].strip():
        out.append(Sentence(start, n, text[start:], ""))
    return out


@functools.lru_cache(maxsize=64)
def _terminators(chars: str, merge: bool) -> re.Pattern[str]:
    """Line breaks, and the terminator characters one by one or (``merge``) in runs."""
    return re.compile(f"\n+|[{re.escape(chars)}]" + ("+" if merge else "") if chars else "\n+")


def split_sentences(text: str) -> list[str]:
    """The sentences of ``text`` (Chinese and latin terminators), stripped, empty ones dropped.

    >>> split_sentences("我今天去了公园！你喜欢公园吗？喜欢。")
    ['我今天去了公园！', '你喜欢公园吗？', '喜欢。']
    """
    return [t for t in (s.text.strip() for s in sentences(text)) if t]


def is_sentence_start(text: str, pos: int) -> bool:
    """Whether ``text[pos]`` starts a sentence: only opening quotes, brackets or spaces since the last end.

    >>> is_sentence_start("Hi. Bob left", 4), is_sentence_start("Hi. Bob left", 8)
    (True, False)
    """
    i = pos - 1
    while i >= 0 and text[i] in _OPENERS:
        i -= 1
    return i < 0 or text[i] in SENTENCE_END


_EN_QUESTION_START_RE: Final = re.compile(
    r"^\s*(?:(?:so|and|but|hey|ok|okay|well|oh)[,\s]+)*(?:do|does|did|are|is|am|was|were|can|could|would|will"
    r"|should|shall|may|might|have|has|had|what|when|where|who|whom|whose|why|how|which|isn't|aren't|don't"
    r"|doesn't|didn't|wasn't|haven't|won't|wouldn't)\b",
    re.IGNORECASE,
)
_ZH_QUESTION_END_RE: Final = re.compile(r"[吗嘛么][\s。.!！~～…]*$")
_ZH_MAYBE_QUESTION_RE: Final = re.compile(
    r"呢[\s。.!！~～…]*$|哪|什么|谁|多少|怎么|为什么|是否|是不是|有没有|会不会|要不要|能不能|可不可以|对不对|好不好|几岁|还是.{0,8}[呢吗]?$")


def is_question(text: str, *, loose: bool = False) -> bool:
    """Whether ``text`` (one sentence) asks something.

    A question ends with ``?`` or ``？``, starts (after "so", "and", "ok"...) with an auxiliary verb or a
    wh-word, or ends with the Chinese particle 吗, 嘛 or 么. ``loose=True`` also counts what *may* ask: a
    Chinese question word anywhere (什么, 哪, 谁, 怎么, 有没有...) and a final 呢 (also said at the end of
    statements): for rules that must not read a question as a statement, where a wrong "question" costs
    recall only.

    >>> is_question("I live in Oslo."), is_question("so where do you live"), is_question("你住在北京吗")
    (False, True, True)
    >>> is_question("我不知道他住在哪"), is_question("我不知道他住在哪", loose=True)
    (False, True)
    >>> is_question("我也住在北京呢"), is_question("我也住在北京呢", loose=True)
    (False, True)
    """
    s = text.strip()
    if s.endswith(("?", "？")) or _EN_QUESTION_START_RE.match(s):
        return True
    if s.isascii():
        return False
    return bool(_ZH_QUESTION_END_RE.search(s) or (loose and _ZH_MAYBE_QUESTION_RE.search(s)))
