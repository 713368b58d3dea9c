"""The SQL of one database dialect, declared once and written by each backend for its own database.

Every module of ``store/`` that runs SQL declares the statements it needs as a frozen dataclass of texts (a
*family*: :class:`memory_ext.store.repos.meta.MetaSql` for ``meta`` and ``namespaces``, say), and reads them
from the connection it runs on: ``sql_of(conn).meta.get``. Each backend package writes every family in its own
dialect — ``store/sqlite/statements.py`` with ``?`` marks, ``INSERT OR REPLACE`` and ``json_each``,
``store/pg/statements.py`` with ``%s`` marks, ``ON CONFLICT … DO UPDATE`` and JSONB — and its connections carry
that set as ``conn.sql``. Nothing rewrites a statement at run time, and a family a backend does not write is a
type error (mypy) and a failing conformance test (``tests/unit/store/test_statements.py``).

Statements whose shape depends on the call (``IN`` lists of any length, a metadata filter) are built by the
family's methods or from :meth:`Statements.marks`, so the placeholder of the dialect is never spelled in
shared code.

>>> import sqlite3
>>> sql_of(sqlite3.connect(":memory:")).dialect
'sqlite'
>>> sql_of(sqlite3.connect(":memory:")).marks(3)
'?,?,?'
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .catalog import CatalogSql
    from .chroma import ChromaSql
    from .claims import ClaimsSql
    from .evidence import EvidenceSql
    from .forget_rows import ForgetSql
    from .graph import GraphSql
    from .items import ItemsSql
    from .keyword import KeywordSql
    from .memory_files import FilesSql
    from .portable import PortableSql
    from .repos.meta import MetaSql
    from .repos.queue import QueueSql
    from .repos.records import RecordsSql
    from .repos.turns import TurnsSql
    from .repos.versions import VersionsSql
    from .snapshots import SnapshotsSql
    from .sparse import SparseSql
    from .tiers import TiersSql
    from .timeindex import TimeIndexSql
    from .vector import VectorSql

__all__ = ["Statements", "split_literals", "sql_of"]


class Statements:
    """One dialect's statement families (each backend subclasses it and writes every family).

    ``dialect``: ``"sqlite"`` | ``"postgres"``; ``mark``: its positional placeholder.
    """

    dialect: str = ""
    mark: str = "?"

    def marks(self, n: int) -> str:
        """``n`` comma-separated placeholders (``?,?`` or ``%s,%s``), for an ``IN (…)`` list or a ``VALUES`` row.

        >>> Statements().marks(2)
        '?,?'
        """
        if n < 1:
            raise ValueError(f"marks: n must be at least 1, got {n}")
        return ",".join([self.mark] * n)

    @property
    def turns(self) -> TurnsSql:
        """``turns`` (:mod:`memory_ext.store.repos.turns`)."""
        raise NotImplementedError(f"the {self.dialect or 'base'} statements do not write the turns family")

    @property
    def records(self) -> RecordsSql:
        """``records`` and ``embeddings`` (:mod:`memory_ext.store.repos.records`)."""
        raise NotImplementedError(f"the {self.dialect or 'base'} statements do not write the records family")

    @property
    def versions(self) -> VersionsSql:
        """Memory versions (:mod:`memory_ext.store.repos.versions`)."""
        raise NotImplementedError(f"the {self.dialect or 'base'} statements do not write the versions family")

    @property
    def queue(self) -> QueueSql:
        """``index_queue`` (:mod:`memory_ext.store.repos.queue`)."""
        raise NotImplementedError(f"the {self.dialect or 'base'} statements do not write the queue family")

    @property
    def files(self) -> FilesSql:
        """The memory files (:mod:`memory_ext.store.memory_files`)."""
        raise NotImplementedError(f"the {self.dialect or 'base'} statements do not write the files family")

    @property
    def tiers(self) -> TiersSql:
        """The cold tier (:mod:`memory_ext.store.tiers`)."""
        raise NotImplementedError(f"the {self.dialect or 'base'} statements do not write the tiers family")

    @property
    def claims(self) -> ClaimsSql:
        """Supersession claims (:mod:`memory_ext.store.claims`)."""
        raise NotImplementedError(f"the {self.dialect or 'base'} statements do not write the claims family")

    @property
    def forget(self) -> ForgetSql:
        """Forgetting (:mod:`memory_ext.store.forget_rows`)."""
        raise NotImplementedError(f"the {self.dialect or 'base'} statements do not write the forget family")

    @property
    def portable(self) -> PortableSql:
        """Export and import (:mod:`memory_ext.store.portable`)."""
        raise NotImplementedError(f"the {self.dialect or 'base'} statements do not write the portable family")

    @property
    def items(self) -> ItemsSql:
        """Key/value items (:mod:`memory_ext.store.items`)."""
        raise NotImplementedError(f"the {self.dialect or 'base'} statements do not write the items family")

    @property
    def meta(self) -> MetaSql:
        """``meta`` and ``namespaces`` (:mod:`memory_ext.store.repos.meta`)."""
        raise NotImplementedError(f"the {self.dialect or 'base'} statements do not write the meta family")

    @property
    def snapshots(self) -> SnapshotsSql:
        """The shared helpers of the snapshot indexes (:mod:`memory_ext.store.snapshots`)."""
        raise NotImplementedError(f"the {self.dialect or 'base'} statements do not write the snapshots family")

    @property
    def keyword(self) -> KeywordSql:
        """The BM25 keyword index, ``kw_`` tables (:mod:`memory_ext.store.keyword`)."""
        raise NotImplementedError(f"the {self.dialect or 'base'} statements do not write the keyword family")

    @property
    def graph(self) -> GraphSql:
        """The entity graph, ``graph_`` tables (:mod:`memory_ext.store.graph`)."""
        raise NotImplementedError(f"the {self.dialect or 'base'} statements do not write the graph family")

    @property
    def timeindex(self) -> TimeIndexSql:
        """The time index, ``time_`` tables (:mod:`memory_ext.store.timeindex`)."""
        raise NotImplementedError(f"the {self.dialect or 'base'} statements do not write the timeindex family")

    @property
    def evidence(self) -> EvidenceSql:
        """The evidence nodes, ``evidence_`` tables (:mod:`memory_ext.store.evidence`)."""
        raise NotImplementedError(f"the {self.dialect or 'base'} statements do not write the evidence family")

    @property
    def sparse(self) -> SparseSql:
        """The sparse vectors, ``sparse_vectors`` (:mod:`memory_ext.store.sparse`)."""
        raise NotImplementedError(f"the {self.dialect or 'base'} statements do not write the sparse family")

    @property
    def catalog(self) -> CatalogSql:
        """The record catalog's reads of the truth store (:mod:`memory_ext.store.catalog`)."""
        raise NotImplementedError(f"the {self.dialect or 'base'} statements do not write the catalog family")

    @property
    def vector(self) -> VectorSql:
        """The exact vector index's reads of ``embeddings`` (:mod:`memory_ext.store.vector`)."""
        raise NotImplementedError(f"the {self.dialect or 'base'} statements do not write the vector family")

    @property
    def chroma(self) -> ChromaSql:
        """The Chroma index's reads of ``embeddings`` (:mod:`memory_ext.store.chroma`)."""
        raise NotImplementedError(f"the {self.dialect or 'base'} statements do not write the chroma family")


def sql_of(conn: Any) -> Statements:
    """The statements of the dialect ``conn`` runs (``conn.sql``); a plain ``sqlite3`` connection (as tests and
    the doctests of the derived indexes open) runs SQLite's."""
    sql = getattr(conn, "sql", None)
    if isinstance(sql, Statements):
        return sql
    from .sqlite.statements import SQLITE

    return SQLITE


def split_literals(sql: str) -> list[tuple[bool, str]]:
    """``sql`` cut into ``(is_string_literal, text)`` pieces (single-quoted literals, ``''`` escapes kept): what
    the statement checks use to look at SQL outside its string literals.

    >>> split_literals("a = 'x''y' AND b = ?")
    [(False, 'a = '), (True, "'x''y'"), (False, ' AND b = ?')]
    """
    out: list[tuple[bool, str]] = []
    i, start, n = 0, 0, len(sql)
    while i < n:
        if sql[i] == "'":
            if i > start:
                out.append((False, sql[start:i]))
            j = i + 1
            while j < n:
                if sql[j] == "'":
                    if j + 1 < n and sql[j + 1] == "'":
                        j += 2
                        continue
                    break
                j += 1
            out.append((True, sql[i : j + 1]))
            i = start = j + 1
        else:
            i += 1
    if start < n:
        out.append((False, sql[start:]))
    return out
