"""Concurrency on PostgreSQL (issue 17, fault suite): several writer *processes* on one memory, each mixing every
operation on namespaces the others write too; afterwards the store keeps every invariant and each process saw
only its own users' memories."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from memory_ext import MemoryEngine
from tests.fault.faultkit import pg_invariant_violations

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), *sys.path])}

MIXER = r"""
import random, sys
from memory_ext import MemoryEngine, Namespace
from memory_ext.errors import InvalidQueryError
dsn, schema, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
config = {"storage": {"backend": "postgres", "postgres_schema": schema}}
rng = random.Random(n)
done = 0
with MemoryEngine.open(dsn, config=config, embedder="hashing") as engine:
    for step in range(int(sys.argv[4])):
        user = f"user{rng.randrange(3)}"  # every process writes the same three users
        session = f"s{rng.randrange(3)}"
        op = rng.choice(["add", "add", "add", "search", "forget", "compact", "prompt", "pre_compress", "update"])
        if op == "add":
            engine.add_turns([{"role": "user", "content": f"{user} process {n} step {step} at the harbour",
                               "external_id": f"p{n}-{step}"}], Namespace(user, session_id=session))
        elif op == "search":
            for item in engine.search("harbour", user, k=5).items:
                assert item.text.startswith(f"{user} ") or "context" in item.text, (user, item.text)
        elif op == "forget":
            engine.forget(Namespace(user, session_id=session))
        elif op == "compact":
            engine.maybe_compact(Namespace(user))
        elif op == "prompt":
            engine.render_prompt(Namespace(user))
        elif op == "update":
            turns = engine.get_turns(user, limit=3)
            if turns:
                try:
                    engine.update(Namespace(user), turns[0].id,
                                  content=f"{user} process {n} corrected step {step} at the harbour")
                except InvalidQueryError:
                    pass  # another process forgot that turn since get_turns: a typed error is the right answer
        else:
            engine.pre_compress(Namespace(user, session_id=session),
                                f"User: {user} context {step}\nAssistant: {user} noted")
        done += 1
    assert engine.flush()
print("ok", done, flush=True)
"""


@pytest.mark.fault
@pytest.mark.postgres
def test_four_processes_mixing_every_operation_on_postgres(postgres_dsn: str, pg_schema: str) -> None:
    config = {"storage": {"backend": "postgres", "postgres_schema": pg_schema}}
    MemoryEngine.open(postgres_dsn, config=config, embedder="hashing").close()
    steps = 40
    procs = [subprocess.Popen([sys.executable, "-c", MIXER, postgres_dsn, pg_schema, str(n), str(steps)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV) for n in range(4)]
    for p in procs:
        out, err = p.communicate(timeout=600)
        assert p.returncode == 0 and out.split()[:2] == ["ok", str(steps)], err[-3000:]
    assert pg_invariant_violations(postgres_dsn, pg_schema) == []
    with MemoryEngine.open(postgres_dsn, config=config, embedder="hashing") as engine:
        for user in ("user0", "user1", "user2"):
            assert engine.pending(user) == 0
            for turn in engine.get_turns(user):
                assert turn.content.startswith(f"{user} ") or "context" in turn.content or "noted" in turn.content
