"""``turns`` (:class:`memory_ext.store.interface.TurnRepository`)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ...validate import stored_json
from ..interface import Connection, StoreConflict
from ..rows import TurnRow
from ..rows import turn_row as _turn_row
from ..snapshots import chunks
from ..statements import sql_of
from .base import CommonStore

__all__ = ["TURN_ID_FIX", "TurnRepo", "TurnsSql"]

TURN_ID_FIX = "turn ids must be unique in the store; omit id to get a fresh one"


@dataclass(frozen=True)
class TurnsSql:
    """The statements of ``turns``, as each backend writes them (:mod:`memory_ext.store.statements`).
    ``{marks}``: a template's ``IN`` list (``sql.marks(n)``); ``TURN_COLS``: :data:`memory_ext.store.rows.TURN_COLS`."""

    next_seq: str
    """``(ns_id,)`` -> the namespace's last seq, -1 when it has no turn."""
    insert_turn: str
    """``(id, ns_id, seq, session_id, role, speaker, content, ts, external_id, tool_calls, attachments, metadata,
    token_count, created_at)``: one turn (``executemany``)."""
    tail_turns: str
    """``(ns_id, n)`` -> the last ``n`` turns, newest first (the columns :meth:`TurnRepo.tail_turns` reads)."""
    turns_by_id: str
    """``{marks}`` template, ``(ns_id, *ids)`` -> TURN_COLS of those turns (by the id index)."""
    list_turns: str
    """``(ns_id,)`` -> TURN_COLS of the namespace's turns (a prefix: :meth:`TurnRepo.list_turns` adds to it)."""
    seq_range: str
    """``(ns_id, lo, hi)`` -> TURN_COLS of the turns with ``lo <= seq <= hi``, in seq order."""
    recent_turns: str
    """``(ns_id, limit)`` -> ``role, content, tid`` of the last turns, newest first."""
    turns_from_seq: str
    """``(ns_id, seq)`` -> ``tid, ts, content`` from ``seq`` on, in order."""
    external_ids: str
    """``{marks}`` template, ``(ns_id, *external_ids)`` -> ``external_id, session_id, id`` in seq order."""
    turn_by_id: str
    """``(id, ns_id)`` -> TURN_COLS of the turn (by the id index)."""
    record_anchor: str
    """``(record id, ns_id)`` -> the record's ``anchor_rid``."""
    turn_by_record: str
    """``(record_rid, ns_id)`` -> TURN_COLS of the turn of that turn record."""
    turn_by_external: str
    """``(ns_id, external_id, session_id, session_id)`` -> TURN_COLS of the latest turn with that external id
    (in that session unless it is NULL)."""
    all_turns: str
    """``(ns_id,)`` -> TURN_COLS of every turn, in seq order."""
    turn_tids: str
    """``(ns_id,)`` -> tids (a prefix: ``AND session_id=`` may follow)."""
    file_fids: str
    """``(ns_id,)`` -> fids of the namespace's memory files."""
    record_turn_ids: str
    """``(ns_id, record id)`` -> the record's ``turn_ids`` (JSON)."""
    tids_by_id: str
    """``{marks}`` template, ``(ns_id, *turn ids)`` -> tids."""
    tids_of_file: str
    """``(fid,)`` -> tids of the file's members."""
    seq_session: str
    """``(tid, ns_id)`` -> ``seq, session_id``."""
    seq_pair: str
    """``(ns_id, seq_a, seq_b)`` -> ``tid, session_id`` of the turns with those seqs."""
    turn_record: str
    """``(tid, ns_id)`` -> ``seq, session_id, record_rid, text, speaker, ref_ts`` of the turn and its record."""
    neighbours: str
    """``(ns_id, session_id, ns_id, seq, ns_id, seq)`` -> ``content`` of the turns of the same session right
    before and after ``seq`` (a NULL session matches NULL)."""


class TurnRepo(CommonStore):
    """The statements of this table family, shared by the backends."""

    @staticmethod
    def next_seq(conn: Connection, ns_id: int) -> int:
        row = conn.execute(sql_of(conn).turns.next_seq, (ns_id,)).fetchone()
        return int(row[0]) + 1

    @staticmethod
    def insert_turns(conn: Connection, ns_id: int, rows: Sequence[dict[str, Any]]) -> None:
        now = time.time()
        try:
            _insert_turns(conn, ns_id, rows, now)
        except StoreConflict as exc:  # what the backend raises for a unique violation
            raise StoreConflict("turns.id", exc.detail, TURN_ID_FIX) from None

    @staticmethod
    def tail_turns(conn: Connection, ns_id: int, n: int = 2) -> list[dict[str, Any]]:
        """The namespace's last ``n`` turns (oldest first), with the rid of each one's turn record."""
        rows = conn.execute(sql_of(conn).turns.tail_turns, (ns_id, n)).fetchall()
        return [{"id": r[0], "session_id": r[1], "speaker": r[2], "content": r[3], "ts": r[4],
                 "tool_calls": stored_json(r[5], list), "rid": int(r[6]), "role": r[7],
                 "attachments": stored_json(r[8], list), "metadata": stored_json(r[9], dict)} for r in reversed(rows)]

    def turns_by_id(self, ns_id: int, turn_ids: Iterable[str]) -> dict[str, TurnRow]:
        out: dict[str, TurnRow] = {}
        conn = self.reader()
        sql = sql_of(conn)
        for chunk in chunks(list(dict.fromkeys(turn_ids))):
            for r in conn.execute(sql.turns.turns_by_id.format(marks=sql.marks(len(chunk))), (ns_id, *chunk)):
                row = _turn_row(r)
                out[row.id] = row
        return out

    def list_turns(self, ns_id: int, session_id: str | None = None, limit: int | None = None,
                   offset: int = 0) -> list[TurnRow]:
        conn = self.reader()
        sql = sql_of(conn)
        text = sql.turns.list_turns
        args: list[Any] = [ns_id]
        if session_id is not None:
            text += f" AND session_id={sql.mark}"
            args.append(session_id)
        text += f" ORDER BY seq LIMIT {sql.mark} OFFSET {sql.mark}"
        args += [-1 if limit is None else limit, offset]
        return [_turn_row(r) for r in conn.execute(text, args)]

    def turns_by_seq_ranges(self, ns_id: int, ranges: Sequence[tuple[int, int]]) -> list[TurnRow]:
        """Turns whose seq falls in any of the inclusive ``ranges``, in seq order, each once (ranges may overlap
        and come in any order)."""
        out: dict[int, TurnRow] = {}
        conn = self.reader()
        text = sql_of(conn).turns.seq_range
        for lo, hi in ranges:
            out.update((row.seq, row) for row in (_turn_row(r) for r in conn.execute(text, (ns_id, lo, hi))))
        return [out[seq] for seq in sorted(out)]

    def recent_turns(self, ns_id: int, limit: int) -> list[tuple[str, str, int]]:
        """``(role, content, tid)`` of the namespace's last ``limit`` turns, newest first."""
        conn = self.reader()
        return [(r[0], r[1], int(r[2])) for r in conn.execute(sql_of(conn).turns.recent_turns, (ns_id, limit))]

    @staticmethod
    def turns_from_seq(conn: Connection, ns_id: int, seq: int) -> list[tuple[int, float, str]]:
        """``(tid, ts, content)`` of the namespace's turns from ``seq`` on, in order (what a write archives)."""
        return conn.execute(sql_of(conn).turns.turns_from_seq, (ns_id, seq)).fetchall()

    @staticmethod
    def turns_with_external_ids(conn: Connection, ns_id: int, external_ids: Sequence[str]
                                ) -> dict[tuple[str, str | None], str]:
        """``(external id, session id)`` -> id of its latest stored turn, for those of ``external_ids`` the
        namespace holds (an index lookup on ``turns(ns_id, external_id)``)."""
        out: dict[tuple[str, str | None], str] = {}
        sql = sql_of(conn)
        for part in chunks(list(dict.fromkeys(external_ids))):
            for ext, session, turn_id in conn.execute(
                    sql.turns.external_ids.format(marks=sql.marks(len(part))), (ns_id, *part)):
                out[(ext, session)] = turn_id
        return out

    @staticmethod
    def turn_lookup(conn: Connection, ns_id: int, ident: str, session_id: str | None) -> TurnRow | None:
        """The turn of a namespace with this id, else the one whose record has this id, else the latest one with
        this external id (in ``session_id`` when given) (None: no such turn)."""
        sql = sql_of(conn).turns
        row = conn.execute(sql.turn_by_id, (ident, ns_id)).fetchone()
        if row is None:
            rec = conn.execute(sql.record_anchor, (ident, ns_id)).fetchone()
            if rec is not None and rec[0] is not None:
                row = conn.execute(sql.turn_by_record, (int(rec[0]), ns_id)).fetchone()
        if row is None:
            row = conn.execute(sql.turn_by_external, (ns_id, ident, session_id, session_id)).fetchone()
        return None if row is None else _turn_row(row)

    @staticmethod
    def stored_turn_rows(conn: Connection, ns_id: int) -> list[dict[str, Any]]:
        """Every turn of a namespace in seq order, as the write pipeline's rows."""
        return [{"id": t.id, "seq": t.seq, "session_id": t.session_id, "role": t.role, "speaker": t.speaker,
                 "content": t.content, "ts": t.ts, "external_id": t.external_id, "tool_calls": t.tool_calls,
                 "attachments": t.attachments, "metadata": t.metadata, "token_count": t.token_count}
                for t in (_turn_row(r) for r in conn.execute(sql_of(conn).turns.all_turns, (ns_id,)))]

    def turn_tids(self, ns_id: int, session_id: str | None = None) -> list[int]:
        """Row ids of every turn of the namespace (of one session when given)."""
        conn = self.reader()
        sql = sql_of(conn)
        text, args = sql.turns.turn_tids, [ns_id]
        args_: list[Any] = list(args)
        if session_id is not None:
            text += f" AND session_id={sql.mark}"
            args_.append(session_id)
        return [int(r[0]) for r in conn.execute(text, args_)]

    def file_fids(self, ns_id: int) -> list[int]:
        """Row ids of every memory file of the namespace."""
        conn = self.reader()
        return [int(r[0]) for r in conn.execute(sql_of(conn).turns.file_fids, (ns_id,))]

    def tids_of_record(self, ns_id: int, record_id: str) -> list[int] | None:
        """Row ids of the turns a record was built from (None: no record of the namespace has this id)."""
        conn = self.reader()
        sql = sql_of(conn)
        row = conn.execute(sql.turns.record_turn_ids, (ns_id, record_id)).fetchone()
        if row is None:
            return None
        ids = json.loads(row[0])
        return [int(r[0]) for part in chunks(ids) for r in conn.execute(
            sql.turns.tids_by_id.format(marks=sql.marks(len(part))), (ns_id, *part))]

    def tids_of_file(self, fid: int) -> list[int]:
        """Row ids of the turns of one memory file."""
        conn = self.reader()
        return [int(r[0]) for r in conn.execute(sql_of(conn).turns.tids_of_file, (fid,))]

    def neighbour_tids(self, ns_id: int, tids: Sequence[int]) -> list[int]:
        """Turns of the same session right before or after the given ones (and not among them), sorted."""
        conn = self.reader()
        sql = sql_of(conn).turns
        gone = set(tids)
        out: set[int] = set()
        for tid in tids:
            row = conn.execute(sql.seq_session, (tid, ns_id)).fetchone()
            if row is None:
                continue
            for r in conn.execute(sql.seq_pair, (ns_id, row[0] - 1, row[0] + 1)):
                if r[1] == row[1] and r[0] not in gone:
                    out.add(int(r[0]))
        return sorted(out)

    @staticmethod
    def turn_records_with_neighbours(conn: Connection, ns_id: int,
                                     tids: Sequence[int]) -> list[dict[str, Any]]:
        """The turn records of ``tids`` (rid, text, speaker, ref_ts, session_id) with the contents of their
        current +-1 neighbours of the same session (``neighbours``), as ``conn`` sees them."""
        sql = sql_of(conn).turns
        items = []
        for tid in tids:
            row = conn.execute(sql.turn_record, (tid, ns_id)).fetchone()
            if row is None:
                continue
            seq, session, rid, text, speaker, ref_ts = row
            near = [r[0] for r in conn.execute(sql.neighbours, (ns_id, session, ns_id, seq, ns_id, seq))]
            items.append({"rid": int(rid), "text": text, "speaker": speaker, "ref_ts": ref_ts, "session_id": session,
                          "neighbours": near})
        return items


def _insert_turns(conn: Connection, ns_id: int, rows: Sequence[dict[str, Any]], now: float) -> None:
    conn.executemany(
        sql_of(conn).turns.insert_turn,
        [(r["id"], ns_id, r["seq"], r["session_id"], r["role"], r["speaker"], r["content"], r["ts"],
          r["external_id"], json.dumps(r["tool_calls"], default=str),
          json.dumps(r["attachments"], default=str), json.dumps(r["metadata"], default=str),
          r["token_count"], now) for r in rows],
    )
