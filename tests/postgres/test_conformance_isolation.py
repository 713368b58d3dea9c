"""Conformance, tenant isolation: users, and one user's agents, never see each other's memories through any read
API (search and its context, get_turns, hooks, render_prompt, retrieve, history) nor reach them through any write
API (update, delete, forget, set_importance) — a seeded interleaving of writes, forgets and reads over 3 users x 2
agents, the same test code on SQLite and on PostgreSQL."""

from __future__ import annotations

import random
import re
from datetime import UTC, datetime, timedelta

import pytest

from memory_ext import MemoryEngine, Namespace, Turn
from memory_ext.errors import HookNotFoundError, InvalidQueryError
from tests.conftest import StoreTarget

pytestmark = pytest.mark.postgres

USERS = ["ana", "ben", "chen"]
AGENTS = [None, "coach"]
TENANTS = [(u, a) for u in USERS for a in AGENTS]
TAG = re.compile(r"tenant([a-z0-9]+)x([a-z0-9]+)q")
SENTENCES = ["My sister moves to {w} in June.", "I adopted a beagle and walk it in {w}.",
             "The train to {w} leaves at 8:39 on Friday.", "我下周要去{w}出差。",
             "Remind me to call the dentist in {w}.", "I'm allergic to peanuts, even in {w}."]
WORDS = ["porto", "lyon", "lisbon", "berlin", "hangzhou", "oslo"]
T0 = datetime(2026, 3, 2, 9, tzinfo=UTC)


def tag(tenant: tuple[str, str | None]) -> str:
    return f"tenant{tenant[0]}x{tenant[1] or 'none'}q"


def tags_in(text: str) -> set[tuple[str, str | None]]:
    return {(u, None if a == "none" else a) for u, a in TAG.findall(text)}


def ns(tenant: tuple[str, str | None], session: str | None = None) -> Namespace:
    return Namespace(tenant[0], tenant[1], session_id=session)


def reads(engine: MemoryEngine, tenant: tuple[str, str | None], word: str) -> list[str]:
    """Every text one tenant can read."""
    n = ns(tenant)
    result = engine.search(f"the {word} trip", n, k=30)
    out = [i.text for i in result.items] + [result.context]
    out += [t.content for t in engine.get_turns(n)]
    out += [t.content for t in engine.get_turns(ns(tenant, "s1"))]
    out.append(engine.render_prompt(n, budget_tokens=3000))
    out.append(engine.render_prompt(n, budget_tokens=3000, query=word))
    for hook in engine.hooks(n, include_merged=True):
        out += [hook.title, hook.abstract, *hook.key_facts]
        out += [t.content for t in engine.retrieve(hook.id, n).turns]
    for turn in engine.get_turns(n)[:3]:
        out += [v.content or "" for v in engine.history(n, turn.id)]
    return out


def test_no_tenant_sees_or_reaches_another_tenants_memories(store_target: StoreTarget) -> None:
    rng = random.Random(17)
    with store_target.open() as engine:
        counter = 0
        for step in range(60):
            tenant = rng.choice(TENANTS)
            word = rng.choice(WORDS)
            op = rng.choice(["add", "add", "add", "read", "forget_record", "forget_session", "update", "delete"])
            if op == "add" or step < 12:
                turns = []
                for _ in range(rng.randint(1, 3)):
                    counter += 1
                    text = f"{tag(tenant)} {rng.choice(SENTENCES).format(w=word)} (note {counter})"
                    turns.append(Turn(role=rng.choice(["user", "assistant"]), content=text,
                                      session_id=f"s{rng.randint(1, 2)}", external_id=f"m{counter}",
                                      timestamp=T0 + timedelta(hours=counter)))
                engine.add_turns(turns, ns(tenant))
            elif op == "forget_record":
                items = engine.search(word, ns(tenant), k=1).items
                if items:
                    engine.forget(ns(tenant), record_ids=[items[0].id])
            elif op == "forget_session":
                engine.forget(ns(tenant, f"s{rng.randint(1, 2)}"))
            elif op in ("update", "delete"):
                stored = engine.get_turns(ns(tenant))
                if stored:
                    turn = rng.choice(stored)
                    if op == "update":
                        engine.update(ns(tenant), turn.id, content=f"{tag(tenant)} updated: trip to {word}")
                    else:
                        engine.delete(ns(tenant), [turn.id])
            for reader in TENANTS:
                for text in reads(engine, reader, word):
                    foreign = tags_in(text) - {reader}
                    assert not foreign, f"step {step} ({op}): {reader} read {sorted(foreign)} in {text[:160]!r}"
        assert engine.stats().turns > 20


def test_ids_of_another_tenant_are_unknown(store_target: StoreTarget) -> None:
    with store_target.open() as engine:
        ana = engine.add_turns([Turn(role="user", content=f"{tag(('ana', None))} my locker code is 4471",
                                     external_id="locker", session_id="s1", timestamp=T0)], "ana", wait=True)
        engine.add_turns([Turn(role="user", content=f"{tag(('ben', None))} my bike is blue", session_id="s1",
                               timestamp=T0)], "ben", wait=True)
        record = engine.search("locker code", "ana", k=1).items[0].id
        hook = engine.hooks("ana")[0].id
        turn = ana.turn_ids[0]
        for other in (Namespace("ben"), Namespace("ana", "coach")):
            for call in (lambda o=other: engine.update(o, "locker", content="stolen"),
                         lambda o=other: engine.update(o, turn, content="stolen"),
                         lambda o=other: engine.update(o, record, content="stolen"),
                         lambda o=other: engine.history(o, "locker"),
                         lambda o=other: engine.delete(o, [turn]),
                         lambda o=other: engine.forget(o, record_ids=[record])):
                with pytest.raises(InvalidQueryError):
                    call()
            for call in (lambda o=other: engine.retrieve(hook, o),
                         lambda o=other: engine.retrieve(hook[:8], o),
                         lambda o=other: engine.set_importance(hook, 90, o),
                         lambda o=other: engine.forget(o, hook_ids=[hook])):
                with pytest.raises((HookNotFoundError, InvalidQueryError)):
                    call()
            assert not any("locker" in i.text for i in engine.search("locker code 4471", other, k=20).items)
        assert [t.content for t in engine.get_turns("ana")] == [f"{tag(('ana', None))} my locker code is 4471"]
        assert engine.hooks("ana")[0].importance != 90
        assert "4471" in engine.search("locker code", "ana", k=1).items[0].text


@pytest.mark.parametrize("user", ["o'brien", "用户-7", "a%b?c", "x\\y", "tenant x", "UPPER", "upper"])
def test_user_ids_with_quotes_placeholders_and_unicode_stay_apart(store_target: StoreTarget, user: str) -> None:
    with store_target.open() as engine:
        neighbour = "upper" if user == "UPPER" else "UPPER" if user == "upper" else "plain"
        engine.add_turns([Turn(role="user", content=f"{neighbour} keeps the spare key under the blue pot")], neighbour)
        engine.add_turns([Turn(role="user", content=f"{user} keeps the spare key in the mailbox",
                               session_id="s'1%")], Namespace(user, agent_id=f"{user}-bot"))
        mine = engine.search("where is the spare key?", Namespace(user, agent_id=f"{user}-bot"), k=5)
        assert [i.text for i in mine.items] == [f"{user} keeps the spare key in the mailbox"]
        assert engine.search("spare key", user, k=5).items == ()  # the user without that agent: nothing
        assert [t.session_id for t in engine.get_turns(Namespace(user, agent_id=f"{user}-bot"))] == ["s'1%"]
        assert (user, f"{user}-bot") in [(n.user_id, n.agent_id) for n in engine.namespaces()]
        receipt = engine.forget(Namespace(user, agent_id=f"{user}-bot", session_id="s'1%"))
        assert receipt.turns == 1
        assert [i.text for i in engine.search("spare key", neighbour, k=5).items] == [
            f"{neighbour} keeps the spare key under the blue pot"]
