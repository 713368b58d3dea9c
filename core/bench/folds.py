"""Leave-one-conversation-out tuning: choose a configuration on the other conversations, score it on the one left out.

``memext bench locomo --folds loco --grid GRID`` runs ``memory-ext`` once per candidate configuration of the grid
(each a partial engine configuration laid over ``--config``), on every conversation. Then, for each conversation
in turn, the candidate with the best selection metric (``--select``, default ``evid_recall@10`` micro over the
headline categories) on *the other* conversations is chosen, and its results on the held-out conversation are
kept. The held-out results of all folds, pooled question by question, are the honest number: no question is
scored by a configuration chosen with it. Ties go to the candidate listed first (list the default first).

The grid file (JSON, YAML or TOML) maps candidate names to partial configurations::

    {"candidates": {"default": {},
                    "graph": {"globals": {"graph_enabled": true}},
                    "hop-0.5": {"recall": {"hop_weight": 0.5}}}}

Candidates that differ only in query-time settings (the ``recall`` section and the query-time switches
:data:`QUERY_TIME_SWITCHES`) share one ingest per conversation: the store is written once and reopened with
each candidate's configuration, so a grid of query-time settings costs one ingest plus one pass of questions per
candidate. Latencies of a fold run are not reported (stores are reused): speed comes from plain runs.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .datasets import Conversation
from .metrics import mean_metrics
from .runner import DatasetSpec, QuestionResult, count_questions, run_system, summarize_run
from .systems import EmbedderLike, MemoryExtSystem

__all__ = ["QUERY_TIME_SWITCHES", "FoldResult", "format_folds_markdown", "load_grid", "merge_config",
           "run_folds", "select_loco"]

QUERY_TIME_SWITCHES = frozenset({"graph_enabled", "turns_channel_enabled"})
"""``globals`` switches that change only what a search does (their indexes are always written)."""


def merge_config(base: Mapping[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    """``over`` laid over ``base``, section by section (a candidate's partial configuration over ``--config``).

    >>> merge_config({"recall": {"k": 1, "mmr": 0.8}}, {"recall": {"k": 2}})
    {'recall': {'k': 2, 'mmr': 0.8}}
    """
    out = dict(base)
    for key, value in over.items():
        nested = isinstance(value, Mapping) and isinstance(out.get(key), Mapping)
        out[key] = merge_config(out[key], value) if nested else value
    return out


def load_grid(path: Path) -> dict[str, dict[str, Any]]:
    """The candidates of a grid file (see the module docstring), in file order. Raises ``ValueError``."""
    text = path.read_text(encoding="utf-8")
    data: Any
    if path.suffix in (".yaml", ".yml"):
        import yaml

        data = yaml.safe_load(text)
    elif path.suffix == ".toml":
        import tomllib

        data = tomllib.loads(text)
    else:
        data = json.loads(text)
    candidates = data.get("candidates", data) if isinstance(data, Mapping) else None
    if not isinstance(candidates, Mapping) or not candidates:
        raise ValueError(f"{path}: a grid is {{\"candidates\": {{name: partial engine config, ...}}}} (or the bare "
                         "{name: partial engine config} object)")
    for name, cfg in candidates.items():
        if not isinstance(cfg, Mapping):
            raise ValueError(f"{path}: candidate {name!r} is not a mapping")
    return {str(name): dict(cfg) for name, cfg in candidates.items()}


def _ingest_key(config: Mapping[str, Any]) -> str:
    """What decides a store's content: everything but the query-time settings."""
    rest = {k: v for k, v in config.items() if k != "recall"}
    if isinstance(rest.get("globals"), Mapping):
        rest["globals"] = {k: v for k, v in rest["globals"].items() if k not in QUERY_TIME_SWITCHES}
    return json.dumps(rest, sort_keys=True, default=str)


class _ReusingSystem(MemoryExtSystem):
    """memory-ext that writes each conversation once per ingest key and reopens the store for later candidates."""

    def __init__(self, embedder: EmbedderLike | None, depth: int, config: Any, stores: dict[tuple[str, str], Any],
                 key: str) -> None:
        super().__init__(embedder, depth, config)
        self._stores = stores
        self._key = key

    def ingest(self, conversation_id: str, turns: Sequence[Any], now: Any = None) -> None:
        known = self._stores.get((self._key, conversation_id))
        if known is None:
            super().ingest(conversation_id, turns, now)
            self._stores[(self._key, conversation_id)] = (self._engine_path, self._tmp)
            return
        self._drop_engine()
        path, _ = known
        kwargs: dict[str, Any] = {"config": self._config}
        if self.embedder is not None:
            kwargs["embedder"] = self.embedder
        self._engine = self._engine_cls.open(path, **kwargs)
        self._search_takes_now = True
        self._namespace = self._namespace_cls(conversation_id)
        self._now = now

    def close(self) -> None:
        self._drop_engine()  # the store directories are removed by run_folds


@dataclass(frozen=True)
class FoldResult:
    """One held-out conversation: the candidate chosen on the others, its score there, its results here."""

    held_out: str
    chosen: str
    train_score: float
    results: list[QuestionResult] = field(default_factory=list)


def _score(results: Sequence[QuestionResult], spec: DatasetSpec, metric: str) -> float:
    head = spec.headline_categories
    rows = [r.metrics for r in results if head is None or r.question.category in head]
    if not rows:
        return 0.0
    means = mean_metrics(rows)
    names = metric.split(",")  # "evid_recall@5,evid_recall@10": their mean
    unknown = [name for name in names if name not in means]
    if unknown:
        raise ValueError(f"--select: no metric {', '.join(unknown)} in this dataset's results")
    return sum(means.get(name, 0.0) for name in names) / len(names)


def select_loco(by_candidate: Mapping[str, Sequence[QuestionResult]], conversations: Sequence[str],
                spec: DatasetSpec, metric: str) -> list[FoldResult]:
    """For each conversation: the candidate (first listed on ties) best on the others by ``metric``, and its
    results on this one."""
    folds = []
    for held in conversations:
        best_name, best_score = "", float("-inf")
        for name, results in by_candidate.items():
            score = _score([r for r in results if r.conversation_id != held], spec, metric)
            if score > best_score:
                best_name, best_score = name, score
        folds.append(FoldResult(held_out=held, chosen=best_name, train_score=best_score,
                                results=[r for r in by_candidate[best_name] if r.conversation_id == held]))
    return folds


def run_folds(spec: DatasetSpec, conversations: Sequence[Conversation], grid: Mapping[str, Mapping[str, Any]],
              embedder: EmbedderLike | None, *, base_config: Mapping[str, Any] | None = None,
              metric: str = "evid_recall@10", progress: bool = False,
              rankings_sink: Callable[[str, QuestionResult], None] | None = None,
              meta: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Run every candidate of ``grid`` and select leave-one-conversation-out (see the module docstring).

    Returns a bench JSON whose ``systems`` hold ``memory-ext (held-out)`` (the pooled held-out results) and one
    ``memory-ext[<candidate>]`` entry per candidate (in-sample: every conversation), plus ``folds``: per
    held-out conversation the chosen candidate and its score on the others."""
    import shutil

    if len(conversations) < 2:
        raise ValueError("leave-one-conversation-out needs at least two conversations")
    stores: dict[tuple[str, str], Any] = {}
    by_candidate: dict[str, list[QuestionResult]] = {}
    out_systems: dict[str, Any] = {}
    try:
        for name, partial in grid.items():
            config = merge_config(base_config or {}, partial)
            system = _ReusingSystem(embedder, spec.depth, config, stores, _ingest_key(config))
            try:
                run = run_system(system, conversations, spec, progress=progress, warmup=False)
            finally:
                system.close()
                if not any(tmp == system._tmp for _, tmp in stores.values()):
                    shutil.rmtree(system._tmp, ignore_errors=True)
            by_candidate[name] = run.results
            summary = summarize_run(run, spec)
            out_systems[f"memory-ext[{name}]"] = {"micro": summary["micro"], "per_category": summary["per_category"],
                                                  "config": partial}
            if rankings_sink is not None:
                for result in run.results:
                    rankings_sink(f"memory-ext[{name}]", result)
    finally:
        for _, tmp in {v[1]: v for v in stores.values()}.values():
            shutil.rmtree(tmp, ignore_errors=True)
    folds = select_loco(by_candidate, [c.id for c in conversations], spec, metric)
    held = _HeldOut([r for f in folds for r in f.results])
    summary = summarize_run(held, spec)  # type: ignore[arg-type]
    out_systems["memory-ext (held-out)"] = {"micro": summary["micro"], "per_category": summary["per_category"]}
    return {"dataset": spec.name, "mode": "folds:loco", "select": metric,
            "n_questions": count_questions(conversations, spec), "systems": out_systems, "skipped": {},
            "folds": [{"held_out": f.held_out, "chosen": f.chosen, "train_score": round(f.train_score, 4),
                       "held_out_score": round(_score(f.results, spec, metric), 4)} for f in folds],
            "meta": dict(meta or {})}


@dataclass
class _HeldOut:
    """The pooled held-out results, in the shape :func:`summarize_run` reads."""

    results: list[QuestionResult]
    name: str = "memory-ext (held-out)"
    ingested_turns: int = 0
    ingest_seconds: float = 0.0
    peak_rss_mb: float = 0.0


def format_folds_markdown(result: Mapping[str, Any]) -> str:
    """The fold run as Markdown: each fold's choice, then held-out and in-sample micro and category 1."""
    lines = [f"## {result['dataset']} leave-one-conversation-out (select: {result['select']})", "",
             "| held out | chosen on the others | its score there | its score held out |", "|---|---|---|---|"]
    lines += [f"| {f['held_out']} | {f['chosen']} | {f['train_score']:.4f} | {f['held_out_score']:.4f} |"
              for f in result["folds"]]
    keys = ("evid_recall@5", "evid_recall@10", "evid_recall@20") if result["dataset"] == "locomo" else \
        ("recall@5", "recall@10")
    lines += ["", "| system | " + " | ".join(keys) + " | cat 1 @10 |", "|---|" + "---|" * (len(keys) + 1)]
    for name, entry in result["systems"].items():
        cat1 = entry["per_category"].get("1", {}).get(keys[1])
        tail = f" | {cat1:.3f} |" if cat1 is not None else " | — |"
        lines.append(f"| {name} | " + " | ".join(f"{entry['micro'].get(k, 0.0):.3f}" for k in keys) + tail)
    return "\n".join(lines) + "\n"
