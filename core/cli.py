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
    memext reindex --embedder e5                  # rebuild every derived index (and the vectors) from the turns
    memext bench locomo --data locomo.json       # side-by-side benchmarks (see docs/benchmarks.md)
    memext serve --port 8765                      # one store, many clients: MCP (/mcp, --stdio) and REST (/v1)
    memext migrate --from ~/.memory_ext --to postgresql://host/db   # copy a store between backends, verified
    memext postgres start --dir ~/memext-pg       # a local PostgreSQL with pgvector (and stop, dsn)

Global options: ``--path`` (store directory, default ``~/.memory_ext``), ``--embedder`` (``e5`` or ``hashing``),
``--config`` (a YAML/TOML/JSON EngineConfig).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import time
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from .errors import InvalidArgumentError, MemoryExtError, StoreError, StoreLockedError, StoreNotFoundError
from .models import Namespace, Turn

if TYPE_CHECKING:
    from .engine import MemoryEngine

__all__ = ["main", "require_store"]

BATCH = 256
DEFAULT_USER = "default"
"""The user id of the namespace when ``--user`` is not given."""


def _version() -> str:
    from . import __version__

    return __version__


def _open(args: argparse.Namespace, path: str | None = None, read_only: bool = False,
          create: bool = False, allow_embedder_change: bool = False) -> MemoryEngine:
    """Open the store; only ``create=True`` (``ingest``, ``demo``) may make a new one: a mistyped ``--path``
    is an error, not a silently created empty store."""
    from .engine import MemoryEngine

    target = path or args.path
    if not create:
        require_store(target, args.config, fix="create one with `memext ingest` (or `memext import`)")
    return MemoryEngine.open(target, config=args.config, embedder=args.embedder, read_only=read_only,
                             allow_embedder_change=allow_embedder_change)


def require_store(target: str, config: Any, *, fix: str) -> None:
    """Raise :class:`~memory_ext.errors.StoreNotFoundError` (with ``fix``) unless ``target`` (a directory, or a
    PostgreSQL DSN / ``storage.backend: postgres`` in ``config``) holds a memory-ext store.

    >>> import tempfile
    >>> try:
    ...     require_store(tempfile.mkdtemp() + "/memroy", None, fix="pass --create")
    ... except StoreNotFoundError as exc:
    ...     print(type(exc).__name__, exc.path.endswith("memroy"), "--" + str(exc).split("--")[1])
    StoreNotFoundError True --create
    """
    from .store.sqlite import DB_FILE

    postgres = _postgres_target(target, config)
    if postgres is not None:
        from .store.pg.truth import store_exists

        dsn, schema = postgres
        if not store_exists(dsn, schema):
            raise StoreNotFoundError(dsn, fix, schema=schema)
    elif not (Path(target).expanduser() / DB_FILE).is_file():
        raise StoreNotFoundError(target, fix)


def _postgres_target(target: str, config: Any) -> tuple[str, str] | None:
    """``(DSN, schema)`` when the store is a PostgreSQL one (a ``postgresql://`` path, or ``storage.backend:
    postgres`` in the configuration), else None."""
    from .assembly import backend_for_path
    from .config import EngineConfig
    from .store.locate import dsn_from

    cfg = backend_for_path(target, EngineConfig.coerce(config if not isinstance(config, os.PathLike)
                                                       else Path(config)))
    if cfg.storage.backend != "postgres":
        return None
    dsn = dsn_from(target, cfg.storage.postgres_dsn)
    return (dsn, cfg.storage.postgres_schema) if dsn is not None else None


def _namespace(args: argparse.Namespace) -> Namespace:
    user = args.user if args.user is not None else DEFAULT_USER
    return Namespace(user, agent_id=args.agent, session_id=getattr(args, "session", None))


_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def _safe(text: str, out: Any) -> str:
    """User text for a terminal: control characters (ANSI escape sequences start with one) are shown escaped,
    so stored text cannot move the cursor, recolour or retitle the user's terminal. Pipes get the text as is."""
    isatty = getattr(out, "isatty", None)
    if not (callable(isatty) and isatty()):
        return text
    return _CONTROL.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), text)


def _print(text: str, out: Any = None) -> None:
    out = out if out is not None else sys.stdout
    print(_safe(text, out), file=out)


def _print_result(result: Any, out: Any) -> None:
    if not result.items:
        print("   (no memories found)", file=out)
    for i, item in enumerate(result.items, 1):
        when = item.timestamp.strftime("%Y-%m-%d %H:%M") if item.timestamp else "undated"
        chans = ", ".join(f"{c}#{r}" for c, r in item.channels.items())
        who = item.speaker or (item.role.value if item.role else "")
        _print(f"  {i}. [{item.score:.4f}] {when} {who}: {item.text}", out)
        print(f"       found by: {chans}", file=out)
    for err in result.channel_errors:
        print(f"   degraded: {err.channel}: {err.error_type}: {err.message}", file=out)


def cmd_demo(args: argparse.Namespace) -> int:
    data = json.loads(resources.files("memory_ext").joinpath("data/demo_conversation.json").read_text("utf-8"))
    with tempfile.TemporaryDirectory(prefix="memext-demo-") as tmp:
        path = args.path if args.path_given else tmp
        t0 = time.perf_counter()
        with _open(args, path, create=True) as engine:
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
    """The turns of an input file; a missing or malformed file is an InvalidArgumentError naming it."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else type(exc).__name__
        raise InvalidArgumentError("file", str(path), f"cannot read it ({reason}); give a UTF-8 JSON or "
                                                      "JSON Lines file of turns") from None
    stripped = text.lstrip()
    try:
        if stripped.startswith("[") or (stripped.startswith("{") and '"turns"' in stripped[:2000]
                                        and path.suffix != ".jsonl"):
            data = json.loads(text)
            data = data.get("turns") if isinstance(data, dict) else data
        else:
            data = []
            for number, line in enumerate(text.splitlines(), 1):
                if line.strip():
                    try:
                        data.append(json.loads(line))
                    except json.JSONDecodeError as exc:
                        raise InvalidArgumentError(f"file line {number}", str(path),
                                                   f"not valid JSON ({exc.msg}); fix that line") from None
    except json.JSONDecodeError as exc:
        raise InvalidArgumentError("file", str(path), f"not valid JSON (line {exc.lineno}: {exc.msg})") from None
    if not isinstance(data, list):
        raise InvalidArgumentError("file", str(path), "expected a JSON list of turns, an object with 'turns', "
                                                      "or JSON Lines")
    return data


def cmd_ingest(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    raw = _read_turns(Path(args.file))
    turns = [Turn.coerce(t, i) for i, t in enumerate(raw)]  # validate everything before writing anything
    ns = _namespace(args)
    with _open(args, create=True) as engine, tqdm(total=len(turns), unit="turn", desc="ingest", file=sys.stderr) as bar:
        existing = 0
        for i in range(0, len(turns), BATCH):
            existing += len(engine.add_turns(turns[i : i + BATCH], ns).existing_ids)
            bar.update(len(turns[i : i + BATCH]))
    print(f"ingested {len(turns) - existing} turns into {args.path} for user {ns.user_id!r}"
          + (f" ({existing} already stored: skipped)" if existing else ""))
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    """Write the store's memories (``--user``: that user's; else all) as JSON lines to ``--out`` or stdout."""
    import json

    from tqdm import tqdm

    out_path = Path(args.out) if args.out else None
    with _open(args, read_only=args.read_only) as engine:
        namespace = Namespace(args.user, agent_id=args.agent) if args.user is not None else None
        lines = engine.export(namespace)
        target = out_path.open("w", encoding="utf-8") if out_path is not None else sys.stdout
        count = 0
        try:
            for line in tqdm(lines, desc="export", unit="line", file=sys.stderr,
                             disable=args.no_progress or not sys.stderr.isatty()):
                target.write(json.dumps(line, ensure_ascii=False) + "\n")
                count += 1
        finally:
            if out_path is not None:
                target.close()
    if out_path is not None:
        print(f"exported {count} lines to {out_path}", file=sys.stderr)
    return 0


def cmd_import(args: argparse.Namespace) -> int:
    """Restore an export (or mem0's ``get_all`` output, ``--format mem0``) into the store (created if new)."""
    import json

    source = Path(args.file)
    if not source.is_file():
        raise StoreError(f"no file {str(source)!r} to import")
    show = False if args.no_progress else None
    with _open(args, create=True) as engine:
        if args.format == "mem0":
            try:
                data = json.loads(source.read_text(encoding="utf-8"))
            except ValueError as exc:
                from .errors import InvalidImportError

                raise InvalidImportError(1, "file", source.name, f"mem0's export is one JSON document ({exc})") \
                    from None
            report = engine.import_records(data, format="mem0", user_id=args.user, progress=show)
        else:
            with source.open(encoding="utf-8") as fh:
                report = engine.import_records(fh, progress=show)
    print(f"imported {report.turns} turns, {report.files} memory files and {report.history} history entries "
          f"into {args.path}" + (f" ({report.skipped_turns} turns already stored: skipped)"
                                 if report.skipped_turns else ""))
    return 0


def cmd_reindex(args: argparse.Namespace) -> int:
    """Rebuild every derived index from the stored turns (``MemoryEngine.reindex``); ``--embedder`` another
    embedder than the store's rebuilds the vectors with it."""
    with _open(args, allow_embedder_change=args.embedder is not None) as engine:
        ns = _namespace(args) if args.user is not None else None
        report = engine.reindex(ns, progress=False if args.no_progress else None)
    print(f"reindexed {report.namespaces} namespace(s), {report.turns} turns" + (" (resumed)" if report.resumed else "")
          + (f", vectors: {report.embedder_id}" if report.embedder_id else ""))
    return 0


def cmd_search(args: argparse.Namespace) -> int:
    with _open(args, read_only=args.read_only) as engine:
        result = engine.search(args.query, _namespace(args), k=args.k, explain=args.explain)
        if args.json:
            _print(result.model_dump_json(indent=2))
        else:
            print(f"{len(result.items)} memories in {result.timings_ms.get('total', 0):.1f} ms")
            _print_result(result, sys.stdout)
    return 0


def cmd_stats(args: argparse.Namespace) -> int:
    with _open(args, read_only=args.read_only) as engine:
        print(json.dumps(engine.stats().model_dump(), indent=2))
    return 0


def cmd_doctor(args: argparse.Namespace) -> int:
    """The store's indexing health: queued work, and the records the indexer gave up on with their errors (exit
    status 1 when there are any)."""
    with _open(args, read_only=args.read_only) as engine:
        stats = engine.stats()
        held = engine.quarantined(_namespace(args) if args.user is not None else None)
        if args.json:
            _print(json.dumps({"stats": stats.model_dump(), "quarantined": [q.model_dump() for q in held]},
                              indent=2))
            return 1 if held else 0
        print(f"{stats.turns} turns, {stats.records} records, {stats.vectors} vectors "
              f"({stats.embedder_id or 'no embedder yet'}); {stats.pending} records queued for the indexer")
        if not held:
            print("no quarantined records: every record has its vector or is queued for one")
            return 0
        print(f"{len(held)} quarantined records (no vector; found by keyword and the other channels that need no "
              "model). `memext reindex` retries them:")
        for q in held:
            who = q.user_id + (f"/{q.agent_id}" if q.agent_id else "")
            print(f"  {who}  {q.record_id} ({q.kind}, turns {', '.join(q.turn_ids)}), {q.attempts} attempts since "
                  f"{q.since}: {q.error}")
    return 1


def cmd_prompt(args: argparse.Namespace) -> int:
    with _open(args, read_only=args.read_only) as engine:
        _print(engine.render_prompt(_namespace(args), budget_tokens=args.budget, query=args.query) or
               "(no memory files)")
    return 0


def cmd_retrieve(args: argparse.Namespace) -> int:
    with _open(args, read_only=args.read_only) as engine:
        ns = _namespace(args) if args.user is not None else None
        memory_file = engine.retrieve(args.hook_id, ns)
        _print(memory_file.model_dump_json(indent=2) if args.json else memory_file.text)
    return 0


def cmd_compact(args: argparse.Namespace) -> int:
    with _open(args) as engine:
        targets = [_namespace(args)] if args.user is not None else engine.namespaces()
        known = {(n.user_id, n.agent_id) for n in engine.namespaces()}
        missing = [ns for ns in targets if (ns.user_id, ns.agent_id) not in known]
        for ns in missing:
            _print(f"no namespace {ns.user_id}/{ns.agent_id or '-'} in this store: nothing to compact")
        targets = [ns for ns in targets if ns not in missing]
        changed: set[tuple[str, str | None]] = set()
        periods: tuple[Literal["weekly", "monthly"], ...] = (
            ("weekly", "monthly") if args.period == "due" else (args.period,))  # argparse choices
        for ns in targets:
            for period in periods:
                report = engine.compact(ns, period, key=args.key, now=args.now)
                done = [s for s in report.steps if s.get("changed")]
                if done:
                    changed.add((ns.user_id, ns.agent_id))
                for step in done:
                    print(f"{ns.user_id}/{ns.agent_id or '-'} {period} {step['period']}: file {step['file']}, "
                          f"{step.get('turns', 0)} turns" + (f", {step['cold_turns']} to the cold tier"
                                                              if "cold_turns" in step else ""))
        print(f"compacted {len(changed)} namespace(s)" if changed else
              f"nothing was compacted ({len(targets)} namespace(s) checked)")
    return 0


def cmd_forget(args: argparse.Namespace) -> int:
    if not (args.record or args.hook or args.all or args.purge):
        print("memext: error: name what to forget: --record ID, --hook ID, or --all for the namespace "
              "(--purge finishes the on-disk purge of earlier forgets)", file=sys.stderr)
        return 2
    with _open(args) as engine:
        if args.record or args.hook or args.all:
            receipt = engine.forget(_namespace(args), record_ids=args.record or None, hook_ids=args.hook or None)
            if receipt.purge_complete or not args.purge:
                _print(receipt.model_dump_json(indent=2))
                return 0
            _print(receipt.model_dump_json(indent=2))
        pending = engine.purge(wait_s=args.wait)
        if pending:
            print(f"memext: purge pending in {', '.join(pending)}: another process holds a read snapshot from "
                  f"before the forget; run `memext forget --purge` again when it is done", file=sys.stderr)
            return 1
        print("purge complete: no forgotten data is left in the store's files")
    return 0


def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--path", default=None, help="store directory (default ~/.memory_ext)")
    common.add_argument("--embedder", default=None, help="e5 (default) or hashing")
    common.add_argument("--config", default=None, help="EngineConfig file (YAML, TOML or JSON)")
    common.add_argument("--user", default=None, help=f"user id of the namespace (default {DEFAULT_USER!r})")
    common.add_argument("--agent", default=None, help="agent id of the namespace")

    parser = argparse.ArgumentParser(prog="memext", description="memory-ext: long-term memory for LLM agents")
    parser.add_argument("--version", action="version", version=f"memext {_version()}")
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
    p = sub.add_parser("doctor", parents=[common],
                       help="indexing health: queued work and quarantined records with their errors")
    p.add_argument("--json", action="store_true")
    p.add_argument("--read-only", action="store_true")
    p.set_defaults(func=cmd_doctor)
    p = sub.add_parser("prompt", parents=[common], help="print the hook index a system prompt would show")
    p.add_argument("--budget", type=int, default=None, help="token budget (default lifecycle.prompt_budget_tokens)")
    p.add_argument("--query", default=None, help="rank the files by this query")
    p.add_argument("--read-only", action="store_true")
    p.set_defaults(func=cmd_prompt)
    p = sub.add_parser("retrieve", parents=[common], help="print a whole memory file by hook id or prefix")
    p.add_argument("hook_id")
    p.add_argument("--json", action="store_true", help="print the MemoryFile as JSON")
    p.add_argument("--read-only", action="store_true")
    p.set_defaults(func=cmd_retrieve)
    p = sub.add_parser("compact", parents=[common],
                       help="weekly merge and monthly eviction (idempotent; run it from cron)")
    p.add_argument("--period", choices=("due", "weekly", "monthly"), default="due",
                   help="due (default): every finished week, then every finished month")
    p.add_argument("--key", default=None, help="one week (2026-W47) or month (2026-11) instead of what is due")
    p.add_argument("--now", default=None, help="ISO time that decides what is finished (default: now)")
    p.set_defaults(func=cmd_compact)
    p = sub.add_parser("reindex", parents=[common],
                       help="rebuild every derived index from the stored turns (resumable; --embedder changes it)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar (default: only on a terminal)")
    p.set_defaults(func=cmd_reindex)
    p = sub.add_parser("export", parents=[common],
                       help="write the memories (every field, versions, history, memory files) as JSON lines")
    p.add_argument("--out", default=None, help="file to write (default: standard output)")
    p.add_argument("--read-only", action="store_true", help="open the store read-only (another process writes)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar (default: only on a terminal)")
    p.set_defaults(func=cmd_export)
    p = sub.add_parser("import", parents=[common],
                       help="restore an export (idempotent), or mem0's get_all output with --format mem0")
    p.add_argument("file")
    p.add_argument("--format", choices=("memory-ext", "mem0"), default="memory-ext")
    p.add_argument("--no-progress", action="store_true", help="no progress bar (default: only on a terminal)")
    p.set_defaults(func=cmd_import)
    p = sub.add_parser("forget", parents=[common], help="remove memories from every store, print the receipt")
    p.add_argument("--record", action="append", default=[],
                   help="a memory's id: a record id (of a search result), a turn id or an external id (repeatable)")
    p.add_argument("--hook", action="append", default=[], help="a hook id (repeatable)")
    p.add_argument("--all", action="store_true", help="the whole namespace (or --session)")
    p.add_argument("--session", default=None, help="with --all: only this session")
    p.add_argument("--purge", action="store_true",
                   help="finish the on-disk purge of earlier forgets (exit 1 while a reader still blocks it)")
    p.add_argument("--wait", type=float, default=5.0, help="with --purge: seconds to wait for readers (default 5)")
    p.set_defaults(func=cmd_forget)
    from .bench.cli import add_bench_parser  # its optional systems import their packages only when they run

    add_bench_parser(sub)
    from .server.cli import add_serve_parser  # fastapi, uvicorn and mcp are imported only when it runs

    add_serve_parser(sub)
    from .store.cli import add_migrate_parser, add_postgres_parser

    add_migrate_parser(sub)
    add_postgres_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``memext``; returns the exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    args.argv = list(argv) if argv is not None else None
    if hasattr(args, "path"):
        args.path_given = args.path is not None
        from .store.locate import is_dsn

        if not is_dsn(args.path):  # a DSN is not a file path
            args.path = str(Path(args.path or "~/.memory_ext").expanduser())
    try:
        return int(args.func(args) or 0)
    except MemoryExtError as exc:  # one line, never a traceback
        print(f"memext: error: {_safe(_cli_message(exc, args), sys.stderr)}", file=sys.stderr)
        return 2


def _cli_message(exc: MemoryExtError, args: argparse.Namespace) -> str:
    """The error as a command line user reads it: a fix names this command's flags, not the Python API."""
    if isinstance(exc, StoreLockedError):
        head = f"store {exc.path!r} is locked by another writer process ({exc.holder}); only one process may write it"
        if hasattr(args, "read_only") and not args.read_only:
            return f"{head}: add --read-only to read it while that process runs (memext {args.command} --read-only)"
        return (f"{head}: stop that process first, or make the change through it (a `memext serve` process takes "
                "it over its REST API or MCP tools)")
    return str(exc)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
