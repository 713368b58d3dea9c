"""Defect 1 of issue 14: ``forget`` while another process holds a read snapshot returns at once, does not block
the writers behind it, says the on-disk purge is pending, and the purge completes on a later write, at close or by
``engine.purge()`` — checked by scanning every byte of every file of the store."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from memory_ext import MemoryEngine, Namespace, Turn
from tests.fault.faultkit import SnapshotReader, scan_bytes

SECRET = "quokkazanzibar"


def _turns(text: str, n: int = 20) -> list[Turn]:
    return [Turn(role="user", content=f"{text} number {i} is {SECRET}" if SECRET in text else f"{text} {i}",
                 speaker="Ana") for i in range(n)]


def _filled(path: Path) -> MemoryEngine:
    engine = MemoryEngine.open(path, embedder="hashing")
    engine.add_turns(_turns(f"my password hint is {SECRET}"), "ana")
    engine.add_turns(_turns("Bob likes sailing on the lake"), "bob")
    engine.flush()  # the background indexer is idle: no reader of this process holds the log
    return engine


@pytest.mark.timeout(90)
def test_forget_returns_while_another_process_holds_a_snapshot(tmp_path: Path) -> None:
    engine = _filled(tmp_path)
    try:
        with SnapshotReader(tmp_path / "memory.sqlite3") as reader:
            receipt = engine.forget(Namespace("ana"))
            assert reader.holding  # forget finished before the reader was released
            assert receipt.turns == 20
            assert receipt.purge_complete is False
            assert receipt.pending_purge == ("memory.sqlite3-wal",)
            # other writers are not blocked meanwhile: a write from another thread finishes while the reader holds
            done = threading.Event()
            threading.Thread(target=lambda: (engine.add_turns(_turns("Bob sails again"), "bob"), done.set()),
                             daemon=True).start()
            assert done.wait(60) and reader.holding
            assert engine.search(SECRET, "ana").items == ()
            assert scan_bytes(tmp_path, [SECRET.encode()])  # still in the log: the reader pins it
            reader.release()
        engine.add_turns(_turns("Bob bought a new boat", 1), "bob")  # the next write retries the purge
        assert scan_bytes(tmp_path, [SECRET.encode()]) == {}
        assert engine.purge() == ()
    finally:
        engine.close()


@pytest.mark.timeout(90)
def test_pending_purge_completes_at_close_and_by_purge(tmp_path: Path) -> None:
    engine = _filled(tmp_path)
    with SnapshotReader(tmp_path / "memory.sqlite3") as reader:
        receipt = engine.forget(Namespace("ana"))
        assert not receipt.purge_complete
        assert engine.purge() == ("memory.sqlite3-wal",)  # still pinned: not waited for
        reader.release()
    engine.close()  # no write after the reader left: close finishes the purge
    assert scan_bytes(tmp_path, [SECRET.encode()]) == {}

    other = tmp_path / "b"
    engine = _filled(other)
    try:
        with SnapshotReader(other / "memory.sqlite3") as reader:
            assert not engine.forget(Namespace("ana")).purge_complete
            reader.release()
        assert engine.purge() == ()
        assert scan_bytes(other, [SECRET.encode()]) == {}
    finally:
        engine.close()


def test_forget_without_readers_is_complete_at_once(tmp_path: Path) -> None:
    with _filled(tmp_path) as engine:
        receipt = engine.forget(Namespace("ana"))
        assert receipt.purge_complete and receipt.pending_purge == ()
        assert scan_bytes(tmp_path, [SECRET.encode()]) == {}
