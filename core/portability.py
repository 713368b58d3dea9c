"""Export and import: a store's memories as JSON lines, restored losslessly into any backend; mem0's export too.

The format (``memory-ext``, version 1) is one JSON object per line, each with a ``type``:

* ``header`` (the first line): ``format``, ``version``, ``memory_ext_version``, ``embedder_id``, ``exported_at``;
* ``namespace``: ``user_id``, ``agent_id`` — the lines after it, up to the next ``namespace``, belong to it;
* ``turn``: every field of a stored turn (``id``, ``session_id``, ``role``, ``speaker``, ``content``,
  ``timestamp``, ``external_id``, ``tool_calls``, ``attachments``, ``metadata`` — a tool turn's ``tool_name``,
  ``tool_call_id`` and ``is_error`` inside it, under those keys, as stored), the id of its turn record
  (``record_id``, kept so search results keep their ids), ``replaced`` (``{"valid_to", "by"}`` for a version an
  ``update`` replaced, else null) and ``cold`` (the monthly eviction's tier); in write order;
* ``history``: one recorded operation of a memory (``memory_key``, ``session_id``, ``op``, ``turn_id``,
  ``timestamp``) — the updates and deletes ``history`` lists;
* ``file``: one memory file with its hook (title, abstract, key facts, importance, merge state, the verbatim text of
  a ``pre_compress`` archive) and its ``members`` (``[turn id, start, stop]``);
* ``item``: one live item of the LangGraph store (``ns``, ``key``, ``value`` as its JSON text, times, TTL, the turn
  it is archived as) with the vectors its client embedded (``[path, float64 bytes as hex]``).

Vectors and every derived index are not exported: an import derives them again with the importing engine's
embedder and switches (the turns' record ids, replaced versions and cold tier are kept).

An import reads the whole file first: a line that is not JSON, not of a known type or not a valid turn raises
:class:`~memory_ext.errors.InvalidImportError` naming the line, and nothing of the file is written. Then one
transaction writes what the store does not hold yet — a turn, file or operation already there is skipped — so
importing the same file twice adds nothing.

>>> import tempfile
>>> from memory_ext import MemoryEngine, Turn
>>> with MemoryEngine.open(tempfile.mkdtemp(), embedder="hashing") as source:
...     _ = source.add_turns([Turn(role="user", content="Ana lives in Oslo", external_id="home")], "ana")
...     _ = source.update("ana", "home", content="Ana lives in Porto")
...     lines = list(source.export())
>>> [line["type"] for line in lines]
['header', 'namespace', 'turn', 'turn', 'history', 'file']
>>> with MemoryEngine.open(tempfile.mkdtemp(), embedder="hashing") as target:
...     report = target.import_records(lines)
...     again = target.import_records(lines)
...     (report.turns, again.turns, [v.operation for v in target.history("ana", "home")])
(2, 0, ['add', 'update'])
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict

from .errors import InvalidImportError, ReadOnlyStoreError, ValidationError
from .ingest.derive import IngestTurn
from .ingest.pipeline import KIND_CONTEXT_TURNS, stored_tail, turn_rows
from .models import Namespace, Turn, to_utc
from .store import portable
from .store.tiers import set_cold

if TYPE_CHECKING:
    from .ingest.pipeline import WritePipeline
    from .store.base import DerivedIndex
    from .store.interface import TruthStore

__all__ = ["FORMAT", "FORMAT_VERSION", "ImportReport", "export_lines", "from_mem0", "import_lines"]

FORMAT = "memory-ext"
FORMAT_VERSION = 1
LINE_TYPES = ("header", "namespace", "turn", "history", "file", "item")


class ImportReport(BaseModel):
    """What :meth:`~memory_ext.MemoryEngine.import_records` added (what the store already held is skipped)."""

    model_config = ConfigDict(frozen=True)
    namespaces: int = 0
    """Namespaces the file holds."""
    turns: int = 0
    """Turns added (each derived and indexed again)."""
    skipped_turns: int = 0
    """Turns of the file the store already held."""
    files: int = 0
    """Memory files added."""
    history: int = 0
    """Recorded operations added."""
    items: int = 0
    """LangGraph store items added."""


def _iso(ts: float | None) -> str | None:
    return datetime.fromtimestamp(ts, UTC).isoformat() if ts is not None else None


def export_lines(store: TruthStore, namespaces: Iterable[tuple[int, Namespace]], *,
                 embedder_id: str | None) -> Iterator[dict[str, Any]]:
    """The export of ``namespaces`` (``(ns_id, namespace)``), one JSON-ready dict per line (see the module
    docstring)."""
    from . import __version__

    yield {"type": "header", "format": FORMAT, "version": FORMAT_VERSION, "memory_ext_version": __version__,
           "embedder_id": embedder_id, "exported_at": datetime.now(UTC).isoformat()}
    for ns_id, ns in namespaces:
        conn = store.reader()
        yield {"type": "namespace", "user_id": ns.user_id, "agent_id": ns.agent_id}
        states = portable.turn_states(conn, ns_id)
        for t in store.list_turns(ns_id):
            record_id, valid_to, by, cold = states.get(t.id, (None, None, None, False))
            yield {"type": "turn", "id": t.id, "session_id": t.session_id, "role": t.role, "speaker": t.speaker,
                   "content": t.content, "timestamp": _iso(t.ts), "external_id": t.external_id,
                   "tool_calls": t.tool_calls, "attachments": t.attachments, "metadata": t.metadata,
                   "record_id": record_id, "replaced": None if valid_to is None else
                   {"valid_to": _iso(valid_to), "by": by}, "cold": cold}
        for key, session, op, turn_id, ts in portable.history_rows(conn, ns_id):
            yield {"type": "history", "memory_key": key, "session_id": session, "op": op, "turn_id": turn_id,
                   "timestamp": _iso(ts)}
        for f in portable.file_rows(conn, ns_id):
            yield {"type": "file", **f}
        for item in portable.item_rows(conn, ns_id, datetime.now(UTC).timestamp()):
            yield {"type": "item", **item}


@dataclass(frozen=True)
class _ImportedTurn:
    """A turn line of a file: the pipeline's turn (``turn_rows``) and what the export kept of its record."""

    turn: IngestTurn
    record_id: str | None
    """The id its turn record had (kept, so references to it still hold)."""
    replaced: tuple[Any, str] | None
    """``(valid_to, by)`` when a later statement replaced it."""
    cold: bool


@dataclass
class _Part:
    """What a file holds for one namespace, validated."""

    namespace: Namespace
    turns: list[_ImportedTurn] = field(default_factory=list)
    history: list[tuple[str, str | None, str, str | None, float]] = field(default_factory=list)
    files: list[dict[str, Any]] = field(default_factory=list)
    items: list[dict[str, Any]] = field(default_factory=list)


def _need(line: int, record: Mapping[str, Any], name: str, kinds: tuple[type, ...], *,
          optional: bool = False) -> Any:
    value = record.get(name)
    if value is None and optional:
        return None
    if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
        raise InvalidImportError(line, name, value, f"give {name} as {' or '.join(k.__name__ for k in kinds)}")
    return value


def _time(line: int, name: str, value: Any) -> float | None:
    if value is None:
        return None
    try:
        when = to_utc(value, name)
    except ValidationError as exc:
        raise InvalidImportError(line, exc.field, exc.value, exc.fix) from None
    return when.timestamp() if when is not None else None


def _parse(lines: Iterable[str | Mapping[str, Any]], limits: Any) -> list[_Part]:
    """Every line read and checked before anything is written (a bad one raises, naming its number)."""
    parts: list[_Part] = []
    now = datetime.now(UTC)
    seen_header = False
    for n, raw in enumerate(lines, start=1):
        if isinstance(raw, str):
            if not raw.strip():
                continue
            try:
                record = json.loads(raw)
            except ValueError as exc:
                raise InvalidImportError(n, "line", raw[:40], f"each line is one JSON object ({exc})") from None
        else:
            record = raw
        if not isinstance(record, Mapping):
            raise InvalidImportError(n, "line", record, "each line is one JSON object with a 'type'")
        kind = record.get("type")
        if kind not in LINE_TYPES:
            raise InvalidImportError(n, "type", kind, "line types are " + ", ".join(LINE_TYPES))
        if not seen_header:
            if kind != "header":
                raise InvalidImportError(n, "type", kind, "the first line is the header of a memory-ext export "
                                                          "(for mem0's export use format='mem0')")
            if record.get("format") != FORMAT or record.get("version") != FORMAT_VERSION:
                raise InvalidImportError(n, "format", f"{record.get('format')} {record.get('version')}",
                                         f"this memory-ext reads format {FORMAT!r} version {FORMAT_VERSION}")
            seen_header = True
            continue
        if kind == "header":
            raise InvalidImportError(n, "type", kind, "a file has one header, on its first line")
        if kind == "namespace":
            try:
                ns = Namespace(_need(n, record, "user_id", (str,)), _need(n, record, "agent_id", (str,),
                                                                          optional=True))
            except ValidationError as exc:
                raise InvalidImportError(n, exc.field, exc.value, exc.fix) from None
            parts.append(_Part(ns))
            continue
        if not parts:
            raise InvalidImportError(n, "type", kind, "a namespace line comes before its turns, history and files")
        part = parts[-1]
        if kind == "turn":
            try:
                turn = Turn(id=_need(n, record, "id", (str,)), role=record.get("role"), content=record.get("content"),
                            speaker=record.get("speaker"), session_id=record.get("session_id"),
                            timestamp=record.get("timestamp"), external_id=record.get("external_id"),
                            tool_calls=record.get("tool_calls") or (), attachments=record.get("attachments") or (),
                            metadata=record.get("metadata") or {})
                row = turn_rows([turn], part.namespace, limits, now)[0]
            except ValidationError as exc:
                raise InvalidImportError(n, exc.field.removeprefix("turns[0]."), exc.value, exc.fix) from None
            except ValueError as exc:  # pydantic's ValidationError
                raise InvalidImportError(n, "turn", record.get("id"), f"fix the turn's fields ({exc})") from None
            record_id = _need(n, record, "record_id", (str,), optional=True)
            replaced = record.get("replaced")
            was_replaced = None
            if replaced is not None:
                if not isinstance(replaced, Mapping):
                    raise InvalidImportError(n, "replaced", replaced, "give {'valid_to': time, 'by': record id}")
                was_replaced = (_time(n, "replaced.valid_to", replaced.get("valid_to")),
                                _need(n, replaced, "by", (str,)))
            part.turns.append(_ImportedTurn(row, record_id, was_replaced, bool(record.get("cold", False))))
        elif kind == "history":
            ts = _time(n, "timestamp", record.get("timestamp"))
            if ts is None:
                raise InvalidImportError(n, "timestamp", None, "give the time of the operation")
            part.history.append((_need(n, record, "memory_key", (str,)),
                                 _need(n, record, "session_id", (str,), optional=True),
                                 _need(n, record, "op", (str,)),
                                 _need(n, record, "turn_id", (str,), optional=True), ts))
        elif kind == "item":
            item = {name: record.get(name) for name in portable.ITEM_FIELDS}
            for name in ("ns", "key", "value", "created_at", "updated_at"):
                _need(n, record, name, (str,))
            try:
                json.loads(str(item["value"]))
                vectors = [[str(path), str(blob)] for path, blob in record.get("vectors") or []]
                for _, blob in vectors:
                    bytes.fromhex(blob)
            except (ValueError, TypeError) as exc:
                raise InvalidImportError(n, "value", item["key"], f"an item's value is JSON text and its vectors "
                                         f"[path, hex] pairs ({exc})") from None
            item["vectors"] = vectors
            part.items.append(item)
        else:
            missing = [name for name in portable.FILE_FIELDS if name not in record]
            if missing or not isinstance(record.get("members"), list):
                raise InvalidImportError(n, missing[0] if missing else "members", None,
                                         "a file line has every field an export writes")
            for member in record["members"]:
                if not (isinstance(member, list) and len(member) == 3 and isinstance(member[0], str)
                        and isinstance(member[1], int)):
                    raise InvalidImportError(n, "members", member, "each member is [turn id, start, stop]")
            part.files.append(dict(record))
    if not seen_header:
        raise InvalidImportError(1, "header", None, "the file is empty: an export starts with its header line")
    return parts


def import_lines(store: TruthStore, writer: WritePipeline, indexes: Iterable[DerivedIndex],
                 lines: Iterable[str | Mapping[str, Any]], *, limits: Any, progress: bool = False) -> ImportReport:
    """Validate ``lines`` whole, then write what the store does not hold yet in one transaction."""
    if store.read_only:
        raise ReadOnlyStoreError("import_records")
    parts = _parse(lines, limits)
    from tqdm import tqdm

    turns = skipped = files = history = items = 0
    touched: list[int] = []
    try:
        with store.transaction("import") as conn:
            for part in tqdm(parts, desc="import", unit="namespace", disable=not progress):
                ns_id = store.ensure_namespace(conn, part.namespace.key)
                touched.append(ns_id)
                have = portable.existing(conn, "turns", ns_id, [r.turn.id for r in part.turns])
                new = [r for r in part.turns if r.turn.id not in have]
                skipped += len(part.turns) - len(new)
                if new:
                    context = stored_tail(store, conn, ns_id, KIND_CONTEXT_TURNS)
                    seq = store.next_seq(conn, ns_id)
                    rows = [replace(r.turn, seq=seq + offset) for offset, r in enumerate(new)]
                    store.insert_turns(conn, ns_id, [row.as_row() for row in rows])
                    writer.rederive(conn, ns_id, rows, context,
                                    {r.turn.id: r.record_id for r in new if r.record_id})
                    for r in new:
                        if r.replaced is not None:
                            valid_to, by = r.replaced
                            store.mark_replaced(conn, ns_id, r.turn.id, valid_to, by)
                    cold = [r.turn.id for r in new if r.cold]
                    if cold:
                        set_cold(conn, ns_id, list(portable.tids_of(conn, ns_id, cold).values()), 1)
                    turns += len(rows)
                history += portable.insert_history(conn, ns_id, part.history)
                have_files = portable.existing(conn, "files", ns_id, [f["id"] for f in part.files])
                fresh = [f for f in part.files if f["id"] not in have_files]
                if fresh:
                    members = sorted({m[0] for f in fresh for m in f["members"]})
                    tids = portable.tids_of(conn, ns_id, members)
                    unknown = [m for m in members if m not in tids]
                    if unknown:
                        raise InvalidImportError(0, "file.members", unknown[0], "a file's member turns are turns "
                                                 "of the same namespace, in the file or already in the store")
                    portable.insert_files(conn, ns_id, fresh, tids)
                    files += len(fresh)
                items += portable.insert_items(conn, ns_id, part.items)
    finally:
        for ns_id in touched:
            for index in indexes:
                index.invalidate(ns_id)
    writer.kick()
    return ImportReport(namespaces=len(parts), turns=turns, skipped_turns=skipped, files=files, history=history,
                        items=items)


def from_mem0(data: Any, *, user_id: str | None = None) -> list[tuple[Namespace, Turn]]:
    """mem0's ``get_all`` output (``{"results": [...]}`` or a bare list of memories) as memory-ext turns.

    One turn per memory: ``memory`` is the content, mem0's ``id`` the ``external_id`` (re-importing adds
    nothing), ``created_at`` the time, ``metadata`` kept, with mem0's ``id``, ``hash``, ``updated_at`` and
    ``categories`` under ``metadata["mem0"]``; ``user_id`` / ``agent_id`` / ``run_id`` become the namespace and
    session (``user_id`` is the default user for entries without one).

    >>> [(ns.user_id, t.content, t.external_id) for ns, t in from_mem0(
    ...     {"results": [{"id": "m-1", "memory": "Likes hiking", "user_id": "alex", "metadata": None,
    ...                   "created_at": "2024-07-26T10:29:36.630547-07:00", "updated_at": None}]})]
    [('alex', 'Likes hiking', 'm-1')]
    """
    entries = data.get("results") if isinstance(data, Mapping) else data
    if not isinstance(entries, list):
        raise InvalidImportError(1, "results", type(data).__name__, "give mem0's get_all output: "
                                 "{'results': [...]} or a list of memories")
    out: list[tuple[Namespace, Turn]] = []
    for i, entry in enumerate(entries, start=1):
        if not isinstance(entry, Mapping):
            raise InvalidImportError(i, "memory", entry, "each entry is a mem0 memory object")
        memory_id = _need(i, entry, "id", (str,))
        content = _need(i, entry, "memory", (str,))
        owner = entry.get("user_id") or user_id
        if not owner:
            raise InvalidImportError(i, "user_id", None, "this entry names no user: pass user_id (--user)")
        meta = dict(entry.get("metadata") or {})
        extra = {k: entry[k] for k in ("id", "hash", "updated_at", "categories", "actor_id") if entry.get(k)}
        meta.setdefault("mem0", extra)
        role = entry.get("role") if entry.get("role") in ("user", "assistant") else "user"
        try:
            ns = Namespace(str(owner), entry.get("agent_id") or None)
            turn = Turn(role=role, content=content, external_id=memory_id, session_id=entry.get("run_id") or None,
                        timestamp=entry.get("created_at") or None, metadata=meta)
        except ValidationError as exc:
            raise InvalidImportError(i, exc.field, exc.value, exc.fix) from None
        except ValueError as exc:
            raise InvalidImportError(i, "memory", memory_id, f"fix the entry ({exc})") from None
        out.append((ns, turn))
    return out
