"""Tools of the backend conformance suite (``tests/postgres/test_conformance_*.py``): what a store holds, read
the same way on SQLite and on PostgreSQL, and rankings compared between two backends up to ties.

Import as ``from tests.postgres.conformance_kit import ...`` (the repository root is on ``sys.path``).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from memory_ext import MemoryEngine, SearchResult, Turn
from memory_ext.store.statements import sql_of

__all__ = ["KEPT_AFTER_FORGET", "SCORE_TOL", "assert_same_ranking", "locomo_path", "namespace_rows", "ranking",
           "store_rows", "store_tables", "table_counts", "texts"]

SCORE_TOL = 1e-4
"""Two scores closer than this are a tie (pgvector computes cosine in PostgreSQL, numpy in float32)."""


def store_tables(engine: MemoryEngine) -> list[str]:
    """Every table of the engine's store (SQLite file or PostgreSQL schema), sorted."""
    store = engine._store
    conn = store.reader()
    schema = getattr(store, "schema", None)
    if schema is None:
        rows = conn.execute("SELECT name FROM sqlite_master WHERE type='table' AND name NOT LIKE 'sqlite_%'")
    else:
        rows = conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = %s", (schema,))
    return sorted(r[0] for r in rows)


KEPT_AFTER_FORGET = frozenset({"namespaces", "kw_stats", "graph_stats", "time_stats"})
"""Tables that keep a forgotten namespace's row: its id and the version counters other engines' caches compare
(numbers only — a counter that restarted could match a stale snapshot)."""


def namespace_rows(engine: MemoryEngine, ns_id: int) -> dict[str, int]:
    """Rows per table that belong to namespace ``ns_id`` (tables with an ``ns_id`` column), where there are any;
    without the :data:`KEPT_AFTER_FORGET` tables."""
    store = engine._store
    conn = store.reader()
    schema = getattr(store, "schema", None)
    out: dict[str, int] = {}
    for table in store_tables(engine):
        if schema is None:
            columns = {r[1] for r in conn.execute(f"PRAGMA table_info({table})")}
        else:
            columns = {r[0] for r in conn.execute("SELECT column_name FROM information_schema.columns"
                                                  " WHERE table_schema = %s AND table_name = %s", (schema, table))}
        if "ns_id" in columns and table not in KEPT_AFTER_FORGET:
            n = int(conn.execute(f"SELECT COUNT(*) FROM {table} WHERE ns_id = {sql_of(conn).mark}",
                                 (ns_id,)).fetchone()[0])
            if n:
                out[table] = n
    return out


def table_counts(engine: MemoryEngine) -> dict[str, int]:
    """Rows per table of the engine's store."""
    conn = engine._store.reader()
    return {t: int(conn.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0]) for t in store_tables(engine)}


def _cell(value: Any) -> Any:
    if isinstance(value, memoryview):
        return bytes(value)
    if isinstance(value, float):
        return round(value, 6)
    return value


def store_rows(engine: MemoryEngine, tables: Iterable[str] | None = None) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every table (or of ``tables``), sorted: what "nothing was written" compares."""
    conn = engine._store.reader()
    out: dict[str, list[tuple[Any, ...]]] = {}
    for table in tables if tables is not None else store_tables(engine):
        rows = conn.execute(f"SELECT * FROM {table}").fetchall()
        out[table] = sorted((tuple(_cell(v) for v in r) for r in rows), key=repr)
    return out


def texts(result: SearchResult) -> list[str]:
    return [i.text for i in result.items]


def ranking(result: SearchResult) -> list[tuple[tuple[Any, ...], float]]:
    """A result as ``(key, score)`` pairs, best first. The key names an item the same way on every backend
    (record ids are random per store): its kind, text, source turns' external ids, speaker and session."""
    return [((str(i.kind), i.text, tuple(i.external_ids), i.speaker, i.session_id), i.score) for i in result.items]


def assert_same_ranking(a: SearchResult, b: SearchResult, *, what: str = "") -> None:
    """``a`` and ``b`` rank the same items with the same scores, up to ties: the scores agree position by
    position, every item both return has the same score in both, and where the items at one position differ
    their scores tie (equal within :data:`SCORE_TOL`) — including an item cut off at ``k`` by a tie. Neither may
    be degraded (a channel that failed on one backend is a difference even when the rankings happen to agree)."""
    ra, rb = ranking(a), ranking(b)
    label = f"{what}: " if what else ""
    assert not a.channel_errors and not b.channel_errors, f"{label}degraded: {a.channel_errors} {b.channel_errors}"
    assert len(ra) == len(rb), f"{label}{len(ra)} items vs {len(rb)}:\n{ra}\n{rb}"
    for i, ((ka, sa), (kb, sb)) in enumerate(zip(ra, rb, strict=True)):
        assert abs(sa - sb) <= SCORE_TOL, f"{label}score at {i}: {sa} vs {sb}\n{ra}\n{rb}"
        if ka != kb:  # allowed only inside a group of tied scores
            tied_a = {k for k, s in ra if abs(s - sa) <= SCORE_TOL}
            tied_b = {k for k, s in rb if abs(s - sb) <= SCORE_TOL}
            assert kb in tied_a or abs(rb[-1][1] - sa) <= SCORE_TOL, f"{label}{kb} is not tied at {i}\n{ra}\n{rb}"
            assert ka in tied_b or abs(ra[-1][1] - sb) <= SCORE_TOL, f"{label}{ka} is not tied at {i}\n{ra}\n{rb}"
    score_a, score_b = dict(ra), dict(rb)
    for key in score_a.keys() & score_b.keys():
        assert abs(score_a[key] - score_b[key]) <= SCORE_TOL, f"{label}{key}: {score_a[key]} vs {score_b[key]}"


def locomo_path() -> Path | None:
    """The shared LoCoMo dev file (``MEMEXT_SHARED_DATA`` or a ``shared/data`` beside the checkout), or None."""
    env = os.environ.get("MEMEXT_SHARED_DATA")
    bases = ([Path(env)] if env else []) + [p / "shared" / "data" for p in Path(__file__).resolve().parents[1:5]]
    for base in bases:
        if (base / "locomo_dev" / "locomo_dev.json").is_file():
            return base / "locomo_dev" / "locomo_dev.json"
    return None


def locomo_conversation(max_turns: int | None = None) -> tuple[list[Turn], list[str]] | None:
    """The smallest LoCoMo dev conversation as turns (first ``max_turns``) and its questions; None without data."""
    path = locomo_path()
    if path is None:
        return None
    from memory_ext.bench.datasets import load_locomo

    conv = min(load_locomo(path), key=lambda c: len(c.turns))
    turns = [Turn(role=t.role, content=t.text, speaker=t.speaker, timestamp=t.timestamp, session_id=t.session_id,
                  external_id=t.external_id) for t in conv.turns[:max_turns]]
    return turns, [q.text for q in conv.questions]


def keys(items: Sequence[Any]) -> list[str]:
    """External ids of the first source turn of each item (stable across backends)."""
    return [i.external_ids[0] if i.external_ids else i.text for i in items]
