"""``memext bench``: the command line of the benchmark harness.

::

    memext bench locomo --data FILE [--systems S1,S2,...] [--embedder e5|hashing] [--json OUT] [--report DIR]
                        [--limit-questions N] [--conversations N] [--config ENGINE_CONFIG] [--rankings OUT.jsonl]
    memext bench madial --data DIR  [same options]
    memext bench scale  --sizes 10000,100000 [--backend numpy,chroma,chroma-server] [--embedder e5|hashing]
                        [--namespaces N] [--queries N] [--json OUT] [--report DIR]
    memext bench ingest --data FILE [--systems memory-ext,vector,langchain-vector,llamaindex-vector]
                        [--embedder e5|hashing] [--messages N] [--batch N] [--batches N] [--config FILE] [--json OUT]
    memext bench agent  --data DIR [--systems ...] [--suites failures,procedures,slots,memory] [--embedder e5|hashing]
                        [--folds 5] [--config FILE] [--json OUT] [--store-cache DIR]
    memext bench small  [--part dev,heldout] [--embedder e5|hashing] [--config FILE] [--rows OUT.jsonl] [--json OUT]
    memext bench select --grid GRID [--locomo FILE] [--madial DIR] [--no-small] [--folds 5] [--embedder e5|hashing]
                        [--config FILE] [--json OUT]
    memext bench report --json RESULT.json --report DIR
    memext bench serve  [--turns 2000] [--queries 200] [--clients 8] [--ops 50] [--embedder hashing|e5] [--json OUT]

``python -m memory_ext.bench locomo ...`` runs the same commands without the ``memext`` front end.
The Markdown summary goes to stdout, progress bars and warnings to stderr. Exit status: 0, or 1 when a system
failed while running (a system whose optional packages are missing is skipped with a warning, status 0), or 2
for bad arguments or data.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["add_bench_parser", "build_parser", "main"]

EXIT_OK, EXIT_SYSTEM_FAILED, EXIT_USAGE = 0, 1, 2
DESCRIPTION = ("Retrieval benchmarks on real data (LoCoMo, MADial-Bench) and synthetic scale runs, every system side "
               "by side in one process with the same embedder. Results and protocol: docs/benchmarks.md.")


class BenchUsageError(Exception):
    """Bad arguments or data: printed as one line, exit status 2."""


def _csv(value: str) -> list[str]:
    return [part.strip() for part in value.split(",") if part.strip()]


_COMMANDS = "{locomo,madial,small,select,calibration,scale,ingest,serve,store,writers,agent,report}"


def _sizes(value: str) -> list[int]:
    try:
        sizes = [int(float(part)) for part in _csv(value)]
    except ValueError:
        raise argparse.ArgumentTypeError(f"--sizes takes comma-separated integers, got {value!r}") from None
    if not sizes or any(s <= 0 for s in sizes):
        raise argparse.ArgumentTypeError(f"--sizes takes positive integers, got {value!r}")
    return sizes


def _calibration_sizes(value: str) -> list[int]:
    try:
        sizes = [0 if part == "full" else int(part) for part in _csv(value)]
    except ValueError:
        raise argparse.ArgumentTypeError(f"--sizes takes integers and 'full', got {value!r}") from None
    if not sizes or any(s < 0 for s in sizes):
        raise argparse.ArgumentTypeError(f"--sizes takes positive integers and 'full', got {value!r}")
    return sizes


def _folds(value: str) -> str | int:
    """``--folds``: ``loco`` or a number of folds (at least 2)."""
    if value == "loco":
        return value
    try:
        k = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected 'loco' or a number of folds, got {value!r}") from None
    if k < 2:
        raise argparse.ArgumentTypeError(f"a number of folds is at least 2, got {k}")
    return k


def _positive(value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value!r}") from None
    if number <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value!r}")
    return number


def _add_common(parser: argparse.ArgumentParser, data_help: str) -> None:
    from .systems import DEFAULT_SYSTEMS

    parser.add_argument("--data", required=True, type=Path, help=data_help)
    parser.add_argument("--systems", type=_csv, default=list(DEFAULT_SYSTEMS),
                        help=f"comma-separated systems to compare (default: {','.join(DEFAULT_SYSTEMS)})")
    parser.add_argument("--embedder", default="e5", help="embedder for every system: e5 (default) or hashing")
    parser.add_argument("--config", type=Path, default=None,
                        help="engine configuration file (YAML/TOML/JSON) for the memory-ext system")
    parser.add_argument("--json", type=Path, default=None, help="write the result JSON here")
    parser.add_argument("--report", type=Path, default=None, help="write report.md and PNG plots into this folder")
    parser.add_argument("--rankings", type=Path, default=None,
                        help="write every question's ranking per system here (JSON lines), for error analysis")
    parser.add_argument("--limit-questions", type=_positive, default=None, metavar="N",
                        help="ask only the first N questions of each conversation")
    parser.add_argument("--conversations", type=_positive, default=None, metavar="N",
                        help="use only the first N conversations (MADial: users)")
    parser.add_argument("--interleave", action="store_true",
                        help="systems take turns (per conversation, then per question) instead of running one after "
                             "the other: same-run ratios that hold on a machine whose load drifts")
    parser.add_argument("--folds", type=_folds, default=None, metavar="loco|K",
                        help="held-out selection among the --grid candidates (memory-ext only): 'loco' leaves one "
                             "conversation out at a time (LoCoMo), K splits the questions into K folds (question i "
                             "-> fold i %% K); each fold is scored with the candidate best on the others")
    parser.add_argument("--kfolds", type=_positive, dest="folds", default=None, metavar="K",
                        help="the same as --folds K")
    parser.add_argument("--grid", "--candidates", dest="grid", type=Path, default=None, metavar="FILE",
                        help="with --folds: a JSON/YAML/TOML file {candidates: {name: partial engine config}} (or the "
                             "bare {name: config} object), each laid over --config; list the default ({}) first")
    parser.add_argument("--select", type=_csv, default=None, metavar="METRIC[,METRIC]",
                        help="with --folds: the micro metric(s) a fold maximises on its training part (their mean; "
                             "default: evid_recall@10 for loco, the @5 and @10 recall for K folds)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bars")
    parser.add_argument("--quiet", action="store_true", help="do not print the Markdown summary")


def _add_commands(commands: Any) -> None:
    locomo = commands.add_parser("locomo", help="LoCoMo turn-level evidence retrieval (English)",
                                 description="Run systems side by side on LoCoMo conversations (locomo10.json schema).")
    _add_common(locomo, "a JSON file in the locomo10.json schema (any number of conversations)")
    locomo.add_argument("--conversation-ids", type=_csv, default=None, metavar="ID,ID",
                        help="use only these conversations (by sample_id, e.g. conv-26)")
    locomo.set_defaults(func=run_args, bench_handler=_cmd_dataset, dataset="locomo")

    madial = commands.add_parser("madial", help="MADial-Bench memory recall (Chinese)",
                                 description="Run systems side by side on MADial-Bench "
                                             "(a folder with memories.jsonl and dialogues.jsonl).")
    _add_common(madial, "a folder holding memories.jsonl and dialogues.jsonl")
    madial.set_defaults(func=run_args, bench_handler=_cmd_dataset, dataset="madial")

    calib = commands.add_parser("calibration", help="is item.score comparable across store sizes (3 .. full)?",
                                description="Stores of 3, 10, 50 turns sampled from LoCoMo conversations (with the "
                                            "gold of one question) and the full ones; the share of rank-1 gold kept "
                                            "and of off-topic results dropped at each score threshold.")
    calib.add_argument("--data", type=Path, default=None,
                       help="a JSON file in the locomo10.json schema (needed unless --from-rows)")
    calib.add_argument("--sizes", type=_calibration_sizes, default=[3, 10, 50, 0],
                       help="comma-separated store sizes in turns, 'full' for whole conversations (3,10,50,full)")
    calib.add_argument("--per-size", type=_positive, default=15,
                       help="sampled stores (one question each) per conversation and size (15)")
    calib.add_argument("--k", type=_positive, default=5, help="results per search (5)")
    calib.add_argument("--seed", type=int, default=7, help="sampling seed (7)")
    calib.add_argument("--embedder", default="e5", help="e5 (default) or hashing")
    calib.add_argument("--config", type=Path, default=None, help="engine configuration file")
    calib.add_argument("--fit", action="store_true",
                       help="also fit the cosine calibration leave-one-conversation-out and report it")
    calib.add_argument("--rows", type=Path, default=None, help="write every result row here (JSON lines)")
    calib.add_argument("--from-rows", type=Path, default=None, metavar="ROWS.jsonl",
                       help="read the rows of an earlier run (its --rows) instead of searching: refit in seconds")
    calib.add_argument("--json", type=Path, default=None, help="write the result JSON here")
    calib.add_argument("--no-progress", action="store_true", help="no progress lines")
    calib.add_argument("--quiet", action="store_true", help="do not print the Markdown summary")
    calib.set_defaults(func=run_args, bench_handler=_cmd_calibration, dataset="calibration")

    scale = commands.add_parser("scale", help="synthetic store sizes: ingest rate, search latency, RSS, disk",
                                description="Build synthetic stores of the given sizes and measure them.")
    scale.add_argument("--sizes", type=_sizes, default=[10_000, 100_000],
                       help="comma-separated store sizes in memories (default 10000,100000)")
    scale.add_argument("--backend", type=_csv, default=["numpy"],
                       help="comma-separated vector backends: numpy (default), chroma, chroma-server")
    scale.add_argument("--embedder", default="e5", help="e5 (default) or hashing")
    scale.add_argument("--namespaces", type=_positive, default=8, help="users the memories are spread over (8)")
    scale.add_argument("--queries", type=_positive, default=200, help="timed searches per size (200)")
    scale.add_argument("--batch", type=_positive, default=1000, help="turns per add_turns call (1000)")
    scale.add_argument("--seed", type=int, default=7, help="generator seed (7)")
    scale.add_argument("--config", type=Path, default=None,
                       help="base engine configuration file; the backend's storage settings are applied on top")
    scale.add_argument("--in-process", action="store_true",
                       help="run every size in this process (default: one subprocess per backend and size, "
                            "so that peak RSS is per size)")
    scale.add_argument("--workdir", type=Path, default=None, help="where stores are built (default: a temp dir)")
    scale.add_argument("--json", type=Path, default=None, help="write the result JSON here")
    scale.add_argument("--report", type=Path, default=None, help="write report.md and PNG plots into this folder")
    scale.add_argument("--no-progress", action="store_true", help="no progress bars")
    scale.add_argument("--quiet", action="store_true", help="do not print the Markdown summary")
    scale.set_defaults(func=run_args, bench_handler=_cmd_scale, dataset="scale")

    serve = commands.add_parser("serve", help="REST search vs embedded search on one store; concurrent clients",
                                description="Search p50/p95 through `memext serve` (REST, loopback) next to the "
                                            "embedded engine on the same store, then concurrent clients mixing "
                                            "writes and searches (p50/p95, errors, lost writes).")
    serve.add_argument("--turns", type=_positive, default=2000, help="synthetic turns in the store (2000)")
    serve.add_argument("--namespaces", type=_positive, default=8, help="users the turns are spread over (8)")
    serve.add_argument("--queries", type=_positive, default=200, help="timed searches per path (200)")
    serve.add_argument("--clients", type=_positive, default=8, help="concurrent clients (8)")
    serve.add_argument("--ops", type=_positive, default=50, help="operations per client (50)")
    serve.add_argument("--write-every", type=_positive, default=4, help="one write every N operations (4)")
    serve.add_argument("--embedder", default="hashing", help="hashing (default) or e5")
    serve.add_argument("--seed", type=int, default=7, help="generator seed (7)")
    serve.add_argument("--workdir", type=Path, default=None, help="where the store is built (default: a temp dir)")
    serve.add_argument("--json", type=Path, default=None, help="write the result JSON here")
    serve.add_argument("--quiet", action="store_true", help="do not print the Markdown summary")
    serve.set_defaults(func=run_args, bench_handler=_cmd_serve, dataset="serve")
    ingest = commands.add_parser("ingest", help="write latency (one chat message, batches) and time until fully "
                                                "indexed, next to plain vector stores",
                                 description="Write LoCoMo turns into memory-ext and into plain vector stores "
                                             "with the same embedder; see memory_ext.bench.ingest.")
    ingest.add_argument("--data", required=True, type=Path,
                        help="a JSON file in the locomo10.json schema, or a folder in the layout of "
                             "shared/data/agent_dev (every file ingested whole: memory_ext.bench.agent_data)")
    ingest.add_argument("--systems", type=_csv, default=["memory-ext", "vector", "langchain-vector",
                                                         "llamaindex-vector"], help="comma-separated systems")
    ingest.add_argument("--embedder", default="e5", help="embedder for every system: e5 (default) or hashing")
    ingest.add_argument("--config", type=Path, default=None, help="engine configuration file for memory-ext")
    ingest.add_argument("--messages", type=_positive, default=40, help="single-message writes timed (40)")
    ingest.add_argument("--batch", type=_positive, default=32, help="turns per timed batch write (32)")
    ingest.add_argument("--batches", type=_positive, default=8, help="batch writes timed (8)")
    ingest.add_argument("--queries", type=_positive, default=40, help="query embeddings timed (40)")
    ingest.add_argument("--during-queries", type=int, default=40, metavar="N",
                        help="questions searched while idle and during a bulk ingest into another namespace, each "
                             "phase twice (40; 0 skips it)")
    ingest.add_argument("--conversations", type=_positive, default=None, metavar="N",
                        help="use only the first N conversations")
    ingest.add_argument("--json", type=Path, default=None, help="write the result JSON here")
    ingest.add_argument("--report", type=Path, default=None, help=argparse.SUPPRESS)
    ingest.add_argument("--quiet", action="store_true", help="do not print the Markdown summary")
    ingest.set_defaults(func=run_args, bench_handler=_cmd_ingest, dataset="ingest")

    store = commands.add_parser("store", help="LangGraph store put / update / delete cost at N items",
                                description="see memory_ext.bench.store_ops")
    store.add_argument("--items", type=_positive, default=10_000, help="items in the namespace (10000)")
    store.add_argument("--ops", type=_positive, default=20, help="timed calls of each operation (20)")
    store.add_argument("--embedder", default="hashing", help="hashing (default) or e5")
    store.add_argument("--workdir", type=Path, default=None, help="where the store is built (default: a temp dir)")
    store.add_argument("--json", type=Path, default=None, help="write the result JSON here")
    store.add_argument("--quiet", action="store_true", help="do not print the Markdown summary")
    store.set_defaults(func=run_args, bench_handler=_cmd_store, dataset="store")
    writers = commands.add_parser("writers", help="several writer processes ingesting into one PostgreSQL memory",
                                  description="see memory_ext.bench.writers")
    writers.add_argument("--turns", type=_positive, default=4000, help="synthetic turns in all (4000)")
    writers.add_argument("--writers", type=_sizes, default=[1, 4], help="writer process counts to compare (1,4)")
    writers.add_argument("--namespaces", type=_positive, default=8, help="users the turns are spread over (8)")
    writers.add_argument("--batch", type=_positive, default=50, help="turns per add_turns call (50)")
    writers.add_argument("--embedder", default="hashing", help="hashing (default) or e5")
    writers.add_argument("--seed", type=int, default=7, help="generator seed (7)")
    writers.add_argument("--workdir", type=Path, default=None, help="server data folder (default: a temp dir)")
    writers.add_argument("--json", type=Path, default=None, help="write the result JSON here")
    writers.add_argument("--quiet", action="store_true", help="do not print the Markdown summary")
    writers.set_defaults(func=run_args, bench_handler=_cmd_writers, dataset="writers")
    agent = commands.add_parser("agent", help="memory for an agent's next action: failures, procedures, slots, "
                                "conversational memory (agent_dev layout)", description="see memory_ext.bench.agent")
    agent.add_argument("--data", required=True, type=Path, help="a folder with the layout of agent_dev/")
    agent.add_argument("--systems", type=_csv, default=None,
                       help="comma-separated systems (default: memory-ext,memory-ext-query-only,bm25,vector,"
                            "langchain-ensemble)")
    agent.add_argument("--suites", type=_csv, default=None,
                       help="comma-separated suites (default: failures,procedures,slots,memory)")
    agent.add_argument("--embedder", default="e5", help="embedder for every system: e5 (default) or hashing")
    agent.add_argument("--config", type=Path, default=None, help="engine configuration file for memory-ext")
    agent.add_argument("--folds", type=_positive, default=5, help="probe i of a suite -> fold i %% K (5)")
    agent.add_argument("--workdir", type=Path, default=None, help="where the stores are built (default: a temp dir)")
    agent.add_argument("--store-cache", type=Path, default=None,
                       help="keep memory-ext's built stores here and reuse them while the turns, the embedder, the "
                            "configuration and the engine's write-side code are the same")
    agent.add_argument("--json", type=Path, default=None, help="write the result JSON here")
    agent.add_argument("--no-progress", action="store_true", help="no progress lines on stderr")
    agent.add_argument("--quiet", action="store_true", help="do not print the Markdown summary")
    agent.set_defaults(func=run_args, bench_handler=_cmd_agent, dataset="agent")
    small = commands.add_parser("small", help="first answers on small stores: facts, updates, no-answer questions",
                                description="The small-store suite (memory_ext.bench.small): short English and "
                                            "Chinese chats; fact P@1, update accuracy, past@2, no-answer < 0.5 and "
                                            "repeated context lines, per part.")
    small.add_argument("--part", type=_csv, default=["dev", "heldout"], help="dev, heldout or both (default)")
    small.add_argument("--embedder", default="e5", help="e5 (default) or hashing")
    small.add_argument("--config", type=Path, default=None, help="engine configuration file (YAML/TOML/JSON)")
    small.add_argument("--rows", type=Path, default=None, help="write every question's outcome here (JSON lines)")
    small.add_argument("--json", type=Path, default=None, help="write the summary JSON here")
    small.add_argument("--quiet", action="store_true", help="do not print the Markdown summary")
    small.set_defaults(func=run_args, bench_handler=_cmd_small, dataset="small")
    sel = commands.add_parser("select", help="choose defaults held out on LoCoMo, MADial and the small-store suite "
                                             "at once", description="memory_ext.bench.select: every --grid candidate "
                              "on each data set given; a candidate qualifies only without a held-out loss on any.")
    sel.add_argument("--grid", type=Path, required=True, metavar="FILE",
                     help="JSON/YAML/TOML {candidates: {name: partial engine config}}; the first is the baseline")
    sel.add_argument("--locomo", type=Path, default=None, metavar="FILE", help="LoCoMo dev (leave one conversation "
                                                                              "out)")
    sel.add_argument("--madial", type=Path, default=None, metavar="DIR", help="MADial dev (--folds folds)")
    sel.add_argument("--no-small", action="store_true", help="leave the small-store suite out")
    sel.add_argument("--folds", type=_positive, default=5, help="folds of MADial questions and small chats (5)")
    sel.add_argument("--embedder", default="e5", help="e5 (default) or hashing")
    sel.add_argument("--config", type=Path, default=None, help="engine configuration under every candidate")
    sel.add_argument("--json", type=Path, default=None, help="write the selection JSON here")
    sel.add_argument("--no-progress", action="store_true", help="no progress bars")
    sel.add_argument("--quiet", action="store_true", help="do not print the Markdown summary")
    sel.set_defaults(func=run_args, bench_handler=_cmd_select, dataset="select")
    report = commands.add_parser("report", help="regenerate report.md and plots from a saved result JSON")
    report.add_argument("--json", type=Path, required=True, help="a result JSON written by --json")
    report.add_argument("--report", type=Path, required=True, help="output folder")
    report.set_defaults(func=run_args, bench_handler=_cmd_report, dataset="report")


def add_bench_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add the ``bench`` command (with locomo / madial / scale / ingest / report) to a ``memext`` subparsers object.

    Each leaf sets ``func``: call ``args.func(args)``; it returns the exit status (0, 1 when a system failed,
    2 for bad arguments or data).
    """
    bench = subparsers.add_parser("bench", help="benchmarks on real data, side by side with baselines",
                                  description=DESCRIPTION)
    commands = bench.add_subparsers(dest="bench_command", metavar=_COMMANDS)
    commands.required = True
    _add_commands(commands)
    return bench


def build_parser(prog: str = "python -m memory_ext.bench") -> argparse.ArgumentParser:
    """The standalone parser (the ``bench`` subcommands at top level)."""
    parser = argparse.ArgumentParser(prog=prog, description=DESCRIPTION)
    commands = parser.add_subparsers(dest="bench_command", metavar=_COMMANDS)
    commands.required = True
    _add_commands(commands)
    return parser


# ------------------------------------------------------------------------------------------------- commands


def resolve_bench_embedder(name: str) -> Any:
    """Resolve ``--embedder``; refuse the silent hashing fallback when e5 was asked for but is not installed."""
    from ..embed import resolve_embedder
    from ..errors import ConfigError

    try:
        embedder, warning = resolve_embedder(name)
    except ConfigError as exc:
        raise BenchUsageError(str(exc)) from None
    if warning:
        raise BenchUsageError(f"{warning} — refusing to benchmark with a stand-in embedder; install it or pass "
                              "--embedder hashing explicitly")
    return embedder


def _engine_config(path: Path | None) -> Any:
    if path is None:
        return None
    from ..config import EngineConfig
    from ..errors import ConfigError

    try:
        return EngineConfig.from_file(path)
    except ConfigError as exc:
        raise BenchUsageError(str(exc)) from None


def _command_line(argv: Sequence[str] | None) -> str:
    """The command as the user typed it, for the result's metadata."""
    if argv is not None:
        return "memext bench " + " ".join(shlex.quote(w) for w in argv)
    program = Path(sys.argv[0]).name if sys.argv else ""
    front = "memext" if program == "memext" else "python -m memory_ext.bench"
    return front + " " + " ".join(shlex.quote(w) for w in sys.argv[1:])


def _emit(result: dict[str, Any], args: argparse.Namespace) -> None:
    from .report import format_markdown, format_scale_markdown, write_report

    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    if args.report is not None and result["dataset"] != "ingest":
        write_report(result, args.report)
    if not getattr(args, "quiet", False):
        if result["dataset"] == "ingest":
            from .ingest import format_ingest_markdown

            text = format_ingest_markdown(result)
        else:
            text = format_scale_markdown(result) if result["dataset"] == "scale" else format_markdown(result)
        sys.stdout.write(text)
        sys.stdout.flush()


def _status(result: dict[str, Any]) -> int:
    failed = [n for n, why in result.get("skipped", {}).items() if str(why).startswith("failed")]
    return EXIT_SYSTEM_FAILED if failed else EXIT_OK


def _cmd_dataset(args: argparse.Namespace) -> int:
    from .datasets import DatasetError, load_locomo, load_madial
    from .runner import LOCOMO, MADIAL, QuestionResult, run_benchmark
    from .systems import SYSTEMS

    unknown = [s for s in args.systems if s not in SYSTEMS]
    if unknown:
        raise BenchUsageError(f"unknown system(s) {', '.join(unknown)}; valid systems: {', '.join(SYSTEMS)}")
    spec = LOCOMO if args.dataset == "locomo" else MADIAL
    try:
        conversations = load_locomo(args.data) if args.dataset == "locomo" else load_madial(args.data)
    except DatasetError as exc:
        raise BenchUsageError(str(exc)) from None
    ids = getattr(args, "conversation_ids", None)
    if ids:
        missing = sorted(set(ids) - {c.id for c in conversations})
        if missing:
            raise BenchUsageError(f"--conversation-ids: no conversation {', '.join(missing)} in {args.data}")
        conversations = [c for c in conversations if c.id in ids]
    if args.conversations is not None:
        conversations = conversations[: args.conversations]
    if args.limit_questions is not None:
        for conv in conversations:
            conv.questions = conv.questions[: args.limit_questions]
    embedder = resolve_bench_embedder(args.embedder)
    if isinstance(args.folds, int):
        return _cmd_folds(args, spec, conversations, embedder)
    options = {"memory-ext": {"config": _engine_config(args.config)}} if args.config else {}
    sink_file = None
    sink = None
    if args.rankings is not None:
        args.rankings.parent.mkdir(parents=True, exist_ok=True)
        sink_file = args.rankings.open("w", encoding="utf-8")

        def sink(system: str, r: QuestionResult) -> None:
            row = {"system": system, "conversation": r.conversation_id, "qid": r.question.qid,
                   "category": r.question.category, "question": r.question.text, "gold": list(r.question.gold),
                   "ranking": list(r.ranking), "metrics": r.metrics, "latency_ms": r.latency_ms}
            sink_file.write(json.dumps(row, ensure_ascii=False) + "\n")

    meta = {"data": str(args.data), "command": args._command_line,
            "engine_config": str(args.config) if args.config else None}
    try:
        if args.folds == "loco":
            return _run_folds(args, spec, conversations, embedder, sink, meta)
        result = run_benchmark(spec, conversations, args.systems, embedder, progress=not args.no_progress,
                               system_options=options, rankings_sink=sink, interleave=args.interleave,
                               meta=meta)
    finally:
        if sink_file is not None:
            sink_file.close()
    _emit(result, args)
    return _status(result)


def _run_folds(args: argparse.Namespace, spec: Any, conversations: Any, embedder: Any, sink: Any,
               meta: dict[str, Any]) -> int:
    from .folds import format_folds_markdown, run_folds

    grid = {name: config.model_dump(exclude_unset=True) for name, config in _grid(args).items()}
    select = args.select or ["evid_recall@10"]
    if spec.name != "locomo":
        raise BenchUsageError("--folds loco leaves one LoCoMo conversation out at a time; for MADial use --folds K")
    if len(conversations) < 2:
        raise BenchUsageError("--folds loco needs at least two conversations")
    result = run_folds(spec, conversations, grid, embedder, base_config=None,  # --config is in each candidate
                       metric=",".join(select), progress=not args.no_progress, rankings_sink=sink,
                       meta={**meta, "grid": str(args.grid)})
    _write_and_print(result, args, format_folds_markdown(result))
    return EXIT_OK


def _write_and_print(result: dict[str, Any], args: argparse.Namespace, markdown: str) -> None:
    """``--json`` and, unless ``--quiet``, the Markdown summary on stdout."""
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    if not args.quiet:
        sys.stdout.write(markdown)
        sys.stdout.flush()


def _grid(args: argparse.Namespace) -> dict[str, Any]:
    """The ``--grid`` candidates (one file format for both kinds of ``--folds``), each laid over ``--config``:
    ``{name: EngineConfig}`` in file order."""
    from ..config import EngineConfig
    from ..errors import ConfigError
    from .folds import load_grid, merge_config

    if args.grid is None:
        raise BenchUsageError("--folds needs --grid FILE (also spelt --candidates): the candidate configurations")
    try:
        grid = load_grid(args.grid)
    except (OSError, ValueError) as exc:
        raise BenchUsageError(f"--grid {args.grid}: {exc}") from None
    base = _engine_config(args.config)
    base_dict = base.model_dump(exclude_unset=True) if base is not None else {}
    configs: dict[str, Any] = {}
    for name, partial in grid.items():
        try:
            configs[name] = EngineConfig.from_dict(merge_config(base_dict, partial))
        except ConfigError as exc:
            raise BenchUsageError(f"--grid {args.grid}: candidate {name!r}: {exc}") from None
    return configs


def _cmd_folds(args: argparse.Namespace, spec: Any, conversations: Any, embedder: Any) -> int:
    from .kfolds import cross_validate, format_folds_markdown
    from .runner import run_benchmark

    candidates = _grid(args)
    n = sum(len(c.questions) for c in conversations)
    if not 2 <= args.folds <= n:
        raise BenchUsageError(f"--folds must be between 2 and the number of questions ({n}), got {args.folds}")
    rows: dict[str, list[dict[str, float]]] = {}
    sink_file = args.rankings.open("w", encoding="utf-8") if args.rankings is not None else None
    try:
        for name, config in candidates.items():
            answered: dict[str, dict[str, float]] = {}

            def sink(system: str, r: Any, name: str = name, answered: dict[str, dict[str, float]] = answered) -> None:
                answered[r.question.qid] = r.metrics
                if sink_file is not None:
                    row = {"system": f"{system}:{name}", "conversation": r.conversation_id, "qid": r.question.qid,
                           "question": r.question.text, "gold": list(r.question.gold), "ranking": list(r.ranking),
                           "metrics": r.metrics}
                    sink_file.write(json.dumps(row, ensure_ascii=False) + "\n")

            result = run_benchmark(spec, conversations, ["memory-ext"], embedder, progress=not args.no_progress,
                                   system_options={"memory-ext": {"config": config}}, rankings_sink=sink)
            if result["skipped"]:
                raise BenchUsageError(f"candidate {name}: {result['skipped']}")
            rows[name] = [answered[q.qid] for c in conversations for q in c.questions]
    finally:
        if sink_file is not None:
            sink_file.close()
    select = tuple(args.select) if args.select else \
        ("recall@5", "recall@10") if spec.name == "madial" else ("evid_recall@5", "evid_recall@10")
    unknown = [m for m in select if rows and m not in next(iter(rows.values()))[0]]
    if unknown:
        raise BenchUsageError(f"--select: no metric {', '.join(unknown)} in this dataset's results")
    out = cross_validate(rows, folds=args.folds, select=select)
    out["dataset"] = f"{spec.name}-folds"
    out["meta"] = {"command": args._command_line, "data": str(args.data), "grid": str(args.grid),
                   "embedder": getattr(embedder, "id", None)}
    _write_and_print(out, args, format_folds_markdown(out))
    return EXIT_OK


def _cmd_calibration(args: argparse.Namespace) -> int:
    from .calibration import THRESHOLDS, calibration_meta, fit_loco, format_calibration_markdown, rates, run_calibration
    from .datasets import DatasetError, load_locomo

    embedder = resolve_bench_embedder(args.embedder)
    if args.from_rows is not None:
        try:
            rows = [json.loads(line) for line in args.from_rows.read_text(encoding="utf-8").splitlines() if line]
        except (OSError, ValueError) as exc:
            raise BenchUsageError(f"--from-rows {args.from_rows}: not readable as JSON lines ({exc})") from None
    else:
        if args.data is None:
            raise BenchUsageError("calibration: give --data (a LoCoMo file) or --from-rows (rows of an earlier run)")
        try:
            conversations = load_locomo(args.data)
        except DatasetError as exc:
            raise BenchUsageError(str(exc)) from None
        if len(conversations) < 2:
            raise BenchUsageError("calibration needs two conversations at least (off-topic questions come from "
                                  "another)")
        rows = run_calibration(conversations, embedder, sizes=args.sizes, per_size=args.per_size, k=args.k,
                               seed=args.seed, config=_engine_config(args.config), progress=not args.no_progress)
    meta = calibration_meta(args._command_line, embedder)
    fit = fit_loco(rows) if args.fit else None
    if args.rows is not None:
        args.rows.parent.mkdir(parents=True, exist_ok=True)
        args.rows.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    curve = {str(size): {f"{t:.1f}": rates([r for r in rows if r["size"] == size], t) for t in THRESHOLDS}
             for size in sorted({r["size"] for r in rows})}
    _write_and_print({"dataset": "calibration", "curve": curve, "fit": fit, "meta": meta}, args,
                     format_calibration_markdown(rows, meta, fit))
    return EXIT_OK


def _cmd_serve(args: argparse.Namespace) -> int:
    from ..server import require_server
    from .serve import format_serve_markdown, run_serve

    try:
        require_server("memext bench serve")
    except ImportError as exc:
        raise BenchUsageError(str(exc)) from None
    resolve_bench_embedder(args.embedder)
    result = run_serve(turns=args.turns, namespaces=args.namespaces, queries=args.queries, clients=args.clients,
                       ops=args.ops, write_every=args.write_every, embedder=args.embedder, seed=args.seed,
                       workdir=args.workdir, command=args._command_line)
    _write_and_print(result, args, format_serve_markdown(result))
    return EXIT_OK if result["concurrent"]["errors"] == 0 and result["concurrent"]["lost_writes"] == 0 \
        else EXIT_SYSTEM_FAILED


def _cmd_scale(args: argparse.Namespace) -> int:
    from .scale import BACKENDS, run_scale

    unknown = [b for b in args.backend if b not in BACKENDS]
    if unknown:
        raise BenchUsageError(f"unknown backend(s) {', '.join(unknown)}; valid backends: {', '.join(BACKENDS)}")
    resolve_bench_embedder(args.embedder)  # fail fast, before any store is built
    result = run_scale(
        sizes=args.sizes, backends=args.backend, embedder=args.embedder, namespaces=args.namespaces,
        queries=args.queries, batch=args.batch, seed=args.seed, config_path=args.config,
        in_process=args.in_process, workdir=args.workdir, progress=not args.no_progress,
        meta={"command": args._command_line},
    )
    _emit(result, args)
    return _status(result)


def _cmd_ingest(args: argparse.Namespace) -> int:
    from .agent_data import load_agent_conversations
    from .datasets import DatasetError, load_locomo
    from .ingest import INGEST_SYSTEMS, run_ingest

    unknown = [s for s in args.systems if s not in INGEST_SYSTEMS]
    if unknown:
        raise BenchUsageError(f"unknown system(s) {', '.join(unknown)}; valid systems: {', '.join(INGEST_SYSTEMS)}")
    try:
        conversations = load_agent_conversations(args.data) if args.data.is_dir() else load_locomo(args.data)
    except DatasetError as exc:
        raise BenchUsageError(str(exc)) from None
    if args.conversations is not None:
        conversations = conversations[: args.conversations]
    embedder = resolve_bench_embedder(args.embedder)
    result = run_ingest(conversations, args.systems, embedder, config=_engine_config(args.config),
                        messages=args.messages, batch=args.batch, batches=args.batches, queries=args.queries,
                        during_queries=max(0, args.during_queries),
                        meta={"data": str(args.data), "command": args._command_line})
    _emit(result, args)
    return _status(result)


def _cmd_store(args: argparse.Namespace) -> int:
    try:
        import langchain_memory_ext  # noqa: F401

        from .store_ops import format_store_markdown, run_store_ops
    except ImportError as exc:
        raise BenchUsageError(f"{exc}: the store benchmark needs langchain-memory-ext (langgraph)") from None
    resolve_bench_embedder(args.embedder)
    result = run_store_ops(items=args.items, ops=args.ops, embedder=args.embedder, workdir=args.workdir,
                           meta={"command": args._command_line})
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    if not args.quiet:
        sys.stdout.write(format_store_markdown(result))
    return EXIT_OK


def _cmd_writers(args: argparse.Namespace) -> int:
    from .writers import markdown, run_writers

    resolve_bench_embedder(args.embedder)
    result = run_writers(turns=args.turns, writers=args.writers, namespaces=args.namespaces, batch=args.batch,
                         embedder=args.embedder, seed=args.seed, workdir=args.workdir)
    result["meta"]["command"] = args._command_line
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    if not args.quiet:
        sys.stdout.write(markdown(result) + "\n")
    return EXIT_OK


def _cmd_agent(args: argparse.Namespace) -> int:
    import tempfile

    from .agent import AGENT_SYSTEMS, SUITES, AgentDataError, format_agent_markdown, load_agent_data, run_agent_bench

    systems = args.systems or list(AGENT_SYSTEMS)
    suites = args.suites or list(SUITES)
    for kind, given, valid in (("system", systems, AGENT_SYSTEMS), ("suite", suites, SUITES)):
        unknown = [g for g in given if g not in valid]
        if unknown:
            raise BenchUsageError(f"unknown {kind}(s) {', '.join(unknown)}; valid: {', '.join(valid)}")
    try:
        data = load_agent_data(args.data, suites)
    except AgentDataError as exc:
        raise BenchUsageError(str(exc)) from None
    embedder = resolve_bench_embedder(args.embedder)

    def progress(line: str) -> None:
        if not args.no_progress:
            print(line, file=sys.stderr, flush=True)

    with tempfile.TemporaryDirectory(prefix="memext-agent-", dir=args.workdir) as tmp:
        result = run_agent_bench(data, systems, embedder=embedder, config=_engine_config(args.config),
                                 folds=args.folds, workdir=Path(tmp), progress=progress,
                                 store_cache=args.store_cache)
    result["meta"] = {"command": args._command_line, "embedder": getattr(embedder, "id", args.embedder),
                      "folds": args.folds, "suites": suites,
                      "store_cache": str(args.store_cache) if args.store_cache is not None else None}
    _write_and_print(result, args, format_agent_markdown(result))
    return EXIT_SYSTEM_FAILED if result["failed"] else EXIT_OK
def _cmd_small(args: argparse.Namespace) -> int:
    from .small import PARTS, format_small_markdown, load_small_chats, run_small, summarize_small

    bad = [p for p in args.part if p not in PARTS]
    if bad or not args.part:
        raise BenchUsageError(f"--part takes {', '.join(PARTS)}, got {','.join(args.part) or 'nothing'}")
    embedder = resolve_bench_embedder(args.embedder)
    config = _engine_config(args.config)
    results: dict[str, dict[str, float]] = {}
    all_rows: list[dict[str, Any]] = []
    for part in args.part:
        rows = run_small(load_small_chats(part), embedder=embedder,
                         config=config)
        results[part] = summarize_small(rows)
        all_rows += [{"part": part, **row} for row in rows]
    if args.rows is not None:
        args.rows.parent.mkdir(parents=True, exist_ok=True)
        args.rows.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in all_rows), encoding="utf-8")
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"dataset": "small", "command": args._command_line,
                                         "embedder": getattr(embedder, "id", None), "parts": results}, indent=2)
                             + "\n", encoding="utf-8")
    if not args.quiet:
        print(format_small_markdown(results))
    return EXIT_OK


def _cmd_select(args: argparse.Namespace) -> int:
    from .datasets import DatasetError, load_locomo, load_madial
    from .select import format_select_markdown, run_select

    if args.folds < 2:
        raise BenchUsageError(f"--folds is at least 2, got {args.folds}")
    candidates = _grid(args)
    if len(candidates) < 2:
        raise BenchUsageError(f"--grid {args.grid}: list the baseline first and at least one other candidate")
    if args.locomo is None and args.madial is None and args.no_small:
        raise BenchUsageError("nothing to select on: give --locomo, --madial or keep the small-store suite")
    try:
        locomo = load_locomo(args.locomo) if args.locomo is not None else None
        madial = load_madial(args.madial) if args.madial is not None else None
    except DatasetError as exc:
        raise BenchUsageError(str(exc)) from None
    embedder = resolve_bench_embedder(args.embedder)
    result = run_select(candidates, embedder=embedder, locomo=locomo, madial=madial, small=not args.no_small,
                        folds=args.folds, progress=not args.no_progress,
                        log=None if args.no_progress else lambda m: print(m, file=sys.stderr))
    result["command"] = args._command_line
    result["embedder"] = getattr(embedder, "id", None)
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    if not args.quiet:
        sys.stdout.write(format_select_markdown(result))
    return EXIT_OK


def _cmd_report(args: argparse.Namespace) -> int:
    from .report import write_report

    try:
        result = json.loads(args.json.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise BenchUsageError(f"{args.json}: cannot read a result JSON ({exc})") from None
    for path in write_report(result, args.report):
        print(path)
    return EXIT_OK


def run_args(args: argparse.Namespace, argv: Sequence[str] | None = None) -> int:
    """Run parsed bench arguments; every leaf parser sets ``func=run_args``, so ``args.func(args)`` works.

    Usage and data errors print one line to stderr and return 2; otherwise the command's exit status.
    """
    given = getattr(args, "argv", None)  # set by memory_ext.cli.main when it was called with a list
    if argv is None and given is not None:
        argv = given[given.index("bench") + 1:] if "bench" in given else given
    args._command_line = _command_line(argv)
    try:
        return int(args.bench_handler(args))
    except BenchUsageError as exc:
        print(f"memext bench: error: {exc}", file=sys.stderr)
        return EXIT_USAGE


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m memory_ext.bench``."""
    parser = build_parser()
    args = parser.parse_args(argv)
    return run_args(args, argv)
