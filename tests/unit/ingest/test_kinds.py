"""Typed memories derived at write time (memory_ext.ingest.kinds): preference, fact, event, procedure and
failure_pattern, in English and Chinese, with no LLM."""

from __future__ import annotations

import json
from dataclasses import fields, replace
from typing import Any

import pytest

from memory_ext.ingest.derive import DerivedRecord
from memory_ext.ingest.kinds import derive_kinds

TS = 1683554160.0  # 2023-05-08 13:56 UTC, a Monday


def turn(i: int, role: str, content: Any, speaker: str | None = None, session: str = "s1",
         **kw: Any) -> dict[str, Any]:
    d = {"id": f"t{i}", "role": role, "content": content, "speaker": speaker, "ts": TS + i * 60,
         "session_id": session, "tool_calls": [], "attachments": [], "metadata": {}}
    d.update(kw)
    return d


def of_kind(records: list[DerivedRecord], kind: str) -> list[DerivedRecord]:
    return [r for r in records if r.kind == kind]


def texts(records: list[DerivedRecord], kind: str) -> list[str]:
    return [r.text for r in of_kind(records, kind)]


KEYS = {"id", "kind", "text", "index_text", "ref_ts", "turn_ids", "source_role", "speaker", "session_id",
        "anchor_turn_id", "tags", "entities", "claims", "key_text"}


# ------------------------------------------------------------------------------------------ personal kinds


def test_english_preference_fact_event_from_one_user_turn() -> None:
    seq = [turn(1, "user", "I prefer aisle seats, and I'm allergic to peanuts. I live in Lisbon. "
                           "I ran a marathon last Saturday!", "Ana")]
    recs = derive_kinds(seq, 0)
    assert texts(recs, "preference") == ["Ana prefers aisle seats", "Ana is allergic to peanuts"]
    assert texts(recs, "fact") == ["Ana lives in Lisbon"]
    assert texts(recs, "event") == ["Ana: ran a marathon (2023-05-06)"]
    for r in recs:
        assert {f.name for f in fields(r)} == KEYS
        assert r.anchor_turn_id == "t1" and r.turn_ids == ["t1"]
        assert r.speaker == "Ana" and r.session_id == "s1" and r.source_role == "user"
        assert r.ref_ts == TS + 60
        assert r.text in r.index_text and r.kind in r.index_text
    assert "peanuts" in of_kind(recs, "preference")[1].index_text
    assert len({r.id for r in recs}) == len(recs)


def test_unknown_speaker_is_the_user_and_more_facts() -> None:
    seq = [turn(1, "user", "My daughter's name is Lily. I work at Siemens as an engineer. "
                           "I have two dogs. I don't like horror movies.")]
    recs = derive_kinds(seq, 0)
    assert texts(recs, "fact") == ["the user's daughter's name is Lily", "the user works at Siemens as an engineer",
                                   "the user has two dogs"]
    assert texts(recs, "preference") == ["the user doesn't like horror movies"]


def test_chinese_preference_fact_event() -> None:
    seq = [turn(1, "user", "明天我要去北京出差。我喜欢靠窗的座位。我住在杭州。", "小明"),
           turn(2, "user", "我对花生过敏，我是一名护士，我的女儿叫小红，上周六我们去了西湖")]
    recs = derive_kinds(seq, 0)
    assert texts(recs, "event") == ["小明: 要去北京出差 (2023-05-09)", "用户: 我们去了西湖 (2023-05-06)"]
    assert texts(recs, "preference") == ["小明喜欢靠窗的座位", "用户对花生过敏"]
    assert texts(recs, "fact") == ["小明住在杭州", "用户是护士", "用户的女儿叫小红"]
    assert {r.anchor_turn_id for r in recs if r.speaker == "小明"} == {"t1"}
    assert "plan" in of_kind(recs, "event")[0].tags and "past" in of_kind(recs, "event")[1].tags


@pytest.mark.parametrize("content", [
    "Do you like sushi?",
    "Do I like sushi? Hmm.",
    "If I lived in Paris I would love croissants.",
    "Maybe I'll visit Rome next month.",
    "I'd love to run a marathon next year.",
    "My sister loves sushi.",
    "ok thanks! 👍",
    "I love it!",
    "I love that you remembered.",
    "I have a question about my booking.",
    "I'm a bit tired today.",
    "你喜欢寿司吗？",
    "如果我住在上海，我会喜欢小笼包。",
    "好的，谢谢",
    "What do you prefer, trains or planes?",
])
def test_no_records_from_questions_hypotheticals_chitchat_and_others(content: str) -> None:
    assert derive_kinds([turn(1, "user", content, "Ana")], 0) == []


def test_events_need_a_timestamp_and_a_time_expression() -> None:
    assert texts(derive_kinds([turn(1, "user", "I ran a marathon.", "Ana")], 0), "event") == []
    no_ts = turn(1, "user", "I ran a marathon yesterday.", "Ana", ts=None)
    assert texts(derive_kinds([no_ts], 0), "event") == []
    recs = derive_kinds([turn(1, "user", "We adopted a puppy two weeks ago.", "Ana")], 0)
    assert texts(recs, "event") == ["Ana: We adopted a puppy (2023-04-21..2023-04-27)"]


def test_assistant_personal_statements_only_with_a_human_speaker() -> None:
    bot = turn(1, "assistant", "I love helping with travel plans. I live in the cloud.")
    human = turn(2, "assistant", "I love hiking in the Alps.", "Melanie")  # multi-party chat mapped to roles
    recs = derive_kinds([bot, human], 0)
    assert [r.text for r in recs] == ["Melanie loves hiking in the Alps"]
    assert recs[0].anchor_turn_id == "t2"


def test_only_turns_from_first_are_derived() -> None:
    seq = [turn(1, "user", "I live in Lisbon.", "Ana"), turn(2, "user", "I prefer window seats.", "Ana")]
    recs = derive_kinds(seq, 1)
    assert [(r.kind, r.anchor_turn_id) for r in recs] == [("preference", "t2")]
    assert derive_kinds(seq, 2) == []


# ------------------------------------------------------------------------------------------ failures and procedures


def flight_conversation(fixed: bool = True, failed: bool = True) -> list[dict[str, Any]]:
    seq = [
        turn(1, "user", "Can you find flights to Tokyo for March 3?", "Ana"),
        turn(2, "assistant", "Searching.", tool_calls=[{"name": "flight_search", "arguments": {"to": "Tokyo"}}]),
        turn(3, "tool", "flight_search failed: timeout contacting airline API" if failed
             else '{"flights": [{"id": "NH204", "price": 742}]}', "flight_search"),
    ]
    if failed and fixed:
        seq += [
            turn(4, "assistant", "Retrying with a longer timeout.", tool_calls=[{
                "id": "c2", "type": "function",
                "function": {"name": "flight_search", "arguments": json.dumps({"to": "Tokyo", "timeout_s": 30})}}]),
            turn(5, "tool", '{"flights": [{"id": "NH204", "price": 742}]}', "flight_search",
                 metadata={"tool_call_id": "c2"}),
        ]
    seq.append(turn(6, "assistant", "I found ANA NH204 for 742 EUR."))
    return seq


def test_failure_followed_by_fix_gives_one_failure_pattern() -> None:
    recs = derive_kinds(flight_conversation(), 0)
    fails = of_kind(recs, "failure_pattern")
    assert len(fails) == 1
    f = fails[0]
    # the lesson, from the structured calls: what changed between the failed and the successful call
    assert f.text == "flight_search failed: timeout contacting airline API; succeeded with timeout_s 30"
    # a lesson is anchored to the call that worked (t4), the error (t3) next
    assert f.anchor_turn_id == "t4" and f.turn_ids[:2] == ["t4", "t3"]
    assert set(f.turn_ids) == {"t2", "t3", "t4", "t5"}
    assert f.tags[:3] == ["failure", "flight_search", "timeout"]
    for word in ("flight_search", "timeout", "failed"):
        assert word in f.index_text
    assert f.source_role == "assistant"


def test_successful_tool_sequence_gives_a_procedure_and_no_failure() -> None:
    recs = derive_kinds(flight_conversation(failed=False), 0)
    assert of_kind(recs, "failure_pattern") == []
    procs = of_kind(recs, "procedure")
    assert [p.text for p in procs] == ["how to find flights to Tokyo for March 3: call flight_search(to=Tokyo)"]
    p = procs[0]
    assert p.anchor_turn_id == "t6" and p.turn_ids[:2] == ["t6", "t1"]
    assert "flight_search" in p.tags and "flight_search" in p.index_text


def test_procedure_after_a_fixed_failure_lists_only_the_successful_call() -> None:
    procs = of_kind(derive_kinds(flight_conversation(), 0), "procedure")
    assert [p.text for p in procs] == [
        "how to find flights to Tokyo for March 3: call flight_search(to=Tokyo, timeout_s=30)"]


def test_unfixed_failure_and_a_fix_in_a_later_batch() -> None:
    seq = flight_conversation(fixed=False)[:3]
    recs = derive_kinds(seq, 0)
    assert texts(recs, "failure_pattern") == ["flight_search failed with timeout (timeout contacting airline API)"]
    later = flight_conversation()[:5]  # the fix arrives with the next batch; the error is context
    recs = derive_kinds(later, 3)
    fails = of_kind(recs, "failure_pattern")
    assert len(fails) == 1 and fails[0].text.endswith("succeeded with timeout_s 30")
    assert fails[0].anchor_turn_id == "t4" and "t3" in fails[0].turn_ids


@pytest.mark.parametrize("result, klass", [
    ('{"error": {"message": "HTTP 503 Service Unavailable"}}', "http 503"),
    ("Traceback (most recent call last):\n  File \"x.py\", line 3\nConnectionError: host unreachable",
     "ConnectionError"),
    ('{"status": "error", "message": "rate limit exceeded"}', "rate limit"),
    ("请求超时，航班查询失败", "timeout"),
])
def test_error_kinds_of_tool_results(result: str, klass: str) -> None:
    seq = [turn(1, "user", "Book a hotel in Kyoto"),
           turn(2, "assistant", "", tool_calls=[{"name": "hotel_search", "args": {"city": "Kyoto"}}]),
           turn(3, "tool", result)]
    fails = of_kind(derive_kinds(seq, 0), "failure_pattern")
    assert len(fails) == 1
    assert fails[0].text.startswith("hotel_search failed with")
    assert klass in fails[0].tags and klass in fails[0].index_text


@pytest.mark.parametrize("result", [
    '{"hotels": [], "error": null}',
    '{"status": "ok", "message": "no errors"}',
    "Found 3 hotels; no errors.",
    '{"results": ["Kyoto Inn"], "note": "timeout_s was 30"}',
])
def test_successful_results_are_not_failures(result: str) -> None:
    seq = [turn(1, "user", "Book a hotel in Kyoto"),
           turn(2, "assistant", "", tool_calls=[{"name": "hotel_search", "args": {"city": "Kyoto"}}]),
           turn(3, "tool", result)]
    assert of_kind(derive_kinds(seq, 0), "failure_pattern") == []


def test_embedded_call_error_and_switch_to_another_tool() -> None:
    seq = [turn(1, "user", "What's the weather in Oslo?"),
           turn(2, "assistant", "", tool_calls=[{"name": "weather_api", "arguments": {"city": "Oslo"},
                                                 "error": "401 Unauthorized"}]),
           turn(3, "assistant", "", tool_calls=[{"name": "web_search", "arguments": {"q": "Oslo weather"},
                                                 "result": {"answer": "4°C, rain"}}]),
           turn(4, "assistant", "It is 4°C and raining in Oslo.")]
    fails = of_kind(derive_kinds(seq, 0), "failure_pattern")
    assert [f.text for f in fails] == [
        "weather_api failed with http 401, unauthorized (401 Unauthorized); "
        "fix: used web_search(q=Oslo weather) instead"]
    assert "web_search" in fails[0].tags and "web_search" in fails[0].index_text


def test_user_reported_error_and_assistant_fix() -> None:
    seq = [turn(1, "user", "I ran `pip install foo` and got ModuleNotFoundError: No module named 'bar'"),
           turn(2, "assistant", "Install the missing dependency with `pip install bar` and rerun it.")]
    recs = derive_kinds(seq, 0)
    assert texts(recs, "failure_pattern") == [
        "`pip install foo` failed with ModuleNotFoundError (ModuleNotFoundError: No module named 'bar'); "
        "fix: Install the missing dependency with `pip install bar` and rerun it"]
    assert texts(recs, "procedure") == ["how to fix ModuleNotFoundError: run `pip install bar`"]


def test_prose_failures_without_technical_context_are_not_failure_patterns() -> None:
    seq = [turn(1, "user", "I failed my driving test, it was an error on my part.", "Ana"),
           turn(2, "assistant", "Sorry to hear that! You will pass next time.")]
    assert of_kind(derive_kinds(seq, 0), "failure_pattern") == []


def test_assistant_commentary_does_not_duplicate_a_tool_failure() -> None:
    seq = [*flight_conversation(fixed=False)[:3],
           turn(4, "assistant", "Sorry, flight_search failed with a timeout. Try again later?")]
    assert len(of_kind(derive_kinds(seq, 0), "failure_pattern")) == 1


def test_step_list_procedures_en_and_zh() -> None:
    seq = [turn(1, "user", "How do I reset my router?"),
           turn(2, "assistant", "1. Unplug the router.\n2. Wait 30 seconds.\n3. Plug it back in."),
           turn(3, "user", "请问怎么设置 git 的用户名？"),
           turn(4, "assistant", "首先打开终端，然后运行 git config --global user.name 你的名字，最后检查配置。"),
           turn(5, "user", "How do I list hidden files?"),
           turn(6, "assistant", "Use this:\n```bash\nls -la\n```")]
    procs = of_kind(derive_kinds(seq, 0), "procedure")
    assert [p.text for p in procs] == [
        "how to reset my router: Unplug the router; Wait 30 seconds; Plug it back in",
        "如何设置 git 的用户名：打开终端; 运行 git config --global user.name 你的名字; 检查配置",
        "how to list hidden files: run `ls -la`",
    ]
    assert [p.anchor_turn_id for p in procs] == ["t2", "t4", "t6"]
    assert [p.turn_ids for p in procs] == [["t2", "t1"], ["t4", "t3"], ["t6", "t5"]]
    assert "ls" in procs[2].tags


def test_no_procedure_without_steps_or_request() -> None:
    seq = [turn(1, "user", "Tell me about Kyoto."),
           turn(2, "assistant", "Kyoto was the capital of Japan for over a thousand years."),
           turn(3, "assistant", "1. Fushimi Inari\n2. Kinkaku-ji")]  # a list, but not an answer to a how-to
    assert of_kind(derive_kinds(seq, 0), "procedure") == []
    seq[0]["content"] = "How do I get to Fushimi Inari?"
    seq[2]["content"] = "1. Take the JR Nara line.\n2. Get off at Inari station."
    assert [p.anchor_turn_id for p in of_kind(derive_kinds(seq, 0), "procedure")] == ["t3"]
    assert derive_kinds([turn(1, "assistant", "1. Unplug it.\n2. Plug it in.")], 0) == []


# ------------------------------------------------------------------------------------------ robustness and speed


def test_malformed_input_never_raises() -> None:
    seq: list[Any] = [
        None, 42, {"role": "user"}, {"id": "x1", "content": None},
        turn(1, "assistant", 123, tool_calls="oops"),
        turn(2, "assistant", "", tool_calls=[None, 5, {"name": None}, {"function": "bad"}, {"function": {"x": 1}},
                                             {"name": "ok_tool", "arguments": "{not json"},
                                             {"name": "t2", "arguments": ["a"]}]),
        turn(3, "tool", {"not": "a string"}),
        turn(4, "tool", "Error: boom", metadata="nope", ts="yesterday"),
        turn(5, "user", "I love sushi.", speaker=7, ts=float("nan")),
        turn(6, "user", "x" * 5000 + " I live in Lisbon."),
    ]
    recs = derive_kinds(seq, 0)
    assert isinstance(recs, list)
    assert any(r.kind == "failure_pattern" and r.anchor_turn_id == "t4" for r in recs)
    assert any(r.kind == "preference" and r.text == "the user loves sushi" for r in recs)
    assert derive_kinds(None, 0) == []  # type: ignore[arg-type]
    assert derive_kinds([], 5) == []
    assert derive_kinds([turn(1, "user", "I love sushi.")], "x") == []  # type: ignore[arg-type]


def test_every_turn_of_a_long_conversation_is_derived() -> None:
    """Deterministic, one preference and one event per statement turn (speed: ingest rate in memext bench)."""
    seq = flight_conversation() + [turn(10 + i, "user", f"I went hiking last Saturday and I love the Alps {i}.",
                                        "Ana") for i in range(40)]
    recs = derive_kinds(seq, 0)
    again = derive_kinds(seq, 0)
    assert [replace(r, id="") for r in again] == [replace(r, id="") for r in recs]  # the same records (ids are fresh)
    loves = {r.anchor_turn_id: r.text for r in recs if r.kind == "preference"}
    assert loves == {f"t{10 + i}": f"Ana loves the Alps {i}" for i in range(40)}
    events = {r.anchor_turn_id for r in recs if r.kind == "event"}
    assert events == {f"t{10 + i}" for i in range(40)}
