"""Run recall channels in parallel, each with a timeout; failures become ChannelErrors."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from concurrent.futures import Executor, Future, wait
from dataclasses import dataclass, field

from ..models import ChannelError
from .base import Hits

__all__ = ["ChannelRun", "run_channels"]


@dataclass
class ChannelRun:
    """What the runner gives back: per-channel results, the channels that failed, and timings in ms."""

    results: dict[str, Hits] = field(default_factory=dict)
    errors: list[ChannelError] = field(default_factory=list)
    timings_ms: dict[str, float] = field(default_factory=dict)


def run_channels(pool: Executor, calls: Mapping[str, Callable[[], Hits | list[tuple[int, float]]]],
                 timeout_s: float) -> ChannelRun:
    """Run every call on ``pool``; wait at most ``timeout_s`` in all (channels run side by side).

    A call that raises becomes ``ChannelError(channel, type(exc).__name__, str(exc))``; one still running at the
    deadline becomes ``ChannelError(channel, "TimeoutError", ...)`` and its late answer is discarded.
    """
    run = ChannelRun()
    started = time.perf_counter()
    finished: dict[str, float] = {}

    def timed(name: str, fn: Callable[[], Hits | list[tuple[int, float]]]) -> Hits | list[tuple[int, float]]:
        try:
            return fn()
        finally:
            finished[name] = (time.perf_counter() - started) * 1000

    futures: dict[Future[Hits | list[tuple[int, float]]], str] = {pool.submit(timed, n, f): n for n, f in calls.items()}
    _, pending = wait(futures, timeout=timeout_s)
    for fut, name in futures.items():
        if fut in pending:
            fut.cancel()
            run.errors.append(ChannelError(channel=name, error_type="TimeoutError",
                                           message=f"no answer within {timeout_s:g}s (recall.channel_timeout_s)"))
            run.timings_ms[name] = timeout_s * 1000
            continue
        exc = fut.exception()
        run.timings_ms[name] = round(finished.get(name, 0.0), 3)
        if exc is not None:
            run.errors.append(ChannelError(channel=name, error_type=type(exc).__name__, message=str(exc) or repr(exc)))
        else:
            found = fut.result()
            run.results[name] = found if isinstance(found, Hits) else Hits.from_pairs(found)
    return run
