"""MemoryBlock in LlamaIndex's Memory, and ArchivingMemory (every turn archived as it happens)."""

from __future__ import annotations

import asyncio

import pytest

pytest.importorskip("llama_index.core")

from llama_index.core.llms import ChatMessage
from llama_index.core.memory import Memory

from llamaindex_memory_ext import ArchivingMemory, MemoryBlock
from memory_ext import MemoryEngine
from memory_ext.errors import InvalidNamespaceError

CHAT = [
    ChatMessage(role="user", content="I'm allergic to shellfish."),
    ChatMessage(role="assistant", content="Noted: no shellfish in restaurant suggestions."),
]


@pytest.fixture
def engine(tmp_path):
    eng = MemoryEngine.open(tmp_path / "store", embedder="hashing")
    yield eng
    eng.close()


def system_text(messages: list[ChatMessage]) -> str:
    return "\n".join(m.content or "" for m in messages if m.role.value == "system")


def test_plain_memory_hands_a_short_chat_to_no_block(engine: MemoryEngine) -> None:
    """Why ArchivingMemory exists: LlamaIndex only flushes to blocks when the buffer overflows."""
    memory = Memory.from_defaults(session_id="s1", memory_blocks=[MemoryBlock(engine=engine, user_id="maya")])
    memory.put_messages(list(CHAT))
    assert engine.get_turns("maya") == []


def test_archiving_memory_archives_every_message_as_it_is_put(engine: MemoryEngine) -> None:
    block = MemoryBlock(engine=engine, user_id="maya")
    memory = ArchivingMemory.from_defaults(session_id="s1", memory_blocks=[block])
    memory.put(CHAT[0])
    assert [t.content for t in engine.get_turns("maya")] == ["I'm allergic to shellfish."]
    asyncio.run(memory.aput(CHAT[1]))
    turns = engine.get_turns("maya")
    assert [(t.role.value, t.content, t.session_id) for t in turns] == [
        ("user", "I'm allergic to shellfish.", "s1"),
        ("assistant", "Noted: no shellfish in restaurant suggestions.", "s1")]
    assert [m.content for m in memory.get_all()] == [m.content for m in CHAT]  # short-term history intact
    assert block.accept_short_term_memory is True  # the caller's block is not changed
    assert "session_id" not in CHAT[0].additional_kwargs  # nor the caller's messages


def test_overflow_does_not_archive_twice(engine: MemoryEngine) -> None:
    memory = ArchivingMemory.from_defaults(session_id="s1", token_limit=60, token_flush_size=10,
                                           memory_blocks=[MemoryBlock(engine=engine, user_id="maya")])
    said = [f"Message number {i}: a fairly long sentence about travel plans and packing lists." for i in range(8)]
    for i, text in enumerate(said):
        memory.put(ChatMessage(role="user" if i % 2 == 0 else "assistant", content=text))
    active = [m for m in memory.get() if m.role.value != "system"]
    assert len(active) < len(said)  # some were flushed out of the short-term buffer…
    assert [t.content for t in engine.get_turns("maya")] == said  # …and each is archived exactly once


def test_a_plain_memory_archives_on_overflow(engine: MemoryEngine) -> None:
    memory = Memory.from_defaults(session_id="s1", token_limit=60, token_flush_size=10,
                                  memory_blocks=[MemoryBlock(engine=engine, user_id="maya")])
    for i in range(8):
        memory.put(ChatMessage(role="user" if i % 2 == 0 else "assistant",
                               content=f"Message number {i}: a fairly long sentence about travel plans."))
    archived = engine.get_turns("maya")
    assert archived and all(t.session_id == "s1" for t in archived)
    assert archived[0].content.startswith("Message number 0")


def test_memories_from_an_earlier_session_come_back(engine: MemoryEngine) -> None:
    block = MemoryBlock(engine=engine, user_id="maya")
    ArchivingMemory.from_defaults(session_id="s1", memory_blocks=[block]).put_messages(list(CHAT))
    later = ArchivingMemory.from_defaults(session_id="s2", memory_blocks=[block])
    messages = later.get(input="Dinner ideas? Remember what I'm allergic to.")
    assert "- " in system_text(messages) and "allergic to shellfish" in system_text(messages)
    later.put(ChatMessage(role="user", content="Dinner ideas? Remember what I'm allergic to."))
    assert "allergic to shellfish" in system_text(asyncio.run(later.aget()))


def test_session_scope_searches_only_memorys_session(engine: MemoryEngine) -> None:
    engine.add_turns([{"role": "user", "content": "I'm allergic to shellfish.", "session_id": "s1"}], "maya")
    engine.add_turns([{"role": "user", "content": "I'm allergic to cats.", "session_id": "s2"}], "maya")
    block = MemoryBlock(engine=engine, user_id="maya", scope="session")
    text = asyncio.run(block.aget([ChatMessage(role="user", content="what am I allergic to?")], session_id="s2"))
    assert "cats" in text and "shellfish" not in text
    wide = MemoryBlock(engine=engine, user_id="maya")
    text = asyncio.run(wide.aget([ChatMessage(role="user", content="what am I allergic to?")], session_id="s2"))
    assert "cats" in text and "shellfish" in text


def test_memories_already_in_the_chat_are_left_out_and_top_k_holds(engine: MemoryEngine) -> None:
    engine.add_turns([{"role": "user", "content": f"Fact {i} about my garden: tomatoes."} for i in range(6)], "maya")
    block = MemoryBlock(engine=engine, user_id="maya", similarity_top_k=3)
    chat = [ChatMessage(role="user", content="Fact 0 about my garden: tomatoes.")]
    lines = asyncio.run(block.aget(chat)).splitlines()
    assert len(lines) == 3 and not any(line.endswith(": Fact 0 about my garden: tomatoes.") for line in lines)


def test_no_text_no_search(engine: MemoryEngine) -> None:
    block = MemoryBlock(engine=engine, user_id="maya")
    assert asyncio.run(block.aget([])) == "" and asyncio.run(block.aget(None)) == ""


def test_priority_zero_by_default_and_atruncate_shortens_instead_of_dropping(engine: MemoryEngine) -> None:
    assert MemoryBlock(engine=engine, user_id="maya").priority == 0
    block = MemoryBlock(engine=engine, user_id="maya", priority=1)
    content = "\n".join(f"- memory number {i} with some words in it" for i in range(5))
    shorter = asyncio.run(block.atruncate(content, 20))
    assert shorter is not None and content.startswith(shorter) and 0 < len(shorter.splitlines()) < 5
    assert asyncio.run(block.atruncate(content, 10_000)) is None


def test_truncation_inside_memory_keeps_the_best_memories(engine: MemoryEngine) -> None:
    engine.add_turns([{"role": "user", "content": f"Note {i}: I like hiking in the mountains near Porto."}
                      for i in range(8)], "maya")
    memory = Memory.from_defaults(session_id="s9", token_limit=140, memory_blocks=[
        MemoryBlock(engine=engine, user_id="maya", priority=1, similarity_top_k=8)])
    full = asyncio.run(memory.memory_blocks[0].aget([ChatMessage(role="user", content="hiking Porto")]))
    messages = memory.get(input="hiking Porto")
    kept = [line for line in system_text(messages).splitlines() if line.startswith("- ")]
    assert 0 < len(kept) < len(full.splitlines())
    assert kept == full.splitlines()[: len(kept)]


def test_bad_user_id_is_a_typed_error(engine: MemoryEngine) -> None:
    with pytest.raises(InvalidNamespaceError):
        MemoryBlock(engine=engine, user_id="")
