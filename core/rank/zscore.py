"""Turn ranking by standardised score fusion, windows, speakers, time and session priors (pure numpy).

Each channel's scores are standardised per record kind over the whole namespace (z = (s - mean) / std), so a
BM25 score and a cosine similarity become comparable "standard deviations of evidence"; they are summed with the
channel weights (a weight of 0 removes a channel). A turn's score is then its own fused score plus ``window`` ×
the fused score of its ±1-turn window record (its conversational context), plus a bonus for turns by a speaker
the question names and for turns inside the plan's time filter, plus ``answer`` × the fused score (above
``answer_floor``) of the question a turn replies to (the turn before it, by another speaker, when it asks one),
plus ``session`` × the standardised strength of its session (the mean of the session's three best turns). On the
LoCoMo dev conversations this ranks turns far better than reciprocal rank fusion of the same channels
(docs/benchmarks.md).

Inputs are never mutated; the result carries every component for ``explain``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ..plan.strategy import Strategy
from ..recall.base import Hits
from ..store.catalog import DERIVED_KINDS, KIND_CODES, Catalog

__all__ = ["TurnScores", "dense_scores", "rank_turns", "session_prior", "standardize"]

TURN, WINDOW = KIND_CODES["turn"], KIND_CODES["window"]
LESSON = KIND_CODES["failure_pattern"]
"""The derived kind whose lessons are items of their own: a failure and the call that fixed it (a failure pattern
anchored to the assistant's call that worked, :mod:`memory_ext.ingest.failures`) reads better than any one of the
turns it comes from. A failure without a fix (anchored to its error turn) stays evidence for that turn."""
LESSON_LIFT = 1e-3
"""How far above its error turn a matching lesson ranks."""
LIKE_TURNS = {KIND_CODES[k]: TURN for k in DERIVED_KINDS}
"""Derived kinds are standardised with the turns' statistics (layers, like windows, have their own)."""
SESSION_TOP = 3


@dataclass(frozen=True)
class TurnScores:
    """Scores over the catalog's positions (``-inf`` for records that are not rankable turns)."""

    total: np.ndarray
    channel_raw: dict[str, np.ndarray]
    channel_z: dict[str, np.ndarray]
    fused: np.ndarray
    window: np.ndarray
    speaker: np.ndarray
    time: np.ndarray
    session: np.ndarray
    derived: np.ndarray | None = None
    kind_bonus: np.ndarray | None = None
    answer: np.ndarray | None = None


def dense_scores(cat: Catalog, hits: Hits) -> np.ndarray:
    """A channel's scores over all catalog positions; unknown ones get the kind's lowest known score."""
    dense = np.full(len(cat), np.nan)
    pos = cat.pos_of(hits.rids)
    ok = pos >= 0
    dense[pos[ok]] = hits.scores[ok]
    if hits.fill is not None:
        dense[np.isnan(dense)] = hits.fill
    for _, idx in cat.kind_groups():
        values = dense[idx]
        missing = np.isnan(values)
        if missing.any():
            known = values[~missing]
            dense[idx[missing]] = known.min() if known.size else 0.0
    return dense


def standardize(values: np.ndarray, groups: np.ndarray | Sequence[tuple[int, np.ndarray]],
                like: dict[int, int] | None = None) -> np.ndarray:
    """z-scores of ``values`` within each group (a constant group gives zeros). ``groups``: a group code per
    value, or ``(code, positions)`` pairs (:meth:`~memory_ext.store.catalog.Catalog.kind_groups`).

    ``like`` maps a group to the group whose mean and deviation it borrows: derived records (a handful per
    namespace, sentences like turns) are measured on the turns' scale instead of on their own few scores.

    >>> standardize(np.array([1.0, 3.0, 5.0, 5.0]), np.array([0, 0, 1, 1])).tolist()
    [-1.0, 1.0, 0.0, 0.0]
    """
    if isinstance(groups, np.ndarray):
        groups = [(int(code), np.flatnonzero(groups == code)) for code in np.unique(groups)]
    out = np.zeros_like(values, dtype=np.float64)
    stats = {}
    for code, idx in groups:
        v = values[idx]
        stats[code] = (v.mean(), v.std())
    for code, idx in groups:
        mean, sd = stats.get((like or {}).get(code, code), stats[code])
        out[idx] = (values[idx] - mean) / sd if sd > 0 else 0.0
    return out


def session_prior(codes: np.ndarray, scores: np.ndarray, rankable: np.ndarray, top: int = SESSION_TOP) -> np.ndarray:
    """Per session code: the standardised mean of its ``top`` best rankable scores (0 for sessions without any).

    >>> session_prior(np.array([0, 0, 1, 1]), np.array([1.0, 3.0, 0.0, 2.0]), np.ones(4, bool), top=1).tolist()
    [1.0, -1.0]
    """
    n_codes = int(codes.max()) + 1 if codes.size else 0
    c, v = codes[rankable], scores[rankable]
    order = np.lexsort((-v, c))
    c, v = c[order], v[order]
    starts = np.flatnonzero(np.r_[True, np.diff(c) != 0])
    rank_in_session = np.arange(c.size) - np.repeat(starts, np.diff(np.r_[starts, c.size]))
    best = rank_in_session < top
    sums = np.bincount(c[best], weights=v[best], minlength=n_codes)
    counts = np.bincount(c[best], minlength=n_codes)
    present = counts > 0
    out = np.zeros(n_codes)
    strength = sums[present] / counts[present]
    sd = strength.std()
    if sd > 0:
        out[present] = (strength - strength.mean()) / sd
    return out


def anchored_best(cat: Catalog, values: np.ndarray, kinds: np.ndarray) -> np.ndarray:
    """Per position: the best value among the records of ``kinds`` anchored to it (-inf where there is none)."""
    out = np.full(len(cat), -np.inf)
    pos = np.flatnonzero(np.isin(cat.kind, kinds) & (cat.anchor >= 0))
    if pos.size:
        np.maximum.at(out, cat.anchor[pos], values[pos])
    return out


def rank_turns(cat: Catalog, hits: Mapping[str, Hits], weights: Mapping[str, float], strategy: Strategy, *,
               allowed: np.ndarray | None = None, speakers: Sequence[str] = (),
               time_span: tuple[float, float] | None = None, assistant_roles: np.ndarray | None = None,
               bonus_kinds: Sequence[str] = (), channel_kinds: Mapping[str, np.ndarray] | None = None) -> TurnScores:
    """Score every turn of the namespace for one route (see the module docstring)."""
    n = len(cat)
    raw: dict[str, np.ndarray] = {}
    zs: dict[str, np.ndarray] = {}
    fused = np.zeros(n)
    for name, h in hits.items():
        raw[name] = dense_scores(cat, h)
        zs[name] = standardize(raw[name], cat.kind_groups(), LIKE_TURNS)
        if channel_kinds and name in channel_kinds:  # a channel counts only for the records it serves
            zs[name] = np.where(channel_kinds[name], zs[name], 0.0)
        fused += float(weights.get(name, 1.0)) * zs[name]
    is_turn = cat.kind == TURN
    is_lesson = (cat.kind == LESSON) & cat.assistant
    # a turn without a window record stands in for its own window; so does a lesson (it has none)
    window = np.where(is_turn | is_lesson, fused, 0.0)
    win_pos = np.flatnonzero((cat.kind == WINDOW) & (cat.anchor >= 0))
    if win_pos.size:
        anchors = cat.anchor[win_pos]
        window[anchors] = fused[win_pos]
    total = fused + strategy.window * window
    derived = kind_bonus = answer = None
    replies = np.flatnonzero(cat.reply_to >= 0) if strategy.answer else np.zeros(0, np.int64)
    if replies.size:  # a reply takes in the evidence of the question it answers
        answer = np.zeros(n)
        answer[replies] = strategy.answer * np.maximum(fused[cat.reply_to[replies]] - strategy.answer_floor, 0.0)
        total = total + answer
    derived_codes = np.array([KIND_CODES[k] for k in (*DERIVED_KINDS, "l0", "l1")])
    if strategy.derived and np.isin(cat.kind, derived_codes).any():
        best = anchored_best(cat, fused, derived_codes)
        derived = strategy.derived * np.where(is_turn & np.isfinite(best), np.maximum(best, 0.0), 0.0)
        total = total + derived
    if bonus_kinds and strategy.kind_bonus:
        codes = [KIND_CODES[k] for k in bonus_kinds if k in KIND_CODES]
        # a boosted lesson is an item of its own and takes the bonus itself; the other records lift their turn
        lifting = np.isin(cat.kind, codes) & ~is_lesson & (cat.anchor >= 0)
        best = np.full(n, -np.inf)
        np.maximum.at(best, cat.anchor[lifting], fused[lifting])
        kind_bonus = strategy.kind_bonus * ((is_turn & np.isfinite(best) & (best > 0))
                                            + (is_lesson & (LESSON in codes) & (fused > 0)))
        total = total + kind_bonus
    speaker: np.ndarray = np.zeros(n)
    codes = [cat.speaker_codes[s] for s in speakers if s in cat.speaker_codes]
    if codes and strategy.speaker:
        speaker = strategy.speaker * np.isin(cat.speaker, codes)
    time: np.ndarray = np.zeros(n)
    if time_span is not None and strategy.time:
        with np.errstate(invalid="ignore"):
            time = strategy.time * ((cat.ts >= time_span[0]) & (cat.ts < time_span[1]))
    total = total + speaker + time
    if assistant_roles is not None and strategy.assistant:
        total = total + strategy.assistant * assistant_roles
    lessons = np.flatnonzero(is_lesson & (cat.anchor >= 0))
    if lessons.size:  # a lesson ranks at least just above the call that worked, its anchor: it says more
        total[lessons] = np.maximum(total[lessons], total[cat.anchor[lessons]] + LESSON_LIFT)
    items = is_turn | is_lesson
    rankable = items if allowed is None else items & allowed
    session = np.zeros(n)
    if strategy.session and rankable.any():
        session = strategy.session * session_prior(cat.session, total, rankable)[cat.session]
        total = total + session
    total = np.where(rankable, total, -np.inf)
    return TurnScores(total=total, channel_raw=raw, channel_z=zs, fused=fused, window=window, speaker=speaker,
                      time=time, session=session, derived=derived, kind_bonus=kind_bonus, answer=answer)
