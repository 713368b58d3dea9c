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


def _background_layers(gate: PassGate, layers: int, ran: threading.Semaphore, step: threading.Event,
                       seen: list[str], name: str) -> threading.Thread:
    """A background pass of ``layers`` layers that reports each layer it runs and waits for ``step`` after it."""

    def work() -> None:
        background_work()
        with gate.slot():
            for i in range(layers):
                gate.checkpoint()
                seen.append(f"{name}{i}")
                ran.release()
                step.wait(30)
        ran.release()

    return _run(work)


def test_background_passes_stand_aside_while_a_search_is_in_flight_and_go_on_after_it() -> None:
    gate = PassGate(2, during_search=0)
    ran, step = threading.Semaphore(0), threading.Event()
    seen: list[str] = []
    t = _background_layers(gate, 3, ran, step, seen, "layer")
    assert ran.acquire(timeout=30)  # layer 0 ran before any search
    with gate.foreground_work():
        assert gate.in_flight() == 1
        step.set()  # the pass reaches its next checkpoint while the search is in flight: it stands aside
        assert not ran.acquire(timeout=0.2) and gate.running() == (0, 0)
        assert gate.search_yields == 1 and gate.yields == 1
        late = _background_layers(gate, 1, ran, step, seen, "late")  # a new background pass does not start
        assert not ran.acquire(timeout=0.2) and gate.search_yields == 2
        seen.append("search")
    assert gate.in_flight() == 0 and gate.searches == 1
    t.join(30)
    late.join(30)
    assert not t.is_alive() and not late.is_alive() and gate.running() == (0, 0)
    assert seen[:2] == ["layer0", "search"] and sorted(seen[2:]) == ["late0", "layer1", "layer2"]


def test_one_background_pass_goes_on_during_a_search_when_the_gate_allows_one() -> None:
    gate = PassGate(2, during_search=1)
    ran, step = threading.Semaphore(0), threading.Event()
    seen: list[str] = []
    threads = [_background_layers(gate, 2, ran, step, seen, f"p{i}_") for i in range(2)]
    for _ in range(2):
        assert ran.acquire(timeout=30)
    assert gate.running() == (0, 2)
    with gate.foreground_work():
        step.set()  # both reach a checkpoint: one stands aside, the other runs its next layer
        assert ran.acquire(timeout=30)
        assert gate.running()[1] <= 1
    for t in threads:
        t.join(30)
    assert gate.search_yields == 1  # the first to reach its checkpoint stood aside, the other never had to
    assert gate.running() == (0, 0) and len(seen) == 4


def test_a_search_that_raises_releases_the_signal_and_nested_searches_are_counted() -> None:
    gate = PassGate(2, during_search=0)
    try:
        with gate.foreground_work():
            with gate.foreground_work():
                assert gate.in_flight() == 2
            assert gate.in_flight() == 1
            raise RuntimeError("a stage failed")
    except RuntimeError:
        pass
    assert gate.in_flight() == 0 and gate.searches == 2 and not _local.__dict__.get("searching")


def test_a_background_thread_that_searches_runs_its_own_passes_as_foreground() -> None:
    gate = PassGate(1, during_search=0)
    states: list[tuple[int, int]] = []

    def background_search() -> None:
        background_work()
        with gate.foreground_work(), gate.slot():  # would wait for itself if it stayed background
            gate.checkpoint()
            states.append(gate.running())

    t = _run(background_search)
    t.join(30)
    assert not t.is_alive() and states == [(1, 0)]


def test_a_caller_waiting_for_the_queue_lifts_the_searches_rule_and_overdue_passes_go_on() -> None:
    gate = PassGate(2, during_search=0)
    ran, step = threading.Semaphore(0), threading.Event()
    step.set()
    seen: list[str] = []
    with gate.foreground_work(), gate.waited_work():  # e.g. a search settling its own namespace
        t = _background_layers(gate, 2, ran, step, seen, "w")
        t.join(30)
    assert not t.is_alive() and seen == ["w0", "w1"] and gate.search_yields == 0
    gate.max_aside_s = 0.0  # a pass standing aside for searches goes on after max_aside_s (here at once)
    with gate.foreground_work():
        t = _background_layers(gate, 2, ran, step, seen, "o")
        t.join(30)
    assert not t.is_alive() and seen[2:] == ["o0", "o1"] and gate.overdue >= 1
