"""Forgetting inside the truth store: turns, the records built from them, claims, supersession links, and the
memory files and hooks that held them (the SQL of :mod:`memory_ext.lifecycle.forgetting`, which also clears every
derived index).

A file that loses turns gets its hook cleared and recomputed from what remains when next read (so a title or
abstract cannot keep forgotten text); a file left empty is deleted, and the ids of deleted files are removed from
the ``sources`` of files merged from them. Verbatim context saved by ``pre_compress`` has each forgotten turn's
text cut out of it. Each backend writes the statements in its own dialect (:class:`ForgetSql`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from .interface import Connection
from .memory_files import get_file
from .statements import sql_of

__all__ = ["ForgetSql", "forget_turns", "records_of_turns"]


@dataclass(frozen=True)
class ForgetSql:
    """The statements of forgetting, as each backend writes them (:mod:`memory_ext.store.statements`).
    ``{marks}``: a template's ``IN`` list (``sql.marks(n)``)."""

    any_unanchored: str
    """``(ns_id,)`` -> a row when some record of the namespace has no anchor."""
    records_holding: str
    """``(ns_id, turn id)`` -> rids of the records whose ``turn_ids`` hold the turn."""
    ns_records: str
    """``(ns_id,)`` -> ``rid, turn_ids`` of every record."""
    turn_seq: str
    """``(ns_id, turn id)`` -> ``seq``."""
    anchored_near: str
    """``(ns_id, lo, hi, ns_id)`` -> ``rid, turn_ids`` of the records anchored to the turns with
    ``lo <= seq <= hi``."""
    turns_of_tids: str
    """``{marks}`` template, ``(ns_id, *tids)`` -> ``tid, id, content``."""
    record_ids: str
    """``{marks}`` template, ``(*rids)`` -> the records' ids."""
    delete_embeddings: str
    """``{marks}`` template, ``(ns_id, *rids)``."""
    delete_claims: str
    """``{marks}`` template, ``(ns_id, *rids)``."""
    delete_records: str
    """``{marks}`` template, ``(ns_id, *rids)``."""
    unsupersede: str
    """``{marks}`` template, ``(ns_id, *record ids)``: what they had superseded is current again."""
    files_of_tids: str
    """``{marks}`` template, ``(*tids)`` -> fids holding them."""
    delete_memberships: str
    """``{marks}`` template, ``(*tids)``: their file memberships."""
    raw_files: str
    """``(ns_id,)`` -> ``fid, raw`` of the files with verbatim context."""
    set_raw: str
    """``(raw, fid)``."""
    members_left: str
    """``(fid,)`` -> how many members the file has."""
    delete_file: str
    """``(fid,)``."""
    member_texts: str
    """``(fid,)`` -> ``content, start, stop`` of the file's members."""
    set_tokens: str
    """``(token_count, fid)``."""
    merged_files: str
    """``(ns_id,)`` -> ``fid, sources`` of the files merged from others."""
    unmerge: str
    """``(ns_id, file id)``: files merged into a deleted file are merged into none."""
    delete_turns: str
    """``{marks}`` template, ``(ns_id, *tids)``."""
    clear_hook: str
    """``(file id, ns_id)``: the hook's text cleared, to be recomputed."""

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
    sql = sql_of(conn).forget
    if len(wanted) <= 400 and conn.execute(sql.any_unanchored, (ns_id,)).fetchone() is None:
        return _records_by_anchor(conn, ns_id, wanted)
    if len(wanted) <= 50:
        out: set[int] = set()
        for t in wanted:
            out.update(int(r[0]) for r in conn.execute(sql.records_holding, (ns_id, t)))
        return sorted(out)
    return sorted(int(rid) for rid, ids in conn.execute(sql.ns_records, (ns_id,))
                  if not wanted.isdisjoint(json.loads(ids)))


ANCHOR_REACH = 10
"""A record that holds a turn is anchored at most this many turns (seq) away from it: windows at ±1, derived
kinds read up to ``KIND_CONTEXT_TURNS`` (8) stored turns back."""


def _records_by_anchor(conn: Connection, ns_id: int, wanted: set[str]) -> list[int]:
    """:func:`records_of_turns` through the anchors near each turn (indexed lookups: the cost of the turns, not
    of the namespace)."""
    out: set[int] = set()
    sql = sql_of(conn).forget
    for t in wanted:
        row = conn.execute(sql.turn_seq, (ns_id, t)).fetchone()
        if row is None:
            continue
        for rid, ids in conn.execute(
                sql.anchored_near,
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
    statements = sql_of(conn)
    sql = statements.forget
    turn_rows: list[tuple[int, str, str]] = []
    for i in range(0, len(tids), _CHUNK):
        chunk = tids[i:i + _CHUNK]
        turn_rows += conn.execute(sql.turns_of_tids.format(marks=statements.marks(len(chunk))),
                                  (ns_id, *chunk)).fetchall()
    turn_ids = [r[1] for r in turn_rows]
    rids = records_of_turns(conn, ns_id, turn_ids)
    record_ids: list[str] = []
    for i in range(0, len(rids), _CHUNK):
        chunk = rids[i:i + _CHUNK]
        marks = statements.marks(len(chunk))
        record_ids += [r[0] for r in conn.execute(sql.record_ids.format(marks=marks), chunk)]
        conn.execute(sql.delete_embeddings.format(marks=marks), (ns_id, *chunk))
        conn.execute(sql.delete_claims.format(marks=marks), (ns_id, *chunk))
        conn.execute(sql.delete_records.format(marks=marks), (ns_id, *chunk))
    for i in range(0, len(record_ids), _CHUNK):  # what they had superseded is current again
        id_chunk = record_ids[i:i + _CHUNK]
        conn.execute(sql.unsupersede.format(marks=statements.marks(len(id_chunk))), (ns_id, *id_chunk))
    # files: membership, raw context, hooks
    affected: set[int] = set(drop_files)
    for i in range(0, len(tids), _CHUNK):
        chunk = tids[i:i + _CHUNK]
        marks = statements.marks(len(chunk))
        affected.update(int(r[0]) for r in conn.execute(sql.files_of_tids.format(marks=marks), chunk))
        conn.execute(sql.delete_memberships.format(marks=marks), chunk)
    patterns = _raw_patterns(r[2] for r in turn_rows if r[2])
    for fid, raw in conn.execute(sql.raw_files, (ns_id,)).fetchall():
        new = raw
        for pattern in patterns:
            new = pattern.sub("[forgotten]", new)
        if new != raw:
            conn.execute(sql.set_raw, (new, fid))
            affected.add(int(fid))
    deleted_files: list[str] = []
    updated_files: list[str] = []
    for fid in sorted(affected):
        row = get_file(conn, fid=fid)
        if row is None or row.ns_id != ns_id:
            continue
        left = conn.execute(sql.members_left, (fid,)).fetchone()[0]
        if fid in drop_files or left == 0:
            conn.execute(statements.files.delete_members, (fid,))
            conn.execute(sql.delete_file, (fid,))
            deleted_files.append(row.id)
        else:
            from ..text import estimate_tokens

            tokens = sum(estimate_tokens(r[0][r[1]:r[2]]) for r in conn.execute(sql.member_texts, (fid,)))
            conn.execute(sql.set_tokens, (tokens, fid))
            updated_files.append(row.id)
    if deleted_files:
        gone = set(deleted_files)
        for fid, sources in conn.execute(sql.merged_files, (ns_id,)).fetchall():
            src = json.loads(sources)
            kept = [s for s in src if s not in gone]
            if kept != src:
                conn.execute(statements.files.set_sources, (json.dumps(kept), fid))
        conn.executemany(sql.unmerge, [(ns_id, f) for f in deleted_files])
    for i in range(0, len(tids), _CHUNK):
        chunk = tids[i:i + _CHUNK]
        conn.execute(sql.delete_turns.format(marks=statements.marks(len(chunk))), (ns_id, *chunk))
    # hooks are recomputed from what remains when next read (as after a write): their text is cleared now, so
    # no title or abstract keeps forgotten text, and a forget costs what it removes, not the size of the file
    conn.executemany(sql.clear_hook, [(file_id, ns_id) for file_id in updated_files])
    conn.execute(statements.versions.bump_generation, (ns_id,))
    return {"turn_ids": turn_ids, "rids": rids, "record_ids": record_ids, "deleted_files": deleted_files,
            "updated_files": updated_files}
