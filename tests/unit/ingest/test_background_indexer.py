"""The background indexer: durable queue, crash resume, close, flush, pending, forget, read-only openers."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Sequence
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np
import pytest

from memory_ext import HashingEmbedder, MemoryEngine, Turn
from memory_ext.errors import EmbedderError

T0 = datetime(2026, 3, 2, 9, 0)
CHAT = [
    ("user", "Ana", "I adopted a beagle puppy called Toby last weekend."),
    ("assistant", "Assistant", "Congratulations! Beagles need long walks."),
    ("user", "Ana", "My sister Lena is moving to Porto in June for a job at a bakery."),
    ("assistant", "Assistant", "Porto is lovely in summer."),
    ("user", "Ana", "I went to a climbing gym yesterday and it was so much fun."),
    ("user", "Ana", "I started learning the cello again, practising every evening."),
]


def turns(start: int = 0, n: int = len(CHAT)) -> list[Turn]:
    return [Turn(role=r, speaker=s, content=c, session_id="s1", timestamp=T0 + timedelta(minutes=start + i),
                 external_id=f"t{start + i}") for i, (r, s, c) in enumerate(CHAT[:n])]


class GatedEmbedder(HashingEmbedder):
    """The hashing embedder whose calls after the first (the engine's foreground check) wait for ``gate``."""

    def __init__(self, dim: int = 64, fail: bool = False) -> None:
        super().__init__(dim)
        self.gate = threading.Event()
        self.calls = 0
        self.fail = fail

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        self.calls += 1
        if self.calls > 1:
            if self.fail:
                raise EmbedderError(self.id, "the model server is down")
            self.gate.wait(60)
        return super().embed_documents(texts)


def db(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(f"{(path / 'memory.sqlite3').as_uri()}?mode=ro", uri=True)


def vector_rows(path: Path) -> tuple[list[int], list[int], int]:
    """(record rids, embedded rids, queued rows) as the files say."""
    conn = db(path)
    try:
        records = [r[0] for r in conn.execute("SELECT rid FROM records ORDER BY rid")]
        embedded = [r[0] for r in conn.execute("SELECT rid FROM embeddings ORDER BY rid")]
        queued = conn.execute("SELECT COUNT(*) FROM index_queue").fetchone()[0]
    finally:
        conn.close()
    return records, embedded, queued


CRASH_SCRIPT = textwrap.dedent("""
    import sys, threading, time
    from datetime import datetime, timedelta
    from memory_ext import HashingEmbedder, MemoryEngine, Turn

    class Stuck(HashingEmbedder):
        calls = 0
        def embed_documents(self, texts):
            Stuck.calls += 1
            if Stuck.calls > int(sys.argv[2]):  # the foreground check, then this many indexer calls
                sys.stdout.write("indexing\\n")
                sys.stdout.flush()
                time.sleep(600)
            return super().embed_documents(texts)

    t0 = datetime(2026, 3, 2, 9, 0)
    eng = MemoryEngine.open(sys.argv[1], embedder=Stuck(64), config={"ingest": {"indexer_batch": 3}})
    for b in range(3):
        eng.add_turns([Turn(role="user", speaker="Ana", session_id="s1", timestamp=t0 + timedelta(minutes=4 * b + i),
                            content=f"Message {b}-{i}: I went hiking near Sintra with my dog Toby number {b * 4 + i}.")
                       for i in range(4)], "ana")
    sys.stdout.write("committed\\n")
    sys.stdout.flush()
    time.sleep(600)
""")


@pytest.mark.parametrize("indexed_calls", [1, 3])
def test_queue_resumes_after_a_crash_with_exactly_one_vector_per_record(tmp_path: Path, indexed_calls: int) -> None:
    store = tmp_path / "s"
    proc = subprocess.Popen([sys.executable, "-c", CRASH_SCRIPT, str(store), str(indexed_calls)],
                            stdout=subprocess.PIPE, text=True, env=dict(os.environ))
    try:
        said = ""
        assert proc.stdout is not None
        while "committed" not in said or "indexing" not in said:  # all turns committed; the indexer is stuck
            line = proc.stdout.readline()
            assert line, "the writer died before committing"
            said += line
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    records, embedded, queued = vector_rows(store)
    assert len(records) > 12 and queued > 0 and len(embedded) < len(records)  # killed mid-way
    with MemoryEngine.open(store, embedder=HashingEmbedder(64)) as eng:  # the queue resumes on open
        assert eng.flush()
        assert eng.pending() == 0
        assert len(eng.get_turns("ana")) == 12
    records, embedded, queued = vector_rows(store)
    assert embedded == records and queued == 0  # exactly one vector per record: none lost, none doubled
    conn = db(store)
    try:  # and each is the vector of its own text (nothing written twice under another rid)
        emb = HashingEmbedder(64)
        for text, blob in conn.execute("SELECT r.index_text, e.vector FROM records r JOIN embeddings e USING(rid)"
                                       " WHERE r.kind = 'turn'"):
            assert np.allclose(np.frombuffer(blob, np.float32), emb.embed_documents([text])[0], atol=1e-6)
    finally:
        conn.close()


def test_close_waits_for_the_queue(tmp_path: Path) -> None:
    with MemoryEngine.open(tmp_path / "s", embedder=HashingEmbedder(64),
                           config={"ingest": {"indexer_batch": 2}}) as eng:
        for i in range(3):
            eng.add_turns(turns(2 * i, 2), "ana")
    records, embedded, queued = vector_rows(tmp_path / "s")
    assert embedded == records and queued == 0


def test_close_hands_the_queue_over_when_the_indexer_cannot_finish(tmp_path: Path) -> None:
    broken = GatedEmbedder(64, fail=True)
    eng = MemoryEngine.open(tmp_path / "s", embedder=broken)
    result = eng.add_turns(turns(), "ana", wait=True)  # the turns are committed: nothing raises
    assert result.pending > 0 and "server is down" in (result.indexing_error or "")
    assert eng.flush("ana") is False  # the embedder fails on everything: the work stays queued
    found = eng.search("beagle Toby", "ana", k=3)
    assert found.pending > 0 and found.degraded  # and the search says why it has no vectors
    assert any(e.channel == "vector" and "server is down" in e.message for e in found.channel_errors)
    assert eng.quarantined() == []  # an outage quarantines nothing
    eng.close()
    records, embedded, queued = vector_rows(tmp_path / "s")
    assert queued > 0 and len(embedded) < len(records)  # still queued, on disk
    with MemoryEngine.open(tmp_path / "s", embedder=HashingEmbedder(64)) as again:
        assert again.flush("ana")
    records, embedded, queued = vector_rows(tmp_path / "s")
    assert embedded == records and queued == 0


def test_flush_and_wait_semantics(tmp_path: Path) -> None:
    emb = GatedEmbedder(64)
    with MemoryEngine.open(tmp_path / "s", embedder=emb, config={"ingest": {"search_wait_s": 0}}) as eng:
        assert eng.flush("nobody") is True  # nothing to wait for
        eng.add_turns(turns(0, 3), "ana")
        assert eng.pending("ana") > 0
        assert eng.flush("ana", timeout=0.05) is False  # timed out: still pending
        emb.gate.set()
        assert eng.flush("ana") is True
        assert eng.pending("ana") == 0 and eng.pending() == 0
        eng.add_turns(turns(3, 3), "ana", wait=True)
        assert eng.pending("ana") == 0
        stats = eng.stats()
        assert stats.vectors == stats.records


def test_search_while_vectors_are_pending_finds_new_turns_and_says_so(tmp_path: Path) -> None:
    emb = GatedEmbedder(64)
    with MemoryEngine.open(tmp_path / "s", embedder=emb, config={"ingest": {"search_wait_s": 0}}) as eng:
        eng.add_turns(turns(), "ana")
        result = eng.search("Where is Lena moving?", "ana", k=3)
        assert result.pending > 0
        assert any("Porto" in item.text for item in result.items)  # found without vectors (keyword, graph...)
        emb.gate.set()
        eng.flush("ana")
        assert eng.search("Where is Lena moving?", "ana", k=3).pending == 0


def test_search_waits_for_pending_vectors_by_default(tmp_path: Path) -> None:
    emb = GatedEmbedder(64)
    with MemoryEngine.open(tmp_path / "s", embedder=emb) as eng:
        eng.add_turns(turns(), "ana")
        threading.Timer(0.2, emb.gate.set).start()
        result = eng.search("beagle puppy", "ana", k=3)  # waits (up to ingest.search_wait_s) for the vectors
        assert result.pending == 0
        assert "beagle" in result.items[0].text


def test_forget_of_queued_records_removes_them_from_the_queue(tmp_path: Path) -> None:
    emb = GatedEmbedder(64)
    with MemoryEngine.open(tmp_path / "s", embedder=emb, config={"ingest": {"search_wait_s": 0}}) as eng:
        eng.add_turns(turns(), "ana")
        eng.add_turns(turns(0, 2), "ben")
        hit = next(i for i in eng.search("sister Lena Porto bakery", "ana", k=5).items if "Porto" in i.text)
        before = eng.pending("ana")
        receipt = eng.forget("ana", record_ids=[hit.id])
        assert "queue" in receipt.stores
        assert eng.pending("ana") < before
        eng.forget("ben")
        assert eng.pending("ben") == 0
        emb.gate.set()
        assert eng.flush()
        conn = db(tmp_path / "s")
        try:
            orphans = conn.execute("SELECT COUNT(*) FROM embeddings e LEFT JOIN records r USING(rid)"
                                   " WHERE r.rid IS NULL").fetchone()[0]
        finally:
            conn.close()
        assert orphans == 0  # no vector written for a forgotten record
        assert all(hit.text != i.text for i in eng.search("sister Lena Porto bakery", "ana", k=10).items)
    records, embedded, queued = vector_rows(tmp_path / "s")
    assert embedded == records and queued == 0


def test_read_only_opener_sees_vectors_as_they_land(tmp_path: Path) -> None:
    emb = GatedEmbedder(64)
    with MemoryEngine.open(tmp_path / "s", embedder=emb, config={"ingest": {"search_wait_s": 0}}) as eng:
        eng.add_turns(turns(0, 1), "ana")
        emb.gate.set()
        eng.flush()
        emb.gate.clear()
        eng.add_turns(turns(1, 5), "ana")
        with MemoryEngine.open(tmp_path / "s", embedder=HashingEmbedder(64), read_only=True) as ro:
            first = ro.search("cello practising", "ana", k=3, trace=True)
            assert first.pending > 0
            emb.gate.set()
            assert eng.flush("ana")
            second = ro.search("cello practising", "ana", k=3, trace=True)
            assert second.pending == 0
            n_records = ro.stats().records
            assert second.trace is not None and second.trace["channels"]["vector"]["candidates"] == n_records
            assert first.trace is not None and first.trace["channels"]["vector"]["candidates"] < n_records


def test_synchronous_mode_indexes_before_add_returns(tmp_path: Path) -> None:
    with MemoryEngine.open(tmp_path / "s", embedder=HashingEmbedder(64),
                           config={"ingest": {"background_indexing": False}}) as eng:
        eng.add_turns(turns(), "ana")
        assert eng.pending() == 0
        assert eng.stats().vectors == eng.stats().records


def test_async_twins(tmp_path: Path) -> None:
    import asyncio

    async def run() -> int:
        async with MemoryEngine.open(tmp_path / "s", embedder=HashingEmbedder(64)) as eng:
            await eng.aadd_turns(turns(), "ana", wait=True)
            assert await eng.aflush("ana")
            return eng.pending()

    assert asyncio.run(run()) == 0


class ThreadRecordingEmbedder(HashingEmbedder):
    """The hashing embedder, noting the thread each batch was embedded on."""

    def __init__(self, dim: int = 64) -> None:
        super().__init__(dim)
        self.threads: list[str] = []

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        self.threads.append(threading.current_thread().name)
        return super().embed_documents(texts)


def test_work_a_caller_waits_for_runs_on_normal_priority_threads(tmp_path: Path) -> None:
    emb = ThreadRecordingEmbedder(64)
    with MemoryEngine.open(tmp_path / "s", embedder=emb, config={"ingest": {"indexer_batch": 2}}) as eng:
        eng.add_turns(turns(), "ana", wait=True)
        background = [n for n in emb.threads if n.startswith("memory-ext-embed")]
        assert background and all(n.startswith("memory-ext-embed-waited") for n in background)
        emb.threads.clear()
        eng.add_turns(turns(10, 4), "ana")  # nobody waits: the background threads (lower priority) embed it
        while eng.pending("ana"):  # not flush(): that would make it waited-for work (a hang: pytest-timeout)
            time.sleep(0.01)
        assert emb.threads and not any(n.startswith("memory-ext-embed-waited") for n in emb.threads)
