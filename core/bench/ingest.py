"""``memext bench ingest``: write latency and time until fully indexed, memory-ext next to plain vector stores.

Every system writes the same LoCoMo turns (``--data``, the locomo10.json schema) with the same embedder, in one
process, one after the other:

* **one chat message** at a time — ``--messages`` single-turn writes into a store that already holds a few
  turns (p50/p95 of the call's latency: what a chat history's ``add_message`` waits for);
* **batches** — ``--batches`` writes of ``--batch`` turns each (p50/p95);
* **full ingest** — every conversation into a fresh store, one write per session, then wait until the store is
  fully indexed (vectors and sparse encodings included): seconds and turns/s.

Next to them, the p50 of one query embedding of the same embedder in the same run (``query_embed_ms``): a write
that is faster than it ran no model in the foreground. Every system's entry has ``peak_rss_mb``, the process's
``ru_maxrss`` after it ran (a high-water mark: a system inherits the peak of those before it; memory-ext runs
first by default).

**Searches during ingest** (``searches_during_ingest``, with ``--during-queries N``, 0 to skip): one memory-ext
engine holds the first conversation, fully indexed, in one namespace; its questions are searched there while the
engine is idle, then again while the same engine's background indexer works through a bulk ingest of the
other conversations into another namespace (written in one call each, not waited for). The two phases alternate
twice (idle, loaded, idle, loaded) so that the machine's drifting load hits both alike; ``ratio_p95`` is the
loaded p95 over the idle p95. The questions are asked in one cycle through all of the conversation's, so that
no search finds its query's encoding in the engine's cache of recent ones (64).

Systems: ``memory-ext`` (the engine; ``--config`` applies), ``memory-ext:full`` and ``memory-ext:normal`` (the
engine with ``storage.durability`` set to ``full``, the default, or ``normal``: ``--systems
memory-ext:full,memory-ext:normal`` compares the cost of a power-loss-safe commit in one run; their rows name
their durability, and every memory-ext entry of the JSON has it), ``vector`` (normalised embeddings appended to a numpy
matrix: the plain vector store the ``locomo``/``madial`` commands compare with), ``langchain-vector``
(``langchain_core``'s ``InMemoryVectorStore.add_texts``) and ``llamaindex-vector`` (a ``VectorStoreIndex``'s
``insert_nodes`` over its in-memory ``SimpleVectorStore``). The framework stores are skipped with a note when their
packages are missing.

>>> from memory_ext.bench.ingest import INGEST_SYSTEMS
>>> sorted(INGEST_SYSTEMS)
['langchain-vector', 'llamaindex-vector', 'memory-ext', 'memory-ext:full', 'memory-ext:normal', 'vector']
"""

from __future__ import annotations

import resource
import shutil
import sys
import tempfile
import threading
import time
import traceback
import uuid
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from .datasets import BenchTurn, Conversation
from .metrics import percentile
from .runner import machine_info
from .systems import (
    BENCH_EXTRA,
    SystemUnavailable,
    _langchain_embeddings,
    _llamaindex_embedding,
    _normalise,
)

__all__ = ["INGEST_SYSTEMS", "IngestSystem", "format_ingest_markdown", "run_ingest"]


class IngestSystem:
    """A store that is written to: ``open`` a fresh one, ``add`` turns, ``wait`` until searchable, ``close``."""

    name = "base"

    def __init__(self, embedder: Any, config: Any = None) -> None:
        self.embedder = embedder
        self.config = config

    def open(self) -> None:
        """Start a fresh, empty store."""

    def add(self, turns: Sequence[BenchTurn]) -> None:
        raise NotImplementedError

    def wait(self) -> None:
        """Block until everything added is searchable (a no-op for stores that index in ``add``)."""

    def close(self) -> None:
        """Drop the store."""


class VectorIngest(IngestSystem):
    """Embed in ``add``; append the normalised rows to a numpy matrix."""

    name = "vector"

    def open(self) -> None:
        self._matrix = np.zeros((0, self.embedder.dim), np.float32)
        self._ids: list[str] = []

    def add(self, turns: Sequence[BenchTurn]) -> None:
        rows = _normalise(self.embedder.embed_documents([t.document for t in turns]))
        self._matrix = np.vstack([self._matrix, rows])
        self._ids += [t.external_id for t in turns]


class LangChainVectorIngest(IngestSystem):
    """``langchain_core.vectorstores.InMemoryVectorStore`` on the same embedder."""

    name = "langchain-vector"

    def __init__(self, embedder: Any, config: Any = None) -> None:
        super().__init__(embedder, config)
        try:
            from langchain_core.vectorstores import InMemoryVectorStore
        except ImportError as exc:
            raise SystemUnavailable(f"langchain-vector needs langchain-core ({exc}); {BENCH_EXTRA}") from None
        self._cls = InMemoryVectorStore
        self._embeddings = _langchain_embeddings(embedder)

    def open(self) -> None:
        self._store = self._cls(embedding=self._embeddings)

    def add(self, turns: Sequence[BenchTurn]) -> None:
        self._store.add_texts([t.document for t in turns], metadatas=[{"turn_id": t.external_id} for t in turns])


class LlamaIndexVectorIngest(IngestSystem):
    """A LlamaIndex ``VectorStoreIndex`` (in-memory ``SimpleVectorStore``), ``insert_nodes`` per write."""

    name = "llamaindex-vector"

    def __init__(self, embedder: Any, config: Any = None) -> None:
        super().__init__(embedder, config)
        try:
            from llama_index.core import VectorStoreIndex
            from llama_index.core.schema import TextNode
        except ImportError as exc:
            raise SystemUnavailable(f"llamaindex-vector needs llama-index-core ({exc}); {BENCH_EXTRA}") from None
        self._index_cls = VectorStoreIndex
        self._node_cls = TextNode
        self._embed_model = _llamaindex_embedding(embedder)

    def open(self) -> None:
        self._index = self._index_cls([], embed_model=self._embed_model, show_progress=False)

    def add(self, turns: Sequence[BenchTurn]) -> None:
        self._index.insert_nodes([self._node_cls(text=t.document, id_=uuid.uuid4().hex,
                                                 metadata={"turn_id": t.external_id},
                                                 excluded_embed_metadata_keys=["turn_id"]) for t in turns])


class MemoryExtIngest(IngestSystem):
    """The engine, a fresh store directory per ``open``; ``wait`` is ``flush()``."""

    name = "memory-ext"

    def __init__(self, embedder: Any, config: Any = None, durability: str | None = None) -> None:
        from .. import MemoryEngine, Turn
        from ..config import EngineConfig

        cfg = EngineConfig.coerce(config)
        if durability is not None:
            cfg = cfg.model_copy(update={"storage": cfg.storage.model_copy(update={"durability": durability})})
        super().__init__(embedder, cfg)
        self.durability = cfg.storage.durability

        self._engine_cls = MemoryEngine
        self._turn_cls = Turn
        self._tmp = Path(tempfile.mkdtemp(prefix="memext-bench-ingest-"))
        self._engine: Any = None
        self._health: dict[int, tuple[int, int]] = {}  # per store opened: (records without a vector, quarantined)

    @property
    def unindexed(self) -> dict[str, int]:
        """Over every store this system filled and waited for: records left without a vector, and quarantined."""
        return {"without_vector": sum(h[0] for h in self._health.values()),
                "quarantined": sum(h[1] for h in self._health.values())}

    def open(self) -> None:
        self.close()
        self._engine = self._engine_cls.open(self._tmp / uuid.uuid4().hex, config=self.config,
                                             embedder=self.embedder)

    def add(self, turns: Sequence[BenchTurn]) -> None:
        self._engine.add_turns([self._turn_cls(role=t.role, content=t.text, speaker=t.speaker,
                                               timestamp=t.timestamp, session_id=t.session_id,
                                               external_id=t.external_id) for t in turns], "bench")

    def wait(self) -> None:
        self._engine.flush()
        stats = self._engine.stats()
        self._health[id(self._engine)] = (stats.records - stats.vectors, stats.quarantined)

    def close(self) -> None:
        if self._engine is not None:
            self._engine.close()
            self._engine = None

    def __del__(self) -> None:
        shutil.rmtree(getattr(self, "_tmp", ""), ignore_errors=True)


INGEST_SYSTEMS: dict[str, Callable[..., IngestSystem]] = {
    "memory-ext": MemoryExtIngest, "memory-ext:full": partial(MemoryExtIngest, durability="full"),
    "memory-ext:normal": partial(MemoryExtIngest, durability="normal"), "vector": VectorIngest,
    "langchain-vector": LangChainVectorIngest, "llamaindex-vector": LlamaIndexVectorIngest}
"""System name -> constructor ``(embedder, config)``."""


def _timed(fn: Callable[[], Any]) -> float:
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1000.0


def _sessions(turns: Sequence[BenchTurn]) -> list[list[BenchTurn]]:
    out: list[list[BenchTurn]] = []
    for t in turns:
        if not out or out[-1][-1].session_id != t.session_id:
            out.append([])
        out[-1].append(t)
    return out


def measure_system(system: IngestSystem, conversations: Sequence[Conversation], *, messages: int, batch: int,
                   batches: int) -> dict[str, Any]:
    """Chat-message latency, batch latency and full ingest until indexed, for one system."""
    turns = [t for c in conversations for t in c.turns]
    system.open()  # warm-up: a few turns, indexed (loads the model, creates tables)
    system.add(turns[:4])
    system.wait()
    message_ms = [_timed(partial(system.add, [t])) for t in turns[4: 4 + messages]]
    system.wait()
    start = 4 + messages
    batch_ms = [_timed(partial(system.add, turns[start + i * batch: start + (i + 1) * batch])) for i in range(batches)]
    system.wait()
    system.close()
    total_s = 0.0
    n = 0
    for conv in conversations:  # full ingest: one write per session, then until fully indexed
        system.open()
        begin = time.perf_counter()
        for session in _sessions(conv.turns):
            system.add(session)
        system.wait()
        total_s += time.perf_counter() - begin
        n += len(conv.turns)
        system.close()
    return {"message_ms": {"p50": percentile(message_ms, 50), "p95": percentile(message_ms, 95),
                           "n": len(message_ms)},
            "batch_ms": {"p50": percentile(batch_ms, 50), "p95": percentile(batch_ms, 95), "n": len(batch_ms),
                         "turns": batch},
            "indexed_s": total_s, "turns": n, "turns_per_s": n / total_s if total_s > 0 else None}


def _peak_rss_mb() -> float:
    """The process's peak resident set so far (``ru_maxrss``), in MiB."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (1024 * 1024) if sys.platform == "darwin" else peak / 1024


def _turn_rows(turn_cls: Any, turns: Sequence[BenchTurn]) -> list[Any]:
    return [turn_cls(role=t.role, content=t.text, speaker=t.speaker, timestamp=t.timestamp,
                     session_id=t.session_id, external_id=t.external_id) for t in turns]


def searches_during_ingest(conversations: Sequence[Conversation], embedder: Any, *, config: Any = None,
                           queries: int = 40, rounds: int = 2) -> dict[str, Any]:
    """Search latency of one engine while idle and while its indexer works on another namespace's bulk ingest
    (see the module docstring); ``{"idle_ms", "during_ms", "ratio_p50", "ratio_p95", ...}``."""
    from .. import MemoryEngine, Turn
    from ..config import EngineConfig

    if len(conversations) < 2:
        raise ValueError("searches during ingest need two conversations (one searched, one ingested)")
    searched, bulk = conversations[0], [t for c in conversations[1:] for t in c.turns]
    # one cycle through all of the conversation's questions, continued from phase to phase: with more than the
    # engine's cache of query encodings (64) no search reuses another's encoding, so every search encodes
    pool = [q.text for q in searched.questions] or ["what happened?"]
    cursor = 0

    def next_question() -> str:
        nonlocal cursor
        cursor += 1
        return pool[(cursor - 1) % len(pool)]

    tmp = Path(tempfile.mkdtemp(prefix="memext-bench-during-"))
    idle: list[float] = []
    during: list[float] = []
    indexing_s: list[float] = []
    searches_per_round: list[int] = []
    try:
        with MemoryEngine.open(tmp / "store", config=EngineConfig.coerce(config), embedder=embedder) as engine:
            engine.add_turns(_turn_rows(Turn, searched.turns), "searched", wait=True)
            for _ in range(3):  # warm-up (first-search work)
                engine.search(next_question(), "searched")
            for r in range(rounds):
                idle += [_timed(partial(engine.search, next_question(), "searched")) for _ in range(queries)]
                done = threading.Event()
                ns = f"bulk-{r}"

                def ingest(ns: str = ns, done: threading.Event = done) -> None:
                    try:  # not waited for (a flush would run the indexer at the caller's priority): polled
                        engine.add_turns(_turn_rows(Turn, bulk), ns)
                        while engine.pending(ns):
                            time.sleep(0.1)
                    finally:
                        done.set()

                begin = time.perf_counter()
                writer = threading.Thread(target=ingest, name="bench-bulk-ingest", daemon=True)
                writer.start()
                n = 0
                while True:  # searches that start while the writer and the indexer work (at least one)
                    during.append(_timed(partial(engine.search, next_question(), "searched")))
                    n += 1
                    if done.is_set():
                        break
                writer.join()
                indexing_s.append(time.perf_counter() - begin)
                searches_per_round.append(n)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    def stats(xs: list[float]) -> dict[str, Any]:
        return {"p50": percentile(xs, 50), "p95": percentile(xs, 95), "n": len(xs)}

    idle_s, during_s = stats(idle), stats(during)
    return {"idle_ms": idle_s, "during_ms": during_s, "distinct_questions": len(pool),
            "ratio_p50": during_s["p50"] / idle_s["p50"] if idle_s["p50"] else None,
            "ratio_p95": during_s["p95"] / idle_s["p95"] if idle_s["p95"] else None,
            "bulk_turns": len(bulk), "rounds": rounds, "bulk_indexed_s": indexing_s,
            "searches_per_round": searches_per_round}


def run_ingest(conversations: Sequence[Conversation], systems: Sequence[str], embedder: Any, *,
               config: Any = None, messages: int = 40, batch: int = 32, batches: int = 8, queries: int = 40,
               during_queries: int = 0, meta: dict[str, Any] | None = None) -> dict[str, Any]:
    """Measure every system on the same turns; returns the result mapping (``dataset`` = ``"ingest"``)."""
    questions = [q.text for c in conversations for q in c.questions][: queries + 3]
    for text in questions[:3]:
        embedder.embed_query(text)  # warm-up
    query_ms = [_timed(partial(embedder.embed_query, q)) for q in questions[3:] or questions or ["warm-up"]]
    result: dict[str, Any] = {
        "dataset": "ingest", "systems": {}, "skipped": {},
        "query_embed_ms": {"p50": percentile(query_ms, 50), "p95": percentile(query_ms, 95), "n": len(query_ms)},
        "meta": {"date": datetime.now(UTC).isoformat(timespec="seconds"), "embedder": getattr(embedder, "id", None),
                 "messages": messages, "batch": batch, "batches": batches, "machine": machine_info(),
                 **(meta or {})}}
    for name in systems:
        try:
            system = INGEST_SYSTEMS[name](embedder, config if name.startswith("memory-ext") else None)
        except SystemUnavailable as exc:
            result["skipped"][name] = str(exc)
            continue
        try:
            result["systems"][name] = measure_system(system, conversations, messages=messages, batch=batch,
                                                     batches=batches)
            if isinstance(system, MemoryExtIngest):
                result["systems"][name]["durability"] = system.durability
                result["systems"][name].update(system.unindexed)
            result["systems"][name]["peak_rss_mb"] = _peak_rss_mb()
        except Exception as exc:  # noqa: BLE001 - reported, the other systems still run
            result["skipped"][name] = f"failed: {type(exc).__name__}: {exc}"
            traceback.print_exc()
        finally:
            system.close()
    if during_queries and len(conversations) >= 2:
        try:
            result["searches_during_ingest"] = searches_during_ingest(conversations, embedder, config=config,
                                                                      queries=during_queries)
        except Exception as exc:  # noqa: BLE001 - reported, the rest of the result stands
            result["skipped"]["searches-during-ingest"] = f"failed: {type(exc).__name__}: {exc}"
            traceback.print_exc()
    return result


def _mb(value: Any) -> str:
    return "—" if value is None else f"{value:.0f}"


def format_ingest_markdown(result: dict[str, Any]) -> str:
    """The Markdown table of an ingest result."""
    meta = result.get("meta", {})
    q = result["query_embed_ms"]
    lines = ["# memext bench ingest", "",
             (f"- date: {meta.get('date', '—')}; embedder: `{meta.get('embedder')}`; one query embedding: "
              f"p50 {q['p50']:.1f} ms (n={q['n']})")]
    if meta.get("command"):
        lines.append(f"- command: `{meta['command']}`")
    lines += ["", ("| system | message p50 ms | message p95 ms | batch p50 ms | batch p95 ms | "
                   "full ingest until indexed s | turns/s | peak RSS MB |"), "|---|---|---|---|---|---|---|---|"]
    vector = result["systems"].get("vector", {}).get("turns_per_s")
    for name, s in result["systems"].items():
        ratio = f" ({s['turns_per_s'] / vector:.2f}× vector)" if vector and s["turns_per_s"] else ""
        label = f"{name.split(':')[0]} (durability {s['durability']})" if ":" in name and s.get("durability") else name
        lines.append(f"| {label} | {s['message_ms']['p50']:.1f} | {s['message_ms']['p95']:.1f} | "
                     f"{s['batch_ms']['p50']:.0f} | {s['batch_ms']['p95']:.0f} | {s['indexed_s']:.1f} | "
                     f"{s['turns_per_s']:.1f}{ratio} | {_mb(s.get('peak_rss_mb'))} |")
    during = result.get("searches_during_ingest")
    if during:
        i, d = during["idle_ms"], during["during_ms"]
        lines += ["", (f"Searches while the same engine indexes {during['bulk_turns']} turns into another namespace "
                       f"({during['rounds']} rounds): idle p50 / p95 {i['p50']:.1f} / {i['p95']:.1f} ms (n={i['n']}), "
                       f"during {d['p50']:.1f} / {d['p95']:.1f} ms (n={d['n']}): p95 {during['ratio_p95']:.2f}× "
                       f"idle, p50 {during['ratio_p50']:.2f}×")]
    if result.get("skipped"):
        lines += ["", "Skipped:"] + [f"- `{n}`: {why}" for n, why in result["skipped"].items()]
    return "\n".join(lines) + "\n"
