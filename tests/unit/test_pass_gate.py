"""The process-wide bound on concurrent forward passes: background passes are bounded and stand aside for
foreground ones, which never wait (counted, not timed)."""

from __future__ import annotations

import tempfile
import threading
from collections.abc import Sequence

import numpy as np

from memory_ext import MemoryEngine, Turn
from memory_ext.e5_numpy import PassGate, _local, background_work
from memory_ext.embed import HashingEmbedder


def _run(fn, *args) -> threading.Thread:
    t = threading.Thread(target=fn, args=args, daemon=True)
    t.start()
    return t


def test_background_passes_are_bounded_and_foreground_ones_never_wait() -> None:
    gate = PassGate(2)
    inside = threading.Semaphore(0)
    release = threading.Event()
    entered: list[str] = []

    def background(name: str) -> None:
        background_work()
        with gate.slot():
            entered.append(name)
            inside.release()
            release.wait(30)

    threads = [_run(background, f"bg{i}") for i in range(4)]
    for _ in range(2):
        assert inside.acquire(timeout=30)
    assert gate.running() == (0, 2)  # two of the four hold a slot, two wait for one
    assert not inside.acquire(timeout=0.2)  # (a bounded wait for a pass that must not start)
    done = threading.Event()

    def foreground() -> None:
        with gate.slot():
            done.set()

    _run(foreground).join(30)
    assert done.is_set() and gate.peak == 3  # the foreground pass ran next to both background ones
    release.set()
    for t in threads:
        t.join(30)
    assert sorted(entered) == ["bg0", "bg1", "bg2", "bg3"] and gate.peak == 3 and gate.running() == (0, 0)


def test_a_background_pass_stands_aside_between_layers_while_a_foreground_pass_runs() -> None:
    gate = PassGate(1)
    layers = threading.Semaphore(0)
    step = threading.Event()
    seen: list[str] = []

    def background() -> None:
        background_work()
        with gate.slot():
            for i in range(3):
                gate.checkpoint()
                seen.append(f"layer{i}")
                layers.release()
                step.wait(30)
                step.clear()

    t = _run(background)
    assert layers.acquire(timeout=30)  # layer 0 ran
    fg_inside, fg_leave = threading.Event(), threading.Event()

    def foreground() -> None:
        with gate.slot():
            seen.append("query")
            fg_inside.set()
            fg_leave.wait(30)

    f = _run(foreground)
    assert fg_inside.wait(30)  # the foreground pass did not wait for the background one's slot
    step.set()  # the background pass reaches its next layer: it stands aside while the query runs
    assert not layers.acquire(timeout=0.2) and gate.running() == (1, 0) and gate.yields == 1
    fg_leave.set()
    f.join(30)
    assert layers.acquire(timeout=30)
    step.set()
    assert layers.acquire(timeout=30)
    step.set()
    t.join(30)
    assert seen == ["layer0", "query", "layer1", "layer2"]


class _Recording(HashingEmbedder):
    """Records whether each embedding call ran on a thread marked background."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[bool] = []

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        self.calls.append(bool(_local.__dict__.get("background", False)))
        return super().embed_documents(texts)

    def embed_query(self, text: str) -> np.ndarray:
        self.calls.append(bool(_local.__dict__.get("background", False)))
        return super().embed_query(text)


def test_the_indexer_embeds_on_background_threads_and_a_search_does_not() -> None:
    emb = _Recording()
    with MemoryEngine.open(tempfile.mkdtemp(), embedder=emb) as engine:
        engine.add_turns([Turn(role="user", content=f"turn {i} about hiking in the alps") for i in range(40)],
                         "ana")
        first = len(emb.calls)  # the foreground check of the embedder on the first write
        engine.flush("ana")
        assert emb.calls[first:] and all(emb.calls[first:])
        emb.calls.clear()
        engine.search("hiking", "ana")
        assert emb.calls and not any(emb.calls)


def test_malloc_tuning_is_left_to_an_environment_that_sets_it(monkeypatch) -> None:
    import sys

    from memory_ext.e5_numpy import limit_malloc_retention

    for name, value in (("MALLOC_ARENA_MAX", "4"), ("GLIBC_TUNABLES", "glibc.malloc.arena_max=4"),
                        ("MEMORY_EXT_MALLOC", "default")):
        with monkeypatch.context() as m:
            m.setenv(name, value)
            assert limit_malloc_retention() is False
    if sys.platform.startswith("linux"):
        import platform

        if platform.libc_ver()[0] == "glibc":
            assert limit_malloc_retention() is True
