"""After ``MemoryEngine.update`` the prompt index and a search's context show the new text, not the old; the file
keeps the old version (``retrieve``) and ``as_of`` before the edit still finds it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from memory_ext import MemoryEngine, Turn

SAID = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


def test_the_prompt_index_and_context_show_the_edited_text(tmp_path: Path) -> None:
    with MemoryEngine.open(tmp_path / "m", embedder="hashing") as engine:
        engine.add_turns([Turn(role="user", content="Lena lives in Porto.", external_id="home", timestamp=SAID),
                          Turn(role="assistant", content="Noted.", timestamp=SAID + timedelta(minutes=1)),
                          Turn(role="user", content="Lena plays the cello in an orchestra.",
                               timestamp=SAID + timedelta(minutes=2))], "ana", wait=True)
        old_hook = next(h for h in engine.hooks("ana"))
        assert "Porto" in engine.render_prompt("ana")

        engine.update("ana", "home", content="Lena lives in Coimbra.", timestamp=SAID + timedelta(days=9))
        prompt = engine.render_prompt("ana")
        context = engine.search("where does Lena live", "ana", k=3, now=SAID + timedelta(days=10)).context
        kept = engine.retrieve(old_hook.id, "ana")
        before = engine.search("where does Lena live", "ana", k=3, as_of=SAID + timedelta(days=1))

    assert "Coimbra" in prompt and "Porto" not in prompt
    assert "Coimbra" in context and "Porto" not in context
    assert any(t.content == "Lena lives in Porto." for t in kept.turns)  # the day's file keeps what was said
    assert before.items[0].text == "Lena lives in Porto."
