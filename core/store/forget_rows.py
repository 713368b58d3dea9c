"""Forgetting inside the truth store: turns, the records built from them, claims, supersession links, and the
memory files and hooks that held them (the SQL of :mod:`memory_ext.lifecycle.forgetting`, which also clears every
derived index).

A file that loses turns gets its hook cleared and recomputed from what remains when next read (so a title or
abstract cannot keep forgotten text); a file left empty is deleted, and the ids of deleted files are removed from
the ``sources`` of files merged from them. Verbatim context saved by ``pre_compress`` has each forgotten turn's
text cut out of it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence

from .interface import Connection
from .memory_files import get_file

__all__ = ["forget_turns", "records_of_turns"]

_CHUNK = 400


_GAP = r"(?:\s|\\[nrt])+"
"""Whitespace in verbatim context: real whitespace, or JSON-escaped newlines and tabs."""


def _raw_patterns(contents: Iterable[str]) -> list[re.Pattern[str]]:
    """Patterns that find a turn's text in verbatim context: as is, or JSON-escaped (a JSON message list), with
    any run of whitespace in between words (a transcript or JSON may break or space lines differently)."""
    variants: set[str] = set()
    for text in contents:
        variants.update((text, json.dumps(text, ensure_ascii=False)[1:-1], json.dumps(text)[1:-1]))
    out = []
    for v in sorted(variants, key=len, reverse=True):
        words = [w for w in re.split(_GAP, v) if w]
        if words:
            out.append(re.compile(_GAP.join(re.escape(w) for w in words)))
    return out


def records_of_turns(conn: Connection, ns_id: int, turn_ids: Sequence[str]) -> list[int]:
    """rids of every record built from any of these turns (turn records and the windows that include them)."""
    wanted = set(turn_ids)
    if not wanted:
        return []
    if len(wanted) <= 400 and conn.execute("SELECT 1 FROM records WHERE anchor_rid IS NULL AND ns_id=? LIMIT 1",
                                           (ns_id,)).fetchone() is None:
        return _records_by_anchor(conn, ns_id, wanted)
    if len(wanted) <= 50:
        out: set[int] = set()
        for t in wanted:
            out.update(int(r[0]) for r in conn.execute(
                "SELECT rid FROM records WHERE ns_id=? AND EXISTS (SELECT 1 FROM json_each(records.turn_ids) j"
                " WHERE j.value = ?)", (ns_id, t)))
        return sorted(out)
    return sorted(int(rid) for rid, ids in conn.execute("SELECT rid, turn_ids FROM records WHERE ns_id=?", (ns_id,))
                  if not wanted.isdisjoint(json.loads(ids)))


ANCHOR_REACH = 10
"""A record that holds a turn is anchored at most this many turns (seq) away from it: windows at ±1, derived
kinds read up to ``KIND_CONTEXT_TURNS`` (8) stored turns back."""


def _records_by_anchor(conn: Connection, ns_id: int, wanted: set[str]) -> list[int]:
    """:func:`records_of_turns` through the anchors near each turn (indexed lookups: the cost of the turns, not
    of the namespace)."""
    out: set[int] = set()
    for t in wanted:
        row = conn.execute("SELECT seq FROM turns WHERE ns_id=? AND id=?", (ns_id, t)).fetchone()
        if row is None:
            continue
        for rid, ids in conn.execute(
                "SELECT r.rid, r.turn_ids FROM turns n JOIN records r ON r.anchor_rid = n.record_rid"
                " WHERE n.ns_id=? AND n.seq BETWEEN ? AND ? AND r.ns_id=?",
                (ns_id, row[0] - ANCHOR_REACH, row[0] + ANCHOR_REACH, ns_id)):
            if t in json.loads(ids):
                out.add(int(rid))
    return sorted(out)


def forget_turns(conn: Connection, ns_id: int, tids: Sequence[int], *,
                 drop_files: Sequence[int] = ()) -> dict[str, list]:
    """Delete turns ``tids`` of a namespace and everything derived from them; returns what was removed.

    The caller removes the returned ``rids`` from its keyword, vector and graph indexes in the same transaction.
    ``drop_files`` (fids) are deleted whole even if other turns remain in them.
    """
    tids = sorted(set(int(t) for t in tids))
    turn_rows: list[tuple[int, str, str]] = []
    for i in range(0, len(tids), _CHUNK):
        chunk = tids[i:i + _CHUNK]
        turn_rows += conn.execute(f"SELECT tid, id, content FROM turns WHERE ns_id=? AND tid IN"
                                  f" ({','.join('?' * len(chunk))})", (ns_id, *chunk)).fetchall()
    turn_ids = [r[1] for r in turn_rows]
    rids = records_of_turns(conn, ns_id, turn_ids)
    record_ids: list[str] = []
    for i in range(0, len(rids), _CHUNK):
        chunk = rids[i:i + _CHUNK]
        marks = ",".join("?" * len(chunk))
        record_ids += [r[0] for r in conn.execute(f"SELECT id FROM records WHERE rid IN ({marks})", chunk)]
        conn.execute(f"DELETE FROM embeddings WHERE ns_id=? AND rid IN ({marks})", (ns_id, *chunk))
        conn.execute(f"DELETE FROM claims WHERE ns_id=? AND rid IN ({marks})", (ns_id, *chunk))
        conn.execute(f"DELETE FROM records WHERE ns_id=? AND rid IN ({marks})", (ns_id, *chunk))
    for i in range(0, len(record_ids), _CHUNK):  # what they had superseded is current again
        id_chunk = record_ids[i:i + _CHUNK]
        conn.execute(f"UPDATE records SET superseded_by=NULL, valid_to=NULL WHERE ns_id=? AND superseded_by IN"
                     f" ({','.join('?' * len(id_chunk))})", (ns_id, *id_chunk))
    # files: membership, raw context, hooks
    affected: set[int] = set(drop_files)
    for i in range(0, len(tids), _CHUNK):
        chunk = tids[i:i + _CHUNK]
        marks = ",".join("?" * len(chunk))
        affected.update(int(r[0]) for r in conn.execute(
            f"SELECT DISTINCT fid FROM file_turns WHERE tid IN ({marks})", chunk))
        conn.execute(f"DELETE FROM file_turns WHERE tid IN ({marks})", chunk)
    patterns = _raw_patterns(r[2] for r in turn_rows if r[2])
    for fid, raw in conn.execute("SELECT fid, raw FROM files WHERE ns_id=? AND raw IS NOT NULL", (ns_id,)).fetchall():
        new = raw
        for pattern in patterns:
            new = pattern.sub("[forgotten]", new)
        if new != raw:
            conn.execute("UPDATE files SET raw=? WHERE fid=?", (new, fid))
            affected.add(int(fid))
    deleted_files: list[str] = []
    updated_files: list[str] = []
    for fid in sorted(affected):
        row = get_file(conn, fid=fid)
        if row is None or row.ns_id != ns_id:
            continue
        left = conn.execute("SELECT COUNT(*) FROM file_turns WHERE fid=?", (fid,)).fetchone()[0]
        if fid in drop_files or left == 0:
            conn.execute("DELETE FROM file_turns WHERE fid=?", (fid,))
            conn.execute("DELETE FROM files WHERE fid=?", (fid,))
            deleted_files.append(row.id)
        else:
            from ..text import estimate_tokens

            tokens = sum(estimate_tokens(r[0][r[1]:r[2]]) for r in conn.execute(
                "SELECT t.content, ft.start, ft.stop FROM file_turns ft JOIN turns t ON t.tid = ft.tid"
                " WHERE ft.fid=?", (fid,)))
            conn.execute("UPDATE files SET token_count=? WHERE fid=?", (tokens, fid))
            updated_files.append(row.id)
    if deleted_files:
        gone = set(deleted_files)
        for fid, sources in conn.execute("SELECT fid, sources FROM files WHERE ns_id=? AND sources != '[]'",
                                         (ns_id,)).fetchall():
            src = json.loads(sources)
            kept = [s for s in src if s not in gone]
            if kept != src:
                conn.execute("UPDATE files SET sources=? WHERE fid=?", (json.dumps(kept), fid))
        conn.executemany("UPDATE files SET merged_into=NULL WHERE ns_id=? AND merged_into=?",
                         [(ns_id, f) for f in deleted_files])
    for i in range(0, len(tids), _CHUNK):
        chunk = tids[i:i + _CHUNK]
        conn.execute(f"DELETE FROM turns WHERE ns_id=? AND tid IN ({','.join('?' * len(chunk))})", (ns_id, *chunk))
    # hooks are recomputed from what remains when next read (as after a write): their text is cleared now, so
    # no title or abstract keeps forgotten text, and a forget costs what it removes, not the size of the file
    conn.executemany("UPDATE files SET title='', abstract='', key_facts='[]', entities='[]', tags='[]', hook_stale=1"
                     " WHERE id=? AND ns_id=?", [(file_id, ns_id) for file_id in updated_files])
    conn.execute("UPDATE namespaces SET generation = generation + 1 WHERE ns_id=?", (ns_id,))
    return {"turn_ids": turn_ids, "rids": rids, "record_ids": record_ids, "deleted_files": deleted_files,
            "updated_files": updated_files}
