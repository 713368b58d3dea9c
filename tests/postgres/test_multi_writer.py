"""Several engine processes write one PostgreSQL memory at once: nothing lost, nothing doubled, all indexed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

from memory_ext import MemoryEngine

pytestmark = pytest.mark.postgres

CHILD = Path(__file__).with_name("writer_child.py")


def _run_writers(dsn: str, schema: str, plan: list[tuple[str, str]], n: int) -> None:
    procs = [subprocess.Popen([sys.executable, str(CHILD), dsn, schema, name, users, str(n)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for name, users in plan]
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0 and out.strip() == "ok", err[-3000:]


def test_four_writer_processes_share_one_memory(postgres_dsn: str, pg_schema: str) -> None:
    config = {"storage": {"backend": "postgres", "postgres_schema": pg_schema}}
    n = 15
    # two processes share the namespace "depot", the others have their own too
    plan = [("w0", "depot,ana"), ("w1", "depot,ben"), ("w2", "chen"), ("w3", "dina,depot")]
    with MemoryEngine.open(postgres_dsn, config=config, embedder="hashing") as watcher:
        watcher.add_turns([{"role": "user", "content": "the depot opens at eight"}], "depot")
        watcher.flush()
        assert len(watcher.search("parcel depot", "depot", k=50).items) == 1  # its snapshots are loaded now
        _run_writers(postgres_dsn, pg_schema, plan, n)
        # this process's in-memory snapshots follow the other processes' writes (counter sync)
        seen = watcher.search("parcel depot", "depot", k=100)
        assert len({i.id for i in seen.items if i.kind == "turn"}) == 1 + 3 * n // 2 + 1  # w0 8 + w1 8 + w3 7
    with MemoryEngine.open(postgres_dsn, config=config, embedder="hashing") as engine:
        expected: dict[str, set[str]] = {}
        for name, users in plan:
            us = users.split(",")
            for i in range(n):
                expected.setdefault(us[i % len(us)], set()).add(f"{name}-{i}")
        for user, ext_ids in expected.items():
            turns = engine.get_turns(user)
            stored = [t.external_id for t in turns if t.external_id is not None]  # (the watcher's turn has none)
            assert sorted(stored) == sorted(ext_ids)  # none lost, none doubled
            assert [t.id for t in turns] == [t.id for t in engine.get_turns(user)]
            assert engine.pending(user) == 0
            hit = engine.search("parcel arrived at depot", user, k=3)
            assert hit.items and hit.pending == 0
    with psycopg.connect(postgres_dsn) as conn:
        conn.execute(f"SET search_path TO {pg_schema}")
        # every turn record has exactly one vector, and sequence numbers are unique per namespace
        missing = conn.execute("SELECT count(*) FROM records r LEFT JOIN embeddings e ON e.rid = r.rid"
                               " WHERE e.rid IS NULL").fetchone()[0]
        assert missing == 0
        dup = conn.execute("SELECT count(*) FROM (SELECT ns_id, seq FROM turns GROUP BY ns_id, seq"
                           " HAVING count(*) > 1) d").fetchone()[0]
        assert dup == 0
        dim = conn.execute("SELECT value FROM meta WHERE key='embedder_dim'").fetchone()[0]
        n_vec = conn.execute(f"SELECT count(*) FROM pgvector_d{int(dim)}").fetchone()[0]
        n_emb = conn.execute("SELECT count(*) FROM embeddings").fetchone()[0]
        counted = conn.execute(f"SELECT COALESCE(SUM(n), 0) FROM pgvector_d{int(dim)}_counts").fetchone()[0]
        assert n_vec == n_emb == counted
