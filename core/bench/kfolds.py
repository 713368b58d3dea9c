"""Held-out selection of configurations over question folds: ``memext bench madial|locomo --folds K --grid FILE``.

A weight, threshold or rule chosen on the same questions it is scored on is an in-sample number. This module
scores every candidate configuration on every question once, then, for each of ``K`` folds, chooses the candidate
with the best mean selection metric on the *other* folds and scores that choice on the fold itself. The held-out
figure is the mean over all questions of the metrics of the candidate their fold chose — what the tuning procedure
("pick the best of these candidates") would achieve on questions it never saw.

Folds: question ``i`` (in the dataset's order: MADial dialogues by user, then in file order) goes to fold ``i % K``, so
every fold holds questions of every user. The selection metric is the mean of the two given metrics
(``recall@5`` and ``recall@10`` for MADial); ties go to the candidate listed first.

The grid file is the one :func:`memory_ext.bench.folds.load_grid` reads for ``--folds loco`` too
(``{"candidates": {"name": {partial engine config}, ...}}`` or the bare object; ``{}`` is ``--config`` itself).
``--kfolds K --candidates FILE`` is the older spelling.
In the example below each candidate is right on one fold only: in-sample both score 0.5, held-out 0.

>>> rows = {"a": [{"m": 1.0}, {"m": 0.0}, {"m": 1.0}, {"m": 0.0}],
...         "b": [{"m": 0.0}, {"m": 1.0}, {"m": 0.0}, {"m": 1.0}]}
>>> out = cross_validate(rows, folds=2, select=("m",))
>>> out["chosen"], out["held_out"]["m"]
(['b', 'a'], 0.0)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["cross_validate", "format_folds_markdown", "fold_of"]


def fold_of(index: int, folds: int) -> int:
    """The fold of the ``index``-th question."""
    return index % folds


def _mean(rows: Sequence[Mapping[str, float]], keys: Sequence[str]) -> float:
    if not rows:
        return 0.0
    return sum(sum(row[k] for k in keys) / len(keys) for row in rows) / len(rows)


def cross_validate(rows: Mapping[str, Sequence[Mapping[str, float]]], *, folds: int,
                   select: Sequence[str]) -> dict[str, Any]:
    """``rows``: candidate -> per-question metrics (same questions, same order for every candidate).

    Returns ``{"chosen": [candidate per fold], "held_out": micro metrics, "in_sample": {candidate: micro},
    "per_fold": [{"fold", "chosen", "train", "test"}]}``.
    """
    names = list(rows)
    n = len(rows[names[0]])
    if any(len(r) != n for r in rows.values()):
        raise ValueError("every candidate must have answered the same questions")
    if folds < 2 or folds > n:
        raise ValueError(f"--kfolds must be between 2 and the number of questions ({n}), got {folds}")
    keys = list(rows[names[0]][0]) if n else []
    chosen: list[str] = []
    per_fold: list[dict[str, Any]] = []
    held: list[Mapping[str, float]] = [{}] * n
    for f in range(folds):
        train = [i for i in range(n) if fold_of(i, folds) != f]
        test = [i for i in range(n) if fold_of(i, folds) == f]
        best = max(names, key=lambda c: (_mean([rows[c][i] for i in train], select), -names.index(c)))
        chosen.append(best)
        for i in test:
            held[i] = rows[best][i]
        per_fold.append({"fold": f, "chosen": best, "n_test": len(test),
                         "train": _mean([rows[best][i] for i in train], select),
                         "test": _mean([rows[best][i] for i in test], select)})
    micro = {k: sum(r[k] for r in held) / n for k in keys}
    in_sample = {c: {k: sum(r[k] for r in rows[c]) / n for k in keys} for c in names}
    return {"chosen": chosen, "held_out": micro, "in_sample": in_sample, "per_fold": per_fold,
            "folds": folds, "select": list(select), "n_questions": n}


def format_folds_markdown(result: Mapping[str, Any]) -> str:
    """The held-out and in-sample metrics of a ``--folds`` run, as Markdown."""
    keys = list(result["held_out"])
    lines = [f"# memext bench {result.get('dataset', '')} --folds {result['folds']}", "",
             f"- command: `{result.get('meta', {}).get('command', '')}`",
             f"- {result['n_questions']} questions, {result['folds']} folds (question i -> fold i % "
             f"{result['folds']}); selection metric: mean of {', '.join(result['select'])} on the other folds",
             "", "| | " + " | ".join(keys) + " |", "|---|" + "---|" * len(keys),
             "| **held-out (chosen per fold)** | " + " | ".join(f"{result['held_out'][k]:.3f}" for k in keys) + " |"]
    for name, micro in result["in_sample"].items():
        lines.append(f"| {name} (in-sample, all) | " + " | ".join(f"{micro[k]:.3f}" for k in keys) + " |")
    lines += ["", "| fold | chosen | train | test |", "|---|---|---|---|"]
    lines += [f"| {p['fold']} | {p['chosen']} | {p['train']:.3f} | {p['test']:.3f} |" for p in result["per_fold"]]
    return "\n".join(lines) + "\n"
