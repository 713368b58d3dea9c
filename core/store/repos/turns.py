"""``turns`` (:class:`memory_ext.store.interface.TurnRepository`)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Sequence
from typing import Any

from ...validate import stored_json
from ..interface import Connection, StoreConflict
from ..rows import TURN_COLS as _TURN_COLS
from ..rows import TurnRow
from ..rows import turn_row as _turn_row
from ..snapshots import chunks, marks
from .base import CommonStore

__all__ = ["TURN_ID_FIX", "TurnRepo"]

TURN_ID_FIX = "turn ids must be unique in the store; omit id to get a fresh one"


class TurnRepo(CommonStore):
    """The statements of this table family, shared by the backends."""

    @staticmethod
    def next_seq(conn: Connection, ns_id: int) -> int:
        row = conn.execute("SELECT COALESCE(MAX(seq), -1) FROM turns WHERE ns_id=?", (ns_id,)).fetchone()
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
        rows = conn.execute(
            "SELECT id, session_id, speaker, content, ts, tool_calls, record_rid, role, attachments, metadata"
            " FROM turns"
            " WHERE ns_id=? ORDER BY seq DESC LIMIT ?", (ns_id, n)).fetchall()
        return [{"id": r[0], "session_id": r[1], "speaker": r[2], "content": r[3], "ts": r[4],
                 "tool_calls": stored_json(r[5], list), "rid": int(r[6]), "role": r[7],
                 "attachments": stored_json(r[8], list), "metadata": stored_json(r[9], dict)} for r in reversed(rows)]

    def turns_by_id(self, ns_id: int, turn_ids: Iterable[str]) -> dict[str, TurnRow]:
        out: dict[str, TurnRow] = {}
        conn = self.reader()
        for chunk in chunks(list(dict.fromkeys(turn_ids))):
            for r in conn.execute(f"SELECT {_TURN_COLS} FROM turns WHERE +ns_id=? AND id IN {marks(len(chunk))}",
                                  (ns_id, *chunk)):
                row = _turn_row(r)
                out[row.id] = row
        return out

    def list_turns(self, ns_id: int, session_id: str | None = None, limit: int | None = None,
                   offset: int = 0) -> list[TurnRow]:
        sql = f"SELECT {_TURN_COLS} FROM turns WHERE ns_id=?"
        args: list[Any] = [ns_id]
        if session_id is not None:
            sql += " AND session_id=?"
            args.append(session_id)
        sql += " ORDER BY seq LIMIT ? OFFSET ?"
        args += [-1 if limit is None else limit, offset]
        return [_turn_row(r) for r in self.reader().execute(sql, args)]

    def turns_by_seq_ranges(self, ns_id: int, ranges: Sequence[tuple[int, int]]) -> list[TurnRow]:
        """Turns whose seq falls in any of the inclusive ``ranges``, in seq order, each once (ranges may overlap
        and come in any order)."""
        out: dict[int, TurnRow] = {}
        conn = self.reader()
        for lo, hi in ranges:
            out.update((row.seq, row) for row in (_turn_row(r) for r in conn.execute(
                f"SELECT {_TURN_COLS} FROM turns WHERE ns_id=? AND seq BETWEEN ? AND ? ORDER BY seq", (ns_id, lo, hi))))
        return [out[seq] for seq in sorted(out)]

    def recent_turns(self, ns_id: int, limit: int) -> list[tuple[str, str, int]]:
        """``(role, content, tid)`` of the namespace's last ``limit`` turns, newest first."""
        return [(r[0], r[1], int(r[2])) for r in self.reader().execute(
            "SELECT role, content, tid FROM turns WHERE ns_id=? ORDER BY seq DESC LIMIT ?", (ns_id, limit))]

    @staticmethod
    def turns_from_seq(conn: Connection, ns_id: int, seq: int) -> list[tuple[int, float, str]]:
        """``(tid, ts, content)`` of the namespace's turns from ``seq`` on, in order (what a write archives)."""
        return conn.execute("SELECT tid, ts, content FROM turns WHERE ns_id=? AND seq>=? ORDER BY seq",
                            (ns_id, seq)).fetchall()

    @staticmethod
    def turns_with_external_ids(conn: Connection, ns_id: int, external_ids: Sequence[str]
                                ) -> dict[tuple[str, str | None], str]:
        """``(external id, session id)`` -> id of its latest stored turn, for those of ``external_ids`` the
        namespace holds (an index lookup on ``turns(ns_id, external_id)``)."""
        out: dict[tuple[str, str | None], str] = {}
        for part in chunks(list(dict.fromkeys(external_ids))):
            for ext, session, turn_id in conn.execute(
                    f"SELECT external_id, session_id, id FROM turns WHERE ns_id=? AND external_id IN"
                    f" {marks(len(part))} ORDER BY seq", (ns_id, *part)):
                out[(ext, session)] = turn_id
        return out

    @staticmethod
    def turn_lookup(conn: Connection, ns_id: int, ident: str, session_id: str | None) -> TurnRow | None:
        """The turn of a namespace with this id, else the one whose record has this id, else the latest one with
        this external id (in ``session_id`` when given) (None: no such turn)."""
        row = conn.execute(f"SELECT {_TURN_COLS} FROM turns WHERE id=? AND +ns_id=?", (ident, ns_id)).fetchone()
        if row is None:
            rec = conn.execute("SELECT anchor_rid FROM records WHERE id=? AND +ns_id=?", (ident, ns_id)).fetchone()
            if rec is not None and rec[0] is not None:
                row = conn.execute(f"SELECT {_TURN_COLS} FROM turns WHERE record_rid=? AND +ns_id=?",
                                   (int(rec[0]), ns_id)).fetchone()
        if row is None:
            row = conn.execute(f"SELECT {_TURN_COLS} FROM turns WHERE ns_id=? AND external_id=? AND (? IS NULL OR"
                               " session_id=?) ORDER BY seq DESC LIMIT 1",
                               (ns_id, ident, session_id, session_id)).fetchone()
        return None if row is None else _turn_row(row)

    @staticmethod
    def stored_turn_rows(conn: Connection, ns_id: int) -> list[dict[str, Any]]:
        """Every turn of a namespace in seq order, as the write pipeline's rows."""
        return [{"id": t.id, "seq": t.seq, "session_id": t.session_id, "role": t.role, "speaker": t.speaker,
                 "content": t.content, "ts": t.ts, "external_id": t.external_id, "tool_calls": t.tool_calls,
                 "attachments": t.attachments, "metadata": t.metadata, "token_count": t.token_count}
                for t in (_turn_row(r) for r in conn.execute(
                    f"SELECT {_TURN_COLS} FROM turns WHERE ns_id=? ORDER BY seq", (ns_id,)))]

    def turn_tids(self, ns_id: int, session_id: str | None = None) -> list[int]:
        """Row ids of every turn of the namespace (of one session when given)."""
        sql, args = "SELECT tid FROM turns WHERE ns_id=?", [ns_id]
        args_: list[Any] = list(args)
        if session_id is not None:
            sql += " AND session_id=?"
            args_.append(session_id)
        return [int(r[0]) for r in self.reader().execute(sql, args_)]

    def file_fids(self, ns_id: int) -> list[int]:
        """Row ids of every memory file of the namespace."""
        return [int(r[0]) for r in self.reader().execute("SELECT fid FROM files WHERE ns_id=?", (ns_id,))]

    def tids_of_record(self, ns_id: int, record_id: str) -> list[int] | None:
        """Row ids of the turns a record was built from (None: no record of the namespace has this id)."""
        conn = self.reader()
        row = conn.execute("SELECT turn_ids FROM records WHERE ns_id=? AND id=?", (ns_id, record_id)).fetchone()
        if row is None:
            return None
        ids = json.loads(row[0])
        return [int(r[0]) for part in chunks(ids) for r in conn.execute(
            f"SELECT tid FROM turns WHERE ns_id=? AND id IN {marks(len(part))}", (ns_id, *part))]

    def tids_of_file(self, fid: int) -> list[int]:
        """Row ids of the turns of one memory file."""
        return [int(r[0]) for r in self.reader().execute("SELECT tid FROM file_turns WHERE fid=?", (fid,))]

    def neighbour_tids(self, ns_id: int, tids: Sequence[int]) -> list[int]:
        """Turns of the same session right before or after the given ones (and not among them), sorted."""
        conn = self.reader()
        gone = set(tids)
        out: set[int] = set()
        for tid in tids:
            row = conn.execute("SELECT seq, session_id FROM turns WHERE tid=? AND ns_id=?", (tid, ns_id)).fetchone()
            if row is None:
                continue
            for r in conn.execute("SELECT tid, session_id FROM turns WHERE ns_id=? AND seq IN (?, ?)",
                                  (ns_id, row[0] - 1, row[0] + 1)):
                if r[1] == row[1] and r[0] not in gone:
                    out.add(int(r[0]))
        return sorted(out)

    @staticmethod
    def turn_records_with_neighbours(conn: Connection, ns_id: int,
                                     tids: Sequence[int]) -> list[dict[str, Any]]:
        """The turn records of ``tids`` (rid, text, speaker, ref_ts, session_id) with the contents of their
        current +-1 neighbours of the same session (``neighbours``), as ``conn`` sees them."""
        items = []
        for tid in tids:
            row = conn.execute("SELECT t.seq, t.session_id, t.record_rid, r.text, r.speaker, r.ref_ts FROM turns t"
                               " JOIN records r ON r.rid = t.record_rid WHERE t.tid=? AND t.ns_id=?",
                               (tid, ns_id)).fetchone()
            if row is None:
                continue
            seq, session, rid, text, speaker, ref_ts = row
            near = [r[0] for r in conn.execute(
                "SELECT content FROM turns WHERE ns_id=? AND session_id IS ? AND seq IN"
                " ((SELECT MAX(seq) FROM turns WHERE ns_id=? AND seq<?),"
                "  (SELECT MIN(seq) FROM turns WHERE ns_id=? AND seq>?))", (ns_id, session, ns_id, seq, ns_id, seq))]
            items.append({"rid": int(rid), "text": text, "speaker": speaker, "ref_ts": ref_ts, "session_id": session,
                          "neighbours": near})
        return items


def _insert_turns(conn: Connection, ns_id: int, rows: Sequence[dict[str, Any]], now: float) -> None:
    conn.executemany(
        "INSERT INTO turns(id, ns_id, seq, session_id, role, speaker, content, ts, external_id, tool_calls,"
        " attachments, metadata, token_count, created_at) VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
        [(r["id"], ns_id, r["seq"], r["session_id"], r["role"], r["speaker"], r["content"], r["ts"],
          r["external_id"], json.dumps(r["tool_calls"], default=str),
          json.dumps(r["attachments"], default=str), json.dumps(r["metadata"], default=str),
          r["token_count"], now) for r in rows],
    )
