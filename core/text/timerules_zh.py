"""The Chinese rules of :mod:`memory_ext.text.timeexpr`: numerals, resolvers and the rule table.

:data:`ZH_RULES` is tried in order at each position, on text that contains Han characters only. The
calendar rules (上周六 is the Saturday of the previous calendar week...) are described in the docstring of
:mod:`memory_ext.text.timeexpr`.

>>> _zh_int("二十三"), _zh_int("二〇二三"), _zh_count("两三")
(23, 2023, (2, 3, False))
"""

from __future__ import annotations

from datetime import date, timedelta
from typing import Final

from .timecalendar import (
    CONF_ABSOLUTE,
    CONF_DAY,
    CONF_FORWARD,
    CONF_GUESSED,
    CONF_PERIOD,
    CONF_VAGUE,
    SEASONS,
    UNITS,
    Rule,
    Span,
    absolute_day,
    count_span,
    day_span,
    month_span,
    nearest_day,
    nearest_month,
    nearest_weekday,
    nearest_weekend,
    rel_period,
    resolve_season,
    rolling,
    season_span,
    text_of,
    week_start,
    year_span,
)

__all__ = ["ZH_RULES"]


_ZH_DIGITS: Final = {"零": 0, "〇": 0, "一": 1, "二": 2, "两": 2, "三": 3, "四": 4, "五": 5, "六": 6,
                     "七": 7, "八": 8, "九": 9}


def _zh_int(s: str) -> int | None:
    """Chinese or Arabic numeral up to 99, or digit-by-digit (二〇二三); ``None`` if not a number."""
    if s.isdecimal():
        return int(s)
    if "十" in s:
        tens, _, ones = s.partition("十")
        if len(tens) > 1 or len(ones) > 1:
            return None
        t = _ZH_DIGITS.get(tens, -1) if tens else 1
        o = _ZH_DIGITS.get(ones, -1) if ones else 0
        return None if t < 0 or o < 0 else t * 10 + o
    if s and all(c in _ZH_DIGITS for c in s):
        return int("".join(str(_ZH_DIGITS[c]) for c in s))
    return None


def _zh_count(raw: str) -> tuple[int, int, bool] | None:
    if raw == "几":
        return 2, 4, False
    if raw == "好几":
        return 3, 6, False
    if len(raw) == 2 and "十" not in raw and all(c in _ZH_DIGITS for c in raw):
        lo, hi = _ZH_DIGITS[raw[0]], _ZH_DIGITS[raw[1]]
        if 0 < lo < hi:
            return lo, hi, False  # 两三天前, 一两个月前
    n = _zh_int(raw)
    return (n, n, True) if n else None


_ZH_WEEKDAYS: Final = {"一": 0, "二": 1, "三": 2, "四": 3, "五": 4, "六": 5, "日": 6, "天": 6}


def _zh_year(raw: str) -> int | None:
    y = _zh_int(raw)
    return y if y is not None and 1000 <= y <= 2999 else None


_ZH_YEAR_WORDS: Final = {"大前年": -3, "前年": -2, "去年": -1, "今年": 0, "明年": 1, "后年": 2}


def _zh_ymd(g: dict[str, str | None], d0: date) -> Span | None:
    y, m = _zh_year(text_of(g, "y")), _zh_int(text_of(g, "m"))
    if y is None or m is None:
        return None
    if g.get("d"):
        d = _zh_int(text_of(g, "d"))
        return None if d is None else absolute_day(y, m, d)
    if not 1 <= m <= 12:
        return None
    return (*month_span(y * 12 + m - 1), "month", CONF_ABSOLUTE)


def _zh_y(g: dict[str, str | None], d0: date) -> Span | None:
    y = _zh_year(text_of(g, "y"))
    return None if y is None else (*year_span(y), "year", CONF_ABSOLUTE)


def _zh_md(g: dict[str, str | None], d0: date) -> Span | None:
    m = _zh_int(text_of(g, "m"))
    if m is None or not 1 <= m <= 12:
        return None
    year_word = g.get("yw")
    year = d0.year + _ZH_YEAR_WORDS[year_word] if year_word else None
    if g.get("d"):
        d = _zh_int(text_of(g, "d"))
        if d is None:
            return None
        if year is not None:
            return absolute_day(year, m, d, CONF_DAY)
        day = nearest_day(m, d, d0)
        return None if day is None else (*day_span(day), "day", CONF_DAY)
    index = year * 12 + m - 1 if year is not None else nearest_month(m, d0)
    return (*month_span(index), "month", CONF_PERIOD)


def _zh_season(g: dict[str, str | None], d0: date) -> Span | None:
    season = SEASONS[text_of(g, "season")]
    if g.get("y"):
        y = _zh_year(text_of(g, "y"))
        return None if y is None else (*season_span(season, y), "season", CONF_GUESSED)
    word = text_of(g, "yw")
    if word in ("今年", "这个"):
        return (*resolve_season(season, "this", d0), "season", CONF_VAGUE)
    if word == "上个":
        return (*resolve_season(season, "last", d0), "season", CONF_VAGUE)
    if word == "下个":
        return (*resolve_season(season, "next", d0), "season", CONF_VAGUE)
    return (*season_span(season, d0.year + _ZH_YEAR_WORDS[word]), "season", CONF_VAGUE)


_ZH_DAY_WORDS: Final = {"大前天": -3, "前天": -2, "昨天": -1, "昨日": -1, "昨晚": -1, "昨夜": -1, "昨儿": -1,
                        "今天": 0, "今日": 0, "今晚": 0, "今早": 0, "今夜": 0, "今儿": 0, "明天": 1,
                        "明日": 1, "明晚": 1, "明早": 1, "明儿": 1, "后天": 2, "大后天": 3}


def _zh_day_word(g: dict[str, str | None], d0: date) -> Span | None:
    return (*day_span(d0 + timedelta(days=_ZH_DAY_WORDS[text_of(g, "w")])), "day", CONF_DAY)


def _zh_step(prefix: str) -> int:
    prefix = prefix.rstrip("个")
    return {"上上": -2, "上": -1, "这": 0, "本": 0, "下": 1, "下下": 2}[prefix]


def _zh_week(g: dict[str, str | None], d0: date) -> Span | None:
    k = _zh_step(text_of(g, "p"))
    suffix = g.get("wd")
    if suffix == "末":
        return rel_period("weekend", k, d0)
    if suffix:
        day = week_start(d0) + timedelta(weeks=k, days=_ZH_WEEKDAYS[suffix])
        return (*day_span(day), "day", CONF_DAY)
    return rel_period("week", k, d0)


def _zh_month_rel(g: dict[str, str | None], d0: date) -> Span | None:
    return rel_period("month", _zh_step(text_of(g, "p")), d0)


def _zh_year_rel(g: dict[str, str | None], d0: date) -> Span | None:
    return rel_period("year", _ZH_YEAR_WORDS[text_of(g, "w")], d0)


def _zh_ago(g: dict[str, str | None], d0: date) -> Span | None:
    sign = -1 if text_of(g, "dir").endswith("前") else 1
    unit = UNITS[text_of(g, "unit")]
    raw = text_of(g, "n")
    if raw == "半":  # 半个月 = 15 days, 半年 = 6 months
        if unit == "month":
            centre = d0 + timedelta(days=15 * sign)
            return centre - timedelta(days=3), centre + timedelta(days=4), "week", CONF_PERIOD
        if unit == "year":
            return count_span("month", 6, 6, True, d0, sign)
        return None
    count = _zh_count(raw)
    if count is None:
        return None
    return count_span(unit, count[0], count[1], count[2], d0, sign)


def _zh_few(g: dict[str, str | None], d0: date) -> Span | None:
    word = text_of(g, "w")
    lo, hi = (2, 3) if "两" in word else (2, 4)
    if word.startswith("前"):
        return count_span("day", lo, hi, False, d0, -1)
    if word.startswith("过"):
        return count_span("day", lo, hi, False, d0, 1)
    return rolling("day", (lo, hi, False), d0, forward=False)  # 这几天 / 最近几天 / 这两天


def _zh_weekday(g: dict[str, str | None], d0: date) -> Span | None:
    return (*day_span(nearest_weekday(_ZH_WEEKDAYS[text_of(g, "wd")], d0)), "day", CONF_FORWARD)


def _zh_weekend(g: dict[str, str | None], d0: date) -> Span | None:
    return (*nearest_weekend(d0), "week", CONF_VAGUE)


# ------------------------------------------------------------------------------------------ patterns

_ZH_NUM: Final = r"[〇零一二两三四五六七八九十]"
_ZH_MONTH: Final = r"(?P<m>1[0-2]|0?[1-9]|十[一二]?|[一二三四五六七八九])"
_ZH_DAY: Final = (r"(?P<d>3[01]|[12]\d|0?[1-9]|三十一?|二十[一二三四五六七八九]?|"
                  r"十[一二三四五六七八九]?|[一二三四五六七八九])")
_ZH_YEAR: Final = r"(?P<y>\d{4}|[〇零一二三四五六七八九]{4})"
_ZH_NOT_IN_NUMBER: Final = rf"(?<![\d{_ZH_NUM[1:-1]}几])"
# chars that, before 前天/后天/前年/后年, make 前/后 the end of another word (以前, 之后, 然后, 最后...)
_ZH_NOT_AFTER_WORD: Final = r"(?<![以之从提目当眼面跟事生空门向先最然随落背此午饭课班])"
_ZH_SEASON: Final = r"(?P<season>[春夏秋冬])(?:天|季)"
# a weekday numeral that is really a count or the start of a word: 上周一起 (together), 这周三天 (three days)
_ZH_WD: Final = (r"(?P<wd>一(?![起直样般定些点下共边切同会块个天次周年月])|"
                 r"[二三四五六](?![天个次年月周点号位名])|[日天末](?![气空子]))")

#: Chinese rules, in priority order.
ZH_RULES: Final[list[Rule]] = [
    ("zh_ymd", rf"(?<!\d){_ZH_YEAR}年{_ZH_MONTH}月(?:份)?(?:{_ZH_DAY}[日号])?", _zh_ymd),
    ("zh_y_season", rf"(?<!\d){_ZH_YEAR}年的?{_ZH_SEASON}", _zh_season),
    ("zh_y", rf"(?<!\d){_ZH_YEAR}年(?![代级纪])", _zh_y),
    ("zh_yw_md", rf"(?P<yw>大前年|前年|去年|今年|明年|后年)的?{_ZH_MONTH}月(?:份)?(?:{_ZH_DAY}[日号])?", _zh_md),
    ("zh_yw_season", rf"(?P<yw>前年|去年|今年|明年|这个|上个|下个)的?{_ZH_SEASON}", _zh_season),
    ("zh_md", rf"{_ZH_NOT_IN_NUMBER}{_ZH_MONTH}月(?:份)?{_ZH_DAY}[日号]", _zh_md),
    ("zh_few", r"(?P<w>前几天|这几天|最近几天|过几天|前两天|这两天|过两天)", _zh_few),
    ("zh_ago", rf"{_ZH_NOT_IN_NUMBER}(?P<n>\d{{1,3}}|好几|几|半|{_ZH_NUM}{{1,3}})"
               r"(?:个(?P<unit>月|星期|礼拜)|个?(?P<unit2>天|周|星期|礼拜|年)|(?P<unit3>日))"
               r"(?P<dir>以前|之前|前|以后|之后|后)(?![面边头])",
     lambda g, d0: _zh_ago({"n": g["n"], "unit": g["unit"] or g["unit2"] or g["unit3"], "dir": g["dir"]}, d0)),
    ("zh_month", rf"{_ZH_NOT_IN_NUMBER}{_ZH_MONTH}月(?:份)?(?![亮球光饼薪])", _zh_md),
    ("zh_day_word", rf"(?P<w>大前天|大后天|{_ZH_NOT_AFTER_WORD}前天|{_ZH_NOT_AFTER_WORD}后天(?![气空性才使地下])"
                    r"|昨天|昨日|昨晚|昨夜|昨儿|今天|今日|今晚|今早|今夜|今儿|明天|明日|明晚|明早|明儿)", _zh_day_word),
    ("zh_week", r"(?P<p>上上个?|上个?|这个?|本|下下个?|下个?)(?:周|星期|礼拜)"
                rf"(?:{_ZH_WD}|(?![围边全密岁年期]))", _zh_week),
    ("zh_month_rel", r"(?P<p>上上个|上个|上|这个|本|下下个|下个|下)月(?![球亮光台饼])", _zh_month_rel),
    ("zh_year_rel", rf"(?P<w>大前年|{_ZH_NOT_AFTER_WORD}前年|去年|今年|明年|{_ZH_NOT_AFTER_WORD}后年)",
     _zh_year_rel),
    ("zh_weekday", rf"(?<![每逢个{_ZH_NUM[1:-1]}几])(?:周|星期|礼拜){_ZH_WD.replace('日天末', '日天')}", _zh_weekday),
    ("zh_weekend", r"(?<![每个])周末", _zh_weekend),
]
