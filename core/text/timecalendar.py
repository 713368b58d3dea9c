"""Calendar arithmetic and the span resolvers shared by the English and Chinese time-expression rules.

Internal to :mod:`memory_ext.text.timeexpr` (which re-exports the confidence constants and ``Granularity``):
a resolver turns a rule's named groups and the reference day into a :data:`Span` ``(start, end, granularity,
confidence)`` of whole local days, ``end`` exclusive.

>>> from datetime import date
>>> count_span("week", 2, 2, True, date(2023, 5, 8), -1)[:2]
(datetime.date(2023, 4, 21), datetime.date(2023, 4, 28))
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import date, timedelta
from typing import Final, Literal

__all__ = [
    "CONF_ABSOLUTE",
    "CONF_DAY",
    "CONF_FORWARD",
    "CONF_GUESSED",
    "CONF_OTHER_DAY",
    "CONF_PERIOD",
    "CONF_VAGUE",
    "SEASONS",
    "UNITS",
    "Granularity",
    "Handler",
    "Rule",
    "Span",
    "absolute_day",
    "count_span",
    "day_span",
    "month_index",
    "month_span",
    "nearest_day",
    "nearest_month",
    "nearest_weekday",
    "nearest_weekend",
    "rel_period",
    "resolve_season",
    "rolling",
    "season_span",
    "shift",
    "text_of",
    "week_start",
    "year_span",
]

Granularity = Literal["day", "week", "month", "season", "year"]

# ------------------------------------------------------------------------------------------ confidence

#: An explicit date with its year: "8 May 2023", "2023-05-08", "May 2023", "in 2022", "2023年5月8日".
CONF_ABSOLUTE: Final = 0.95
#: A relative day or a day without its year: "yesterday", "3 days ago", "last Saturday", "May 8", 昨天.
CONF_DAY: Final = 0.9
#: Calendar weeks, months and years: "last week", "a month ago", "in May", "next year", 上个月, 去年.
CONF_PERIOD: Final = 0.8
#: A numeric date whose day/month order is guessed (05/08/2023); a rolling window ("the past 3 days");
#: a season with its year ("summer 2022", 去年夏天); a forward count of days ("in 3 days").
CONF_GUESSED: Final = 0.7
#: A forward count of weeks, months or years ("in two weeks"; it may be a duration); a bare weekday.
CONF_FORWARD: Final = 0.6
#: Seasons without a year ("last summer"), vague counts ("a few days ago"), "the weekend", 周末.
CONF_VAGUE: Final = 0.5
#: "the other day".
CONF_OTHER_DAY: Final = 0.4


# ------------------------------------------------------------------------------------------ calendar


def week_start(d: date) -> date:
    return d - timedelta(days=d.weekday())


def month_index(d: date) -> int:
    return d.year * 12 + d.month - 1


def month_start(index: int) -> date:
    return date(index // 12, index % 12 + 1, 1)


def month_span(index: int) -> tuple[date, date]:
    return month_start(index), month_start(index + 1)


def year_span(year: int) -> tuple[date, date]:
    return date(year, 1, 1), date(year + 1, 1, 1)


def shift(d: date, unit: str, k: int) -> date:
    """``d`` moved by ``k`` days, weeks, months or years (the day clamped to the target month's length)."""
    if unit == "day":
        return d + timedelta(days=k)
    if unit == "week":
        return d + timedelta(weeks=k)
    index = month_index(d) + (12 * k if unit == "year" else k)
    first = month_start(index)
    last = (month_start(index + 1) - timedelta(days=1)).day
    return first.replace(day=min(d.day, last))


#: Season -> first month; each season lasts three months; winter belongs to the year it starts in.
_SEASON_START: Final = {"spring": 3, "summer": 6, "autumn": 9, "winter": 12}


def season_span(season: str, year: int) -> tuple[date, date]:
    first = year * 12 + _SEASON_START[season] - 1
    return month_start(first), month_start(first + 3)


def _season_of(d: date) -> tuple[str, int]:
    """The season a date falls in, with the year that season starts in."""
    for season, month in _SEASON_START.items():
        start = date(d.year if month <= d.month else d.year - 1, month, 1)
        s, e = season_span(season, start.year)
        if s <= d < e:
            return season, start.year
    raise AssertionError(d)  # pragma: no cover - the four seasons cover the year


def resolve_season(season: str, mode: str, d0: date) -> tuple[date, date]:
    """``mode`` is ``last``, ``this`` or ``next`` (see the module docstring)."""
    if mode == "this":
        current, year = _season_of(d0)
        return season_span(season, year if current == season else d0.year)
    if mode == "last":
        for year in range(d0.year, d0.year - 3, -1):
            s, e = season_span(season, year)
            if e <= d0:
                return s, e
    for year in range(d0.year - 1, d0.year + 2):  # next
        s, e = season_span(season, year)
        if s > d0:
            return s, e
    raise AssertionError((season, mode, d0))  # pragma: no cover


def nearest_month(month: int, d0: date) -> int:
    """Month index of the occurrence of ``month`` nearest to ``d0``'s month (ties go to the past)."""
    ref = month_index(d0)
    diff = (month - 1 - ref % 12) % 12  # 0..11 months ahead
    return ref + diff if diff < 6 else ref + diff - 12


def nearest_day(month: int, day: int, d0: date) -> date | None:
    """The date ``month``/``day`` nearest to ``d0`` (previous, same or next year; ties go to the past)."""
    best: date | None = None
    for year in (d0.year - 1, d0.year, d0.year + 1):
        try:
            cand = date(year, month, day)
        except ValueError:
            continue
        if best is None or abs((cand - d0).days) < abs((best - d0).days):
            best = cand
    return best


def nearest_weekday(weekday: int, d0: date) -> date:
    return d0 + timedelta(days=(weekday - d0.weekday() + 3) % 7 - 3)


def nearest_weekend(d0: date) -> tuple[date, date]:
    wd = d0.weekday()
    saturday = week_start(d0) + timedelta(days=5)
    if wd <= 2:
        saturday -= timedelta(days=7)
    return saturday, saturday + timedelta(days=2)


def day_span(d: date) -> tuple[date, date]:
    return d, d + timedelta(days=1)


# ------------------------------------------------------------------------------------------ spans

Span = tuple[date, date, Granularity, float]
Handler = Callable[[dict[str, str | None], date], "Span | None"]
#: ``(name, pattern, handler)``: one rule of a language's table, tried in the table's order.
Rule = tuple[str, str, Handler]

SEASONS: Final = {"spring": "spring", "summer": "summer", "autumn": "autumn", "fall": "autumn",
                   "winter": "winter", "春": "spring", "夏": "summer", "秋": "autumn", "冬": "winter"}
UNITS: Final = {"day": "day", "days": "day", "week": "week", "weeks": "week", "month": "month",
                "months": "month", "year": "year", "years": "year", "weekend": "weekend",
                "weekends": "weekend", "fortnight": "fortnight", "fortnights": "fortnight",
                "天": "day", "日": "day", "周": "week", "星期": "week", "礼拜": "week", "月": "month",
                "年": "year"}



def _date_or_none(y: int, m: int, d: int) -> date | None:
    try:
        return date(y, m, d)
    except ValueError:
        return None


def absolute_day(y: int, m: int, d: int, conf: float = CONF_ABSOLUTE) -> Span | None:
    day = _date_or_none(y, m, d)
    return None if day is None else (*day_span(day), "day", conf)


def count_span(unit: str, lo: int, hi: int, exact: bool, d0: date, sign: int) -> Span:
    """Span of ``lo``-``hi`` units before (sign -1) or after (sign +1) ``d0``."""
    if unit == "fortnight":
        unit, lo, hi = "week", 2 * lo, 2 * hi
    near, far = sorted((sign * lo, sign * hi))  # offsets in units, near <= far
    if unit == "day":
        s, e = d0 + timedelta(days=near), d0 + timedelta(days=far + 1)
        gran: Granularity = "day"
        conf = CONF_DAY
    elif unit == "week":  # seven days centred on the target day
        s, e = d0 + timedelta(days=7 * near - 3), d0 + timedelta(days=7 * far + 4)
        gran, conf = "week", CONF_PERIOD
    elif unit == "weekend":
        base = week_start(d0) + timedelta(days=5)
        s, e = base + timedelta(weeks=near), base + timedelta(weeks=far, days=2)
        gran, conf = "week", CONF_PERIOD
    elif unit == "month":
        ref = month_index(d0)
        s, e = month_start(ref + near), month_start(ref + far + 1)
        gran, conf = "month", CONF_PERIOD
    else:
        s, e = date(d0.year + near, 1, 1), date(d0.year + far + 1, 1, 1)
        gran, conf = "year", CONF_PERIOD
    if not exact:
        conf = CONF_VAGUE
    elif sign > 0:
        conf = CONF_GUESSED if unit == "day" else CONF_FORWARD
    return s, e, gran, conf


def rolling(unit: str, lo_hi: tuple[int, int, bool] | None, d0: date, forward: bool) -> Span:
    _lo, hi, exact = lo_hi if lo_hi else (1, 1, True)
    if unit == "fortnight":
        unit, hi = "week", 2 * hi
    if unit == "weekend":
        unit = "week"
    gran: Granularity = unit  # type: ignore[assignment]
    conf = CONF_GUESSED if exact else CONF_VAGUE
    if forward:
        return d0, shift(d0, unit, hi) + timedelta(days=1), gran, conf
    return shift(d0, unit, -hi), d0 + timedelta(days=1), gran, conf


def rel_period(unit: str, k: int, d0: date) -> Span:
    """The calendar week / weekend / month / year ``k`` steps from the reference's."""
    if unit == "week":
        s = week_start(d0) + timedelta(weeks=k)
        return s, s + timedelta(days=7), "week", CONF_PERIOD
    if unit == "weekend":
        s = week_start(d0) + timedelta(weeks=k, days=5)
        return s, s + timedelta(days=2), "week", CONF_PERIOD
    if unit == "month":
        return (*month_span(month_index(d0) + k), "month", CONF_PERIOD)
    return (*year_span(d0.year + k), "year", CONF_PERIOD)


def text_of(groups: dict[str, str | None], key: str) -> str:
    value = groups.get(key)
    return value if value is not None else ""

