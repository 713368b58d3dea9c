"""Memory versions: ``memory_history`` and the version flags of ``records``
(:class:`memory_ext.store.interface.VersionRepository`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..filters import RecordFilter, filter_sql
from ..interface import Connection
from ..rows import TURN_NCOLS, TurnRow
from ..rows import turn_row as _turn_row
from ..snapshots import chunks
from ..statements import sql_of
from .base import CommonStore

__all__ = ["VersionRepo", "VersionsSql"]


@dataclass(frozen=True)
class VersionsSql:
    """The statements of memory versions (``memory_history``, the version flags of ``records``), as each
    backend writes them (:mod:`memory_ext.store.statements`). ``{marks}``: a template's ``IN`` list;
    ``T_COLS``: :data:`memory_ext.store.rows.TURN_COLS` of ``turns t``."""

    versions_of_memory: str
    """``(ns_id, key, session_id, key, ns_id, key, session_id)`` -> T_COLS, ``valid_to``, ``replaced`` of every
    version of a memory (NULL sessions match NULL), in seq order."""
    turn_record_ids: str
    """``{marks}`` template, ``(*turn ids, ns_id)`` -> ids of their turn records."""
    memory_key_of: str
    """``(turn_id, ns_id)`` -> the memory key an update recorded for the turn."""
    memory_keys_of: str
    """``{marks}`` template, ``(ns_id, *turn ids)`` -> ``turn_id, memory_key``."""
    mark_replaced: str
    """``(valid_to, superseded_by, ns_id, turn id, ns_id)``: the turn's record and the records anchored to it are
    replaced."""
    stale_hooks: str
    """``(turn id, ns_id)``: the hooks of the files holding the turn are recomputed when next read."""
    bump_flags: str
    """``(ns_id,)``: the namespace's flags generation + 1."""
    add_history: str
    """``(ns_id, memory_key, session_id, op, turn_id, ts)``."""
    history_ops: str
    """``(ns_id, key, session_id, session_id)`` -> ``op, turn_id, ts, session_id`` in order (every session when
    it is NULL; a NULL session matches NULL)."""
    delete_history: str
    """``(ns_id,)``."""
    current_turns: str
    """``(ns_id,)`` -> T_COLS of the turns whose version is current (a prefix: :meth:`VersionRepo.current_turns`
    adds to it)."""
    current_filter: str
    """``{where}`` template, ``(ns_id, *args)``: `` AND`` the turn record passes a record filter."""
    replaced_turn_ids: str
    """``(ns_id,)`` -> ids of the turns an update replaced."""
    live_update_counts: str
    """``{marks}`` template, ``(ns_id, *keys)`` -> ``memory_key, session_id, count`` of stored update versions."""
    reindex_state: str
    """``(ns_id,)`` -> ``turn id, record id, replaced, valid_to, superseded_by, cold, tid`` of every turn."""
    delete_embeddings: str
    """``(ns_id,)``."""
    delete_claims: str
    """``(ns_id,)``."""
    delete_records: str
    """``(ns_id,)``."""
    unlink_turns: str
    """``(ns_id,)``: no turn has a record any more."""
    bump_generation: str
    """``(ns_id,)``: the namespace's generation + 1."""


class VersionRepo(CommonStore):
    """The statements of this table family, shared by the backends."""

    @staticmethod
    def turns_of_memory(conn: Connection, ns_id: int, key: str, session_id: str | None
                        ) -> list[tuple[TurnRow, float | None, int]]:
        """Every stored version of a memory (its key: an external id, within ``session_id``, or its first turn's
        id), oldest first, each with its turn record's ``valid_to`` and ``replaced`` flag."""
        rows = conn.execute(
            sql_of(conn).versions.versions_of_memory,
            (ns_id, key, session_id, key, ns_id, key, session_id)).fetchall()
        return [(_turn_row(r[:TURN_NCOLS]), r[TURN_NCOLS], int(r[TURN_NCOLS + 1] or 0)) for r in rows]

    @staticmethod
    def turn_record_ids(conn: Connection, ns_id: int, turn_ids: Sequence[str]) -> list[str]:
        """Ids of the turn records of these turns (what ``forget(record_ids=...)`` takes)."""
        out: list[str] = []
        sql = sql_of(conn)
        for part in chunks(list(turn_ids)):
            out += [r[0] for r in conn.execute(
                sql.versions.turn_record_ids.format(marks=sql.marks(len(part))), (*part, ns_id))]
        return out

    @staticmethod
    def memory_key_of(conn: Connection, ns_id: int, turn_id: str) -> str | None:
        """The memory key an update recorded for this turn (None: the turn was not written by an update)."""
        row = conn.execute(sql_of(conn).versions.memory_key_of, (turn_id, ns_id)).fetchone()
        return None if row is None else str(row[0])

    @staticmethod
    def memory_keys_of(conn: Connection, ns_id: int, turn_ids: Sequence[str]) -> dict[str, str]:
        """The memory key an update recorded for each of these turns (turns not written by an update are left
        out): one query per 500 turns, for a page of :meth:`current_turns`."""
        out: dict[str, str] = {}
        sql = sql_of(conn)
        for part in chunks(list(turn_ids)):
            out.update((str(r[0]), str(r[1])) for r in conn.execute(
                sql.versions.memory_keys_of.format(marks=sql.marks(len(part))), (ns_id, *part)))
        return out

    @staticmethod
    def mark_replaced(conn: Connection, ns_id: int, turn_id: str, ts: float, by_record_id: str) -> None:
        """An update replaced this turn: its turn record and the records anchored to it end at ``ts``."""
        sql = sql_of(conn).versions
        conn.execute(sql.mark_replaced, (ts, by_record_id, ns_id, turn_id, ns_id))
        conn.execute(sql.stale_hooks, (turn_id, ns_id))  # the prompt index shows the new text, not the old
        conn.execute(sql.bump_flags, (ns_id,))

    @staticmethod
    def add_history(conn: Connection, ns_id: int, key: str, session_id: str | None, op: str,
                    turn_id: str | None, ts: float) -> None:
        """Record an operation (``update`` with the new version's turn id; ``delete`` with none)."""
        conn.execute(sql_of(conn).versions.add_history, (ns_id, key, session_id, op, turn_id, ts))

    @staticmethod
    def history_ops(conn: Connection, ns_id: int, key: str, session_id: str | None
                    ) -> list[tuple[str, str | None, float, str | None]]:
        """``(op, turn id, ts, session id)`` of the operations recorded for a memory (in ``session_id`` when
        given), oldest first."""
        return [(r[0], r[1], float(r[2]), r[3]) for r in conn.execute(
            sql_of(conn).versions.history_ops, (ns_id, key, session_id, session_id))]

    @staticmethod
    def delete_history(conn: Connection, ns_id: int) -> None:
        """Forget a whole namespace's history."""
        conn.execute(sql_of(conn).versions.delete_history, (ns_id,))

    def current_turns(self, conn: Connection, ns_id: int, record_filter: RecordFilter, *,
                      before_seq: int | None, limit: int) -> list[TurnRow]:
        """The namespace's turns whose version is current (their turn record not replaced by an update) and that
        pass ``record_filter``, most recently written first, ``limit`` of them, below ``before_seq`` when given."""
        where, args = filter_sql(record_filter, self.dialect)
        statements = sql_of(conn)
        sql = statements.versions.current_turns
        params: list[Any] = [ns_id]
        if where:
            sql += statements.versions.current_filter.format(where=where)
            params += [ns_id, *args]
        if before_seq is not None:
            sql += f" AND t.seq < {statements.mark}"
            params.append(before_seq)
        sql += f" ORDER BY t.seq DESC LIMIT {statements.mark}"
        return [_turn_row(r) for r in conn.execute(sql, (*params, limit))]

    def replaced_turn_ids(self, ns_id: int) -> set[str]:
        """Ids of the namespace's turns whose version an update replaced."""
        conn = self.reader()
        return {str(r[0]) for r in conn.execute(sql_of(conn).versions.replaced_turn_ids, (ns_id,))}

    @staticmethod
    def live_update_counts(conn: Connection, ns_id: int, keys: Sequence[str]
                           ) -> dict[tuple[str, str | None], int]:
        """Per ``(memory key, session)``: how many versions written by an update are still stored (a memory's
        version count is one more), one query per 500 keys."""
        out: dict[tuple[str, str | None], int] = {}
        sql = sql_of(conn)
        for part in chunks(list(dict.fromkeys(keys))):
            for key, session, n in conn.execute(
                    sql.versions.live_update_counts.format(marks=sql.marks(len(part))), (ns_id, *part)):
                out[(str(key), session)] = int(n)
        return out

    @staticmethod
    def reindex_state(conn: Connection, ns_id: int) -> dict[str, Any]:
        """What a reindex of a namespace keeps of its records: each turn's record id, the turns whose version
        an update replaced (``(turn id, valid_to, superseded_by)``) and the turns (tids) in the cold tier."""
        rows = conn.execute(sql_of(conn).versions.reindex_state, (ns_id,)).fetchall()
        return {"record_ids": {r[0]: r[1] for r in rows},
                "replaced": [(r[0], float(r[3]), r[4]) for r in rows if r[2] and r[3] is not None and r[4]],
                "cold": [int(r[6]) for r in rows if r[5]]}

    @staticmethod
    def clear_records(conn: Connection, ns_id: int) -> None:
        """Delete every record of a namespace with its vectors and claims (the turns and files stay)."""
        sql = sql_of(conn).versions
        for statement in (sql.delete_embeddings, sql.delete_claims, sql.delete_records, sql.unlink_turns,
                          sql.bump_generation):
            conn.execute(statement, (ns_id,))

    @staticmethod
    def delete_claims(conn: Connection, ns_id: int) -> None:
        """Every supersession claim of the namespace (when it is forgotten whole)."""
        conn.execute(sql_of(conn).versions.delete_claims, (ns_id,))
