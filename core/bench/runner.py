"""Run systems side by side on a dataset and produce the bench JSON (schema: docs/benchmarks.md, "The result JSON").

All systems run in this process, one after the other, on the same conversations with the same embedder. For
each system: build it, warm it up on a tiny untimed conversation (model loading and lazy imports are not
charged to the first conversation), then per conversation ingest every turn and ask every question, timing
each call with :func:`time.perf_counter`. With ``interleave=True`` (``--interleave``) the systems take turns
instead: per conversation each system ingests it, then each question is asked of every system in turn (the
first system rotating), so a machine whose load drifts during a run (other jobs) slows every system alike and
the same-run ratios stay comparable.

**Peak RSS** is ``resource.getrusage(RUSAGE_SELF).ru_maxrss`` read after a system finished: it is the
process-wide high-water mark so far, so it never goes down and a system run after a hungrier one inherits that
peak. Run one system per process (``--systems NAME``) to compare memory honestly.
"""

from __future__ import annotations

import platform
import resource
import sys
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from .datasets import LOCOMO_HEADLINE_CATEGORIES, BenchQuestion, BenchTurn, Conversation
from .metrics import (
    LOCOMO_KS,
    MADIAL_KS,
    locomo_question_metrics,
    madial_question_metrics,
    mean_metrics,
    percentile,
)
from .systems import EmbedderLike, System, SystemUnavailable, build_system

__all__ = [
    "LOCOMO",
    "MADIAL",
    "DatasetSpec",
    "QuestionResult",
    "SystemRun",
    "peak_rss_mb",
    "run_benchmark",
    "run_interleaved",
    "run_system",
]

RSS_NOTE = ("peak_rss_mb is the process-wide ru_maxrss high-water mark after the system ran (it never goes down; "
            "systems run in the order listed); run one system per process to compare memory")

WARMUP_TURNS: tuple[BenchTurn, ...] = (
    BenchTurn(external_id="w1", text="I adopted a puppy named Biscuit last week.", speaker="A", role="user",
              timestamp=datetime(2024, 1, 1, 12, 0, tzinfo=UTC), session_id="warmup"),
    BenchTurn(external_id="w2", text="太好了！它是什么品种的？", speaker="B", role="assistant",
              timestamp=datetime(2024, 1, 1, 12, 0, 1, tzinfo=UTC), session_id="warmup"),
    BenchTurn(external_id="w3", text="A golden retriever, he loves the beach.", speaker="A", role="user",
              timestamp=datetime(2024, 1, 1, 12, 0, 2, tzinfo=UTC), session_id="warmup"),
)


@dataclass(frozen=True)
class DatasetSpec:
    """How a dataset is scored: its ks, its per-question metric function and its headline categories."""

    name: str
    ks: tuple[int, ...]
    question_metrics: Callable[[Sequence[str], Sequence[str]], dict[str, float]]
    headline_categories: tuple[str, ...] | None
    """Categories averaged into ``micro``; ``None`` means all of them."""

    @property
    def depth(self) -> int:
        """How many turns each query asks for (the largest k)."""
        return max(self.ks)


LOCOMO = DatasetSpec("locomo", LOCOMO_KS, locomo_question_metrics, LOCOMO_HEADLINE_CATEGORIES)
MADIAL = DatasetSpec("madial", MADIAL_KS, madial_question_metrics, None)


@dataclass(frozen=True)
class QuestionResult:
    """One question answered by one system."""

    conversation_id: str
    question: BenchQuestion
    ranking: tuple[str, ...]
    metrics: dict[str, float]
    latency_ms: float


@dataclass
class SystemRun:
    """Everything one system produced on one dataset."""

    name: str
    results: list[QuestionResult] = field(default_factory=list)
    ingest_seconds: float = 0.0
    ingested_turns: int = 0
    peak_rss_mb: float = 0.0


def peak_rss_mb() -> float:
    """The process's peak resident set size so far, in MiB (``ru_maxrss``: KiB on Linux, bytes on macOS)."""
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return rss / (1024 * 1024) if sys.platform == "darwin" else rss / 1024


def _progress(total: int, desc: str, enabled: bool) -> Any:
    from tqdm import tqdm

    interactive = sys.stderr.isatty()
    return tqdm(total=total, desc=desc, unit="op", file=sys.stderr, disable=not enabled, leave=False,
                dynamic_ncols=True, mininterval=0.1 if interactive else 10.0)


def run_system(system: System, conversations: Sequence[Conversation], spec: DatasetSpec, *,
               progress: bool = False, warmup: bool = True) -> SystemRun:
    """Ingest and query every conversation with one (already built) system. Exceptions propagate."""
    run = SystemRun(name=system.name)
    if warmup:
        system.ingest("warmup", WARMUP_TURNS, WARMUP_TURNS[-1].timestamp)
        system.query("What is the puppy called?", spec.depth)
    total = sum(len(c.turns) + len(c.questions) for c in conversations)
    with _progress(total, system.name, progress) as bar:
        for conv in conversations:
            start = time.perf_counter()
            system.ingest(conv.id, conv.turns, conv.now)
            run.ingest_seconds += time.perf_counter() - start
            run.ingested_turns += len(conv.turns)
            bar.update(len(conv.turns))
            for question in conv.questions:
                run.results.append(_ask(system, conv, question, spec))
                bar.update(1)
    run.peak_rss_mb = peak_rss_mb()
    return run


def _ask(system: System, conv: Conversation, question: BenchQuestion, spec: DatasetSpec) -> QuestionResult:
    start = time.perf_counter()
    ranking = system.query(question.text, spec.depth)
    elapsed_ms = (time.perf_counter() - start) * 1000.0
    ranking = ranking[: spec.depth]
    return QuestionResult(conversation_id=conv.id, question=question, ranking=tuple(ranking),
                          metrics=spec.question_metrics(ranking, question.gold), latency_ms=elapsed_ms)


def run_interleaved(systems: Sequence[System], conversations: Sequence[Conversation], spec: DatasetSpec, *,
                    progress: bool = False, warmup: bool = True) -> tuple[dict[str, SystemRun], dict[str, str]]:
    """:func:`run_system` for several systems taking turns (see the module docstring): per conversation every
    system ingests it (the first one rotating), then each question is asked of every system in turn. A system
    that raises is dropped from the rest of the run (its traceback printed); returns the runs and, by system,
    the failures. Peak RSS is the same process-wide mark for all of them."""
    runs = {s.name: SystemRun(name=s.name) for s in systems}
    failures: dict[str, str] = {}
    live = list(systems)

    def attempt(system: System, step: Callable[..., object], *args: Any) -> None:
        try:
            step(system, *args)
        except Exception as exc:  # noqa: BLE001  reported in the JSON, the others go on
            traceback.print_exc(file=sys.stderr)
            _warn(f"system {system.name} failed: {type(exc).__name__}: {exc}")
            failures[system.name] = f"failed: {type(exc).__name__}: {exc}"
            live.remove(system)

    def warm(system: System) -> None:
        system.ingest("warmup", WARMUP_TURNS, WARMUP_TURNS[-1].timestamp)
        system.query("What is the puppy called?", spec.depth)

    def ingest(system: System, conv: Conversation) -> None:
        start = time.perf_counter()
        system.ingest(conv.id, conv.turns, conv.now)
        runs[system.name].ingest_seconds += time.perf_counter() - start
        runs[system.name].ingested_turns += len(conv.turns)

    def ask(system: System, conv: Conversation, question: BenchQuestion) -> None:
        runs[system.name].results.append(_ask(system, conv, question, spec))

    def turn_order(i: int) -> list[System]:
        return live[i % len(live):] + live[: i % len(live)] if live else []

    if warmup:
        for system in list(live):
            attempt(system, warm)
    total = sum(len(c.turns) + len(c.questions) for c in conversations)
    step = 0
    with _progress(total, "interleaved", progress) as bar:
        for conv in conversations:
            for system in turn_order(step):
                attempt(system, ingest, conv)
            step += 1
            bar.update(len(conv.turns))
            for question in conv.questions:
                for system in turn_order(step):
                    attempt(system, ask, conv, question)
                step += 1
                bar.update(1)
    for run in runs.values():
        run.peak_rss_mb = peak_rss_mb()
    return {name: run for name, run in runs.items() if name not in failures}, failures


def _category_order(categories: Sequence[str]) -> list[str]:
    return sorted(set(categories), key=lambda c: (0, int(c)) if c.isdigit() else (1, c))


def summarize_run(run: SystemRun, spec: DatasetSpec) -> dict[str, Any]:
    """The JSON entry of one system: micro, per_category, latency_ms, ingest_turns_per_s, peak_rss_mb."""
    by_category: dict[str, list[dict[str, float]]] = {}
    for r in run.results:
        by_category.setdefault(r.question.category, []).append(r.metrics)
    headline = spec.headline_categories
    micro_rows = [r.metrics for r in run.results if headline is None or r.question.category in headline]
    latencies = [r.latency_ms for r in run.results]
    return {
        "micro": mean_metrics(micro_rows),
        "per_category": {c: mean_metrics(by_category[c]) for c in _category_order(list(by_category))},
        "latency_ms": {
            "search_p50": percentile(latencies, 50) if latencies else None,
            "search_p95": percentile(latencies, 95) if latencies else None,
        },
        "ingest_turns_per_s": (run.ingested_turns / run.ingest_seconds) if run.ingest_seconds > 0 else None,
        "peak_rss_mb": run.peak_rss_mb,
    }


def count_questions(conversations: Sequence[Conversation], spec: DatasetSpec) -> dict[str, int]:
    """Questions scored per category (LoCoMo always lists categories 1-5)."""
    counts: dict[str, int] = {c: 0 for c in ("1", "2", "3", "4", "5")} if spec.name == "locomo" else {}
    for conv in conversations:
        for q in conv.questions:
            counts[q.category] = counts.get(q.category, 0) + 1
    return {c: counts[c] for c in _category_order(list(counts))}


def machine_info() -> dict[str, Any]:
    """Where the run happened (for docs/benchmarks.md)."""
    import os

    return {"platform": platform.platform(), "python": platform.python_version(),
            "processor": platform.processor() or platform.machine(), "cpus": os.cpu_count()}


def _warn(message: str) -> None:
    print(f"memext bench: {message}", file=sys.stderr, flush=True)


def _close(system: System) -> bool:
    """Close a system; a failure is printed with its traceback and reported as ``False``."""
    try:
        system.close()
    except Exception as exc:  # noqa: BLE001  reported, not hidden: the caller records it in the JSON
        traceback.print_exc(file=sys.stderr)
        _warn(f"closing {system.name} failed: {type(exc).__name__}: {exc}")
        return False
    return True


def run_benchmark(
    spec: DatasetSpec,
    conversations: Sequence[Conversation],
    systems: Sequence[str],
    embedder: EmbedderLike | None,
    *,
    progress: bool = True,
    system_options: Mapping[str, Mapping[str, Any]] | None = None,
    meta: Mapping[str, Any] | None = None,
    rankings_sink: Callable[[str, QuestionResult], None] | None = None,
    warmup: bool = True,
    interleave: bool = False,
) -> dict[str, Any]:
    """Run each named system on the conversations and return the bench JSON.

    A system that cannot be built (missing package) or that fails while running is reported in ``skipped``
    (with the error, also printed to stderr with its traceback) and the run goes on with the others.
    ``rankings_sink(system, result)`` receives every answered question, for dumping rankings.
    """
    out: dict[str, Any] = {
        "dataset": spec.name,
        "n_questions": count_questions(conversations, spec),
        "systems": {},
        "skipped": {},
        "meta": {
            "date": datetime.now(UTC).isoformat(timespec="seconds"),
            "machine": machine_info(),
            "embedder": getattr(embedder, "id", None),
            "conversations": len(conversations),
            "turns": sum(len(c.turns) for c in conversations),
            "skipped_questions_empty_evidence": sum(c.skipped_questions for c in conversations),
            "ks": list(spec.ks),
            "headline_categories": list(spec.headline_categories) if spec.headline_categories else "all",
            "rss_note": RSS_NOTE,
            **dict(meta or {}),
        },
    }
    options = system_options or {}

    def record(name: str, system: System, run: SystemRun) -> None:
        if not _close(system):
            out["meta"].setdefault("close_errors", []).append(name)
        out["systems"][name] = summarize_run(run, spec)
        if rankings_sink is not None:
            for result in run.results:
                rankings_sink(name, result)
        summary = out["systems"][name]
        headline = "evid_recall@5" if spec.name == "locomo" else "recall@5"
        _warn(f"{name}: {headline}={summary['micro'].get(headline, float('nan')):.3f} "
              f"p50={summary['latency_ms']['search_p50'] or 0:.2f}ms "
              f"p95={summary['latency_ms']['search_p95'] or 0:.2f}ms")

    built: list[System] = []
    for name in systems:
        try:
            system = build_system(name, embedder, spec.depth, **dict(options.get(name, {})))
        except SystemUnavailable as exc:
            _warn(f"skipping {name}: {exc}")
            out["skipped"][name] = str(exc)
            continue
        except Exception as exc:  # noqa: BLE001  e.g. a bad engine configuration: reported, the others still run
            traceback.print_exc(file=sys.stderr)
            _warn(f"system {name} could not be built: {type(exc).__name__}: {exc}")
            out["skipped"][name] = f"failed: {type(exc).__name__}: {exc}"
            continue
        if interleave:
            built.append(system)
            continue
        try:
            run = run_system(system, conversations, spec, progress=progress, warmup=warmup)
        except Exception as exc:  # noqa: BLE001  a failing system is reported (with its traceback), never hidden
            traceback.print_exc(file=sys.stderr)
            _warn(f"system {name} failed: {type(exc).__name__}: {exc}")
            out["skipped"][name] = f"failed: {type(exc).__name__}: {exc}"
            _close(system)
            continue
        record(name, system, run)
    if interleave:
        out["meta"]["interleaved"] = True
        runs, failures = run_interleaved(built, conversations, spec, progress=progress, warmup=warmup)
        for system in built:
            if system.name in failures:
                out["skipped"][system.name] = failures[system.name]
                _close(system)
            else:
                record(system.name, system, runs[system.name])
    return out
