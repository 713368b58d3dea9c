"""Memory versions: ``memory_history`` and the version flags of ``records``
(:class:`memory_ext.store.interface.VersionRepository`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..filters import RecordFilter, filter_sql
from ..interface import Connection
from ..rows import TURN_COLS as _TURN_COLS
from ..rows import TURN_NCOLS, TurnRow
from ..rows import turn_row as _turn_row
from ..snapshots import chunks, marks
from .base import CommonStore

__all__ = ["VersionRepo"]


class VersionRepo(CommonStore):
    """The statements of this table family, shared by the backends."""

    @staticmethod
    def turns_of_memory(conn: Connection, ns_id: int, key: str, session_id: str | None
                        ) -> list[tuple[TurnRow, float | None, int]]:
        """Every stored version of a memory (its key: an external id, within ``session_id``, or its first turn's
        id), oldest first, each with its turn record's ``valid_to`` and ``replaced`` flag."""
        rows = conn.execute(
            f"SELECT {', '.join('t.' + c.strip() for c in _TURN_COLS.split(','))}, r.valid_to, r.replaced"
            " FROM turns t LEFT JOIN records r ON r.rid = t.record_rid WHERE t.ns_id=? AND ((t.external_id=? AND"
            " t.session_id IS ?) OR t.id=? OR t.id IN (SELECT turn_id FROM memory_history WHERE ns_id=? AND"
            " memory_key=? AND session_id IS ?)) ORDER BY t.seq",
            (ns_id, key, session_id, key, ns_id, key, session_id)).fetchall()
        return [(_turn_row(r[:TURN_NCOLS]), r[TURN_NCOLS], int(r[TURN_NCOLS + 1] or 0)) for r in rows]

    @staticmethod
    def turn_record_ids(conn: Connection, ns_id: int, turn_ids: Sequence[str]) -> list[str]:
        """Ids of the turn records of these turns (what ``forget(record_ids=...)`` takes)."""
        out: list[str] = []
        for part in chunks(list(turn_ids)):
            out += [r[0] for r in conn.execute(
                f"SELECT r.id FROM turns t JOIN records r ON r.rid = t.record_rid WHERE t.id IN {marks(len(part))}"
                " AND t.ns_id=?", (*part, ns_id))]
        return out

    @staticmethod
    def memory_key_of(conn: Connection, ns_id: int, turn_id: str) -> str | None:
        """The memory key an update recorded for this turn (None: the turn was not written by an update)."""
        row = conn.execute("SELECT memory_key FROM memory_history WHERE turn_id=? AND ns_id=? LIMIT 1",
                           (turn_id, ns_id)).fetchone()
        return None if row is None else str(row[0])

    @staticmethod
    def memory_keys_of(conn: Connection, ns_id: int, turn_ids: Sequence[str]) -> dict[str, str]:
        """The memory key an update recorded for each of these turns (turns not written by an update are left
        out): one query per 500 turns, for a page of :meth:`current_turns`."""
        out: dict[str, str] = {}
        for part in chunks(list(turn_ids)):
            out.update((str(r[0]), str(r[1])) for r in conn.execute(
                f"SELECT turn_id, memory_key FROM memory_history WHERE ns_id=? AND turn_id IN {marks(len(part))}",
                (ns_id, *part)))
        return out

    @staticmethod
    def mark_replaced(conn: Connection, ns_id: int, turn_id: str, ts: float, by_record_id: str) -> None:
        """An update replaced this turn: its turn record and the records anchored to it end at ``ts``."""
        conn.execute("UPDATE records SET valid_to=?, superseded_by=?, replaced=1 WHERE ns_id=? AND rid IN"
                     " (SELECT r.rid FROM turns t JOIN records r ON r.rid = t.record_rid OR r.anchor_rid = t.record_rid"
                     " WHERE t.id=? AND t.ns_id=?)", (ts, by_record_id, ns_id, turn_id, ns_id))
        conn.execute("UPDATE namespaces SET flags_generation = flags_generation + 1 WHERE ns_id=?", (ns_id,))

    @staticmethod
    def add_history(conn: Connection, ns_id: int, key: str, session_id: str | None, op: str,
                    turn_id: str | None, ts: float) -> None:
        """Record an operation (``update`` with the new version's turn id; ``delete`` with none)."""
        conn.execute("INSERT INTO memory_history(ns_id, memory_key, session_id, op, turn_id, ts)"
                     " VALUES(?,?,?,?,?,?)", (ns_id, key, session_id, op, turn_id, ts))

    @staticmethod
    def history_ops(conn: Connection, ns_id: int, key: str, session_id: str | None
                    ) -> list[tuple[str, str | None, float, str | None]]:
        """``(op, turn id, ts, session id)`` of the operations recorded for a memory (in ``session_id`` when
        given), oldest first."""
        return [(r[0], r[1], float(r[2]), r[3]) for r in conn.execute(
            "SELECT op, turn_id, ts, session_id FROM memory_history WHERE ns_id=? AND memory_key=? AND (? IS NULL OR"
            " session_id IS ?) ORDER BY hid", (ns_id, key, session_id, session_id))]

    @staticmethod
    def delete_history(conn: Connection, ns_id: int) -> None:
        """Forget a whole namespace's history."""
        conn.execute("DELETE FROM memory_history WHERE ns_id=?", (ns_id,))

    def current_turns(self, conn: Connection, ns_id: int, record_filter: RecordFilter, *,
                      before_seq: int | None, limit: int) -> list[TurnRow]:
        """The namespace's turns whose version is current (their turn record not replaced by an update) and that
        pass ``record_filter``, most recently written first, ``limit`` of them, below ``before_seq`` when given."""
        where, args = filter_sql(record_filter, self.dialect)
        sql = (f"SELECT {', '.join('t.' + c.strip() for c in _TURN_COLS.split(','))} FROM turns t"
               " LEFT JOIN records r ON r.rid = t.record_rid WHERE t.ns_id=? AND COALESCE(r.replaced, 0) = 0")
        params: list[Any] = [ns_id]
        if where:
            sql += f" AND t.record_rid IN (SELECT rid FROM records WHERE ns_id=? AND kind='turn' AND ({where}))"
            params += [ns_id, *args]
        if before_seq is not None:
            sql += " AND t.seq < ?"
            params.append(before_seq)
        sql += " ORDER BY t.seq DESC LIMIT ?"
        return [_turn_row(r) for r in conn.execute(sql, (*params, limit))]

    def replaced_turn_ids(self, ns_id: int) -> set[str]:
        """Ids of the namespace's turns whose version an update replaced."""
        return {str(r[0]) for r in self.reader().execute(
            "SELECT t.id FROM turns t JOIN records r ON r.rid = t.record_rid WHERE t.ns_id=? AND r.replaced=1",
            (ns_id,))}

    @staticmethod
    def live_update_counts(conn: Connection, ns_id: int, keys: Sequence[str]
                           ) -> dict[tuple[str, str | None], int]:
        """Per ``(memory key, session)``: how many versions written by an update are still stored (a memory's
        version count is one more), one query per 500 keys."""
        out: dict[tuple[str, str | None], int] = {}
        for part in chunks(list(dict.fromkeys(keys))):
            for key, session, n in conn.execute(
                    "SELECT h.memory_key, h.session_id, COUNT(*) FROM memory_history h JOIN turns t ON t.id = h.turn_id"
                    f" AND t.ns_id = h.ns_id WHERE h.ns_id=? AND h.op='update' AND h.memory_key IN {marks(len(part))}"
                    " GROUP BY h.memory_key, h.session_id", (ns_id, *part)):
                out[(str(key), session)] = int(n)
        return out

    @staticmethod
    def reindex_state(conn: Connection, ns_id: int) -> dict[str, Any]:
        """What a reindex of a namespace keeps of its records: each turn's record id, the turns whose version
        an update replaced (``(turn id, valid_to, superseded_by)``) and the turns (tids) in the cold tier."""
        rows = conn.execute("SELECT t.id, r.id, r.replaced, r.valid_to, r.superseded_by, r.cold, t.tid FROM turns t"
                            " JOIN records r ON r.rid = t.record_rid WHERE t.ns_id=?", (ns_id,)).fetchall()
        return {"record_ids": {r[0]: r[1] for r in rows},
                "replaced": [(r[0], float(r[3]), r[4]) for r in rows if r[2] and r[3] is not None and r[4]],
                "cold": [int(r[6]) for r in rows if r[5]]}

    @staticmethod
    def clear_records(conn: Connection, ns_id: int) -> None:
        """Delete every record of a namespace with its vectors and claims (the turns and files stay)."""
        conn.execute("DELETE FROM embeddings WHERE ns_id=?", (ns_id,))
        conn.execute("DELETE FROM claims WHERE ns_id=?", (ns_id,))
        conn.execute("DELETE FROM records WHERE ns_id=?", (ns_id,))
        conn.execute("UPDATE turns SET record_rid=NULL WHERE ns_id=?", (ns_id,))
        conn.execute("UPDATE namespaces SET generation = generation + 1 WHERE ns_id=?", (ns_id,))

    @staticmethod
    def delete_claims(conn: Connection, ns_id: int) -> None:
        """Every supersession claim of the namespace (when it is forgotten whole)."""
        conn.execute("DELETE FROM claims WHERE ns_id=?", (ns_id,))
