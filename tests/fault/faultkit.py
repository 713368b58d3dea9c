"""Shared tools of the fault suite and the hardening tests: byte scans of a store directory, a reader process
that holds a SQLite read snapshot until told to leave, and invariant checks of a reopened store.

Import as ``from tests.fault.faultkit import ...`` (the repository root is on ``sys.path``, see pyproject).
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path
from types import TracebackType

__all__ = ["SnapshotReader", "file_listing", "hnsw_slack", "invariant_violations", "plant_in_free_space", "row_counts",
           "scan_bytes"]

_READER = r"""
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None, timeout=30)
conn.execute("BEGIN")
n = conn.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()[0]
for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type='table'").fetchall():
    conn.execute(f'SELECT COUNT(*) FROM "{name}"').fetchone()
print("holding", n, flush=True)
sys.stdin.readline()          # the parent releases the snapshot by writing a line
conn.execute("COMMIT")
conn.close()
print("released", flush=True)
"""


class SnapshotReader:
    """Another *process* inside ``BEGIN; SELECT ...`` on a SQLite file, until :meth:`release` (or the end of the
    ``with`` block). Like a long ``sqlite3 db .backup`` or a read-only engine in the middle of a search.

    >>> # with SnapshotReader(store / "memory.sqlite3") as reader: ...; reader.release()
    """

    def __init__(self, db: str | os.PathLike[str]) -> None:
        self.db = Path(db)
        self._proc: subprocess.Popen[str] | None = None

    def __enter__(self) -> SnapshotReader:
        self._proc = subprocess.Popen([sys.executable, "-c", _READER, str(self.db)], stdin=subprocess.PIPE,
                                      stdout=subprocess.PIPE, text=True)
        assert self._proc.stdout is not None
        line = self._proc.stdout.readline()
        if not line.startswith("holding"):
            raise RuntimeError(f"reader did not start: {line!r}")
        return self

    @property
    def holding(self) -> bool:
        """True while the reader process is alive and has not been told to release its snapshot."""
        return self._proc is not None and self._proc.poll() is None and not self._proc.stdin.closed  # type: ignore[union-attr]

    def release(self) -> None:
        if self._proc is None or self._proc.poll() is not None:
            return
        assert self._proc.stdin is not None and self._proc.stdout is not None
        self._proc.stdin.write("\n")
        self._proc.stdin.close()
        self._proc.stdout.readline()
        self._proc.wait(timeout=60)

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        if self._proc is not None and self._proc.poll() is None:
            try:
                self.release()
            except Exception:  # noqa: BLE001  any failure to release: the child is killed instead
                self._proc.kill()
                self._proc.wait()


def scan_bytes(directory: str | os.PathLike[str], needles: Iterable[bytes]) -> dict[str, int]:
    """``{relative file: occurrences}`` of any of ``needles`` in every byte of every file under ``directory``."""
    root = Path(directory)
    found: dict[str, int] = {}
    needles = [n for n in needles if n]
    for path in sorted(root.rglob("*")):
        if not path.is_file():
            continue
        data = path.read_bytes()
        hits = sum(data.count(n) for n in needles)
        if hits:
            found[str(path.relative_to(root))] = hits
    return found


def plant_in_free_space(db: str | os.PathLike[str], data: bytes, pages: int = 3) -> list[int]:
    """Write ``data`` into the unallocated gap (between the cell pointer array and the cell content) of up to
    ``pages`` live b-tree leaf pages of a closed SQLite database, the largest gaps first: what a b-tree balance
    leaves behind when it moves cells to a sibling page, and ``secure_delete`` never clears. Returns the pages.

    Independent of :mod:`memory_ext.store.sqlite_scrub` on purpose (the fault suite checks it, not with it).
    """
    import struct

    path = Path(db)
    raw = bytearray(path.read_bytes())
    page_size = int.from_bytes(raw[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    gaps: list[tuple[int, int, int]] = []  # (gap size, page number, gap start)
    for pgno in range(2, len(raw) // page_size + 1):  # page 1 (the schema) is left alone
        base = (pgno - 1) * page_size
        if raw[base] not in (10, 13):  # index leaf, table leaf
            continue
        ncell, content = struct.unpack_from(">HH", raw, base + 3)
        start = 8 + 2 * ncell
        if (content or 65536) - start >= len(data) + 8:
            gaps.append(((content or 65536) - start, pgno, start))
    chosen = sorted(gaps, reverse=True)[:pages]
    for _, pgno, start in chosen:
        offset = (pgno - 1) * page_size + start + 4
        raw[offset:offset + len(data)] = data
    path.write_bytes(bytes(raw))
    return [pgno for _, pgno, _ in chosen]


def hnsw_slack(directory: str | os.PathLike[str]) -> dict[str, int]:
    """``{relative file: non-zero bytes}`` past the element count of every Chroma HNSW segment under ``directory``:
    the capacity hnswlib writes from uninitialised memory (``data_level0.bin``, ``length.bin``), which must hold
    nothing. Segments whose ``header.bin`` is not hnswlib's version-1 layout are skipped."""
    import struct

    root = Path(directory)
    found: dict[str, int] = {}
    for header in sorted(root.rglob("header.bin")):
        raw = header.read_bytes()
        if len(raw) < 36:
            continue
        version, _, _, count, slot = struct.unpack_from("<iQQQQ", raw)
        if version != 1:
            continue
        for name, size in (("data_level0.bin", slot), ("length.bin", 4)):
            path = header.parent / name
            if path.is_file():
                tail = path.read_bytes()[count * size:]
                if (n := len(tail) - tail.count(0)):
                    found[str(path.relative_to(root))] = n
    return found


def file_listing(directory: str | os.PathLike[str]) -> list[str] | None:
    """Relative paths of every file and folder under ``directory`` (None if it does not exist)."""
    root = Path(directory)
    if not root.exists():
        return None
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


_TABLES = ("namespaces", "turns", "records", "embeddings", "files", "file_turns", "claims")


def row_counts(db: str | os.PathLike[str]) -> dict[str, int] | None:
    """Rows of the truth store's main tables, read through a separate read-only connection (None: no db)."""
    path = Path(db)
    if not path.exists():
        return None
    conn = sqlite3.connect(f"{path.absolute().as_uri()}?mode=ro", uri=True)
    try:
        names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        return {t: int(conn.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0]) for t in _TABLES if t in names}
    finally:
        conn.close()


INVARIANTS: dict[str, str] = {
    "file without turns": "SELECT COUNT(*) FROM files f WHERE merged_into IS NULL AND NOT EXISTS"
                          " (SELECT 1 FROM file_turns m WHERE m.fid = f.fid)",
    "membership of a missing turn": "SELECT COUNT(*) FROM file_turns m WHERE NOT EXISTS"
                                    " (SELECT 1 FROM turns t WHERE t.tid = m.tid)",
    "membership of a missing file": "SELECT COUNT(*) FROM file_turns m WHERE NOT EXISTS"
                                    " (SELECT 1 FROM files f WHERE f.fid = m.fid)",
    "turn record without turn": "SELECT COUNT(*) FROM records r WHERE kind = 'turn' AND NOT EXISTS"
                                " (SELECT 1 FROM turns t WHERE t.record_rid = r.rid)",
    "turn without its record": "SELECT COUNT(*) FROM turns t WHERE NOT EXISTS"
                               " (SELECT 1 FROM records r WHERE r.rid = t.record_rid)",
    "vector without record": "SELECT COUNT(*) FROM embeddings e WHERE NOT EXISTS"
                             " (SELECT 1 FROM records r WHERE r.rid = e.rid)",
    "hook of a missing namespace": "SELECT COUNT(*) FROM files f WHERE NOT EXISTS"
                                   " (SELECT 1 FROM namespaces n WHERE n.ns_id = f.ns_id)",
}
"""The structural invariants every backend's truth store keeps (name -> SQL counting the rows that break it)."""


def invariant_violations(db: str | os.PathLike[str], chroma_ids: Iterable[int] | None = None) -> list[str]:
    """The structural invariants of a truth store; an empty list when it is sound.

    No memory file without turns (unless it is a merged/evicted file whose turns moved), no membership row or
    record pointing at a missing turn, no vector without its record, no turn record without its vector when
    vectors are kept, no hook (file) of a namespace that does not exist, and (given ``chroma_ids``) the Chroma
    collection holding exactly the truth store's vectors.
    """
    conn = sqlite3.connect(f"{Path(db).absolute().as_uri()}?mode=ro", uri=True)
    out: list[str] = []

    def q(sql: str) -> int:
        return int(conn.execute(sql).fetchone()[0])

    try:
        ok = conn.execute("PRAGMA integrity_check").fetchone()[0]
        if ok != "ok":
            out.append(f"integrity_check: {ok}")
        checks = INVARIANTS
        for name, sql in checks.items():
            if (n := q(sql)):
                out.append(f"{name}: {n}")
        # a record's vector is written by the background indexer: until then the record is in its durable queue
        queued = " AND NOT EXISTS (SELECT 1 FROM index_queue x WHERE x.rid = r.rid)" if q(
            "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = 'index_queue'") else ""
        if q("SELECT COUNT(*) FROM embeddings") and (n := q("SELECT COUNT(*) FROM records r WHERE NOT EXISTS"
                                                           " (SELECT 1 FROM embeddings e WHERE e.rid = r.rid)"
                                                           + queued)):
            out.append(f"record without vector and not queued: {n}")
        if chroma_ids is not None:
            truth = {int(r[0]) for r in conn.execute("SELECT rid FROM embeddings")}
            held = set(chroma_ids)
            if held - truth:
                out.append(f"chroma vector without record: {len(held - truth)}")
            if truth - held:
                out.append(f"record without chroma vector: {len(truth - held)}")
    finally:
        conn.close()
    return out


def pg_invariant_violations(dsn: str, schema: str) -> list[str]:
    """:func:`invariant_violations` for a PostgreSQL store (schema ``schema``), plus the pgvector table holding
    exactly the truth store's vectors and its per-namespace counts being right."""
    import psycopg

    out: list[str] = []
    with psycopg.connect(dsn) as conn:
        conn.execute(f"SET search_path TO {schema}")

        def q(sql: str) -> int:
            return int(conn.execute(sql).fetchone()[0])

        for name, sql in INVARIANTS.items():
            if (n := q(sql)):
                out.append(f"{name}: {n}")
        if (n := q("SELECT COUNT(*) FROM records r WHERE NOT EXISTS (SELECT 1 FROM embeddings e WHERE e.rid = r.rid)"
                   " AND NOT EXISTS (SELECT 1 FROM index_queue x WHERE x.rid = r.rid)")):
            out.append(f"record without vector and not queued: {n}")
        dims = [int(r[0]) for r in conn.execute("SELECT value FROM meta WHERE key = 'embedder_dim'")]
        for dim in dims:
            table = f"pgvector_d{dim}"
            if (n := q(f"SELECT COUNT(*) FROM {table} p FULL JOIN embeddings e ON e.rid = p.rid"
                       " WHERE p.rid IS NULL OR e.rid IS NULL")):
                out.append(f"pgvector rows differing from the truth store's vectors: {n}")
            if (n := q(f"SELECT COUNT(*) FROM (SELECT ns_id, COUNT(*) AS n FROM {table} GROUP BY ns_id) v"
                       f" FULL JOIN {table}_counts c ON c.ns_id = v.ns_id WHERE COALESCE(v.n, 0) <> COALESCE(c.n, 0)")):
                out.append(f"{table}_counts wrong for {n} namespaces")
        if (n := q("SELECT COUNT(*) FROM (SELECT ns_id, seq FROM turns GROUP BY ns_id, seq HAVING COUNT(*) > 1) d")):
            out.append(f"duplicate sequence numbers: {n}")
    return out
