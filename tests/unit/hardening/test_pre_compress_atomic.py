"""Defect 4 of issue 14: ``pre_compress`` is one transaction. A ``kill -9`` after it wrote the new turns (the
moment the old code had already committed the memory file) leaves nothing behind; a bad turn inside the context
(too long, a lone surrogate) raises a typed error and writes nothing."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from memory_ext import MemoryEngine
from memory_ext.errors import InvalidTurnError, ValidationError
from tests.fault.faultkit import invariant_violations, row_counts, scan_bytes

# The child stores one turn, then pre-compresses a transcript. Its turns are written inside pre_compress's
# transaction (vectors are queued, not made there); the file's hook is then summarised by an LLM, still inside
# that transaction: the LLM tells the parent when it is asked about the transcript and waits to be killed.
CHILD = r"""
import os, sys, time
from memory_ext import MemoryEngine

class Signalling:
    id = "signalling"

    def complete(self, prompt, *, system=None, json_schema=None, timeout=None):
        if "okapi-marker" in prompt:
            os.write(int(sys.argv[2]), b"summarising\n")
            time.sleep(600)
        return "{}"

engine = MemoryEngine.open(sys.argv[1], embedder="hashing", llm=Signalling(),
                           config={"lifecycle": {"llm_summaries": True, "llm_timeout_s": 300}})
engine.add_turns([{"role": "user", "content": "I booked the train to Lyon"}], "ana")
os.write(int(sys.argv[2]), b"ready\n")
engine.pre_compress("ana", "User: small talk about the okapi-marker zoo\nAssistant: the okapi-marker is shy")
os.write(int(sys.argv[2]), b"finished\n")
"""


@pytest.mark.timeout(120)
def test_kill_inside_pre_compress_leaves_nothing_half_written(tmp_path: Path) -> None:
    read, write = os.pipe()
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(tmp_path), str(write)], pass_fds=(write,),
                             env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    os.close(write)
    lines = []
    with os.fdopen(read) as pipe:
        for line in pipe:
            lines.append(line.strip())
            if line.strip() in ("summarising", "finished"):
                break
        assert lines[-1] == "summarising", lines  # the kill lands inside pre_compress, mid-transaction
        child.send_signal(signal.SIGKILL)
        child.wait()
    assert row_counts(tmp_path / "memory.sqlite3")["files"] == 1  # only the daily file of the first turn
    with MemoryEngine.open(tmp_path, embedder="hashing") as engine:
        assert [h.period for h in engine.hooks("ana")] == ["daily"]
        assert "okapi" not in engine.render_prompt("ana")
        assert len(engine.get_turns("ana")) == 1
    assert invariant_violations(tmp_path / "memory.sqlite3") == []
    assert scan_bytes(tmp_path, [b"okapi-marker"]) == {}


@pytest.mark.parametrize(("context", "error", "field"), [
    ([{"role": "user", "content": "hello"}, {"role": "assistant", "content": "x" * 200_001}], InvalidTurnError,
     "content"),
    ('[{"role": "user", "content": "hi"}, {"role": "assistant", "content": "bad \\ud800 text"}]', InvalidTurnError,
     "content"),
    ("User: hi \ud800 there\nAssistant: ok", ValidationError, "full_context"),
    ("User: hi\x00 there\nAssistant: ok", ValidationError, "full_context"),
])
def test_a_bad_turn_in_the_context_writes_nothing(tmp_path: Path, context: object, error: type, field: str) -> None:
    with MemoryEngine.open(tmp_path, embedder="hashing") as engine:
        engine.add_turns([{"role": "user", "content": "I booked the train to Lyon"}], "ana", wait=True)
        before = row_counts(tmp_path / "memory.sqlite3")  # after the background indexer wrote the vectors
        with pytest.raises(error) as info:
            engine.pre_compress("ana", context)  # type: ignore[arg-type]
        assert field in info.value.field
        assert row_counts(tmp_path / "memory.sqlite3") == before
        assert [h.period for h in engine.hooks("ana")] == ["daily"]


def test_pre_compress_still_links_known_turns_and_adds_new_ones(tmp_path: Path) -> None:
    with MemoryEngine.open(tmp_path, embedder="hashing") as engine:
        engine.add_turns([{"role": "user", "content": "I booked the train to Lyon"}], "ana")
        hook = engine.pre_compress("ana", "User: I booked the train to Lyon\nAssistant: Seat 42, coach 7")
        turns = engine.retrieve(hook, "ana").turns
        assert [t.content for t in turns] == ["I booked the train to Lyon", "Seat 42, coach 7"]
        assert len(engine.get_turns("ana")) == 2
        assert engine.search("which seat?", "ana", k=1).items[0].text == "Seat 42, coach 7"
