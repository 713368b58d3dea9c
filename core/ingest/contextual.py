"""Encode a batch's turns and windows in context: each run of consecutive turns goes through the model once.

With an embedder that exposes its token states (:class:`memory_ext.embed.SegmentEmbedder`, the default e5), the
indexer does not embed every ±1 window's text (three turns of text, so about three passes per turn) next to every
turn. It strings the turns of overlapping windows together into *runs* of at most ``max_turns`` turns, encodes
each run once, and reads off

- each window's vector: the mean of its member turns' token states (in the run's context),
- each turn's vector: the mean of its own token states (``turns="context"``), or a pass of its own
  (``turns="own"``),
- each turn's sparse encoding: the SAE head over the tokens of its text (the turn without the speaker prefix).

With ``sentence_weight`` above 0 (``ingest.sentence_vectors``), each turn's vector also takes in its sentences: every
sentence of its text (a trailing bracketed note such as an image caption is one of its own), with the turn's
speaker prefix, is encoded on its own, and the turn's vector becomes the normalised ``context + weight * mean``
of them. A pooled vector of a turn that says several things is near none of them; its sentences' vectors keep
each one findable.

A run starts again (two turns back) when it would pass ``max_turns``, so every window sees its neighbours. Turns
that belong to no window in the batch (the newest turn of a namespace waits for its successor before it gets
one) are encoded on their own.

>>> runs = plan_runs([[1, 2], [1, 2, 3], [2, 3, 4], [3, 4, 5], [9, 10]], max_turns=4)
>>> runs
[[1, 2, 3, 4], [3, 4, 5], [9, 10]]
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..embed import SegmentEmbedder
from ..store.repos.meta import TURN_VECTORS_KEY
from .turns import sentences_of

__all__ = ["MIXED", "TURN", "TURN_VECTORS_KEY", "ContextResult", "encode_in_context", "plan_runs", "reads_in_context",
           "sentence_mixed", "sentence_pieces", "stored_vector_kind", "vector_kind"]

MIXED = "sentence-mixed"
"""Turn vectors with their sentences mixed in (:func:`sentence_mixed`)."""
TURN = "turn"
"""One vector per turn, its own (``hashing``, ``ingest.sentence_vectors: 0``, ``window_vectors: mean``)."""

_NOTE = re.compile(r"\s*(\[[^\[\]]+\])\s*$")


def sentence_pieces(index_text: str, text: str) -> list[str]:
    """The texts a turn's sentence vectors are made of: each sentence of ``text`` (a trailing bracketed note,
    such as ``[image: a dog on a beach]``, one of its own), behind the speaker prefix ``index_text`` puts before
    ``text``.

    >>> text = "I moved to Lisbon. I love it! [image: a tram]"
    >>> sentence_pieces("Maya: " + text, text)
    ['Maya: I moved to Lisbon.', 'Maya: I love it!', 'Maya: [image: a tram]']
    """
    prefix = index_text[: len(index_text) - len(text)] if text and index_text.endswith(text) else ""
    body, note = text, None
    match = _NOTE.search(body)
    if match and match.start() > 0:
        note, body = match.group(1), body[: match.start()]
    parts = sentences_of(body) or ([body.strip()] if body.strip() else [])
    if note:
        parts.append(note)
    return [prefix + part.strip() for part in parts]


def plan_runs(windows: Sequence[Sequence[int]], max_turns: int) -> list[list[int]]:
    """Group windows (each its member turns' ids, in conversation order) into runs of consecutive turns.

    A window joins the current run when its members other than the newest are the run's last turns; the run
    then grows by the newest member. Each window's members end up together in one run.
    """
    runs: list[list[int]] = []
    for members in sorted(windows, key=lambda m: (m[-1], m[0])):
        run = runs[-1] if runs else None
        if run is not None and set(members) <= set(run):
            continue
        head = list(members[:-1])
        if run is not None and len(run) < max_turns and run[len(run) - len(head):] == head:
            run.append(members[-1])
        else:
            runs.append(list(members))
    return runs


@dataclass
class ContextResult:
    """Vectors (L2-normalised) and sparse encodings made by :func:`encode_in_context`, by record id."""

    dense: dict[int, np.ndarray] = field(default_factory=dict)
    sparse: dict[int, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)
    sentences: dict[int, np.ndarray] = field(default_factory=dict)
    """Turn rid -> the mean of its sentences' vectors (with ``sentence_weight``; folded into ``dense``)."""


def _unit(v: np.ndarray) -> np.ndarray:
    norm = float(np.linalg.norm(v))
    return (v / norm if norm > 0 else v).astype(np.float32)


def encode_in_context(embedder: SegmentEmbedder, *, windows: dict[int, list[int]],
                      turns: dict[int, tuple[str, str]], want_dense: set[int], want_sparse: set[int],
                      sparse_fn: Callable[[list[str]], list[tuple[np.ndarray, np.ndarray]]] | None = None,
                      max_turns: int = 3, sentence_weight: float = 0.0,
                      map_fn: Callable[[Callable[[Any], ContextResult], list[Any]], list[ContextResult]] | None = None
                      ) -> ContextResult:
    """Encode ``windows`` (window rid -> member turn rids in order) and the turns of ``want_dense`` (turn rids),
    given every turn's ``(index_text, text)`` in ``turns``; ``sparse_fn`` encodes the raw texts of
    ``want_sparse``.

    ``max_turns`` 3 (``window_vectors: embed``) encodes each window's text on its own: its vector is exactly the
    embedder's vector of that text. More (``window_vectors: context``) strings overlapping windows into runs
    and pools each window from its members' tokens (a run that is a single window — a chat adding a turn at a
    time — still gets the window text's own vector).
    A turn's vector is the mean of its tokens in the pass where it has the most context (its own window); a turn
    in no window of the batch is embedded alone. ``map_fn`` (like ``ThreadPoolExecutor.map``) runs the work as
    two jobs of about equal size (half the runs, half the sparse encodings and lone turns each): numpy and the C
    engine release the GIL, so the jobs share the cores. ``sentence_weight`` above 0 mixes the mean of each
    turn's sentence vectors (:func:`sentence_pieces`, encoded in the same two jobs) into its vector."""
    exact = max_turns <= 3
    runs = [list(m) for m in windows.values()] if exact else plan_runs(list(windows.values()), max_turns)
    home: dict[int, tuple[int, int, int]] = {}  # turn rid -> (run, position, margin): where it has most context
    for r, run in enumerate(runs):
        for pos, rid in enumerate(run):
            margin = min(pos, len(run) - 1 - pos)
            if rid not in home or margin > home[rid][2]:
                home[rid] = (r, pos, margin)
    run_of = dict(zip(windows, range(len(runs)), strict=True)) if exact else \
        {w: next(i for i, run in enumerate(runs) if set(members) <= set(run)) for w, members in windows.items()}
    alone = sorted(rid for rid in want_dense if rid not in home)

    def run_job(rs: list[int]) -> ContextResult:
        """Encode runs ``rs``: each run is one text whose segments are its turns' index texts, in order."""
        res = ContextResult()
        docs = [[turns[rid][0] for rid in runs[r]] for r in rs]
        encoded = dict(zip(rs, embedder.encode(docs), strict=True)) if docs else {}
        for w, r in run_of.items():
            if r in encoded:  # a run that is just this window is the window's text: e5's own pooling
                whole = exact or runs[r] == list(windows[w])
                res.dense[w] = _unit(encoded[r].mean() if whole else
                                     encoded[r].mean([runs[r].index(m) for m in windows[w]]))
        for rid in want_dense:
            if rid in home and home[rid][0] in encoded:
                r, pos, _ = home[rid]
                res.dense[rid] = _unit(encoded[r].mean([pos]))
        return res

    pieces = {rid: sentence_pieces(*turns[rid]) for rid in sorted(want_dense)} if sentence_weight > 0 else {}

    def side_job(part: tuple[list[int], list[int], list[int]]) -> ContextResult:
        lone, sparse_rids, sentence_rids = part
        res = ContextResult()
        texts = [p for rid in sentence_rids for p in pieces[rid]]
        if texts:
            vecs = np.asarray(embedder.embed_documents(texts), dtype=np.float32)
            at = 0
            for rid in sentence_rids:
                n = len(pieces[rid])
                if n:
                    res.sentences[rid] = vecs[at: at + n].mean(axis=0)
                at += n
        if lone:
            vecs = embedder.embed_documents([turns[rid][0] for rid in lone])
            res.dense.update((rid, _unit(np.asarray(v, dtype=np.float32))) for rid, v in zip(lone, vecs, strict=True))
        if sparse_rids and sparse_fn is not None:
            res.sparse.update(zip(sparse_rids, sparse_fn([turns[r][1] for r in sparse_rids]), strict=True))
        return res

    def job(part: tuple[list[int], list[int], list[int], list[int]]) -> ContextResult:
        rs, lone, sparse_rids, sentence_rids = part
        res = run_job(rs) if rs else ContextResult()
        side = side_job((lone, sparse_rids, sentence_rids))
        res.dense.update(side.dense)
        res.sparse.update(side.sparse)
        res.sentences.update(side.sentences)
        return res

    # two jobs of about equal work: half the runs (by text), half the sparse encodings, lone turns and sentences
    sizes = [sum(len(turns[rid][0]) for rid in run) for run in runs]
    half, acc, cut = sum(sizes) / 2, 0, len(runs)
    for i, size in enumerate(sizes):
        acc += size
        if acc >= half:
            cut = i + 1
            break
    sparse_rids = sorted(want_sparse) if sparse_fn is not None else []
    sentence_rids = sorted(pieces)
    parts = [(list(range(cut)), alone[::2], sparse_rids[::2], sentence_rids[::2]),
             (list(range(cut, len(runs))), alone[1::2], sparse_rids[1::2], sentence_rids[1::2])]
    jobs = [p for p in parts if any(p)]
    results = list(map_fn(job, jobs)) if map_fn is not None and len(jobs) > 1 else [job(p) for p in jobs]
    out = ContextResult()
    for res in results:
        out.dense.update(res.dense)
        out.sparse.update(res.sparse)
        out.sentences.update(res.sentences)
    for rid, mean in out.sentences.items():
        if rid in out.dense:
            out.dense[rid] = _unit(out.dense[rid] + sentence_weight * mean)
    return out


def reads_in_context(window_vectors: str, embedder: object) -> bool:
    """Whether the indexer reads turns from passes over their windows (:func:`encode_in_context`): an embedder
    that shows its token states and ``ingest.window_vectors`` ``context`` or ``embed``."""
    return window_vectors in ("context", "embed") and isinstance(embedder, SegmentEmbedder)


def sentence_mixed(window_vectors: str, sentence_weight: float, embedder: object) -> bool:
    """Whether the indexer mixes each turn's sentences into its vector: it reads turns in context
    (:func:`reads_in_context`) and ``ingest.sentence_vectors`` is above 0."""
    return sentence_weight > 0 and reads_in_context(window_vectors, embedder)


def vector_kind(window_vectors: str, sentence_weight: float, embedder: object) -> str:
    """The kind of turn vectors the indexer makes with these settings: :data:`MIXED` or :data:`TURN`.

    >>> vector_kind("context", 2.0, None)
    'turn'
    """
    return MIXED if sentence_mixed(window_vectors, sentence_weight, embedder) else TURN


def stored_vector_kind(meta: Callable[[str], str | None]) -> str | None:
    """The kind of turn vectors a store holds, from its ``meta`` getter: None while it has none (no embedder
    recorded), the recorded kind, or :data:`TURN` for a store indexed before the kind was recorded (sentences
    were first mixed in on 2026-12-05; stores from before hold one vector per turn until they are reindexed).

    >>> stored_vector_kind({"embedder_id": "e5", "turn_vectors": "sentence-mixed"}.get)
    'sentence-mixed'
    >>> stored_vector_kind({"embedder_id": "e5"}.get), stored_vector_kind({}.get)
    ('turn', None)
    """
    if meta("embedder_id") is None:
        return None
    return meta(TURN_VECTORS_KEY) or TURN
