"""Shared fixtures: engines on temporary stores with the deterministic hashing embedder."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from memory_ext import MemoryEngine, Turn

SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"

CONVERSATIONS: dict[str, list[tuple[str, str, str]]] = {
    "ana": [
        ("user", "Ana", "I adopted a beagle puppy called Toby last weekend."),
        ("assistant", "Assistant", "Congratulations! Beagles are energetic, Toby will need long walks."),
        ("user", "Ana", "My sister Lena is moving to Porto in June for her new job at a bakery."),
        ("assistant", "Assistant", "Porto is lovely in summer. Is she excited about the bakery?"),
        ("user", "Ana", "I started learning the cello again, practising every evening after work."),
        ("user", "Ana", "我下周要去杭州出差，想去西湖边走走。"),
        ("assistant", "Assistant", "杭州西湖很美，建议早上去，人比较少。"),
    ],
    "ben": [
        ("user", "Ben", "I'm training for the Berlin marathon in September."),
        ("assistant", "Assistant", "Great goal. How many kilometres are you running each week?"),
        ("user", "Ben", "About 60 kilometres a week, with a long run of 25 on Sundays."),
        ("user", "Ben", "My cat Miso knocked my coffee onto the laptop this morning."),
        ("user", "Ben", "我最喜欢的菜是麻婆豆腐，但是我不能吃太辣的。"),
    ],
    "chen": [
        ("user", "Chen", "I'm allergic to peanuts, please remember that for recipes."),
        ("user", "Chen", "We bought a small flat in Lisbon near the river last spring."),
        ("user", "Chen", "我女儿今年九月开始上小学了。"),
    ],
}


def make_turns(user: str, start: datetime | None = None) -> list[Turn]:
    start = start or datetime(2026, 3, 1, 9, 0)
    return [Turn(role=r, speaker=s, content=c, timestamp=start + timedelta(minutes=i), session_id=f"{user}-s1",
                 external_id=f"{user}:{i}") for i, (r, s, c) in enumerate(CONVERSATIONS[user])]


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[MemoryEngine]:
    eng = MemoryEngine.open(tmp_path / "store", embedder="hashing")
    try:
        yield eng
    finally:
        eng.close()


@pytest.fixture
def filled(engine: MemoryEngine) -> MemoryEngine:
    for user in CONVERSATIONS:
        engine.add_turns(make_turns(user), user)
    return engine
