"""Reranking: the ``Reranker`` protocol, a fair candidate pool, and a reranking step that degrades, never empties.

An optional reranker (a cross-encoder, an LLM, any scoring function) re-scores a pool of candidates after fusion.
The pool is drawn fairly from every channel (:func:`fair_pool`): round-robin over each channel's own ranking, then
topped up from the fused order, so a channel whose best records sit far down the fused order still gets its best
ones looked at. :func:`apply_rerank` combines the reranker's scores with the fused scores
(``final = weight · z(rerank) + (1 − weight) · z(fused)``, both z-standardised within the pool) and puts the pool,
reranked, in front of the rest of the fused order.

When the reranker raises, times out, or returns the wrong number of scores or non-finite ones, the outcome keeps
the fused order and carries a :class:`~memory_ext.models.ChannelError` with ``channel="rerank"`` saying why: the
result is degraded, not empty. Nothing is remembered between calls, so a reranker that failed once is tried again
at the next search (it is never switched off for the rest of the process).

Plugging in a cross-encoder (``sentence-transformers`` is not a dependency of memory-ext; install it yourself):

.. code-block:: python

    from sentence_transformers import CrossEncoder
    model = CrossEncoder("cross-encoder/ms-marco-MiniLM-L-6-v2")
    reranker = CallableReranker(lambda q, texts: model.predict([(q, t) for t in texts]), id="ms-marco-MiniLM")

Any :class:`~memory_ext.llm.LLM` reranks through :class:`LLMReranker`.

>>> def overlap(query, texts):  # a toy scoring function: words shared with the query
...     words = set(query.lower().split())
...     return [len(words & set(t.lower().split())) for t in texts]
>>> reranker = CallableReranker(overlap, id="overlap")
>>> candidates = [Candidate(1, "we talked about the weather", 2.0), Candidate(2, "Lena moved to Lisbon", 1.0),
...               Candidate(3, "Lisbon is sunny", 0.5)]
>>> outcome = apply_rerank(reranker, "where did Lena move", candidates, weight=1.0, timeout=None)
>>> outcome.order, outcome.error
([2, 1, 3], None)
>>> broken = CallableReranker(lambda q, texts: [1.0], id="broken")  # one score for three candidates
>>> outcome = apply_rerank(broken, "where did Lena move", candidates, timeout=None)
>>> outcome.order, outcome.error.channel, outcome.error.error_type
([1, 2, 3], 'rerank', 'InvalidScores')
"""

from __future__ import annotations

import contextlib
import json
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import numpy as np

from ..errors import ConfigError
from ..llm import LLM, InvalidAnswer, ask_json, call_with_timeout
from ..models import ChannelError

__all__ = [
    "CallableReranker",
    "Candidate",
    "InvalidScores",
    "LLMReranker",
    "RerankOutcome",
    "Reranker",
    "apply_rerank",
    "fair_pool",
]

RERANK_CHANNEL = "rerank"
LLM_SCORE_MAX = 10


@dataclass(frozen=True)
class Candidate:
    """One record to rerank: the engine's record id, its text, and its fused score before reranking."""

    key: int
    text: str
    score: float


@runtime_checkable
class Reranker(Protocol):
    """What memory-ext needs of a reranker: one relevance score per candidate, higher is better.

    ``id`` names the model (it appears in error messages). ``rerank`` returns exactly ``len(candidates)`` finite
    numbers in the candidates' order; their scale does not matter (they are standardised within the pool). It
    raises on failure (any exception type); ``timeout`` is the seconds the caller will wait —
    :func:`apply_rerank` enforces it either way.
    """

    id: str

    def rerank(self, query: str, candidates: Sequence[Candidate], *, timeout: float | None = None) -> list[float]:
        """Relevance scores of ``candidates`` for ``query``, one per candidate, in order."""
        ...


class InvalidScores(InvalidAnswer):
    """A reranker's answer is unusable: wrong number of scores, non-numbers, NaN or infinite values."""


# ------------------------------------------------------------------------------------------------- the pool


def fair_pool(rankings: Mapping[str, Sequence[int]], fused_order: Sequence[int], size: int) -> list[int]:
    """A pool of up to ``size`` keys drawn round-robin from every channel's ranking, topped up from the fused order.

    - ``rankings`` — channel name -> that channel's keys, best first. Channels take turns in the order of their
      names (so the pool does not depend on the order the mapping was filled in); each turn adds the channel's
      best key not already in the pool. A channel that runs out drops out; the others go on.
    - ``fused_order`` — every eligible key, best first. Keys a channel ranks that are not in it (filtered out,
      not rankable) are skipped. When the channels run dry the pool is topped up from it.

    The pool is returned in fused order (so the fused order of the pool is the pool itself). Deterministic.

    >>> fair_pool({"dense": [1, 2, 3], "keyword": [9, 8, 1]}, fused_order=[1, 2, 3, 4, 5, 6, 7, 8, 9], size=4)
    [1, 2, 8, 9]
    >>> fair_pool({"dense": [1], "keyword": []}, fused_order=[3, 1, 2], size=2)
    [3, 1]
    """
    if isinstance(size, bool) or not isinstance(size, int):
        raise TypeError(f"pool size must be an integer, got {size!r}")
    position: dict[int, int] = {}
    for i, key in enumerate(fused_order):
        position.setdefault(key, i)
    size = min(size, len(position))
    if size <= 0:
        return []
    chosen: set[int] = set()
    cursors = {name: 0 for name in rankings}
    active = sorted(rankings, key=str)
    while active and len(chosen) < size:
        still: list[str] = []
        for name in active:
            if len(chosen) == size:
                break
            ranking, i = rankings[name], cursors[name]
            while i < len(ranking) and (ranking[i] in chosen or ranking[i] not in position):
                i += 1
            if i < len(ranking):
                chosen.add(ranking[i])
                i += 1
            cursors[name] = i
            if i < len(ranking):
                still.append(name)
        active = still
    for key in position:
        if len(chosen) == size:
            break
        chosen.add(key)
    return sorted(chosen, key=position.__getitem__)


# ------------------------------------------------------------------------------------------- the reranking


@dataclass(frozen=True)
class RerankOutcome:
    """What :func:`apply_rerank` returns.

    - ``order`` — keys, best first: the pool reranked, followed by the rest of the fused order;
    - ``scores`` — the final score of each pool key (what the pool was ordered by); on failure, the fused scores;
    - ``error`` — a ``ChannelError(channel="rerank")`` when the reranker failed, timed out or returned unusable
      scores; ``order`` is then the fused order;
    - ``rerank_scores`` — the reranker's own scores per pool key (empty when it was not called or failed).
    """

    order: list[int]
    scores: dict[int, float]
    error: ChannelError | None
    rerank_scores: dict[int, float] = field(default_factory=dict)


def _z(values: np.ndarray) -> np.ndarray:
    """z-scores within the array (a constant array gives zeros)."""
    sd = float(values.std()) if values.size else 0.0
    return (values - values.mean()) / sd if sd > 0 else np.zeros_like(values)


def _finite(values: np.ndarray) -> np.ndarray:
    """Non-finite fused scores (``-inf`` for "unscored") clamped to the finite range, so z-scores stay finite."""
    ok = np.isfinite(values)
    if ok.all():
        return values
    lo, hi = (float(values[ok].min()), float(values[ok].max())) if ok.any() else (0.0, 0.0)
    return np.where(np.isnan(values) | (values == -np.inf), lo, np.where(values == np.inf, hi, values))


def _check_scores(result: object, n: int) -> np.ndarray:
    """A reranker's answer as ``n`` finite floats, or :class:`InvalidScores`."""
    if result is None or isinstance(result, (str, bytes)):
        raise InvalidScores(f"expected {n} scores, got {type(result).__name__}")
    try:
        arr = np.asarray(result, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise InvalidScores(f"scores are not numbers ({exc})") from None
    if arr.ndim == 2 and arr.shape[1] == 1:  # a (n, 1) model output
        arr = arr[:, 0]
    if arr.ndim != 1 or arr.shape[0] != n:
        raise InvalidScores(f"expected {n} scores, got {arr.shape[0] if arr.ndim == 1 else f'shape {arr.shape}'}")
    if not np.all(np.isfinite(arr)):
        raise InvalidScores("scores contain NaN or infinite values")
    return arr


def apply_rerank(reranker: Reranker, query: str, candidates: Sequence[Candidate], *, weight: float = 1.0,
                 timeout: float | None, fused_order: Sequence[int] | None = None) -> RerankOutcome:
    """Rerank ``candidates`` (the pool) with ``reranker``; on any reranker failure keep the fused order, say why.

    - ``weight`` in [0, 1] — ``final = weight · z(rerank) + (1 − weight) · z(fused)`` within the pool (z-scores
      of a constant pool are 0; non-finite fused scores count as the pool's lowest). With ``weight=0`` the
      reranker is not called and the order is the fused order;
    - ``timeout`` — seconds to wait for the reranker (``None``: no deadline); past it the fused order is kept;
    - ``fused_order`` — the whole fused order (keys, best first); the keys not in the pool follow the reranked
      pool in this order, and it is the order returned when the reranker fails. Without it the order covers
      the pool only, and the fused order is the candidates sorted by fused score (ties keep their input order).

    Never raises for a reranker failure (exception, timeout, wrong number of scores, NaN): the outcome has
    ``error`` set (``channel="rerank"``), the fused order and the fused scores. Stateless, so the next call
    tries the reranker again. Raises ``ValueError`` for bad arguments (weight out of range, duplicate keys).
    """
    if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not 0.0 <= weight <= 1.0:
        raise ValueError(f"rerank weight must be a number within [0, 1], got {weight!r}")
    keys = [c.key for c in candidates]
    if len(set(keys)) != len(keys):
        raise ValueError("rerank candidates have duplicate keys")
    given = np.array([float(c.score) for c in candidates], dtype=np.float64)
    fused = _finite(given)
    sort_key = np.where(np.isnan(given), -np.inf, given)  # unscored (NaN, -inf) last in the fused order
    if fused_order is not None:
        position: dict[int, int] = {}
        for i, key in enumerate(fused_order):
            position.setdefault(key, i)
        tail = len(position)
        rank_of = [position.get(k, tail) for k in keys]
        pool_fused = sorted(range(len(keys)), key=lambda i: (rank_of[i], -sort_key[i], i))
        in_pool = set(keys)
        rest = [k for k in position if k not in in_pool]
        full_fused = list(position) + [keys[i] for i in pool_fused if keys[i] not in position]
    else:
        pool_fused = sorted(range(len(keys)), key=lambda i: (-sort_key[i], i))
        rest = []
        full_fused = [keys[i] for i in pool_fused]
    tie = {i: r for r, i in enumerate(pool_fused)}  # ties in the final score keep the fused order

    def fused_outcome(exc: BaseException | None, scores: np.ndarray) -> RerankOutcome:
        error = None
        if exc is not None:
            error_type = type(exc).__name__
            reason = str(exc) or error_type
            error = ChannelError(channel=RERANK_CHANNEL, error_type=error_type,
                                 message=f"reranker {_name(reranker)!r} failed ({reason}); kept the fused order")
        return RerankOutcome(order=list(full_fused), scores={k: float(s) for k, s in zip(keys, scores, strict=True)},
                             error=error)

    if not candidates:
        return fused_outcome(None, given)
    if weight == 0.0:
        return fused_outcome(None, _z(fused))
    pool = list(candidates)
    try:
        result = call_with_timeout(lambda: reranker.rerank(query, pool, timeout=timeout), timeout,
                                   f"reranker {_name(reranker)!r}")
        raw = _check_scores(result, len(pool))
    except Exception as exc:  # noqa: BLE001  any reranker failure degrades to the fused order, reported
        return fused_outcome(exc, given)
    final = weight * _z(raw) + (1.0 - weight) * _z(fused)
    order = sorted(range(len(keys)), key=lambda i: (-final[i], tie[i]))
    return RerankOutcome(order=[keys[i] for i in order] + rest,
                         scores={k: float(s) for k, s in zip(keys, final, strict=True)}, error=None,
                         rerank_scores={k: float(s) for k, s in zip(keys, raw, strict=True)})


def _name(reranker: object) -> str:
    name = getattr(reranker, "id", None)
    return name if isinstance(name, str) and name else type(reranker).__name__


# -------------------------------------------------------------------------------------------- the rerankers


class CallableReranker:
    """A :class:`Reranker` from a plain function ``(query, texts) -> scores`` (a list, tuple or numpy array).

    Typically a cross-encoder: ``CallableReranker(lambda q, texts: model.predict([(q, t) for t in texts]),
    id="ms-marco-MiniLM")``. The function cannot be interrupted; with a ``timeout`` the call is abandoned (left to
    finish in a daemon thread) and :class:`TimeoutError` raised.

    >>> by_length = CallableReranker(lambda q, texts: [-len(t) for t in texts], id="shortest-first")
    >>> by_length.rerank("any", [Candidate(1, "a long answer", 1.0), Candidate(2, "short", 0.5)])
    [-13.0, -5.0]
    """

    def __init__(self, fn: Callable[[str, list[str]], Any], *, id: str) -> None:
        if not callable(fn):
            raise ConfigError("rerank.fn", fn, "pass a function (query, texts) -> one score per text")
        if not isinstance(id, str) or not id.strip():
            raise ConfigError("rerank.id", id, "give the reranker a non-empty name, e.g. id='ms-marco-MiniLM'")
        self.fn = fn
        self.id = id

    def rerank(self, query: str, candidates: Sequence[Candidate], *, timeout: float | None = None) -> list[float]:
        texts = [c.text for c in candidates]
        if not texts:
            return []
        result = call_with_timeout(lambda: self.fn(query, texts), timeout, f"reranker {self.id!r}")
        return _check_scores(result, len(texts)).tolist()

    def __repr__(self) -> str:
        return f"CallableReranker(id={self.id!r})"


class LLMReranker:
    """A :class:`Reranker` that asks any :class:`~memory_ext.llm.LLM` to score candidates 0-10.

    Candidates go to the model in batches of ``batch_size``, numbered, each cut to ``max_chars_per_candidate``
    characters; the model answers ``{"scores": [...]}`` with one number per candidate. The answer is parsed with
    :func:`~memory_ext.plan.llm_planner.parse_json_object` (code fences, prose, single quotes and trailing
    commas are repaired); an unusable answer is retried once with the problem stated, then
    :class:`InvalidScores` is raised. ``timeout`` covers every batch and retry. Failures raise;
    :func:`apply_rerank` turns them into a degraded outcome.

    >>> from memory_ext.llm import ScriptedLLM
    >>> llm = ScriptedLLM(['```json\\n{"scores": [2, 9]}\\n```'])
    >>> LLMReranker(llm).rerank("where does Lena live?", [Candidate(1, "Lena likes tea", 1.0),
    ...                                                  Candidate(2, "Lena lives in Lisbon", 0.9)])
    [2.0, 9.0]
    """

    def __init__(self, llm: LLM, *, max_chars_per_candidate: int = 400, batch_size: int = 20) -> None:
        if not callable(getattr(llm, "complete", None)):
            raise ConfigError("llm", llm, "pass an object with complete(prompt, *, system, json_schema, timeout) "
                                          "(memory_ext.llm.LLM), e.g. LangChainLLM(chat_model)")
        if (isinstance(max_chars_per_candidate, bool) or not isinstance(max_chars_per_candidate, int)
                or max_chars_per_candidate < 20):
            raise ConfigError("max_chars_per_candidate", max_chars_per_candidate, "give an integer >= 20")
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ConfigError("batch_size", batch_size, "give an integer >= 1")
        self.llm = llm
        self.max_chars_per_candidate = max_chars_per_candidate
        self.batch_size = batch_size
        self.id = f"llm:{getattr(llm, 'id', type(llm).__name__)}"

    def rerank(self, query: str, candidates: Sequence[Candidate], *, timeout: float | None = None) -> list[float]:
        deadline = None if timeout is None else time.monotonic() + timeout
        scores: list[float] = []
        for start in range(0, len(candidates), self.batch_size):
            batch = candidates[start:start + self.batch_size]
            scores.extend(self._score_batch(query, [c.text for c in batch], deadline, timeout))
        return scores

    def __repr__(self) -> str:
        return (f"LLMReranker(llm={self.id[4:]!r}, max_chars_per_candidate={self.max_chars_per_candidate}, "
                f"batch_size={self.batch_size})")

    # -- one batch ----------------------------------------------------------------------------------------------
    def _score_batch(self, query: str, texts: list[str], deadline: float | None,
                     timeout: float | None) -> list[float]:
        schema = _scores_schema(len(texts))
        prompt = self._prompt(query, texts, schema)
        remaining = None if deadline is None else deadline - time.monotonic()  # the deadline covers every batch
        try:
            if remaining is not None and remaining <= 0:
                raise TimeoutError
            return ask_json(self.llm, prompt, validate=lambda obj: _parse_scores(obj, len(texts)),
                            timeout=remaining, system=_SYSTEM, json_schema=schema, invalid=InvalidScores,
                            what="usable")
        except TimeoutError:
            if timeout is None:
                raise
            raise TimeoutError(f"no answer within {timeout:g} s") from None

    def _prompt(self, query: str, texts: list[str], schema: Mapping[str, Any]) -> str:
        lines = [("Rate how useful each numbered memory is for answering the question, from 0 (irrelevant) to "
                  f"{LLM_SCORE_MAX} (answers it directly)."), "", f"Question: {_clip(query, 1000)}", "", "Memories:"]
        lines += [f"[{i}] {_clip(text, self.max_chars_per_candidate)}" for i, text in enumerate(texts, 1)]
        lines += ["", (f'Answer with one JSON object: {{"scores": [...]}} with exactly {len(texts)} numbers '
                       f"from 0 to {LLM_SCORE_MAX}, the score of memory [1] first, in order."),
                  f"JSON schema: {json.dumps(schema, separators=(',', ':'))}"]
        return "\n".join(lines)


_SYSTEM = ("You rate the relevance of an AI agent's memories to a question. Reply with exactly one JSON object "
           "that matches the given schema: no prose, no code fences.")


def _scores_schema(n: int) -> dict[str, Any]:
    item = {"type": "number", "minimum": 0, "maximum": LLM_SCORE_MAX}
    return {"type": "object", "required": ["scores"],
            "properties": {"scores": {"type": "array", "items": item, "minItems": n, "maxItems": n}}}


def _clip(text: str, limit: int) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[:limit - 1].rstrip() + "…"


def _parse_scores(obj: dict[str, Any], n: int) -> list[float]:
    """The ``scores`` list of an LLM answer: ``n`` finite numbers (a ``{"1": 7, ...}`` mapping is accepted too)."""
    scores = obj.get("scores")
    if isinstance(scores, Mapping):
        try:
            by_number = {int(str(k).strip().strip("[]")): v for k, v in scores.items()}
        except ValueError:
            raise InvalidScores('"scores" keys must be the memory numbers') from None
        if sorted(by_number) != list(range(1, n + 1)):
            raise InvalidScores(f'"scores" must score memories 1 to {n}')
        scores = [by_number[i] for i in range(1, n + 1)]
    if not isinstance(scores, list):
        raise InvalidScores('the answer has no "scores" list')
    if len(scores) != n:
        raise InvalidScores(f'"scores" has {len(scores)} numbers, expected {n}')
    out: list[float] = []
    for i, value in enumerate(scores, 1):
        if isinstance(value, str):
            with contextlib.suppress(ValueError):  # not a number: reported just below
                value = float(value.strip())
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise InvalidScores(f"score {i} is not a finite number: {value!r}")
        out.append(float(value))
    return out
