"""The temporal archive lifecycle (issue 5): archiving into daily files, index hooks, ``render_prompt``,
``retrieve``, the weekly merge, the monthly eviction, scheduling and interrupted compaction.

Everything runs offline on the deterministic hashing embedder with explicit timestamps.
"""

from __future__ import annotations

import json
import math
import re
import sqlite3
import subprocess
import sys
import textwrap
from datetime import UTC, datetime, timedelta
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest

from memory_ext import MemoryEngine, Turn
from memory_ext.errors import HookNotFoundError, InvalidArgumentError
from memory_ext.llm import ScriptedLLM
from memory_ext.text import estimate_tokens

MON = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)  # Monday of ISO week 2026-W10
CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]")


def open_engine(path: Path, llm: Any = None, recall: dict[str, Any] | None = None, **lifecycle: Any) -> MemoryEngine:
    config: dict[str, Any] = {"lifecycle": lifecycle} if lifecycle else {}
    if recall:
        config["recall"] = recall
    return MemoryEngine.open(path, embedder="hashing", config=config or None, llm=llm)


@pytest.fixture
def eng(tmp_path: Path):
    e = open_engine(tmp_path / "store")
    yield e
    e.close()


FIRST_HOP = {"feedback_weight": 0.0}
"""Searches without the second hop: the cold prior's arithmetic is the first ranking's (with the hop, the turns fed
back may differ once the prior moves a turn, so the raw scores differ by more than the prior)."""


@pytest.fixture
def eng_first_hop(tmp_path: Path):
    e = open_engine(tmp_path / "store", recall=FIRST_HOP)
    yield e
    e.close()


def t(role: str, content: str, ts: datetime, session: str = "s1", **kw: Any) -> Turn:
    return Turn(role=role, content=content, timestamp=ts, session_id=session, **kw)


def db_rows(path: Path, table: str, where: str = "", args: tuple = ()) -> list[tuple]:
    conn = sqlite3.connect(f"file:{path / 'memory.sqlite3'}?mode=ro", uri=True)
    try:
        return sorted(conn.execute(f"SELECT * FROM {table} {where}", args).fetchall(), key=repr)
    finally:
        conn.close()


def snapshot(path: Path, tables: tuple[str, ...] = ("files", "file_turns", "records", "turns")) -> dict:
    return {tb: db_rows(path, tb) for tb in tables}


def all_files(e: MemoryEngine, ns: str):
    return e.hooks(ns, include_merged=True)


def files_by_period(e: MemoryEngine, ns: str, period: str):
    return [h for h in all_files(e, ns) if h.period == period]


# =============================================================================================== 1. archiving
def test_turns_of_one_utc_day_share_one_daily_file(eng: MemoryEngine) -> None:
    day1 = [t("user", "Can you find me a dentist near Alfama for next week?", MON),
            t("assistant", "Dr. Sousa in Alfama has a slot on Tuesday at 10:00.", MON + timedelta(minutes=1)),
            t("user", "Book it please.", MON + timedelta(hours=14, minutes=58))]  # 23:58 UTC, same day
    day2 = [t("user", "Did the dentist confirm the Tuesday slot?", MON + timedelta(hours=15, minutes=1)),  # 00:01
            t("assistant", "Yes, confirmed for Tuesday 10:00.", MON + timedelta(hours=15, minutes=2))]
    eng.add_turns(day1, "ana")
    eng.add_turns(day2, "ana")
    files = sorted(files_by_period(eng, "ana", "daily"), key=lambda h: h.period_key)
    assert [h.period_key for h in files] == ["2026-03-02", "2026-03-03"]
    assert [x.content for x in eng.retrieve(files[0].id).turns] == [x.content for x in day1]
    assert [x.content for x in eng.retrieve(files[1].id).turns] == [x.content for x in day2]
    # the turn of a later day closed the earlier day's file; the latest day's file is still open
    assert [h.status for h in files] == ["closed", "open"] and not any(h.truncated for h in files)


def test_soft_threshold_closes_the_file_after_the_turn(tmp_path: Path) -> None:
    e = open_engine(tmp_path / "s", file_soft_tokens=60)
    sentences = [f"Note {i}: the quarterly supplier review for warehouse {i} moved to the Friday slot, ok."
                 for i in range(5)]  # ~85 chars = 22 tokens each
    assert all(20 <= estimate_tokens(s) <= 25 for s in sentences)
    for i, s in enumerate(sentences):  # one turn at a time, like a live conversation
        e.add_turns([t("user", s, MON + timedelta(minutes=i))], "ana")
    files = sorted(files_by_period(e, "ana", "daily"), key=lambda h: h.start)
    first = e.retrieve(files[0].id)
    # 3 turns reach 66 >= 60 tokens (soft), still under the hard 90: the file closes after the third turn, whole
    assert [x.content for x in first.turns] == sentences[:3]
    assert files[0].status == "closed" and not files[0].truncated
    assert all("part" not in x.metadata for x in first.turns)
    assert [x.content for x in e.retrieve(files[1].id).turns] == sentences[3:]
    assert files[1].status == "open"
    assert files[0].period_key == files[1].period_key == "2026-03-02"
    e.close()


def test_hard_threshold_cuts_a_long_turn_and_the_parts_rebuild_it(tmp_path: Path) -> None:
    e = open_engine(tmp_path / "s", file_soft_tokens=60)
    e.add_turns([t("user", "Please summarise the incident report below.", MON)], "ana")
    report = " ".join(f"At 0{i % 10}:{i:02d} the payment gateway returned error E{400 + i} for batch {i}."
                      for i in range(30))  # ~1900 chars, ~480 tokens: more than five hard thresholds
    e.add_turns([t("assistant", report, MON + timedelta(minutes=1)),
                 t("user", "Thanks, who was on call?", MON + timedelta(minutes=2))], "ana")
    part = {r[1]: r[5] for r in db_rows(e.path, "files")}  # id -> part number (the order within a day)
    files = sorted(files_by_period(e, "ana", "daily"), key=lambda h: part[h.id])
    pieces: list[tuple[int, int, str]] = []
    for h in files:
        f = e.retrieve(h.id)
        for x in f.turns:
            if x.content != report and "part" in x.metadata:
                p = x.metadata["part"]
                assert p["of"] == len(report)
                assert report[p["start"]:p["stop"]] == x.content
                pieces.append((p["start"], p["stop"], x.content))
    assert len(pieces) >= 5
    pieces.sort()
    assert "".join(p[2] for p in pieces) == report  # nothing lost, nothing repeated
    assert all(a[1] == b[0] for a, b in pairwise(pieces))
    cut_files = [h for h in files if h.truncated]
    assert len(cut_files) >= 4
    hard = math.floor(60 * 1.5)
    for h in cut_files:
        assert h.status == "closed"
        assert h.token_count <= hard + 2  # cut at the hard threshold (a word boundary may move it slightly)
        assert "cut at its hard token threshold" in e.retrieve(h.id).text
    # the turn after the long one continues in the file that holds the report's last part
    last = [h for h in files if any(x.content == "Thanks, who was on call?" for x in e.retrieve(h.id).turns)]
    assert len(last) == 1 and not last[0].truncated
    # every turn stays whole in the truth store
    assert [x.content for x in e.get_turns("ana")][1] == report
    e.close()


def test_turns_keep_tool_calls_attachments_and_thinking(eng: MemoryEngine) -> None:
    call = {"name": "search_flights", "arguments": {"from": "LIS", "to": "HND", "date": "2026-04-02"},
            "result": {"flights": [{"no": "NH204", "dep": "09:05"}]}}
    att = {"type": "image", "name": "boarding-pass.png", "url": "https://files.example/bp.png"}
    turns = [t("user", "Find me a flight to Tokyo on April 2", MON, attachments=(att,)),
             t("assistant", "NH204 leaves at 09:05.", MON + timedelta(minutes=1), tool_calls=(call,),
               metadata={"thinking": "user prefers morning flights", "model": "x-1"}, speaker="TravelBot")]
    eng.add_turns(turns, "ana")
    f = eng.retrieve(eng.hooks("ana")[0].id)
    assert f.turns[0].attachments == (att,)
    assert f.turns[1].tool_calls == (call,)
    assert f.turns[1].metadata["thinking"] == "user prefers morning flights"
    assert f.turns[1].speaker == "TravelBot"
    assert f.turns[1].timestamp == MON + timedelta(minutes=1)
    assert "NH204" in f.text and "boarding-pass.png" in f.text and "search_flights" in f.text


@pytest.mark.parametrize("text", ["Book the 9:40 train to Lyon for Friday, seat by the window.",
                                  "我想订下周三去杭州的高铁票，靠窗的座位。",
                                  "Meeting with 王经理 about the Q3 budget at 3pm"])
def test_token_estimate_matches_the_formula(eng: MemoryEngine, text: str) -> None:
    eng.add_turns([t("user", text, MON)], "ana")
    ratio = len(CJK.findall(text)) / len(text)
    expected = math.ceil(len(text) * (0.25 + 1.25 * ratio))
    assert eng.hooks("ana")[0].token_count == expected
    if ratio:
        assert expected > math.ceil(len(text) * 0.25)  # CJK characters cost more than English ones


# =============================================================================================== 2. hooks
def greeting_then_content(day: datetime) -> list[Turn]:
    return [t("user", "hi there!", day), t("assistant", "Hello! How can I help you today?", day),
            t("user", "My passport expires in May; I need to renew it before the Lisbon conference on June 12.",
              day + timedelta(minutes=1)),
            t("assistant", "The renewal appointment is booked at the Porto consulate on April 2 at 10:00; bring "
              "two photos and the old passport.", day + timedelta(minutes=2))]


def test_hook_title_and_abstract_are_informative(eng: MemoryEngine) -> None:
    eng.add_turns(greeting_then_content(MON), "ana")
    h = eng.hooks("ana")[0]
    assert "hi there" not in h.title.lower() and "hello" not in h.title.lower()
    assert "passport" in (h.title + h.abstract).lower()
    assert "consulate" in h.abstract.lower() or "april 2" in h.abstract.lower()
    assert h.abstract != (greeting_then_content(MON)[0].content + " " + greeting_then_content(MON)[1].content)[:80]
    assert h.period == "daily" and h.period_key == "2026-03-02" and h.summary_source == "heuristic"


def test_hook_tags_are_inferred_from_content(eng: MemoryEngine) -> None:
    eng.add_turns([
        t("user", "Why does the deploy fail? Logs are at https://ci.example.com/run/77", MON),
        t("assistant", "The config has a typo:\n```yaml\nreplicas: tree\n```", MON + timedelta(minutes=1),
          tool_calls=({"name": "fetch_logs", "arguments": {"run": 77}},), metadata={"thinking": "check yaml"}),
        t("user", "Here is the screenshot", MON + timedelta(minutes=2),
          attachments=({"type": "image", "name": "err.png"},)),
    ], "ana")
    tags = set(eng.hooks("ana")[0].tags)
    assert {"tool_call", "code_block", "url", "attachment", "question", "thinking"} <= tags
    eng.add_turns([t("user", "The weather is nice in Porto today", MON + timedelta(days=1))], "bob")
    assert not {"tool_call", "code_block", "url", "attachment"} & set(eng.hooks("bob")[0].tags)


def test_importance_is_settable_and_validated(eng: MemoryEngine) -> None:
    eng.add_turns(greeting_then_content(MON), "ana")
    hid = eng.hooks("ana")[0].id
    assert eng.set_importance(hid, 90).importance == 90
    assert eng.hooks("ana")[0].importance == 90
    assert eng.set_importance(hid[:8], 0).importance == 0
    assert eng.set_importance(hid, 100, namespace="ana").importance == 100
    for bad in (101, -1, 50.5, True, "80", None):
        with pytest.raises(InvalidArgumentError):
            eng.set_importance(hid, bad)  # type: ignore[arg-type]
    assert eng.hooks("ana")[0].importance == 100
    with pytest.raises(HookNotFoundError):
        eng.set_importance("ffffffffffffffff", 10)


def test_retrieve_counts_accesses(eng: MemoryEngine) -> None:
    eng.add_turns(greeting_then_content(MON), "ana")
    hid = eng.hooks("ana")[0].id
    assert eng.hooks("ana")[0].access_count == 0
    assert eng.retrieve(hid).hook.access_count == 1
    assert eng.retrieve(hid[:6]).hook.access_count == 2
    assert eng.hooks("ana")[0].access_count == 2
    eng.render_prompt("ana", budget_tokens=200)  # showing the index is not an access
    assert eng.hooks("ana")[0].access_count == 2


LLM_HOOK = {"title": "Passport renewal before the Lisbon conference",
            "abstract": "Ana's passport expires in May; a renewal appointment is booked in Porto on April 2.",
            "key_facts": ["Consulate appointment April 2 at 10:00", "Conference in Lisbon on June 12"],
            "entities": ["Porto", "Lisbon"], "tags": ["travel", "documents"]}


def closed_file(e: MemoryEngine) -> str:
    """Adds a conversation whose file closes (soft threshold 60) and returns its hook id."""
    e.add_turns(greeting_then_content(MON), "ana")
    closed = [h for h in all_files(e, "ana") if h.status == "closed"]
    assert closed
    return closed[0].id


def test_llm_summary_is_used_when_valid(tmp_path: Path) -> None:
    llm = ScriptedLLM([json.dumps(LLM_HOOK)], id="fake-model", repeat_last=True)
    e = open_engine(tmp_path / "s", llm=llm, llm_summaries=True, file_soft_tokens=60)
    hid = closed_file(e)
    h = e.retrieve(hid).hook
    assert h.title == LLM_HOOK["title"]
    assert h.summary_source == "fake-model"
    assert "Porto" in h.entities and "travel" in h.tags
    assert "Consulate appointment April 2 at 10:00" in h.key_facts
    assert llm.calls and "passport" in llm.calls[0].prompt.lower()
    e.close()


@pytest.mark.parametrize("step", [RuntimeError("model down"), "I cannot answer that."])
def test_failing_llm_falls_back_to_the_heuristic(tmp_path: Path, step: Any) -> None:
    llm = ScriptedLLM([step], repeat_last=True)
    e = open_engine(tmp_path / "s", llm=llm, llm_summaries=True, file_soft_tokens=60)
    hid = closed_file(e)
    f = e.retrieve(hid)
    assert f.hook.summary_source == "heuristic"
    assert "passport" in (f.hook.title + f.hook.abstract).lower()
    assert "LLM failed" in f.meta.get("summary_error", "")
    contents = [x.content for x in greeting_then_content(MON)]
    all_turns = [x.content for h in all_files(e, "ana") for x in e.retrieve(h.id).turns]
    assert sorted(all_turns) == sorted(contents)  # no data lost
    assert len(llm.calls) >= 1
    e.close()


# =============================================================================================== 3. render_prompt
def build_three_tiers(e: MemoryEngine, ns: str = "ana") -> dict[str, list[str]]:
    """February 2026 becomes a monthly file, week W10 a weekly file, and two days of W11 stay daily."""
    topics = ["sourdough starter feeding schedule", "cello practice with the metronome",
              "tax return deadline and receipts", "bike gears that keep slipping"]
    feb = datetime(2026, 2, 3, 10, tzinfo=UTC)  # Tuesday of W06
    for w, topic in enumerate(topics):  # weeks W06..W09 (W09's Thursday is Feb 26: February)
        day = feb + timedelta(weeks=w)
        e.add_turns([t("user", f"Let's talk about the {topic}.", day, f"feb{w}"),
                     t("assistant", f"Sure, here is my advice on the {topic}.", day + timedelta(minutes=1),
                       f"feb{w}")], ns)
    for d in range(2):  # W10
        day = MON + timedelta(days=d)
        e.add_turns([t("user", f"Plan the garden shed build, step {d + 1}.", day, f"w10-{d}"),
                     t("assistant", f"Step {d + 1}: buy timber and screws.", day, f"w10-{d}")], ns)
    for d in range(2):  # W11
        day = MON + timedelta(days=7 + d)
        e.add_turns([t("user", f"Remind me about the piano tuner visit number {d + 1}.", day, f"w11-{d}"),
                     t("assistant", "Noted, I will remind you.", day, f"w11-{d}")], ns)
    e.compact(ns, "weekly", now=MON + timedelta(days=7))
    e.compact(ns, "monthly", key="2026-02", now=MON + timedelta(days=7))
    return {p: [h.id for h in e.hooks(ns) if h.period == p] for p in ("daily", "weekly", "monthly")}


def test_render_prompt_orders_daily_weekly_monthly(eng: MemoryEngine) -> None:
    tiers = build_three_tiers(eng)
    assert len(tiers["daily"]) == 2 and len(tiers["weekly"]) == 1 and len(tiers["monthly"]) == 1
    text = eng.render_prompt("ana", budget_tokens=2000)
    lines = text.splitlines()[1:]
    ids = [re.match(r"^- \[([0-9a-f]+)\] ", line).group(1) for line in lines]  # type: ignore[union-attr]
    assert ids == [*tiers["daily"], *tiers["weekly"], *tiers["monthly"]]
    assert "2026-03-10" in lines[0] and "2026-03-09" in lines[1]  # newest daily first
    assert " weekly: " in lines[2] and "2026-W10" in lines[2]
    assert " monthly: " in lines[3] and "2026-02" in lines[3]
    for hid in ids:
        eng.retrieve(hid)  # every id shown can be opened


@pytest.mark.parametrize("budget", [30, 45, 60, 90, 150, 400])
def test_render_prompt_respects_the_budget(eng: MemoryEngine, budget: int) -> None:
    build_three_tiers(eng)
    text = eng.render_prompt("ana", budget_tokens=budget)
    assert estimate_tokens(text) <= budget
    for line in text.splitlines()[1:]:
        assert re.match(r"^- \[[0-9a-f]{16}\] ", line)
    full = eng.render_prompt("ana", budget_tokens=5000)
    if budget >= 400:
        assert text == full
    more = eng.render_prompt("ana", budget_tokens=budget + 100)
    assert len(more.splitlines()) >= len(text.splitlines())


def test_render_prompt_budget_edge_cases(eng: MemoryEngine) -> None:
    assert eng.render_prompt("nobody", budget_tokens=500) == ""
    build_three_tiers(eng)
    assert eng.render_prompt("ana", budget_tokens=0) == ""
    assert eng.render_prompt("ana", budget_tokens=5) == ""  # not even the header fits
    for bad in (-1, 1.5, "100", True):
        with pytest.raises(InvalidArgumentError):
            eng.render_prompt("ana", budget_tokens=bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError):
        eng.render_prompt("ana", budget_tokens=100, query="   ")
    assert eng.render_prompt("ana")  # the configured default budget


def topical_days(e: MemoryEngine, ns: str = "ana") -> dict[str, str]:
    convs = {
        "bank": [("user", "I need to visit the bank tomorrow to open a savings account."),
                 ("assistant", "The bank branch on Rua Augusta opens at 8:30.")],
        "decoy": [("user", "The embankment near the riverbank had a bankruptcy notice; banking news, banknotes, "
                   "bankside cafes, sandbanks."),  # the substring "bank" seven times, the word never
                  ("assistant", "Interesting riverside walk.")],
        "cake": [("user", "Give me a chocolate cake recipe for Sunday."),
                 ("assistant", "Melt 200 g dark chocolate with butter, add eggs and flour, bake 35 minutes.")],
        "car": [("user", "My car makes a grinding noise when braking."),
                ("assistant", "Probably worn brake pads; book a garage check.")],
    }
    out = {}
    for i, (name, conv) in enumerate(convs.items()):
        day = MON + timedelta(days=i)
        e.add_turns([t(r, c, day + timedelta(minutes=j), name) for j, (r, c) in enumerate(conv)], ns)
        out[name] = next(h.id for h in e.hooks(ns) if h.period_key == day.date().isoformat())
    return out


def ids_of(text: str) -> list[str]:
    return re.findall(r"^- \[([0-9a-f]+)\]", text, re.M)


def test_render_prompt_with_query_puts_the_answer_first(eng: MemoryEngine) -> None:
    ids = topical_days(eng)
    assert ids_of(eng.render_prompt("ana", budget_tokens=2000, query="chocolate cake recipe"))[0] == ids["cake"]
    assert ids_of(eng.render_prompt("ana", budget_tokens=2000, query="brake pads noise"))[0] == ids["car"]
    # ranked by retrieval (words), not substring counts: the decoy holds "bank" seven times as a substring
    ranked = ids_of(eng.render_prompt("ana", budget_tokens=2000, query="bank"))
    assert ranked[0] == ids["bank"]
    assert ranked.index(ids["decoy"]) > 0
    # with a small budget the answer's file is the one that fits
    small = eng.render_prompt("ana", budget_tokens=60, query="chocolate cake recipe")
    assert ids_of(small)[:1] == [ids["cake"]]


@pytest.mark.parametrize("query", ["what should I bake this weekend?", "savings account opening hours",
                                   "garage appointment", "riverside walk"])
def test_render_prompt_follows_search_ranking(eng: MemoryEngine, query: str) -> None:
    ids = topical_days(eng)
    file_of_turn = {x.id: hid for hid in ids.values() for x in eng.retrieve(hid).turns}
    expected: list[str] = []
    for item in eng.search(query, "ana", k=30).items:
        for tid in item.turn_ids:
            hid = file_of_turn.get(tid)
            if hid and hid not in expected:
                expected.append(hid)
            break  # the centre turn decides (a window's first turn)
    got = ids_of(eng.render_prompt("ana", budget_tokens=2000, query=query))
    assert expected and got[0] == expected[0]


# =============================================================================================== 4. retrieve
def test_retrieve_by_id_and_prefix_and_errors(eng: MemoryEngine) -> None:
    eng.add_turns(greeting_then_content(MON), "ana")
    hid = eng.hooks("ana")[0].id
    assert eng.retrieve(hid).id == hid
    assert eng.retrieve(hid[:6]).id == hid
    assert eng.retrieve(f"  {hid[:10]} ").id == hid
    with pytest.raises(HookNotFoundError) as err:
        eng.retrieve(hid[:5])
    assert "6" in str(err.value)
    for bad in ("0" * 16, "zzzzzzzz", "", "   "):
        with pytest.raises(HookNotFoundError):
            eng.retrieve(bad)
    for wildcard in ("%%%%%%", "______", hid[:5] + "%", hid[:5] + "_"):  # LIKE wildcards are not patterns
        with pytest.raises(HookNotFoundError):
            eng.retrieve(wildcard)


def test_ambiguous_prefix_lists_candidates(tmp_path: Path) -> None:
    e = open_engine(tmp_path / "s")
    for d in range(3):
        e.add_turns([t("user", f"Day {d}: water the tomato plants.", MON + timedelta(days=d))], "ana")
    ids = [h.id for h in e.hooks("ana")]
    e.close()
    crafted = ["abcdef0000000001", "abcdef0000000002", "abcdef1100000003"]
    conn = sqlite3.connect(tmp_path / "s" / "memory.sqlite3")
    with conn:
        for old, new in zip(ids, crafted, strict=True):
            conn.execute("UPDATE files SET id=? WHERE id=?", (new, old))
    conn.close()
    e = open_engine(tmp_path / "s")
    with pytest.raises(HookNotFoundError) as err:
        e.retrieve("abcdef")
    assert sorted(err.value.candidates) == crafted
    assert all(c in str(err.value) for c in crafted)
    with pytest.raises(HookNotFoundError) as err:
        e.retrieve("abcdef00000")
    assert sorted(err.value.candidates) == crafted[:2]
    with pytest.raises(HookNotFoundError):
        e.retrieve("abcdef00000000")
    assert e.retrieve("abcdef1").id == crafted[2]
    assert e.retrieve("abcdef0000000002").id == crafted[1]
    e.close()


def test_retrieve_is_scoped_by_namespace(eng: MemoryEngine) -> None:
    eng.add_turns([t("user", "Ana's secret: the spare key is under the blue pot.", MON)], "ana")
    eng.add_turns([t("user", "Bob likes jazz.", MON)], "bob")
    ana_id = eng.hooks("ana")[0].id
    assert eng.retrieve(ana_id, namespace="ana").id == ana_id
    for ns in ("bob", "nobody"):
        with pytest.raises(HookNotFoundError):
            eng.retrieve(ana_id, namespace=ns)
        with pytest.raises(HookNotFoundError):
            eng.retrieve(ana_id[:8], namespace=ns)
        with pytest.raises(HookNotFoundError):
            eng.set_importance(ana_id, 80, namespace=ns)
    assert eng.hooks("ana")[0].importance != 80
    assert eng.hooks("ana")[0].access_count == 1


# =============================================================================================== 5. weekly merge
BIG_RESULT = json.dumps({"rows": [{"order": 4400 + i, "status": "shipped", "carrier": "DHL"} for i in range(40)]})


def build_week(e: MemoryEngine, ns: str = "ana", start: datetime = MON) -> None:
    d0, d1, d2 = start, start + timedelta(days=1), start + timedelta(days=3)
    e.add_turns([
        t("user", "What's the status of order 4411?", d0, "a"),
        t("assistant", "Order 4411 shipped yesterday with DHL.", d0 + timedelta(minutes=1), "a"),
        t("user", "thanks!", d0 + timedelta(minutes=2), "a"),
        t("assistant", "you're welcome!", d0 + timedelta(minutes=3), "a"),
    ], ns)
    e.add_turns([
        t("user", "ok", d1, "b"),
        t("tool", BIG_RESULT, d1 + timedelta(minutes=1), "b", tool_calls=({"name": "list_orders", "arguments": {}},)),
        t("user", "Please cancel order 4412, I ordered it twice.", d1 + timedelta(minutes=2), "b"),
        t("assistant", "Order 4412 is cancelled; the refund takes 3 days.", d1 + timedelta(minutes=3), "b"),
    ], ns)
    e.add_turns([
        t("user", "What's the status of order 4411?", d2, "c"),  # exact duplicate of day 0's question
        t("assistant", "Order 4411 was delivered this morning.", d2 + timedelta(minutes=1), "c"),
        t("user", "Thanks", d2 + timedelta(minutes=2), "c"),
        t("assistant", "You're welcome :)", d2 + timedelta(minutes=3), "c"),
    ], ns)


def test_weekly_merge_keeps_information_and_drops_chitchat_and_duplicates(eng: MemoryEngine) -> None:
    build_week(eng)
    dailies = files_by_period(eng, "ana", "daily")
    assert len(dailies) == 3
    report = eng.compact("ana", "weekly", key="2026-W10")
    step = report.steps[0]
    assert report.changed and step["period"] == "2026-W10"
    weekly = eng.retrieve(step["file"])
    contents = [x.content for x in weekly.turns]
    assert "ok" in contents and BIG_RESULT in contents  # "ok" before a large tool result survives
    assert weekly.turns[contents.index(BIG_RESULT)].tool_calls[0]["name"] == "list_orders"
    assert not {"thanks!", "you're welcome!", "Thanks", "You're welcome :)"} & set(contents)
    assert contents.count("What's the status of order 4411?") == 1
    assert "Order 4411 was delivered this morning." in contents  # same topic, different content: kept
    assert step["dropped"] == {"chitchat": 4, "duplicate": 1}
    assert len(contents) == 12 - 5
    assert weekly.hook.period == "weekly" and weekly.hook.period_key == "2026-W10"
    assert sorted(weekly.hook.sources) == sorted(h.id for h in dailies)
    for h in all_files(eng, "ana"):
        if h.period == "daily":
            assert h.status == "merged" and h.merged_into == weekly.id
    # the prompt index shows the weekly file instead of the dailies
    assert [h.id for h in eng.hooks("ana")] == [weekly.id]
    # the dropped turns are still in the truth store and the daily files
    assert len(eng.get_turns("ana")) == 12
    assert "thanks!" in [x.content for h in dailies for x in eng.retrieve(h.id).turns]


def test_weekly_hook_is_merged_from_daily_hooks(eng: MemoryEngine) -> None:
    build_week(eng)
    dailies = sorted(files_by_period(eng, "ana", "daily"), key=lambda h: h.period_key)
    eng.set_importance(dailies[1].id, 95)
    eng.retrieve(dailies[0].id)
    eng.retrieve(dailies[0].id)
    eng.retrieve(dailies[2].id)
    dailies = sorted(files_by_period(eng, "ana", "daily"), key=lambda h: h.period_key)
    weekly = eng.retrieve(eng.compact("ana", "weekly", key="2026-W10").steps[0]["file"]).hook
    assert weekly.importance == 95  # the user-set importance is kept
    assert weekly.access_count == 3 + 1  # summed (+1: this retrieve)
    for d in dailies:
        assert set(d.tags) <= set(weekly.tags)
        assert set(d.entities[:3]) <= set(weekly.entities)
    assert "tool_call" in weekly.tags
    assert weekly.title and weekly.title not in ("ok", "thanks!")


def test_weekly_merge_is_idempotent(eng: MemoryEngine) -> None:
    build_week(eng)
    eng.compact("ana", "weekly", now=MON + timedelta(days=10))
    before = snapshot(eng.path)
    again = eng.compact("ana", "weekly", now=MON + timedelta(days=10))
    assert not again.changed
    keyed = eng.compact("ana", "weekly", key="2026-W10")
    assert not keyed.changed
    assert snapshot(eng.path) == before


def test_weekly_merge_picks_up_late_turns_without_duplicating(eng: MemoryEngine) -> None:
    build_week(eng)
    first = eng.compact("ana", "weekly", key="2026-W10").steps[0]["file"]
    eng.add_turns([t("user", "Late note: the courier lost parcel 4413.", MON + timedelta(days=4), "late")], "ana")
    step = eng.compact("ana", "weekly", key="2026-W10").steps[0]
    assert step["changed"] and step["file"] == first
    contents = [x.content for x in eng.retrieve(first).turns]
    assert "Late note: the courier lost parcel 4413." in contents
    assert len(contents) == len(set(contents)) == 8
    assert len(files_by_period(eng, "ana", "weekly")) == 1


def test_merging_one_week_never_touches_another(eng: MemoryEngine) -> None:
    build_week(eng)
    build_week(eng, start=MON + timedelta(days=7))  # W11, identical content
    w11 = [h.id for h in files_by_period(eng, "ana", "daily") if h.period_key >= "2026-03-09"]
    assert len(w11) == 3

    def w11_rows() -> list:
        conn = sqlite3.connect(f"file:{eng.path / 'memory.sqlite3'}?mode=ro", uri=True)
        marks = ",".join("?" * len(w11))
        rows = conn.execute(f"SELECT * FROM files WHERE id IN ({marks}) ORDER BY id", w11).fetchall()
        rows += conn.execute(f"SELECT ft.* FROM file_turns ft JOIN files f ON f.fid = ft.fid WHERE f.id IN ({marks})"
                             " ORDER BY ft.fid, ft.pos", w11).fetchall()
        conn.close()
        return rows

    eng.hooks("ana", include_merged=True)  # compute hooks first, so that only compaction could change rows
    before = w11_rows()
    cold_before = db_rows(eng.path, "records", "WHERE cold=1")
    step = eng.compact("ana", "weekly", key="2026-W10").steps[0]
    assert step["changed"] and step["dropped"]["duplicate"] == 1  # W11's copy is not a duplicate of W10's
    assert w11_rows() == before
    # the turns W10's weekly file leaves out went cold; none of W11's records changed
    w11_turns = {r[0] for r in db_rows(eng.path, "turns", "WHERE ts >= ?", ((MON + timedelta(days=7)).timestamp(),))}
    newly_cold = [r for r in db_rows(eng.path, "records", "WHERE cold=1") if r not in cold_before]
    assert newly_cold and cold_before == []
    conn = sqlite3.connect(f"file:{eng.path / 'memory.sqlite3'}?mode=ro", uri=True)
    centres = [conn.execute("SELECT tid FROM turns WHERE id = json_extract(?, '$[0]')", (r[13],)).fetchone()[0]
               for r in newly_cold]
    conn.close()
    assert not set(centres) & w11_turns
    assert [h.period_key for h in files_by_period(eng, "ana", "weekly")] == ["2026-W10"]


def test_compact_rejects_bad_periods_and_keys(eng: MemoryEngine) -> None:
    build_week(eng)
    before = snapshot(eng.path)
    for period, key in [("weekly", "2026-W99"), ("weekly", "2026-W00"), ("weekly", "2026-10"),
                        ("weekly", "W10"), ("monthly", "2026-13"), ("monthly", "2026-00"),
                        ("monthly", "2026-W10"), ("monthly", "March"), ("weekly", 202610)]:
        with pytest.raises(InvalidArgumentError):
            eng.compact("ana", period, key=key)  # type: ignore[arg-type]
    for period in ("yearly", "daily", "", None):
        with pytest.raises(InvalidArgumentError):
            eng.compact("ana", period)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError):
        eng.compact("ana", "weekly", now="not a date")
    assert snapshot(eng.path) == before
    assert not eng.compact("nobody", "weekly").changed
    assert not eng.compact("ana", "weekly", key="2026-W20").changed  # a valid week without files


# =============================================================================================== 6. monthly eviction
FEB_WEEKS = ["2026-W06", "2026-W07", "2026-W08", "2026-W09"]


def build_february(e: MemoryEngine, ns: str = "ana") -> dict[str, Any]:
    """Four weeks of February 2026, one daily file each, with plain chatter and some high-value turns."""
    start = datetime(2026, 2, 3, 10, tzinfo=UTC)
    plain = ["I watched a documentary about humpback whales tonight.",
             "My neighbour's parrot learned to whistle the anthem.",
             "The bakery on the corner now sells rye bread on Tuesdays.",
             "I finally finished the jigsaw puzzle of the Alps."]
    high = {  # week index -> high-value turns of that week
        0: [t("assistant", "Reserved table 7 at Casa Lupa for Friday.", start, "w0",
              tool_calls=({"name": "reserve", "arguments": {"table": 7}},)),
            t("user", "```python\ndef fib(n):\n    return n if n < 2 else fib(n-1) + fib(n-2)\n```", start, "w0")],
        1: [t("user", "Here is my lease contract.", start + timedelta(weeks=1), "w1",
              attachments=({"type": "file", "name": "lease.pdf"},)),
            t("user", "We decided to repaint the kitchen in sage green.", start + timedelta(weeks=1), "w1")],
        2: [t("user", "My blood type is 0 negative, remember it.", start + timedelta(weeks=2), "w2",
              metadata={"importance": 80})],
        3: [],
    }
    for w in range(4):
        day = start + timedelta(weeks=w)
        turns = [t("user", plain[w], day, f"w{w}"),
                 t("assistant", f"Noted about that, entry {w}: {plain[w].split()[3]} logged.", day, f"w{w}")]
        turns += [Turn(**{**x.model_dump(), "timestamp": day + timedelta(minutes=5)}) for x in high[w]]
        e.add_turns(turns, ns)
    report = e.compact(ns, "weekly", now=datetime(2026, 3, 10, tzinfo=UTC))
    assert [s["period"] for s in report.steps] == FEB_WEEKS
    weeklies = {h.period_key: h.id for h in files_by_period(e, ns, "weekly")}
    return {"plain": plain, "high": high, "weeklies": weeklies}


def _cold_and_stated(path: Path, text: str) -> list[tuple[bool, bool]]:
    """(cold, has derived fact/preference/event/procedure records) of the turn record with this text."""
    conn = sqlite3.connect(f"file:{path / 'memory.sqlite3'}?mode=ro", uri=True)
    try:
        return [(bool(cold), bool(n)) for cold, n in conn.execute(
            "SELECT r.cold, (SELECT COUNT(*) FROM records d WHERE d.anchor_rid = r.rid AND d.kind IN"
            " ('fact', 'preference', 'event', 'procedure', 'failure_pattern')) FROM records r"
            " WHERE r.kind = 'turn' AND r.text = ?", (text,))]
    finally:
        conn.close()


def texts(result: Any) -> list[str]:
    return [i.text for i in result.items]


def test_monthly_eviction_keeps_the_best_week_and_high_value_turns(eng_first_hop: MemoryEngine) -> None:
    eng = eng_first_hop
    data = build_february(eng)
    now = datetime(2026, 3, 10, tzinfo=UTC)
    step = eng.compact("ana", "monthly", key="2026-02", now=now).steps[0]
    assert step["changed"] and step["period"] == "2026-02"
    weeklies = data["weeklies"]
    assert sorted(step["sources"]) == sorted(weeklies.values())
    best_week = next(k for k, v in weeklies.items() if v == step["best"])
    best_index = FEB_WEEKS.index(best_week)
    monthly = eng.retrieve(step["file"])
    assert monthly.hook.period == "monthly" and monthly.hook.status == "main"
    assert sorted(monthly.hook.sources) == sorted(weeklies.values())
    kept = [x.content for x in monthly.turns]
    best_turns = [x.content for x in eng.retrieve(step["best"]).turns]
    assert all(c in kept for c in best_turns)  # the best file is the month's main content
    for w, turns in data["high"].items():
        for x in turns:
            assert x.content in kept, f"high-value turn of week {w} lost"
    cold_plain = [p for w, p in enumerate(data["plain"]) if w != best_index]
    assert not set(cold_plain) & set(kept)
    tiers = []
    for p in cold_plain:
        query = p.split(" about ")[-1] if " about " in p else p
        # cold: a ranking prior, not a gate — still reached by a plain search, its fused score lowered by
        # recall.cold_penalty; include_cold=True removes the prior
        plain, full = eng.search(query, "ana", k=20), eng.search(query, "ana", k=20, include_cold=True)
        assert p in texts(plain) and p in texts(full)
        raw = {i.text: i.raw_score for i in plain.items}
        raw_full = {i.text: i.raw_score for i in full.items}
        (cold, stated), = _cold_and_stated(eng.path, p)
        # a turn a fact, preference, event or procedure was derived from never goes cold
        assert cold == (not stated)
        tiers.append(cold)
        assert raw[p] == pytest.approx(raw_full[p] - (eng.config.recall.cold_penalty if cold else 0.0))
    assert any(tiers) and not all(tiers)  # both cases occur: plain chatter went cold, a stated event stayed warm
    # warm ones are still found by a plain search
    assert data["plain"][best_index] in texts(eng.search(data["plain"][best_index], "ana", k=20))
    assert "Reserved table 7 at Casa Lupa for Friday." in texts(eng.search("Casa Lupa table", "ana", k=10))
    # the evicted weekly files are still reachable, whole
    for key, hid in weeklies.items():
        h = eng.retrieve(hid).hook
        assert h.merged_into == monthly.id
        assert h.status == ("merged" if hid == step["best"] else "evicted")
        if hid != step["best"]:
            assert data["plain"][FEB_WEEKS.index(key)] in [x.content for x in eng.retrieve(hid).turns]
    # the index shows the monthly file, not the weeks
    assert [h.id for h in eng.hooks("ana")] == [monthly.id]
    # nothing is lost from the truth store
    assert len(eng.get_turns("ana")) == 4 * 2 + 5


def test_monthly_eviction_is_idempotent(eng: MemoryEngine) -> None:
    build_february(eng)
    now = datetime(2026, 3, 10, tzinfo=UTC)
    eng.compact("ana", "monthly", now=now)
    before = snapshot(eng.path)
    assert not eng.compact("ana", "monthly", now=now).changed
    assert not eng.compact("ana", "monthly", key="2026-02", now=now + timedelta(days=30)).changed
    assert not eng.maybe_compact("ana", now=now).changed
    assert snapshot(eng.path) == before


@pytest.mark.parametrize("factor", ["importance", "access"])
def test_importance_and_access_decide_the_winner(tmp_path: Path, factor: str) -> None:
    weights = {"recency": 0.0, "access": 0.0, "importance": 0.0, "relevance": 0.0, factor: 1.0}
    winners = {}
    for favourite in ("2026-W06", "2026-W08"):
        e = open_engine(tmp_path / favourite, eviction_weights=weights)
        weeklies = build_february(e)["weeklies"]
        for hid in weeklies.values():
            e.set_importance(hid, 10)
        if factor == "importance":
            e.set_importance(weeklies[favourite], 100)
        else:
            for _ in range(4):
                e.retrieve(weeklies[favourite])
        step = e.compact("ana", "monthly", key="2026-02", now=datetime(2026, 3, 10, tzinfo=UTC)).steps[0]
        winners[favourite] = step["best"] == weeklies[favourite]
        e.close()
    assert winners == {"2026-W06": True, "2026-W08": True}


def test_set_importance_changes_the_default_choice(tmp_path: Path) -> None:
    now = datetime(2026, 3, 10, tzinfo=UTC)
    e = open_engine(tmp_path / "a")
    weeklies = build_february(e)["weeklies"]
    default_best = e.compact("ana", "monthly", key="2026-02", now=now).steps[0]["best"]
    e.close()
    loser_week = next(k for k, v in weeklies.items() if v != default_best)
    e = open_engine(tmp_path / "b")
    weeklies = build_february(e)["weeklies"]
    e.set_importance(weeklies[loser_week], 100)
    for _ in range(6):
        e.retrieve(weeklies[loser_week])
    step = e.compact("ana", "monthly", key="2026-02", now=now).steps[0]
    assert step["best"] == weeklies[loser_week]
    assert step["scores"][weeklies[loser_week]]["importance"] == 1.0
    e.close()


def test_monthly_eviction_recency_favours_the_latest_week_by_default(eng: MemoryEngine) -> None:
    weeklies = build_february(eng)["weeklies"]
    step = eng.compact("ana", "monthly", key="2026-02", now=datetime(2026, 3, 2, tzinfo=UTC)).steps[0]
    scores = step["scores"]
    rec = [scores[weeklies[w]]["recency"] for w in FEB_WEEKS]
    assert rec == sorted(rec) and rec[-1] > 0.5 > rec[0]


# =============================================================================================== 7. scheduling
def test_maybe_compact_does_finished_periods_only(eng: MemoryEngine) -> None:
    build_february(eng)  # already merges February's weeks
    build_week(eng, start=MON)  # W10
    build_week(eng, start=MON + timedelta(days=7))  # W11 (in progress on March 11)
    report = eng.maybe_compact("ana", now=datetime(2026, 3, 11, 12, tzinfo=UTC))
    periods = [s["period"] for s in report.steps if s.get("changed")]
    assert periods == ["2026-W10", "2026-02"]
    assert {h.period_key for h in files_by_period(eng, "ana", "weekly")} == {*FEB_WEEKS, "2026-W10"}
    assert [h.period_key for h in files_by_period(eng, "ana", "monthly")] == ["2026-02"]
    assert all(h.status in ("open", "closed") for h in files_by_period(eng, "ana", "daily")
               if h.period_key >= "2026-03-09")
    assert not eng.maybe_compact("ana", now=datetime(2026, 3, 11, 12, tzinfo=UTC)).changed
    # a month later (a cron job in another process: a fresh engine on the same store)
    path = eng.path
    eng.close()
    with open_engine(path) as cron:
        later = cron.maybe_compact("ana", now=datetime(2026, 4, 15, tzinfo=UTC))
        assert [s["period"] for s in later.steps if s.get("changed")] == ["2026-W11", "2026-03"]
        assert {h.period for h in cron.hooks("ana")} == {"monthly"}
        assert not cron.maybe_compact("ana", now=datetime(2026, 4, 15, tzinfo=UTC)).changed


def test_maybe_compact_is_cheap_when_nothing_is_due(eng: MemoryEngine) -> None:
    eng.add_turns([t("user", "Today I started a new job at the library.", MON)], "ana")
    assert not eng.maybe_compact("ana", now=MON + timedelta(hours=2)).changed
    assert not eng.maybe_compact("nobody").changed
    assert eng.hooks("ana")[0].status == "open"


# ============================================================================================ 8. interrupted compaction
CRASH = textwrap.dedent("""
    import os, sys
    from memory_ext import MemoryEngine
    import memory_ext.lifecycle.compact as compact
    target = sys.argv[3]
    original = getattr(compact, target)
    calls = {"n": 0}
    def boom(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] >= int(sys.argv[4]):
            os._exit(1)
        return original(*args, **kwargs)
    setattr(compact, target, boom)
    e = MemoryEngine.open(sys.argv[1], embedder="hashing")
    e.compact("ana", sys.argv[2], now="2026-03-20T00:00:00Z")
    print("not interrupted")
""")


def run_crash(path: Path, period: str, target: str, nth: int = 1) -> None:
    proc = subprocess.run([sys.executable, "-c", CRASH, str(path), period, target, str(nth)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1, proc.stdout + proc.stderr


@pytest.mark.parametrize("target", ["refresh_hook", "set_members"])
def test_interrupted_weekly_compaction_is_rolled_back_and_completed(tmp_path: Path, target: str) -> None:
    path = tmp_path / "s"
    with open_engine(path) as e:
        build_week(e)
        e.hooks("ana", include_merged=True)
    before = snapshot(path)
    run_crash(path, "weekly", target)
    assert snapshot(path) == before  # no weekly file, daily files unchanged
    with open_engine(path) as e:
        assert not files_by_period(e, "ana", "weekly")
        assert all(h.status != "merged" for h in all_files(e, "ana"))
        report = e.compact("ana", "weekly", now=datetime(2026, 3, 20, tzinfo=UTC))
        assert report.changed
        weekly = files_by_period(e, "ana", "weekly")
        assert len(weekly) == 1 and len(e.retrieve(weekly[0].id).turns) == 7
        assert not e.compact("ana", "weekly", now=datetime(2026, 3, 20, tzinfo=UTC)).changed


def test_interrupted_monthly_eviction_is_rolled_back_and_completed(tmp_path: Path) -> None:
    path = tmp_path / "s"
    with open_engine(path) as e:
        build_february(e)
        e.hooks("ana", include_merged=True)
    before = snapshot(path)
    run_crash(path, "monthly", "refresh_hook")
    assert snapshot(path) == before  # no monthly file, no cold records, weekly files unchanged
    with open_engine(path) as e:
        step = e.compact("ana", "monthly", now=datetime(2026, 3, 20, tzinfo=UTC)).steps[0]
        assert step["changed"] and step["cold_turns"] > 0
        assert len(files_by_period(e, "ana", "monthly")) == 1


def test_relevance_is_to_later_topics_not_to_the_month_itself(eng: MemoryEngine) -> None:
    weeklies = build_february(eng)["weeklies"]
    step = eng.compact("ana", "monthly", key="2026-02", now=datetime(2026, 3, 10, tzinfo=UTC)).steps[0]
    # nothing happened after February: no recent topics, so no relevance factor (not the month scoring itself)
    assert all("relevance" not in s for s in step["scores"].values())
    assert eng.retrieve(step["file"]).meta["relevance"] == "none"
    e2_path = eng.path.parent / "second"
    with open_engine(e2_path) as e2:
        weeklies = build_february(e2)["weeklies"]
        e2.add_turns([t("user", "Do parrots learn to whistle other anthems too? My neighbour's parrot is amazing.",
                        datetime(2026, 3, 4, tzinfo=UTC), "mar")], "ana")
        step = e2.compact("ana", "monthly", key="2026-02", now=datetime(2026, 3, 10, tzinfo=UTC)).steps[0]
        rel = {w: step["scores"][weeklies[w]]["relevance"] for w in FEB_WEEKS}
        assert max(rel, key=rel.get) == "2026-W07"  # the parrot week is the relevant one


def test_maybe_compact_waits_for_the_last_week_of_the_month(eng: MemoryEngine) -> None:
    build_february(eng)
    # Sunday March 1 still belongs to ISO week 2026-W09, whose Thursday (Feb 26) puts it in February
    sunday = datetime(2026, 3, 1, 12, tzinfo=UTC)
    eng.add_turns([t("user", "Late February note: the boiler was serviced.", sunday - timedelta(days=1), "late")],
                  "ana")
    report = eng.maybe_compact("ana", now=sunday)
    assert not files_by_period(eng, "ana", "monthly"), [s["period"] for s in report.steps]
    report = eng.maybe_compact("ana", now=sunday + timedelta(days=1))  # Monday of W10: February is over
    assert [s["period"] for s in report.steps if s.get("changed")] == ["2026-W09", "2026-02"]
    monthly = files_by_period(eng, "ana", "monthly")[0]
    assert len(monthly.sources) == 4


def test_chitchat_left_out_of_the_weekly_file_goes_cold(eng_first_hop: MemoryEngine) -> None:
    eng = eng_first_hop
    build_week(eng)
    assert "thanks!" in [i.text for i in eng.search("thanks", "ana", k=5).items]
    eng.compact("ana", "weekly", key="2026-W10")
    # cold, not gone: a plain search still finds it, its fused score lowered by the cold prior
    plain = {i.text: i.raw_score for i in eng.search("thanks", "ana", k=5).items}
    full = {i.text: i.raw_score for i in eng.search("thanks", "ana", k=5, include_cold=True).items}
    assert plain["thanks!"] == pytest.approx(full["thanks!"] - eng.config.recall.cold_penalty)
    # the information survives in plain searches
    assert eng.search("order 4412 refund", "ana", k=1).items[0].text.startswith("Order 4412 is cancelled")


def _two_weeks_in_march(e: MemoryEngine) -> None:
    w10, w11 = MON, MON + timedelta(days=7)
    e.add_turns([t("user", "My cousin Clara is vegetarian and allergic to walnuts.", w10, "x"),
                 t("assistant", "Noted: Clara is vegetarian, no walnuts.", w10 + timedelta(minutes=1), "x"),
                 t("user", "Find hotels in Lisbon", w10 + timedelta(hours=2), "y"),
                 t("assistant", "Searching.", w10 + timedelta(hours=2, minutes=1), "y",
                   tool_calls=({"name": "hotel_search", "arguments": {"city": "Lisbon"}},))], "ana")
    e.add_turns([t("user", "Let's plan the team offsite agenda for April.", w11, "z"),
                 t("assistant", "Draft agenda: strategy, roadmap, dinner.", w11 + timedelta(minutes=1), "z")], "ana")


def test_monthly_eviction_keeps_a_file_the_user_marked_important_and_tool_requests(tmp_path: Path) -> None:
    now = MON + timedelta(days=40)
    with open_engine(tmp_path / "a") as plain, open_engine(tmp_path / "b") as marked:
        for e in (plain, marked):
            _two_weeks_in_march(e)
            e.compact("ana", "weekly", now=now)
        w10 = next(h for h in marked.hooks("ana") if h.period_key == "2026-W10")
        marked.set_importance(w10.id, 90)
        for e in (plain, marked):
            e.compact("ana", "monthly", key="2026-03", now=now)
        # the request before a kept tool call survives with it
        texts = [x.content for x in plain.retrieve(plain.hooks("ana")[0].id).turns]
        assert "Searching." in texts and "Find hotels in Lisbon" in texts
        clara = "My cousin Clara is vegetarian and allergic to walnuts."
        marked_texts = [x.content for x in marked.retrieve(marked.hooks("ana")[0].id).turns]
        assert clara in marked_texts  # importance 90 >= lifecycle.importance_threshold: every turn survives
        assert clara in [i.text for i in marked.search("Clara vegetarian walnuts", "ana", k=2).items]


def test_late_turns_reopen_a_finished_week_and_month(eng: MemoryEngine) -> None:
    _two_weeks_in_march(eng)
    now = MON + timedelta(days=40)
    eng.maybe_compact("ana", now=now)
    assert not eng.maybe_compact("ana", now=now).changed
    eng.add_turns([t("user", "Clara's new phone number ends in 5521.", MON + timedelta(days=1), "late")], "ana")
    report = eng.maybe_compact("ana", now=now)
    assert [s["period"] for s in report.steps if s["changed"]] == ["2026-W10", "2026-03"]
    monthly = eng.retrieve(next(h.id for h in eng.hooks("ana") if h.period == "monthly"))
    assert len(monthly.hook.sources) == 2
    assert not eng.maybe_compact("ana", now=now).changed


def test_monthly_eviction_takes_relevance_from_the_llm_and_falls_back(tmp_path: Path) -> None:
    now = MON + timedelta(days=60)

    def run(answer: Any) -> dict:
        with open_engine(tmp_path / str(len(list(tmp_path.iterdir()))), llm=ScriptedLLM([answer] * 3),
                         llm_relevance=True) as e:
            _two_weeks_in_march(e)
            e.add_turns([t("user", "Clara's birthday dinner is next week, vegetarian menu please.",
                           MON + timedelta(days=45), "apr")], "ana")
            e.compact("ana", "weekly", now=now)
            weeks = {h.period_key: h.id for h in e.hooks("ana") if h.period == "weekly"}
            if callable(answer):
                e.llm = ScriptedLLM([answer(weeks)] * 3)
            step = e.compact("ana", "monthly", key="2026-03", now=now).steps[0]
            return {"step": step, "weeks": weeks, "meta": e.retrieve(step["file"]).meta}

    prefer_w10 = run(lambda weeks: json.dumps({"scores": {weeks["2026-W10"]: 1.0, weeks["2026-W11"]: 0.0}}))
    assert prefer_w10["step"]["best"] == prefer_w10["weeks"]["2026-W10"]
    assert prefer_w10["meta"]["relevance"].startswith("llm:")
    prefer_w11 = run(lambda weeks: json.dumps({"scores": {weeks["2026-W10"]: 0.0, weeks["2026-W11"]: 1.0}}))
    assert prefer_w11["step"]["best"] == prefer_w11["weeks"]["2026-W11"]
    broken = run("this is not JSON")
    assert broken["meta"]["relevance"] == "retrieval"  # the LLM failed: retrieval-based relevance
