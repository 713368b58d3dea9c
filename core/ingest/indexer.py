"""The background indexer: the model work of a write (dense vectors, sparse encodings), off the foreground path.

:meth:`~memory_ext.ingest.pipeline.WritePipeline.add` commits turns, records and every index that needs no model
together with rows of a durable queue, the ``index_queue`` table of the truth store: one row per record, saying
how its dense vector is made (:attr:`Work.EMBED` its text, :attr:`Work.MEAN` of its turns' vectors — windows with
``ingest.window_vectors: mean`` —, :attr:`Work.COPY` of its turn's vector — derived records that are near-copies of
their turn) and whether it gets a sparse encoding (turn records, when the sparse channel is on).

:class:`Indexer` drains that queue, oldest records first, in batches of ``ingest.indexer_batch``: it embeds the
batch's texts outside any lock (dense and sparse work side by side on ``ingest.indexer_threads`` threads, at a
lower priority unless a caller waits for the queue: :data:`BACKGROUND_NICE`), then
writes vectors, the vector index and the sparse index and deletes the done rows in one transaction. Writes are
keyed by rid (``INSERT OR REPLACE``/upsert), so a batch cut short by a crash is simply done again after the
next open: no vector is lost or written twice. Records forgotten while their work was in flight are skipped
(``forget`` deletes their queue rows in its own transaction; the indexer writes only rows still queued).
Because batches go in rid order, vectors land in rid order, which is what the numpy partition and the sparse
matrix sync by (so read-only openers see vectors as they land).

:class:`IndexQueue` is the queue as a :class:`~memory_ext.store.base.DerivedIndex`: the write pipeline hands it
each batch (its work items ride in ``RecordBatch.extra["queue"]``) and ``forget`` removes from it like from any
other index.

>>> import tempfile
>>> from memory_ext import MemoryEngine, Turn
>>> with MemoryEngine.open(tempfile.mkdtemp(), embedder="hashing") as engine:
...     _ = engine.add_turns([Turn(role="user", content="I adopted a beagle called Toby")], "ana")
...     engine.flush("ana")
True
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from enum import IntEnum
from typing import TYPE_CHECKING, Any

import numpy as np

from ..e5_numpy import PASS_GATE, background_work
from ..embed import Embedder, SegmentEmbedder, SparseEmbedder, check_vectors
from ..store.base import RecordBatch
from ..store.interface import Connection
from ..store.sparse import normalise
from ..text import tokenize
from .contextual import encode_in_context, reads_in_context, vector_kind
from .turns import sentences_of

if TYPE_CHECKING:
    from ..store.base import DerivedIndex
    from ..store.interface import TruthStore

__all__ = ["IndexQueue", "Indexer", "Work", "word_overlap"]

log = logging.getLogger(__name__)

class Work(IntEnum):
    """How a queued record's dense vector is made: the ``dense`` column of ``index_queue`` (the one vocabulary of
    work codes; the ``sparse`` column is 1 when the record also gets a sparse encoding).

    >>> Work(2).name, int(Work.COPY), bool(Work.NONE)
    ('MEAN', 3, False)
    """

    NONE = 0
    """No vector (the engine keeps no vectors, or the record needs only a sparse encoding)."""
    EMBED = 1
    """Embed the record's own text."""
    MEAN = 2
    """The normalised mean of its member turns' vectors (windows with ``ingest.window_vectors: mean``)."""
    COPY = 3
    """Its turn's vector (a derived record that is a near-copy of its turn)."""

CHUNK = 16
"""Texts per embedding job (jobs are spread over the indexer's threads)."""
BACKGROUND_NICE = 5
"""The background threads' nice value (Linux: per thread): a write or a search in the foreground gets the CPU
first (about 3 times an indexer thread's share), while an idle machine still gives the indexer every core. While a
caller waits for the queue (``flush``, ``add_turns(wait=True)``, a search settling its namespace) the work is that
caller's, so the batches embed on threads at normal priority instead (an unprivileged thread cannot take back a
nice value it gave up: these are other threads)."""


def _background_thread() -> None:
    """An indexer thread at normal priority: its forward passes still stand aside for searches'
    (:func:`memory_ext.e5_numpy.background_work`)."""
    background_work()


def _lower_priority() -> None:
    """Run the calling thread at :data:`BACKGROUND_NICE` (where the OS allows per-thread priorities), its forward
    passes marked background."""
    background_work()
    with contextlib.suppress(AttributeError, OSError):  # not Linux, or not permitted: normal priority
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), BACKGROUND_NICE)


def _pieces(text: str, size: int = 1_000) -> list[str]:
    """A text in pieces for the fallback of a record the embedder failed on: its sentences, joined up to about
    ``size`` characters, a longer sentence cut."""
    out: list[str] = []
    for sentence in sentences_of(text) or [text]:
        for i in range(0, max(len(sentence), 1), size):
            piece = sentence[i: i + size].strip()
            if not piece:
                continue
            if out and len(out[-1]) + len(piece) < size:
                out[-1] += " " + piece
            else:
                out.append(piece)
    return out or [text[:size] or "-"]


def word_overlap(text: str, source: str) -> float:
    """Share of ``text``'s words that are words of ``source`` (1.0: a near-copy).

    >>> word_overlap("Ana went to Porto", "Ana: I went to Porto yesterday")
    1.0
    """
    words = set(tokenize(text))
    return len(words & set(tokenize(source))) / len(words) if words else 1.0


class IndexQueue:
    """The durable queue of model work as a derived index (see the module docstring)."""

    name = "queue"

    def __init__(self, store: TruthStore) -> None:
        self._store = store

    def create_schema(self, conn: Connection) -> None:
        self._store.create_queue_schema(conn)

    def index(self, conn: Connection, ns_id: int, batch: RecordBatch) -> None:
        items = batch.extra.get("queue")
        if items:
            self._store.enqueue(conn, ns_id, items)

    def remove(self, conn: Connection, ns_id: int, rids: Sequence[int]) -> None:
        self._store.dequeue(conn, rids, ns_id)

    def drop_namespace(self, conn: Connection, ns_id: int) -> None:
        self._store.drop_queue(conn, ns_id)

    def invalidate(self, ns_id: int | None = None) -> None:
        """Nothing cached."""


class Indexer:
    """Drains the queue: in a background thread (``background=True``) or in the caller (:meth:`drain`).

    ``indexes`` receive each batch's vectors and sparse encodings (the vector index and the sparse index);
    ``sparse`` says whether the embedder's ``embed_sparse`` is used.
    """

    def __init__(self, store: TruthStore, embedder: Embedder | None, indexes: Sequence[DerivedIndex], *,
                 vectors: bool, sparse: bool, batch: int = 64, threads: int = 2, background: bool = True,
                 window_vectors: str = "context", sentence_weight: float = 0.0, quarantine_after: int = 3,
                 retry_s: float = 0.5) -> None:
        self._store = store
        self._embedder = embedder
        self._indexes = tuple(indexes)
        self._vectors = vectors and embedder is not None
        self._sparse = sparse and embedder is not None
        self._batch = batch
        self._threads = threads
        # with an embedder that shows its token states, turns, windows and sparse encodings share passes
        self._context = reads_in_context(window_vectors, embedder)
        self._run_turns = 8 if window_vectors == "context" else 3
        self._sentence_weight = sentence_weight
        self.vector_kind = vector_kind(window_vectors, sentence_weight, embedder)
        """How this indexer makes turn vectors (recorded with a store's first vectors)."""
        self.background = background
        self._cond = threading.Condition()
        self._drain_lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._stop = False
        self._wake = False
        self._pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="memory-ext-embed",
                                        initializer=_lower_priority if background else None) \
            if threads > 1 else None
        self._waiting = 0  # callers in wait(): batches then embed on _urgent_pool (normal priority)
        self._urgent_pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="memory-ext-embed-waited",
                                               initializer=_background_thread) if background else None
        self._known: dict[str, np.ndarray] = {}  # vectors made in the foreground (the embedder check)
        self.error: BaseException | None = None
        """The embedder's failure on a whole batch whose every record failed while a probe text failed too (the
        model or its server is down): the work stays queued and is retried with a back-off; cleared by the next
        batch that succeeds. Searches report it (:meth:`health`)."""
        self._failures = 0  # batches failed whole since this indexer started (a waiter returns on a new one)
        self._failing: dict[int, tuple[int, float, str]] = {}  # rid -> (attempts, retry at (monotonic), error)
        self.quarantine_after = quarantine_after
        """Attempts (the first included) before a record that fails alone is quarantined."""
        self.retry_s = retry_s
        """The first back-off before a failed record is tried again (then 4x longer each time)."""
        self.quarantined_now = 0
        """Records this indexer quarantined since it started."""
        self.batches = 0
        """Batches written since this indexer started (for tests and the bench)."""

    # -- lifecycle -------------------------------------------------------------------------------------------
    def remember(self, text: str, vector: np.ndarray) -> None:
        """A vector the foreground already made for ``text`` (reused once instead of embedding again)."""
        self._known[text] = vector

    def notify(self) -> None:
        """New work was committed: wake the background thread (starting it if needed)."""
        if not self.background:
            return
        with self._cond:
            if self._stop:
                return
            self._wake = True
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="memory-ext-indexer", daemon=True)
                self._thread.start()
            self._cond.notify_all()

    def wait(self, ns_id: int | None, timeout: float | None = None, *, dense_only: bool = False) -> bool:
        """Until nothing of ``ns_id`` (of the store if None) is queued: True, or False after ``timeout`` seconds.
        ``dense_only``: until no record of ``ns_id`` waits for its vector (a sparse encoding alone may still be
        queued).

        A record that fails alone is retried and then quarantined (:meth:`drain_once`): it leaves the queue, so the
        wait ends. When the embedder fails on everything (:attr:`error`), this returns False once a batch tried
        during the wait failed: the work stays queued and nothing raises (the turns are stored)."""
        if not self.background:
            with contextlib.suppress(Exception):  # an embedder that is down: reported by health(), kept queued
                self.drain()
            return self._store.pending(ns_id) == 0
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            self._waiting += 1  # the work is now this caller's: it runs at the caller's priority
            failures = self._failures
        self.notify()
        # and its passes no longer stand aside for searches in flight (a search may be what waits here)
        with PASS_GATE.waited_work(), self._cond:
            try:
                while self._store.pending(ns_id, dense_only=dense_only and ns_id is not None) > 0:
                    if self.error is not None and self._failures > failures:
                        return False
                    if self._stop and (self._thread is None or not self._thread.is_alive()):
                        return False
                    remaining = None if deadline is None else deadline - time.monotonic()
                    if remaining is not None and remaining <= 0:
                        return False
                    # still queued: wake the thread again (work another writer process had claimed may be free)
                    self._wake = True
                    self._cond.notify_all()
                    self._cond.wait(0.25 if remaining is None else min(remaining, 0.25))
            finally:
                self._waiting -= 1
        return True

    def settle(self, ns_id: int | None, wait_s: float, *, dense_only: bool = False) -> tuple[int, float | None]:
        """Read-your-writes before a search: wait up to ``wait_s`` for the namespace's queued vectors; returns
        ``(records still pending, milliseconds waited or None when nothing was pending)``. A failing embedder
        does not fail the search: it searches what is indexed and reports the rest as pending. ``dense_only``:
        wait only for the records that still need a vector, not for sparse encodings alone (a search that does
        not read them); the records still pending count both."""
        pending = self._store.pending(ns_id) if ns_id is not None else 0
        waiting = self._store.pending(ns_id, dense_only=True) if pending and dense_only and self.background \
            else pending
        if not waiting or wait_s <= 0:
            return pending, None
        t0 = time.perf_counter()
        with contextlib.suppress(Exception):
            self.wait(ns_id, wait_s, dense_only=dense_only)
        return self._store.pending(ns_id), round((time.perf_counter() - t0) * 1000, 3)

    def close(self, timeout: float | None) -> bool:
        """Let the queue empty for up to ``timeout`` seconds, then stop after the current batch.

        Returns True when nothing was left queued; otherwise the rest stays in the queue table and the next
        writer open resumes it."""
        done = True
        if self.background and self._thread is not None and self._thread.is_alive():
            done = self.wait(None, timeout)
        with self._cond:
            self._stop = True
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join()
        for pool in (self._pool, self._urgent_pool):
            if pool is not None:
                pool.shutdown(wait=True)
        return done

    def _run(self) -> None:
        _lower_priority()
        failures = 0
        while True:
            with self._cond:
                if self._stop:
                    return
                self._wake = False
            try:
                done = self.drain_once()
                failures = 0
            except Exception as exc:  # noqa: BLE001 - the embedder is down: kept queued, reported, retried later
                failures += 1
                log.warning("memory-ext indexer: the embedder failed on a whole batch and on a probe text (%s: %s);"
                            " the work stays queued, retrying", type(exc).__name__, exc)
                with self._cond:
                    self.error = exc
                    self._failures += 1
                    self._cond.notify_all()
                    if not self._stop:
                        self._cond.wait(min(30.0, 0.2 * 2 ** min(failures, 8)))
                continue
            with self._cond:
                self._cond.notify_all()
                if done == 0 and not self._wake and not self._stop:
                    self._cond.wait(self._retry_in())

    # -- draining --------------------------------------------------------------------------------------------
    def drain(self) -> int:
        """Index everything queued, in the calling thread; returns the number of records done (a record that
        fails is retried after its back-off, then quarantined: this returns within a few seconds of it)."""
        total = 0
        while True:
            try:
                n = self.drain_once()
            except Exception as exc:  # recorded for health() (inline indexing has no _run), re-raised
                with self._cond:
                    self.error = exc
                    self._failures += 1
                raise
            total += n
            if n:
                continue
            pause = self._retry_in()
            if pause is None:
                return total
            time.sleep(pause)

    def _retry_in(self) -> float | None:
        """Seconds until the next failed record may be tried again (None: no record is failing)."""
        with self._cond:
            if not self._failing:
                return None
            return max(0.0, min(at for _, at, _ in self._failing.values()) - time.monotonic())

    def failing(self) -> dict[int, tuple[int, str]]:
        """Records that failed and wait for their next attempt: ``rid -> (attempts, last error)``."""
        with self._cond:
            return {rid: (n, err) for rid, (n, _, err) in self._failing.items()}

    def drain_once(self) -> int:
        """Index one batch of the oldest queued records; returns how many were handled: written, or quarantined
        (0: nothing is queued but records waiting for their retry).

        A batch the embedder fails on is split until the failing records are alone; the others are written at
        once. A record that fails alone is tried again without its run of turns, then from its sentences
        (:meth:`_fallback`); if that fails too it waits ``retry_s`` (then 4x longer each time) before its next
        attempt and, after ``quarantine_after`` attempts, moves to the store's quarantine with its error: it is
        found by every channel that needs no model, searches of its namespace say so (:meth:`health`), and
        ``reindex`` retries it. Only when every record of a batch and a probe text fail (the model or its server
        is down) does this raise: the work then stays queued."""
        with self._cond:
            waiting = set(self._failing)
        if waiting:  # forgotten meanwhile, or done by another process: no longer waited for
            queued = {i[0] for i in self._store.queued(self._store.reader(), len(waiting), sorted(waiting))}
            with self._cond:
                for rid in waiting - queued:
                    self._failing.pop(rid, None)
        with self._drain_lock, self._store.claimed_work(self._batch + len(waiting)) as claimed:
            now = time.monotonic()
            with self._cond:
                resting = {rid for rid, (_, at, _) in self._failing.items() if at > now}
            items = [i for i in claimed if i[0] not in resting][: self._batch]
            if not items:
                return 0
            if self._context:
                # a turn's window joins its batch (a write queues its turns before their windows): both come
                # out of one pass over the run of turns
                have = {i[0] for i in items}
                items = list(items) + [w for w in self._store.queued_windows(self._store.reader(),
                                                                             [i[0] for i in items if i[2]])
                                       if w[0] not in have]
                items = [i for i in items if i[0] not in resting]
            sources = self._store.work_sources([i[0] for i in items])
            dense, sparse, failed = self._compute_isolating(items, sources)
            if failed and len(failed) == len(items) and not self._probe():
                raise next(iter(failed.values()))  # the embedder is down: everything stays queued
            quarantine = self._note_failures(failed)
            namespaces = {i[1] for i in items}
            lock = self._store.namespace_lock(self._store.namespace_key(next(iter(namespaces)))) \
                if len(namespaces) == 1 else self._store.write_lock
            with lock, self._store.transaction("index vectors") as conn:
                live = {i[0]: i for i in self._store.queued(conn, len(items), [i[0] for i in items])}
                self._write(conn, {rid: i for rid, i in live.items() if rid not in failed}, sources, dense, sparse)
                if quarantine:
                    held = [live[rid] for rid in quarantine if rid in live]
                    self._store.quarantine(conn, held, {rid: quarantine[rid][1] for rid in quarantine},
                                           {rid: quarantine[rid][0] for rid in quarantine})
            if quarantine:
                self.quarantined_now += len(quarantine)
                log.warning("memory-ext indexer: %d record(s) quarantined after %d attempts (%s); they are found by"
                            " keyword only until `reindex` retries them", len(quarantine), self.quarantine_after,
                            next(iter(quarantine.values()))[1])
            with self._cond:
                self.error = None
                for rid in live:
                    if rid not in failed:
                        self._failing.pop(rid, None)
            self.batches += 1
            return len(items) - len(failed) + len(quarantine)

    def _note_failures(self, failed: dict[int, BaseException]) -> dict[int, tuple[int, str]]:
        """Count an attempt for each record that failed alone and set its back-off; returns those that reached
        ``quarantine_after`` attempts: ``rid -> (attempts, error)``."""
        now = time.monotonic()
        out: dict[int, tuple[int, str]] = {}
        with self._cond:
            for rid, exc in failed.items():
                attempts = self._failing.get(rid, (0, 0.0, ""))[0] + 1
                message = f"{type(exc).__name__}: {exc}"
                if attempts >= self.quarantine_after:
                    self._failing.pop(rid, None)
                    out[rid] = (attempts, message)
                else:
                    self._failing[rid] = (attempts, now + self.retry_s * 4 ** (attempts - 1), message)
        return out

    def _probe(self) -> bool:
        """Whether the embedder still embeds a short text (False: it is down, not one record's input)."""
        if self._embedder is None:
            return False
        try:
            check_vectors(self._embedder, np.asarray(self._embedder.embed_documents(["ok"]), np.float32), 1)
        except Exception:  # noqa: BLE001 - the answer itself: the embedder fails on anything
            return False
        return True

    def _compute_isolating(self, items: Sequence[tuple[int, int, int, int]],
                           sources: dict[int, tuple[str, str, list[int], int | None]]
                           ) -> tuple[dict[int, np.ndarray], dict[int, tuple[np.ndarray, np.ndarray]],
                                      dict[int, BaseException]]:
        """:meth:`_compute`, splitting a batch that fails in halves until each failing record is alone (then
        :meth:`_fallback`); returns the vectors, the sparse encodings and the records that failed with why."""
        try:
            dense, sparse = self._compute(items, sources)
            return dense, sparse, {}
        except Exception as exc:  # noqa: BLE001 - isolated below, and reported per record
            if len(items) == 1:
                return self._fallback(items[0], sources, exc)
            mid = len(items) // 2
            d1, s1, f1 = self._compute_isolating(items[:mid], sources)
            d2, s2, f2 = self._compute_isolating(items[mid:], sources)
            return {**d1, **d2}, {**s1, **s2}, {**f1, **f2}

    def _fallback(self, item: tuple[int, int, int, int], sources: dict[int, tuple[str, str, list[int], int | None]],
                  exc: BaseException) -> tuple[dict[int, np.ndarray], dict[int, tuple[np.ndarray, np.ndarray]],
                                               dict[int, BaseException]]:
        """One record the embedder failed on: its own text without its run of turns, then its sentences (the
        dense vector their normalised mean, the sparse encoding their element-wise maximum: the max-pooling a
        whole pass does); ``({}, {}, {rid: error})`` when both fail."""
        rid = item[0]
        try:
            dense, sparse = self._compute([item], sources, context=False)
            return dense, sparse, {}
        except Exception:  # noqa: BLE001 - next fallback
            pass
        if rid not in sources or self._embedder is None:
            return {}, {}, {rid: exc}
        try:
            index_text, text, _, _ = sources[rid]
            dense_out: dict[int, np.ndarray] = {}
            sparse_out: dict[int, tuple[np.ndarray, np.ndarray]] = {}
            if item[2] and self._vectors:
                parts = _pieces(index_text)
                vecs = check_vectors(self._embedder, np.asarray(self._embedder.embed_documents(parts), np.float32),
                                     len(parts))
                mean = vecs.mean(axis=0)
                dense_out[rid] = (mean / max(float(np.linalg.norm(mean)), 1e-12)).astype(np.float32)
            if item[3] and self._sparse and isinstance(self._embedder, SparseEmbedder):
                parts = _pieces(text)
                pooled: dict[int, float] = {}
                for idx, val in self._embedder.embed_sparse(parts):
                    for i, v in zip(np.asarray(idx).tolist(), np.asarray(val).tolist(), strict=True):
                        pooled[i] = max(pooled.get(i, 0.0), v)
                keys = sorted(pooled, key=lambda i: -pooled[i])
                [sparse_out[rid]] = normalise([(np.asarray(keys, np.int32),
                                                np.asarray([pooled[i] for i in keys], np.float32))])
            return dense_out, sparse_out, {}
        except Exception:  # noqa: BLE001 - reported with the first error
            return {}, {}, {rid: exc}

    def _compute(self, items: Sequence[tuple[int, int, int, int]],
                 sources: dict[int, tuple[str, str, list[int], int | None]], *, context: bool | None = None
                 ) -> tuple[dict[int, np.ndarray], dict[int, tuple[np.ndarray, np.ndarray]]]:
        """The model work of a batch: embedded dense vectors and sparse encodings, by rid (``context=False``: each
        text on its own, never in a run of turns)."""
        in_batch = {rid for rid, _, d, _ in items if d}
        wanted: list[int] = []
        for rid, _, d, _ in items:
            if d in (Work.MEAN, Work.COPY) and rid in sources:
                wanted += [s for s in (sources[rid][2] if d == Work.MEAN else [sources[rid][3]]) if s is not None]
        stored = self._store.stored_vectors(self._store.reader(), wanted)
        to_embed: list[int] = []
        for rid, _, d, _ in items:
            if rid not in sources or not d or not self._vectors:
                continue
            if d == Work.EMBED:
                to_embed.append(rid)
            else:  # a mean or a copy needs its source vectors: stored, or made in this batch
                src = sources[rid][2] if d == Work.MEAN else [sources[rid][3]]
                if not any(s is not None and (s in stored or s in in_batch) for s in src):
                    to_embed.append(rid)  # no source vector (turns written without vectors): embed it
        to_sparse = [rid for rid, _, _, sp in items if sp and rid in sources and self._sparse]
        if (self._context if context is None else context) and self._vectors:
            return self._compute_in_context(sources, to_embed, to_sparse)
        dense: dict[int, np.ndarray] = {}
        texts: list[str] = []
        rids: list[int] = []
        for rid in to_embed:
            text = sources[rid][0]
            if text in self._known:
                dense[rid] = self._known.pop(text)
            else:
                rids.append(rid)
                texts.append(text)
        embedder = self._embedder
        assert embedder is not None or not (texts or to_sparse)

        def dense_job(part: list[str]) -> tuple[str, Any]:
            return "dense", embedder.embed_documents(part)  # type: ignore[union-attr]

        def sparse_job(part: list[str]) -> tuple[str, Any]:
            return "sparse", embedder.embed_sparse(part)  # type: ignore[union-attr]

        sparse_texts = [sources[rid][1] for rid in to_sparse]
        jobs: list[tuple[Callable[[list[str]], tuple[str, Any]], list[str]]] = \
            [(dense_job, texts[i: i + CHUNK]) for i in range(0, len(texts), CHUNK)] + \
            [(sparse_job, sparse_texts[i: i + CHUNK]) for i in range(0, len(sparse_texts), CHUNK)]
        # a caller waiting for the queue gets its work at normal priority; otherwise it runs in the background
        pool = self._urgent_pool if self._waiting and self._urgent_pool is not None else self._pool
        results = list(pool.map(lambda job: job[0](job[1]), jobs)) \
            if pool is not None and (len(jobs) > 1 or pool is self._urgent_pool) else [fn(part) for fn, part in jobs]
        dense_rows = [r[1] for r in results if r[0] == "dense"]
        if rids:
            assert self._embedder is not None
            vectors = check_vectors(self._embedder, np.concatenate([np.asarray(v, np.float32) for v in dense_rows]),
                                    len(rids))
            dense.update(zip(rids, vectors, strict=True))
        pairs = [p for r in results if r[0] == "sparse" for p in r[1]]
        sparse = dict(zip(to_sparse, normalise(pairs), strict=True)) if to_sparse else {}
        return dense, sparse

    def _compute_in_context(self, sources: dict[int, tuple[str, str, list[int], int | None]], to_embed: list[int],
                            to_sparse: list[int]
                            ) -> tuple[dict[int, np.ndarray], dict[int, tuple[np.ndarray, np.ndarray]]]:
        """With an embedder that shows its token states: runs of consecutive turns (``window_vectors: context``)
        or each window's text (``embed``) encoded once, windows and turns pooled from them (see
        :mod:`memory_ext.ingest.contextual`); derived records that are not copies are embedded as usual."""
        embedder = self._embedder
        assert isinstance(embedder, SegmentEmbedder)
        all_windows = {rid: sources[rid][2] for rid in to_embed if len(sources[rid][2]) >= 2}
        turn_rids = {rid for rid in to_embed + to_sparse if sources[rid][2] == [rid]}
        others = [rid for rid in to_embed if rid not in all_windows and rid not in turn_rids]
        missing = sorted({m for members in all_windows.values() for m in members} - set(sources))
        texts = {rid: (src[0], src[1]) for rid, src in {**sources, **self._store.work_sources(missing)}.items()}
        # a window whose member turn is gone (forgotten meanwhile) is embedded from its own text below
        windows = {w: members for w, members in all_windows.items() if all(m in texts for m in members)}
        pool = self._urgent_pool if self._waiting and self._urgent_pool is not None else self._pool

        def map_fn(fn: Callable[[Any], Any], parts: list[Any]) -> list[Any]:
            return list(pool.map(fn, parts)) if pool is not None else [fn(p) for p in parts]

        sparse_fn = embedder.embed_sparse if isinstance(embedder, SparseEmbedder) else None
        wanted = set(to_embed)
        result = encode_in_context(embedder, windows=windows, turns=texts,
                                   want_dense={r for r in turn_rids if r in wanted},
                                   want_sparse={r for r in to_sparse if r in turn_rids}, sparse_fn=sparse_fn,
                                   max_turns=self._run_turns, sentence_weight=self._sentence_weight,
                                   map_fn=map_fn)
        dense = result.dense
        rest = others + [w for w in all_windows if w not in dense]
        if rest:
            vectors = check_vectors(embedder, embedder.embed_documents([sources[r][0] for r in rest]), len(rest))
            dense.update(zip(rest, vectors, strict=True))
        sparse_pairs = [(rid, result.sparse[rid]) for rid in to_sparse if rid in result.sparse]
        left = [rid for rid in to_sparse if rid not in result.sparse]
        if left and sparse_fn is not None:
            sparse_pairs += list(zip(left, sparse_fn([sources[r][1] for r in left]), strict=True))
        rids = list(dense)
        if rids:
            dense = dict(zip(rids, check_vectors(embedder, np.stack([dense[r] for r in rids]), len(rids)),
                             strict=True))
        sparse = dict(zip([r for r, _ in sparse_pairs], normalise([p for _, p in sparse_pairs]), strict=True))
        return dense, sparse

    def _write(self, conn: Connection, live: dict[int, tuple[int, int, int, int]],
               sources: dict[int, tuple[str, str, list[int], int | None]], dense: dict[int, np.ndarray],
               sparse: dict[int, tuple[np.ndarray, np.ndarray]]) -> None:
        """Write what is still queued (in rid order: means and copies see the vectors made before them)."""
        need = {s for rid, (_, _, d, _) in live.items()
                if rid in sources and rid not in dense and d in (Work.MEAN, Work.COPY)
                for s in (sources[rid][2] if d == Work.MEAN else [sources[rid][3]])}
        have = self._store.stored_vectors(conn, [s for s in need if s is not None and s not in dense])
        by_ns: dict[int, tuple[list[int], list[np.ndarray], list[int], list[tuple[np.ndarray, np.ndarray]]]] = {}
        done: list[int] = []
        for rid in sorted(live):
            _, ns_id, d, sp = live[rid]
            v_rids, v_rows, s_rids, s_rows = by_ns.setdefault(ns_id, ([], [], [], []))
            vector = dense.get(rid)
            if vector is None and d in (Work.MEAN, Work.COPY) and rid in sources and self._vectors:
                src = sources[rid][2] if d == Work.MEAN else [sources[rid][3]]
                rows = [dense[s] if s in dense else have[s] for s in src if s in dense or s in have]
                if rows:
                    mean = np.mean(rows, axis=0)
                    norm = float(np.linalg.norm(mean))
                    vector = (mean / norm if norm > 0 else mean).astype(np.float32)
                    dense[rid] = vector
            if d and self._vectors and vector is None:
                continue  # its source vanished under us: stays queued, embedded on the next round
            if sp and self._sparse and rid in sources and rid not in sparse:
                continue  # flagged for a sparse encoding after this batch was claimed: done on the next round
            if vector is not None:
                v_rids.append(rid)
                v_rows.append(vector)
            if sp and rid in sparse:
                s_rids.append(rid)
                s_rows.append(sparse[rid])
            done.append(rid)
        for ns_id, (v_rids, v_rows, s_rids, s_rows) in by_ns.items():
            if v_rids:
                assert self._embedder is not None
                matrix = np.stack(v_rows).astype(np.float32)
                self._store.insert_embeddings(conn, ns_id, v_rids, matrix, self._embedder.id,
                                              vector_kind=self.vector_kind)
            batch = RecordBatch((), vectors=np.stack(v_rows).astype(np.float32) if v_rids else None,
                                vector_rids=v_rids, sparse=s_rows if s_rids else None, sparse_rids=s_rids)
            for index in self._indexes:
                index.index(conn, ns_id, batch)
        self._store.dequeue(conn, done)
