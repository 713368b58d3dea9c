"""Conformance, the memory files and maintenance: daily files and their hooks, ``render_prompt``, ``retrieve``,
``set_importance``, the weekly merge and the monthly eviction (``compact`` / ``maybe_compact``), ``pre_compress``
and ``reindex`` — the same test code on SQLite and on PostgreSQL, and the same files, hooks and reports from both
backends for the same turns."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from memory_ext import HashingEmbedder, MemoryEngine, Turn
from memory_ext.errors import HookNotFoundError, InvalidArgumentError, InvalidTurnError
from memory_ext.ingest.reindex import PROGRESS_KEY
from tests.conftest import CONVERSATIONS, StoreTarget, make_turns
from tests.postgres.conformance_kit import assert_same_ranking, namespace_rows, store_rows, texts

pytestmark = pytest.mark.postgres

MON = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)  # Monday of ISO week 2026-W10
FEB = datetime(2026, 2, 3, 10, tzinfo=UTC)  # Tuesday of 2026-W06
HOOK_ID = re.compile(r"\b[0-9a-f]{16}\b")
BIG_RESULT = json.dumps({"rows": [{"order": 4400 + i, "status": "shipped", "carrier": "DHL"} for i in range(40)]})


def t(role: str, content: str, ts: datetime, session: str = "s1", **kw: Any) -> Turn:
    return Turn(role=role, content=content, timestamp=ts, session_id=session, **kw)


def build_week(e: MemoryEngine, ns: str = "ana", start: datetime = MON) -> None:
    d0, d1, d2 = start, start + timedelta(days=1), start + timedelta(days=3)
    e.add_turns([t("user", "What's the status of order 4411?", d0, "a"),
                 t("assistant", "Order 4411 shipped yesterday with DHL.", d0 + timedelta(minutes=1), "a"),
                 t("user", "thanks!", d0 + timedelta(minutes=2), "a"),
                 t("assistant", "you're welcome!", d0 + timedelta(minutes=3), "a")], ns)
    e.add_turns([t("user", "ok", d1, "b"),
                 t("tool", BIG_RESULT, d1 + timedelta(minutes=1), "b",
                   tool_calls=({"name": "list_orders", "arguments": {}},)),
                 t("user", "Please cancel order 4412, I ordered it twice.", d1 + timedelta(minutes=2), "b"),
                 t("assistant", "Order 4412 is cancelled; the refund takes 3 days.", d1 + timedelta(minutes=3), "b")],
                ns)
    e.add_turns([t("user", "What's the status of order 4411?", d2, "c"),
                 t("assistant", "Order 4411 was delivered this morning.", d2 + timedelta(minutes=1), "c"),
                 t("user", "Thanks", d2 + timedelta(minutes=2), "c"),
                 t("assistant", "You're welcome :)", d2 + timedelta(minutes=3), "c")], ns)


PLAIN = ["I watched a documentary about humpback whales tonight.",
         "My neighbour's parrot learned to whistle the anthem.",
         "The bakery on the corner now sells rye bread on Tuesdays.",
         "I finally finished the jigsaw puzzle of the Alps."]


def build_february(e: MemoryEngine, ns: str = "ana") -> None:
    """Four weeks of February 2026 with chatter and high-value turns (tool calls, code, files, stated facts)."""
    high = {0: [t("assistant", "Reserved table 7 at Casa Lupa for Friday.", FEB, "w0",
                  tool_calls=({"name": "reserve", "arguments": {"table": 7}},)),
                t("user", "```python\ndef fib(n):\n    return n if n < 2 else fib(n-1) + fib(n-2)\n```", FEB, "w0")],
            1: [t("user", "Here is my lease contract.", FEB + timedelta(weeks=1), "w1",
                  attachments=({"type": "file", "name": "lease.pdf"},)),
                t("user", "We decided to repaint the kitchen in sage green.", FEB + timedelta(weeks=1), "w1")],
            2: [t("user", "My blood type is 0 negative, remember it.", FEB + timedelta(weeks=2), "w2",
                  metadata={"importance": 80})],
            3: []}
    for w in range(4):
        day = FEB + timedelta(weeks=w)
        turns = [t("user", PLAIN[w], day, f"w{w}"),
                 t("assistant", f"Noted about that, entry {w}: {PLAIN[w].split()[3]} logged.", day, f"w{w}")]
        turns += [Turn(**{**x.model_dump(), "timestamp": day + timedelta(minutes=5)}) for x in high[w]]
        e.add_turns(turns, ns)


def _files(e: MemoryEngine, ns: str = "ana") -> list[tuple[Any, ...]]:
    """Every file of a namespace as backend-neutral values (no ids), with its turns' contents."""
    out = []
    for h in e.hooks(ns, include_merged=True):
        f = e.retrieve(h.id, ns)
        merged = h.period in ("weekly", "monthly")
        # a merged file's key facts and entities come from its sources in an order that ties leave to the (random)
        # hook ids — two SQLite stores differ there too: its entities are compared as a set, its facts not
        out.append((h.period, h.period_key, h.status, h.title, h.abstract, None if merged else h.key_facts,
                    tuple(sorted(h.entities)) if merged else h.entities, h.tags, h.importance, h.token_count,
                    h.truncated, h.start, h.end, len(h.sources),
                    h.merged_into is not None, tuple(x.content for x in f.turns),
                    None if merged else HOOK_ID.sub("<hook>", f.text)))
    return sorted(out, key=repr)


def _neutral(value: Any) -> Any:
    """A report value without hook ids (random per store): id-keyed mappings become sorted value lists."""
    if isinstance(value, dict):
        if value and all(isinstance(k, str) and HOOK_ID.fullmatch(k) for k in value):
            return sorted((_neutral(v) for v in value.values()), key=repr)
        return {k: _neutral(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_neutral(v) for v in value]
    if isinstance(value, float):
        return round(value, 6)
    if isinstance(value, str):
        return HOOK_ID.sub("<hook>", value)
    return value


def _step(e: MemoryEngine, step: dict[str, Any]) -> dict[str, Any]:
    """A compaction step without ids; a monthly step's ``best`` as its week. The eviction's ``relevance`` (and so
    ``score``) is left out: it ranks by a search whose query joins the later files' titles in an order that ties
    on their end times leave to the (random) hook ids — two SQLite stores differ there too."""
    out = dict(step)
    if "best" in out:
        out["best"] = e.retrieve(out["best"], "ana").hook.period_key
    if "scores" in out:
        out["scores"] = sorted((v["recency"], v["access"], v["importance"]) for v in out["scores"].values())
    return _neutral(out)


def test_daily_files_hooks_prompt_and_retrieve(store_target: StoreTarget) -> None:
    with store_target.open() as e:
        day1 = [t("user", "Can you find me a dentist near Alfama for next week?", MON),
                t("assistant", "Dr. Sousa in Alfama has a slot on Tuesday at 10:00.", MON + timedelta(minutes=1)),
                t("user", "Book it please.", MON + timedelta(hours=14, minutes=58))]
        day2 = [t("user", "Did the dentist confirm the Tuesday slot?", MON + timedelta(hours=15, minutes=1)),
                t("assistant", "Yes, confirmed for Tuesday 10:00.", MON + timedelta(hours=15, minutes=2))]
        e.add_turns(day1, "ana")
        e.add_turns(day2, "ana")
        files = sorted(e.hooks("ana"), key=lambda h: h.period_key)
        assert [(h.period, h.period_key, h.status) for h in files] == [("daily", "2026-03-02", "closed"),
                                                                      ("daily", "2026-03-03", "open")]
        assert [x.content for x in e.retrieve(files[0].id).turns] == [x.content for x in day1]
        assert [x.content for x in e.retrieve(files[1].id[:8], "ana").turns] == [x.content for x in day2]
        assert "dentist" in (files[0].title + files[0].abstract).lower()
        prompt = e.render_prompt("ana", budget_tokens=2000)
        assert files[0].id[:6] in prompt and files[1].id[:6] in prompt
        assert e.render_prompt("ana", budget_tokens=2000, query="Alfama dentist").index(files[0].id[:6]) >= 0
        hook = e.set_importance(files[0].id, 90, "ana")
        assert hook.importance == 90 and e.hooks("ana")[0].importance in (90, files[1].importance)
        assert e.retrieve(files[0].id).hook.access_count >= 2
        # a prefix is matched as SQLite's LIKE does, ignoring the case of ASCII letters; a whole id is exact
        assert e.retrieve(files[0].id[:8].upper(), "ana").id == files[0].id
        assert e.retrieve(files[0].id.upper(), "ana").id == files[0].id
        with pytest.raises(HookNotFoundError):
            e.retrieve("zzzzzzzz", "ana")
        with pytest.raises(HookNotFoundError):
            e.retrieve(files[0].id[:5] + "%", "ana")  # LIKE's wildcards are plain characters in a prefix
        with pytest.raises(InvalidArgumentError):
            e.set_importance(files[0].id, 101, "ana")


def test_the_weekly_merge(store_target: StoreTarget) -> None:
    with store_target.open() as e:
        build_week(e)
        dailies = [h for h in e.hooks("ana", include_merged=True) if h.period == "daily"]
        assert len(dailies) == 3
        report = e.compact("ana", "weekly", key="2026-W10")
        step = report.steps[0]
        assert report.changed and step["period"] == "2026-W10"
        assert step["dropped"] == {"chitchat": 4, "duplicate": 1}
        weekly = e.retrieve(step["file"])
        contents = [x.content for x in weekly.turns]
        assert "ok" in contents and BIG_RESULT in contents and len(contents) == 7
        assert weekly.turns[contents.index(BIG_RESULT)].tool_calls[0]["name"] == "list_orders"
        assert sorted(weekly.hook.sources) == sorted(h.id for h in dailies)
        assert [h.id for h in e.hooks("ana")] == [weekly.id]
        assert all(h.status == "merged" and h.merged_into == weekly.id
                   for h in e.hooks("ana", include_merged=True) if h.period == "daily")
        assert len(e.get_turns("ana")) == 12
        assert not e.compact("ana", "weekly", key="2026-W10").changed  # idempotent
        assert not e.maybe_compact("ana", now=MON + timedelta(days=10)).changed


def test_the_monthly_eviction_and_the_cold_tier(store_target: StoreTarget) -> None:
    with store_target.open() as e:
        build_february(e)
        report = e.compact("ana", "weekly", now=datetime(2026, 3, 10, tzinfo=UTC))
        assert len(report.steps) == 4
        step = e.compact("ana", "monthly", key="2026-02", now=datetime(2026, 3, 10, tzinfo=UTC)).steps[0]
        assert step["changed"] and step["period"] == "2026-02"
        monthly = e.retrieve(step["file"])
        kept = [x.content for x in monthly.turns]
        for text in ("Reserved table 7 at Casa Lupa for Friday.", "Here is my lease contract.",
                     "My blood type is 0 negative, remember it.", "We decided to repaint the kitchen in sage green."):
            assert text in kept
        assert [h.id for h in e.hooks("ana")] == [monthly.id]
        assert len(e.get_turns("ana")) == 13
        for p in PLAIN:  # cold is a ranking prior, never a gate
            assert p in texts(e.search(p, "ana", k=20))
        assert not e.compact("ana", "monthly", key="2026-02", now=datetime(2026, 3, 10, tzinfo=UTC)).changed


def test_files_reports_and_rankings_agree_between_the_backends(both_targets: tuple[StoreTarget, StoreTarget]) -> None:
    """The same turns give the same files, hooks, compaction reports and (cold-aware) rankings on both."""
    out = []
    for target in both_targets:
        with target.open() as e:
            build_february(e)
            build_week(e)
            e.add_turns(make_turns("ana", MON + timedelta(days=5)), "ana", wait=True)
            before = _files(e)
            maybe = e.maybe_compact("ana", now=datetime(2026, 3, 20, tzinfo=UTC))
            searches = [e.search(q, "ana", k=8) for q in ("Casa Lupa table", "whales documentary", "order 4411",
                                                          "What dog did Ana adopt?", "rye bread")]
            cold = [e.search(q, "ana", k=8, include_cold=True) for q in ("whales documentary", "rye bread")]
            out.append((before, [_step(e, s) for s in maybe.steps], _files(e), searches, cold,
                        e.render_prompt("ana", budget_tokens=500)))
    (b1, s1, a1, q1, c1, p1), (b2, s2, a2, q2, c2, p2) = out
    assert b1 == b2
    for x, y in zip(s1, s2, strict=True):
        assert x == y, f"{x}\n{y}"
    assert len(s1) >= 5  # four February weeks + W10, then the month
    for x, y in zip(a1, a2, strict=True):
        assert x == y, [(i, u, v) for i, (u, v) in enumerate(zip(x, y, strict=True)) if u != v]
    for x, y in zip(q1 + c1, q2 + c2, strict=True):
        assert_same_ranking(x, y, what=x.query)
    assert len(p1) == len(p2)  # the hook ids in the prompt differ; the lines' shape does not


def test_pre_compress_archives_links_and_is_searchable(store_target: StoreTarget) -> None:
    with store_target.open() as e:
        e.add_turns([{"role": "user", "content": "I booked the train to Lyon"}], "ana")
        hook = e.pre_compress("ana", "User: I booked the train to Lyon\nAssistant: Seat 42, coach 7",
                              task_state={"step": 3, "goal": "travel"}, estimated_tokens=20)
        f = e.retrieve(hook, "ana")
        assert [x.content for x in f.turns] == ["I booked the train to Lyon", "Seat 42, coach 7"]
        assert f.hook.period == "context" and f.raw and "Seat 42" in f.raw
        assert f.meta.get("task_state") == {"step": 3, "goal": "travel"}
        assert len(e.get_turns("ana")) == 2
        assert e.search("which seat?", "ana", k=1).items[0].text == "Seat 42, coach 7"
        unparsed = e.pre_compress("ana", "free notes: the okapi enclosure reopens on 12 May " * 5)
        assert "okapi" in " ".join(x.content for x in e.retrieve(unparsed, "ana").turns)
        assert "okapi" in e.search("okapi enclosure", "ana", k=1).items[0].text
        messages = [{"role": "user", "content": "Please remember my gate code 7311"},
                    {"role": "assistant", "content": "Saved: gate code 7311."}]
        listed = e.pre_compress("ana", messages)
        assert [x.content for x in e.retrieve(listed, "ana").turns] == [m["content"] for m in messages]


@pytest.mark.parametrize(("context", "field"), [
    ([{"role": "user", "content": "hello"}, {"role": "assistant", "content": "x" * 200_001}], "content"),
    ('[{"role": "user", "content": "hi"}, {"role": "assistant", "content": "bad \\ud800 text"}]', "content"),
    ("User: hi \ud800 there\nAssistant: ok", "full_context"),
])
def test_a_bad_pre_compress_writes_nothing(store_target: StoreTarget, context: object, field: str) -> None:
    with store_target.open() as e:
        e.add_turns([{"role": "user", "content": "I booked the train to Lyon"}], "ana", wait=True)
        e.hooks("ana")
        before = store_rows(e)
        with pytest.raises((InvalidTurnError, InvalidArgumentError)) as info:
            e.pre_compress("ana", context)  # type: ignore[arg-type]
        assert field in info.value.field
        assert store_rows(e) == before


def test_a_failure_inside_pre_compress_rolls_back(store_target: StoreTarget,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """The file, its new turns and their records are one transaction: a failure at its end leaves nothing."""
    from memory_ext.lifecycle import api

    with store_target.open() as e:
        e.add_turns([{"role": "user", "content": "I booked the train to Lyon"}], "ana", wait=True)
        e.hooks("ana")
        before = store_rows(e)

        def broken(*args: Any, **kwargs: Any) -> None:
            raise RuntimeError("lost the connection")

        monkeypatch.setattr(api, "set_members", broken)
        with pytest.raises(RuntimeError):
            e.pre_compress("ana", "User: the okapi-marker zoo\nAssistant: the okapi-marker is shy")
        assert store_rows(e) == before
        monkeypatch.undo()
        e.pre_compress("ana", "User: the okapi-marker zoo\nAssistant: the okapi-marker is shy")
        assert len(e.get_turns("ana")) == 3


# -- reindex -------------------------------------------------------------------------------------------------------
OFF: dict[str, Any] = {"globals": {"layers_index_enabled": False, "evidence_enabled": False},
                       "ingest": {"background_indexing": False, "layer_min_chars": 50}}
ON: dict[str, Any] = {"globals": {"layers_index_enabled": True, "evidence_enabled": True},
                      "ingest": {"background_indexing": False, "layer_min_chars": 50}}
QUESTIONS = [("ana", "Where is Lena moving?"), ("ben", "How far does Ben run?"), ("chen", "peanut allergy"),
             ("ana", "杭州西湖"), ("ben", "coffee on the laptop")]


def _kinds(e: MemoryEngine) -> dict[str, int]:
    return {k: int(n) for k, n in e._store.reader().execute("SELECT kind, COUNT(*) FROM records GROUP BY kind")}


def test_a_reindexed_store_searches_like_a_fresh_one(both_targets: tuple[StoreTarget, StoreTarget],
                                                     store_target: StoreTarget) -> None:
    """Turn the layers and the evidence index on, reindex: the store searches like one ingested with them on —
    on its own backend and compared with the other backend."""
    del both_targets  # (only for the pair of fresh stores below)
    with store_target.open(config=OFF) as old:
        for user in CONVERSATIONS:
            old.add_turns(make_turns(user), user)
        assert "l0" not in _kinds(old)
    with store_target.open(config=ON) as old:
        report = old.reindex()
        assert report.namespaces == 3 and report.turns == sum(len(c) for c in CONVERSATIONS.values())
        reindexed = [old.search(q, u, k=6) for u, q in QUESTIONS]
        kinds = _kinds(old)
        assert old._store.get_meta(PROGRESS_KEY) is None
    fresh_target = StoreTarget(store_target.backend, store_target.path + "-fresh", store_target.config) \
        if store_target.backend == "sqlite" else \
        StoreTarget("postgres", store_target.path, {"storage": {**store_target.config["storage"],
                                                                "postgres_schema": store_target.config["storage"][
                                                                    "postgres_schema"] + "_fresh"}})
    try:
        with fresh_target.open(config=ON) as fresh:
            for user in CONVERSATIONS:
                fresh.add_turns(make_turns(user), user)
            assert _kinds(fresh) == kinds
            for a, b in zip(reindexed, [fresh.search(q, u, k=6) for u, q in QUESTIONS], strict=True):
                assert_same_ranking(a, b, what=a.query)
    finally:
        if fresh_target.backend == "postgres":
            import psycopg

            with psycopg.connect(fresh_target.path, autocommit=True) as conn:
                conn.execute(f"DROP SCHEMA IF EXISTS {fresh_target.config['storage']['postgres_schema']} CASCADE")


def test_reindex_keeps_updates_ids_and_vectors_and_resumes(store_target: StoreTarget) -> None:
    with store_target.open() as e:
        for user in CONVERSATIONS:
            e.add_turns(make_turns(user), user, wait=True)
        e.update("ana", "ana:2", content="My sister Lena is moving to Nairobi in June.")
        e.flush()
        hit = e.search("Where is Lena moving?", "ana", k=1).items[0]
        vectors = e.stats().vectors
        e.reindex("ana")
        e.flush()
        again = e.search("Where is Lena moving?", "ana", k=5).items
        assert again[0].id == hit.id and "Nairobi" in again[0].text
        assert not any("Lena is moving to Porto" in i.text for i in again)
        assert e.stats().vectors == vectors
        done = e._store.find_namespace(("ana", ""))
        with e._store.transaction("test") as conn:  # a reindex stopped after its first namespace
            e._store.set_meta(conn, PROGRESS_KEY, json.dumps({"done": [done]}))
        report = e.reindex()
        assert report.resumed and report.namespaces == 2
        assert e._store.get_meta(PROGRESS_KEY) is None
        assert "marathon" in e.search("marathon", "ben", k=1).items[0].text


def test_an_embedder_change_is_a_reindex(store_target: StoreTarget) -> None:
    from memory_ext.errors import EmbedderMismatchError

    with store_target.open(embedder=HashingEmbedder(dim=256)) as e:
        e.add_turns(make_turns("chen"), "chen", wait=True)
    with pytest.raises(EmbedderMismatchError):
        store_target.open(embedder=HashingEmbedder(dim=128))
    with store_target.open(embedder=HashingEmbedder(dim=128), allow_embedder_change=True) as e:
        assert e.reindex().embedder_id == "hashing-v1:128"
        e.flush()
    with store_target.open(embedder=HashingEmbedder(dim=128)) as e:
        assert "peanuts" in e.search("allergic to peanuts", "chen", k=1).items[0].text
        assert e.stats().embedder_id == "hashing-v1:128" and e.stats().vectors == e.stats().records
        ns_id = e._store.find_namespace(("chen", ""))
        e.forget("chen")  # nothing of the namespace is left: not the new vectors, not the old embedder's
        assert namespace_rows(e, ns_id) == {}
