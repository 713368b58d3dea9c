"""PostgreSQL's text of every statement family (:mod:`memory_ext.store.statements`): ``%s`` marks,
``ON CONFLICT … DO UPDATE``, JSONB, identity columns returned with ``RETURNING``.

>>> POSTGRES.meta.set_meta
'INSERT INTO meta(key, value) VALUES(%s, %s) ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value'
"""

from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING

from ..claims import ClaimsSql
from ..forget_rows import ForgetSql
from ..items import ITEM_COLS, ItemsSql
from ..memory_files import FILE_COLS, FilesSql
from ..portable import FILE_FIELDS, ITEM_FIELDS, PortableSql
from ..repos.meta import MetaSql
from ..repos.queue import QueueSql
from ..repos.records import RecordsSql
from ..repos.turns import TurnsSql
from ..repos.versions import VersionsSql
from ..rows import TURN_COLS
from ..statements import Statements
from ..tiers import TiersSql

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

__all__ = ["POSTGRES", "PgStatements"]

T_COLS = ", ".join("t." + c.strip() for c in TURN_COLS.split(","))
""":data:`~memory_ext.store.rows.TURN_COLS` of ``turns t``."""

class PgStatements(Statements):
    """The PostgreSQL dialect."""

    dialect = "postgres"
    mark = "%s"

    @cached_property
    def turns(self) -> TurnsSql:
        return TurnsSql(
            next_seq="SELECT COALESCE(MAX(seq), -1) FROM turns WHERE ns_id=%s",
            insert_turn=("INSERT INTO turns(id, ns_id, seq, session_id, role, speaker, content, ts,"
                         " external_id, tool_calls, attachments, metadata, token_count, created_at)"
                         " VALUES(%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s)"),
            tail_turns=("SELECT id, session_id, speaker, content, ts, tool_calls, record_rid, role,"
                        " attachments, metadata FROM turns WHERE ns_id=%s ORDER BY seq DESC LIMIT %s"),
            turns_by_id=f"SELECT {TURN_COLS} FROM turns WHERE ns_id=%s AND id IN ({{marks}})",
            list_turns=f"SELECT {TURN_COLS} FROM turns WHERE ns_id=%s",
            seq_range=f"SELECT {TURN_COLS} FROM turns WHERE ns_id=%s AND seq BETWEEN %s AND %s ORDER BY seq",
            recent_turns="SELECT role, content, tid FROM turns WHERE ns_id=%s ORDER BY seq DESC LIMIT %s",
            turns_from_seq="SELECT tid, ts, content FROM turns WHERE ns_id=%s AND seq>=%s ORDER BY seq",
            external_ids=("SELECT external_id, session_id, id FROM turns WHERE ns_id=%s AND external_id IN"
                          " ({marks}) ORDER BY seq"),
            turn_by_id=f"SELECT {TURN_COLS} FROM turns WHERE id=%s AND ns_id=%s",
            record_anchor="SELECT anchor_rid FROM records WHERE id=%s AND ns_id=%s",
            turn_by_record=f"SELECT {TURN_COLS} FROM turns WHERE record_rid=%s AND ns_id=%s",
            turn_by_external=(f"SELECT {TURN_COLS} FROM turns WHERE ns_id=%s AND external_id=%s AND (%s IS"
                              " NULL OR session_id=%s) ORDER BY seq DESC LIMIT 1"),
            all_turns=f"SELECT {TURN_COLS} FROM turns WHERE ns_id=%s ORDER BY seq",
            turn_tids="SELECT tid FROM turns WHERE ns_id=%s",
            file_fids="SELECT fid FROM files WHERE ns_id=%s",
            record_turn_ids="SELECT turn_ids FROM records WHERE ns_id=%s AND id=%s",
            tids_by_id="SELECT tid FROM turns WHERE ns_id=%s AND id IN ({marks})",
            tids_of_file="SELECT tid FROM file_turns WHERE fid=%s",
            seq_session="SELECT seq, session_id FROM turns WHERE tid=%s AND ns_id=%s",
            seq_pair="SELECT tid, session_id FROM turns WHERE ns_id=%s AND seq IN (%s, %s)",
            turn_record=("SELECT t.seq, t.session_id, t.record_rid, r.text, r.speaker, r.ref_ts FROM turns t"
                         " JOIN records r ON r.rid = t.record_rid WHERE t.tid=%s AND t.ns_id=%s"),
            neighbours=("SELECT content FROM turns WHERE ns_id=%s AND session_id IS NOT DISTINCT FROM %s AND"
                        " seq IN ((SELECT MAX(seq) FROM turns WHERE ns_id=%s AND seq<%s), (SELECT MIN(seq)"
                        " FROM turns WHERE ns_id=%s AND seq>%s))"),
        )

    @cached_property
    def records(self) -> RecordsSql:
        return RecordsSql(
            insert_record=("INSERT INTO records(id, ns_id, kind, text, index_text, l0, l1, entities, tags,"
                           " ref_ts, turn_ids, source_role, speaker, session_id, importance, anchor_rid,"
                           " created_at, updated_at)"
                           " VALUES(%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s) RETURNING rid"),
            self_anchor="UPDATE records SET anchor_rid=%s WHERE rid=%s",
            turn_record_rid="UPDATE turns SET record_rid=%s WHERE ns_id=%s AND id=%s",
            upsert_embedding=("INSERT INTO embeddings(rid, ns_id, embedder_id, dim, vector)"
                              " VALUES(%s,%s,%s,%s,%s) ON CONFLICT (rid) DO UPDATE SET ns_id ="
                              " EXCLUDED.ns_id, embedder_id = EXCLUDED.embedder_id, dim = EXCLUDED.dim,"
                              " vector = EXCLUDED.vector"),
            records_by_rid=("SELECT rid, id, kind, text, turn_ids, source_role, speaker, session_id, ref_ts"
                            " FROM records WHERE ns_id=%s AND rid IN ({marks})"),
            record_ids_by_rid="SELECT rid, id FROM records WHERE ns_id=%s AND rid IN ({marks})",
            vectors_by_rid="SELECT rid, vector, dim FROM embeddings WHERE ns_id=%s AND rid IN ({marks})",
            stored_vectors="SELECT rid, vector FROM embeddings WHERE rid IN ({marks})",
            filter_rids="SELECT rid FROM records WHERE ns_id=%s AND ({where})",
        )

    @cached_property
    def versions(self) -> VersionsSql:
        return VersionsSql(
            versions_of_memory=(f"SELECT {T_COLS}, r.valid_to, r.replaced FROM turns t LEFT JOIN records r ON"
                                " r.rid = t.record_rid WHERE t.ns_id=%s AND ((t.external_id=%s AND"
                                " t.session_id IS NOT DISTINCT FROM %s) OR t.id=%s OR t.id IN (SELECT turn_id"
                                " FROM memory_history WHERE ns_id=%s AND memory_key=%s AND session_id IS NOT"
                                " DISTINCT FROM %s)) ORDER BY t.seq"),
            turn_record_ids=("SELECT r.id FROM turns t JOIN records r ON r.rid = t.record_rid WHERE t.id IN"
                             " ({marks}) AND t.ns_id=%s"),
            memory_key_of="SELECT memory_key FROM memory_history WHERE turn_id=%s AND ns_id=%s LIMIT 1",
            memory_keys_of=("SELECT turn_id, memory_key FROM memory_history WHERE ns_id=%s AND turn_id IN"
                            " ({marks})"),
            mark_replaced=("UPDATE records SET valid_to=%s, superseded_by=%s, replaced=1 WHERE ns_id=%s AND"
                           " rid IN (SELECT r.rid FROM turns t JOIN records r ON r.rid = t.record_rid OR"
                           " r.anchor_rid = t.record_rid WHERE t.id=%s AND t.ns_id=%s)"),
            stale_hooks=("UPDATE files SET hook_stale=1 WHERE fid IN (SELECT ft.fid FROM file_turns ft JOIN turns t"
                         " ON t.tid = ft.tid WHERE t.id=%s AND t.ns_id=%s)"),
            bump_flags="UPDATE namespaces SET flags_generation = flags_generation + 1 WHERE ns_id=%s",
            add_history=("INSERT INTO memory_history(ns_id, memory_key, session_id, op, turn_id, ts)"
                         " VALUES(%s,%s,%s,%s,%s,%s)"),
            history_ops=("SELECT op, turn_id, ts, session_id FROM memory_history WHERE ns_id=%s AND"
                         " memory_key=%s AND (%s IS NULL OR session_id IS NOT DISTINCT FROM %s) ORDER BY hid"),
            delete_history="DELETE FROM memory_history WHERE ns_id=%s",
            current_turns=(f"SELECT {T_COLS} FROM turns t LEFT JOIN records r ON r.rid = t.record_rid WHERE"
                           " t.ns_id=%s AND COALESCE(r.replaced, 0) = 0"),
            current_filter=(" AND t.record_rid IN (SELECT rid FROM records WHERE ns_id=%s AND kind='turn' AND"
                            " ({where}))"),
            replaced_turn_ids=("SELECT t.id FROM turns t JOIN records r ON r.rid = t.record_rid WHERE"
                               " t.ns_id=%s AND r.replaced=1"),
            live_update_counts=("SELECT h.memory_key, h.session_id, COUNT(*) FROM memory_history h JOIN turns"
                                " t ON t.id = h.turn_id AND t.ns_id = h.ns_id WHERE h.ns_id=%s AND"
                                " h.op='update' AND h.memory_key IN ({marks}) GROUP BY h.memory_key,"
                                " h.session_id"),
            reindex_state=("SELECT t.id, r.id, r.replaced, r.valid_to, r.superseded_by, r.cold, t.tid FROM"
                           " turns t JOIN records r ON r.rid = t.record_rid WHERE t.ns_id=%s"),
            delete_embeddings="DELETE FROM embeddings WHERE ns_id=%s",
            delete_claims="DELETE FROM claims WHERE ns_id=%s",
            delete_records="DELETE FROM records WHERE ns_id=%s",
            unlink_turns="UPDATE turns SET record_rid=NULL WHERE ns_id=%s",
            bump_generation="UPDATE namespaces SET generation = generation + 1 WHERE ns_id=%s",
        )

    @cached_property
    def queue(self) -> QueueSql:
        return QueueSql(
            create_table=("CREATE TABLE IF NOT EXISTS index_queue(rid BIGINT GENERATED BY DEFAULT AS IDENTITY"
                          " PRIMARY KEY, ns_id BIGINT NOT NULL, dense BIGINT NOT NULL DEFAULT 0, sparse"
                          " BIGINT NOT NULL DEFAULT 0)"),
            create_index="CREATE INDEX IF NOT EXISTS index_queue_ns ON index_queue(ns_id)",
            enqueue=("INSERT INTO index_queue(rid, ns_id, dense, sparse) VALUES(%s,%s,%s,%s) ON CONFLICT"
                     " (rid) DO UPDATE SET ns_id = EXCLUDED.ns_id, dense = EXCLUDED.dense, sparse ="
                     " EXCLUDED.sparse"),
            dequeue="DELETE FROM index_queue WHERE rid IN ({marks})",
            dequeue_ns="DELETE FROM index_queue WHERE ns_id=%s AND rid IN ({marks})",
            drop_ns="DELETE FROM index_queue WHERE ns_id=%s",
            oldest="SELECT rid, ns_id, dense, sparse FROM index_queue ORDER BY rid LIMIT %s",
            oldest_ns=("SELECT rid, ns_id, dense, sparse FROM index_queue WHERE ns_id=%s ORDER BY rid LIMIT"
                       " %s"),
            queued_rids="SELECT rid, ns_id, dense, sparse FROM index_queue WHERE rid IN ({marks})",
            queued_windows=("SELECT q.rid, q.ns_id, q.dense, q.sparse FROM index_queue q JOIN records r ON"
                            " r.rid = q.rid WHERE r.anchor_rid IN ({marks}) AND r.kind = 'window'"),
            pending="SELECT COUNT(*) FROM index_queue",
            pending_ns="SELECT COUNT(*) FROM index_queue WHERE ns_id=%s",
            pending_dense_ns="SELECT COUNT(*) FROM index_queue WHERE ns_id=%s AND dense<>0",
            work_records=("SELECT rid, ns_id, index_text, text, turn_ids, anchor_rid FROM records WHERE rid"
                          " IN ({marks})"),
            work_turns=("SELECT id, seq, record_rid FROM turns WHERE ns_id=%s AND id IN ({marks}) AND"
                        " record_rid IS NOT NULL"),
            sparse_queued="SELECT EXISTS(SELECT 1 FROM index_queue WHERE ns_id=%s AND sparse=1)",
            flag_sparse="UPDATE index_queue SET sparse=1 WHERE rid IN ({marks})",
            create_quarantine=("CREATE TABLE IF NOT EXISTS index_quarantine(rid BIGINT PRIMARY KEY, ns_id BIGINT"
                               " NOT NULL, dense BIGINT NOT NULL DEFAULT 0, sparse BIGINT NOT NULL DEFAULT 0, attempts"
                               " BIGINT NOT NULL DEFAULT 1, error TEXT NOT NULL DEFAULT '', since TEXT NOT NULL)"),
            quarantine=("INSERT INTO index_quarantine(rid, ns_id, dense, sparse, attempts, error, since)"
                        " VALUES(%s,%s,%s,%s,%s,%s,%s) ON CONFLICT (rid) DO UPDATE SET attempts ="
                        " EXCLUDED.attempts, error = EXCLUDED.error, since = EXCLUDED.since"),
            unquarantine="DELETE FROM index_quarantine WHERE rid IN ({marks})",
            unquarantine_ns="DELETE FROM index_quarantine WHERE ns_id=%s AND rid IN ({marks})",
            drop_quarantine_ns="DELETE FROM index_quarantine WHERE ns_id=%s",
            quarantined=("SELECT q.rid, q.ns_id, q.dense, q.sparse, q.attempts, q.error, q.since, r.id,"
                         " r.kind, r.turn_ids FROM index_quarantine q JOIN records r ON r.rid = q.rid"
                         " ORDER BY q.rid"),
            quarantined_ns=("SELECT q.rid, q.ns_id, q.dense, q.sparse, q.attempts, q.error, q.since, r.id,"
                            " r.kind, r.turn_ids FROM index_quarantine q JOIN records r ON r.rid = q.rid"
                            " WHERE q.ns_id=%s ORDER BY q.rid"),
        )

    @cached_property
    def files(self) -> FilesSql:
        return FilesSql(
            insert_file=("INSERT INTO files(id, ns_id, period, period_key, part, status, sources, raw, meta,"
                         " created_at) VALUES(%s,%s,%s,%s,%s,%s,%s,%s,%s,%s) RETURNING fid"),
            file_by_fid=f"SELECT {FILE_COLS} FROM files WHERE fid=%s",
            file_by_id=f"SELECT {FILE_COLS} FROM files WHERE id=%s",
            list_files=f"SELECT {FILE_COLS} FROM files WHERE ns_id=%s",
            ids_like="SELECT id FROM files WHERE id ILIKE %s ESCAPE '\\'",
            count_access="UPDATE files SET access_count = access_count + 1, last_access=%s WHERE fid=%s",
            file_raw="SELECT raw FROM files WHERE fid=%s",
            set_importance="UPDATE files SET importance=%s, importance_set=1 WHERE fid=%s",
            write_hook=("UPDATE files SET title=%s, abstract=%s, key_facts=%s, entities=%s, tags=%s,"
                        " importance=%s, summary_source=%s, meta=%s, hook_stale=0 WHERE fid=%s"),
            members=(f"SELECT {T_COLS}, ft.start, ft.stop FROM file_turns ft JOIN turns t ON t.tid = ft.tid"
                     " WHERE ft.fid=%s ORDER BY ft.pos"),
            replaced_members=("SELECT t.tid FROM file_turns ft JOIN turns t ON t.tid = ft.tid JOIN records r ON"
                              " r.rid = t.record_rid WHERE ft.fid=%s AND r.replaced=1"),
            delete_members="DELETE FROM file_turns WHERE fid=%s",
            insert_member="INSERT INTO file_turns(fid, pos, tid, start, stop) VALUES(%s,%s,%s,%s,%s)",
            member_span=("SELECT MIN(t.ts), MAX(t.ts) FROM file_turns ft JOIN turns t ON t.tid = ft.tid WHERE"
                         " ft.fid=%s"),
            set_span="UPDATE files SET token_count=%s, start_ts=%s, end_ts=%s, hook_stale=1 WHERE fid=%s",
            files_of_turns=("SELECT f.id, t.id FROM file_turns ft JOIN files f ON f.fid = ft.fid JOIN turns t"
                            " ON t.tid = ft.tid WHERE f.ns_id=%s AND t.id IN ({marks})"),
            open_daily=("SELECT fid, token_count FROM files WHERE ns_id=%s AND period='daily' AND"
                        " period_key=%s AND status='open' ORDER BY part DESC LIMIT 1"),
            close_earlier=("UPDATE files SET status='closed', archived_at=%s WHERE ns_id=%s AND"
                           " period='daily' AND status='open' AND period_key < %s"),
            next_part=("SELECT COALESCE(MAX(part), 0) + 1 FROM files WHERE ns_id=%s AND period='daily' AND"
                       " period_key=%s"),
            next_position="SELECT COALESCE(MAX(pos), -1) + 1 FROM file_turns WHERE fid=%s",
            close_file="UPDATE files SET status='closed', truncated=%s, archived_at=%s WHERE fid=%s",
            grow_span=("UPDATE files SET token_count=%s, start_ts=LEAST(COALESCE(start_ts, %s), %s),"
                       " end_ts=GREATEST(COALESCE(end_ts, %s), %s), hook_stale=1 WHERE fid=%s"),
            set_sources="UPDATE files SET sources=%s WHERE fid=%s",
            set_sources_closed="UPDATE files SET sources=%s, status='closed' WHERE fid=%s",
            set_compaction="UPDATE files SET access_count=%s, archived_at=%s, meta=%s WHERE fid=%s",
            mark_merged=("UPDATE files SET status='merged', merged_into=%s, archived_at=COALESCE(archived_at,"
                         " %s) WHERE fid=%s"),
            merge_source="UPDATE files SET status=%s, merged_into=%s WHERE fid=%s",
        )

    @cached_property
    def tiers(self) -> TiersSql:
        return TiersSql(
            turn_ids="SELECT id FROM turns WHERE ns_id=%s AND tid IN ({marks})",
            stated_turns=("SELECT DISTINCT ((turn_ids)::jsonb ->> 0) FROM records WHERE ns_id=%s AND kind IN"
                          " ({kinds}) AND ((turn_ids)::jsonb ->> 0) IN ({marks})"),
            set_cold=("UPDATE records SET cold=%s WHERE ns_id=%s AND kind NOT IN ({kinds}) AND"
                      " ((turn_ids)::jsonb ->> 0) IN ({marks})"),
            cold_tids=("SELECT t.tid FROM turns t JOIN records r ON r.rid = t.record_rid WHERE t.ns_id=%s AND"
                       " r.cold=1 AND t.tid IN ({marks})"),
        )

    @cached_property
    def claims(self) -> ClaimsSql:
        return ClaimsSql(
            live_claims=("SELECT c.rid, c.value, c.negated, c.ts FROM claims c JOIN records r ON r.rid ="
                         " c.rid WHERE c.ns_id=%s AND c.holder=%s AND c.subject=%s AND c.attribute=%s AND"
                         " r.superseded_by IS NULL AND c.rid != %s"),
            count_claims=("SELECT COUNT(*) FROM claims WHERE ns_id=%s AND holder=%s AND subject=%s AND"
                          " attribute=%s AND rid != %s"),
            supersede_record="UPDATE records SET valid_to=%s, superseded_by=%s WHERE rid=%s AND ns_id=%s",
            insert_claim=("INSERT INTO claims(ns_id, rid, holder, subject, attribute, value, negated, ts)"
                          " VALUES(%s,%s,%s,%s,%s,%s,%s,%s)"),
        )

    @cached_property
    def forget(self) -> ForgetSql:
        return ForgetSql(
            any_unanchored="SELECT 1 FROM records WHERE anchor_rid IS NULL AND ns_id=%s LIMIT 1",
            records_holding=("SELECT rid FROM records WHERE ns_id=%s AND EXISTS (SELECT 1 FROM"
                             " jsonb_array_elements_text((records.turn_ids)::jsonb) AS j(value) WHERE j.value"
                             " = %s)"),
            ns_records="SELECT rid, turn_ids FROM records WHERE ns_id=%s",
            turn_seq="SELECT seq FROM turns WHERE ns_id=%s AND id=%s",
            anchored_near=("SELECT r.rid, r.turn_ids FROM turns n JOIN records r ON r.anchor_rid ="
                           " n.record_rid WHERE n.ns_id=%s AND n.seq BETWEEN %s AND %s AND r.ns_id=%s"),
            turns_of_tids="SELECT tid, id, content FROM turns WHERE ns_id=%s AND tid IN ({marks})",
            record_ids="SELECT id FROM records WHERE rid IN ({marks})",
            delete_embeddings="DELETE FROM embeddings WHERE ns_id=%s AND rid IN ({marks})",
            delete_claims="DELETE FROM claims WHERE ns_id=%s AND rid IN ({marks})",
            delete_records="DELETE FROM records WHERE ns_id=%s AND rid IN ({marks})",
            unsupersede=("UPDATE records SET superseded_by=NULL, valid_to=NULL WHERE ns_id=%s AND"
                         " superseded_by IN ({marks})"),
            files_of_tids="SELECT DISTINCT fid FROM file_turns WHERE tid IN ({marks})",
            delete_memberships="DELETE FROM file_turns WHERE tid IN ({marks})",
            raw_files="SELECT fid, raw FROM files WHERE ns_id=%s AND raw IS NOT NULL",
            set_raw="UPDATE files SET raw=%s WHERE fid=%s",
            members_left="SELECT COUNT(*) FROM file_turns WHERE fid=%s",
            delete_file="DELETE FROM files WHERE fid=%s",
            member_texts=("SELECT t.content, ft.start, ft.stop FROM file_turns ft JOIN turns t ON t.tid ="
                          " ft.tid WHERE ft.fid=%s"),
            set_tokens="UPDATE files SET token_count=%s WHERE fid=%s",
            merged_files="SELECT fid, sources FROM files WHERE ns_id=%s AND sources != '[]'",
            unmerge="UPDATE files SET merged_into=NULL WHERE ns_id=%s AND merged_into=%s",
            delete_turns="DELETE FROM turns WHERE ns_id=%s AND tid IN ({marks})",
            clear_hook=("UPDATE files SET title='', abstract='', key_facts='[]', entities='[]', tags='[]',"
                        " hook_stale=1 WHERE id=%s AND ns_id=%s"),
        )

    @cached_property
    def portable(self) -> PortableSql:
        return PortableSql(
            turn_states=("SELECT t.id, r.id, r.replaced, r.valid_to, r.superseded_by, r.cold FROM turns t"
                         " LEFT JOIN records r ON r.rid = t.record_rid WHERE t.ns_id=%s"),
            history_rows=("SELECT memory_key, session_id, op, turn_id, ts FROM memory_history WHERE ns_id=%s"
                          " ORDER BY hid"),
            file_rows=f"SELECT fid, {', '.join(FILE_FIELDS)} FROM files WHERE ns_id=%s ORDER BY fid",
            file_members=("SELECT t.id, ft.start, ft.stop FROM file_turns ft JOIN turns t ON t.tid = ft.tid"
                          " WHERE ft.fid=%s ORDER BY ft.pos"),
            existing="SELECT id FROM {table} WHERE ns_id=%s AND id IN ({marks})",
            tids_of="SELECT id, tid FROM turns WHERE ns_id=%s AND id IN ({marks})",
            insert_history=("INSERT INTO memory_history(ns_id, memory_key, session_id, op, turn_id, ts)"
                            " VALUES(%s,%s,%s,%s,%s,%s)"),
            insert_file=(f"INSERT INTO files(ns_id, {', '.join(FILE_FIELDS)})"
                         f" VALUES({self.marks(len(FILE_FIELDS) + 1)}) RETURNING fid"),
            item_vectors="SELECT ns, key, path, vector FROM store_vectors WHERE ns_id=%s ORDER BY vid",
            item_rows=(f"SELECT {', '.join('i.' + f for f in ITEM_FIELDS)} FROM store_items i JOIN"
                       " store_namespaces n ON n.ns_id = i.ns_id AND n.ns = i.ns WHERE i.ns_id=%s AND"
                       " (i.expires_at IS NULL OR i.expires_at > %s) ORDER BY n.seq, i.iid"),
            item_exists="SELECT 1 FROM store_items WHERE ns_id=%s AND ns=%s AND key=%s",
            insert_item=(f"INSERT INTO store_items(ns_id, {', '.join(ITEM_FIELDS)})"
                         f" VALUES({self.marks(len(ITEM_FIELDS) + 1)})"),
        )

    @cached_property
    def items(self) -> ItemsSql:
        return ItemsSql(
            live_rows=(f"SELECT {ITEM_COLS} FROM store_items i JOIN store_namespaces n ON n.ns_id = i.ns_id"
                       " AND n.ns = i.ns WHERE i.ns_id = %s AND (i.expires_at IS NULL OR i.expires_at > %s)"),
            under_prefix=" AND (i.ns = %s OR substr(i.ns, 1, %s) = %s)",
            exact_key="(i.ns = %s AND i.key = %s)",
            stored=f"SELECT {ITEM_COLS} FROM store_items i WHERE i.ns_id = %s AND i.ns = %s AND i.key = %s",
            live_namespaces=("SELECT DISTINCT i.ns FROM store_items i WHERE i.ns_id = %s AND (i.expires_at IS"
                             " NULL OR i.expires_at > %s)"),
            vectors="SELECT ns, key, vector FROM store_vectors WHERE ns_id = %s ORDER BY vid",
            expired="SELECT ns_id, ns, key, turn_id FROM store_items WHERE expires_at <= %s",
            note_namespace="INSERT INTO store_namespaces(ns_id, ns) VALUES(%s, %s) ON CONFLICT DO NOTHING",
            upsert=("INSERT INTO store_items(ns_id, ns, key, value, created_at, updated_at, turn_id,"
                    " record_id, expires_at, ttl_minutes) VALUES(%s, %s, %s, %s, %s, %s, %s, %s, %s, %s) ON"
                    " CONFLICT (ns_id, ns, key) DO UPDATE SET value = excluded.value, updated_at ="
                    " excluded.updated_at, turn_id = excluded.turn_id, record_id = excluded.record_id,"
                    " expires_at = excluded.expires_at, ttl_minutes = excluded.ttl_minutes"),
            delete_vectors="DELETE FROM store_vectors WHERE ns_id = %s AND ns = %s AND key = %s",
            insert_vector=("INSERT INTO store_vectors(ns_id, ns, key, path, vector) VALUES(%s, %s, %s, %s,"
                           " %s)"),
            delete_item="DELETE FROM store_items WHERE ns_id = %s AND ns = %s AND key = %s",
            refresh=("UPDATE store_items SET expires_at = %s + ttl_minutes * 60 WHERE ns_id = %s AND ns = %s"
                     " AND key = %s AND ttl_minutes IS NOT NULL"),
            items_of_turns="SELECT ns, key FROM store_items WHERE ns_id = %s AND turn_id IN ({marks})",
            delete_session_vectors="DELETE FROM store_vectors WHERE ns_id = %s AND ns = %s",
            delete_session_namespace="DELETE FROM store_namespaces WHERE ns_id = %s AND ns = %s",
            delete_session_items="DELETE FROM store_items WHERE ns_id = %s AND ns = %s",
            delete_ns_vectors="DELETE FROM store_vectors WHERE ns_id = %s",
            delete_ns_namespaces="DELETE FROM store_namespaces WHERE ns_id = %s",
            delete_ns_items="DELETE FROM store_items WHERE ns_id = %s",
            import_item=("INSERT INTO store_items(ns_id, ns, key, value, created_at, updated_at, turn_id,"
                         " record_id, expires_at, ttl_minutes) VALUES(%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"
                         " ON CONFLICT DO NOTHING"),
            import_vector=("INSERT INTO store_vectors(ns_id, ns, key, path, vector) VALUES(%s, %s, %s, %s,"
                           " %s) ON CONFLICT DO NOTHING"),
        )

    @cached_property
    def meta(self) -> MetaSql:
        return MetaSql(
            get_meta="SELECT value FROM meta WHERE key=%s",
            set_meta=("INSERT INTO meta(key, value) VALUES(%s, %s)"
                      " ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value"),
            delete_meta="DELETE FROM meta WHERE key=%s",
            namespace_id="SELECT ns_id FROM namespaces WHERE user_id=%s AND agent_id=%s",
            insert_namespace=("INSERT INTO namespaces(user_id, agent_id, created_at) VALUES(%s, %s, %s)"
                              " RETURNING ns_id"),
            namespaces="SELECT ns_id, user_id, agent_id FROM namespaces ORDER BY ns_id",
            namespace_key="SELECT user_id, agent_id FROM namespaces WHERE ns_id=%s",
            namespace_counts=(
                "SELECT n.user_id, n.agent_id,"
                " (SELECT COUNT(*) FROM turns t LEFT JOIN records r ON r.rid = t.record_rid"
                "  WHERE t.ns_id = n.ns_id AND COALESCE(r.replaced, 0) = 0),"
                " (SELECT COUNT(*) FROM turns t WHERE t.ns_id = n.ns_id)"
                " FROM namespaces n ORDER BY n.ns_id"),
            count_all="SELECT COUNT(*) FROM {table}",
            count_ns="SELECT COUNT(*) FROM {table} WHERE ns_id=%s",
        )

    # The derived indexes' families. Their ``schema`` DDL is PostgreSQL's own here: ``pg/schema.py`` creates the
    # truth store's tables only, each index creates its tables (identity columns, BIGINT, DOUBLE PRECISION, BYTEA).

    @cached_property
    def snapshots(self) -> SnapshotsSql:
        from ..snapshots import SnapshotsSql

        return SnapshotsSql(
            indexed_rids="SELECT DISTINCT rid FROM {table} WHERE ns_id=%s AND rid IN ({ids})",
            begin="BEGIN",
            commit="COMMIT",
        )

    @cached_property
    def keyword(self) -> KeywordSql:
        from ..keyword import KeywordSql

        return KeywordSql(
            schema=(
                """CREATE TABLE IF NOT EXISTS kw_docs(
        seq BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
        ns_id BIGINT NOT NULL,
        rid BIGINT NOT NULL,
        len BIGINT NOT NULL,
        terms BYTEA NOT NULL,
        tfs BYTEA NOT NULL,
        UNIQUE(ns_id, rid))""",
                "CREATE INDEX IF NOT EXISTS kw_docs_ns_seq ON kw_docs(ns_id, seq)",
                """CREATE TABLE IF NOT EXISTS kw_stats(
        ns_id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
        n_docs BIGINT NOT NULL,
        total_len BIGINT NOT NULL,
        last_seq BIGINT NOT NULL,
        version BIGINT NOT NULL)""",
            ),
            stats="SELECT n_docs, total_len, last_seq, version FROM kw_stats WHERE ns_id=%s",
            load="SELECT rid, len, terms, tfs FROM kw_docs WHERE ns_id=%s AND seq>%s AND seq<=%s ORDER BY seq",
            insert_doc="INSERT INTO kw_docs(ns_id, rid, len, terms, tfs) VALUES (%s,%s,%s,%s,%s)",
            last_seq="SELECT max(seq) FROM kw_docs WHERE ns_id=%s",
            add_stats="UPDATE kw_stats SET n_docs=n_docs+%s, total_len=total_len+%s, last_seq=%s WHERE ns_id=%s",
            insert_stats=("INSERT INTO kw_stats(ns_id, n_docs, total_len, last_seq, version) VALUES"
                          " (%s,%s,%s,%s,0)"),
            count_docs="SELECT count(*), coalesce(sum(len), 0) FROM kw_docs WHERE ns_id=%s AND rid IN ({ids})",
            delete_docs="DELETE FROM kw_docs WHERE ns_id=%s AND rid IN ({ids})",
            remove_stats=("UPDATE kw_stats SET n_docs=n_docs-%s, total_len=total_len-%s, version=version+1"
                          " WHERE ns_id=%s"),
            drop_docs="DELETE FROM kw_docs WHERE ns_id=%s",
            drop_stats="UPDATE kw_stats SET n_docs=0, total_len=0, last_seq=0, version=version+1 WHERE ns_id=%s",
        )

    @cached_property
    def graph(self) -> GraphSql:
        from ..graph import GraphSql

        return GraphSql(
            schema=(
                """CREATE TABLE IF NOT EXISTS graph_entities(
        eid BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
        ns_id BIGINT NOT NULL,
        key TEXT NOT NULL,
        name TEXT NOT NULL,
        n_records BIGINT NOT NULL,
        UNIQUE(ns_id, key))""",
                """CREATE TABLE IF NOT EXISTS graph_postings(
        ns_id BIGINT NOT NULL,
        eid BIGINT NOT NULL,
        rid BIGINT NOT NULL,
        ts DOUBLE PRECISION,
        PRIMARY KEY(ns_id, eid, rid))""",
                "CREATE INDEX IF NOT EXISTS graph_postings_ns_rid ON graph_postings(ns_id, rid)",
                """CREATE TABLE IF NOT EXISTS graph_edges(
        ns_id BIGINT NOT NULL,
        a BIGINT NOT NULL,
        b BIGINT NOT NULL,
        count BIGINT NOT NULL,
        last_ts DOUBLE PRECISION,
        PRIMARY KEY(ns_id, a, b))""",
                "CREATE INDEX IF NOT EXISTS graph_edges_ns_b ON graph_edges(ns_id, b)",
                """CREATE TABLE IF NOT EXISTS graph_stats(
        ns_id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
        version BIGINT NOT NULL,
        last_eid BIGINT NOT NULL,
        n_records BIGINT NOT NULL,
        max_ts DOUBLE PRECISION)""",
            ),
            stats="SELECT version, last_eid, n_records, max_ts FROM graph_stats WHERE ns_id=%s",
            entities="SELECT eid, name, n_records FROM graph_entities WHERE ns_id=%s ORDER BY eid",
            postings="SELECT eid, rid, ts IS NULL, coalesce(ts, 0.0) FROM graph_postings WHERE ns_id=%s",
            edges="SELECT a, b, count, last_ts IS NULL, coalesce(last_ts, 0.0) FROM graph_edges WHERE ns_id=%s",
            postings_after="SELECT rid, eid, ts FROM graph_postings WHERE ns_id=%s AND rid>%s ORDER BY rid, eid",
            entities_after="SELECT eid, name FROM graph_entities WHERE ns_id=%s AND eid>%s ORDER BY eid",
            insert_posting="INSERT INTO graph_postings(ns_id, eid, rid, ts) VALUES (%s,%s,%s,%s)",
            upsert_edge=("INSERT INTO graph_edges(ns_id, a, b, count, last_ts) VALUES (%s,%s,%s,%s,%s) ON"
                         " CONFLICT(ns_id, a, b) DO UPDATE SET count = graph_edges.count + excluded.count,"
                         " last_ts = CASE WHEN graph_edges.last_ts IS NULL THEN excluded.last_ts WHEN"
                         " excluded.last_ts IS NULL THEN graph_edges.last_ts ELSE"
                         " GREATEST(graph_edges.last_ts, excluded.last_ts) END"),
            add_stats=("UPDATE graph_stats SET n_records = n_records + %s, last_eid = GREATEST(last_eid,"
                       " %s), max_ts = CASE WHEN max_ts IS NULL THEN %s WHEN %s IS NULL THEN max_ts ELSE"
                       " GREATEST(max_ts, %s) END WHERE ns_id=%s"),
            insert_stats=("INSERT INTO graph_stats(ns_id, version, last_eid, n_records, max_ts) VALUES"
                          " (%s,0,%s,%s,%s)"),
            upsert_entity=("INSERT INTO graph_entities(ns_id, key, name, n_records) VALUES (%s,%s,%s,%s) ON"
                           " CONFLICT(ns_id, key) DO UPDATE SET n_records = graph_entities.n_records +"
                           " excluded.n_records"),
            entity_ids="SELECT eid, key FROM graph_entities WHERE ns_id=%s AND key IN ({ids})",
            record_postings="SELECT eid, rid, ts FROM graph_postings WHERE ns_id=%s AND rid IN ({ids})",
            delete_record_postings="DELETE FROM graph_postings WHERE ns_id=%s AND rid IN ({ids})",
            subtract_edge="UPDATE graph_edges SET count = count - %s WHERE ns_id=%s AND a=%s AND b=%s",
            delete_empty_edges="DELETE FROM graph_edges WHERE ns_id=%s AND count <= 0",
            edge_last_ts="SELECT last_ts FROM graph_edges WHERE ns_id=%s AND a=%s AND b=%s",
            pair_last_ts=("SELECT max(p.ts) FROM graph_postings p JOIN graph_postings q ON q.ns_id = p.ns_id"
                          " AND q.eid = %s AND q.rid = p.rid WHERE p.ns_id=%s AND p.eid=%s"),
            set_edge_last_ts="UPDATE graph_edges SET last_ts=%s WHERE ns_id=%s AND a=%s AND b=%s",
            subtract_entity="UPDATE graph_entities SET n_records = n_records - %s WHERE ns_id=%s AND eid=%s",
            orphan_entities="SELECT eid FROM graph_entities WHERE ns_id=%s AND eid IN ({ids}) AND n_records <= 0",
            delete_entity_edges="DELETE FROM graph_edges WHERE ns_id=%s AND (a IN ({ids}) OR b IN ({ids}))",
            delete_entity_postings="DELETE FROM graph_postings WHERE ns_id=%s AND eid IN ({ids})",
            delete_entities="DELETE FROM graph_entities WHERE ns_id=%s AND eid IN ({ids})",
            max_ts="SELECT max(ts) FROM graph_postings WHERE ns_id=%s",
            remove_stats=("UPDATE graph_stats SET n_records = GREATEST(n_records - %s, 0), max_ts=%s,"
                          " version = version + 1 WHERE ns_id=%s"),
            drop_edges="DELETE FROM graph_edges WHERE ns_id=%s",
            drop_postings="DELETE FROM graph_postings WHERE ns_id=%s",
            drop_entities="DELETE FROM graph_entities WHERE ns_id=%s",
            drop_stats="UPDATE graph_stats SET n_records=0, max_ts=NULL, version = version + 1 WHERE ns_id=%s",
            entity_keys="SELECT eid, key FROM graph_entities WHERE ns_id=%s",
            entity_keys_after="SELECT eid, key FROM graph_entities WHERE ns_id=%s AND eid>%s",
        )

    @cached_property
    def timeindex(self) -> TimeIndexSql:
        from ..timeindex import TimeIndexSql

        return TimeIndexSql(
            schema=(
                """CREATE TABLE IF NOT EXISTS time_spans(
        ns_id BIGINT NOT NULL,
        rid BIGINT NOT NULL,
        start_ts DOUBLE PRECISION NOT NULL,
        end_ts DOUBLE PRECISION NOT NULL,
        source TEXT NOT NULL CHECK(source IN ('said', 'mentioned')),
        confidence DOUBLE PRECISION NOT NULL,
        expr TEXT)""",
                "CREATE INDEX IF NOT EXISTS time_spans_ns_rid ON time_spans(ns_id, rid)",
                """CREATE TABLE IF NOT EXISTS time_stats(
        ns_id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
        version BIGINT NOT NULL,
        n_records BIGINT NOT NULL,
        n_spans BIGINT NOT NULL,
        max_rid BIGINT NOT NULL)""",
            ),
            stats="SELECT version, n_records, n_spans, max_rid FROM time_stats WHERE ns_id=%s",
            spans_after=("SELECT rid, start_ts, end_ts, source = 'mentioned', confidence FROM time_spans"
                         " WHERE ns_id=%s AND rid>%s ORDER BY rid, start_ts, end_ts"),
            insert_span=("INSERT INTO time_spans(ns_id, rid, start_ts, end_ts, source, confidence, expr)"
                         " VALUES (%s,%s,%s,%s,%s,%s,%s)"),
            add_stats=("UPDATE time_stats SET n_records = n_records + %s, n_spans = n_spans + %s, max_rid ="
                       " GREATEST(max_rid, %s) WHERE ns_id=%s"),
            insert_stats=("INSERT INTO time_stats(ns_id, version, n_records, n_spans, max_rid) VALUES"
                          " (%s,0,%s,%s,%s)"),
            count_spans="SELECT count(DISTINCT rid), count(*) FROM time_spans WHERE ns_id=%s AND rid IN ({ids})",
            delete_spans="DELETE FROM time_spans WHERE ns_id=%s AND rid IN ({ids})",
            remove_stats=("UPDATE time_stats SET n_records = GREATEST(n_records - %s, 0), n_spans ="
                          " GREATEST(n_spans - %s, 0), version = version + 1 WHERE ns_id=%s"),
            drop_spans="DELETE FROM time_spans WHERE ns_id=%s",
            drop_stats="UPDATE time_stats SET n_records=0, n_spans=0, version = version + 1 WHERE ns_id=%s",
            record_spans=("SELECT start_ts, end_ts, source, confidence, expr FROM time_spans WHERE ns_id=%s"
                          " AND rid=%s ORDER BY start_ts, end_ts, source"),
        )

    @cached_property
    def evidence(self) -> EvidenceSql:
        from ..evidence import EvidenceSql

        return EvidenceSql(
            schema=(
                """CREATE TABLE IF NOT EXISTS evidence_nodes(
        nid BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
        ns_id BIGINT NOT NULL,
        key TEXT NOT NULL,
        n_records BIGINT NOT NULL,
        UNIQUE(ns_id, key))""",
                """CREATE TABLE IF NOT EXISTS evidence_postings(
        pid BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
        ns_id BIGINT NOT NULL,
        rid BIGINT NOT NULL,
        nid BIGINT NOT NULL)""",
                "CREATE UNIQUE INDEX IF NOT EXISTS evidence_postings_ns_rid ON evidence_postings(ns_id, rid, nid)",
                """CREATE TABLE IF NOT EXISTS evidence_stats(
        ns_id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
        version BIGINT NOT NULL,
        last_pid BIGINT NOT NULL,
        n_records BIGINT NOT NULL)""",
            ),
            stats="SELECT version, last_pid, n_records FROM evidence_stats WHERE ns_id=%s",
            nodes="SELECT nid, key FROM evidence_nodes WHERE ns_id=%s ORDER BY nid",
            postings="SELECT nid, rid FROM evidence_postings WHERE ns_id=%s",
            postings_after="SELECT rid, nid FROM evidence_postings WHERE pid>%s AND ns_id=%s ORDER BY pid",
            nodes_after="SELECT nid, key FROM evidence_nodes WHERE nid>%s AND ns_id=%s ORDER BY nid",
            node_keys="SELECT nid, key FROM evidence_nodes WHERE ns_id=%s AND nid IN ({ids})",
            upsert_node=("INSERT INTO evidence_nodes(ns_id, key, n_records) VALUES (%s,%s,%s) ON"
                         " CONFLICT(ns_id, key) DO UPDATE SET n_records = evidence_nodes.n_records +"
                         " excluded.n_records"),
            node_ids="SELECT nid, key FROM evidence_nodes WHERE ns_id=%s AND key IN ({ids})",
            insert_posting="INSERT INTO evidence_postings(ns_id, rid, nid) VALUES (%s,%s,%s)",
            last_pid="SELECT max(pid) FROM evidence_postings",
            add_stats="UPDATE evidence_stats SET n_records = n_records + %s, last_pid=%s WHERE ns_id=%s",
            insert_stats="INSERT INTO evidence_stats(ns_id, version, last_pid, n_records) VALUES (%s,0,%s,%s)",
            record_postings="SELECT rid, nid FROM evidence_postings WHERE ns_id=%s AND rid IN ({ids})",
            delete_record_postings="DELETE FROM evidence_postings WHERE ns_id=%s AND rid IN ({ids})",
            subtract_node="UPDATE evidence_nodes SET n_records = n_records - %s WHERE ns_id=%s AND nid=%s",
            delete_empty_nodes="DELETE FROM evidence_nodes WHERE ns_id=%s AND nid IN ({ids}) AND n_records <= 0",
            remove_stats=("UPDATE evidence_stats SET n_records = GREATEST(n_records - %s, 0), version ="
                          " version + 1 WHERE ns_id=%s"),
            drop_postings="DELETE FROM evidence_postings WHERE ns_id=%s",
            drop_nodes="DELETE FROM evidence_nodes WHERE ns_id=%s",
            drop_stats="UPDATE evidence_stats SET n_records=0, version = version + 1 WHERE ns_id=%s",
            entity_keys="SELECT key FROM evidence_nodes WHERE ns_id=%s AND key >= 'e:' AND key < 'e;'",
            record_nodes=("SELECT n.key FROM evidence_postings p JOIN evidence_nodes n ON n.nid = p.nid"
                          " WHERE p.ns_id=%s AND p.rid=%s"),
            node_counts="SELECT key, n_records FROM evidence_nodes WHERE ns_id=%s AND key IN ({ids})",
        )

    @cached_property
    def sparse(self) -> SparseSql:
        from ..sparse import SparseSql

        return SparseSql(
            schema=(
                ("CREATE TABLE IF NOT EXISTS sparse_vectors(rid BIGINT GENERATED BY DEFAULT AS IDENTITY"
                 " PRIMARY KEY, ns_id BIGINT NOT NULL, idx BYTEA NOT NULL, val BYTEA NOT NULL)"),
                "CREATE INDEX IF NOT EXISTS sparse_vectors_ns ON sparse_vectors(ns_id, rid)",
            ),
            upsert=("INSERT INTO sparse_vectors(rid, ns_id, idx, val) VALUES(%s,%s,%s,%s) ON CONFLICT (rid)"
                    " DO UPDATE SET ns_id = EXCLUDED.ns_id, idx = EXCLUDED.idx, val = EXCLUDED.val"),
            delete="DELETE FROM sparse_vectors WHERE ns_id=%s AND rid=%s",
            drop="DELETE FROM sparse_vectors WHERE ns_id=%s",
            generation="SELECT generation FROM namespaces WHERE ns_id=%s",
            rows_after="SELECT rid, idx, val FROM sparse_vectors WHERE ns_id=%s AND rid>%s ORDER BY rid",
            any_row="SELECT EXISTS(SELECT 1 FROM sparse_vectors WHERE ns_id=%s)",
        )

    @cached_property
    def catalog(self) -> CatalogSql:
        from ..catalog import CatalogSql

        return CatalogSql(
            generations="SELECT generation, flags_generation FROM namespaces WHERE ns_id=%s",
            records_after=("SELECT rid, kind, anchor_rid, session_id, speaker, ref_ts, source_role, cold,"
                           " valid_to, replaced, kind = 'turn' AND (strpos(text, '?') > 0 OR strpos(text, '？') > 0)"
                           " FROM records WHERE rid>%s AND ns_id=%s ORDER BY rid"),
            successors=("SELECT r.rid, s.rid FROM records r JOIN records s ON s.id = r.superseded_by WHERE"
                        " r.ns_id=%s AND r.superseded_by IS NOT NULL"),
        )

    @cached_property
    def vector(self) -> VectorSql:
        from ..vector import VectorSql

        return VectorSql(
            generation="SELECT generation FROM namespaces WHERE ns_id=%s",
            top_rid="SELECT MAX(rid) FROM embeddings WHERE ns_id=%s",
            rows_after="SELECT rid, dim, vector FROM embeddings WHERE ns_id=%s AND rid>%s ORDER BY rid",
        )

    @cached_property
    def chroma(self) -> ChromaSql:
        from ..chroma import ChromaSql

        return ChromaSql(
            truth="SELECT rid, ns_id, vector FROM embeddings WHERE dim=%s AND embedder_id=%s",
            vectors="SELECT rid, vector FROM embeddings WHERE ns_id=%s AND dim=%s AND rid IN ({ids})",
        )


POSTGRES = PgStatements()
"""The statements every PostgreSQL connection of the store runs."""
