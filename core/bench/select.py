"""Joint held-out selection of defaults: ``memext bench select`` — a default must pay on every data set at once.

A setting chosen on one data set (LoCoMo's two dev conversations, 40 MADial dialogues) can lose on another, or
on data it has not seen. This command runs every candidate configuration of a grid on up to three data sets and
scores each held out:

- **LoCoMo** dev: leave one conversation out (``evid_recall@5`` and ``@10``, micro over the headline categories);
- **MADial** dev: ``--folds K`` folds of questions (question ``i`` -> fold ``i % K``; ``recall@5`` and ``@10``);
- the **small-store suite** (:mod:`memory_ext.bench.small`, both parts): ``--folds K`` folds of chats (chat ``i``
  -> fold ``i % K``; the share of questions answered right: fact P@1, updates, past, no-answer).

For each candidate ``c`` other than the first (the baseline, today's default) and each data set, the selection
"baseline or ``c``, whichever is better on the other folds" is scored on each fold in turn
(:func:`held_out_gain`): its gain over the baseline is what choosing ``c`` would earn on data not used to choose.
A candidate **qualifies** only when that gain is at least ``0`` on every data set given and above ``0`` on one,
and its own mean is nowhere below the baseline's (a candidate worse everywhere has a held-out gain of exactly 0:
choosing on the other folds keeps the baseline);
the default picked is the qualifying candidate with the largest summed gain (none: keep the baseline).

>>> rows = {"base": [{"m": 0.5}] * 4, "c": [{"m": 0.75}] * 4}
>>> round(held_out_gain(rows, [0, 1, 0, 1], "base", "c", ("m",)), 3)
0.25
>>> decide({"locomo": {"c": 0.01}, "madial": {"c": -0.02}})
(None, {'c': False})
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

__all__ = ["DATASETS", "decide", "format_select_markdown", "held_out_gain", "run_select"]

DATASETS = ("locomo", "madial", "small")
SELECT_METRICS: Mapping[str, tuple[str, ...]] = {
    "locomo": ("evid_recall@5", "evid_recall@10"), "madial": ("recall@5", "recall@10"), "small": ("ok",)}
"""The per-question metrics whose mean each data set is selected and scored on."""


def _mean(rows: Sequence[Mapping[str, float]], keys: Sequence[str]) -> float:
    return sum(sum(r[k] for k in keys) / len(keys) for r in rows) / len(rows) if rows else 0.0


def held_out_gain(rows: Mapping[str, Sequence[Mapping[str, float]]], groups: Sequence[Any], base: str, cand: str,
                  keys: Sequence[str]) -> float:
    """The gain over ``base`` of choosing between ``base`` and ``cand`` on the other groups, per group in turn
    (ties keep ``base``), pooled over all questions. ``rows``: candidate -> per-question metrics, aligned with
    ``groups`` (each question's fold or conversation)."""
    picked: list[Mapping[str, float]] = []
    for g in dict.fromkeys(groups):
        train = [i for i, h in enumerate(groups) if h != g]
        test = [i for i, h in enumerate(groups) if h == g]
        better = _mean([rows[cand][i] for i in train], keys) > _mean([rows[base][i] for i in train], keys)
        picked += [rows[cand if better else base][i] for i in test]
    return _mean(picked, keys) - _mean(rows[base], keys)


def decide(gains: Mapping[str, Mapping[str, float]], means: Mapping[str, Mapping[str, float]] | None = None,
           base: str | None = None) -> tuple[str | None, dict[str, bool]]:
    """``gains``: data set -> candidate -> held-out gain; ``means`` (with ``base``): data set -> candidate ->
    its mean on all the data set's questions. Returns (the default to pick or None, which candidates qualify:
    no held-out loss and no lower mean than the baseline on any data set, and a held-out gain on one). The
    held-out gain alone cannot see a candidate that is worse everywhere: choosing on the other folds then
    always keeps the baseline, a gain of exactly 0; its lower mean is what rules it out.

    >>> decide({"locomo": {"c": 0.0}, "madial": {"c": 0.003}},
    ...        {"locomo": {"b": 0.81, "c": 0.79}, "madial": {"b": 0.60, "c": 0.61}}, "b")
    (None, {'c': False})
    """
    names = list(dict.fromkeys(c for per in gains.values() for c in per))

    def no_lower_mean(c: str) -> bool:
        return means is None or base is None or all(per.get(c, per.get(base, 0.0)) >= per.get(base, 0.0)
                                                    for per in means.values())

    ok = {c: all(per.get(c, 0.0) >= 0 for per in gains.values()) and any(per.get(c, 0.0) > 0
                                                                        for per in gains.values())
          and no_lower_mean(c) for c in names}
    best = max((c for c in names if ok[c]), key=lambda c: sum(per.get(c, 0.0) for per in gains.values()),
               default=None)
    return best, ok


def _bench_rows(spec: Any, conversations: Sequence[Any], config: Any, embedder: Any,
                progress: bool) -> list[tuple[str, dict[str, float]]]:
    """(conversation id, metrics) of each headline question of one candidate's run."""
    from .runner import run_benchmark

    answered: dict[str, tuple[str, dict[str, float]]] = {}

    def sink(system: str, r: Any) -> None:
        answered[r.question.qid] = (r.conversation_id, r.metrics)

    result = run_benchmark(spec, conversations, ["memory-ext"], embedder, progress=progress,
                           system_options={"memory-ext": {"config": config}}, rankings_sink=sink)
    if result["skipped"]:
        raise RuntimeError(f"memory-ext did not run: {result['skipped']}")
    head = spec.headline_categories
    return [answered[q.qid] for c in conversations for q in c.questions
            if q.qid in answered and (head is None or q.category in head)]


def run_select(candidates: Mapping[str, Any], *, embedder: Any, locomo: Sequence[Any] | None = None,
               madial: Sequence[Any] | None = None, small: bool = True, folds: int = 5, progress: bool = False,
               log: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Run every candidate (name -> ``EngineConfig``, the baseline first) on the data sets given (LoCoMo and
    MADial conversations as :mod:`memory_ext.bench.datasets` loads them; ``small``: the small-store suite) and
    decide (see the module docstring). Returns ``{"datasets": {name: {"means", "gains", "questions"}},
    "qualifies", "default"}``."""
    from .runner import LOCOMO, MADIAL
    from .small import PARTS, load_small_chats, run_small

    names = list(candidates)
    if len(names) < 2:
        raise ValueError("a selection needs the baseline and at least one candidate")
    base = names[0]
    out: dict[str, Any] = {"baseline": base, "folds": folds, "datasets": {}}
    for dataset in DATASETS:
        rows: dict[str, list[dict[str, float]]] = {}
        groups: list[Any] = []
        given = {"locomo": bool(locomo), "madial": bool(madial), "small": small}[dataset]
        for name in names if given else ():
            if log is not None:
                log(f"{dataset}: {name}")
            if dataset == "locomo" and locomo:
                got = _bench_rows(LOCOMO, locomo, candidates[name], embedder, progress)
                groups = [conv for conv, _ in got]
            elif dataset == "madial" and madial:
                got = _bench_rows(MADIAL, madial, candidates[name], embedder, progress)
                groups = [i % folds for i in range(len(got))]
            else:
                chats = [c for part in PARTS for c in load_small_chats(part)]
                fold_of = {c.id: i % folds for i, c in enumerate(chats)}
                answers = run_small(chats, embedder=embedder, config=candidates[name])
                got = [(str(fold_of[r["chat"]]), {"ok": float(r["ok"])}) for r in answers]
                groups = [g for g, _ in got]
            rows[name] = [m for _, m in got]
        if not rows:
            continue
        keys = SELECT_METRICS[dataset]
        out["datasets"][dataset] = {
            "metrics": list(keys), "questions": len(groups), "groups": len(set(groups)),
            "means": {n: round(_mean(r, keys), 4) for n, r in rows.items()},
            "gains": {n: round(held_out_gain(rows, groups, base, n, keys), 4) for n in names[1:]}}
    best, ok = decide({d: v["gains"] for d, v in out["datasets"].items()},
                      {d: v["means"] for d, v in out["datasets"].items()}, base)
    out["qualifies"], out["default"] = ok, best or base
    return out


def format_select_markdown(result: Mapping[str, Any]) -> str:
    """The selection as a table: each candidate's mean and held-out gain per data set, and the verdict."""
    datasets = list(result["datasets"])
    header = ["candidate"] + [f"{d} mean | {d} held-out gain" for d in datasets] + ["qualifies"]
    lines = ["| " + " | ".join(header) + " |", "|---" * (1 + 2 * len(datasets) + 1) + "|"]
    for name in result["datasets"][datasets[0]]["means"] if datasets else ():
        cells = [name]
        for d in datasets:
            v = result["datasets"][d]
            gain = v["gains"].get(name)
            cells += [f"{v['means'][name]:.4f}", "baseline" if gain is None else f"{gain:+.4f}"]
        cells.append("–" if name == result["baseline"] else "yes" if result["qualifies"].get(name) else "no")
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    lines.append(f"default: **{result['default']}**" + (" (the baseline: no candidate pays on every data set)"
                                                        if result["default"] == result["baseline"] else ""))
    return "\n".join(lines) + "\n"
