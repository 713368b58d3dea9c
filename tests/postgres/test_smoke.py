"""The PostgreSQL backend end to end on the session's server: write, search, forget."""

from __future__ import annotations

import pytest

from memory_ext import Turn

pytestmark = pytest.mark.postgres


def test_write_search_forget_on_both_backends(store_target) -> None:
    with store_target.open() as engine:
        engine.add_turns([Turn(role="user", speaker="Ana", content="I adopted a beagle called Toby last week"),
                          Turn(role="user", speaker="Ana", content="My sister Lena moves to Porto in June")], "ana")
        engine.add_turns([Turn(role="user", speaker="Ben", content="I train for the Berlin marathon")], "ben")
        engine.flush()
        hits = engine.search("beagle Toby", "ana", k=2)
        assert hits.items and "beagle" in hits.items[0].text
        assert all("Berlin" not in item.text for item in engine.search("Berlin marathon", "ana", k=5).items)
        receipt = engine.forget("ana")
        assert receipt.turns == 2
        assert not engine.search("beagle Toby", "ana", k=2).items
        assert engine.search("Berlin marathon", "ben", k=1).items
