"""Conformance, list and get: ``list_memories`` shows each memory once, at its current version, most recently
written first, paged by cursor and filtered like ``search``; ``get_memory`` shows one with its whole history —
the same on SQLite and on PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from memory_ext import MemoryEngine, Namespace, Turn
from memory_ext.errors import InvalidQueryError
from tests.conftest import RULES_CHAT, StoreTarget, rules_turns

pytestmark = pytest.mark.postgres


@pytest.fixture
def maya(store_target: StoreTarget) -> Iterator[MemoryEngine]:
    engine = store_target.open()
    try:
        engine.add_turns(rules_turns(), "maya")
        yield engine
    finally:
        engine.close()


def contents(engine: MemoryEngine, namespace: Namespace | str = "maya", **kwargs: object) -> list[str]:
    return [m.content for m in engine.list_memories(namespace, **kwargs).items]  # type: ignore[arg-type]


def test_every_memory_once_most_recent_first(maya: MemoryEngine) -> None:
    page = maya.list_memories("maya")
    assert [m.content for m in page.items] == [c for *_, c, _ in reversed(RULES_CHAT)]
    assert page.next_cursor is None
    first = page.items[-1]
    assert (first.id, first.speaker, first.role, first.session_id, first.version_count) == \
        ("rules:0", "Maya", "user", "bank", 1)
    assert first.metadata == RULES_CHAT[0][4] and first.timestamp is not None and first.record_id


def test_an_update_lists_the_current_version_once_and_a_delete_removes_it(maya: MemoryEngine) -> None:
    maya.update("maya", "rules:3", content="My Nordea card is a green Mastercard now.")
    maya.delete("maya", ["rules:1"])
    listed = maya.list_memories("maya").items
    assert listed[0].content == "My Nordea card is a green Mastercard now."
    assert RULES_CHAT[3][3] not in [m.content for m in listed] and RULES_CHAT[1][3] not in [m.content for m in listed]
    assert len(listed) == len(RULES_CHAT) - 1
    updated = listed[0]
    assert (updated.id, updated.version_count) == ("rules:3", 2)
    detail = maya.get_memory("maya", updated.id)
    assert detail.content == updated.content
    assert [(v.operation, v.content) for v in detail.history] == [
        ("add", RULES_CHAT[3][3]), ("update", "My Nordea card is a green Mastercard now.")]
    assert maya.get_memory("maya", updated.record_id or "").id == "rules:3", "a record id names the memory too"
    with pytest.raises(InvalidQueryError, match="deleted"):
        maya.get_memory("maya", "rules:1")


def test_pages_follow_the_cursor_without_gaps_or_repeats(maya: MemoryEngine) -> None:
    seen: list[str] = []
    cursor = None
    pages = 0
    while True:
        page = maya.list_memories("maya", limit=3, cursor=cursor)
        assert len(page.items) <= 3
        seen += [m.content for m in page.items]
        pages += 1
        cursor = page.next_cursor
        if cursor is None:
            break
    assert pages == 3 and seen == contents(maya)


def test_filters_are_the_search_filters(maya: MemoryEngine) -> None:
    assert contents(maya, filters={"metadata": {"private": True}}) == [RULES_CHAT[5][3], RULES_CHAT[1][3]]
    assert contents(maya, filters={"speaker": "Tom"}) == [RULES_CHAT[5][3]]
    assert set(contents(maya, filters={"session_id": "bank", "role": "assistant"})) == {RULES_CHAT[2][3]}
    assert contents(maya, Namespace("maya", session_id="trip")) == [c for s, *_, c, _ in reversed(RULES_CHAT)
                                                                    if s == "trip"]
    with pytest.raises(InvalidQueryError, match="colour"):
        maya.list_memories("maya", filters={"colour": "red"})


def test_other_namespaces_and_bad_arguments(maya: MemoryEngine) -> None:
    maya.add_turns([Turn(role="user", content="Ben's own memory.")], "ben")
    assert contents(maya, "ben") == ["Ben's own memory."]
    assert maya.list_memories("nobody").items == ()
    for kwargs, field in (({"limit": 0}, "limit"), ({"limit": True}, "limit"), ({"limit": 10**6}, "limit"),
                          ({"cursor": "garbage"}, "cursor"), ({"cursor": 5}, "cursor")):
        with pytest.raises(InvalidQueryError) as err:
            maya.list_memories("maya", **kwargs)  # type: ignore[arg-type]
        assert err.value.field == field
    with pytest.raises(InvalidQueryError):
        maya.get_memory("maya", "no-such-memory")


def test_async_twins(maya: MemoryEngine) -> None:
    import asyncio

    async def run() -> tuple[int, str]:
        page = await maya.alist_memories("maya", limit=2)
        one = await maya.aget_memory("maya", page.items[0].id)
        return len(page.items), one.content

    assert asyncio.run(run()) == (2, RULES_CHAT[-1][3])


def test_the_overview_counts_current_memories_and_turns(maya: MemoryEngine) -> None:
    maya.update("maya", "rules:3", content="My Nordea card is a green Mastercard now.")
    maya.add_turns([Turn(role="user", content="Ben's own memory.")], "ben")
    maya.add_turns([Turn(role="user", content="Gone soon.")], "carl")
    maya.forget("carl")
    assert [(s.user_id, s.memories, s.turns) for s in maya.overview()] == [
        ("maya", len(RULES_CHAT), len(RULES_CHAT) + 1), ("ben", 1, 1)]


def test_version_counts_follow_updates_deletes_and_re_adds(maya: MemoryEngine) -> None:
    """A memory without an external id updated twice has 3 versions (listed and got alike); one deleted and
    stated again under the same external id starts over at 1."""
    added = maya.add_turns([Turn(role="user", content="I run 5 km on Sundays.")], "maya")
    first = added.turn_ids[0]
    maya.update("maya", first, content="I run 8 km on Sundays.")
    maya.update("maya", first, content="I run 10 km on Sundays.")
    maya.delete("maya", ["rules:0"])
    maya.add_turns([Turn(role="user", content="I bank with DNB now.", external_id="rules:0", session_id="bank")],
                   "maya")
    listed = {m.content: m for m in maya.list_memories("maya", limit=100).items}
    assert listed["I run 10 km on Sundays."].version_count == 3 == maya.get_memory("maya", first).version_count
    assert listed["I run 10 km on Sundays."].id == first
    assert listed["I bank with DNB now."].version_count == 1 == maya.get_memory("maya", "rules:0").version_count
