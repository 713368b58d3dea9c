"""Issue 13, observation 4 through LlamaIndex: after ``engine.update`` no node of the old version comes back by
default; ``engine.delete`` removes the memory from the retriever's results."""

from __future__ import annotations

from pathlib import Path

from llamaindex_memory_ext import MemoryRetriever
from memory_ext import MemoryEngine, Turn


def test_the_retriever_returns_only_the_current_version(tmp_path: Path) -> None:
    with MemoryEngine.open(tmp_path / "store", embedder="hashing") as engine:
        engine.add_turns([Turn(role="user", content="Ana lives in Oslo", external_id="home"),
                          Turn(role="user", content="Ana works as a nurse", external_id="job")], "ana")
        for city in ("Porto", "Nairobi"):
            engine.update("ana", "home", content=f"Ana lives in {city}")
        texts = [n.node.get_content() for n in MemoryRetriever(engine=engine, user_id="ana").retrieve("Ana lives in")]
        assert "Ana lives in Nairobi" in texts and not {"Ana lives in Oslo", "Ana lives in Porto"} & set(texts)
        engine.delete("ana", ["home"])
        texts = [n.node.get_content() for n in MemoryRetriever(engine=engine, user_id="ana").retrieve("Ana lives in")]
        assert texts == ["Ana works as a nurse"]
