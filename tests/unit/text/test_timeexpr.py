"""Time expressions in English and Chinese, resolved against a turn's timestamp."""

from __future__ import annotations

import dataclasses
import doctest
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta, timezone

import pytest

from memory_ext.text import timeexpr
from memory_ext.text.timeexpr import TimeMention, extract_times, mention_overlaps, parse_absolute_date

#: 2023-05-08 13:56 UTC, a Monday.
REF = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)


def resolve(text: str, ref: datetime = REF) -> list[tuple[str, str, str, str]]:
    """(text, first day, last day, granularity) of each mention; the last day is inclusive for readability."""
    return [
        (m.text, m.start.date().isoformat(), (m.end - timedelta(days=1)).date().isoformat(), m.granularity)
        for m in extract_times(text, ref)
    ]


def only(text: str, ref: datetime = REF) -> TimeMention:
    mentions = extract_times(text, ref)
    assert len(mentions) == 1, mentions
    return mentions[0]


# ------------------------------------------------------------------------------------------- English

ENGLISH = [
    # relative days
    ("I went to a support group yesterday.", "yesterday", "2023-05-07", "2023-05-07", "day"),
    ("The launch is tomorrow!", "tomorrow", "2023-05-09", "2023-05-09", "day"),
    ("Today was long.", "Today", "2023-05-08", "2023-05-08", "day"),
    ("We had pizza tonight.", "tonight", "2023-05-08", "2023-05-08", "day"),
    ("I called her this morning.", "this morning", "2023-05-08", "2023-05-08", "day"),
    ("She left the day before yesterday.", "the day before yesterday", "2023-05-06", "2023-05-06", "day"),
    ("We'll know the day after tomorrow.", "the day after tomorrow", "2023-05-10", "2023-05-10", "day"),
    ("Last night was amazing!", "Last night", "2023-05-07", "2023-05-07", "day"),
    ("I went to a conference two days ago.", "two days ago", "2023-05-06", "2023-05-06", "day"),
    ("I started 3 days ago.", "3 days ago", "2023-05-05", "2023-05-05", "day"),
    # weekdays: last = most recent strictly before the reference date, next = first strictly after,
    # this = in the reference's week, bare = nearest within three days
    ("I ran a charity race last Saturday.", "last Saturday", "2023-05-06", "2023-05-06", "day"),
    ("Last Fri I took my kids to a pottery workshop.", "Last Fri", "2023-05-05", "2023-05-05", "day"),
    ("I joined a new group last Tues.", "last Tues", "2023-05-02", "2023-05-02", "day"),
    ("Wanna see my moves next Friday?", "next Friday", "2023-05-12", "2023-05-12", "day"),
    ("The show is this Sunday.", "this Sunday", "2023-05-14", "2023-05-14", "day"),
    ("We met on Saturday.", "on Saturday", "2023-05-06", "2023-05-06", "day"),
    ("Let's meet on Wednesday.", "on Wednesday", "2023-05-10", "2023-05-10", "day"),
    ("Sunday was relaxing.", "Sunday", "2023-05-07", "2023-05-07", "day"),
    # weeks and weekends (calendar weeks, Monday to Sunday)
    ("I made a limited edition line last week.", "last week", "2023-05-01", "2023-05-07", "week"),
    ("I'm busy this week.", "this week", "2023-05-08", "2023-05-14", "week"),
    ("The exam is next week.", "next week", "2023-05-15", "2023-05-21", "week"),
    ("Last weekend I joined a mentorship program.", "Last weekend", "2023-05-06", "2023-05-07", "week"),
    ("That roadtrip this past weekend was insane!", "this past weekend", "2023-05-06", "2023-05-07", "week"),
    ("Any plans this weekend?", "this weekend", "2023-05-13", "2023-05-14", "week"),
    ("Anything fun over the weekend?", "over the weekend", "2023-05-06", "2023-05-07", "week"),
    ("We went camping two weekends ago.", "two weekends ago", "2023-04-29", "2023-04-30", "week"),
    ("It rained the week before last.", "the week before last", "2023-04-24", "2023-04-30", "week"),
    ("I moved here two weeks ago.", "two weeks ago", "2023-04-21", "2023-04-27", "week"),
    ("We leave in two weeks.", "in two weeks", "2023-05-19", "2023-05-25", "week"),
    # months, years, seasons
    ("Last month I got hurt.", "Last month", "2023-04-01", "2023-04-30", "month"),
    ("I'm going to a conference this month.", "this month", "2023-05-01", "2023-05-31", "month"),
    ("We're going camping next month.", "next month", "2023-06-01", "2023-06-30", "month"),
    ("I saw it a month ago.", "a month ago", "2023-04-01", "2023-04-30", "month"),
    ("I painted that lake sunrise last year!", "last year", "2022-01-01", "2022-12-31", "year"),
    ("We'll adopt next year.", "next year", "2024-01-01", "2024-12-31", "year"),
    ("A friend made it for me ten years ago.", "ten years ago", "2013-01-01", "2013-12-31", "year"),
    ("We went to the lake last summer.", "last summer", "2022-06-01", "2022-08-31", "season"),
    ("Wanna do a family outing this summer?", "this summer", "2023-06-01", "2023-08-31", "season"),
    ("Last winter was brutal.", "Last winter", "2022-12-01", "2023-02-28", "season"),
    ("We married in the summer of 2019.", "summer of 2019", "2019-06-01", "2019-08-31", "season"),
    ("I'm inspired by autumn, so next fall I'll paint.", "next fall", "2023-09-01", "2023-11-30", "season"),
    # absolute dates
    ("We moved in May.", "in May", "2023-05-01", "2023-05-31", "month"),
    ("We moved last May.", "last May", "2022-05-01", "2022-05-31", "month"),
    ("Back in March things were hard.", "in March", "2023-03-01", "2023-03-31", "month"),
    ("It opens in November.", "in November", "2022-11-01", "2022-11-30", "month"),  # nearest November
    ("It started in early June.", "early June", "2023-06-01", "2023-06-30", "month"),
    ("I've been painting since March.", "since March", "2023-03-01", "2023-03-31", "month"),
    ("The store opened May 2023.", "May 2023", "2023-05-01", "2023-05-31", "month"),
    ("I went to the group on 7 May 2023.", "7 May 2023", "2023-05-07", "2023-05-07", "day"),
    ("The session was 8 May, 2023.", "8 May, 2023", "2023-05-08", "2023-05-08", "day"),
    ("It happened on May 8, 2023.", "May 8, 2023", "2023-05-08", "2023-05-08", "day"),
    ("It happened on May 8th.", "May 8th", "2023-05-08", "2023-05-08", "day"),
    ("Let's meet on the 20th of June.", "the 20th of June", "2023-06-20", "2023-06-20", "day"),
    ("Deadline: 2023-05-08.", "2023-05-08", "2023-05-08", "2023-05-08", "day"),
    ("We married in 2022.", "in 2022", "2022-01-01", "2022-12-31", "year"),
    # vague and rolling
    ("A few days ago I bought a dress.", "A few days ago", "2023-05-04", "2023-05-06", "day"),
    ("A couple of days ago we spoke.", "A couple of days ago", "2023-05-05", "2023-05-06", "day"),
    ("I went to a pride parade a few weeks ago.", "a few weeks ago", "2023-04-07", "2023-04-27", "week"),
    ("I saw someone drawing the other day.", "the other day", "2023-05-02", "2023-05-07", "day"),
    ("It rained the past 3 days.", "the past 3 days", "2023-05-05", "2023-05-08", "day"),
    ("I'll post more in the next few months.", "the next few months", "2023-05-08", "2023-09-08", "month"),
    ("We haven't talked in a few days.", "in a few days", "2023-05-04", "2023-05-08", "day"),
]


@pytest.mark.parametrize(("sentence", "surface", "first", "last", "granularity"), ENGLISH)
def test_english_expressions_resolve_to_exact_spans(
    sentence: str, surface: str, first: str, last: str, granularity: str
) -> None:
    assert resolve(sentence) == [(surface, first, last, granularity)]


# ------------------------------------------------------------------------------------------- Chinese

CHINESE = [
    ("我今天拿到了满分！", "今天", "2023-05-08", "2023-05-08", "day"),
    ("昨天老师表扬我了", "昨天", "2023-05-07", "2023-05-07", "day"),
    ("前天我们去了公园", "前天", "2023-05-06", "2023-05-06", "day"),
    ("明天考试", "明天", "2023-05-09", "2023-05-09", "day"),
    ("后天就放假了", "后天", "2023-05-10", "2023-05-10", "day"),
    ("今晚的动画片不播了", "今晚", "2023-05-08", "2023-05-08", "day"),
    ("我朋友上周刚买了自行车", "上周", "2023-05-01", "2023-05-07", "week"),
    ("这周好忙", "这周", "2023-05-08", "2023-05-14", "week"),
    ("本周有考试", "本周", "2023-05-08", "2023-05-14", "week"),
    ("下周去北京", "下周", "2023-05-15", "2023-05-21", "week"),
    ("上周六我们去爬山了", "上周六", "2023-05-06", "2023-05-06", "day"),
    ("这周六一起吃饭吧", "这周六", "2023-05-13", "2023-05-13", "day"),
    ("下周五交作业", "下周五", "2023-05-19", "2023-05-19", "day"),
    ("上个星期天下雨了", "上个星期天", "2023-05-07", "2023-05-07", "day"),
    ("周六我去游泳", "周六", "2023-05-06", "2023-05-06", "day"),
    ("上周末我们去露营了", "上周末", "2023-05-06", "2023-05-07", "week"),
    ("周末在家看电视", "周末", "2023-05-06", "2023-05-07", "week"),
    ("上个月我受伤了", "上个月", "2023-04-01", "2023-04-30", "month"),
    ("这个月很忙", "这个月", "2023-05-01", "2023-05-31", "month"),
    ("下个月搬家", "下个月", "2023-06-01", "2023-06-30", "month"),
    ("去年我和家人装饰了圣诞树", "去年", "2022-01-01", "2022-12-31", "year"),
    ("今年我们班要一起过圣诞节", "今年", "2023-01-01", "2023-12-31", "year"),
    ("明年我要去留学", "明年", "2024-01-01", "2024-12-31", "year"),
    ("前年刚搬过来", "前年", "2021-01-01", "2021-12-31", "year"),
    ("好像是去年夏天，我们一起去公园的", "去年夏天", "2022-06-01", "2022-08-31", "season"),
    ("今年春天樱花开得很好", "今年春天", "2023-03-01", "2023-05-31", "season"),
    ("三天前我丢了钱包", "三天前", "2023-05-05", "2023-05-05", "day"),
    ("两周前我开始学吉他", "两周前", "2023-04-21", "2023-04-27", "week"),
    ("大概是两个月前", "两个月前", "2023-03-01", "2023-03-31", "month"),
    ("一个月前我们见过", "一个月前", "2023-04-01", "2023-04-30", "month"),
    ("半个月前他来过", "半个月前", "2023-04-20", "2023-04-26", "week"),
    ("十年前我来过这里", "十年前", "2013-01-01", "2013-12-31", "year"),
    ("两三天前下了雨", "两三天前", "2023-05-05", "2023-05-06", "day"),
    ("前几天我感冒了", "前几天", "2023-05-04", "2023-05-06", "day"),
    ("2023年5月8日那天很开心", "2023年5月8日", "2023-05-08", "2023-05-08", "day"),
    ("我们5月8日见", "5月8日", "2023-05-08", "2023-05-08", "day"),
    ("五月八号是我的生日", "五月八号", "2023-05-08", "2023-05-08", "day"),
    ("五月天气很好", "五月", "2023-05-01", "2023-05-31", "month"),
    ("十二月很冷", "十二月", "2022-12-01", "2022-12-31", "month"),
    ("去年五月我们去了杭州", "去年五月", "2022-05-01", "2022-05-31", "month"),
    ("2023年我换了工作", "2023年", "2023-01-01", "2023-12-31", "year"),
    ("2022年3月我们认识了", "2022年3月", "2022-03-01", "2022-03-31", "month"),
]


@pytest.mark.parametrize(("sentence", "surface", "first", "last", "granularity"), CHINESE)
def test_chinese_expressions_resolve_to_exact_spans(
    sentence: str, surface: str, first: str, last: str, granularity: str
) -> None:
    assert resolve(sentence) == [(surface, first, last, granularity)]


# ------------------------------------------------------------------------------------------- false positives

NOT_TIME = [
    "I may go to the party.",
    "May I ask you something?",
    "We march on, no matter what.",
    "March on, my friend!",
    "She wore her Sunday best.",
    "We go hiking on Sundays.",
    "Every Saturday we play chess.",
    "Good Friday is a holiday here.",
    "I got a gift from April.",
    "This is the last one, I promise.",
    "Next time I'll bring snacks.",
    "I've been painting recently and lately I feel great.",
    "That was a long time ago.",
    "We drove 2000 miles.",
    "Summer traditions are the best.",
    "以前天气很好",
    "然后天气变冷了",
    "我们每周六都去游泳",
    "一周一次",
    "这周围有很多餐馆",
    "他登上月球了",
    "2020年代的音乐",
    "最近我很忙",
]


@pytest.mark.parametrize("sentence", NOT_TIME)
def test_no_false_positives(sentence: str) -> None:
    assert extract_times(sentence, REF) == []


def test_together_after_last_week_is_not_a_monday() -> None:
    # 上周一起 = "together last week", not "last Monday"
    assert resolve("我们上周一起去的") == [("上周", "2023-05-01", "2023-05-07", "week")]


# ------------------------------------------------------------------------------------------- rules


def test_last_weekday_is_strictly_before_the_reference_date() -> None:
    saturday = datetime(2023, 5, 13, 10, tzinfo=UTC)
    sunday = datetime(2023, 5, 14, 10, tzinfo=UTC)
    assert resolve("last Saturday", saturday) == [("last Saturday", "2023-05-06", "2023-05-06", "day")]
    assert resolve("last Saturday", sunday) == [("last Saturday", "2023-05-13", "2023-05-13", "day")]
    assert resolve("next Saturday", saturday) == [("next Saturday", "2023-05-20", "2023-05-20", "day")]


def test_chinese_last_week_weekday_is_in_the_previous_calendar_week() -> None:
    sunday = datetime(2023, 5, 14, 10, tzinfo=UTC)
    assert resolve("上周六", sunday) == [("上周六", "2023-05-06", "2023-05-06", "day")]
    assert resolve("last Saturday", sunday) == [("last Saturday", "2023-05-13", "2023-05-13", "day")]


def test_bare_weekday_is_the_nearest_within_three_days() -> None:
    thursday = datetime(2023, 5, 11, tzinfo=UTC)
    assert resolve("on Sunday", thursday) == [("on Sunday", "2023-05-14", "2023-05-14", "day")]
    assert resolve("on Monday", thursday) == [("on Monday", "2023-05-08", "2023-05-08", "day")]
    assert resolve("on Thursday", thursday) == [("on Thursday", "2023-05-11", "2023-05-11", "day")]


def test_the_weekend_is_the_nearest_one() -> None:
    assert resolve("the weekend was fun", REF) == []  # needs over/on/at/during
    friday = datetime(2023, 5, 12, tzinfo=UTC)
    sunday = datetime(2023, 5, 14, tzinfo=UTC)
    assert resolve("over the weekend", friday)[0][1:3] == ("2023-05-13", "2023-05-14")
    assert resolve("over the weekend", sunday)[0][1:3] == ("2023-05-13", "2023-05-14")


def test_month_names_without_a_year_pick_the_nearest_occurrence() -> None:
    january = datetime(2023, 1, 15, tzinfo=UTC)
    assert resolve("in November", january)[0][1] == "2022-11-01"  # 2 months back, not 10 ahead
    assert resolve("in March", january)[0][1] == "2023-03-01"
    assert resolve("in July", january)[0][1] == "2022-07-01"  # 6 months either way: the past wins
    assert resolve("Dec 24", january)[0][1] == "2022-12-24"


def test_last_and_next_month_name_skip_the_reference_month() -> None:
    assert resolve("next May")[0][1] == "2024-05-01"
    assert resolve("last June")[0][1] == "2022-06-01"
    assert resolve("next June")[0][1] == "2023-06-01"


def test_seasons_follow_the_documented_rules() -> None:
    july = datetime(2023, 7, 10, tzinfo=UTC)
    october = datetime(2023, 10, 10, tzinfo=UTC)
    january = datetime(2024, 1, 10, tzinfo=UTC)
    assert resolve("last summer", july)[0][1:3] == ("2022-06-01", "2022-08-31")  # in progress: not last
    assert resolve("last summer", october)[0][1:3] == ("2023-06-01", "2023-08-31")  # just ended
    assert resolve("this winter", january)[0][1:3] == ("2023-12-01", "2024-02-29")  # in progress
    assert resolve("this winter", october)[0][1:3] == ("2023-12-01", "2024-02-29")  # starts this year
    assert resolve("next spring", january)[0][1:3] == ("2024-03-01", "2024-05-31")
    assert resolve("去年冬天", REF)[0][1:3] == ("2022-12-01", "2023-02-28")


def test_numeric_dates() -> None:
    assert resolve("on 05/08/2023") == [("05/08/2023", "2023-05-08", "2023-05-08", "day")]  # month first
    assert resolve("on 25/12/2022") == [("25/12/2022", "2022-12-25", "2022-12-25", "day")]  # cannot be M/D
    assert resolve("am 08.05.2023") == [("08.05.2023", "2023-05-08", "2023-05-08", "day")]  # dots: day first
    assert resolve("on 2023/02/30") == []  # impossible date


def test_confidence_levels() -> None:
    assert only("8 May 2023").confidence == timeexpr.CONF_ABSOLUTE == 0.95
    assert only("yesterday").confidence == only("last Saturday").confidence == 0.9
    assert only("last week").confidence == only("next month").confidence == only("上个月").confidence == 0.8
    assert only("a few days ago").confidence == only("last summer").confidence == 0.5
    assert only("on Sunday").confidence == 0.6
    assert only("in two weeks").confidence == 0.6
    assert 0 < only("the other day").confidence < 0.5


def test_mentions_carry_offsets_of_the_original_text() -> None:
    text = "Hey! Yesterday we hiked, and 上周六 we swam. Next Friday we rest."
    mentions = extract_times(text, REF)
    assert [m.text for m in mentions] == ["Yesterday", "上周六", "Next Friday"]
    for m in mentions:
        assert text[m.span[0] : m.span[1]] == m.text


def test_several_mentions_in_order() -> None:
    text = "Yesterday I called mom; last week I saw dad; in 2022 we moved; 去年我们旅游了。"
    assert [m.text for m in extract_times(text, REF)] == ["Yesterday", "last week", "in 2022", "去年"]


def test_spans_are_aware_utc_half_open_and_frozen() -> None:
    m = only("yesterday")
    assert m.start == datetime(2023, 5, 7, tzinfo=UTC)
    assert m.end == datetime(2023, 5, 8, tzinfo=UTC)
    assert m.start.utcoffset() == timedelta(0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        m.text = "x"  # type: ignore[misc]


def test_naive_reference_is_utc() -> None:
    assert only("yesterday", datetime(2023, 5, 8, 13, 56)) == only("yesterday", REF)


def test_days_are_those_of_the_reference_time_zone() -> None:
    # 07:00 on 8 May in UTC+8 is 23:00 on 7 May in UTC: "yesterday" is 7 May there, in local midnights
    shanghai = timezone(timedelta(hours=8))
    m = only("yesterday", datetime(2023, 5, 8, 7, 0, tzinfo=shanghai))
    assert m.start == datetime(2023, 5, 7, tzinfo=shanghai)
    assert m.end == datetime(2023, 5, 8, tzinfo=shanghai)
    assert m.start.tzinfo == UTC


def test_empty_and_timeless_text() -> None:
    assert extract_times("", REF) == []
    assert extract_times("Hey Mel! Good to see you! How have you been?", REF) == []
    assert extract_times("你好，最近怎么样？", REF) == []


# ------------------------------------------------------------------------------------------- helpers


def test_mention_overlaps_is_half_open_with_optional_bounds() -> None:
    m = only("yesterday")  # [05-07, 05-08)
    assert mention_overlaps(m, datetime(2023, 5, 7, 12, tzinfo=UTC), datetime(2023, 5, 7, 13, tzinfo=UTC))
    assert not mention_overlaps(m, datetime(2023, 5, 8, tzinfo=UTC), None)
    assert not mention_overlaps(m, None, datetime(2023, 5, 7, tzinfo=UTC))
    assert mention_overlaps(m, None, None)
    assert mention_overlaps(m, datetime(2023, 5, 1), datetime(2023, 5, 31))  # naive bounds are UTC


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1:56 pm on 8 May, 2023", datetime(2023, 5, 8, 13, 56, tzinfo=UTC)),
        ("10:37 am on 27 June, 2023", datetime(2023, 6, 27, 10, 37, tzinfo=UTC)),
        ("12:05 am on 1 January, 2024", datetime(2024, 1, 1, 0, 5, tzinfo=UTC)),
        ("2023-05-08", datetime(2023, 5, 8, tzinfo=UTC)),
        ("2023-05-08T13:56:00+08:00", datetime(2023, 5, 8, 5, 56, tzinfo=UTC)),
        ("2023-05-08 13:56", datetime(2023, 5, 8, 13, 56, tzinfo=UTC)),
        ("May 8, 2023", datetime(2023, 5, 8, tzinfo=UTC)),
        ("8 May 2023 at 14:30", datetime(2023, 5, 8, 14, 30, tzinfo=UTC)),
        ("2023年5月8日", datetime(2023, 5, 8, tzinfo=UTC)),
    ],
)
def test_parse_absolute_date(text: str, expected: datetime) -> None:
    assert parse_absolute_date(text) == expected


@pytest.mark.parametrize(
    "text", ["", "yesterday", "May 8", "May 2023", "8 May 2023 and more", "25:00 on 8 May 2023"]
)
def test_parse_absolute_date_rejects_what_is_not_one_full_date(text: str) -> None:
    assert parse_absolute_date(text) is None


def test_docstring_examples() -> None:
    result = doctest.testmod(timeexpr, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0


def test_time_expressions_never_load_jieba() -> None:
    code = (
        "import sys, datetime, memory_ext.text.timeexpr as t; "
        "t.extract_times('上周六 and last Friday', datetime.datetime.now()); print('jieba' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


if __name__ == "__main__":  # timing over a synthetic 600-turn conversation (not a unit test)
    turns = [s for s, *_ in ENGLISH + CHINESE] + NOT_TIME + ["Hey! How have you been? Anything new?"] * 200
    turns = (turns * 4)[:600]
    start = time.perf_counter()
    n = sum(len(extract_times(t, REF + timedelta(minutes=i))) for i, t in enumerate(turns))
    print(f"{len(turns)} turns, {n} mentions, {(time.perf_counter() - start) * 1000:.1f} ms")
