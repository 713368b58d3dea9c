"""Concurrency (issue 14, fault suite): one writer process per store, read-only readers that only ever see
committed states, and eight threads of one process mixing every operation."""

from __future__ import annotations

import os
import random
import subprocess
import sys
import threading
from collections import Counter
from pathlib import Path

import pytest

from memory_ext import MemoryEngine, Namespace
from memory_ext.errors import StoreLockedError
from tests.fault.faultkit import invariant_violations

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), *sys.path])}
BATCH = 5

SECOND_WRITER = r"""
import sys
from memory_ext import MemoryEngine
from memory_ext.errors import StoreLockedError
try:
    MemoryEngine.open(sys.argv[1], embedder="hashing")
except StoreLockedError as exc:
    print("StoreLockedError", exc)
else:
    print("opened")
"""

WRITER = r"""
import sys
from memory_ext import MemoryEngine, Namespace
engine = MemoryEngine.open(sys.argv[1], embedder="hashing")
print("ready", flush=True)
for i in range(int(sys.argv[2])):
    engine.add_turns([{"role": "user", "content": f"batch {i} line {j} about the harbour"} for j in range(5)],
                     Namespace("ana", session_id=f"b{i}"))
    if i % 3 == 2:
        engine.forget(Namespace("ana", session_id=f"b{i - 2}"))
print("done", flush=True)
engine.close()
"""


def _sessions(reader: MemoryEngine) -> Counter[str | None]:
    """Turns per batch session as one read sees them; a batch is visible whole or not at all."""
    sizes = Counter(t.session_id for t in reader.get_turns("ana") if t.session_id != "seed")
    assert set(sizes.values()) <= {BATCH}, f"a half-written batch was visible: {sizes}"
    return sizes


def test_a_second_writer_process_gets_store_locked_error(tmp_path: Path) -> None:
    with MemoryEngine.open(tmp_path, embedder="hashing") as engine:
        engine.add_turns([{"role": "user", "content": "hello"}], "ana")
        out = subprocess.run([sys.executable, "-c", SECOND_WRITER, str(tmp_path)], env=ENV, capture_output=True,
                             text=True, timeout=120).stdout
        assert out.startswith("StoreLockedError") and f"pid {os.getpid()}" in out
        with pytest.raises(StoreLockedError):
            MemoryEngine.open(tmp_path, embedder="hashing")  # a second engine in the same process too
    out = subprocess.run([sys.executable, "-c", SECOND_WRITER, str(tmp_path)], env=ENV, capture_output=True,
                         text=True, timeout=120).stdout
    assert out.strip() == "opened"  # the lock went with the first writer


@pytest.mark.fault
@pytest.mark.timeout(600)
def test_a_read_only_reader_sees_only_committed_states(tmp_path: Path) -> None:
    with MemoryEngine.open(tmp_path, embedder="hashing") as engine:
        engine.add_turns([{"role": "user", "content": "seed"}], Namespace("ana", session_id="seed"))
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path), "60"], env=ENV, stdout=subprocess.PIPE,
                              text=True)
    assert writer.stdout is not None and writer.stdout.readline().strip() == "ready"
    observed = 0
    with MemoryEngine.open(tmp_path, embedder="hashing", read_only=True) as reader:
        while writer.poll() is None or observed < 20:
            before = _sessions(reader)
            items = reader.search("the harbour", "ana", k=10).items
            after = _sessions(reader)
            for item in items:  # each search saw one committed state, somewhere between the two listings
                assert item.session_id in {*before, *after, "seed"}, item
            observed += 1
            if observed > 2000:
                break
    assert writer.wait(timeout=300) == 0
    assert observed >= 20
    print(f"concurrency: {observed} read-only passes while the writer ingested and forgot")


@pytest.mark.fault
@pytest.mark.timeout(600)
def test_eight_threads_mixing_every_operation(tmp_path: Path) -> None:
    errors: list[BaseException] = []
    counts: Counter[str] = Counter()
    lock = threading.Lock()
    with MemoryEngine.open(tmp_path, embedder="hashing") as engine:
        def work(n: int) -> None:
            rng = random.Random(n)
            me = Namespace(f"user{n % 4}")
            try:
                for step in range(30):
                    op = rng.choice(["add", "add", "search", "forget", "compact", "prompt", "pre_compress"])
                    session = f"s{rng.randrange(3)}"
                    if op == "add":
                        engine.add_turns([{"role": "user", "content": f"thread {n} step {step} at the harbour"}],
                                         Namespace(me.user_id, session_id=session))
                    elif op == "search":
                        for item in engine.search("harbour", me, k=5).items:
                            assert f"thread {n % 4}" in item.text or f"thread {n % 4 + 4}" in item.text
                    elif op == "forget":
                        engine.forget(Namespace(me.user_id, session_id=session))
                    elif op == "compact":
                        engine.maybe_compact(me)
                    elif op == "prompt":
                        engine.render_prompt(me)
                    else:
                        engine.pre_compress(Namespace(me.user_id, session_id=session),
                                            f"User: thread {n} context {step}\nAssistant: thread {n} noted")
                    with lock:
                        counts[op] += 1
            except BaseException as exc:  # noqa: BLE001 - reported by the main thread
                errors.append(exc)

        threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=500)
        assert not errors, errors[:3]
        assert sum(counts.values()) == 8 * 30
    assert invariant_violations(tmp_path / "memory.sqlite3") == []
