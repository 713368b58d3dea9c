"""Conformance, what a search shows: ``SearchResult.context`` (the text a model reads) and the trace obey the same
rules as the items — every filter key, the namespace's session, ``update`` replacements, ``delete`` / ``forget``
and ``as_of`` — on SQLite and on PostgreSQL.

Each found turn is shown inside its conversational window; the neighbours in that window are exactly what these
tests put a filter against (:data:`tests.conftest.RULES_CHAT`).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from memory_ext import MemoryEngine, Namespace, Turn
from memory_ext.store.statements import sql_of
from tests.conftest import RULES_CHAT, RULES_START, StoreTarget, assert_context_obeys, context_texts, rules_turns

pytestmark = pytest.mark.postgres

TEXTS = [content for _, _, _, content, _ in RULES_CHAT]
PIN, PASSPORT = TEXTS[1], TEXTS[5]


@pytest.fixture
def maya(store_target: StoreTarget) -> Iterator[MemoryEngine]:
    engine = store_target.open()
    try:
        engine.add_turns(rules_turns(), "maya", wait=True)
        yield engine
    finally:
        engine.close()


def texts_where(keep: Any) -> set[str]:
    """The texts of the turns for which ``keep(session, role, speaker, metadata, index)`` holds."""
    return {content for i, (session, role, speaker, content, meta) in enumerate(RULES_CHAT)
            if keep(session, role, speaker, meta, i)}


def test_without_filters_the_context_shows_the_neighbours(maya: MemoryEngine) -> None:
    """The reference: unfiltered, the found turn's window shows the neighbours the filters below exclude."""
    result = maya.search("What is my Nordea card?", "maya", k=2)
    assert PIN in context_texts(result.context)


CASES: list[tuple[str, str, dict[str, Any], Any]] = [
    ("metadata", "What is my Nordea card?", {"metadata": {"private": False}},
     lambda s, r, sp, m, i: m.get("private") is False),
    ("metadata-ne", "Who flies to Lisbon and with which passport?", {"metadata": {"private": {"$ne": True}}},
     lambda s, r, sp, m, i: m.get("private") is not True),
    ("speaker", "Who flies to Lisbon and with which passport?", {"speaker": "Maya"},
     lambda s, r, sp, m, i: sp == "Maya"),
    ("role", "What is my Nordea card?", {"role": "user"}, lambda s, r, sp, m, i: r == "user"),
    ("session_id", "Nordea card or the Lisbon flight?", {"session_id": "trip"}, lambda s, r, sp, m, i: s == "trip"),
    ("since", "What is my Nordea card?", {"since": RULES_START + timedelta(minutes=2)},
     lambda s, r, sp, m, i: i >= 2),
    ("until", "What is my PIN for the Nordea card?", {"until": RULES_START + timedelta(minutes=0, seconds=30)},
     lambda s, r, sp, m, i: i == 0),
    ("kinds", "What is my Nordea card?", {"kinds": ["turn"], "metadata": {"topic": "money"}},
     lambda s, r, sp, m, i: m.get("topic") == "money"),
]


@pytest.mark.parametrize(("key", "query", "filters", "keep"), CASES, ids=[c[0] for c in CASES])
def test_every_line_of_the_context_passes_the_filters(maya: MemoryEngine, key: str, query: str,
                                                      filters: dict[str, Any], keep: Any) -> None:
    allowed = texts_where(keep)
    result = maya.search(query, "maya", k=3, filters=filters, explain=True, trace=True)
    assert {item.text for item in result.items} <= allowed
    assert_context_obeys(result.context, allowed, set(TEXTS) - allowed)


def test_a_kinds_filter_without_turns_shows_no_turn(maya: MemoryEngine) -> None:
    result = maya.search("What is my Nordea card?", "maya", filters={"kinds": ["fact"]})
    assert not [i for i in result.items if i.kind == "turn"]
    assert not any(text in result.context for text in TEXTS)


def test_the_namespace_session_bounds_the_context(maya: MemoryEngine) -> None:
    result = maya.search("Nordea card or the Lisbon flight?", Namespace("maya", session_id="bank"), k=4)
    allowed = texts_where(lambda s, r, sp, m, i: s == "bank")
    assert_context_obeys(result.context, allowed, set(TEXTS) - allowed)


def test_another_user_never_shows(store_target: StoreTarget) -> None:
    with store_target.open() as engine:
        engine.add_turns(rules_turns(), "maya", wait=True)
        engine.add_turns([Turn(role="user", content="My Nordea PIN is 9999, says Ben.", session_id="bank",
                               timestamp=RULES_START + timedelta(seconds=30))], "ben", wait=True)
        result = engine.search("What is my Nordea card?", "maya", k=5)
        assert "9999" not in result.context
        assert "9999" in engine.search("Nordea PIN", "ben").context


def test_a_replaced_version_never_shows_and_as_of_shows_it_back(store_target: StoreTarget) -> None:
    with store_target.open() as engine:
        engine.add_turns([
            Turn(role="user", content="My locker code is zebra-31.", external_id="locker", session_id="gym",
                 timestamp=RULES_START),
            Turn(role="user", content="The gym locker room is open till ten.", session_id="gym",
                 timestamp=RULES_START + timedelta(minutes=1)),
            Turn(role="user", content="I swim on Tuesdays at the gym.", session_id="gym",
                 timestamp=RULES_START + timedelta(minutes=2)),
        ], "ben", wait=True)
        before = datetime.now(UTC)
        time.sleep(0.01)  # the update happens strictly after `before` (a clock read, not a timing assertion)
        engine.update("ben", "locker", content="My locker code is lynx-77.")
        engine.flush()
        for query in ("What is my locker code?", "When is the gym locker room open?"):
            now = engine.search(query, "ben", k=3, explain=True, trace=True)
            assert "zebra-31" not in now.context and all("zebra-31" not in i.text for i in now.items), query
        current = engine.search("What is my locker code?", "ben", k=3)
        assert "lynx-77" in current.context
        then = engine.search("What is my locker code?", "ben", k=3, as_of=before)
        assert "zebra-31" in then.context, "as_of asks for the old version"
        assert "lynx-77" not in then.context, "a version written after as_of is not shown at as_of"


@pytest.mark.parametrize("how", ["delete", "forget"])
def test_a_removed_neighbour_never_shows(maya: MemoryEngine, how: str) -> None:
    if how == "delete":
        maya.delete("maya", ["rules:1"])
    else:
        hit = next(i for i in maya.search("PIN 4711", "maya", k=3).items if i.text == PIN)
        maya.forget("maya", record_ids=[hit.id])
    result = maya.search("What is my Nordea card?", "maya", k=3)
    assert context_texts(result.context) and "4711" not in result.context


def test_the_trace_lists_only_what_the_search_may_show(maya: MemoryEngine) -> None:
    """A trace names records by rid: a filtered search's trace never names the excluded turn's records (its turn
    record and the records anchored to it), which the unfiltered trace of the same query does."""
    reader = maya._store.reader()
    private = {int(r[0]) for r in reader.execute(  # the rids of the private PIN turn's records
        "SELECT r.rid FROM records r JOIN turns t ON r.anchor_rid = t.record_rid WHERE t.content = "
        f"{sql_of(reader).mark}", (PIN,))}
    assert private

    def rids(trace: dict[str, Any] | None) -> set[int]:
        assert trace is not None
        return {rid for ch in trace["channels"].values() for rid, _ in ch["best"]} | \
            {rid for best in trace["routes"].values() for rid, _ in best}

    query = "PIN for the Nordea card"
    assert rids(maya.search(query, "maya", k=3, trace=True).trace) & private
    filtered = maya.search(query, "maya", k=3, filters={"metadata": {"private": False}}, trace=True)
    assert not rids(filtered.trace) & private
