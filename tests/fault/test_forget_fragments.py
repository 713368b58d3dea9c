"""Forgetting one memory at a time leaves no fragment (issue 22 §4): a store written 1-3 turns per call (with
external ids), then memories removed one by one — by ``delete`` of an external id and by ``forget`` of a search
hit's record id — and every byte of every file of the store scanned for every forgotten turn's marker.

Why this pattern: SQLite's ``secure_delete`` zeroes a deleted cell, but a cell that a b-tree balance copied to
another page leaves its old copy in the unallocated space of a live page; deleting the row later zeroes only
the live copy. Single-turn forgets on a store grown by many small writes find those copies.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from memory_ext import MemoryEngine
from tests.fault.faultkit import scan_bytes

_WORDS = ("harbour lantern violin quarterly orchard bicycle granite meadow teapot saddle compass ribbon glacier"
          " pepper monsoon carpet walnut ladder thimble parcel beacon orchid pebble fountain marble canyon").split()
_VERBS = ("visited repaired painted ordered borrowed cleaned found sold planted wrapped measured counted"
          " photographed described").split()
_NAMES = "Maria Jonas Aiko Tomás Priya Olu Hanna Idris".split()


def marker(i: int) -> str:
    """A unique marker per turn, name-like (the entity, graph and evidence indexes take it up too), of fixed
    length (no marker is a substring of another)."""
    letters = "".join(chr(ord("a") + (i // 26 ** k) % 26) for k in range(4))
    return f"Kor{letters}ix"


def variants(i: int) -> list[bytes]:
    """The bytes a marker may be stored as: as written and lowercased (entity keys), UTF-8 and UTF-16."""
    return [v.encode(enc) for v in (marker(i), marker(i).lower()) for enc in ("utf-8", "utf-16-le")]


def turn_text(rng: random.Random, i: int) -> str:
    words = rng.sample(_WORDS, 6)
    return (f"On day {i % 97} {rng.choice(_NAMES)} {rng.choice(_VERBS)} the {words[0]} near the {words[1]}; the "
            f"code word is {marker(i)} and the {words[2]} was {rng.choice(_VERBS)} with a {words[3]} and a "
            f"{words[4]} by the {words[5]}.")


def write_store(engine: MemoryEngine, n_turns: int, seed: int = 7) -> list[str]:
    """Write ``n_turns`` turns, 1-3 per ``add_turns`` call, each with external id ``ext-<i>``; returns the texts."""
    rng = random.Random(seed)
    texts = [turn_text(rng, i) for i in range(n_turns)]
    i = 0
    while i < n_turns:
        size = min(rng.randint(1, 3), n_turns - i)
        engine.add_turns([{"role": "user" if (i + j) % 2 == 0 else "assistant", "content": texts[i + j],
                           "speaker": "Ana" if (i + j) % 2 == 0 else "Bot", "external_id": f"ext-{i + j}",
                           "timestamp": f"2026-03-{1 + (i + j) // 200:02d}T{(i + j) % 24:02d}:00Z"}
                          for j in range(size)], "ana")
        i += size
    engine.flush()
    return texts


def forget_one_by_one(engine: MemoryEngine, victims: list[int]) -> tuple[set[int], list[str]]:
    """Remove each victim turn: even positions by ``delete`` of its external id, odd ones by ``forget`` of the
    record id of a search hit holding its marker. Returns the indices of every turn forgotten (a hit may be a
    window: its neighbours go too) and the receipts that did not report a complete purge."""
    by_turn_id: dict[str, int] = {}
    for t in engine.get_turns("ana"):
        by_turn_id[t.id] = int(t.external_id.split("-")[1])  # type: ignore[union-attr]
    gone: set[int] = set()
    incomplete: list[str] = []
    for n, i in enumerate(victims):
        if i in gone:
            continue
        if n % 2 == 0:
            receipt = engine.delete("ana", [f"ext-{i}"])
        else:
            hits = [h for h in engine.search(f"code word {marker(i)}", "ana", k=10).items if marker(i) in h.text]
            assert hits, f"no search hit holds {marker(i)}"
            hit = min(hits, key=lambda h: len(h.turn_ids))  # the turn record itself when it is found
            receipt = engine.forget("ana", record_ids=[hit.id])
        gone.update(by_turn_id[t] for t in receipt.turn_ids)
        assert i in gone
        if not receipt.purge_complete:
            incomplete.append(f"{i}: {receipt.pending_purge}")
    return gone, incomplete


def leftovers(directory: Path, indices: set[int]) -> dict[str, list[str]]:
    """``{file: [markers found]}`` of the forgotten markers anywhere under ``directory``."""
    found: dict[str, list[str]] = {}
    for path in sorted(directory.rglob("*")):
        if path.is_file():
            data = path.read_bytes()
            hits = [marker(i) for i in sorted(indices) if any(v in data for v in variants(i))]
            if hits:
                found[str(path.relative_to(directory))] = hits
    return found


def _run(tmp_path: Path, n_turns: int, n_forget: int) -> None:
    store = tmp_path / "store"
    engine = MemoryEngine.open(store, embedder="hashing")
    try:
        write_store(engine, n_turns)
        victims = random.Random(11).sample(range(n_turns), n_forget)
        gone, incomplete = forget_one_by_one(engine, victims)
        assert incomplete == []  # no reader held a snapshot: every purge completed
        assert leftovers(store, gone) == {}
        kept = sorted(set(range(n_turns)) - gone)
        assert scan_bytes(store, [marker(kept[0]).encode()])  # the scan does see what is kept
    finally:
        engine.close()
    assert leftovers(store, gone) == {}


def test_single_turn_forgets_leave_no_fragment(tmp_path: Path) -> None:
    _run(tmp_path, 600, 100)


@pytest.mark.fault
@pytest.mark.timeout(1800)
def test_500_single_turn_forgets_of_a_3000_turn_store_leave_no_fragment(tmp_path: Path) -> None:
    _run(tmp_path, 3000, 500)
