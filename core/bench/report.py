"""Reports from the bench JSON: a Markdown file with side-by-side tables and PNG plots (matplotlib, Agg).

Everything here reads only the JSON written by :mod:`memory_ext.bench.runner` or :mod:`memory_ext.bench.scale`,
so a report can be regenerated from a saved result (``memext bench report --json FILE --report DIR``).

Files written to the report folder:

- ``report.md`` — quality table (micro metrics), speed table (latency p50/p95 and their ratio to
  memory-ext's, ingest rate, peak RSS), per-category table; for scale, one row per backend and size.
- ``results.json`` — the JSON the report was made from.
- ``recall_at_k.png`` (recall@k curve per system), ``per_category.png`` (grouped bars per category);
  for scale, ``latency_vs_size.png`` and ``ingest_vs_size.png``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from .datasets import LOCOMO_CATEGORIES

__all__ = ["format_markdown", "format_scale_markdown", "write_report"]

REFERENCE_SYSTEM = "memory-ext"


def _fmt(value: Any, digits: int = 3) -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines


def _quality_keys(result: Mapping[str, Any]) -> list[str]:
    if result["dataset"] == "locomo":
        return ["evid_recall@1", "evid_recall@5", "evid_recall@10", "evid_recall@20", "recall_any@5",
                "recall_all@10", "ndcg@10", "mrr"]
    first: Mapping[str, Any] = next(iter(result["systems"].values()), {"micro": {}})
    return list(first["micro"])


def _recall_keys(result: Mapping[str, Any]) -> tuple[str, list[int]]:
    prefix = "evid_recall@" if result["dataset"] == "locomo" else "recall@"
    ks = [int(k) for k in result.get("meta", {}).get("ks", [])]
    if not ks:
        first: Mapping[str, Any] = next(iter(result["systems"].values()), {"micro": {}})
        ks = sorted(int(key.split("@")[1]) for key in first["micro"] if key.startswith(prefix))
    return prefix, ks


def _ratio(value: float | None, reference: float | None) -> str:
    if value is None or not reference:
        return "—"
    return f"{value / reference:.2f}×"


def _run_lines(meta: Mapping[str, Any]) -> list[str]:
    """The report lines saying how a run was made: its command and its machine, when the result records them."""
    lines = []
    if meta.get("command"):
        lines.append(f"- command: `{meta['command']}`")
    if meta.get("machine"):
        m = meta["machine"]
        lines.append(f"- machine: {m.get('platform')}, {m.get('cpus')} CPUs, Python {m.get('python')}")
    return lines


def format_markdown(result: Mapping[str, Any]) -> str:
    """The Markdown report of a LoCoMo or MADial result."""
    systems: Mapping[str, Any] = result["systems"]
    meta = result.get("meta", {})
    dataset = result["dataset"]
    lines = [f"# memext bench {dataset}", ""]
    if meta:
        lines.append(f"- date: {meta.get('date', '—')}; embedder: `{meta.get('embedder')}`; "
                     f"conversations: {meta.get('conversations')}; turns: {meta.get('turns')}")
        lines += _run_lines(meta)
        if meta.get("data"):
            lines.append(f"- data: `{meta['data']}`")
    counts = result.get("n_questions", {})
    lines.append(f"- questions per category: {', '.join(f'{c}: {n}' for c, n in counts.items())}")
    headline = meta.get("headline_categories", "all")
    scope = ", ".join(headline) if isinstance(headline, list) else headline
    lines += ["", f"## Quality (micro over categories {scope})", ""]
    keys = _quality_keys(result)
    lines += _table(["system", *keys],
                    [[name, *(_fmt(s["micro"].get(k)) for k in keys)] for name, s in systems.items()])
    ref = systems.get(REFERENCE_SYSTEM)
    ref_lat = ref["latency_ms"] if ref else {}
    lines += ["", "## Speed", "",
              f"Latency ratios are to {REFERENCE_SYSTEM}'s (same run, same machine)." if ref else
              f"({REFERENCE_SYSTEM} did not run: no latency ratios.)", ""]
    lines += _table(
        ["system", "search p50 ms", "search p95 ms", "p50 ratio", "p95 ratio", "ingest turns/s", "peak RSS MB"],
        [[name, _fmt(s["latency_ms"]["search_p50"], 2), _fmt(s["latency_ms"]["search_p95"], 2),
          _ratio(s["latency_ms"]["search_p50"], ref_lat.get("search_p50")),
          _ratio(s["latency_ms"]["search_p95"], ref_lat.get("search_p95")),
          _fmt(s["ingest_turns_per_s"], 1), _fmt(s["peak_rss_mb"], 0)] for name, s in systems.items()],
    )
    if meta.get("rss_note"):
        lines += ["", f"Note: {meta['rss_note']}."]
    prefix, ks = _recall_keys(result)
    per_key = f"{prefix}{10 if 10 in ks else ks[-1]}" if ks else "mrr"
    categories = list(counts)
    if categories and systems:
        lines += ["", f"## Per category ({per_key})", ""]
        lines += _table(["system", *(f"{c} {LOCOMO_CATEGORIES[c]}" if dataset == "locomo" and c in LOCOMO_CATEGORIES
                                     else c for c in categories)],
                        [[name, *(_fmt(s["per_category"].get(c, {}).get(per_key)) for c in categories)]
                         for name, s in systems.items()])
    if result.get("skipped"):
        lines += ["", "## Skipped systems", ""]
        lines += [f"- `{name}`: {reason}" for name, reason in result["skipped"].items()]
    return "\n".join(lines) + "\n"


def format_scale_markdown(result: Mapping[str, Any]) -> str:
    """The Markdown report of a scale result."""
    meta = result.get("meta", {})
    lines = ["# memext bench scale", ""]
    if meta:
        lines.append(f"- date: {meta.get('date', '—')}; embedder: `{meta.get('embedder')}`; "
                     f"namespaces: {meta.get('namespaces')}; queries per size: {meta.get('queries')}")
        lines += _run_lines(meta)
    lines.append("")
    with_server = any("server_peak_rss_mb" in s for e in result["systems"].values() for s in e["per_size"].values())
    rows = []
    for backend, entry in result["systems"].items():
        for size, s in entry["per_size"].items():
            row = [backend, f"{int(size):,}", _fmt(s["ingest_turns_per_s"], 1), _fmt(s["latency_ms"]["search_p50"], 2),
                   _fmt(s["latency_ms"]["search_p95"], 2), _fmt(s["peak_rss_mb"], 0), _fmt(s["disk_mb"], 1)]
            if with_server:
                row.append(_fmt(s.get("server_peak_rss_mb"), 0))
            rows.append(row)
    header = ["backend", "memories", "ingest turns/s", "search p50 ms", "search p95 ms", "peak RSS MB", "disk MB"]
    lines += _table(header + (["server peak RSS MB"] if with_server else []), rows)
    if meta.get("rss_note"):
        lines += ["", f"Note: {meta['rss_note']}."]
    if result.get("skipped"):
        lines += ["", "## Skipped", ""]
        lines += [f"- `{name}`: {reason}" for name, reason in result["skipped"].items()]
    return "\n".join(lines) + "\n"


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _plot_recall_curves(result: Mapping[str, Any], path: Path) -> None:
    plt = _pyplot()
    prefix, ks = _recall_keys(result)
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for name, s in result["systems"].items():
        ax.plot(ks, [s["micro"].get(f"{prefix}{k}", float("nan")) for k in ks], marker="o", label=name)
    ax.set_xlabel("k (turns)")
    ax.set_ylabel(prefix.rstrip("@"))
    ax.set_xticks(ks)
    ax.set_ylim(0, 1)
    ax.grid(alpha=0.3)
    ax.set_title(f"{result['dataset']}: {prefix}k (micro)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _plot_per_category(result: Mapping[str, Any], path: Path) -> None:
    plt = _pyplot()
    prefix, ks = _recall_keys(result)
    key = f"{prefix}{10 if 10 in ks else ks[-1]}"
    categories = list(result.get("n_questions", {}))
    names = list(result["systems"])
    width = 0.8 / max(len(names), 1)
    fig, ax = plt.subplots(figsize=(max(6.4, 1.2 * len(categories) + 2), 4.2))
    for i, name in enumerate(names):
        per = result["systems"][name]["per_category"]
        xs = [j + i * width - 0.4 + width / 2 for j in range(len(categories))]
        ax.bar(xs, [per.get(c, {}).get(key, 0.0) for c in categories], width=width, label=name)
    ax.set_xticks(range(len(categories)))
    names_of = LOCOMO_CATEGORIES if result["dataset"] == "locomo" else {}
    ax.set_xticklabels([f"{c} {names_of.get(c, '')} (n={result['n_questions'][c]})".replace("  ", " ")
                        for c in categories], fontsize=8)
    ax.set_ylabel(key)
    ax.set_ylim(0, 1)
    ax.set_title(f"{result['dataset']}: {key} per category")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _plot_scale(result: Mapping[str, Any], folder: Path) -> list[Path]:
    plt = _pyplot()
    latency_path, ingest_path = folder / "latency_vs_size.png", folder / "ingest_vs_size.png"
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    fig2, ax2 = plt.subplots(figsize=(6.4, 4.2))
    for backend, entry in result["systems"].items():
        sizes = sorted(entry["per_size"], key=int)
        xs = [int(s) for s in sizes]
        p50 = [entry["per_size"][s]["latency_ms"]["search_p50"] for s in sizes]
        p95 = [entry["per_size"][s]["latency_ms"]["search_p95"] for s in sizes]
        line = ax.plot(xs, p50, marker="o", label=f"{backend} p50")[0]
        ax.plot(xs, p95, marker="s", linestyle="--", color=line.get_color(), label=f"{backend} p95")
        ax2.plot(xs, [entry["per_size"][s]["ingest_turns_per_s"] for s in sizes], marker="o", label=backend)
    all_sizes = sorted({int(s) for e in result["systems"].values() for s in e["per_size"]})
    for axis, title, ylabel in ((ax, "search latency vs store size", "ms"),
                                (ax2, "ingest rate vs store size", "turns / s")):
        axis.set_xscale("log")
        axis.set_xticks(all_sizes, [f"{size:,}" for size in all_sizes])
        axis.minorticks_off()
        axis.set_xlabel("memories in the store")
        axis.set_ylabel(ylabel)
        axis.set_title(title)
        axis.grid(alpha=0.3)
        axis.legend(fontsize=8)
    for figure, path in ((fig, latency_path), (fig2, ingest_path)):
        figure.tight_layout()
        figure.savefig(path, dpi=120)
        plt.close(figure)
    return [latency_path, ingest_path]


def write_report(result: Mapping[str, Any], folder: str | Path) -> list[Path]:
    """Write ``report.md``, ``results.json`` and the PNG plots of a result into ``folder``; return the paths."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    results_path = folder / "results.json"
    results_path.write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    written.append(results_path)
    report_path = folder / "report.md"
    if result["dataset"] == "scale":
        report_path.write_text(format_scale_markdown(result), encoding="utf-8")
        written.append(report_path)
        if result["systems"]:
            written += _plot_scale(result, folder)
        return written
    report_path.write_text(format_markdown(result), encoding="utf-8")
    written.append(report_path)
    if result["systems"]:
        _plot_recall_curves(result, folder / "recall_at_k.png")
        _plot_per_category(result, folder / "per_category.png")
        written += [folder / "recall_at_k.png", folder / "per_category.png"]
    return written
