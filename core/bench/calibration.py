"""``memext bench calibration``: does ``item.score`` mean the same in a store of 3 turns and of 10,000?

For each LoCoMo conversation and each store size (``--sizes``, default 3, 10, 50 and the full conversation):

* a **sampled store** of that many turns holds the gold evidence of one question (categories 1-4) plus turns
  drawn at random from the rest of the conversation, in their original order; the question is asked of it, and
  so is an **off-topic** question (a question of another conversation). The full size is one store per
  conversation asked every question and as many off-topic ones.
* ``gold kept @t``: of the questions whose rank-1 item is a gold turn, the share whose rank-1 score is >= t;
  ``off-topic dropped @t``: of the off-topic questions' results (the first ``k``), the share scoring < t.

Every result row (size, conversation, on/off topic, rank, gold, score, cosine, coverage) can be written with
``--rows`` to fit :mod:`memory_ext.rank.calibration`'s constants; :func:`fit_loco` fits them by
leave-one-conversation-out (``--fit``) and reports the held-out rates of each fold's fit.
"""

from __future__ import annotations

import math
import random
import shutil
import tempfile
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ..rank.calibration import NEAR_WEIGHT, CosineCalibration
from .datasets import LOCOMO_HEADLINE_CATEGORIES, BenchTurn, Conversation

__all__ = ["THRESHOLDS", "fit_loco", "format_calibration_markdown", "rates", "run_calibration"]

THRESHOLDS: tuple[float, ...] = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)
FULL = 0
"""The size meaning "the whole conversation"."""
RIDGE = 0.1
"""L2 penalty of the logistic fit on standardised features (0.001 and 1.0 gave held-out rates within the targets
too; 0.1 keeps the slope moderate, so scores stay graded rather than near 0 or 1)."""


def _questions(conv: Conversation) -> list[Any]:
    return [q for q in conv.questions if q.category in LOCOMO_HEADLINE_CATEGORIES and q.gold]


def _sample_store(conv: Conversation, gold: Sequence[str], size: int, rng: random.Random) -> list[BenchTurn]:
    keep = set(list(gold)[:size])
    others = [t.external_id for t in conv.turns if t.external_id not in keep]
    keep |= set(rng.sample(others, max(0, min(len(others), size - len(keep)))))
    return [t for t in conv.turns if t.external_id in keep]


class _Store:
    """One fresh engine store holding some turns of a conversation."""

    def __init__(self, root: Path, embedder: Any, config: Any, turns: Sequence[BenchTurn]) -> None:
        from memory_ext import MemoryEngine, Namespace, Turn

        kwargs: dict[str, Any] = {"config": config}
        if embedder is not None:
            kwargs["embedder"] = embedder
        self.engine = MemoryEngine.open(root / uuid.uuid4().hex, **kwargs)
        self.namespace = Namespace("c")
        self.engine.add_turns([Turn(role=t.role, content=t.text, speaker=t.speaker, timestamp=t.timestamp,
                                    session_id=t.session_id, external_id=t.external_id) for t in turns],
                              self.namespace, wait=True)

    def ask(self, question: str, k: int, now: datetime | None) -> list[Any]:
        return list(self.engine.search(question, self.namespace, k=k, now=now, explain=True).items)

    def close(self) -> None:
        self.engine.close()


def _rows(items: Sequence[Any], *, size: int, conv: str, on_topic: bool, gold: set[str],
          query: str, near: bool = False) -> list[dict[str, Any]]:
    from ..rank.calibration import coverage
    from ..text import tokenize

    words = set(tokenize(query))
    out = []
    for rank, item in enumerate(items, 1):
        score = (item.explanation or {}).get("score", {})
        out.append({"size": size, "conversation": conv, "on_topic": on_topic, "near": near, "rank": rank,
                    "gold": bool(on_topic and item.external_ids and item.external_ids[0] in gold),
                    "score": float(item.score), "cosine": score.get("cosine"), "background": score.get("background"),
                    "reference": score.get("reference"), "coverage": coverage(words, item.text),
                    "fused": score.get("fused"), "query": query})
    return out


def _near_question(questions: Sequence[Any], store: Sequence[BenchTurn], rng: random.Random) -> Any | None:
    """A question of the same conversation none of whose gold turns is in ``store``: its answer is absent, its
    topic (the same people, the same events) is not."""
    held = {t.external_id for t in store}
    absent = [q for q in questions if not held & set(q.gold)]
    return rng.choice(absent) if absent else None


def run_calibration(conversations: Sequence[Conversation], embedder: Any, *, sizes: Sequence[int] = (3, 10, 50, FULL),
                    per_size: int = 15, k: int = 5, seed: int = 7, config: Any = None,
                    progress: bool = False, near_topic: bool = True) -> list[dict[str, Any]]:
    """Every result row of every store (see the module docstring); ``near_topic``: also ask each sampled store a
    question of its own conversation whose answer it does not hold (rows with ``near`` set)."""
    rng = random.Random(seed)
    root = Path(tempfile.mkdtemp(prefix="memext-calibration-"))
    rows: list[dict[str, Any]] = []
    try:
        for ci, conv in enumerate(conversations):
            others = [q for j, c in enumerate(conversations) if j != ci for q in _questions(c)]
            questions = _questions(conv)
            if not questions or not others:
                continue
            for size in sizes:
                if size == FULL:
                    store = _Store(root, embedder, config, conv.turns)
                    try:
                        for q in questions:
                            rows += _rows(store.ask(q.text, k, conv.now), size=FULL, conv=conv.id, on_topic=True,
                                          gold=set(q.gold), query=q.text)
                        for q in rng.sample(others, min(len(others), len(questions))):
                            rows += _rows(store.ask(q.text, k, conv.now), size=FULL, conv=conv.id, on_topic=False,
                                          gold=set(), query=q.text)
                    finally:
                        store.close()
                    continue
                for q in rng.sample(questions, min(per_size, len(questions))):
                    turns = _sample_store(conv, q.gold, size, rng)
                    store = _Store(root, embedder, config, turns)
                    try:
                        rows += _rows(store.ask(q.text, k, conv.now), size=size, conv=conv.id, on_topic=True,
                                      gold=set(q.gold), query=q.text)
                        off = rng.choice(others)
                        rows += _rows(store.ask(off.text, k, conv.now), size=size, conv=conv.id, on_topic=False,
                                      gold=set(), query=off.text)
                        near = _near_question(questions, turns, rng) if near_topic else None
                        if near is not None:
                            rows += _rows(store.ask(near.text, k, conv.now), size=size, conv=conv.id,
                                          on_topic=False, gold=set(), query=near.text, near=True)
                    finally:
                        store.close()
                if progress:
                    print(f"calibration: {conv.id} size {size or 'full'} done", flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return rows


def rates(rows: Sequence[Mapping[str, Any]], threshold: float, *, key: str = "score") -> dict[str, float]:
    """``gold_kept``: rank-1 gold items scoring >= threshold; ``offtopic_dropped``: off-topic results below it;
    ``absent_dropped``: of the questions whose answer the store does not hold (``near`` rows), the share whose
    first result scores below it."""
    top_gold = [r[key] for r in rows if r["on_topic"] and r["rank"] == 1 and r["gold"]]
    off = [r[key] for r in rows if not r["on_topic"] and not r.get("near")]
    near = [r[key] for r in rows if r.get("near") and r["rank"] == 1]
    return {"gold_kept": sum(s >= threshold for s in top_gold) / len(top_gold) if top_gold else math.nan,
            "offtopic_dropped": sum(s < threshold for s in off) / len(off) if off else math.nan,
            "absent_dropped": sum(s < threshold for s in near) / len(near) if near else math.nan,
            "n_gold": len(top_gold), "n_offtopic": len(off), "n_absent": len(near)}


def _sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x)) if x >= -700 else 0.0


EXTRA_FEATURES = ("background", "reference")
"""The query statistics an item's cosine can be measured from, besides zero (:mod:`memory_ext.rank.calibration`)."""


def _margin(row: Mapping[str, Any], stat: str) -> float:
    """The row's cosine above its query's ``stat`` (0 for rows recorded without it)."""
    value = row.get(stat)
    return float(row["cosine"]) - float(value) if value is not None else 0.0


def _fit(rows: Sequence[Mapping[str, Any]], *, ridge: float = RIDGE, near_weight: float = NEAR_WEIGHT,
         extra: Sequence[str] = ("reference",)) -> CosineCalibration:
    """The constants of ``sigmoid((cos - midpoint) / scale + coverage_logit * coverage + margin_logit * (cos -
    background) + reference_logit * (cos - reference))``: a logistic regression of rank-1 gold (1) against the
    results of off-topic questions and of questions whose answer the store does not hold (0), every size weighing
    the same, and in each size the gold as much as the rest together (of which ``near_weight`` goes to the
    questions without their answer when there are some). ``extra``: which of :data:`EXTRA_FEATURES` to use
    (none: the fit before them)."""
    import numpy as np

    data = [r for r in rows if ((r["on_topic"] and r["rank"] == 1 and r["gold"]) or not r["on_topic"])
            and r.get("cosine") is not None]
    x = np.array([[r["cosine"], r["coverage"], *(_margin(r, f) for f in extra)] for r in data], dtype=np.float64)
    y = np.array([1.0 if r["on_topic"] else 0.0 for r in data])
    near = np.array([bool(r.get("near")) for r in data])
    size = np.array([r["size"] for r in data])
    weight = np.ones(len(data))
    for s in set(size.tolist()):
        gold, off, absent = (size == s) & (y == 1), (size == s) & (y == 0) & ~near, (size == s) & near
        share = near_weight if absent.any() and off.any() else float(absent.any())
        for mask, total in ((gold, 1.0), (off, 1.0 - share), (absent, share)):
            if mask.any():
                weight[mask] = total / mask.sum()
    mean, std = x.mean(axis=0), x.std(axis=0) + 1e-9
    xs = np.column_stack([np.ones(len(data)), (x - mean) / std])
    beta = np.zeros(xs.shape[1])
    for _ in range(100):  # Newton steps, ridge on the standardised coefficients
        p = 1.0 / (1.0 + np.exp(-xs @ beta))
        grad = xs.T @ (weight * (p - y)) + ridge * beta
        hess = (xs * (weight * p * (1 - p))[:, None]).T @ xs + ridge * np.eye(len(beta))
        beta -= np.linalg.solve(hess, grad)
    coef = beta[1:] / std
    intercept = beta[0] - float(coef @ mean)
    logits = dict(zip(extra, (round(float(c), 2) for c in coef[2:]), strict=True))
    return CosineCalibration(midpoint=round(float(-intercept / coef[0]), 4), scale=round(float(1.0 / coef[0]), 4),
                             coverage_logit=round(float(coef[1]), 2), margin_logit=logits.get("background", 0.0),
                             reference_logit=logits.get("reference", 0.0))


def _apply(rows: Sequence[Mapping[str, Any]], params: CosineCalibration) -> list[dict[str, Any]]:
    """Each row with ``fitted``: the score the engine would give it with these constants (the coverage floor and
    the monotone cap over its query's results included; a query's rows are consecutive, from rank 1)."""
    from ..rank.calibration import COVERAGE_WEIGHT

    out = [dict(r, fitted=max(_sigmoid(params.logit(r["cosine"], r["coverage"], r.get("background"),
                                                    r.get("reference"))) if r.get("cosine") is not None else r["score"],
                              COVERAGE_WEIGHT * r["coverage"] ** 2)) for r in rows]
    for i in range(len(out) - 2, -1, -1):
        if out[i + 1]["rank"] > out[i]["rank"]:  # same query
            out[i]["fitted"] = max(out[i]["fitted"], out[i + 1]["fitted"])
    return out


def fit_loco(rows: Sequence[Mapping[str, Any]], *, extra: Sequence[str] = ("reference",),
             near_weight: float = NEAR_WEIGHT) -> dict[str, Any]:
    """Leave-one-conversation-out: fit on the others, rates at 0.5 on the left-out one, per size; and the fit on
    all conversations (what ships). Constants as dicts (:class:`~memory_ext.rank.calibration.CosineCalibration`'s
    fields)."""
    convs = sorted({r["conversation"] for r in rows})
    held: dict[str, Any] = {}
    for conv in convs:
        params = _fit([r for r in rows if r["conversation"] != conv], extra=extra, near_weight=near_weight)
        test = _apply([r for r in rows if r["conversation"] == conv], params)
        held[conv] = {"params": asdict(params), "per_size": {
            str(size): rates([r for r in test if r["size"] == size], 0.5, key="fitted")
            for size in sorted({r["size"] for r in test})}}
    return {"held_out": held, "all": asdict(_fit(rows, extra=extra, near_weight=near_weight))}


def _params(p: Mapping[str, float]) -> str:
    return (f"{p['midpoint']:.4f}, {p['scale']:.4f}, {p['coverage_logit']:.2f}, {p.get('margin_logit', 0.0):.1f}, "
            f"{p.get('reference_logit', 0.0):.1f}")


def _cell(r: Mapping[str, float]) -> str:
    absent = "" if math.isnan(r["absent_dropped"]) else f" / {r['absent_dropped']:.2f}"
    return f"{r['gold_kept']:.2f} / {r['offtopic_dropped']:.2f}{absent}"


def format_calibration_markdown(rows: Sequence[Mapping[str, Any]], meta: Mapping[str, Any],
                                fit: Mapping[str, Any] | None = None) -> str:
    """The keep/drop curve per size (gold kept / off-topic dropped / without-answer dropped), and the
    leave-one-conversation-out fit when there is one."""
    lines = ["# memext bench calibration", "", f"- command: `{meta.get('command', '')}`",
             f"- date: {meta.get('date', '')}; embedder: `{meta.get('embedder', '')}`", "",
             "Kept / dropped: rank-1 gold kept, off-topic results dropped, first results of questions whose answer "
             "the store does not hold dropped (sampled sizes).", "",
             "| size | n gold@1 | n off-topic | n absent | " + " | ".join(f"@{t:.1f}" for t in THRESHOLDS) + " |",
             "|---|---|---|---|" + "---|" * len(THRESHOLDS)]
    for size in sorted({r["size"] for r in rows}, key=lambda s: s or 10**9):
        sub = [r for r in rows if r["size"] == size]
        first = rates(sub, 0.5)
        cells = [_cell(rates(sub, t)) for t in THRESHOLDS]
        lines.append(f"| {size or 'full'} | {first['n_gold']} | {first['n_offtopic']} | {first['n_absent']} | "
                     + " | ".join(cells) + " |")
    if fit is not None:
        sizes = sorted({r["size"] for r in rows}, key=lambda s: s or 10**9)
        lines += ["", "Leave-one-conversation-out fit (`sigmoid((cos - mid) / scale + cov_logit * coverage + "
                  "margin_logit * (cos - background) + reference_logit * (cos - reference))`), rates at 0.5 on the "
                  "left-out conversation:", "",
                  "| left out | mid, scale, cov_logit, margin_logit, reference_logit | " + " | ".join(
                      f"size {s or 'full'}" for s in sizes) + " |"]
        lines.append("|---|---|" + "---|" * len(sizes))
        for conv, held in fit["held_out"].items():
            keys = sorted(held["per_size"], key=lambda s: int(s) or 10**9)
            lines.append(f"| {conv} | {_params(held['params'])} | "
                         + " | ".join(_cell(held["per_size"][s]) for s in keys) + " |")
        lines += ["", "Fit on every conversation (mid, scale, cov_logit, margin_logit, reference_logit): "
                  f"{_params(fit['all'])}"]
    return "\n".join(lines) + "\n"


def calibration_meta(command: str, embedder: Any) -> dict[str, Any]:
    return {"date": datetime.now(UTC).isoformat(timespec="seconds"), "command": command,
            "embedder": getattr(embedder, "id", None), "started": time.time()}
