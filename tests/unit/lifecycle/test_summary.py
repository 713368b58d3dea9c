"""Index-hook summaries (memory_ext.lifecycle.summary): heuristic quality, chit-chat, high value, the LLM path."""

from __future__ import annotations

import doctest
import json

import pytest

from memory_ext.lifecycle import summary as summary_module
from memory_ext.lifecycle.summary import (
    ABSTRACT_MAX_CHARS,
    MAX_ENTITIES,
    MAX_KEY_FACTS,
    TITLE_MAX_CHARS,
    TITLE_MAX_CJK_CHARS,
    HookSummary,
    PlainTurn,
    is_chitchat,
    is_high_value,
    summarize,
    summarize_with_llm,
    turn_tags,
)
from memory_ext.llm import Delay, LLMCall, ScriptedLLM
from tests.conftest import Gate

# ------------------------------------------------------------------------------------------ conversations

FLIGHT_RESULTS = json.dumps({"results": [
    {"flight": f"NH{200 + i}", "carrier": "ANA", "price_eur": 700 + 13 * i, "depart": f"{6 + i % 12:02d}:05",
     "stops": i % 3, "note": "Greetings from the airline API, how are you today"}
    for i in range(60)
]})

FLIGHT_CHAT = [
    PlainTurn("Hi! How are you today?", speaker="Lena"),
    PlainTurn("Hello Lena! I'm doing well, thanks. How can I help?", role="assistant"),
    PlainTurn("I need a flight from Berlin to Tokyo on March 3. My budget is 800 EUR and I prefer a window seat.",
              speaker="Lena"),
    PlainTurn("Let me search for that.", role="assistant",
              tool_calls=[{"id": "c1", "type": "function", "function": {
                  "name": "flight_search",
                  "arguments": json.dumps({"from": "BER", "to": "TYO", "date": "2025-03-03", "max_eur": 800})}}]),
    PlainTurn(FLIGHT_RESULTS, role="tool"),
    PlainTurn("The cheapest option is ANA NH204 departing 9:05 for 742 EUR, with one stop in Munich.",
              role="assistant"),
    PlainTurn("ok", speaker="Lena"),
    PlainTurn("ok, book the 9am flight", speaker="Lena"),
    PlainTurn("Done. We decided to go with ANA NH204; the confirmation code is XK42P.", role="assistant",
              tool_calls=[{"name": "book_flight", "arguments": {"flight": "NH204"}}]),
    PlainTurn("thanks!! 👍", speaker="Lena"),
    PlainTurn("You're welcome, have a great trip!", role="assistant"),
]

CODE_CHAT = [
    PlainTurn("hey there"),
    PlainTurn("hi! what's up?", role="assistant"),
    PlainTurn("Our nightly export job crashes with a KeyError on the 'customer_id' column since Monday."),
    PlainTurn("The CSV header changed. Read it with a fallback:\n\n```python\nimport csv\n\n"
              "def rows(path):\n    with open(path) as f:\n        for row in csv.DictReader(f):\n"
              "            yield row.get('customer_id') or row['CustomerID']\n```\n"
              "This handles both header spellings.", role="assistant"),
    PlainTurn("Great, I'll use that fallback and pin pandas to 2.2.1 in requirements.txt."),
    PlainTurn("got it, thanks"),
]

ZH_CHAT = [
    PlainTurn("你好呀"),
    PlainTurn("你好！有什么可以帮你？", role="assistant"),
    PlainTurn("我们团队下周要把数据库从MySQL迁移到PostgreSQL，预计停机两小时。"),
    PlainTurn("建议先在测试环境演练一次，再安排周六凌晨两点切换。", role="assistant"),
    PlainTurn("好的，那就定在周六凌晨两点，由李明负责回滚方案。"),
    PlainTurn("```sql\nSELECT count(*) FROM orders;\n```\n迁移后用这个查询核对订单数。", role="assistant"),
    PlainTurn("嗯嗯，谢谢"),
]

GOOD_ANSWER = {
    "title": "Flight Berlin-Tokyo booked: ANA NH204",
    "abstract": "Lena asked for a Berlin-Tokyo flight on March 3 under 800 EUR; ANA NH204 (742 EUR) was booked.",
    "key_facts": ["Budget 800 EUR", "Booked ANA NH204 at 9:05", "Called flight_search and book_flight"],
    "entities": ["Lena", "Tokyo", "Berlin", "ANA NH204"],
    "tags": ["Travel", "flight booking"],
}


def _check_limits(hook: HookSummary) -> None:
    limit = TITLE_MAX_CJK_CHARS if summary_module.cjk_ratio(hook.title) > 0.25 else TITLE_MAX_CHARS
    assert hook.title and len(hook.title) <= limit
    assert (TITLE_MAX_CHARS, TITLE_MAX_CJK_CHARS, ABSTRACT_MAX_CHARS, MAX_KEY_FACTS) == (60, 30, 300, 5)  # the brief
    assert len(hook.abstract) <= ABSTRACT_MAX_CHARS
    assert len(hook.key_facts) <= MAX_KEY_FACTS
    assert len(hook.entities) <= MAX_ENTITIES
    assert all(isinstance(x, str) and x for x in hook.key_facts + hook.entities + hook.tags)


# ------------------------------------------------------------------------------------------ heuristic summary


def test_flight_chat_summary_is_informative_not_the_greeting() -> None:
    hook = summarize(FLIGHT_CHAT)
    _check_limits(hook)
    assert hook.source == "heuristic"
    assert "Tokyo" in hook.title and "Berlin" in hook.title
    assert not hook.title.lower().startswith(("hi", "hello", "i need"))
    for greeting in ("How are you", "Hello Lena", "doing well", "thanks", "welcome", "Let me search"):
        assert greeting not in hook.abstract
    assert "800 EUR" in hook.abstract and "ANA NH204" in hook.abstract and "742 EUR" in hook.abstract
    # sentences keep their conversation order
    assert hook.abstract.index("Berlin") < hook.abstract.index("742 EUR") < hook.abstract.index("decided")
    # the large JSON tool result never leaks into the hook
    assert "price_eur" not in hook.abstract and "{" not in hook.abstract
    assert not any("NH205" in e or "price" in e for e in hook.entities)
    assert any("decided to go with ANA NH204" in f for f in hook.key_facts)
    assert any(f.startswith("called ") and "flight_search" in f and "book_flight" in f for f in hook.key_facts)
    assert {"ANA NH204", "Tokyo", "Berlin", "800 EUR"} <= set(hook.entities)
    assert "EUR" not in hook.entities  # a bare currency code is no entity
    assert hook.entities.index("ANA NH204") < hook.entities.index("Lena")  # speakers come last
    assert hook.tags[:2] == ("decision", "tool_call")


def test_code_chat_summary_skips_code_and_keeps_the_problem_and_decision() -> None:
    hook = summarize(CODE_CHAT)
    _check_limits(hook)
    assert "KeyError" in hook.title or "export" in hook.title.lower()
    assert "hey" not in hook.title.lower()
    assert "KeyError" in hook.abstract and "2.2.1" in hook.abstract
    assert "def rows" not in hook.abstract and "import csv" not in hook.abstract
    assert "code_block" in hook.tags and "decision" in hook.tags and "error" in hook.tags
    assert any("2.2.1" in f for f in hook.key_facts)


def test_chinese_summary() -> None:
    hook = summarize(ZH_CHAT)
    _check_limits(hook)
    assert len(hook.title) <= TITLE_MAX_CJK_CHARS
    assert "迁移" in hook.title and "你好" not in hook.title
    assert "你好" not in hook.abstract and "谢谢" not in hook.abstract
    assert "MySQL" in hook.abstract and "周六凌晨两点" in hook.abstract
    assert hook.abstract.index("MySQL") < hook.abstract.index("李明")
    assert "SELECT" not in hook.abstract
    assert {"MySQL", "PostgreSQL", "李明"} <= set(hook.entities)
    assert any("李明" in f for f in hook.key_facts)
    assert "decision" in hook.tags and "code_block" in hook.tags


def test_small_talk_only_and_empty() -> None:
    hook = summarize([PlainTurn("hi"), PlainTurn("hello! 👋", role="assistant"), PlainTurn("thanks, bye")])
    assert hook.title == "Small talk" and hook.abstract == "" and hook.key_facts == ()
    assert summarize([PlainTurn("你好"), PlainTurn("好的，谢谢")]).title == "闲聊"
    assert summarize([]).title == "Small talk"


def test_only_tool_calls_gives_a_tool_title() -> None:
    hook = summarize([PlainTurn("", role="assistant", tool_calls=[{"name": "weather", "arguments": {"city": "Oslo"}}]),
                      PlainTurn('{"temp_c": 3}', role="tool")])
    assert "weather" in hook.title and hook.key_facts == ("called weather(city=Oslo)",)


def test_long_text_is_clipped_to_the_limits() -> None:
    words = " ".join(f"Project{i} milestone {i} costs {i * 100} EUR" for i in range(80))
    hook = summarize([PlainTurn(words + "."), PlainTurn("我们决定" + "在杭州西湖旁边开一家咖啡店" * 20 + "。")])
    _check_limits(hook)
    assert hook.abstract  # one over-long sentence is clipped, not dropped
    zh = summarize([PlainTurn("我们决定" + "在杭州西湖旁边开一家咖啡店" * 20 + "。")])
    assert 0 < len(zh.title) <= TITLE_MAX_CJK_CHARS


def test_summarize_is_deterministic_and_bounded_on_a_long_chat() -> None:
    assert summarize(FLIGHT_CHAT) == summarize(FLIGHT_CHAT)
    many = [PlainTurn(f"Turn {i}: we discussed the Berlin trip and a budget of {i * 10} EUR, Lena agreed.",
                      role="user" if i % 2 else "assistant") for i in range(200)]
    hook = summarize(many)  # 200 turns (its speed is measured by memext bench, not asserted here)
    assert summarize(many) == hook
    _check_limits(hook)
    assert {"Berlin", "Lena"} <= set(hook.entities) and "Berlin" in hook.abstract


# ------------------------------------------------------------------------------------------ turn predicates


@pytest.mark.parametrize("text", ["ok", "OK!", "thanks!", "Thank you so much 🙏", "好的", "嗯嗯", "hi there", "👍",
                                  "got it", "sounds good to me :)", "好的，谢谢！", "哈哈哈", "", "no problem"])
def test_chitchat(text: str) -> None:
    assert is_chitchat(PlainTurn(text))


@pytest.mark.parametrize("text", ["ok, book the 9am flight", "no", "thanks, the price is 20 EUR", "好的，明天见",
                                  "不行", "ok https://example.com", "ok ```x = 1```", "thanks Lena", "hi 2",
                                  "好的，就订这个航班"])
def test_not_chitchat(text: str) -> None:
    assert not is_chitchat(PlainTurn(text))


def test_tool_calls_and_attachments_are_never_chitchat() -> None:
    assert not is_chitchat(PlainTurn("ok", role="assistant", tool_calls=[{"name": "search"}]))
    assert not is_chitchat(PlainTurn("ok", role="tool"))
    assert not is_chitchat(PlainTurn("👍", attachments=[{"type": "image", "name": "ticket.png"}]))


def test_is_high_value() -> None:
    assert is_high_value(PlainTurn("Searching", tool_calls=[{"name": "flight_search"}]))
    assert is_high_value(PlainTurn('{"ok": true}', role="tool"))
    assert is_high_value(PlainTurn("```js\nconst x = 1;\n```"))
    assert is_high_value(PlainTurn("see file", attachments=[{"name": "a.pdf"}]))
    assert is_high_value(PlainTurn("Let's go with Postgres for the catalog."))
    assert is_high_value(PlainTurn("那就决定用Redis做缓存。"))
    assert is_high_value(PlainTurn("note", metadata={"importance": 70}))
    assert is_high_value(PlainTurn("note", metadata={"importance": 0.9}))
    assert not is_high_value(PlainTurn("note", metadata={"importance": 69}))
    assert not is_high_value(PlainTurn("note", metadata={"importance": 80}), importance_threshold=90)
    assert not is_high_value(PlainTurn("note", metadata={"importance": "high"}))
    assert not is_high_value(PlainTurn("The weather in Oslo was nice yesterday."))


def test_turn_tags() -> None:
    assert turn_tags(PlainTurn("x", tool_calls=[{"name": "f"}]))[0] == "tool_call"
    assert "tool_call" in turn_tags(PlainTurn("{}", role="tool"))
    assert turn_tags(PlainTurn('{"results": [{"a": 1}]}', role="tool")) == ["tool_call"]  # no content tags
    assert "error" in turn_tags(PlainTurn('{"error": "rate limited"}', role="tool"))
    assert "error" not in turn_tags(PlainTurn('{"error": null, "items": []}', role="tool"))
    tags = turn_tags(PlainTurn("Traceback (most recent call last):\n  File \"a.py\"\nKeyError: 'x'"))
    assert "error" in tags
    assert "code_block" in turn_tags(PlainTurn("fix:\n    for x in xs:\n        total += f(x)\n"))
    assert "code_block" not in turn_tags(PlainTurn("I went to Paris and loved it."))
    assert turn_tags(PlainTurn("Which hotel? see https://example.com/h")) [:2] == ["url", "question"]
    assert "attachment" in turn_tags(PlainTurn("here", attachments=[{"name": "a.pdf"}]))
    assert "decision" in turn_tags(PlainTurn("We decided to move the launch to May."))
    assert "decision" in turn_tags(PlainTurn("就用这个方案吧"))
    assert "decision" not in turn_tags(PlainTurn("We need to decide soon."))
    assert "error" in turn_tags(PlainTurn("部署报错了"))
    assert "thinking" in turn_tags(PlainTurn("answer", metadata={"thinking": "step 1..."}))
    assert "thinking" not in turn_tags(PlainTurn("answer", metadata={"thinking": ""}))
    assert "preference" in turn_tags(PlainTurn("I love spicy ramen."))


# ------------------------------------------------------------------------------------------ the LLM path


def test_llm_answers_well() -> None:
    llm = ScriptedLLM([GOOD_ANSWER], id="gpt-test")
    hook, why = summarize_with_llm(FLIGHT_CHAT, llm)
    assert why is None and hook.source == "gpt-test"
    assert hook.title == GOOD_ANSWER["title"] and hook.abstract == GOOD_ANSWER["abstract"]
    assert hook.key_facts == tuple(GOOD_ANSWER["key_facts"]) and hook.entities == tuple(GOOD_ANSWER["entities"])
    assert hook.tags[:2] == ("decision", "tool_call")  # the structural tags stay
    assert "travel" in hook.tags and "flight_booking" in hook.tags
    [call] = llm.calls
    assert call.json_schema is not None and call.system and call.timeout is not None
    assert "Berlin to Tokyo" in call.prompt and "flight_search" in call.prompt
    assert "characters cut" in call.prompt and len(call.prompt) < 6000  # the big JSON result is cut


def test_llm_answer_is_repaired() -> None:
    answer = ("Sure! ```json\n{'title': '" + "Very long title about the Tokyo flight booking " * 3 + "', "
              "'abstract': '" + "x" * 500 + "', 'key_facts': ['a fact', 3, null, 'a fact', 'b', 'c', 'd', 'e', 'f'], "
              "'entities': 'Tokyo', 'tags': ['#Travel', 5],}\n```")
    hook, why = summarize_with_llm(FLIGHT_CHAT, ScriptedLLM([answer]))
    assert why is None
    _check_limits(hook)
    assert hook.key_facts == ("a fact", "b", "c", "d", "e")
    assert hook.entities == ("Tokyo",) and "travel" in hook.tags
    assert len(hook.abstract) <= ABSTRACT_MAX_CHARS


def test_llm_malformed_then_good_retries_once() -> None:
    llm = ScriptedLLM(["I think the title is Tokyo", {"title": "", "abstract": "x"}, GOOD_ANSWER])
    hook, why = summarize_with_llm(FLIGHT_CHAT, llm)
    assert why is not None and hook.source == "heuristic"  # two bad answers: the good third is never asked
    assert len(llm.calls) == 2 and "not valid" in llm.calls[1].prompt
    llm = ScriptedLLM(["not json at all", GOOD_ANSWER])
    hook, why = summarize_with_llm(FLIGHT_CHAT, llm)
    assert why is None and hook.title == GOOD_ANSWER["title"] and len(llm.calls) == 2
    assert "not json at all" in llm.calls[1].prompt


def test_llm_malformed_twice_falls_back_with_reason() -> None:
    hook, why = summarize_with_llm(FLIGHT_CHAT, ScriptedLLM(["nope", '{"title": 5}']))
    assert hook == summarize(FLIGHT_CHAT)
    assert why is not None and "InvalidAnswer" in why and "after one retry" in why


def test_llm_raising_falls_back() -> None:
    hook, why = summarize_with_llm(ZH_CHAT, ScriptedLLM([ConnectionError("provider down")]))
    assert hook == summarize(ZH_CHAT) and hook.source == "heuristic"
    assert why is not None and "ConnectionError" in why and "provider down" in why


def test_llm_too_slow_falls_back(gate: Gate) -> None:
    llm = ScriptedLLM([Delay(5.0, then=GOOD_ANSWER)])
    hook, why = summarize_with_llm(FLIGHT_CHAT, llm, timeout=0.1)
    assert hook.source == "heuristic" and why is not None and "TimeoutError" in why
    assert 0 < llm.calls[0].timeout <= 0.1  # the client is told the deadline, so it gives up in time
    # a client that ignores its timeout is cut off by the caller's deadline all the same

    def hang(call: LLMCall) -> dict[str, object]:
        gate.wait()
        return GOOD_ANSWER

    hook, why = summarize_with_llm(FLIGHT_CHAT, ScriptedLLM(hang), timeout=0.1)
    assert gate.entered and not gate.finished  # came back without waiting for the answer
    assert hook.source == "heuristic" and why is not None and "TimeoutError" in why


def test_llm_long_input_is_cut_to_the_most_informative_turns() -> None:
    filler = [PlainTurn(f"thanks, that's great {i}", role="user" if i % 2 else "assistant") for i in range(300)]
    key = PlainTurn("We decided to host the offsite in Lisbon on 12 May for 40 people.")
    turns = [*filler[:150], key, *filler[150:]]
    llm = ScriptedLLM([GOOD_ANSWER])
    _, why = summarize_with_llm(turns, llm, max_input_tokens=400)
    assert why is None
    prompt = llm.calls[0].prompt
    assert "Lisbon on 12 May" in prompt and "left out" in prompt and "cut to fit" in prompt
    assert summary_module.estimate_tokens(prompt) < 400 + 800  # transcript within budget, plus instructions


def test_docstring_examples() -> None:
    result = doctest.testmod(summary_module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0


def test_llm_input_budget_too_small_for_any_turn_falls_back() -> None:
    llm = ScriptedLLM([GOOD_ANSWER])
    hook, why = summarize_with_llm(FLIGHT_CHAT, llm, max_input_tokens=1)
    assert hook.source == "heuristic" and why is not None and "fits no turn" in why and llm.calls == []


def test_engine_turn_rows_are_turn_like() -> None:
    from dataclasses import fields

    from memory_ext.store.sqlite import TurnRow

    names = {f.name for f in fields(TurnRow)}
    assert {"role", "speaker", "content", "ts", "tool_calls", "attachments", "metadata"} <= names
    values = {f.name: None for f in fields(TurnRow)}
    values.update(role="user", content="We decided to fly to Oslo on 3 May.", tool_calls=[], attachments=[],
                  metadata={}, speaker="Ana", ts=0.0)
    row = TurnRow(**values)
    hook = summarize([row])
    assert "Oslo" in hook.title and is_high_value(row) and not is_chitchat(row)
