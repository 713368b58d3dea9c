"""The lifecycle half of :class:`memory_ext.MemoryEngine`: hooks, prompt rendering, retrieval of whole files,
compaction, ``pre_compress`` and importance.

>>> import tempfile
>>> from memory_ext import MemoryEngine, Turn
>>> with MemoryEngine.open(tempfile.mkdtemp(), embedder="hashing") as engine:
...     _ = engine.add_turns([Turn(role="user", content="Book the 9:40 train to Lyon for Friday"),
...                           Turn(role="assistant", content="Booked: TGV 6611, seat 42, 89 EUR")], "ana")
...     hook = engine.hooks("ana")[0]
...     engine.retrieve(hook.id[:8]).turns[1].content
'Booked: TGV 6611, seat 42, 89 EUR'
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Mapping
from datetime import UTC, date, datetime
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict

from ..errors import HookNotFoundError, InvalidArgumentError, ReadOnlyStoreError, ValidationError
from ..models import IndexHook, MemoryFile, Namespace, Turn, to_utc
from ..store.memory_files import (
    FileRow,
    count_access,
    file_raw,
    file_turns,
    files_of_turns,
    get_file,
    insert_file,
    list_files,
    resolve_file,
    set_file_importance,
    set_members,
)
from ..store.portable import tids_of
from ..text import estimate_tokens
from ..validate import check_json, check_text
from .compact import (
    EvictionWeights,
    current_members,
    due_months,
    due_weeks,
    evict_month,
    merge_week,
    refresh_hook,
    weeks_of_month,
)
from .files import hook_model, iso_week_key, member_turn, month_key_of_week, render_file
from .precompress import parse_context
from .summary import summarize, summarize_with_llm

if TYPE_CHECKING:
    from ..config import EngineConfig
    from ..llm import LLM
    from ..store.interface import TruthStore

__all__ = ["CompactionReport", "Lifecycle"]

VISIBLE = {"daily": ("open", "closed"), "weekly": ("closed",), "monthly": ("main",), "context": ("closed",)}
"""Which files the prompt index shows: those not yet merged into a bigger one."""
PERIOD_ORDER = {"daily": 0, "context": 0, "weekly": 1, "monthly": 2}
_WEEK = re.compile(r"^\d{4}-W\d{2}$")
_MONTH = re.compile(r"^\d{4}-\d{2}$")
MAX_CONTEXT_CHARS = 5_000_000
CHUNK_CHARS = 4000


class CompactionReport(BaseModel):
    """What ``compact`` / ``maybe_compact`` did: one entry per week or month examined."""

    model_config = ConfigDict(frozen=True)
    namespace: Namespace
    steps: tuple[dict[str, Any], ...] = ()

    @property
    def changed(self) -> bool:
        return any(s.get("changed") for s in self.steps)


class Lifecycle:
    """The memory files of one store: hooks, prompt index, whole-file retrieval, compaction, ``pre_compress``.

    Composed into :class:`memory_ext.MemoryEngine`, which delegates its lifecycle methods here. It is given what
    it uses: the truth store, the configuration, the optional LLM, the engine's ``search`` (relevance for the
    monthly eviction, query-ranked prompt indexes) and ``add_turns`` (``pre_compress`` stores new turns through
    the write pipeline), ``check_open`` and ``on_flags_changed`` (called when an eviction moved records to or from
    the cold tier, so cached ranking columns are reloaded).
    """

    def __init__(self, store: TruthStore, config: EngineConfig, llm: LLM | None, *,
                 search: Callable[..., Any], add_turns: Callable[..., Any], check_open: Callable[[], None],
                 on_flags_changed: Callable[[int], None], add_in: Callable[..., Any] | None = None) -> None:
        self._store = store
        self.config = config
        self.llm = llm
        self.search = search
        self.add_turns = add_turns
        self.add_in = add_in
        """``WritePipeline.add_in``: stores turns inside an open transaction (``pre_compress`` is one)."""
        self._check_open = check_open
        self._after_eviction = on_flags_changed

    # -- hooks -----------------------------------------------------------------------------------------------
    def _ns_id(self, namespace: Namespace | str) -> tuple[Namespace, int | None]:
        self._check_open()
        ns = Namespace.coerce(namespace)
        return ns, self._store.find_namespace(ns.key)

    def _fresh(self, rows: list[FileRow]) -> list[FileRow]:
        """Recompute stale hooks (persisted when the store is writable)."""
        stale = [r for r in rows if r.hook_stale]
        if not stale:
            return rows
        if self._store.read_only:
            from .compact import default_importance

            out = []
            for r in rows:
                if r.hook_stale:
                    turns = [m.turn for m in current_members(self._store.reader(), r.fid)]
                    s = summarize(turns)
                    r.title, r.abstract, r.key_facts = s.title, s.abstract, list(s.key_facts)
                    r.entities, r.tags = list(s.entities), list(s.tags)
                    if not r.importance_set:
                        r.importance = default_importance(turns)
                out.append(r)
            return out
        fresh = {}
        with self._store.transaction("refresh hooks") as conn:
            for r in stale:
                row = get_file(conn, fid=r.fid)
                if row is not None:
                    fresh[r.fid] = self._refresh(conn, row)
        return [fresh.get(r.fid, r) for r in rows]

    def _refresh(self, conn: Any, row: FileRow) -> FileRow:
        cfg = self.config.lifecycle
        if cfg.llm_summaries and self.llm is not None and row.status != "open":
            turns = [m.turn if m.whole else _part(m) for m in current_members(conn, row.fid)]
            summary, error = summarize_with_llm(turns, self.llm, timeout=cfg.llm_timeout_s)
            return refresh_hook(conn, row, summary=summary, summary_error=error,
                                threshold=cfg.importance_threshold)
        return refresh_hook(conn, row, threshold=cfg.importance_threshold)

    def hooks(self, namespace: Namespace | str, *, include_merged: bool = False) -> list[IndexHook]:
        """The namespace's index hooks, newest first within daily/context, weekly, monthly.

        By default only the files the prompt index shows (not those merged into a bigger file);
        ``include_merged=True`` lists every file, merged and evicted ones included.
        """
        ns, ns_id = self._ns_id(namespace)
        if ns_id is None:
            return []
        rows = list_files(self._store.reader(), ns_id)
        if not include_merged:
            rows = [r for r in rows if r.status in VISIBLE.get(r.period, ())]
        rows = self._fresh(rows)
        rows.sort(key=lambda r: (PERIOD_ORDER[r.period], -(r.end_ts or r.created_at), -r.fid))
        return [hook_model(r, ns) for r in rows]

    def render_prompt(self, namespace: Namespace | str, *, budget_tokens: int | None = None,
                      query: str | None = None) -> str:
        """A compact index of the namespace's memory files for a system prompt, within ``budget_tokens``.

        Each line carries the hook id (``engine.retrieve(id)`` returns the whole file), the period, the title,
        the abstract and the tags. Without a query: recent daily files first, then weekly, then monthly. With a
        query, files are ranked by the retrieval pipeline (the files holding the best-ranked turns first).
        Returns "" when the namespace has no files or the budget is 0.
        """
        budget = self.config.lifecycle.prompt_budget_tokens if budget_tokens is None else budget_tokens
        if isinstance(budget, bool) or not isinstance(budget, int) or budget < 0:
            raise InvalidArgumentError("budget_tokens", budget_tokens, "give an integer >= 0 (tokens)")
        if query is not None and (not isinstance(query, str) or not query.strip()):
            raise InvalidArgumentError("query", query, "give a non-empty query, or None for the recency order")
        hooks = self.hooks(namespace)
        if not hooks or budget == 0:
            return ""
        if query is not None:
            hooks = self._rank_hooks(namespace, hooks, query)
        header = "Memory index — call retrieve(hook_id) for a whole file:"
        used = estimate_tokens(header)
        lines = [header]
        for h in hooks:
            full, short = _hook_lines(h)
            for line in (full, short):
                cost = estimate_tokens(line) + 1
                if used + cost <= budget:
                    lines.append(line)
                    used += cost
                    break
        return "\n".join(lines) if len(lines) > 1 else ""

    def _rank_hooks(self, namespace: Namespace | str, hooks: list[IndexHook], query: str) -> list[IndexHook]:
        ns, ns_id = self._ns_id(namespace)
        result = self.search(query, Namespace(ns.user_id, ns.agent_id), k=30)
        if ns_id is None or not result.items:
            return hooks
        visible = {h.id for h in hooks}
        turn_rank: dict[str, int] = {}
        for rank, item in enumerate(result.items):
            for t in item.turn_ids:
                turn_rank.setdefault(t, rank)
        score: dict[str, float] = {}
        for file_id, turn_id in files_of_turns(self._store.reader(), ns_id, list(turn_rank)):
            if file_id in visible:
                score[file_id] = score.get(file_id, 0.0) + 1.0 / (1 + turn_rank[turn_id])
        order = {h.id: i for i, h in enumerate(hooks)}
        return sorted(hooks, key=lambda h: (-score.get(h.id, 0.0), order[h.id]))

    def retrieve(self, hook_id: str, namespace: Namespace | str | None = None) -> MemoryFile:
        """The whole memory file of a hook id (or of a unique prefix of at least 6 characters).

        Counts the access (used by the monthly eviction). Cold and merged files are reachable too. With
        ``namespace``, only that namespace's files match. Raises :class:`HookNotFoundError` for an unknown id or an
        ambiguous prefix (listing the candidates).
        """
        row = self.resolve(hook_id, namespace)
        if not self._store.read_only:
            with self._store.transaction("retrieve") as wconn:
                count_access(wconn, row.fid, time.time())
        row = self._fresh([get_file(self._store.reader(), fid=row.fid) or row])[0]
        members = file_turns(self._store.reader(), row.fid)
        raw = file_raw(self._store.reader(), row.fid)
        return MemoryFile(hook=self._hook_of(row), turns=tuple(member_turn(m) for m in members),
                          text=render_file(row, members), raw=raw, meta=row.meta)

    def resolve(self, hook_id: str, namespace: Namespace | str | None) -> FileRow:
        """The file row of a hook id or unique prefix (``HookNotFoundError`` otherwise)."""
        self._check_open()
        if not isinstance(hook_id, str) or not hook_id.strip():
            raise HookNotFoundError("hook_id", hook_id, "give a hook id as shown by render_prompt() or hooks()")
        ns_id = None
        if namespace is not None:
            _, ns_id = self._ns_id(namespace)
            if ns_id is None:
                raise HookNotFoundError("hook_id", hook_id, "this namespace has no memory files")
        row, candidates = resolve_file(self._store.reader(), hook_id.strip(), ns_id)
        if row is None:
            if candidates:
                raise HookNotFoundError("hook_id", hook_id, "the prefix matches several files: "
                                        + ", ".join(candidates) + "; give more characters", candidates)
            fix = ("give at least 6 characters of a hook id" if len(hook_id.strip()) < 6 else
                   "no memory file has this id; list them with engine.hooks(namespace, include_merged=True)")
            raise HookNotFoundError("hook_id", hook_id, fix)
        return row

    def set_importance(self, hook_id: str, importance: int, namespace: Namespace | str | None = None) -> IndexHook:
        """Set a file's importance (0-100); a user-set value is kept by merges and counts in the eviction."""
        if isinstance(importance, bool) or not isinstance(importance, int) or not 0 <= importance <= 100:
            raise InvalidArgumentError("importance", importance, "give an integer from 0 to 100")
        row = self.resolve(hook_id, namespace)
        with self._store.transaction("set_importance") as conn:
            set_file_importance(conn, row.fid, importance)
        return self._hook_of(self._fresh([get_file(self._store.reader(), fid=row.fid) or row])[0])

    def _hook_of(self, row: FileRow) -> IndexHook:
        user_id, agent_id = self._store.namespace_key(row.ns_id)
        return hook_model(row, Namespace(user_id, agent_id or None))

    # -- compaction ------------------------------------------------------------------------------------------
    def compact(self, namespace: Namespace | str, period: Literal["weekly", "monthly"], *,
                key: str | None = None, now: datetime | str | float | None = None) -> CompactionReport:
        """Merge a week's daily files (``"weekly"``) or evict a month's weekly files (``"monthly"``).

        ``key`` names one week (``"2026-W47"``) or month (``"2026-11"``); by default every week (month) that
        ended before ``now`` and still has work is done. Each week or month is one transaction: an interrupted
        run leaves the store as it was, and running again completes it. Running twice changes nothing.
        """
        if period not in ("weekly", "monthly"):
            raise InvalidArgumentError("period", period, "give 'weekly' or 'monthly'")
        if key is not None and not isinstance(key, str):
            raise InvalidArgumentError("key", key, "give a week like '2026-W47' or a month like '2026-11'")
        if key is not None and not (_WEEK if period == "weekly" else _MONTH).match(key):
            example = "'2026-W47'" if period == "weekly" else "'2026-11'"
            raise InvalidArgumentError("key", key, f"a {period} key looks like {example}")
        reference = _now(now)
        ns, ns_id = self._ns_id(namespace)
        if self._store.read_only:
            raise ReadOnlyStoreError("compact")
        if ns_id is None:
            return CompactionReport(namespace=ns)
        if period == "weekly":
            try:
                keys = [key] if key else due_weeks(self._store.reader(), ns_id, iso_week_key(reference.date()))
                if key:
                    date.fromisocalendar(int(key[:4]), int(key[6:]), 1)
            except ValueError:
                raise InvalidArgumentError("key", key, "no such ISO week") from None
            steps = []
            for week in keys:
                with self._store.transaction("compact weekly") as conn:
                    steps.append(merge_week(conn, ns_id, week))
            return CompactionReport(namespace=ns, steps=tuple(steps))
        if key and not 1 <= int(key[5:]) <= 12:
            raise InvalidArgumentError("key", key, "months are 01 to 12")
        # a month is finished when the current ISO week belongs to a later one (a week's month is its Thursday's)
        current_month = month_key_of_week(iso_week_key(reference.date()))
        keys = [key] if key else due_months(self._store.reader(), ns_id, current_month)
        steps = []
        for month in keys:
            relevance, source = self._relevance(ns, ns_id, month, reference)
            cfg = self.config.lifecycle
            w = {"recency": 0.3, "access": 0.2, "importance": 0.2, "relevance": 0.3, **cfg.eviction_weights}
            weights = EvictionWeights(recency=w["recency"], access=w["access"], importance=w["importance"],
                                      relevance=w["relevance"], half_life_days=cfg.half_life_days)
            with self._store.transaction("compact monthly") as conn:
                steps.append(evict_month(conn, ns_id, month, now=reference.timestamp(), weights=weights,
                                         relevance=relevance, importance_threshold=cfg.importance_threshold,
                                         relevance_source=source))
        self._after_eviction(ns_id)
        return CompactionReport(namespace=ns, steps=tuple(steps))

    def maybe_compact(self, namespace: Namespace | str, *,
                      now: datetime | str | float | None = None) -> CompactionReport:
        """Do the compaction that is due for a namespace: merge every finished week, then evict every finished
        month. Cheap when nothing is due; safe to call after every conversation or from cron (``memext compact``).
        """
        weekly = self.compact(namespace, "weekly", now=now)
        monthly = self.compact(namespace, "monthly", now=now)
        return CompactionReport(namespace=weekly.namespace, steps=weekly.steps + monthly.steps)

    def _relevance(self, ns: Namespace, ns_id: int, month: str,
                   reference: datetime) -> tuple[dict[str, float] | None, str]:
        """Relevance of the month's weekly files to the namespace's recent topics (LLM or retrieval-based)."""
        conn = self._store.reader()
        files = weeks_of_month(conn, ns_id, month)
        if not files:
            return None, "none"
        recent = [r for r in self._fresh(list_files(conn, ns_id)) if r.status in VISIBLE.get(r.period, ())
                  and r.period in ("daily", "weekly", "context") and _month_of(r) > month]
        recent.sort(key=lambda r: -(r.end_ts or r.created_at))
        topics = [" ".join([r.title, *r.entities[:6]]) for r in recent[:5] if r.title or r.entities]
        if not topics:
            return None, "none"
        cfg = self.config.lifecycle
        if cfg.llm_relevance and self.llm is not None:
            scored = _llm_relevance(self.llm, topics, self._fresh(files), cfg.llm_timeout_s)
            if scored is not None:
                return scored, f"llm:{self.llm.id}"
        query = " ".join(topics)[: self.config.limits.max_query_chars]
        result = self.search(query, Namespace(ns.user_id, ns.agent_id), k=50,
                             include_cold=True)
        by_turn: dict[str, float] = {}
        for rank, item in enumerate(result.items):
            for t in item.turn_ids:
                by_turn.setdefault(t, 1.0 / (1 + rank))
        score = {}
        for f in files:
            ids = [m.turn.id for m in file_turns(conn, f.fid)]
            score[f.id] = sum(by_turn.get(i, 0.0) for i in ids)
        top = max(score.values(), default=0.0)
        return ({k: v / top for k, v in score.items()} if top > 0 else {k: 0.0 for k in score}), "retrieval"

    # -- pre_compress ----------------------------------------------------------------------------------------
    def pre_compress(self, namespace: Namespace | str, full_context: str | list[Any] | dict[str, Any], *,
                     estimated_tokens: int | None = None, task_state: Mapping[str, Any] | None = None,
                     now: datetime | str | float | None = None) -> str:
        """Save a host's whole context before it compresses it; returns the hook id of the saved file.

        The raw text is stored first (verbatim, in the file's ``raw``), then parsed into turns when the format
        is recognised (JSON message lists, ``User:`` / ``Assistant:`` transcripts); turns already stored in the
        namespace are linked, not duplicated. Unrecognised text is still searchable: it is indexed in chunks as
        ``system`` turns. ``task_state`` (a JSON-serialisable mapping) is kept with the file. ``now`` (default: the
        current time) timestamps the file and the new turns.
        """
        ns, _ = self._ns_id(namespace)
        if isinstance(full_context, (bytes, bytearray, memoryview)):
            raise InvalidArgumentError("full_context", f"<{len(full_context)} bytes>",
                                       "pass text (decode the bytes first, e.g. data.decode('utf-8')) or JSON data")
        if full_context is None or isinstance(full_context, (bool, int, float)):
            raise InvalidArgumentError("full_context", full_context, "pass the context as text, a list of "
                                                                     "messages or a JSON object")
        if not isinstance(full_context, str):
            try:
                full_context = json.dumps(full_context, ensure_ascii=False, default=str)
            except (TypeError, ValueError) as exc:
                raise InvalidArgumentError("full_context", full_context, f"pass text or JSON data ({exc})") from None
        if not full_context.strip():
            raise InvalidArgumentError("full_context", full_context, "give the non-empty context to save")
        if len(full_context) > MAX_CONTEXT_CHARS:
            raise InvalidArgumentError("full_context", f"<{len(full_context)} characters>",
                                       f"at most {MAX_CONTEXT_CHARS} characters; save it in parts")
        check_text("full_context", full_context, InvalidArgumentError)
        if estimated_tokens is not None and (isinstance(estimated_tokens, bool) or
                                             not isinstance(estimated_tokens, int) or estimated_tokens < 0):
            raise InvalidArgumentError("estimated_tokens", estimated_tokens, "give an integer >= 0 or None")
        if task_state is not None:
            if not isinstance(task_state, Mapping):
                raise InvalidArgumentError("task_state", task_state, "pass a mapping (dict) or None")
            check_json("task_state", dict(task_state), InvalidArgumentError,
                       max_depth=self.config.limits.max_metadata_depth,
                       max_bytes=self.config.limits.max_metadata_bytes)  # no RecursionError on deep nesting
            try:
                json.dumps(dict(task_state), allow_nan=False).encode("utf-8")
            except (TypeError, ValueError) as exc:
                raise InvalidArgumentError("task_state", task_state, f"must be JSON-serialisable ({exc})") from None
        if self._store.read_only:
            raise ReadOnlyStoreError("pre_compress")
        parsed = parse_context(full_context)
        now = _now(now)
        meta = {"estimated_tokens": estimated_tokens if estimated_tokens is not None else
                estimate_tokens(full_context), "task_state": dict(task_state) if task_state else None,
                "parsed": parsed is not None, "turns": len(parsed) if parsed else 0}
        if parsed is not None:
            turns = parsed
        else:
            turns = [{"role": "system", "content": full_context[i:i + CHUNK_CHARS], "speaker": "context",
                      "tool_calls": []} for i in range(0, len(full_context), CHUNK_CHARS)]
        # one transaction: the file, its new turns (through the write pipeline) and its membership — a crash or a
        # bad turn leaves nothing behind
        with self._store.transaction("pre_compress") as conn:
            ns_id = self._store.ensure_namespace(conn, ns.key)
            row = insert_file(conn, ns_id, period="context", period_key=now.strftime("%Y-%m-%dT%H:%M:%SZ"),
                              status="closed", raw=full_context, meta=meta)
            known = self._known_turns(ns_id, ns)
            tids: list[int] = []
            new: list[Turn] = []
            new_pos: list[int] = []
            for t in turns:
                key = (t["role"], " ".join(t["content"].split()))
                if key in known:
                    tids.append(known[key])
                else:
                    tids.append(-1)
                    new_pos.append(len(tids) - 1)
                    new.append(Turn(role=t["role"], content=t["content"], speaker=t.get("speaker"),
                                    tool_calls=tuple(t.get("tool_calls") or ()), timestamp=now,
                                    session_id=ns.session_id, metadata={"pre_compress": row.id}))
            if new:
                if self.add_in is None:  # pragma: no cover - every engine passes the pipeline's add_in
                    raise ReadOnlyStoreError("pre_compress")
                added = self.add_in(conn, new, ns)
                id_to_tid = tids_of(conn, ns_id, added.turn_ids)
                for pos, turn_id in zip(new_pos, added.turn_ids, strict=True):
                    tids[pos] = id_to_tid[turn_id]
            set_members(conn, row.fid, [(tid, 0, None) for tid in tids],
                        estimate_tokens(full_context))
            refresh = get_file(conn, fid=row.fid)
            assert refresh is not None
            self._refresh(conn, refresh)
        return row.id

    def _known_turns(self, ns_id: int, ns: Namespace, limit: int = 5000) -> dict[tuple[str, str], int]:
        rows = self._store.recent_turns(ns_id, limit)
        return {(role, " ".join(content.split())): tid for role, content, tid in rows}


# -- helpers ---------------------------------------------------------------------------------------------------
def _part(m: Any) -> Any:
    from dataclasses import replace

    return replace(m.turn, content=m.text)


def _month_of(row: FileRow) -> str:
    """``YYYY-MM`` of a file's period (a weekly key like ``2026-W10`` is not a month: its Thursday's month)."""
    return month_key_of_week(row.period_key) if row.period == "weekly" else row.period_key[:7]


def _now(now: datetime | str | float | None) -> datetime:
    if now is None:
        return datetime.now(UTC)
    try:
        value = to_utc(now, "now")
    except ValidationError as exc:
        raise InvalidArgumentError(exc.field, exc.value, exc.fix) from None
    assert value is not None
    return value


def _hook_lines(h: IndexHook) -> tuple[str, str]:
    when = h.period_key if h.period != "context" else h.period_key[:10]
    tags = " ".join(f"#{t}" for t in h.tags[:5])
    title = h.title or "(untitled)"
    abstract = h.abstract if len(h.abstract) <= 240 else h.abstract[:237] + "..."
    full = f"- [{h.id}] {when} {h.period}: {title}" + (f" — {abstract}" if abstract else "") + (
        f" ({tags})" if tags else "")
    short = f"- [{h.id}] {when} {h.period}: {title}"
    return full, short


def _llm_relevance(llm: Any, topics: list[str], files: list[FileRow], timeout: float) -> dict[str, float] | None:
    """Ask the LLM for a relevance in [0, 1] per file; None on any failure (the caller falls back)."""
    from ..llm import ask_json  # here, not at the top: this function is all this module asks of an LLM

    listing = "\n".join(f'- id "{f.id}": {f.title} — {f.abstract[:300]}' for f in files)
    prompt = ("Recent topics of this user:\n" + "\n".join(f"- {t}" for t in topics) +
              "\n\nMemory files:\n" + listing +
              '\n\nFor each memory file, how relevant is it to the recent topics (0 = not at all, 1 = very)? '
              'Answer with JSON only: {"scores": {"<file id>": <number between 0 and 1>, ...}}')
    schema = {"type": "object", "properties": {"scores": {"type": "object"}}, "required": ["scores"]}

    def relevance(value: dict[str, Any]) -> dict[str, float]:
        out = {f.id: float(value["scores"][f.id]) for f in files}
        if not all(0.0 <= v <= 1.0 for v in out.values()):
            raise ValueError("every score must be a number between 0 and 1")
        return out

    try:
        return ask_json(llm, prompt, validate=relevance, timeout=timeout, json_schema=schema)
    except Exception:  # noqa: BLE001 -- any failure of the model: the caller ranks by retrieval instead
        return None
