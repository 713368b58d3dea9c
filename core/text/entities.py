"""Entities and tags of a chat turn, by cheap heuristics (no model), for English and Chinese.

:func:`extract_entities` returns, deduplicated (case-insensitively) and in order of first appearance, after the
speaker's name when one is given:

* **English proper names:** runs of capitalised words ("Lena", "Berlin Marathon", "Museum of Modern Art")
  and acronyms ("LGBTQ", "NASA"). A possessive is cut ("Lena's" -> "Lena"). Words of :data:`EN_STOP_CAPS`
  (pronouns, determiners, interjections, greetings and other common sentence starters) are never names and
  split a run ("Thanks Caroline" -> "Caroline"). A single capitalised word at the start of a sentence is
  kept only when it also appears capitalised elsewhere in the text, is in ``known``, or is an acronym.
  Month and weekday names are left to :mod:`memory_ext.text.timeexpr`.
* **Quoted terms:** "...", '...', “...”, ‘...’, 「...」, 『...』 and 《...》, up to six words / 60 characters
  (longer quotes are speech, not names).
* **Numbers with units:** "60 kilometres", "180 euros", "3 kids", "$200", "5km", "10%", "two dogs", and in
  Chinese "60公里", "3个孩子", "两只猫", "200块" (a leading 一 is an article, not a count: "一个朋友" is skipped).
* **Chinese proper nouns:** jieba's segmentation (HMM on, so unknown names such as 李明 come out whole)
  with the part-of-speech tags of jieba's dictionary. Those tags call many common words names (明白/nr,
  阳光/nr, 东西/ns, 和平/nz), so: organisation (nt) and 3+-character place (ns) tags are trusted; a
  2-character place must end in a place character (国, 市, 州, 京, 海, 湖, 山...) or be a transliteration
  (北京, 杭州, 美国 -- not 东西, 美丽); a dictionary person (nr) must be a transliteration of three or more
  characters (迪士尼, 辛普森 -- not 明白, 胡萝卜, 夏令营); a word the dictionary does not know is kept when
  it is shaped like a name (a common surname or 小/老/阿 plus one or two characters, a doubled character, a
  transliteration: 李明, 小红, 阿黄) or ends in a place character; other-proper-noun (nz) tags are ignored.
  Words that begin or end with a pronoun or particle (我, 了, 的, 是...) are dropped. ``jieba.posseg`` was
  measured and rejected: its part-of-speech Viterbi over unknown words made it 6-7 times slower (0.31 s
  against 0.046 s for 527 MADial turns and memories, 17.5k characters) for hardly better names.

:func:`extract_tags` labels a text with a few content tags (:data:`TAGS`); :func:`query_names` finds which
known names a query mentions.

>>> extract_entities("Thanks Caroline! I ran the Berlin Marathon with Lena's brother: 42 kilometres.",
...                  speaker="Melanie")
['Melanie', 'Caroline', 'Berlin Marathon', 'Lena', '42 kilometres']
>>> extract_tags("I went to a pottery class yesterday and I loved it!")
['preference', 'event']
>>> query_names("What did caroline's sister say?", ["Caroline", "Melanie"])
['Caroline']
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable
from typing import Final

from memory_ext.text import segment
from memory_ext.text.script import CJK_RE, HAN, HAN_RE
from memory_ext.text.sentences import is_sentence_start as _is_sentence_start
from memory_ext.text.tokenize import EN_STOP_WORDS, ZH_STOP_CHARS

__all__ = [
    "EN_STOP_CAPS",
    "TAGS",
    "extract_entities",
    "extract_tags",
    "query_names",
]

#: Capitalised words that are not names: pronouns and their contractions, determiners, conjunctions,
#: question words, interjections, greetings, courtesy words and the commonest sentence-initial adverbs,
#: adjectives and verbs of chat ("Thanks", "Wow", "Sounds", "Glad"), chat acronyms ("LOL", "OMG"), and
#: month and weekday names (time expressions, not entities). Compared case-insensitively.
EN_STOP_CAPS: Final[frozenset[str]] = frozenset(
    """
    i i'm i've i'd i'll im ive id me my mine myself we we're we've we'll us our ours you you're you've you'll
    you'd your yours he he's she she's it it's its they they're they've their them his her him
    a an the this that these those there here there's here's what's that's let's lets
    and or but so if then because when where what who whom whose why how which while also just only even
    as at by for from in into of on to with about after before during until since than
    is are was were be been am do does did don't doesn't didn't can can't could would should will won't
    have has had isn't aren't wasn't weren't haven't hasn't must might may shall
    yes yeah yep yup no nope not ok okay sure well oh ah aw aww awww wow whoa hey hi hello hiya bye goodbye
    yay woohoo hooray yikes ugh oops whoops phew hmm umm uh meh ooh yo huh gosh geez jeez dude
    thanks thank thx please sorry congrats congratulations cheers welcome
    haha hahaha hehe lol lmao omg omgosh btw tbh imo imho idk fyi asap brb ttyl np
    good great nice cool awesome amazing wonderful fantastic perfect lovely beautiful glad happy sad
    absolutely definitely totally exactly really very truly certainly honestly actually basically
    maybe perhaps probably anyway anyways besides still yet now today tomorrow yesterday tonight
    morning afternoon evening night day luck job
    some any every each all both many much more most other another such no none nothing something
    anything everything everyone someone anyone nobody
    sounds looks seems feels love like hope wish guess think know see look let make take keep go going
    gonna wanna gotta got get getting thinking wait check remember imagine
    one two three four five six seven eight nine ten first second third last next
    january february march april may june july august september october november december
    monday tuesday wednesday thursday friday saturday sunday mon tue tues wed thu thur thurs fri sat sun
    feb apr jun jul aug sep sept oct nov dec
    mr mrs ms dr
    """.split()
)

#: The tags :func:`extract_tags` can give, in the order it gives them. ``tool_call`` is not derived from
#: text: the caller adds it for turns that call tools.
TAGS: Final[tuple[str, ...]] = ("question", "url", "code", "number", "plan", "preference", "emotion", "event")

# ------------------------------------------------------------------------------------------ patterns

# A capitalised word starts with an upper-case Latin letter (ASCII, Latin-1, Latin Extended-A/B).
_CAP: Final = r"(?<![^\W_])[A-ZÀ-ÖØ-ÞĀ-ɏ][0-9A-Za-zÀ-ÖØ-öø-ɏ'’-]*"
_CONNECTOR_WORDS: Final = r"of|the|de|da|di|del|du|la|le|van|von|y|&"
_CAP_RUN_RE: Final = re.compile(rf"{_CAP}(?: (?:(?:{_CONNECTOR_WORDS}) ){{0,2}}{_CAP})*")
_RUN_WORD_RE: Final = re.compile(r"[^\s]+")
_CONNECTORS: Final = frozenset({"of", "the", "de", "da", "di", "del", "du", "la", "le", "van", "von", "y", "&"})
_POSSESSIVE_RE: Final = re.compile(r"(?:'s|’s|'|’)$")

_QUOTE_RE: Final = re.compile(
    r'"(?P<a>[^"\n]{1,60}?)"'
    r"|“(?P<b>[^”\n]{1,60}?)”"
    # single quotes: an apostrophe inside ("'Charlotte's Web'") is one followed by a letter
    r"|(?<![^\W_])'(?P<c>(?:[^'\n]|'(?=[^\W\d_])){1,60}?)'(?![^\W_])"
    r"|(?<![^\W_])‘(?P<d>(?:[^’\n]|’(?=[^\W\d_])){1,60}?)’(?![^\W_])"
    r"|「(?P<e>[^」\n]{1,40})」|『(?P<f>[^』\n]{1,40})』|《(?P<g>[^》\n]{1,40})》"
)
_MAX_QUOTE_WORDS: Final = 6

_EN_NUMBER_WORDS: Final = (
    "two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|fifteen|twenty|thirty|forty|fifty|hundred"
    "|thousand|dozen"
)
_HAS_DIGIT_RE: Final = re.compile(r"[0-9$€£¥]")
_NUMBER_WORD_RE: Final = re.compile(  # on lower-cased text: two dogs
    rf"(?<![^\W_])(?:{_EN_NUMBER_WORDS})\s+(?P<plural>[a-z]{{2,}}s)\b"
)
_NUMBER_RE: Final = re.compile(
    r"(?:US|A|C)?[$€£¥]\s?\d[\d,]*(?:\.\d+)?(?:\s?(?:k|m|bn|million|billion|thousand)\b)?"  # $200, €1.5m
    r"|\b\d+(?:\.\d+)?\s?%"  # 10%
    r"|\b\d+(?:\.\d+)?(?:km|k|kg|lbs?|mi|m|cm|mm|ml|l|hrs?|h|mins?|g|mph|gb|mb|tb|ft|oz|x)\b"  # 5km
    # 60 kilometres, 3 kids, 1,200 people (not a year: "in 2019 things changed")
    r"|\b(?!(?:19|20)\d\d\b)\d{1,3}(?:,\d{3})*(?:\.\d+)?\s+(?P<unit>(?-i:[a-z]{2,}(?:-[a-z]+)?))\b",
    re.IGNORECASE,
)
#: Words after a number that are not its unit.
_NOT_UNITS: Final = EN_STOP_WORDS | {
    "am", "pm", "st", "nd", "rd", "th", "or", "and", "to", "more", "less", "other", "others", "times", "ago",
    "january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
    "november", "december", "jan", "feb", "mar", "apr", "jun", "jul", "aug", "sep", "sept", "oct", "nov", "dec",
}
_ZH_CLASSIFIERS: Final = "个只条位本件张部辆台家杯盘首幅双套座所间棵朵匹头"
_ZH_UNITS: Final = (
    "公里|千米|米|厘米|毫米|公斤|千克|克|斤|升|毫升|元|块钱|块|毛|欧元|美元|英镑|日元|人民币|岁|个小时|小时|分钟|"
    "个月|周|年|天|次|遍|倍|层|楼"
)
_ZH_NUMBER_RE: Final = re.compile(
    rf"(?P<num>\d+(?:\.\d+)?|[二两三四五六七八九十百千万]+[一二两三四五六七八九十百千万]*)"
    rf"(?:(?P<unit>%|{_ZH_UNITS})|(?P<cls>[{_ZH_CLASSIFIERS}])(?P<noun>[{HAN}]{{1,2}}))"
)
_ZH_NOUN_STOP: Final = ZH_STOP_CHARS | frozenset("前后左右以之多少几半起")

# Common Chinese surnames (the most frequent ~100, which cover about 85% of the population).
_ZH_SURNAMES: Final = frozenset(
    "王李张刘陈杨黄赵吴周徐孙马朱胡郭何高林罗郑梁谢宋唐许韩冯邓曹彭曾肖田董袁潘于蒋蔡余杜叶程苏魏吕丁任沈"
    "姚卢姜崔钟谭陆汪范金石廖贾夏韦付方白邹孟熊秦邱江尹薛闫段雷侯龙史陶黎贺顾毛郝龚邵万钱严覃武戴莫孔向汤"
)
# Characters used to transliterate foreign names (迪士尼, 辛普森, 福尔摩斯).
_ZH_TRANSLIT: Final = frozenset(
    "阿埃艾爱安奥巴贝本比彼波伯布查达戴丹德迪蒂杜多尔恩法菲芬费弗福盖甘戈格哥古哈海汉豪赫亨霍基吉加杰捷卡凯坎康"
    "柯科克肯库拉莱兰朗劳勒雷里丽利莉琳隆卢鲁路伦罗洛马迈麦曼梅蒙米密莫默姆穆纳娜内尼妮宁纽诺欧帕佩皮普奇齐乔琼"
    "萨塞桑森沙莎尚舍斯松苏索塔泰汤特提托瓦威维温沃乌西希谢辛休雅亚扬耶伊因尤约泽扎詹珍兹佐士黎敦"
)
_ZH_NAME_FLAGS: Final = frozenset({"nr", "nrfg", "nrt"})
_HAN_RE: Final = HAN_RE
_HAN_RE_RUNS: Final = re.compile(f"[{HAN}]+")
_CJK_RE: Final = CJK_RE

# Pronouns and particles that never begin or end a name (我别, 太棒了): a narrower set than ZH_STOP_CHARS,
# which also holds 上, 下, 一... (上海, 下北泽).
_ZH_EDGE_STOP: Final = frozenset("的了是在吗呢吧啊呀哦嗯么和与就也都又很着过得地这那哪啥"
                                  "我你他她它们把被让给对从为向跟比还再才")
_ZH_PLACE_SUFFIXES: Final = frozenset("国省市州县区镇乡村京都城山湖河江海岛港湾津门庄街路")

# ------------------------------------------------------------------------------------------ English names


def _is_acronym(word: str) -> bool:
    letters = [c for c in word if c.isalpha()]
    return len(letters) >= 2 and all(c.isupper() for c in letters)


def _english_names(text: str, known: frozenset[str]) -> list[tuple[int, str]]:
    """(offset, name) of runs of capitalised words, split at stop words, possessives cut.

    Up to two connectors ("of", "the", "de"...) may join two capitalised words ("Museum of Modern Art").
    """
    runs: list[list[tuple[int, str]]] = []
    for cap in _CAP_RUN_RE.finditer(text):
        current: list[tuple[int, str]] = []
        pending: list[tuple[int, str]] = []  # connectors waiting for the next capitalised word
        for m in _RUN_WORD_RE.finditer(cap.group()):
            word = m.group()
            pos = cap.start() + m.start()
            base = _POSSESSIVE_RE.sub("", word) or word
            lower = base.lower()
            if lower in _CONNECTORS and not base[0].isupper():
                if current:
                    pending.append((pos, word))
                continue
            if lower in EN_STOP_CAPS or not (base[0].isupper() and (len(base) > 1 or _is_acronym(base))):
                if current:
                    runs.append(current)
                current, pending = [], []
                continue
            current.extend(pending)
            pending = []
            current.append((pos, base))
            if base != word:  # a possessive ends the run
                runs.append(current)
                current = []
        if current:
            runs.append(current)

    mid_sentence = {w.lower() for run in runs for pos, w in run if not _is_sentence_start(text, pos)}
    out: list[tuple[int, str]] = []
    for run in runs:
        pos, first = run[0]
        if (len(run) == 1 and _is_sentence_start(text, pos) and not _is_acronym(first)
                and first.lower() not in mid_sentence and first.lower() not in known):
            continue
        out.append((pos, text[pos : run[-1][0] + len(run[-1][1])]))
    return out


# ------------------------------------------------------------------------------------------ others


def _quoted(text: str) -> tuple[list[tuple[int, str]], list[tuple[int, int]]]:
    """Quoted terms, and the spans of those that are titles (every word capitalised)."""
    out: list[tuple[int, str]] = []
    titles: list[tuple[int, int]] = []
    if not any(q in text for q in "\"'“‘「『《"):
        return out, titles
    for m in _QUOTE_RE.finditer(text):
        group = m.lastgroup or ""
        term = (m.group(group) or "").strip().strip(",.;:!?，。！？；：")
        words = term.split()
        if term and len(words) <= _MAX_QUOTE_WORDS:
            out.append((m.start(group), term))
            if all(w[0].isupper() or w.lower() in _CONNECTORS for w in words):
                titles.append(m.span(group))
    return out, titles


def _numbers(text: str) -> list[tuple[int, str]]:
    out = []
    if _HAS_DIGIT_RE.search(text):
        for m in _NUMBER_RE.finditer(text):
            unit = m.group("unit")
            if unit is None or unit.lower() not in _NOT_UNITS:
                out.append((m.start(), m.group().strip()))
    lower = text.lower()
    if len(lower) == len(text):  # offsets stay valid
        for m in _NUMBER_WORD_RE.finditer(lower):
            if m.group("plural") not in _NOT_UNITS:
                out.append((m.start(), text[m.start() : m.end()]))
    if not text.isascii():
        for m in _ZH_NUMBER_RE.finditer(text):
            if m.group("cls"):
                noun = m.group("noun")
                cut = next((i for i, c in enumerate(noun) if c in _ZH_NOUN_STOP), len(noun))
                if cut == 0:
                    continue
                out.append((m.start(), m.group()[: m.end("cls") - m.start() + cut]))
            else:
                out.append((m.start(), m.group()))
    return out


def _zh_name_shaped(word: str, in_dict: bool) -> bool:
    """Whether a word looks like a person's name: 李明, 王小明, 小红, 老王, 阿黄, 浩浩, 辛普森."""
    n = len(word)
    if n >= 3 and all(c in _ZH_TRANSLIT for c in word):
        return True
    if in_dict:  # dictionary "names" of native shape are mostly common words (明白, 谢谢, 胡萝卜, 夏令营)
        return False
    if n in (2, 3) and (word[0] in _ZH_SURNAMES or word[0] in "小老阿") and word[1] != word[0]:
        return True
    return (n == 2 and word[0] == word[1]) or (n == 2 and all(c in _ZH_TRANSLIT for c in word))


def _zh_proper_nouns(text: str) -> list[tuple[int, str]]:
    """Chinese names and places from jieba's segmentation and its dictionary's part-of-speech tags.

    ``jieba.posseg`` would also tag the words jieba does not know, but its Viterbi over ~250 part-of-speech
    states is 6-7 times slower than plain segmentation (~2.6 µs per character). So the dictionary's tags are
    looked up directly and unknown words (李明, 小红) are judged by their shape.
    """
    words = segment.dictionary()
    out = []
    for han in _HAN_RE_RUNS.finditer(text):
        offset = han.start()
        for word in words.lcut(han.group()):
            n = len(word)
            if 2 <= n <= 8 and word[0] not in _ZH_EDGE_STOP and word[-1] not in _ZH_EDGE_STOP:
                freq, tag = words.freq_tag(word)
                in_dict = freq > 0
                flag = tag if in_dict else ""
                if flag == "nt" or (n >= 3 and flag == "ns"):
                    keep = True
                elif flag == "ns":  # 北京, 杭州, 美国, 巴黎 -- not 东西, 美丽 (tagged ns by jieba's dictionary)
                    keep = word[-1] in _ZH_PLACE_SUFFIXES or all(c in _ZH_TRANSLIT for c in word)
                elif in_dict:
                    keep = flag in _ZH_NAME_FLAGS and _zh_name_shaped(word, True)
                else:  # unknown to the dictionary: a name, or a place with a place suffix (临平镇)
                    keep = _zh_name_shaped(word, False) or word[-1] in _ZH_PLACE_SUFFIXES
                if keep:
                    out.append((offset, word))
            offset += n
    return out


def extract_entities(text: str, *, speaker: str | None = None, known: Collection[str] = ()) -> list[str]:
    """Entities of ``text``, deduplicated case-insensitively, in order of first appearance.

    ``speaker`` (when given) comes first. ``known`` holds names already known in the namespace (speakers,
    earlier entities): a sentence-initial capitalised word is kept when it is one of them.

    >>> extract_entities("Wow, LGBTQ rights! Porto was lovely. I read 'Charlotte's Web' to my 3 kids.")
    ['LGBTQ', "Charlotte's Web", '3 kids']
    >>> extract_entities("Porto was lovely.", known={"porto"})
    ['Porto']
    """
    known_lower = frozenset(k.lower() for k in known)
    found: list[tuple[int, str]] = []
    if text:
        quoted, titles = _quoted(text)
        found.extend(
            (pos, name) for pos, name in _english_names(text, known_lower)
            if not any(s <= pos and pos + len(name) <= e and name != text[s:e] for s, e in titles)
        )  # a quoted title is one entity, not one per capitalised word
        found.extend(quoted)
        found.extend(_numbers(text))
        if not text.isascii() and _HAN_RE.search(text):
            found.extend(_zh_proper_nouns(text))
    found.sort(key=lambda item: item[0])
    out: list[str] = []
    seen: set[str] = set()
    for name in ([speaker] if speaker else []) + [name for _, name in found]:
        name = name.strip()
        key = name.casefold()
        if name and key not in seen:
            seen.add(key)
            out.append(name)
    return out


# ------------------------------------------------------------------------------------------ tags

_URL_RE: Final = re.compile(r"\bhttps?://\S+|\bwww\.[^\s/]+\.\S+", re.IGNORECASE)
_W: Final = r"(?<![^\W_])"  # at the start of a word: spares trying every alternative inside words


def _tag_re(english: str, chinese: str = "") -> tuple[re.Pattern[str], re.Pattern[str] | None]:
    """(pattern over the lower-cased text, pattern for Chinese text or ``None``)."""
    return re.compile(english, re.MULTILINE), re.compile(chinese) if chinese else None


_TAG_PATTERNS: Final[dict[str, tuple[re.Pattern[str], re.Pattern[str] | None]]] = {
    "question": _tag_re(
        r"[?？]|^\s*(?:what|when|where|who|whom|whose|why|how|which)\s+(?:is|are|was|were|do|does|did|can"
        r"|could|would|will|should|have|has|had|about|many|much|long|often|time|kind)\b",
        r"(?:吗|什么|怎么样|为什么)\s*[。.!！~～]*\s*$",
    ),
    # code-like syntax: backticks, calls such as a.b() or snake_case(, a line ending in { } or ;, =>, ==, !=
    # (the cheap _CODE_CHARS test runs first), or a Python definition or import line
    "code": _tag_re(
        r"```|`[^`\n]+`|^\s*(?:def|class)\s+\w+\s*[(:]|^\s*(?:import\s+[\w.]+\s*$|from\s+[\w.]+\s+import\s)"
        r"|^\s*(?:const|let|var)\s+\w+\s*=|(?<![^\W_])(?:function\s*\w*\s*\(|\w+(?:\.\w+)+\([^)]*\)"
        r"|[a-z]+_[a-z_]+\()|[{};]\s*$|=>|==|!="
    ),
    "number": _tag_re(r"\d", r"[二两三四五六七八九十百千万][个只条位本件张次天年岁公米元块]"),
    "plan": _tag_re(
        rf"{_W}(?:will|going\s+to|gonna|plan(?:s|ned|ning)?|intend(?:s|ed)?|hope\s+to|about\s+to"
        r"|looking\s+forward)\b|'ll\b|’ll\b",
        r"打算|计划|准备|将要|安排|想要去|要去",
    ),
    "preference": _tag_re(
        rf"{_W}(?:love[sd]?|loving|adore[sd]?|prefer(?:s|red)?|favou?rite|hate[sd]?|enjoy(?:s|ed)?"
        r"|can't\s+stand|(?:i|you|we|they|really|also|don't|do|would|'d)\s+like|likes)\b",
        r"喜欢|讨厌|最爱|爱吃|爱好|偏爱|热爱|受不了",
    ),
    "emotion": _tag_re(
        rf"{_W}(?:feel(?:s|ing)?|felt|happy|sad|excited|thrilled|proud|angry|upset|anxious|nervous|stressed"
        r"|worried|scared|afraid|lonely|grateful|thankful|glad|disappointed|frustrated|overwhelmed|depressed"
        r"|heartbroken|relieved|joy|cried|crying)\b",
        r"开心|高兴|难过|伤心|生气|焦虑|紧张|害怕|激动|兴奋|失望|感动|孤独|郁闷|担心|幸福|快乐|委屈|心情|感觉",
    ),
    "event": _tag_re(
        rf"{_W}(?:went|visited|attended|joined|met|travel(?:l)?ed|moved|started|finished|graduated|married"
        r"|bought|adopted|celebrated|participated|took\s+part|ran|won|hosted)\b",
        r"去了|参加|参观|去过|见了|旅行|旅游|搬家|毕业|结婚|买了|庆祝|举办",
    ),
}


_CODE_CHARS: Final = frozenset("`(){};=")
_CODE_LINE_RE: Final = re.compile(r"^\s*(?:def|class|import|from)\s", re.MULTILINE)


def extract_tags(text: str) -> list[str]:
    """Content tags of ``text``, a subset of :data:`TAGS` in that order.

    ``question``: a ?/？, a leading question word with its verb ("How did...", not "When I was..."), or a
    Chinese question particle at the end; ``url``: a link; ``code``: backticks or code-like syntax
    (``def f(``, ``a.b()``, ``=>``...); ``number``: a digit or a counted Chinese numeral; ``plan``: will /
    going to / plan / 打算 / 计划...; ``preference``: love / prefer / favourite / hate / 喜欢 / 讨厌...;
    ``emotion``: feel / happy / sad / 开心 / 难过...; ``event``: went / visited / attended / 去了 / 参加....
    The lists are short on purpose: a tag is a hint for routing, not a classifier.

    >>> extract_tags("打算下个月去杭州，你喜欢西湖吗？")
    ['question', 'plan', 'preference']
    """
    if not text:
        return []
    tags = []
    body = text
    if ("http" in text or "www." in text) and _URL_RE.search(text):
        body = _URL_RE.sub(" ", text)
    code_body = body
    body = body.lower()
    chinese = not body.isascii()
    for tag in TAGS:
        if tag == "url":
            if code_body is not text:
                tags.append(tag)
            continue
        english, zh = _TAG_PATTERNS[tag]
        if tag == "code" and not (_CODE_CHARS.intersection(code_body) or _CODE_LINE_RE.search(code_body)):
            continue
        if english.search(code_body if tag == "code" else body) or (chinese and zh and zh.search(body)):
            tags.append(tag)
    return tags


# ------------------------------------------------------------------------------------------ query names

_APOS: Final = str.maketrans({"’": "'", "‘": "'", "ʼ": "'"})


def query_names(query: str, known: Iterable[str]) -> list[str]:
    """The names of ``known`` that ``query`` mentions, in order of first mention, each once.

    Latin names match whole words case-insensitively, a possessive included ("caroline's" -> "Caroline");
    names with CJK characters match as substrings. When two matches overlap the longer wins ("北京大学"
    over "北京", "Berlin Marathon" over "Berlin").

    >>> query_names("北京大学和Lena's plans?", ["北京", "北京大学", "Lena", "Len"])
    ['北京大学', 'Lena']
    """
    q = query.translate(_APOS).casefold()
    hits: list[tuple[int, int, str]] = []
    seen: set[str] = set()
    for name in known:
        name = name.strip()
        key = name.translate(_APOS).casefold()
        if not key or key in seen or key not in q:  # the substring test rejects most names cheaply
            continue
        seen.add(key)
        if _CJK_RE.search(key):
            pattern = re.escape(key)
        else:  # whole words; "caroline's" matches because "'" is not a word character
            pattern = rf"(?<![0-9a-z\u00df-\u024f]){re.escape(key)}(?![0-9a-z\u00df-\u024f])"
        hits.extend((m.start(), m.end(), name) for m in re.finditer(pattern, q))
    hits.sort(key=lambda h: (h[0], h[0] - h[1]))
    out: list[str] = []
    taken: set[str] = set()
    covered_end = -1
    for start, end, name in hits:
        if start < covered_end:  # inside a longer earlier match
            continue
        covered_end = end
        if name not in taken:
            taken.add(name)
            out.append(name)
    return out
