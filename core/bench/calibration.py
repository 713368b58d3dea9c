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
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

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
          query: str) -> list[dict[str, Any]]:
    from ..rank.calibration import coverage
    from ..text import tokenize

    words = set(tokenize(query))
    out = []
    for rank, item in enumerate(items, 1):
        score = (item.explanation or {}).get("score", {})
        out.append({"size": size, "conversation": conv, "on_topic": on_topic, "rank": rank,
                    "gold": bool(on_topic and item.external_ids and item.external_ids[0] in gold),
                    "score": float(item.score), "cosine": score.get("cosine"),
                    "coverage": coverage(words, item.text), "fused": score.get("fused")})
    return out


def run_calibration(conversations: Sequence[Conversation], embedder: Any, *, sizes: Sequence[int] = (3, 10, 50, FULL),
                    per_size: int = 15, k: int = 5, seed: int = 7, config: Any = None,
                    progress: bool = False) -> list[dict[str, Any]]:
    """Every result row of every store (see the module docstring)."""
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
                    store = _Store(root, embedder, config, _sample_store(conv, q.gold, size, rng))
                    try:
                        rows += _rows(store.ask(q.text, k, conv.now), size=size, conv=conv.id, on_topic=True,
                                      gold=set(q.gold), query=q.text)
                        off = rng.choice(others)
                        rows += _rows(store.ask(off.text, k, conv.now), size=size, conv=conv.id, on_topic=False,
                                      gold=set(), query=off.text)
                    finally:
                        store.close()
                if progress:
                    print(f"calibration: {conv.id} size {size or 'full'} done", flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return rows


def rates(rows: Sequence[Mapping[str, Any]], threshold: float, *, key: str = "score") -> dict[str, float]:
    """``gold_kept``: rank-1 gold items scoring >= threshold; ``offtopic_dropped``: off-topic results below it."""
    top_gold = [r[key] for r in rows if r["on_topic"] and r["rank"] == 1 and r["gold"]]
    off = [r[key] for r in rows if not r["on_topic"]]
    return {"gold_kept": sum(s >= threshold for s in top_gold) / len(top_gold) if top_gold else math.nan,
            "offtopic_dropped": sum(s < threshold for s in off) / len(off) if off else math.nan,
            "n_gold": len(top_gold), "n_offtopic": len(off)}


def _sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x)) if x >= -700 else 0.0


def _fit(rows: Sequence[Mapping[str, Any]], *, ridge: float = RIDGE) -> tuple[float, float, float]:
    """``(midpoint, scale, coverage_logit)`` of ``sigmoid((cos - midpoint) / scale + coverage_logit * coverage)``:
    a logistic regression of rank-1 gold (1) against off-topic results (0) on cosine and coverage, every size and
    class weighing the same (so 0.5 is where a result is as likely a rank-1 answer as an off-topic one)."""
    import numpy as np

    data = [r for r in rows if (r["on_topic"] and r["rank"] == 1 and r["gold"]) or not r["on_topic"]]
    x = np.array([[r["cosine"], r["coverage"]] for r in data], dtype=np.float64)
    y = np.array([1.0 if r["on_topic"] else 0.0 for r in data])
    size = np.array([r["size"] for r in data])
    weight = np.ones(len(data))
    for s in set(size.tolist()):
        for label in (0.0, 1.0):
            mask = (size == s) & (y == label)
            if mask.any():
                weight[mask] = 1.0 / mask.sum()
    mean, std = x.mean(axis=0), x.std(axis=0) + 1e-9
    xs = np.column_stack([np.ones(len(data)), (x - mean) / std])
    beta = np.zeros(3)
    for _ in range(100):  # Newton steps, ridge on the standardised coefficients
        p = 1.0 / (1.0 + np.exp(-xs @ beta))
        grad = xs.T @ (weight * (p - y)) + ridge * beta
        hess = (xs * (weight * p * (1 - p))[:, None]).T @ xs + ridge * np.eye(3)
        beta -= np.linalg.solve(hess, grad)
    coef = beta[1:] / std
    intercept = beta[0] - float(coef @ mean)
    return float(-intercept / coef[0]), float(1.0 / coef[0]), float(coef[1])


def _apply(rows: Sequence[Mapping[str, Any]], params: tuple[float, float, float]) -> list[dict[str, Any]]:
    """Each row with ``fitted``: the score the engine would give it with these constants (the coverage floor and
    the monotone cap over its query's results included; a query's rows are consecutive, from rank 1)."""
    from ..rank.calibration import COVERAGE_WEIGHT

    mid, scale, cov = params
    out = [dict(r, fitted=max(_sigmoid((r["cosine"] - mid) / scale + cov * r["coverage"]),
                              COVERAGE_WEIGHT * r["coverage"] ** 2)) for r in rows]
    for i in range(len(out) - 2, -1, -1):
        if out[i + 1]["rank"] > out[i]["rank"]:  # same query
            out[i]["fitted"] = max(out[i]["fitted"], out[i + 1]["fitted"])
    return out


def fit_loco(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Leave-one-conversation-out: fit on the others, rates at 0.5 on the left-out one, per size; and the fit on
    all conversations (what ships)."""
    convs = sorted({r["conversation"] for r in rows})
    held: dict[str, Any] = {}
    for conv in convs:
        params = _fit([r for r in rows if r["conversation"] != conv])
        test = _apply([r for r in rows if r["conversation"] == conv], params)
        held[conv] = {"params": params, "per_size": {
            str(size): rates([r for r in test if r["size"] == size], 0.5, key="fitted")
            for size in sorted({r["size"] for r in test})}}
    return {"held_out": held, "all": _fit(rows)}


def format_calibration_markdown(rows: Sequence[Mapping[str, Any]], meta: Mapping[str, Any],
                                fit: Mapping[str, Any] | None = None) -> str:
    """The keep/drop curve per size, and the leave-one-conversation-out fit when there is one."""
    lines = ["# memext bench calibration", "", f"- command: `{meta.get('command', '')}`",
             f"- date: {meta.get('date', '')}; embedder: `{meta.get('embedder', '')}`", "",
             "| size | n gold@1 | n off-topic | " + " | ".join(f"@{t:.1f} kept / dropped" for t in THRESHOLDS) + " |",
             "|---|---|---|" + "---|" * len(THRESHOLDS)]
    for size in sorted({r["size"] for r in rows}, key=lambda s: s or 10**9):
        sub = [r for r in rows if r["size"] == size]
        first = rates(sub, 0.5)
        cells = [f"{rates(sub, t)['gold_kept']:.2f} / {rates(sub, t)['offtopic_dropped']:.2f}" for t in THRESHOLDS]
        lines.append(f"| {size or 'full'} | {first['n_gold']} | {first['n_offtopic']} | " + " | ".join(cells) + " |")
    if fit is not None:
        lines += ["", "Leave-one-conversation-out fit (`sigmoid((cos - mid) / scale + cov_logit * coverage)`), "
                  "rates at 0.5 on the left-out conversation:", "",
                  "| left out | mid, scale, cov_logit | " + " | ".join(
                      f"size {s} kept / dropped" for s in sorted({r['size'] for r in rows},
                                                                 key=lambda s: s or 10**9)) + " |"]
        lines.append("|---|---|" + "---|" * len({r["size"] for r in rows}))
        for conv, held in fit["held_out"].items():
            mid, scale, cov = held["params"]
            sizes = sorted(held["per_size"], key=lambda s: int(s) or 10**9)
            lines.append(f"| {conv} | {mid:.4f}, {scale:.4f}, {cov:.2f} | " + " | ".join(
                f"{held['per_size'][s]['gold_kept']:.2f} / {held['per_size'][s]['offtopic_dropped']:.2f}"
                for s in sizes) + " |")
        mid, scale, cov = fit["all"]
        lines += ["", f"Fit on every conversation: mid {mid:.4f}, scale {scale:.4f}, cov_logit {cov:.2f}"]
    return "\n".join(lines) + "\n"


def calibration_meta(command: str, embedder: Any) -> dict[str, Any]:
    return {"date": datetime.now(UTC).isoformat(timespec="seconds"), "command": command,
            "embedder": getattr(embedder, "id", None), "started": time.time()}
