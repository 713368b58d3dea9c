"""The temporal archive lifecycle (issue 5), second half: ``pre_compress``, supersession, forgetting (scanning
every store for the forgotten text), unsafe ids, and the async twins.
"""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from memory_ext import MemoryEngine, Turn
from memory_ext.errors import HookNotFoundError, InvalidArgumentError, InvalidNamespaceError, ValidationError

MON = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
TOKEN = "quixotic-zebra-8841"
NEEDLES = (TOKEN, "quixotic", "zebra-8841", "Zorbland")


def open_engine(path: Path, config: dict | None = None) -> MemoryEngine:
    return MemoryEngine.open(path, embedder="hashing", config=config)


EVERY_INDEX = {"globals": {"graph_enabled": True, "evidence_enabled": True, "layers_index_enabled": True,
                           "turns_channel_enabled": True}}
"""Every optional index on, so that the forgetting scans cover them all."""


@pytest.fixture
def eng(tmp_path: Path):
    e = open_engine(tmp_path / "store", EVERY_INDEX)
    yield e
    e.close()


def t(role: str, content: str, ts: datetime, session: str = "s1", **kw: Any) -> Turn:
    return Turn(role=role, content=content, timestamp=ts, session_id=session, **kw)


def ro(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(f"file:{path / 'memory.sqlite3'}?mode=ro", uri=True)


def texts(result: Any) -> list[str]:
    return [i.text for i in result.items]


# =============================================================================================== 9. pre_compress
OPENAI = [{"role": "system", "content": "You are a travel agent."},
          {"role": "user", "content": "Book me a hotel in Kyoto for May 3-6, under 150 EUR a night."},
          {"role": "assistant", "content": [{"type": "text", "text": "Booked Ryokan Hoshi, 140 EUR a night."}],
           "tool_calls": [{"id": "c1", "type": "function",
                           "function": {"name": "book_hotel", "arguments": "{\"city\": \"Kyoto\"}"}}]},
          {"role": "tool", "content": "{\"confirmation\": \"RH-5521\"}"}]
LANGCHAIN = {"messages": [{"type": "human", "content": "What's the wifi password at the cabin?"},
                          {"type": "ai", "content": "It's written on the fridge: maple-lake-77."}]}
TRANSCRIPT = ("User: Remind me which vaccine the cat needs in April.\n"
              "Assistant: Mochi needs the rabies booster on April 14.\n"
              "It is at the Vet Clinic on Rua Nova.\n"
              "User: thanks")
CHINESE = "用户：我想订下周三去杭州的高铁票。\n助手：好的，已为您预订G7311次列车，上午九点出发。"


@pytest.mark.parametrize("context, expected", [
    (json.dumps(OPENAI), [("system", "You are a travel agent."),
                          ("user", "Book me a hotel in Kyoto for May 3-6, under 150 EUR a night."),
                          ("assistant", "Booked Ryokan Hoshi, 140 EUR a night."),
                          ("tool", "{\"confirmation\": \"RH-5521\"}")]),
    (json.dumps(LANGCHAIN, indent=2), [("user", "What's the wifi password at the cabin?"),
                                       ("assistant", "It's written on the fridge: maple-lake-77.")]),
    (TRANSCRIPT, [("user", "Remind me which vaccine the cat needs in April."),
                  ("assistant", "Mochi needs the rabies booster on April 14.\nIt is at the Vet Clinic on Rua Nova."),
                  ("user", "thanks")]),
    (CHINESE, [("user", "我想订下周三去杭州的高铁票。"), ("assistant", "好的，已为您预订G7311次列车，上午九点出发。")]),
])
def test_pre_compress_parses_known_formats(eng: MemoryEngine, context: str, expected: list) -> None:
    hid = eng.pre_compress("ana", context, task_state={"step": 3, "goal": "trip"})
    f = eng.retrieve(hid)
    assert f.raw == context  # verbatim
    assert [(x.role.value if hasattr(x.role, "value") else x.role, x.content) for x in f.turns] == expected
    assert f.hook.period == "context" and f.meta["parsed"] is True
    assert f.meta["task_state"] == {"step": 3, "goal": "trip"}
    assert f.hook.title
    assert hid in eng.render_prompt("ana", budget_tokens=500)
    # the parsed turns are searchable
    user_text = next(c for r, c in expected if r == "user")
    assert user_text in texts(eng.search(user_text, "ana", k=5))


def test_pre_compress_keeps_tool_calls_of_json_messages(eng: MemoryEngine) -> None:
    f = eng.retrieve(eng.pre_compress("ana", OPENAI))  # a list is accepted and stored as JSON text
    assert json.loads(f.raw) == OPENAI
    assistant = next(x for x in f.turns if "Ryokan" in x.content)
    assert assistant.tool_calls[0]["function"]["name"] == "book_hotel"


def test_pre_compress_keeps_unparseable_text_searchable(eng: MemoryEngine) -> None:
    notes = ("Scratchpad for the migration.\n- move invoices table to Postgres 16\n- the archive bucket is "
             "s3://acme-cold-archive\n- ask Priya about the Q3 retention policy") * 3
    hid = eng.pre_compress("ana", notes, estimated_tokens=1234)
    f = eng.retrieve(hid)
    assert f.raw == notes and f.meta["parsed"] is False and f.meta["estimated_tokens"] == 1234
    assert "".join(x.content for x in f.turns) == notes
    found = eng.search("Priya retention policy", "ana", k=3)
    assert found.items and "Priya" in found.items[0].text
    big = "lorem ipsum dolor sit amet " * 1000  # larger than one chunk
    f = eng.retrieve(eng.pre_compress("ana", big))
    assert "".join(x.content for x in f.turns) == big and len(f.turns) > 1


def test_pre_compress_links_turns_already_stored(eng: MemoryEngine) -> None:
    eng.add_turns([t("user", "Remind me which vaccine the cat needs in April.", MON),
                   t("assistant", "Mochi needs the rabies booster on April 14.\nIt is at the Vet Clinic on Rua Nova.",
                     MON + timedelta(minutes=1))], "ana")
    before = eng.get_turns("ana")
    hid = eng.pre_compress("ana", TRANSCRIPT)
    after = eng.get_turns("ana")
    assert len(after) == len(before) + 1  # only "thanks" is new
    f = eng.retrieve(hid)
    assert [x.id for x in f.turns[:2]] == [x.id for x in before]
    assert texts(eng.search("rabies booster", "ana", k=10)).count(
        "Mochi needs the rabies booster on April 14.\nIt is at the Vet Clinic on Rua Nova.") == 1
    # saving the same context twice creates a second file but no new turns
    eng.pre_compress("ana", TRANSCRIPT)
    assert len(eng.get_turns("ana")) == len(after)


@pytest.mark.parametrize("kwargs", [
    {"full_context": ""}, {"full_context": "   \n "}, {"full_context": "x", "task_state": [1, 2]},
    {"full_context": "x", "task_state": "step 3"}, {"full_context": "x", "estimated_tokens": -1},
    {"full_context": "x", "estimated_tokens": True}, {"full_context": "x", "estimated_tokens": 1.5},
    {"full_context": "x", "task_state": {"f": object()}},
])
def test_pre_compress_rejects_bad_input(eng: MemoryEngine, kwargs: dict) -> None:
    with pytest.raises(InvalidArgumentError):
        eng.pre_compress("ana", **kwargs)
    assert eng.hooks("ana") == [] and eng.get_turns("ana") == []


# =============================================================================================== 10. supersession
def explain_record(path: Path, text: str) -> tuple[float | None, str | None]:
    conn = ro(path)
    row = conn.execute("SELECT valid_to, superseded_by FROM records WHERE kind='turn' AND text=?", (text,)).fetchone()
    conn.close()
    assert row is not None, text
    return row[0], row[1]


def record_id(path: Path, text: str) -> str:
    conn = ro(path)
    row = conn.execute("SELECT id FROM records WHERE kind='turn' AND text=?", (text,)).fetchone()
    conn.close()
    return row[0]


def test_moving_supersedes_the_old_home(eng: MemoryEngine) -> None:
    paris, berlin = "I live in Paris with my two cats.", "I moved to Berlin last month."
    eng.add_turns([t("user", paris, MON), t("assistant", "Paris is lovely in spring!", MON),
                   t("user", "I work as a nurse at a children's hospital.", MON + timedelta(days=1))], "ana")
    moved_at = MON + timedelta(days=20)
    eng.add_turns([t("user", berlin, moved_at, "s2"), t("assistant", "How is the new flat?", moved_at, "s2")], "ana")
    result = texts(eng.search("where do I live?", "ana", k=5, now=moved_at + timedelta(days=1)))
    assert result[0] == berlin
    valid_to, by = explain_record(eng.path, paris)
    assert by == record_id(eng.path, berlin)
    assert valid_to == pytest.approx(moved_at.timestamp())
    assert explain_record(eng.path, berlin) == (None, None)
    assert explain_record(eng.path, "I work as a nurse at a children's hospital.") == (None, None)
    then = texts(eng.search("where do I live?", "ana", k=5, as_of=MON + timedelta(days=10)))
    assert paris in then and berlin not in then
    before = texts(eng.search("where do I live?", "ana", k=5, as_of=MON - timedelta(days=1)))
    assert paris not in before and berlin not in before  # nothing was stated yet


def test_chinese_move_supersedes(eng: MemoryEngine) -> None:
    eng.add_turns([t("user", "我住在北京。", MON)], "li")
    eng.add_turns([t("user", "我搬到上海了。", MON + timedelta(days=30))], "li")
    _, by = explain_record(eng.path, "我住在北京。")
    assert by == record_id(eng.path, "我搬到上海了。")
    assert texts(eng.search("我住在哪里？", "li", k=3))[0] == "我搬到上海了。"
    assert texts(eng.search("我住在哪里？", "li", k=3, as_of=MON + timedelta(days=1)))[0] == "我住在北京。"


TRUE_CONFLICTS = [
    ("I live in Paris.", "I moved to Berlin."),
    ("My favourite colour is blue.", "My favourite colour is green now."),
    ("I work at Google.", "I work at Microsoft now."),
    ("我住在北京。", "我搬到上海了。"),
]
FALSE_CONFLICTS = [  # share an antonym pair or a verb, but are not the same subject and attribute
    ("The soup was hot.", "The beer was cold."),
    ("I love early mornings.", "I hate traffic jams."),
    ("The left door is open.", "The fridge is closed on Sundays."),
    ("My sister lives in Paris.", "I live in Berlin."),
    ("I live in Paris.", "I love Berlin."),
    ("I like tea.", "I like coffee too."),
    ("这个房间很大。", "那个杯子很小。"),
    ("我喜欢猫。", "我喜欢狗。"),
]


def superseded(tmp_path: Path, name: str, old: str, new: str) -> bool:
    e = open_engine(tmp_path / name)
    e.add_turns([t("user", old, MON)], "u")
    e.add_turns([t("user", new, MON + timedelta(days=3))], "u")
    e.close()
    return explain_record(tmp_path / name, old)[1] is not None


def test_supersession_precision_and_recall(tmp_path: Path) -> None:
    hits = [superseded(tmp_path, f"t{i}", a, b) for i, (a, b) in enumerate(TRUE_CONFLICTS)]
    false = [superseded(tmp_path, f"f{i}", a, b) for i, (a, b) in enumerate(FALSE_CONFLICTS)]
    assert hits[0] and hits[-1]  # the examples, English and Chinese
    assert sum(hits) >= len(TRUE_CONFLICTS) - 1
    assert not any(false), [p for p, f in zip(FALSE_CONFLICTS, false, strict=True) if f]


def test_an_older_statement_added_later_does_not_supersede_the_newer(eng: MemoryEngine) -> None:
    eng.add_turns([t("user", "I moved to Berlin.", MON + timedelta(days=30))], "ana")
    eng.add_turns([t("user", "I live in Paris.", MON)], "ana")  # imported history, older
    assert explain_record(eng.path, "I moved to Berlin.") == (None, None)


# =============================================================================================== 11. forgetting
def scan_db(path: Path, needles: tuple[str, ...] = NEEDLES) -> list[str]:
    """Every text (and blob) cell of every table that contains a needle (case-insensitive)."""
    conn = ro(path)
    hits = []
    tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
    for table in tables:
        for row in conn.execute(f'SELECT * FROM "{table}"'):
            for cell in row:
                value = cell.decode("utf-8", "replace") if isinstance(cell, bytes) else cell
                if isinstance(value, str) and any(n.lower() in value.lower() for n in needles):
                    hits.append(f"{table}: {value[:120]!r}")
    conn.close()
    return hits


def scan_files(root: Path, needles: tuple[str, ...] = NEEDLES) -> list[str]:
    hits = []
    for dirpath, _, names in os.walk(root):
        for name in names:
            data = (Path(dirpath) / name).read_bytes().lower()
            for n in needles:
                if n.lower().encode() in data or n.lower().encode("utf-16-le") in data:
                    hits.append(f"{Path(dirpath) / name}: {n}")
    return hits


def secret_conversation(e: MemoryEngine, ns: str = "ana") -> str:
    """A conversation with a secret turn (returned) among ordinary ones, also saved by pre_compress."""
    secret = f"My locker code at Zorbland Gym is {TOKEN}, keep it safe."
    e.add_turns([t("user", "I joined a new gym this week.", MON),
                 t("assistant", "Great! Which one?", MON + timedelta(minutes=1)),
                 t("user", secret, MON + timedelta(minutes=2)),
                 t("assistant", "Got it, I will remember your locker code.", MON + timedelta(minutes=3)),
                 t("user", "Also, my yoga class is on Thursdays.", MON + timedelta(minutes=4))], ns)
    e.add_turns([t("user", "Booking a squash court for Friday.", MON + timedelta(days=1))], ns)
    e.pre_compress(ns, f"User: I joined a new gym this week.\nUser: {secret}\nAssistant: Noted.")
    e.flush(ns)  # vectors are made in the background: the checks below read the vector stores directly
    return secret


def test_forget_by_record_id_removes_the_text_everywhere(eng: MemoryEngine) -> None:
    secret = secret_conversation(eng)
    eng.compact("ana", "weekly", now=MON + timedelta(days=8))  # the secret is in a weekly file too
    assert scan_db(eng.path) and scan_files(eng.path)  # the scan can find it before
    item = next(i for i in eng.search("locker code", "ana", k=5).items if i.text == secret)
    receipt = eng.forget("ana", record_ids=[item.id])
    assert receipt.turns == 1 and len(receipt.turn_ids) == 1
    assert item.id in receipt.record_ids and receipt.records >= 2  # the turn record and the windows around it
    assert any(r.startswith("win_") for r in receipt.record_ids)
    assert len(receipt.files_updated) >= 3  # daily, weekly, context
    assert {"truth", "keyword", "graph", "files"} <= set(receipt.stores)
    assert scan_db(eng.path) == []
    assert scan_files(eng.path) == []
    assert TOKEN not in eng.search("locker code Zorbland", "ana", k=10).context
    assert all(TOKEN not in eng.retrieve(h.id).text for h in eng.hooks("ana", include_merged=True))
    # the rest is untouched
    assert "Also, my yoga class is on Thursdays." in texts(eng.search("yoga class", "ana", k=3))
    assert len(eng.get_turns("ana")) == 6 + 1 - 1  # 6 turns + "Noted." from the context, minus the secret


def test_forget_text_inside_json_context(eng: MemoryEngine) -> None:
    """Verbatim JSON context escapes newlines and quotes: the forgotten text must go from it too."""
    secret = f"Door code for the \"blue\" shed:\n{TOKEN}"
    hid = eng.pre_compress("ana", [{"role": "user", "content": secret},
                                   {"role": "assistant", "content": "Saved."}])
    item = next(i for i in eng.search("door code blue shed", "ana", k=5).items if TOKEN in i.text)
    receipt = eng.forget("ana", record_ids=[item.id])
    assert hid in receipt.files_updated
    assert TOKEN not in (eng.retrieve(hid).raw or "")
    assert scan_db(eng.path, (TOKEN,)) == []
    assert scan_files(eng.path, (TOKEN,)) == []


def test_forget_by_hook_id_deletes_the_file_and_its_turns(eng: MemoryEngine) -> None:
    eng.add_turns([t("user", f"Temporary note: {TOKEN}", MON)], "ana")
    eng.add_turns([t("user", "Keep this: dentist on Tuesday.", MON + timedelta(days=1))], "ana")
    day1 = next(h.id for h in eng.hooks("ana") if h.period_key == "2026-03-02")
    receipt = eng.forget("ana", hook_ids=[day1[:8]])
    assert receipt.files_deleted == (day1,) and receipt.turns == 1
    with pytest.raises(HookNotFoundError):
        eng.retrieve(day1)
    assert [x.content for x in eng.get_turns("ana")] == ["Keep this: dentist on Tuesday."]
    assert scan_db(eng.path) == [] and scan_files(eng.path) == []
    with pytest.raises(HookNotFoundError):
        eng.forget("ana", hook_ids=["0123456789abcdef"])


def test_forget_a_whole_namespace(eng: MemoryEngine) -> None:
    secret_conversation(eng)
    eng.add_turns([t("user", "I live in Paris.", MON), t("user", "I moved to Berlin.", MON + timedelta(days=9))], "ana")
    eng.compact("ana", "weekly", now=MON + timedelta(days=30))
    eng.add_turns([t("user", "Bob's bike is red.", MON)], "bob")
    conn = ro(eng.path)
    ns_id = conn.execute("SELECT ns_id FROM namespaces WHERE user_id='ana'").fetchone()[0]
    conn.close()
    receipt = eng.forget("ana")
    assert receipt.turns == len(receipt.turn_ids) > 0
    assert eng.hooks("ana", include_merged=True) == [] and eng.get_turns("ana") == []
    assert eng.render_prompt("ana", budget_tokens=500) == ""
    conn = ro(eng.path)
    for (table,) in conn.execute("SELECT name FROM sqlite_master WHERE type='table'").fetchall():
        cols = [r[1] for r in conn.execute(f'PRAGMA table_info("{table}")')]
        if "ns_id" in cols and table != "namespaces":
            # the index's version counters stay, zeroed, so that other processes notice the drop
            where = "ns_id=?" + {"kw_stats": " AND n_docs + total_len > 0",
                                 "graph_stats": " AND (n_records > 0 OR max_ts IS NOT NULL)",
                                 "time_stats": " AND (n_records > 0 OR n_spans > 0)",
                                 "evidence_stats": " AND n_records > 0"}.get(table, "")
            n = conn.execute(f'SELECT COUNT(*) FROM "{table}" WHERE {where}', (ns_id,)).fetchone()[0]
            assert n == 0, f"{table} keeps {n} rows of the forgotten namespace"
    assert conn.execute("SELECT COUNT(*) FROM file_turns WHERE fid NOT IN (SELECT fid FROM files)").fetchone()[0] == 0
    conn.close()
    assert scan_db(eng.path) == [] and scan_files(eng.path) == []
    assert texts(eng.search("bike colour", "bob", k=3)) == ["Bob's bike is red."]
    assert eng.hooks("bob")


def test_forget_unknown_record_id_removes_nothing(eng: MemoryEngine) -> None:
    secret_conversation(eng)
    good = eng.search("locker code", "ana", k=3).items[0].id
    before = {tb: sqlite_rows(eng.path, tb) for tb in ("turns", "records", "files", "file_turns", "claims")}
    for bad in ([good, "rec_does_not_exist"], ["rec_does_not_exist"], [], [""], "   "):
        with pytest.raises(ValidationError):
            eng.forget("ana", record_ids=bad)
    with pytest.raises(ValidationError):
        eng.forget("ana", record_ids=[good], hook_ids=["fffffffffffffff0"])
    with pytest.raises(ValidationError):
        eng.forget("bob", record_ids=[good])  # another namespace's record
    assert {tb: sqlite_rows(eng.path, tb) for tb in before} == before


def sqlite_rows(path: Path, table: str) -> list:
    conn = ro(path)
    rows = sorted(conn.execute(f"SELECT * FROM {table}").fetchall(), key=repr)
    conn.close()
    return rows


def test_forget_removes_vectors_from_chroma(tmp_path: Path) -> None:
    pytest.importorskip("chromadb")
    e = open_engine(tmp_path / "store", {"storage": {"vector_backend": "chroma"}})
    try:
        secret = secret_conversation(e)
        col = e._vector._collection  # the engine's own embedded PersistentClient collection
        before = col.count()
        conn = ro(e.path)
        n_records = conn.execute("SELECT COUNT(*) FROM records").fetchone()[0]
        conn.close()
        assert before == n_records
        item = next(i for i in e.search("locker code", "ana", k=5).items if i.text == secret)
        receipt = e.forget("ana", record_ids=[item.id])
        assert "vector:chroma" in receipt.stores
        assert col.count() == before - receipt.records
        rids = [str(r) for r in range(1, n_records + 10)]
        kept = set(col.get(ids=rids)["ids"])
        conn = ro(e.path)
        assert kept == {str(r[0]) for r in conn.execute("SELECT rid FROM records")}
        conn.close()
    finally:
        e.close()


# =============================================================================================== 12. safety
@pytest.mark.parametrize("user", ["../../etc", "a/b", "..", "x" * 256, "C:\\Windows\\system32", "~root/.ssh",
                                  "名前/../用户"])
def test_unsafe_namespace_ids_stay_inside_the_store(tmp_path: Path, user: str) -> None:
    store = tmp_path / "store"
    parent_before = sorted(os.listdir(tmp_path.parent))
    with open_engine(store) as e:
        e.add_turns([t("user", "I keep my bike in the basement storage room.", MON)], user)
        hid = e.pre_compress(user, "User: where is my bike?\nAssistant: in the basement storage room.")
        e.add_turns([t("user", "Next week: bike service.", MON + timedelta(days=7))], user)
        e.maybe_compact(user, now=MON + timedelta(days=60))
        assert e.retrieve(hid, namespace=user).raw.startswith("User: where")
        assert e.render_prompt(user, budget_tokens=300)
        assert texts(e.search("bike basement", user, k=3))
        e.forget(user)
        assert e.hooks(user, include_merged=True) == []
    assert sorted(os.listdir(tmp_path.parent)) == parent_before
    assert sorted(os.listdir(tmp_path)) == ["store"]
    for _dirpath, dirs, names in os.walk(store):
        for name in dirs + names:
            assert user not in name and "etc" not in name and "xxxxxxxx" not in name


@pytest.mark.parametrize("bad", ["a\x00b", "\x00"])
def test_nul_in_a_namespace_id_is_rejected(eng: MemoryEngine, bad: str) -> None:
    with pytest.raises(InvalidNamespaceError):
        eng.add_turns([t("user", "hello", MON)], bad)
    with pytest.raises(InvalidNamespaceError):
        eng.pre_compress(bad, "User: hi")
    with pytest.raises(InvalidNamespaceError):
        eng.render_prompt(bad, budget_tokens=100)


@pytest.mark.parametrize("hook_id", ["../etc/passwd", "../../memory.sqlite3", "/etc/passwd", "a\x00bcdefgh",
                                     "..\\..\\x", "x" * 300])
def test_path_like_hook_ids_are_not_found(eng: MemoryEngine, hook_id: str) -> None:
    eng.add_turns([t("user", "A note about the garden.", MON)], "ana")
    with pytest.raises(HookNotFoundError):
        eng.retrieve(hook_id)
    with pytest.raises(HookNotFoundError):
        eng.retrieve(hook_id, namespace="ana")
    with pytest.raises(HookNotFoundError):
        eng.set_importance(hook_id, 10)


# =============================================================================================== 13. async twins
def test_async_twins(eng: MemoryEngine) -> None:
    async def main() -> None:
        await eng.aadd_turns([t("user", "I water the orchids every Sunday morning.", MON),
                              t("assistant", "Orchids like that; avoid soaking the roots.", MON)], "ana")
        hooks = await eng.ahooks("ana")
        assert len(hooks) == 1
        f = await eng.aretrieve(hooks[0].id[:7])
        assert f.turns[0].content.startswith("I water the orchids")
        assert (await eng.aset_importance(hooks[0].id, 77)).importance == 77
        text = await eng.arender_prompt("ana", budget_tokens=200, query="orchids")
        assert hooks[0].id in text
        hid = await eng.apre_compress("ana", "User: which plant needs water on Sunday?\nAssistant: the orchids",
                                      task_state={"k": 1})
        assert (await eng.aretrieve(hid)).meta["task_state"] == {"k": 1}
        report = await eng.acompact("ana", "weekly", key="2026-W10")
        assert report.changed
        assert not (await eng.amaybe_compact("ana", now=MON + timedelta(days=3))).changed
        with pytest.raises(HookNotFoundError):
            await eng.aretrieve("ffffffffff")
        receipt = await eng.aforget("ana", hook_ids=[hid])
        assert hid in receipt.files_deleted  # (and the daily file its new turns were archived in)
        with pytest.raises(HookNotFoundError):
            await eng.aretrieve(hid)

    asyncio.run(main())


def test_pre_compress_at_a_given_time(eng: MemoryEngine) -> None:
    hook_id = eng.pre_compress("ana", "User: the staging DB password rotates on Fridays\nAssistant: noted",
                               now="2026-03-04T10:00:00Z")
    saved = eng.retrieve(hook_id)
    assert saved.hook.period_key.startswith("2026-03-04")
    assert saved.turns[0].timestamp.isoformat().startswith("2026-03-04")
    day = next(h for h in eng.hooks("ana") if h.period == "daily")
    assert day.period_key == "2026-03-04"
