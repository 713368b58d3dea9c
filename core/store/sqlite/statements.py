"""SQLite's text of every statement family (:mod:`memory_ext.store.statements`): ``?`` marks,
``INSERT OR REPLACE``, ``json_each``.

>>> SQLITE.meta.set_meta
'INSERT OR REPLACE INTO meta(key, value) VALUES(?, ?)'
"""

from __future__ import annotations

import sqlite3
from functools import cached_property
from typing import TYPE_CHECKING

from ..repos.meta import MetaSql
from ..statements import Statements

if TYPE_CHECKING:
    from ..catalog import CatalogSql
    from ..chroma import ChromaSql
    from ..evidence import EvidenceSql
    from ..graph import GraphSql
    from ..keyword import KeywordSql
    from ..snapshots import SnapshotsSql
    from ..sparse import SparseSql
    from ..timeindex import TimeIndexSql
    from ..vector import VectorSql

__all__ = ["SQLITE", "SqliteConnection", "SqliteStatements"]


class SqliteStatements(Statements):
    """The SQLite dialect."""

    dialect = "sqlite"
    mark = "?"

    @cached_property
    def meta(self) -> MetaSql:
        return MetaSql(
            get_meta="SELECT value FROM meta WHERE key=?",
            set_meta="INSERT OR REPLACE INTO meta(key, value) VALUES(?, ?)",
            delete_meta="DELETE FROM meta WHERE key=?",
            namespace_id="SELECT ns_id FROM namespaces WHERE user_id=? AND agent_id=?",
            insert_namespace="INSERT INTO namespaces(user_id, agent_id, created_at) VALUES(?, ?, ?) RETURNING ns_id",
            namespaces="SELECT ns_id, user_id, agent_id FROM namespaces ORDER BY ns_id",
            namespace_key="SELECT user_id, agent_id FROM namespaces WHERE ns_id=?",
            namespace_counts=(
                "SELECT n.user_id, n.agent_id,"
                " (SELECT COUNT(*) FROM turns t LEFT JOIN records r ON r.rid = t.record_rid"
                "  WHERE t.ns_id = n.ns_id AND COALESCE(r.replaced, 0) = 0),"
                " (SELECT COUNT(*) FROM turns t WHERE t.ns_id = n.ns_id)"
                " FROM namespaces n ORDER BY n.ns_id"),
            count_all="SELECT COUNT(*) FROM {table}",
            count_ns="SELECT COUNT(*) FROM {table} WHERE ns_id=?",
        )

    # ----------------------------------------------------------------------------- the derived indexes

    @cached_property
    def snapshots(self) -> SnapshotsSql:
        from ..snapshots import SnapshotsSql

        return SnapshotsSql(
            indexed_rids="SELECT DISTINCT rid FROM {table} WHERE ns_id=? AND rid IN ({ids})",
            begin="BEGIN",
            commit="COMMIT",
        )

    @cached_property
    def keyword(self) -> KeywordSql:
        from ..keyword import KeywordSql

        return KeywordSql(
            schema=(
                """CREATE TABLE IF NOT EXISTS kw_docs(
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        ns_id INTEGER NOT NULL,
        rid INTEGER NOT NULL,
        len INTEGER NOT NULL,
        terms BLOB NOT NULL,
        tfs BLOB NOT NULL,
        UNIQUE(ns_id, rid))""",
                "CREATE INDEX IF NOT EXISTS kw_docs_ns_seq ON kw_docs(ns_id, seq)",
                """CREATE TABLE IF NOT EXISTS kw_stats(
        ns_id INTEGER PRIMARY KEY,
        n_docs INTEGER NOT NULL,
        total_len INTEGER NOT NULL,
        last_seq INTEGER NOT NULL,
        version INTEGER NOT NULL)""",
            ),
            stats="SELECT n_docs, total_len, last_seq, version FROM kw_stats WHERE ns_id=?",
            load="SELECT rid, len, terms, tfs FROM kw_docs WHERE ns_id=? AND seq>? AND seq<=? ORDER BY seq",
            insert_doc="INSERT INTO kw_docs(ns_id, rid, len, terms, tfs) VALUES (?,?,?,?,?)",
            last_seq="SELECT max(seq) FROM kw_docs WHERE ns_id=?",
            add_stats="UPDATE kw_stats SET n_docs=n_docs+?, total_len=total_len+?, last_seq=? WHERE ns_id=?",
            insert_stats="INSERT INTO kw_stats(ns_id, n_docs, total_len, last_seq, version) VALUES (?,?,?,?,0)",
            count_docs="SELECT count(*), coalesce(sum(len), 0) FROM kw_docs WHERE ns_id=? AND rid IN ({ids})",
            delete_docs="DELETE FROM kw_docs WHERE ns_id=? AND rid IN ({ids})",
            remove_stats=("UPDATE kw_stats SET n_docs=n_docs-?, total_len=total_len-?, version=version+1"
                          " WHERE ns_id=?"),
            drop_docs="DELETE FROM kw_docs WHERE ns_id=?",
            drop_stats="UPDATE kw_stats SET n_docs=0, total_len=0, last_seq=0, version=version+1 WHERE ns_id=?",
        )

    @cached_property
    def graph(self) -> GraphSql:
        from ..graph import GraphSql

        return GraphSql(
            schema=(
                """CREATE TABLE IF NOT EXISTS graph_entities(
        eid INTEGER PRIMARY KEY AUTOINCREMENT,
        ns_id INTEGER NOT NULL,
        key TEXT NOT NULL,
        name TEXT NOT NULL,
        n_records INTEGER NOT NULL,
        UNIQUE(ns_id, key))""",
                """CREATE TABLE IF NOT EXISTS graph_postings(
        ns_id INTEGER NOT NULL,
        eid INTEGER NOT NULL,
        rid INTEGER NOT NULL,
        ts REAL,
        PRIMARY KEY(ns_id, eid, rid)) WITHOUT ROWID""",
                "CREATE INDEX IF NOT EXISTS graph_postings_ns_rid ON graph_postings(ns_id, rid)",
                """CREATE TABLE IF NOT EXISTS graph_edges(
        ns_id INTEGER NOT NULL,
        a INTEGER NOT NULL,
        b INTEGER NOT NULL,
        count INTEGER NOT NULL,
        last_ts REAL,
        PRIMARY KEY(ns_id, a, b)) WITHOUT ROWID""",
                "CREATE INDEX IF NOT EXISTS graph_edges_ns_b ON graph_edges(ns_id, b)",
                """CREATE TABLE IF NOT EXISTS graph_stats(
        ns_id INTEGER PRIMARY KEY,
        version INTEGER NOT NULL,
        last_eid INTEGER NOT NULL,
        n_records INTEGER NOT NULL,
        max_ts REAL)""",
            ),
            stats="SELECT version, last_eid, n_records, max_ts FROM graph_stats WHERE ns_id=?",
            entities="SELECT eid, name, n_records FROM graph_entities WHERE ns_id=? ORDER BY eid",
            postings="SELECT eid, rid, ts IS NULL, coalesce(ts, 0.0) FROM graph_postings WHERE ns_id=?",
            edges="SELECT a, b, count, last_ts IS NULL, coalesce(last_ts, 0.0) FROM graph_edges WHERE ns_id=?",
            postings_after="SELECT rid, eid, ts FROM graph_postings WHERE ns_id=? AND rid>? ORDER BY rid, eid",
            entities_after="SELECT eid, name FROM graph_entities WHERE ns_id=? AND eid>? ORDER BY eid",
            insert_posting="INSERT INTO graph_postings(ns_id, eid, rid, ts) VALUES (?,?,?,?)",
            upsert_edge=(
                "INSERT INTO graph_edges(ns_id, a, b, count, last_ts) VALUES (?,?,?,?,?)"
                " ON CONFLICT(ns_id, a, b) DO UPDATE SET count = graph_edges.count + excluded.count,"
                " last_ts = CASE WHEN graph_edges.last_ts IS NULL THEN excluded.last_ts WHEN excluded.last_ts IS NULL"
                " THEN graph_edges.last_ts ELSE max(graph_edges.last_ts, excluded.last_ts) END"),
            add_stats=(
                "UPDATE graph_stats SET n_records = n_records + ?, last_eid = max(last_eid, ?),"
                " max_ts = CASE WHEN max_ts IS NULL THEN ? WHEN ? IS NULL THEN max_ts ELSE max(max_ts, ?) END"
                " WHERE ns_id=?"),
            insert_stats="INSERT INTO graph_stats(ns_id, version, last_eid, n_records, max_ts) VALUES (?,0,?,?,?)",
            upsert_entity=(
                "INSERT INTO graph_entities(ns_id, key, name, n_records) VALUES (?,?,?,?)"
                " ON CONFLICT(ns_id, key) DO UPDATE SET n_records = graph_entities.n_records + excluded.n_records"),
            entity_ids="SELECT eid, key FROM graph_entities WHERE ns_id=? AND key IN ({ids})",
            record_postings="SELECT eid, rid, ts FROM graph_postings WHERE ns_id=? AND rid IN ({ids})",
            delete_record_postings="DELETE FROM graph_postings WHERE ns_id=? AND rid IN ({ids})",
            subtract_edge="UPDATE graph_edges SET count = count - ? WHERE ns_id=? AND a=? AND b=?",
            delete_empty_edges="DELETE FROM graph_edges WHERE ns_id=? AND count <= 0",
            edge_last_ts="SELECT last_ts FROM graph_edges WHERE ns_id=? AND a=? AND b=?",
            pair_last_ts=(
                "SELECT max(p.ts) FROM graph_postings p JOIN graph_postings q"
                " ON q.ns_id = p.ns_id AND q.eid = ? AND q.rid = p.rid WHERE p.ns_id=? AND p.eid=?"),
            set_edge_last_ts="UPDATE graph_edges SET last_ts=? WHERE ns_id=? AND a=? AND b=?",
            subtract_entity="UPDATE graph_entities SET n_records = n_records - ? WHERE ns_id=? AND eid=?",
            orphan_entities="SELECT eid FROM graph_entities WHERE ns_id=? AND eid IN ({ids}) AND n_records <= 0",
            delete_entity_edges="DELETE FROM graph_edges WHERE ns_id=? AND (a IN ({ids}) OR b IN ({ids}))",
            delete_entity_postings="DELETE FROM graph_postings WHERE ns_id=? AND eid IN ({ids})",
            delete_entities="DELETE FROM graph_entities WHERE ns_id=? AND eid IN ({ids})",
            max_ts="SELECT max(ts) FROM graph_postings WHERE ns_id=?",
            remove_stats=(
                "UPDATE graph_stats SET n_records = max(n_records - ?, 0), max_ts=?, version = version + 1"
                " WHERE ns_id=?"),
            drop_edges="DELETE FROM graph_edges WHERE ns_id=?",
            drop_postings="DELETE FROM graph_postings WHERE ns_id=?",
            drop_entities="DELETE FROM graph_entities WHERE ns_id=?",
            drop_stats="UPDATE graph_stats SET n_records=0, max_ts=NULL, version = version + 1 WHERE ns_id=?",
            entity_keys="SELECT eid, key FROM graph_entities WHERE ns_id=?",
            entity_keys_after="SELECT eid, key FROM graph_entities WHERE ns_id=? AND eid>?",
        )

    @cached_property
    def timeindex(self) -> TimeIndexSql:
        from ..timeindex import TimeIndexSql

        return TimeIndexSql(
            schema=(
                """CREATE TABLE IF NOT EXISTS time_spans(
        ns_id INTEGER NOT NULL,
        rid INTEGER NOT NULL,
        start_ts REAL NOT NULL,
        end_ts REAL NOT NULL,
        source TEXT NOT NULL CHECK(source IN ('said', 'mentioned')),
        confidence REAL NOT NULL,
        expr TEXT)""",
                "CREATE INDEX IF NOT EXISTS time_spans_ns_rid ON time_spans(ns_id, rid)",
                """CREATE TABLE IF NOT EXISTS time_stats(
        ns_id INTEGER PRIMARY KEY,
        version INTEGER NOT NULL,
        n_records INTEGER NOT NULL,
        n_spans INTEGER NOT NULL,
        max_rid INTEGER NOT NULL)""",
            ),
            stats="SELECT version, n_records, n_spans, max_rid FROM time_stats WHERE ns_id=?",
            spans_after=("SELECT rid, start_ts, end_ts, source = 'mentioned', confidence FROM time_spans"
                         " WHERE ns_id=? AND rid>? ORDER BY rid, start_ts, end_ts"),
            insert_span=("INSERT INTO time_spans(ns_id, rid, start_ts, end_ts, source, confidence, expr)"
                         " VALUES (?,?,?,?,?,?,?)"),
            add_stats=("UPDATE time_stats SET n_records = n_records + ?, n_spans = n_spans + ?,"
                       " max_rid = max(max_rid, ?) WHERE ns_id=?"),
            insert_stats="INSERT INTO time_stats(ns_id, version, n_records, n_spans, max_rid) VALUES (?,0,?,?,?)",
            count_spans="SELECT count(DISTINCT rid), count(*) FROM time_spans WHERE ns_id=? AND rid IN ({ids})",
            delete_spans="DELETE FROM time_spans WHERE ns_id=? AND rid IN ({ids})",
            remove_stats=("UPDATE time_stats SET n_records = max(n_records - ?, 0), n_spans = max(n_spans - ?, 0),"
                          " version = version + 1 WHERE ns_id=?"),
            drop_spans="DELETE FROM time_spans WHERE ns_id=?",
            drop_stats="UPDATE time_stats SET n_records=0, n_spans=0, version = version + 1 WHERE ns_id=?",
            record_spans=("SELECT start_ts, end_ts, source, confidence, expr FROM time_spans WHERE ns_id=? AND rid=?"
                          " ORDER BY start_ts, end_ts, source"),
        )

    @cached_property
    def evidence(self) -> EvidenceSql:
        from ..evidence import EvidenceSql

        return EvidenceSql(
            schema=(
                """CREATE TABLE IF NOT EXISTS evidence_nodes(
        nid INTEGER PRIMARY KEY AUTOINCREMENT,
        ns_id INTEGER NOT NULL,
        key TEXT NOT NULL,
        n_records INTEGER NOT NULL,
        UNIQUE(ns_id, key))""",
                """CREATE TABLE IF NOT EXISTS evidence_postings(
        pid INTEGER PRIMARY KEY AUTOINCREMENT,
        ns_id INTEGER NOT NULL,
        rid INTEGER NOT NULL,
        nid INTEGER NOT NULL)""",
                "CREATE UNIQUE INDEX IF NOT EXISTS evidence_postings_ns_rid ON evidence_postings(ns_id, rid, nid)",
                """CREATE TABLE IF NOT EXISTS evidence_stats(
        ns_id INTEGER PRIMARY KEY,
        version INTEGER NOT NULL,
        last_pid INTEGER NOT NULL,
        n_records INTEGER NOT NULL)""",
            ),
            stats="SELECT version, last_pid, n_records FROM evidence_stats WHERE ns_id=?",
            nodes="SELECT nid, key FROM evidence_nodes WHERE ns_id=? ORDER BY nid",
            postings="SELECT nid, rid FROM evidence_postings WHERE ns_id=?",
            postings_after="SELECT rid, nid FROM evidence_postings WHERE pid>? AND +ns_id=? ORDER BY pid",
            nodes_after="SELECT nid, key FROM evidence_nodes WHERE nid>? AND +ns_id=? ORDER BY nid",
            node_keys="SELECT nid, key FROM evidence_nodes WHERE ns_id=? AND nid IN ({ids})",
            upsert_node=(
                "INSERT INTO evidence_nodes(ns_id, key, n_records) VALUES (?,?,?)"
                " ON CONFLICT(ns_id, key) DO UPDATE SET n_records = evidence_nodes.n_records + excluded.n_records"),
            node_ids="SELECT nid, key FROM evidence_nodes WHERE ns_id=? AND key IN ({ids})",
            insert_posting="INSERT INTO evidence_postings(ns_id, rid, nid) VALUES (?,?,?)",
            last_pid="SELECT max(pid) FROM evidence_postings",
            add_stats="UPDATE evidence_stats SET n_records = n_records + ?, last_pid=? WHERE ns_id=?",
            insert_stats="INSERT INTO evidence_stats(ns_id, version, last_pid, n_records) VALUES (?,0,?,?)",
            record_postings="SELECT rid, nid FROM evidence_postings WHERE ns_id=? AND rid IN ({ids})",
            delete_record_postings="DELETE FROM evidence_postings WHERE ns_id=? AND rid IN ({ids})",
            subtract_node="UPDATE evidence_nodes SET n_records = n_records - ? WHERE ns_id=? AND nid=?",
            delete_empty_nodes="DELETE FROM evidence_nodes WHERE ns_id=? AND nid IN ({ids}) AND n_records <= 0",
            remove_stats=("UPDATE evidence_stats SET n_records = max(n_records - ?, 0), version = version + 1"
                          " WHERE ns_id=?"),
            drop_postings="DELETE FROM evidence_postings WHERE ns_id=?",
            drop_nodes="DELETE FROM evidence_nodes WHERE ns_id=?",
            drop_stats="UPDATE evidence_stats SET n_records=0, version = version + 1 WHERE ns_id=?",
            entity_keys="SELECT key FROM evidence_nodes WHERE ns_id=? AND key >= 'e:' AND key < 'e;'",
            record_nodes=("SELECT n.key FROM evidence_postings p JOIN evidence_nodes n ON n.nid = p.nid"
                          " WHERE p.ns_id=? AND p.rid=?"),
            node_counts="SELECT key, n_records FROM evidence_nodes WHERE ns_id=? AND key IN ({ids})",
        )

    @cached_property
    def sparse(self) -> SparseSql:
        from ..sparse import SparseSql

        return SparseSql(
            schema=(
                ("CREATE TABLE IF NOT EXISTS sparse_vectors(rid INTEGER PRIMARY KEY, ns_id INTEGER NOT NULL,"
                 " idx BLOB NOT NULL, val BLOB NOT NULL)"),
                "CREATE INDEX IF NOT EXISTS sparse_vectors_ns ON sparse_vectors(ns_id, rid)",
            ),
            upsert="INSERT OR REPLACE INTO sparse_vectors(rid, ns_id, idx, val) VALUES(?,?,?,?)",
            delete="DELETE FROM sparse_vectors WHERE ns_id=? AND rid=?",
            drop="DELETE FROM sparse_vectors WHERE ns_id=?",
            generation="SELECT generation FROM namespaces WHERE ns_id=?",
            rows_after="SELECT rid, idx, val FROM sparse_vectors WHERE ns_id=? AND rid>? ORDER BY rid",
        )

    @cached_property
    def catalog(self) -> CatalogSql:
        from ..catalog import CatalogSql

        return CatalogSql(
            generations="SELECT generation, flags_generation FROM namespaces WHERE ns_id=?",
            records_after=(
                "SELECT rid, kind, anchor_rid, session_id, speaker, ref_ts, source_role, cold, valid_to, replaced"
                " FROM records WHERE rid>? AND +ns_id=? ORDER BY rid"),
            successors=("SELECT r.rid, s.rid FROM records r JOIN records s ON s.id = r.superseded_by"
                        " WHERE r.ns_id=? AND r.superseded_by IS NOT NULL"),
        )

    @cached_property
    def vector(self) -> VectorSql:
        from ..vector import VectorSql

        return VectorSql(
            generation="SELECT generation FROM namespaces WHERE ns_id=?",
            top_rid="SELECT MAX(rid) FROM embeddings WHERE ns_id=?",
            rows_after="SELECT rid, dim, vector FROM embeddings WHERE ns_id=? AND rid>? ORDER BY rid",
        )

    @cached_property
    def chroma(self) -> ChromaSql:
        from ..chroma import ChromaSql

        return ChromaSql(
            truth="SELECT rid, ns_id, vector FROM embeddings WHERE dim=? AND embedder_id=?",
            vectors="SELECT rid, vector FROM embeddings WHERE ns_id=? AND dim=? AND rid IN ({ids})",
        )


SQLITE = SqliteStatements()
"""The statements every SQLite connection of the store runs."""


class SqliteConnection(sqlite3.Connection):
    """A ``sqlite3`` connection that carries SQLite's statements (``conn.sql``): the store opens every connection
    with this factory."""

    sql: Statements = SQLITE
