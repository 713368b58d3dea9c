"""The ``memext`` command.

::

    memext demo                                  # ingest a built-in English + Chinese conversation, search it
    memext ingest turns.jsonl --user alice       # JSON list, {"turns": [...]}, or JSON Lines
    memext search "where is Lena moving?" --user alice -k 5
    memext stats
    memext prompt --user alice --budget 600       # the hook index a system prompt would show
    memext retrieve 3f2a9c --user alice           # a whole memory file by hook id (or a 6+ character prefix)
    memext compact                                # due weekly merges and monthly evictions, every namespace
    memext forget --user alice --hook 3f2a9c      # remove a file (or --record ID, or the whole namespace)
    memext bench locomo --data locomo.json       # side-by-side benchmarks (see docs/benchmarks.md)
    memext serve --port 8765                      # one store, many clients: MCP (/mcp, --stdio) and REST (/v1)

Global options: ``--path`` (store directory, default ``~/.memory_ext``), ``--embedder`` (``e5`` or ``hashing``),
``--config`` (a YAML/TOML/JSON EngineConfig).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from .errors import MemoryExtError
from .models import Namespace, Turn

if TYPE_CHECKING:
    from .engine import MemoryEngine

__all__ = ["main"]

BATCH = 256


def _open(args: argparse.Namespace, path: str | None = None, read_only: bool = False) -> MemoryEngine:
    from .engine import MemoryEngine

    return MemoryEngine.open(path or args.path, config=args.config, embedder=args.embedder, read_only=read_only)


def _namespace(args: argparse.Namespace) -> Namespace:
    return Namespace(args.user, agent_id=args.agent, session_id=getattr(args, "session", None))


def _print_result(result: Any, out: Any) -> None:
    if not result.items:
        print("   (no memories found)", file=out)
    for i, item in enumerate(result.items, 1):
        when = item.timestamp.strftime("%Y-%m-%d %H:%M") if item.timestamp else "undated"
        chans = ", ".join(f"{c}#{r}" for c, r in item.channels.items())
        who = item.speaker or (item.role.value if item.role else "")
        print(f"  {i}. [{item.score:.4f}] {when} {who}: {item.text}", file=out)
        print(f"       found by: {chans}", file=out)
    for err in result.channel_errors:
        print(f"   degraded: {err.channel}: {err.error_type}: {err.message}", file=out)


def cmd_demo(args: argparse.Namespace) -> int:
    data = json.loads(resources.files("memory_ext").joinpath("data/demo_conversation.json").read_text("utf-8"))
    with tempfile.TemporaryDirectory(prefix="memext-demo-") as tmp:
        path = args.path if args.path_given else tmp
        t0 = time.perf_counter()
        with _open(args, path) as engine:
            load_ms = (time.perf_counter() - t0) * 1000
            ns = Namespace(data["user_id"])
            t0 = time.perf_counter()
            engine.add_turns(data["turns"], ns)
            ingest_ms = (time.perf_counter() - t0) * 1000
            emb = engine.embedder.id if engine.embedder else "none"
            print(f"memory-ext demo — store {path}, embedder {emb} (opened in {load_ms:.0f} ms)")
            print(f"ingested {len(data['turns'])} turns (English and Chinese, 3 sessions) in {ingest_ms:.0f} ms\n")
            hits = 0
            for q in data["queries"]:
                result = engine.search(q["query"], ns, k=3)
                top = result.items[0].text if result.items else ""
                ok = q["expect"] in top
                hits += ok
                mark = "ok " if ok else "MISS"
                print(f"[{mark}] {q['query']}   ({result.timings_ms['total']:.1f} ms)")
                _print_result(result, sys.stdout)
                print()
            print("The memory index a system prompt would show (engine.render_prompt; "
                  "engine.retrieve(hook_id) opens a file):")
            print(engine.render_prompt(ns, budget_tokens=600) or "(no memory files)")
            print()
            print(f"{hits}/{len(data['queries'])} questions answered by the top memory.")
            return 0 if hits == len(data["queries"]) else 1


def _read_turns(path: Path) -> list[dict[str, Any]]:
    text = path.read_text(encoding="utf-8")
    stripped = text.lstrip()
    if stripped.startswith("[") or (stripped.startswith("{") and '"turns"' in stripped[:2000]
                                    and path.suffix != ".jsonl"):
        data = json.loads(text)
        data = data["turns"] if isinstance(data, dict) else data
    else:
        data = [json.loads(line) for line in text.splitlines() if line.strip()]
    if not isinstance(data, list):
        raise SystemExit(f"{path}: expected a JSON list of turns, an object with 'turns', or JSON Lines")
    return data


def cmd_ingest(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    raw = _read_turns(Path(args.file))
    turns = [Turn.coerce(t, i) for i, t in enumerate(raw)]  # validate everything before writing anything
    ns = _namespace(args)
    with _open(args) as engine, tqdm(total=len(turns), unit="turn", desc="ingest", file=sys.stderr) as bar:
        for i in range(0, len(turns), BATCH):
            engine.add_turns(turns[i : i + BATCH], ns)
            bar.update(len(turns[i : i + BATCH]))
    print(f"ingested {len(turns)} turns into {args.path} for user {ns.user_id!r}")
    return 0


def cmd_search(args: argparse.Namespace) -> int:
    with _open(args, read_only=args.read_only) as engine:
        result = engine.search(args.query, _namespace(args), k=args.k, explain=args.explain)
        if args.json:
            print(result.model_dump_json(indent=2))
        else:
            print(f"{len(result.items)} memories in {result.timings_ms.get('total', 0):.1f} ms")
            _print_result(result, sys.stdout)
    return 0


def cmd_stats(args: argparse.Namespace) -> int:
    with _open(args, read_only=args.read_only) as engine:
        print(json.dumps(engine.stats().model_dump(), indent=2))
    return 0


def cmd_prompt(args: argparse.Namespace) -> int:
    with _open(args, read_only=args.read_only) as engine:
        print(engine.render_prompt(_namespace(args), budget_tokens=args.budget, query=args.query) or
              "(no memory files)")
    return 0


def cmd_retrieve(args: argparse.Namespace) -> int:
    with _open(args, read_only=args.read_only) as engine:
        ns = _namespace(args) if args.user is not None else None
        memory_file = engine.retrieve(args.hook_id, ns)
        print(memory_file.model_dump_json(indent=2) if args.json else memory_file.text)
    return 0


def cmd_compact(args: argparse.Namespace) -> int:
    with _open(args) as engine:
        targets = [_namespace(args)] if args.user is not None else engine.namespaces()
        periods: tuple[Literal["weekly", "monthly"], ...] = (
            ("weekly", "monthly") if args.period == "due" else (args.period,))  # argparse choices
        for ns in targets:
            for period in periods:
                report = engine.compact(ns, period, key=args.key, now=args.now)
                done = [s for s in report.steps if s.get("changed")]
                for step in done:
                    print(f"{ns.user_id}/{ns.agent_id or '-'} {period} {step['period']}: file {step['file']}, "
                          f"{step.get('turns', 0)} turns" + (f", {step['cold_turns']} to the cold tier"
                                                              if "cold_turns" in step else ""))
        print(f"compacted {len(targets)} namespace(s)")
    return 0


def cmd_forget(args: argparse.Namespace) -> int:
    if not (args.record or args.hook or args.all):
        print("memext: error: name what to forget: --record ID, --hook ID, or --all for the namespace",
              file=sys.stderr)
        return 2
    with _open(args) as engine:
        receipt = engine.forget(_namespace(args), record_ids=args.record or None, hook_ids=args.hook or None)
        print(receipt.model_dump_json(indent=2))
    return 0


def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--path", default=None, help="store directory (default ~/.memory_ext)")
    common.add_argument("--embedder", default=None, help="e5 (default) or hashing")
    common.add_argument("--config", default=None, help="EngineConfig file (YAML, TOML or JSON)")
    common.add_argument("--user", default="default", help="user id of the namespace (default 'default')")
    common.add_argument("--agent", default=None, help="agent id of the namespace")

    parser = argparse.ArgumentParser(prog="memext", description="memory-ext: long-term memory for LLM agents")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("demo", parents=[common], help="ingest a built-in conversation and search it")
    p.set_defaults(func=cmd_demo)
    p = sub.add_parser("ingest", parents=[common], help="ingest turns from a JSON / JSON Lines file")
    p.add_argument("file")
    p.add_argument("--session", default=None, help="session id for turns that carry none")
    p.set_defaults(func=cmd_ingest)
    p = sub.add_parser("search", parents=[common], help="search the memories of a user")
    p.add_argument("query")
    p.add_argument("-k", type=int, default=5)
    p.add_argument("--session", default=None, help="only this session")
    p.add_argument("--explain", action="store_true")
    p.add_argument("--json", action="store_true", help="print the SearchResult as JSON")
    p.add_argument("--read-only", action="store_true", help="open the store read-only (another process writes)")
    p.set_defaults(func=cmd_search)
    p = sub.add_parser("stats", parents=[common], help="counts and size of the store")
    p.add_argument("--read-only", action="store_true")
    p.set_defaults(func=cmd_stats)
    p = sub.add_parser("prompt", parents=[common], help="print the hook index a system prompt would show")
    p.add_argument("--budget", type=int, default=None, help="token budget (default lifecycle.prompt_budget_tokens)")
    p.add_argument("--query", default=None, help="rank the files by this query")
    p.add_argument("--read-only", action="store_true")
    p.set_defaults(func=cmd_prompt)
    p = sub.add_parser("retrieve", parents=[common], help="print a whole memory file by hook id or prefix")
    p.add_argument("hook_id")
    p.add_argument("--json", action="store_true", help="print the MemoryFile as JSON")
    p.add_argument("--read-only", action="store_true")
    p.set_defaults(func=cmd_retrieve, user=None)
    p = sub.add_parser("compact", parents=[common],
                       help="weekly merge and monthly eviction (idempotent; run it from cron)")
    p.add_argument("--period", choices=("due", "weekly", "monthly"), default="due",
                   help="due (default): every finished week, then every finished month")
    p.add_argument("--key", default=None, help="one week (2026-W47) or month (2026-11) instead of what is due")
    p.add_argument("--now", default=None, help="ISO time that decides what is finished (default: now)")
    p.set_defaults(func=cmd_compact, user=None)
    p = sub.add_parser("forget", parents=[common], help="remove memories from every store, print the receipt")
    p.add_argument("--record", action="append", default=[], help="a record id (repeatable)")
    p.add_argument("--hook", action="append", default=[], help="a hook id (repeatable)")
    p.add_argument("--all", action="store_true", help="the whole namespace (or --session)")
    p.add_argument("--session", default=None, help="with --all: only this session")
    p.set_defaults(func=cmd_forget)
    from .bench.cli import add_bench_parser  # its optional systems import their packages only when they run

    add_bench_parser(sub)
    from .server.cli import add_serve_parser  # fastapi, uvicorn and mcp are imported only when it runs

    add_serve_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``memext``; returns the exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    args.argv = list(argv) if argv is not None else None
    if hasattr(args, "path"):
        args.path_given = args.path is not None
        args.path = str(Path(args.path or "~/.memory_ext").expanduser())
    try:
        return int(args.func(args) or 0)
    except MemoryExtError as exc:
        print(f"memext: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
