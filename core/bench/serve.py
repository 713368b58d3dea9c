"""``memext bench serve``: what the server costs over the embedded engine, and how it holds under concurrency.

On one synthetic store (:class:`~memory_ext.bench.scale.SyntheticCorpus`, ``--turns`` turns over
``--namespaces`` users), in one run:

1. **embedded vs REST** — the store is closed, ``memext serve`` starts on it as a subprocess on a free loopback
   port, and this process opens the same store read-only. ``--queries`` searches (k=10, after warm-up) run on both
   paths, alternating query by query: ``MemoryEngine.search`` here, and
   :class:`memory_ext.client.RemoteEngine` (HTTP/1.1 keep-alive) to the server. p50 / p95 of each, and the
   difference of the p50s; and, per REST request, its wall time minus the search time the server's engine
   reported (``SearchResult.timings_ms["total"]``): the cost of HTTP, JSON and the worker thread alone;
2. **concurrent** — ``--clients`` client threads (each its own ``RemoteEngine``) each run ``--ops`` operations,
   one write (``add_turns`` of one turn) for every ``--write-every`` operations and searches otherwise:
   p50 / p95 per kind, errors, throughput, and whether every acknowledged write is in the store afterwards.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from ..store.chroma_server import free_port
from .metrics import percentile
from .runner import machine_info

__all__ = ["format_serve_markdown", "run_serve", "wait_ready"]

TOKEN_ENV = "MEMORY_EXT_TOKENS"


def _stats(values: Sequence[float]) -> dict[str, float]:
    return {"p50_ms": round(percentile(values, 50), 2), "p95_ms": round(percentile(values, 95), 2),
            "n": len(values)}


def _paired_searches(local: Any, remote: Any, queries: Sequence[tuple[str, str]],
                     warmup: int) -> tuple[list[float], list[float], list[float]]:
    """Embedded and REST latencies (ms), alternating query by query, and the REST wall time minus the search time
    the server's engine measured for the same request (the cost of HTTP, JSON and the worker thread)."""
    for user, query in queries[:warmup]:
        local.search(query, user, k=10)
        remote.search(query, user, k=10)
    embedded: list[float] = []
    rest: list[float] = []
    overhead: list[float] = []
    for i, (user, query) in enumerate(queries):
        for which in ((0, 1) if i % 2 == 0 else (1, 0)):
            t0 = time.perf_counter()
            result = (local if which == 0 else remote).search(query, user, k=10)
            elapsed = (time.perf_counter() - t0) * 1000
            if which == 0:
                embedded.append(elapsed)
            else:
                rest.append(elapsed)
                overhead.append(elapsed - float(result.timings_ms.get("total", 0.0)))
    return embedded, rest, overhead


def _start_server(path: Path, embedder: str, token: str, port: int) -> subprocess.Popen[bytes]:
    env = {**os.environ, TOKEN_ENV: token}
    command = [sys.executable, "-m", "memory_ext.cli", "serve", "--path", str(path), "--embedder", embedder,
               "--port", str(port), "--log-level", "warning"]
    return subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def wait_ready(url: str, proc: subprocess.Popen[Any], timeout: float = 120) -> None:
    """Wait until the ``memext serve`` subprocess ``proc`` answers ``/readyz`` (RuntimeError if it exits or
    ``timeout`` seconds pass first)."""
    import httpx

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            err = proc.stderr.read() if proc.stderr else ""
            text = err.decode("utf-8", "replace") if isinstance(err, bytes) else err
            raise RuntimeError(f"memext serve exited with {proc.returncode}: {text.strip()}")
        try:
            if httpx.get(url + "/readyz", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    raise RuntimeError("memext serve did not become ready")


def run_serve(*, turns: int = 2000, namespaces: int = 8, queries: int = 200, clients: int = 8, ops: int = 50,
              write_every: int = 4, embedder: str = "hashing", seed: int = 7, workdir: Path | None = None,
              command: str = "") -> dict[str, Any]:
    """Run the three measurements; returns a JSON-friendly result (see the module docstring)."""
    from ..client import RemoteEngine
    from ..engine import MemoryEngine
    from .scale import SyntheticCorpus

    corpus = SyntheticCorpus(seed=seed, namespaces=namespaces)
    root = Path(tempfile.mkdtemp(prefix="memext-bench-serve-", dir=workdir))
    store = root / "store"
    token = "bench-" + os.urandom(16).hex()
    result: dict[str, Any] = {"dataset": "serve", "command": command, "machine": machine_info(),
                              "embedder": embedder, "turns": turns, "namespaces": namespaces, "clients": clients,
                              "ops_per_client": ops, "write_every": write_every}
    try:
        by_user: dict[str, list[dict[str, Any]]] = {}
        for user, turn in corpus.turns(turns):
            by_user.setdefault(user, []).append(turn)
        asked = corpus.queries(queries)
        warmup = min(10, queries)
        with MemoryEngine.open(store, embedder=embedder) as engine:
            t0 = time.perf_counter()
            for user, batch in by_user.items():
                for i in range(0, len(batch), 500):
                    engine.add_turns(batch[i:i + 500], user)
            result["ingest_s"] = round(time.perf_counter() - t0, 2)
            result["embedder_id"] = engine.embedder.id if engine.embedder else None

        port = free_port()
        url = f"http://127.0.0.1:{port}"
        proc = _start_server(store, embedder, token, port)
        try:
            wait_ready(url, proc)
            # the same store, read-only in this process while the server writes it: the two paths alternate query
            # by query, so a noisy machine slows both alike
            with MemoryEngine.open(store, embedder=embedder, read_only=True) as local, \
                    RemoteEngine(url, token=token) as remote:
                embedded_ms, rest_ms, overhead_ms = _paired_searches(local, remote, asked, warmup)
            result["embedded"], result["rest"] = _stats(embedded_ms), _stats(rest_ms)
            result["rest_transport"] = _stats(overhead_ms)
            result["rest_overhead_p50_ms"] = round(result["rest"]["p50_ms"] - result["embedded"]["p50_ms"], 2)
            result["concurrent"] = _concurrent(url, token, asked, clients, ops, write_every)
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:  # pragma: no cover
                proc.kill()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return result


def _concurrent(url: str, token: str, asked: Sequence[tuple[str, str]], clients: int, ops: int,
                write_every: int) -> dict[str, Any]:
    from ..client import RemoteEngine

    lock = threading.Lock()
    writes: list[float] = []
    searches: list[float] = []
    errors: list[str] = []
    acknowledged: list[tuple[str, str]] = []

    def client(index: int) -> None:
        with RemoteEngine(url, token=token) as remote:
            for n in range(ops):
                user, query = asked[(index * ops + n) % len(asked)]
                t0 = time.perf_counter()
                try:
                    if n % write_every == 0:
                        external = f"bench-c{index}-{n}"
                        remote.add_turns([{"role": "user", "content": f"client {index} says: {query}",
                                           "external_id": external, "session_id": f"bench-{index}"}], user)
                        kind = writes
                        with lock:
                            acknowledged.append((user, external))
                    else:
                        remote.search(query, user, k=10)
                        kind = searches
                    elapsed = (time.perf_counter() - t0) * 1000
                    with lock:
                        kind.append(elapsed)
                except Exception as exc:  # noqa: BLE001 - counted and reported, never hidden
                    with lock:
                        errors.append(f"{type(exc).__name__}: {exc}"[:200])

    t0 = time.perf_counter()
    with ThreadPoolExecutor(max_workers=clients) as pool:
        list(pool.map(client, range(clients)))
    wall = time.perf_counter() - t0
    with RemoteEngine(url, token=token) as remote:
        stored = {(user, t.external_id) for user in {u for u, _ in acknowledged}
                  for t in remote.get_turns(user) if t.external_id}
    lost = [a for a in acknowledged if a not in stored]
    return {"writes": _stats(writes), "searches": _stats(searches), "errors": len(errors),
            "error_samples": errors[:5], "acknowledged_writes": len(acknowledged), "lost_writes": len(lost),
            "ops_per_s": round((len(writes) + len(searches)) / wall, 1), "wall_s": round(wall, 2)}


def format_serve_markdown(result: dict[str, Any]) -> str:
    """The result as the Markdown section of docs/benchmarks.md."""
    e, r, c = result["embedded"], result["rest"], result["concurrent"]
    lines = [
        (f"`{result['command']}` — {result['turns']} synthetic turns over {result['namespaces']} users, embedder "
        f"`{result['embedder_id']}`, {result['machine']['cpus']} CPUs, Python {result['machine']['python']}."),
        "",
        "| search path | p50 ms | p95 ms | searches |",
        "|---|---|---|---|",
        "| embedded `MemoryEngine.search` (same store, read-only, this process) | "
        f"{e['p50_ms']} | {e['p95_ms']} | {e['n']} |",
        f"| REST `RemoteEngine.search` (loopback, `memext serve`) | {r['p50_ms']} | {r['p95_ms']} | {r['n']} |",
        "",
        (f"REST p50 minus embedded p50: **{result['rest_overhead_p50_ms']} ms**. Per request, REST wall time minus "
         f"the server engine's own search time (HTTP, JSON, worker thread): p50 "
         f"**{result['rest_transport']['p50_ms']} ms**, p95 {result['rest_transport']['p95_ms']} ms."),
        "",
        (f"{result['clients']} concurrent clients, {result['ops_per_client']} operations each (one write in "
        f"{result['write_every']}):"),
        "",
        "| operation | p50 ms | p95 ms | count |",
        "|---|---|---|---|",
        f"| write (`add_turns`, 1 turn) | {c['writes']['p50_ms']} | {c['writes']['p95_ms']} | {c['writes']['n']} |",
        f"| search (k=10) | {c['searches']['p50_ms']} | {c['searches']['p95_ms']} | {c['searches']['n']} |",
        "",
        (f"Errors: **{c['errors']}**; acknowledged writes {c['acknowledged_writes']}, lost **{c['lost_writes']}**; "
        f"{c['ops_per_s']} operations/s overall."),
        "",
    ]
    return "\n".join(lines)
