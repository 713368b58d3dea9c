"""The English rules of :mod:`memory_ext.text.timeexpr`: counts, resolvers and the rule table.

A rule is ``(name, pattern, handler)``; :data:`EN_RULES` is tried in order at each position (the first rule
that matches wins). The calendar rules are described in the docstring of :mod:`memory_ext.text.timeexpr`.

>>> en_count("a couple of"), en_count("12"), en_count("zero")
((2, 3, False), (12, 12, True), None)
"""

from __future__ import annotations

from datetime import date, timedelta
from typing import Final

from .timecalendar import (
    CONF_ABSOLUTE,
    CONF_DAY,
    CONF_FORWARD,
    CONF_GUESSED,
    CONF_OTHER_DAY,
    CONF_PERIOD,
    CONF_VAGUE,
    SEASONS,
    UNITS,
    Rule,
    Span,
    absolute_day,
    count_span,
    day_span,
    month_index,
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

__all__ = ["EN_RULES", "en_count"]


_EN_NUMBERS: Final = {
    "a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
    "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13, "fourteen": 14,
    "fifteen": 15, "sixteen": 16, "seventeen": 17, "eighteen": 18, "nineteen": 19, "twenty": 20,
}
#: Vague English counts -> (low, high).
_EN_VAGUE: Final = {"couple": (2, 3), "few": (2, 4), "several": (3, 6)}


def en_count(raw: str) -> tuple[int, int, bool] | None:
    """(low, high, exact) of an English count: ``3``, ``two``, ``a``, ``a couple of``, ``a few``..."""
    word = raw.lower().split()
    key = next((w for w in word if w in _EN_VAGUE), None)
    if key is not None:
        lo, hi = _EN_VAGUE[key]
        return lo, hi, False
    token = word[0]
    if token.isdigit():
        n = int(token)
        return (n, n, True) if n > 0 else None
    n = _EN_NUMBERS.get(token, 0)
    return (n, n, True) if n else None


_MONTHS: Final = {
    "january": 1, "february": 2, "march": 3, "april": 4, "may": 5, "june": 6, "july": 7, "august": 8,
    "september": 9, "october": 10, "november": 11, "december": 12,
    "jan": 1, "feb": 2, "mar": 3, "apr": 4, "jun": 6, "jul": 7, "aug": 8, "sep": 9, "sept": 9, "oct": 10,
    "nov": 11, "dec": 12,
}
_WEEKDAYS: Final = {
    "monday": 0, "tuesday": 1, "wednesday": 2, "thursday": 3, "friday": 4, "saturday": 5, "sunday": 6,
    "mon": 0, "tue": 1, "tues": 1, "wed": 2, "thu": 3, "thur": 3, "thurs": 3, "fri": 4, "sat": 5, "sun": 6,
}


def _month_of(name: str) -> int:
    return _MONTHS[name.lower().rstrip(".")]


_EN_REL_STEP: Final = {"last": -1, "this past": -1, "past": -1, "previous": -1, "this": 0, "current": 0,
                       "next": 1, "coming": 1, "this coming": 1}


def _en_iso(g: dict[str, str | None], d0: date) -> Span | None:
    return absolute_day(int(text_of(g, "y")), int(text_of(g, "m")), int(text_of(g, "d")))


def _en_slash(g: dict[str, str | None], d0: date) -> Span | None:
    a, b, y = int(text_of(g, "a")), int(text_of(g, "b")), int(text_of(g, "y"))
    # "/" is read month first (05/08/2023 = May 8) and "." day first (08.05.2023 = May 8), unless the first
    # number cannot be a month
    day_first = text_of(g, "sep") == "." or a > 12
    month, day = (b, a) if day_first else (a, b)
    return absolute_day(y, month, day, CONF_GUESSED)


def _en_dmy(g: dict[str, str | None], d0: date) -> Span | None:
    return absolute_day(int(text_of(g, "y")), _month_of(text_of(g, "mon")), int(text_of(g, "d")))


def _en_day_month(g: dict[str, str | None], d0: date) -> Span | None:
    day = nearest_day(_month_of(text_of(g, "mon")), int(text_of(g, "d")), d0)
    return None if day is None else (*day_span(day), "day", CONF_DAY)


def _en_month_year(g: dict[str, str | None], d0: date) -> Span | None:
    return (*month_span(int(text_of(g, "y")) * 12 + _month_of(text_of(g, "mon")) - 1), "month", CONF_ABSOLUTE)


def _en_mod_month(g: dict[str, str | None], d0: date) -> Span | None:
    month = _month_of(text_of(g, "mon"))
    mod = " ".join(text_of(g, "mod").lower().split())
    if g.get("y"):
        return (*month_span(int(text_of(g, "y")) * 12 + month - 1), "month", CONF_ABSOLUTE)
    ref = month_index(d0)
    if mod in ("last", "this past", "past", "previous"):
        index = ref - ((ref % 12 - (month - 1)) % 12 or 12)
    elif mod in ("next", "this coming", "coming"):
        index = ref + (((month - 1) - ref % 12) % 12 or 12)
    elif mod == "this":
        index = d0.year * 12 + month - 1
    else:
        index = nearest_month(month, d0)
    return (*month_span(index), "month", CONF_PERIOD)


def _en_year(g: dict[str, str | None], d0: date) -> Span | None:
    return (*year_span(int(text_of(g, "y"))), "year", CONF_ABSOLUTE)


def _en_season(g: dict[str, str | None], d0: date) -> Span | None:
    season = SEASONS[text_of(g, "season").lower()]
    if g.get("y"):
        return (*season_span(season, int(text_of(g, "y"))), "season", CONF_GUESSED)
    mod = " ".join(text_of(g, "mod").lower().split())
    mode = {"last": "last", "this past": "last", "past": "last", "previous": "last", "this": "this",
            "next": "next", "this coming": "next", "coming": "next"}[mod]
    return (*resolve_season(season, mode, d0), "season", CONF_VAGUE)


_EN_DAY_WORDS: Final = {"today": 0, "tonight": 0, "yesterday": -1, "tomorrow": 1}


def _en_day_word(g: dict[str, str | None], d0: date) -> Span | None:
    word = " ".join(text_of(g, "w").lower().split())
    if word.startswith("the day before"):
        k = -2
    elif word.startswith("the day after"):
        k = 2
    elif word == "last night":
        k = -1
    elif word.startswith("this"):  # this morning / afternoon / evening
        k = 0
    else:
        k = _EN_DAY_WORDS[word]
    return (*day_span(d0 + timedelta(days=k)), "day", CONF_DAY)


def _en_ago(g: dict[str, str | None], d0: date) -> Span | None:
    count = en_count(text_of(g, "n"))
    if count is None:
        return None
    unit = UNITS[text_of(g, "unit").lower()]
    sign = 1 if g.get("fwd") else -1
    return count_span(unit, count[0], count[1], count[2], d0, sign)


def _en_rolling(g: dict[str, str | None], d0: date) -> Span | None:
    count = en_count(text_of(g, "n")) if g.get("n") else None
    if g.get("n") and count is None:
        return None
    forward = text_of(g, "dir").lower() in ("next", "coming")
    return rolling(UNITS[text_of(g, "unit").lower()], count, d0, forward)


def _en_rel_unit(g: dict[str, str | None], d0: date) -> Span | None:
    mod = " ".join(text_of(g, "mod").lower().split())
    unit = UNITS[text_of(g, "unit").lower()]
    k = -2 if g.get("before_last") else _EN_REL_STEP[mod]
    return rel_period(unit, k, d0)


def _en_the_weekend(g: dict[str, str | None], d0: date) -> Span | None:
    return (*nearest_weekend(d0), "week", CONF_VAGUE)


def _en_other_day(g: dict[str, str | None], d0: date) -> Span | None:
    return d0 - timedelta(days=6), d0, "day", CONF_OTHER_DAY


def _en_weekday(g: dict[str, str | None], d0: date) -> Span | None:
    wd = _WEEKDAYS[text_of(g, "wd").lower().rstrip(".")]
    mod = " ".join(text_of(g, "mod").lower().split())
    if mod in ("last", "this past", "past", "previous"):
        day = d0 - timedelta(days=(d0.weekday() - wd - 1) % 7 + 1)
    elif mod in ("next", "this coming", "coming"):
        day = d0 + timedelta(days=(wd - d0.weekday() - 1) % 7 + 1)
    elif mod == "this":
        day = week_start(d0) + timedelta(days=wd)
    else:
        return (*day_span(nearest_weekday(wd, d0)), "day", CONF_FORWARD)
    return (*day_span(day), "day", CONF_DAY)



# ------------------------------------------------------------------------------------------ patterns

_MONTH_NAMES: Final = (
    r"(?-i:January|February|March|April|May|June|July|August|September|October|November|December"
    r"|Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sept|Sep|Oct|Nov|Dec)"
)
_MONTH: Final = rf"(?P<mon>{_MONTH_NAMES}\b(?:\.(?=\s*\d))?)"
_MONTH_FULL: Final = (
    r"(?P<mon>(?-i:January|February|March|April|May|June|July|August|September|October|November|December))"
)
_DAY_NUM: Final = r"(?P<d>3[01]|[12]\d|0?[1-9])(?:st|nd|rd|th)?"
_YEAR: Final = r"(?P<y>(?:19|20)\d\d)"
_EN_COUNT: Final = (
    r"(?P<n>\d{1,3}|a\s+couple(?:\s+of)?|couple\s+of|a\s+few|few|several|an?|one|two|three|four|five|six"
    r"|seven|eight|nine|ten|eleven|twelve|thirteen|fourteen|fifteen|sixteen|seventeen|eighteen|nineteen"
    r"|twenty)"
)
_EN_UNITS: Final = r"(?P<unit>days?|weeks?|weekends?|fortnights?|months?|years?)"
_WEEKDAY_FULL: Final = r"monday|tuesday|wednesday|thursday|friday|saturday|sunday"
_WEEKDAY_ABBR: Final = r"(?-i:Mon|Tues|Tue|Wed|Thurs|Thur|Thu|Fri|Sat|Sun)"
_REL_MOD: Final = r"this\s+past|this\s+coming|last|next|this|past|previous|coming"

#: English rules, in priority order: at one position the first rule that matches wins.
EN_RULES: Final[list[Rule]] = [
    ("iso", r"\b(?P<y>\d{4})-(?P<m>\d{1,2})-(?P<d>\d{1,2})\b|\b(?P<y2>\d{4})/(?P<m2>\d{1,2})/(?P<d2>\d{1,2})\b",
     lambda g, d0: _en_iso({"y": g["y"] or g["y2"], "m": g["m"] or g["m2"], "d": g["d"] or g["d2"]}, d0)),
    ("slash", r"\b(?P<a>\d{1,2})(?P<sep>[/.])(?P<b>\d{1,2})[/.](?P<y>\d{4})\b", _en_slash),
    ("day_word", r"\b(?P<w>the\s+day\s+before\s+yesterday|the\s+day\s+after\s+tomorrow|last\s+night"
                 r"|this\s+(?:morning|afternoon|evening)|today|tonight|yesterday|tomorrow)\b", _en_day_word),
    ("rolling", r"\b(?:the\s+)?(?P<dir>past|last|next|coming)\s+(?:(?P<n>\d{1,3}|a\s+couple(?:\s+of)?|couple"
                r"\s+of|few|several|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve)\s+)"
                rf"{_EN_UNITS}\b(?!\s+of\b)"
                r"|\b(?:the|over\s+the|in\s+the|during\s+the)\s+(?P<dir2>past)\s+(?P<unit2>week|month|year)\b"
                r"(?!\s+of\b)",
     lambda g, d0: _en_rolling({"dir": g["dir"] or g["dir2"], "n": g["n"],
                                "unit": g["unit"] or g["unit2"]}, d0)),
    ("the_weekend", r"\b(?:over|on|at|during)\s+the\s+weekend\b", _en_the_weekend),
    ("other_day", r"\bthe\s+other\s+day\b", _en_other_day),
    ("dmy", rf"\b(?:the\s+)?{_DAY_NUM}(?:\s+of)?\s+{_MONTH},?\s+{_YEAR}\b", _en_dmy),
    ("mdy", rf"\b{_MONTH}\s+{_DAY_NUM},?\s+{_YEAR}\b", _en_dmy),
    ("ago", rf"\b{_EN_COUNT}\s+{_EN_UNITS}\s+ago\b"
            rf"|\b(?P<fwd>in)\s+{_EN_COUNT.replace('P<n>', 'P<n2>')}\s+{_EN_UNITS.replace('P<unit>', 'P<unit2>')}"
            r"(?:'s?|’s?)?(?:\s+time)?\b"
            rf"|\b{_EN_COUNT.replace('P<n>', 'P<n3>')}\s+{_EN_UNITS.replace('P<unit>', 'P<unit3>')}"
            r"\s+(?P<fwd2>from\s+now)\b",
     lambda g, d0: _en_ago({"n": g["n"] or g["n2"] or g["n3"], "unit": g["unit"] or g["unit2"] or g["unit3"],
                            "fwd": g["fwd"] or g["fwd2"]}, d0)),
    ("dm", rf"\b(?:the\s+)?{_DAY_NUM}(?:\s+of)?\s+{_MONTH}(?!,?\s*\d)", _en_day_month),
    ("md", rf"\b{_MONTH}\s+{_DAY_NUM}\b(?!,?\s*\d)(?!\s*(?:%|am|pm|[ap]\.m\.)|:\d)", _en_day_month),
    ("month_year", rf"\b{_MONTH},?\s+{_YEAR}\b", _en_month_year),
    ("mod_month", rf"\b(?P<mod>{_REL_MOD}|in|since|early|mid-?|late|until|till|during|throughout"
                  r"|end\s+of|beginning\s+of|start\s+of|middle\s+of)\s+"
                  rf"{_MONTH_FULL}\b(?:(?:,\s*|\s+){_YEAR}\b|(?!,?\s*\d))", _en_mod_month),
    ("season", rf"\b(?P<mod>{_REL_MOD})\s+(?P<season>spring|summer|autumn|fall|winter)\b"
               r"|\b(?P<season2>spring|summer|autumn|fall|winter)\s+(?:of\s+)?(?P<y>(?:19|20)\d\d)\b",
     lambda g, d0: _en_season({"mod": g["mod"], "season": g["season"] or g["season2"], "y": g["y"]}, d0)),
    ("year", r"\b(?:in|since|during|until|till|before|after|early|late|mid-?|throughout|the\s+year|end\s+of"
             rf"|beginning\s+of|start\s+of|middle\s+of)\s+{_YEAR}\b(?!\s*(?:%|[-/]\d))", _en_year),
    ("rel_unit", rf"\b(?:the\s+(?P<unit2>week|weekend)\s+(?P<before_last>before\s+last)"
                 rf"|(?P<mod>{_REL_MOD})\s+(?P<unit>week|weekend|month|year))\b",
     lambda g, d0: _en_rel_unit({"mod": g["mod"] or "last", "unit": g["unit"] or g["unit2"],
                                 "before_last": g["before_last"]}, d0)),
    ("weekday", rf"\b(?P<mod>{_REL_MOD})\s+(?P<wd>{_WEEKDAY_FULL}|{_WEEKDAY_ABBR})(?!s\b)(?=\W|$)"
                rf"|\bon\s+(?P<wd2>{_WEEKDAY_FULL}|{_WEEKDAY_ABBR})"
                r"(?=\W|$)(?!\s+(?-i:school|best)\b)"
                r"|(?<!\bGood\s)(?<!\bBlack\s)(?<!\bCyber\s)(?<!\bEaster\s)(?<!\bPalm\s)(?<!\bAsh\s)(?<!\bevery\s)"
                r"(?<!\beach\s)\b(?P<wd3>(?-i:Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday))\b"
                r"(?!\s+(?-i:school|best|paper|papers)\b)",
     lambda g, d0: _en_weekday({"mod": g["mod"], "wd": g["wd"] or g["wd2"] or g["wd3"]}, d0)),
]
