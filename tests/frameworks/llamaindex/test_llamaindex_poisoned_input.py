"""A LlamaIndex message that carries a lone surrogate or a NUL in its ``additional_kwargs`` (stored in the turn's
metadata) is refused with the engine's typed error, and nothing is written (issue 22, section 3)."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("llama_index.core")

from llama_index.core.llms import ChatMessage, MessageRole

from llamaindex_memory_ext import MemoryEngineMemory
from memory_ext import MemoryEngine
from memory_ext.errors import InvalidTurnError


@pytest.mark.parametrize("value", ["\ud800", "a\x00b"])
def test_poisoned_metadata_is_a_typed_error(tmp_path: Path, value: str) -> None:
    with MemoryEngine.open(tmp_path / "store", embedder="hashing") as engine:
        memory = MemoryEngineMemory(engine=engine, user_id="maya", session_id="s1", similarity_top_k=0)
        memory.put(ChatMessage(role=MessageRole.USER, content="I live in Lisbon."))
        bad = ChatMessage(role=MessageRole.USER, content="hello", additional_kwargs={"note": value})
        with pytest.raises(InvalidTurnError) as info:
            memory.put_messages([ChatMessage(role=MessageRole.ASSISTANT, content="fine"), bad])
        assert "metadata" in info.value.field and info.value.fix
        assert [m.content for m in memory.get_all()] == ["I live in Lisbon."]
        assert engine.stats().turns == 1
