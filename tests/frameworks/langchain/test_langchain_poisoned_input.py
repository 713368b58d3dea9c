"""A LangChain message that carries a lone surrogate or a NUL in its ``additional_kwargs`` (stored in the turn's
metadata) is refused with the engine's typed error, and nothing is written (issue 22, section 3)."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("langchain_core")

from langchain_core.messages import AIMessage, HumanMessage

from langchain_memory_ext import MemoryChatMessageHistory
from memory_ext import MemoryEngine
from memory_ext.errors import InvalidTurnError


@pytest.mark.parametrize("value", ["\ud800", "a\x00b"])
def test_poisoned_metadata_is_a_typed_error(tmp_path: Path, value: str) -> None:
    with MemoryEngine.open(tmp_path / "store", embedder="hashing") as engine:
        history = MemoryChatMessageHistory(engine=engine, user_id="maya", session_id="s1")
        history.add_messages([HumanMessage("I live in Lisbon.")])
        bad = HumanMessage("hello", additional_kwargs={"note": value})
        with pytest.raises(InvalidTurnError) as info:
            history.add_messages([AIMessage("fine"), bad])
        assert "metadata" in info.value.field and info.value.fix
        assert [m.text for m in history.messages] == ["I live in Lisbon."]
        assert engine.stats().turns == 1
