"""The slot a question asks for (:mod:`memory_ext.rank.answer_slot`) and the score of a turn that leaves it empty:
a chat about a topic is not an answer to every question about that topic."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from memory_ext import MemoryEngine
from memory_ext.rank.answer_slot import (
    AnswerSlot,
    answer_slot,
    fills,
    fills_each,
    named_slot,
    shown_slot,
    slot_first,
)
from memory_ext.rank.calibration import SENTENCE_MIXED, bounded_scores, unfilled


@pytest.mark.parametrize(("question", "kind", "focus"), [
    ("When is Mia's birthday?", "time", ()),
    ("what do I do when it rains", None, ()),  # "when" inside the question is no question word
    ("How many guests are coming to the wedding?", "number", ()),
    ("What's my landlord's phone number?", "phone", ("number",)),
    ("What is Mia's teacher's name?", "name", ()),
    ("Who is the best man?", "person", ()),
    ("Which insurance company do I use?", None, ("company",)),
    ("What kind of music does Tom like?", None, ("music",)),
    ("Where does Lena live now?", None, ()),
    ("why did we move", "reason", ()),
    ("雅思考试是哪天？", "time", ("雅思考试",)),
    ("钢琴课多少钱一节？", "number", ()),
    ("我的房东叫什么名字？", "name", ("房东",)),
    ("伴郎是谁？", "person", ("伴郎",)),
    ("我们坐什么交通工具去？", None, ("交通工具",)),
    ("我现在用什么电脑写代码？", None, ("电脑",)),
    ("我的血型是什么？", None, ("血型",)),
    ("国庆去哪里旅游？", None, ()),
    ("为什么下午不喝咖啡", "reason", ()),
])
def test_the_slot_of_a_question(question: str, kind: str | None, focus: tuple[str, ...]) -> None:
    assert answer_slot(question) == AnswerSlot(kind=kind, focus=focus)


@pytest.mark.parametrize(("question", "turn", "filled"), [
    # the answer fills the slot, in other words than the question's
    ("when do I water the plants", "I water them every Sunday.", True),
    ("When did Caroline go to the support group?", "I went to a LGBTQ support group yesterday.", True),
    ("how many guests", "We have about eighty guests.", True),
    ("What's my dog called?", "He's a beagle called Biscuit, three years old.", True),
    ("who joins remotely", "Kenji from Acme will join remotely.", True),
    ("which phone do I have?", "I finally replaced the old iPhone — I'm on a Pixel 8 now.", True),
    ("What language am I learning?", "I'm learning Portuguese on Duolingo.", True),
    ("雅思考试是哪天？", "考试定在六月二十号。", True),
    ("我家猫叫什么名字", "它叫年糕，是一只橘猫，今年四岁。", True),
    ("我开什么车？", "卡罗拉卖掉了，上周提了一辆比亚迪海豹。", True),
    ("我最好的朋友是谁？", "我最好的朋友叫陈静，她在深圳当律师。", True),
    ("婚礼请多少客人", "大概请一百个客人。", True),
    # the topic without the answer
    ("When do I water the plants?", "I keep a monstera and two snake plants in the living room.", False),
    ("What's the budget for the Acme project?", "Kenji from Acme will join remotely.", False),
    ("What is Mia's teacher's name?", "My daughter Mia turns seven on May 3rd.", False),
    ("牙医叫什么名字？", "牙医诊所打电话来，说预约推迟到下周四下午两点。", False),
    ("钢琴课多少钱一节？", "钢琴老师换了时间，以后是每周三下午五点。", False),  # times are no prices
    ("陈静的生日是哪天？", "我最好的朋友叫陈静，她在深圳当律师。", False),
    ("小宇的班主任是谁？", "我儿子小宇在读二年级，每周六上午学游泳。", False),  # 儿子 is 小宇 himself
    ("我们坐什么交通工具去？", "国庆我们打算去成都玩，吃火锅看熊猫。", False),  # a city is no means of transport
    ("我报了哪个培训班？", "我在准备雅思考试，目标是总分七分。", False),
    # no slot: nothing to check
    ("Where does Lena live now?", "Lena moved to Coimbra last month.", None),
    ("我晚上吃主食吗", "我最近在减肥，晚上不吃主食。", None),
])
def test_whether_a_turn_fills_the_slot(question: str, turn: str, filled: bool | None) -> None:
    assert fills(answer_slot(question), turn, question) is filled


def test_only_the_turns_that_leave_the_slot_empty_lose_score() -> None:
    question = "When is Mia's birthday party?"
    texts = ["Mia's party is on Saturday at the climbing gym.", "Mia wants a unicorn cake for her party."]
    assert unfilled(question, texts) == [False, True]
    cosines = [0.93, 0.93]
    off = bounded_scores([0.0, 0.0], texts=texts, query=question, cosines=cosines, stats=(None, 0.85))
    on = bounded_scores([0.0, 0.0], texts=texts, query=question, cosines=cosines, stats=(None, 0.85),
                        calibration=SENTENCE_MIXED.__class__(**{**SENTENCE_MIXED.__dict__, "slot_logit": 3.0}))
    assert on[0] == off[0] and on[1] < off[1]  # the answer keeps its score; the cap still holds
    alone = bounded_scores([0.0], texts=texts[1:], query=question, cosines=cosines[1:], stats=(None, 0.85),
                           calibration=SENTENCE_MIXED.__class__(**{**SENTENCE_MIXED.__dict__, "slot_logit": 3.0}))
    assert alone[0] < off[1]


CHATS = {
    "en": (["My mom is flying in on the 12th, landing at Gatwick around 6pm.",
            "Do you need a reminder to pick her up?",
            "Yes please, an hour before.",
            "My sister Lena lives in Porto, she teaches chemistry at a high school there."],
           "When does my mom land?", "What's Lena's phone number?"),
    "zh": (["我约了下周二上午九点看牙医。", "好的，需要提醒吗？", "需要，前一天晚上提醒我。",
            "我最好的朋友叫陈静，她在深圳当律师。"],
           "我什么时候看牙医？", "陈静的生日是哪天？"),
}


def _compared(tmp_path: Path, language: str, key: str, logit: float,
              questions: tuple[str, str]) -> dict[float, dict[str, list]]:
    """The items of ``questions`` on the language's chat with ``recall.<key>`` 0 and ``logit``; asserts that
    only scores differ (the same turns in the same order)."""
    results = {}
    for value in (0.0, logit):
        with MemoryEngine.open(tmp_path / f"{language}-{value}", config={"recall": {key: value}}) as engine:
            engine.add_turns([{"role": "user" if i % 2 == 0 else "assistant", "content": t}
                              for i, t in enumerate(CHATS[language][0])], "chat")
            results[value] = {q: engine.search(q, "chat", k=4).items for q in questions}
    for q in questions:
        assert [i.text for i in results[0.0][q]] == [i.text for i in results[logit][q]]
    return results


@pytest.mark.parametrize("language", sorted(CHATS))
def test_a_near_topic_question_without_its_answer_scores_lower_and_the_ranking_stays(
        tmp_path: Path, language: str) -> None:
    _, answered, absent = CHATS[language]
    results = _compared(tmp_path, language, "answer_slot_logit", 3.0, (answered, absent))
    assert results[3.0][answered][0].score == results[0.0][answered][0].score
    assert results[3.0][answered][0].score >= 0.5
    assert results[3.0][absent][0].score < results[0.0][absent][0].score


@pytest.mark.parametrize("language", sorted(CHATS))
def test_the_absent_answer_logit_lowers_only_a_result_that_lacks_the_answer(tmp_path: Path, language: str) -> None:
    """``recall.answer_slot_absent_logit``: a result none of whose turns holds the asked phone number scores lower
    still; a result holding the asked time keeps its score; the order never changes."""
    answered = CHATS[language][1]
    absent = {"en": "What's Lena's phone number?", "zh": "陈静的电话号码是多少？"}[language]
    results = _compared(tmp_path, language, "answer_slot_absent_logit", 6.0, (answered, absent))
    assert results[6.0][answered][0].score == results[0.0][answered][0].score
    assert results[6.0][absent][0].score < results[0.0][absent][0].score


@pytest.mark.parametrize(("question", "texts", "first"), [
    ("when do I water the plants", ["I keep a monstera and two snake plants in the living room.",
                                    "Lovely. The monstera likes bright indirect light.", "I water them every Sunday."],
     2),
    ("雅思考试是哪天？", ["我在准备雅思考试，目标是总分七分。", "加油！口语和写作需要多练。",
                  "考试定在六月二十号。"], 2),
    ("钢琴老师姓什么", ["钢琴老师换了时间，以后是每周三下午五点。", "明白，周三下午五点。", "老师姓林。"], 2),
    ("When is Mia's birthday?", ["My daughter Mia turns seven on May 3rd.", "How exciting!"], None),  # holds it
    ("which plants do I have", ["I water them every Sunday.", "I keep a monstera."], None),  # no kind asked
    ("when do I water the plants", ["I keep a monstera.", "Nice.", "Sounds right.", "Every Sunday."], None),
])
def test_the_best_three_turn_holding_the_asked_value_goes_first(question: str, texts: list[str],
                                                                 first: int | None) -> None:
    assert slot_first(question, texts) == first


def test_slot_first_reorders_the_first_three_only_and_keeps_a_short_answer(tmp_path: Path) -> None:
    turns = [("user", "I'm seeing a new dentist, Dr. Okafor, her clinic is on Mill Lane near the station."),
             ("assistant", "Good to know, a clinic close to the station is handy."),
             ("user", "The first cleaning is on October 3rd."),
             ("assistant", "Noted."),
             ("user", "钢琴老师换了时间，以后是每周三下午五点。"),
             ("assistant", "明白，周三下午五点。"),
             ("user", "老师姓林。"),
             ("assistant", "好的，林老师。")]
    ranked = {}
    for on in (False, True):
        with MemoryEngine.open(tmp_path / str(on), config={"recall": {"answer_slot_first": on}}) as engine:
            engine.add_turns([{"role": r, "content": t} for r, t in turns], "chat")
            ranked[on] = {q: [i.text for i in engine.search(q, "chat", k=5).items]
                          for q in ("When is my dentist appointment?", "钢琴老师姓什么")}
    for q, items in ranked[True].items():
        assert sorted(items) == sorted(ranked[False][q])  # the same turns
        assert items[3:] == ranked[False][q][3:]  # below the first three, the same order
    assert ranked[True]["When is my dentist appointment?"][0] == "The first cleaning is on October 3rd."
    assert ranked[True]["钢琴老师姓什么"][0] == "老师姓林。"


@pytest.mark.parametrize(("question", "turn", "filled"), [
    # a place is no instance of a thing that is not a place
    ("What airline is mom flying?", "Mom's flight got rebooked: she lands at Heathrow on the 13th at noon.", False),
    ("What airline is mom flying?", "She flies with Lufthansa, landing at Gatwick.", True),
    ("Which hotel are we staying at?", "We booked a room at the Savoy in London.", True),  # a place is asked
    ("我妈坐哪个车次？", "我妈改签了，变成十二号下午到，还是北京南站。", False),
    ("我妈坐哪个车次？", "她坐G102次，下午到北京南站。", True),
    # an owner is no instance of the thing asked
    ("what book am I reading", "Club meets on the last Tuesday of the month at Anya's place.", False),
    ("what book am I reading", "I'm reading The Left Hand of Darkness for my book club.", True),
    # a phone number is a run of digits, not the rent
    ("What's my landlord's phone number?", "The landlord raised the rent — it's 1,350 from July.", False),
    ("What's my landlord's phone number?", "His number is 0161 496 0123, call after six.", True),
    ("房东的电话是多少？", "房租涨到三千五了，下个月开始。", False),
    ("房东的电话是多少？", "房东电话是13812345678。", True),
])
def test_places_owners_and_phone_numbers(question: str, turn: str, filled: bool) -> None:
    assert fills(answer_slot(question), turn, question) is filled


def test_a_place_named_in_one_item_is_a_place_in_all() -> None:
    question = "What airline is mom flying?"
    texts = ["Mom's flight got rebooked: she lands at Heathrow on the 13th at noon.",
             "Updated — Heathrow, the 13th, 12:00."]
    assert fills(answer_slot(question), texts[1], question) is True  # alone, Heathrow may be the airline
    assert fills_each(question, texts) == [False, False]
    assert fills_each("why did we move", texts) == [None, None]


def test_a_result_without_what_is_asked_scores_lower_than_one_holding_it() -> None:
    question = "What's my landlord's phone number?"
    calibration = dataclasses.replace(SENTENCE_MIXED, slot_logit=1.0, absent_logit=3.0)
    lacking = ["The landlord raised the rent — it's 1,350 from July.", "My rent is 1,200 euros, due on the 1st."]
    holding = [lacking[0], "The landlord's number is 0161 496 0123."]
    kwargs = {"query": question, "cosines": [0.93, 0.92], "stats": (None, 0.85), "calibration": calibration}
    absent = bounded_scores([0.0, 0.0], texts=lacking, **kwargs)
    present = bounded_scores([0.0, 0.0], texts=holding, **kwargs)
    one_logit = bounded_scores([0.0, 0.0], texts=lacking, **{**kwargs, "calibration": dataclasses.replace(
        calibration, absent_logit=0.0)})
    assert absent[0] < one_logit[0] and present[1] > absent[1]
    gate = dataclasses.replace(calibration, slot_logit=0.0)  # without the slot logit, no absent logit either
    assert bounded_scores([0.0, 0.0], texts=lacking, **{**kwargs, "calibration": gate}) > one_logit


@pytest.mark.parametrize(("question", "texts", "first"), [
    # a time that dates what was told by the day it was said is no answer to "when"
    ("When did Caroline join the activist group?", ["I just joined a new activist group.",
                                                    "Lost my job as a banker yesterday."], None),
    ("雅思考试是哪天？", ["我在准备雅思考试，目标是总分七分。", "加油！", "我昨天刚报了名。"], None),
    ("When does the book club meet?", ["I'm reading a novel for my book club.",
                                       "Club meets on the last Tuesday of the month."], 1),
])
def test_slot_first_skips_times_said_from_the_day(question: str, texts: list[str], first: int | None) -> None:
    assert slot_first(question, texts) == first


@pytest.mark.parametrize(("question", "kind"), [
    ("Name one of two accessories I added along with my espresso machine order.", None),  # an imperative
    ("Name the dog I adopted last spring, the one named after my grandpa.", "name"),
    ("What is Mia's teacher's name?", "name"),
])
def test_name_as_a_verb_asks_no_name(question: str, kind: str | None) -> None:
    assert answer_slot(question).kind == kind


def test_only_a_slot_whose_answer_fills_can_find_a_result_lacking_it() -> None:
    """"陈静做什么工作" is answered by a common noun (律师) that no check sees: a result without a name is no sign
    the store lacks it; "What airline" is answered by a name."""
    calibration = dataclasses.replace(SENTENCE_MIXED, slot_logit=1.0, absent_logit=6.0)
    job = "陈静做什么工作"
    texts = ["我最好的朋友叫陈静，她在深圳当律师。", "好的，记住了。"]
    assert named_slot(answer_slot("What airline is mom flying?")) and named_slot(answer_slot("我用什么电脑？"))
    assert not named_slot(answer_slot(job)) and not named_slot(answer_slot("What's my diet?"))
    kwargs = {"query": job, "cosines": [0.95, 0.90], "stats": (None, 0.85)}
    assert bounded_scores([0.0, 0.0], texts=texts, calibration=calibration, **kwargs) == bounded_scores(
        [0.0, 0.0], texts=texts, calibration=dataclasses.replace(calibration, absent_logit=0.0), **kwargs)


@pytest.mark.parametrize(("question", "kind"), [
    ("When is my appointment with Dr. Okafor?", "time"),
    ("Hi, I am Karan. Could you tell me the status of my flight? My phone number is 555 0199.", None),
    ("You are a customer of Rho-Bank. Your phone number is 555 0199. Ask the agent to unlock your card.", None),
    ("When you post the tweet, add a comment.", None),  # a clause, not a question
    ("In my existing folder called 'Lectures', I'd like to set up a new file.", None),  # a name given, not asked
    ("when do I water plants", "time"),
    ("好的，谢谢。雅思考试是哪天？", "time"),
])
def test_only_what_asks_gives_a_slot(question: str, kind: str | None) -> None:
    assert answer_slot(question).kind == kind


def test_slot_first_moves_nothing_above_a_turn_asking_the_same() -> None:
    texts = ["When is my next gym session?", "I'm looking for a Theater event in Chicago, IL on 2023-03-13."]
    assert slot_first("When is my upcoming gym session?", texts) is None
    assert slot_first("When is my upcoming gym session?", ["I joined a gym downtown.",
                                                           "My gym session is on Friday at 7am."]) == 1


@pytest.mark.parametrize(("question", "kind"), [
    ("Why did Jon shut down his bank account?", "reason"),
    ("How come Lena left Porto?", "reason"),
    ("What made Gina choose the furniture for her store?", "reason"),
    ("What was the reason for the delay?", "reason"),
    ("Why is the dog called Biscuit?", "reason"),  # a reason, not a name
    ("你怎么不喝咖啡了？", "reason"),
    ("他怎么会搬到深圳？", "reason"),
    ("Where does Lena live now?", None),
    ("What did Gina make for dinner?", None),
])
def test_a_why_question_asks_for_a_reason(question: str, kind: str | None) -> None:
    assert answer_slot(question).kind == kind


@pytest.mark.parametrize(("turn", "filled"), [
    ("The old flat was too noisy anyway.", True),
    ("I closed it because they kept charging me hidden fees.", True),
    ("We picked Whitby since it's close to my wife's new job.", True),
    ("Lost my job as a banker yesterday, so I'm gonna start my own business.", True),
    ("Hey Mel! A lot's happened since we last chatted.", False),  # a time
    ("You captured the sunset perfectly, so peaceful!", False),  # an intensifier
    ("I had a mentor too when I was learning how to dance.", False),  # "also"
    ("The train was cancelled due to the storm, so I took the bus.", True),
    ("We've moved! New address is 22 Harbour Road, Whitby.", False),
    ("I've lived here since 2019.", False),  # a time, not a reason
    ("Me too. See you there!", False),
    ("flight_search failed: timeout after 30s contacting the airline API (LIS->KIX).", True),  # an error's cause
    ("The payment was rejected (card expired).", True),
    ("The job failed.", False),
])
def test_a_turn_giving_a_reason_in_english(turn: str, filled: bool) -> None:
    assert fills(answer_slot("why did we move"), turn, "why did we move") is filled


def test_a_tool_errors_cause_keeps_its_place_above_an_unrelated_reason() -> None:
    """The README demo: "Why did the flight search fail?" is answered by the tool's error, which states its cause
    without a reason word; another turn's ", so I'm using my phone" does not go above it."""
    assert slot_first("Why did the flight search fail?", [
        "flight_search failed: timeout after 30s contacting the airline API (LIS->KIX).",
        "Also my laptop broke last week, so I'm using my phone for everything now.",
        "The flight search timed out; retrying with a smaller date window usually works."]) is None


@pytest.mark.parametrize(("turn", "filled"), [
    ("早上一杯就够了，下午喝会失眠。", True),
    ("因为胃不好，医生让我少喝。", True),
    ("太贵了，换了一家。", True),
    ("为了方便接孩子，我们搬到了学校附近。", True),
    ("我喝咖啡只喝燕麦拿铁，不加糖。", False),
    ("明天下午三点开会。", False),  # 开会 is a meeting, no consequence
    ("我太太也喜欢喝茶。", False),  # 太太: a wife, not "too"
])
def test_a_turn_giving_a_reason_in_chinese(turn: str, filled: bool) -> None:
    assert fills(answer_slot("为什么下午不喝咖啡"), turn, "为什么下午不喝咖啡") is filled


@pytest.mark.parametrize(("question", "texts", "first"), [
    ("why did we move", ["We've moved! New address is 22 Harbour Road, Whitby.",
                         "Great, I'll use 22 Harbour Road from now on.", "The old flat was too noisy anyway."], 2),
    ("为什么下午不喝咖啡", ["我喝咖啡只喝燕麦拿铁，不加糖。", "好的，记住了。", "早上一杯就够了，下午喝会失眠。"], 2),
    ("Why did Jon close his bank account?", ["I closed my bank account because of the fees.",
                                             "Did you really? I did that last year, too lazy to switch."], None),
    ("Why did we move?", ["Why did you move, by the way?", "Because the flat was too small."], None),
])
def test_the_turn_giving_the_reason_goes_first(question: str, texts: list[str], first: int | None) -> None:
    assert slot_first(question, texts) == first


def test_a_reason_orders_but_never_scores() -> None:
    """A reason is often told without a word marking it: a turn without one loses no score, and a result without
    one is no sign the store lacks the answer."""
    question = "Why did Caroline choose the adoption agency?"
    texts = ["I chose them for their inclusivity and support for LGBTQ+ folks.", "That's great, Caroline!"]
    assert fills_each(question, texts) == [None, None] and unfilled(question, texts) == [False, False]
    assert not named_slot(answer_slot(question))


@pytest.mark.parametrize(("question", "texts", "first"), [
    ("what book am I reading", ["Club meets on the last Tuesday of the month at Anya's place.",
                                "I'm reading The Left Hand of Darkness for my book club.",
                                "Slow start but I love the world-building."], 1),
    ("What laptop do I use?", ["I'm on a Pixel 8 now, the old iPhone finally died.",
                               "My work laptop is a ThinkPad X1 Carbon."], 1),
    ("我现在用什么电脑？", ["周末去了趟超市。", "公司给配了新的MacBook Pro，以后主要用这台了。"], 1),
    ("What airline is mom flying?", ["My mom is flying in on the 12th.",
                                     "Mom's flight got rebooked: she lands at Heathrow on the 13th."], None),  # a place
    ("What job does Anya have?", ["She lives in Leeds with two cats.", "She's a nurse at the Royal Infirmary."],
     None),  # a common noun answers it: no check sees one
])
def test_the_turn_naming_the_thing_asked_goes_first(question: str, texts: list[str], first: int | None) -> None:
    assert slot_first(question, texts) == first


@pytest.mark.parametrize(("question", "texts"), [
    # LoCoMo: the date of "When did…" is the session's, and a count may be shown, not said
    ("When did Jon start reading \"The Lean Startup\"?", ["I just started reading The Lean Startup, so inspiring!",
                                                          "Nice, tell me how it goes."]),
    ("How many children does Melanie have?", ["Here's a photo of my kids at the beach!", "They look so happy."]),
    ("雅思考试是哪天？", ["我在准备雅思考试，目标是总分七分。", "加油！"]),
])
def test_a_time_or_a_count_not_said_is_no_sign_the_store_lacks_it(question: str, texts: list[str]) -> None:
    """The absent logit leaves a question about a time or a count alone (only the one-item slot logit applies);
    a named thing the result does not say lowers the whole result."""
    calibration = dataclasses.replace(SENTENCE_MIXED, slot_logit=1.0, absent_logit=6.0)
    kwargs = {"query": question, "cosines": [0.95, 0.90], "stats": (None, 0.85)}
    assert not shown_slot(answer_slot(question))
    assert bounded_scores([0.0, 0.0], texts=texts, calibration=calibration, **kwargs) == bounded_scores(
        [0.0, 0.0], texts=texts, calibration=dataclasses.replace(calibration, absent_logit=0.0), **kwargs)
    airline = "What airline is mom flying?"
    rebooked = ["Mom's flight got rebooked: she lands at Heathrow on the 13th at noon.", "Good to know, thanks."]
    kwargs = {**kwargs, "query": airline}
    assert shown_slot(answer_slot(airline))
    assert bounded_scores([0.0, 0.0], texts=rebooked, calibration=calibration, **kwargs)[0] < bounded_scores(
        [0.0, 0.0], texts=rebooked, calibration=dataclasses.replace(calibration, absent_logit=0.0), **kwargs)[0]
