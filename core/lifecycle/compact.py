"""Hooks, weekly merge and monthly eviction over the memory files of one namespace (the decisions; their
statements are :mod:`memory_ext.store.memory_files` and :mod:`memory_ext.store.tiers`).

Every function here runs inside the caller's write transaction, so a compaction step is all-or-nothing: a
process killed half-way leaves the store as it was, and the next run does the step again.

**Weekly merge** (``merge_week``): the daily files of one ISO week become one weekly file that lists their
turns (by reference) in time order. A turn is dropped as chit-chat only when neither it nor its exchange partner
(the reply to a user turn, the turn an assistant or tool turn answers) carries information; exact duplicates
are removed by a content key (role, speaker, normalised content, tool calls, attachments). The weekly hook is
merged from the daily hooks (entities, tags and key facts united, importance the highest one a user set,
access counts summed) and summarised anew. Daily files stay, marked ``merged`` and pointing at the weekly one.
Running it again with the same daily files changes nothing; it only ever reads and writes that week's rows.

**Monthly eviction** (``evict_month``): the weekly files of one month (a week belongs to the month of its
Thursday) are scored — recency (half-life), access frequency (saturating), importance, relevance to the
namespace's recent topics (given by the caller; when unknown its weight goes to the others). The best file
becomes the month's main memory; high-value turns of the others (tool calls, code, attachments, decisions, high
importance) join it; every other turn's records move to the cold tier (``records.cold = 1``). The cold tier
shapes the archive and the prompt index only: it is a ranking prior of search (``recall.cold_penalty``), which
a strong match overcomes, never a gate; ``search(..., include_cold=True)`` removes the prior. A turn a fact, preference,
event, procedure or failure pattern was derived from, and those records, never go cold (:data:`STATED_KINDS`).
Nothing is deleted.
"""

from __future__ import annotations

import json
import math
import time
import unicodedata
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import date
from typing import Any

from ..store.interface import Connection
from ..store.memory_files import (
    FileRow,
    Member,
    file_turns,
    get_file,
    insert_file,
    list_files,
    mark_merged,
    merge_sources,
    replaced_members,
    set_compaction,
    set_members,
    set_sources,
    write_hook,
)
from ..store.tiers import STATED_KINDS, bump_flags, cold_tids, set_cold
from ..text import estimate_tokens
from .files import iso_week_key, month_key_of_week, week_bounds
from .summary import HookSummary, is_chitchat, is_high_value, summarize

__all__ = ["EvictionWeights", "STATED_KINDS", "content_key", "default_importance", "evict_month", "merge_week",
           "refresh_hook", "score_files"]

MAX_MERGED_FACTS = 8
MAX_MERGED_ENTITIES = 16


def content_key(member: Member) -> str:
    """Exact-duplicate key of a turn: role, speaker, content (whitespace and case folded), tool calls, attachments."""
    t = member.turn
    text = " ".join(unicodedata.normalize("NFKC", member.text).casefold().split())
    return json.dumps([t.role, t.speaker or "", text, t.tool_calls, t.attachments], sort_keys=True, default=str,
                      ensure_ascii=False)


def default_importance(turns: Sequence[Any], threshold: int = 70) -> int:
    """50, plus 5 per high-value turn (at most +30), or the highest importance a turn's metadata carries."""
    stated = [int(t.metadata["importance"]) for t in turns
              if isinstance(t.metadata, dict) and isinstance(t.metadata.get("importance"), (int, float))]
    base = 50 + min(30, 5 * sum(1 for t in turns if is_high_value(t, importance_threshold=threshold)))
    return max(0, min(100, max([base, *stated])))


def _parts(members: Sequence[Member]) -> list[Any]:
    return [replace(m.turn, content=m.text) if not m.whole else m.turn for m in members]


def current_members(conn: Connection, fid: int) -> list[Member]:
    """A file's members its hook is made of: every member but the versions an update replaced (the file keeps
    them; its hook, and so the prompt index, shows the current text)."""
    gone = replaced_members(conn, fid)
    return [m for m in file_turns(conn, fid) if m.turn.tid not in gone]


def refresh_hook(conn: Connection, row: FileRow, *, summary: HookSummary | None = None,
                 summary_error: str | None = None, threshold: int = 70) -> FileRow:
    """Recompute a file's hook from its current turns (and, for merged files, from its sources' hooks)."""
    members = current_members(conn, row.fid)
    turns = _parts(members)
    s = summary if summary is not None else summarize(turns)
    entities = list(s.entities)
    tags = list(s.tags)
    facts = list(s.key_facts)
    importance = row.importance if row.importance_set else default_importance(turns, threshold)
    if row.sources:
        srcs = [f for f in (get_file(conn, file_id=i, ns_id=row.ns_id) for i in row.sources) if f is not None]
        counts = Counter(e for f in srcs for e in f.entities)
        counts.update(entities)
        entities = [e for e, _ in counts.most_common(MAX_MERGED_ENTITIES)]
        tags = list(dict.fromkeys(tags + [t for f in srcs for t in f.tags]))
        facts = list(dict.fromkeys(facts + [k for f in srcs for k in f.key_facts]))[:MAX_MERGED_FACTS]
        set_by_user = [f.importance for f in srcs if f.importance_set]
        if not row.importance_set and set_by_user:
            importance = max(importance, *set_by_user)
    meta = dict(row.meta)
    if summary_error:
        meta["summary_error"] = summary_error
    else:
        meta.pop("summary_error", None)
    write_hook(conn, row.fid, title=s.title, abstract=s.abstract, key_facts=facts, entities=entities, tags=tags,
               importance=int(importance), source=s.source, meta=meta)
    out = get_file(conn, fid=row.fid)
    assert out is not None
    return out


# -- weekly merge ------------------------------------------------------------------------------------------------
def _partner_index(members: Sequence[Member], i: int) -> int | None:
    """The other side of member i's exchange: the next turn for a user turn, the previous one otherwise."""
    t = members[i].turn
    j = i + 1 if t.role == "user" else i - 1
    if 0 <= j < len(members) and members[j].turn.session_id == t.session_id:
        return j
    return None


def _whole_turns(members: Sequence[Member]) -> list[Member]:
    """Members in time order, the parts of a cut turn joined back into the whole turn."""
    seen: dict[int, Member] = {}
    for m in members:
        if m.turn.tid not in seen:
            seen[m.turn.tid] = Member(m.turn, 0, None)
    return sorted(seen.values(), key=lambda m: (m.turn.ts if m.turn.ts is not None else math.inf, m.turn.seq))


def select_weekly(members: Sequence[Member]) -> tuple[list[Member], dict[str, int]]:
    """The turns a weekly file keeps, and how many were dropped for each reason."""
    turns = _whole_turns(members)
    chit = [is_chitchat(m.turn) for m in turns]
    keep: list[Member] = []
    keys: set[str] = set()
    dropped = {"chitchat": 0, "duplicate": 0}
    for i, m in enumerate(turns):
        j = _partner_index(turns, i)
        if chit[i] and (j is None or chit[j]):
            dropped["chitchat"] += 1
            continue
        key = content_key(m)
        if key in keys:
            dropped["duplicate"] += 1
            continue
        keys.add(key)
        keep.append(m)
    return keep, dropped


def _tokens(members: Sequence[Member]) -> int:
    return sum(estimate_tokens(m.text) for m in members)


def merge_week(conn: Connection, ns_id: int, week: str) -> dict[str, Any]:
    """Merge the daily files of ISO week ``week`` (``YYYY-Www``) into its weekly file; idempotent."""
    monday, sunday = week_bounds(week)
    dailies = [f for f in list_files(conn, ns_id, period="daily")
               if monday.isoformat() <= f.period_key <= sunday.isoformat()]
    existing = next(iter(list_files(conn, ns_id, period="weekly", period_key=week)), None)
    if not dailies:
        return {"period": week, "changed": False, "file": existing.id if existing else None}
    ids = sorted(f.id for f in dailies)
    if existing is not None and sorted(existing.sources) == ids and all(
            f.status == "merged" and f.merged_into == existing.id for f in dailies):
        return {"period": week, "changed": False, "file": existing.id}
    members = [m for f in sorted(dailies, key=lambda f: (f.period_key, f.part)) for m in file_turns(conn, f.fid)]
    keep, dropped = select_weekly(members)
    # turns the weekly file leaves out (chit-chat, repeated copies) go to the cold tier: still in their daily
    # files and reachable with include_cold, no longer in plain searches
    kept = {m.turn.tid for m in keep}
    set_cold(conn, ns_id, sorted(kept), 0)
    set_cold(conn, ns_id, sorted({m.turn.tid for m in members} - kept), 1)
    bump_flags(conn, ns_id)
    if existing is None:
        weekly = insert_file(conn, ns_id, period="weekly", period_key=week, status="closed", sources=ids)
        access = sum(f.access_count for f in dailies)
    else:
        weekly = existing
        access = max(existing.access_count, sum(f.access_count for f in dailies))
        # new turns arrived for a finished week: the weekly file changes, so its month is due again
        set_sources(conn, weekly.fid, ids, close=True)
    set_members(conn, weekly.fid, [(m.turn.tid, 0, None) for m in keep], _tokens(keep))
    set_compaction(conn, weekly.fid, access_count=access, archived_at=time.time(), meta={"dropped": dropped})
    mark_merged(conn, [f.fid for f in dailies], weekly.id, time.time())
    for f in dailies:  # a daily hook that was never computed is computed before it is merged
        if f.hook_stale:
            refresh_hook(conn, f)
    row = get_file(conn, fid=weekly.fid)
    assert row is not None
    refresh_hook(conn, row)
    return {"period": week, "changed": True, "file": weekly.id, "sources": ids, "turns": len(keep),
            "dropped": dropped}


# -- monthly eviction --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class EvictionWeights:
    """Weights of the eviction score's factors (the relevance weight moves to the others when unknown)."""

    recency: float = 0.3
    access: float = 0.2
    importance: float = 0.2
    relevance: float = 0.3
    half_life_days: float = 7.0
    access_saturation: float = 3.0


def score_files(files: Sequence[FileRow], *, now: float, weights: EvictionWeights,
                relevance: Mapping[str, float] | None) -> dict[str, dict[str, float]]:
    """Per file: its factors in [0, 1] and the weighted score."""
    out = {}
    w_rel = weights.relevance if relevance is not None else 0.0
    scale = (weights.recency + weights.access + weights.importance + weights.relevance) / max(
        weights.recency + weights.access + weights.importance + w_rel, 1e-9)
    for f in files:
        age_days = max(0.0, (now - (f.end_ts or f.created_at)) / 86400.0)
        factors = {
            "recency": 0.5 ** (age_days / weights.half_life_days),
            "access": 1.0 - math.exp(-f.access_count / weights.access_saturation),
            "importance": f.importance / 100.0,
        }
        if relevance is not None:
            factors["relevance"] = float(min(1.0, max(0.0, relevance.get(f.id, 0.0))))
        score = scale * (weights.recency * factors["recency"] + weights.access * factors["access"]
                         + weights.importance * factors["importance"] + w_rel * factors.get("relevance", 0.0))
        out[f.id] = {**factors, "score": score}
    return out


def weeks_of_month(conn: Connection, ns_id: int, month: str) -> list[FileRow]:
    return [f for f in list_files(conn, ns_id, period="weekly") if month_key_of_week(f.period_key) == month]


def evict_month(conn: Connection, ns_id: int, month: str, *, now: float, weights: EvictionWeights,
                relevance: Mapping[str, float] | None, importance_threshold: int = 70,
                relevance_source: str = "retrieval") -> dict[str, Any]:
    """Keep the month's best weekly file (and the others' high-value turns) as its monthly file; idempotent."""
    weeklies = [f for f in weeks_of_month(conn, ns_id, month) if f.status in ("closed", "merged", "evicted")]
    existing = next(iter(list_files(conn, ns_id, period="monthly", period_key=month)), None)
    if not weeklies:
        return {"period": month, "changed": False, "file": existing.id if existing else None}
    ids = sorted(f.id for f in weeklies)
    if existing is not None and sorted(existing.sources) == ids and all(
            f.merged_into == existing.id and f.status != "closed" for f in weeklies):
        return {"period": month, "changed": False, "file": existing.id}
    scores = score_files(weeklies, now=now, weights=weights, relevance=relevance)
    best = max(weeklies, key=lambda f: (scores[f.id]["score"], f.end_ts or 0.0, f.id))
    keep: list[Member] = []
    cold: list[int] = []
    warm: list[int] = []
    for f in weeklies:
        members = _whole_turns(file_turns(conn, f.fid))
        # a file a user marked important keeps every turn; otherwise high-value turns survive with the turn
        # they answer or that answers them (a tool result with its request)
        whole_file = f.id == best.id or (f.importance_set and f.importance >= importance_threshold)
        valuable = [whole_file or is_high_value(m.turn, importance_threshold=importance_threshold)
                    for m in members]
        survive = list(valuable)
        for i, v in enumerate(valuable):
            if v and not whole_file:
                j = _partner_index(members, i)
                if j is not None:
                    survive[j] = True
        for m, keep_it in zip(members, survive, strict=True):
            (keep if keep_it else []).append(m)
            (warm if keep_it else cold).append(m.turn.tid)
    keep = _whole_turns(keep)
    set_cold(conn, ns_id, warm, 0)
    set_cold(conn, ns_id, cold, 1)
    cold = cold_tids(conn, ns_id, cold)  # stated turns stay warm
    meta = {"scores": scores, "best": best.id, "relevance": relevance_source if relevance is not None else "none",
            "cold_turns": len(cold)}
    if existing is None:
        monthly = insert_file(conn, ns_id, period="monthly", period_key=month, status="main", sources=ids)
    else:
        monthly = existing
        set_sources(conn, monthly.fid, ids)
    set_members(conn, monthly.fid, [(m.turn.tid, 0, None) for m in keep], _tokens(keep))
    set_compaction(conn, monthly.fid, access_count=max(monthly.access_count, sum(f.access_count for f in weeklies)),
                   archived_at=time.time(), meta=meta)
    merge_sources(conn, {f.fid: "merged" if f.id == best.id else "evicted" for f in weeklies}, monthly.id)
    bump_flags(conn, ns_id)
    row = get_file(conn, fid=monthly.fid)
    assert row is not None
    refresh_hook(conn, row, threshold=importance_threshold)
    return {"period": month, "changed": True, "file": monthly.id, "sources": ids, "best": best.id,
            "turns": len(keep), "cold_turns": len(cold), "scores": scores}


def due_weeks(conn: Connection, ns_id: int, current_week: str) -> list[str]:
    """ISO weeks before ``current_week`` whose daily files are not all merged."""
    weeks = {iso_week_key(date.fromisoformat(f.period_key))
             for f in list_files(conn, ns_id, period="daily", statuses=("open", "closed"))}
    return sorted(w for w in weeks if w < current_week)


def due_months(conn: Connection, ns_id: int, current_month: str) -> list[str]:
    """Months before ``current_month`` with weekly files not yet evicted into a monthly file."""
    months = {month_key_of_week(f.period_key) for f in list_files(conn, ns_id, period="weekly",
                                                                   statuses=("closed",))}
    # (a weekly file rebuilt with late turns is "closed" again, so its month is done again)
    return sorted(m for m in months if m < current_month)

