"""Entity co-occurrence graph, persisted in SQLite, one independent graph per namespace.

Nodes are the entities named in records (people, places, titles... as found by
:func:`memory_ext.text.entities.extract_entities`); two entities are joined by an edge when one record names
both. The graph lets recall follow a relation the query does not spell out: "What does Ana's brother do?"
reaches "Marco works as a chef" through the record "Ana: my brother Marco is visiting".

Storage (tables prefixed ``graph_``; written inside the caller's transaction, never committed here)::

    graph_entities(eid INTEGER PRIMARY KEY AUTOINCREMENT, ns_id, key, name, n_records)   UNIQUE(ns_id, key)
        one row per entity of a namespace: ``key`` is the normalised name (:func:`entity_key`: NFKC, casefold,
        possessives and punctuation stripped), ``name`` the first spelling seen, ``n_records`` the number of
        records naming it (its document frequency).
    graph_postings(ns_id, eid, rid, ts)   PRIMARY KEY(ns_id, eid, rid), INDEX(ns_id, rid)
        entity -> record; ``ts`` is the record's time (``ref_ts``), NULL when unknown.
    graph_edges(ns_id, a, b, count, last_ts)   PRIMARY KEY(ns_id, a, b) with a < b, INDEX(ns_id, b)
        co-occurrence: ``count`` records name both entities, the latest of them at ``last_ts``.
    graph_stats(ns_id PRIMARY KEY, version, last_eid, n_records, max_ts)
        per-namespace counters: ``n_records`` records have at least one entity, ``max_ts`` is the newest
        posting time; ``version`` is bumped by every delete; ``last_eid`` is the highest entity id written.

Edge weight (:meth:`EntityGraph.neighbours`) is ``count * 0.5 ** (age / half_life)`` where ``age`` is the time
from the edge's ``last_ts`` to ``now`` (by default the namespace's newest posting, so an old store is not
uniformly "stale"): a pair named together often and recently weighs most. An edge or a reference time that is
unknown (NULL) gets recency factor 1.

Query side, :meth:`EntityGraph.entities_in` finds the known entities a text names: the entities
:func:`extract_entities` finds in it, plus every known key that occurs as a run of whole tokens
(case-insensitive; possessive "Ana's" matches "Ana") or, for keys written in CJK characters, as a substring
(李明 in 李明的哥哥). Where two matches overlap the longer wins ("Berlin Marathon" over "Berlin"). Keys are looked
up in a per-namespace in-memory dict (n-grams of the text's tokens and CJK substrings, so the cost depends on the
text's length, not on the number of entities), synced from ``graph_stats`` at every call like the keyword
index: nothing changed -> no further SQL; only new entities -> load just those; a delete -> reload.

Every statement carries ``ns_id``: one namespace never reads or changes another's rows.

>>> import sqlite3
>>> conn = sqlite3.connect(":memory:")
>>> EntityGraph.create_schema(conn)
>>> graph = EntityGraph()
>>> graph.add(conn, 1, [(10, ["Ana", "Marco"], 0.0), (11, ["Marco", "Lisbon"], 0.0)])
>>> [name for _, name in graph.entities_in(conn, 1, "What does Ana's brother do?")]
['Ana']
>>> marco = graph.entities_in(conn, 1, "marco")[0][0]
>>> sorted(graph.display_names(conn, 1, [e for e, _ in graph.neighbours(conn, 1, [marco])[marco]]).values())
['Ana', 'Lisbon']
"""

from __future__ import annotations

import re
import sqlite3
import threading
import unicodedata
from collections import Counter, defaultdict
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

from ..errors import ConfigError
from ..text.entities import extract_entities

__all__ = ["EntityGraph", "entity_key", "record_entities"]

_SQL_CHUNK: Final = 400  # ids per "IN (...)" statement (SQLite's default variable limit is 999+)
_MAX_KEY_TOKENS: Final = 8  # longest key, in tokens, that entities_in looks for
_MAX_CJK_KEY: Final = 12  # longest CJK key, in characters, matched as a substring
_DAY_S: Final = 86_400.0

_CJK: Final = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
_TOKEN_RE: Final = re.compile(rf"[{_CJK}]+|[^\W_{_CJK}]+")
_CJK_RE: Final = re.compile(rf"[{_CJK}]")
_APOS: Final = str.maketrans({"’": "'", "‘": "'", "ʼ": "'", "`": "'"})
_POSSESSIVE_RE: Final = re.compile(r"'s\b")
# quantities ("3 kids", "$200", "60公里", "两只猫") are entities to extract_entities, but as graph nodes they
# join unrelated records ("3 kids" / "3 km") and only add noise
_QUANTITY_RE: Final = re.compile(r"^(?:[$€£¥]|(?:US|A|C)[$]|\d|[二两三四五六七八九十百千万]+[个只条位本件张部辆台家杯盘首幅双套座所间棵朵匹头岁年天次])")
_EN_NUMBER_WORDS: Final = frozenset({
    "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve", "fifteen",
    "twenty", "thirty", "forty", "fifty", "hundred", "thousand", "dozen",
})
#: Speaker labels that name a role, not a person: they would join every record of a conversation.
GENERIC_SPEAKERS: Final[frozenset[str]] = frozenset({"assistant", "user", "system", "ai", "bot", "human", "tool"})


# ----------------------------------------------------------------------------------------- normalisation


def _tokens(text: str) -> list[tuple[int, int, str]]:
    """``(start, end, token)`` of the normalised text: NFKC, casefold, possessive 's cut, CJK runs apart."""
    s = _POSSESSIVE_RE.sub("", unicodedata.normalize("NFKC", text).casefold().translate(_APOS))
    return [(m.start(), m.end(), m.group()) for m in _TOKEN_RE.finditer(s)]


def entity_key(name: str) -> str:
    """The normalised form two spellings of one entity share ('' when the name has no letter or digit).

    >>> entity_key("Ana's"), entity_key("  ANA "), entity_key("Charlotte’s Web"), entity_key("李明")
    ('ana', 'ana', 'charlotte web', '李明')
    """
    return " ".join(t for _, _, t in _tokens(name))


def _is_quantity(name: str) -> bool:
    first = name.split(maxsplit=1)[0].lower() if name.split() else ""
    return bool(_QUANTITY_RE.match(name)) or first in _EN_NUMBER_WORDS


def record_entities(text: str, *, speaker: str | None = None, known: Collection[str] = ()) -> list[str]:
    """The entity names of one record to give :meth:`EntityGraph.add`: :func:`extract_entities` without
    quantities ("3 kids", "$200", "60公里") and without a role-label speaker ("assistant", "user").

    The speaker is kept when it is a name: it is what links a first-person statement ("my brother Marco...")
    to the person who made it.

    >>> record_entities("My brother Marco has 3 kids.", speaker="Ana")
    ['Ana', 'Marco']
    >>> record_entities("You will love Lisbon in spring.", speaker="assistant")
    ['Lisbon']
    """
    who = speaker if speaker and speaker.strip().casefold() not in GENERIC_SPEAKERS else None
    return [n for n in extract_entities(text, speaker=who, known=known) if not _is_quantity(n)]


# ------------------------------------------------------------------------------------------- SQL helpers

_SCHEMA: Final = (
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
)


def _chunks(items: Sequence[int], size: int = _SQL_CHUNK) -> Iterable[Sequence[int]]:
    for i in range(0, len(items), size):
        yield items[i : i + size]


def _marks(n: int) -> str:
    return "(" + ",".join("?" * n) + ")"


def _max_ts(a: float | None, b: float | None) -> float | None:
    if a is None:
        return b
    return a if b is None else max(a, b)


@dataclass(frozen=True)
class _Stats:
    version: int
    last_eid: int
    n_records: int
    max_ts: float | None


def _read_stats(conn: sqlite3.Connection, ns_id: int) -> _Stats | None:
    row = conn.execute(
        "SELECT version, last_eid, n_records, max_ts FROM graph_stats WHERE ns_id=?", (ns_id,)
    ).fetchone()
    return None if row is None else _Stats(int(row[0]), int(row[1]), int(row[2]), row[3])


@dataclass
class _KeyCache:
    """The entity keys of one namespace: normalised key -> eid, and how long keys get."""

    version: int = -1
    last_eid: int = 0
    by_key: dict[str, int] = field(default_factory=dict)
    max_tokens: int = 1
    max_cjk: int = 0

    def load(self, rows: Iterable[tuple[int, str]]) -> None:
        for eid, key in rows:
            self.by_key[key] = int(eid)
            self.last_eid = max(self.last_eid, int(eid))
            self.max_tokens = min(max(self.max_tokens, key.count(" ") + 1), _MAX_KEY_TOKENS)
            if " " not in key and _CJK_RE.search(key):
                self.max_cjk = min(max(self.max_cjk, len(key)), _MAX_CJK_KEY)


# ---------------------------------------------------------------------------------------------- the graph


class EntityGraph:
    """Per-namespace entity co-occurrence graph (see the module docstring for tables and weights).

    Writes (:meth:`add`, :meth:`remove`, :meth:`drop_namespace`) run inside the caller's open transaction and
    never commit; after a rollback call :meth:`invalidate`. Reads take any connection (normally the store's
    per-thread reader) and may run from several threads.
    """

    def __init__(self, *, half_life_days: float = 30.0) -> None:
        if not half_life_days > 0:
            raise ConfigError("graph.half_life_days", half_life_days, "the edge recency half-life must be > 0 days")
        self.half_life_s = float(half_life_days) * _DAY_S
        self._lock = threading.Lock()
        self._cache: dict[int, _KeyCache] = {}

    # ----------------------------------------------------------------------------------------- writes

    @staticmethod
    def create_schema(conn: sqlite3.Connection) -> None:
        """Create the ``graph_`` tables and indexes if they do not exist (no commit)."""
        for statement in _SCHEMA:
            conn.execute(statement)

    def add(
        self, conn: sqlite3.Connection, ns_id: int, items: Sequence[tuple[int, Sequence[str], float | None]]
    ) -> None:
        """Index records ``(rid, entity names, timestamp)`` inside the CALLER's open transaction (never commit).

        Upserts the entities (names equal under :func:`entity_key` are one entity), one posting per entity and
        record, and one co-occurrence per pair of the record's entities (``count + 1``, ``last_ts`` = the
        latest). Re-adding a rid already indexed in ``ns_id`` replaces its entities (within one call the last
        wins). A record without entities writes nothing.
        """
        latest: dict[int, tuple[dict[str, str], float | None]] = {}
        for rid, names, ts in items:
            keys: dict[str, str] = {}
            for name in names:
                key = entity_key(name)
                if key and key not in keys:
                    keys[key] = name.strip()
            latest[int(rid)] = (keys, None if ts is None else float(ts))
        if not latest:
            return
        existing = self._indexed(conn, ns_id, list(latest))
        if existing:
            self.remove(conn, ns_id, existing)
        latest = {rid: v for rid, v in latest.items() if v[0]}
        if not latest:
            return

        eid_of = self._upsert_entities(conn, ns_id, latest)
        postings = [(ns_id, eid_of[k], rid, ts) for rid, (keys, ts) in latest.items() for k in keys]
        conn.executemany("INSERT INTO graph_postings(ns_id, eid, rid, ts) VALUES (?,?,?,?)", postings)

        pairs: Counter[tuple[int, int]] = Counter()
        pair_ts: dict[tuple[int, int], float | None] = {}
        for keys, ts in latest.values():
            eids = sorted({eid_of[k] for k in keys})
            for i, a in enumerate(eids):
                for b in eids[i + 1 :]:
                    pairs[a, b] += 1
                    pair_ts[a, b] = _max_ts(pair_ts.get((a, b)), ts)
        conn.executemany(
            "INSERT INTO graph_edges(ns_id, a, b, count, last_ts) VALUES (?,?,?,?,?)"
            " ON CONFLICT(ns_id, a, b) DO UPDATE SET count = count + excluded.count,"
            " last_ts = CASE WHEN last_ts IS NULL THEN excluded.last_ts WHEN excluded.last_ts IS NULL THEN last_ts"
            " ELSE max(last_ts, excluded.last_ts) END",
            [(ns_id, a, b, n, pair_ts[a, b]) for (a, b), n in pairs.items()],
        )

        new_max = None
        for _, ts in latest.values():
            new_max = _max_ts(new_max, ts)
        last_eid = max(eid_of.values())
        cur = conn.execute(
            "UPDATE graph_stats SET n_records = n_records + ?, last_eid = max(last_eid, ?),"
            " max_ts = CASE WHEN max_ts IS NULL THEN ? WHEN ? IS NULL THEN max_ts ELSE max(max_ts, ?) END"
            " WHERE ns_id=?",
            (len(latest), last_eid, new_max, new_max, new_max, ns_id),
        )
        if cur.rowcount == 0:
            conn.execute(
                "INSERT INTO graph_stats(ns_id, version, last_eid, n_records, max_ts) VALUES (?,0,?,?,?)",
                (ns_id, last_eid, len(latest), new_max),
            )

    @staticmethod
    def _upsert_entities(
        conn: sqlite3.Connection, ns_id: int, latest: Mapping[int, tuple[dict[str, str], float | None]]
    ) -> dict[str, int]:
        """Create missing entities, add the new records to ``n_records``; return key -> eid."""
        df: Counter[str] = Counter()
        display: dict[str, str] = {}
        for keys, _ in latest.values():
            for key, name in keys.items():
                df[key] += 1
                display.setdefault(key, name)
        conn.executemany(
            "INSERT INTO graph_entities(ns_id, key, name, n_records) VALUES (?,?,?,?)"
            " ON CONFLICT(ns_id, key) DO UPDATE SET n_records = n_records + excluded.n_records",
            [(ns_id, key, display[key], n) for key, n in df.items()],
        )
        eid_of: dict[str, int] = {}
        keys_list = list(df)
        for i in range(0, len(keys_list), _SQL_CHUNK):
            part = keys_list[i : i + _SQL_CHUNK]
            for eid, key in conn.execute(
                f"SELECT eid, key FROM graph_entities WHERE ns_id=? AND key IN {_marks(len(part))}", (ns_id, *part)
            ):
                eid_of[key] = int(eid)
        return eid_of

    def remove(self, conn: sqlite3.Connection, ns_id: int, rids: Sequence[int]) -> None:
        """Delete the records ``rids`` of ``ns_id`` from the graph inside the caller's transaction.

        Their postings go; the co-occurrences they contributed are subtracted (an edge left with no record is
        deleted, a surviving edge whose latest record went gets its ``last_ts`` recomputed); entities left
        without records are deleted with their names. Unknown rids are ignored.
        """
        wanted = sorted({int(r) for r in rids})
        by_rid: dict[int, list[tuple[int, float | None]]] = defaultdict(list)
        for part in _chunks(wanted):
            for eid, rid, ts in conn.execute(
                f"SELECT eid, rid, ts FROM graph_postings WHERE ns_id=? AND rid IN {_marks(len(part))}",
                (ns_id, *part),
            ):
                by_rid[int(rid)].append((int(eid), ts))
        if not by_rid:
            return
        df: Counter[int] = Counter()
        pairs: Counter[tuple[int, int]] = Counter()
        pair_ts: dict[tuple[int, int], float | None] = {}
        for postings in by_rid.values():
            ts = postings[0][1]
            eids = sorted(e for e, _ in postings)
            df.update(eids)
            for i, a in enumerate(eids):
                for b in eids[i + 1 :]:
                    pairs[a, b] += 1
                    pair_ts[a, b] = _max_ts(pair_ts.get((a, b)), ts)
        gone = sorted(by_rid)
        for part in _chunks(gone):
            conn.execute(f"DELETE FROM graph_postings WHERE ns_id=? AND rid IN {_marks(len(part))}", (ns_id, *part))

        conn.executemany(
            "UPDATE graph_edges SET count = count - ? WHERE ns_id=? AND a=? AND b=?",
            [(n, ns_id, a, b) for (a, b), n in pairs.items()],
        )
        conn.execute("DELETE FROM graph_edges WHERE ns_id=? AND count <= 0", (ns_id,))
        for (a, b), ts in pair_ts.items():
            row = conn.execute(
                "SELECT last_ts FROM graph_edges WHERE ns_id=? AND a=? AND b=?", (ns_id, a, b)
            ).fetchone()
            if row is not None and row[0] is not None and ts is not None and ts >= row[0]:
                latest = conn.execute(
                    "SELECT max(p.ts) FROM graph_postings p JOIN graph_postings q"
                    " ON q.ns_id = p.ns_id AND q.eid = ? AND q.rid = p.rid WHERE p.ns_id=? AND p.eid=?",
                    (b, ns_id, a),
                ).fetchone()[0]
                conn.execute(
                    "UPDATE graph_edges SET last_ts=? WHERE ns_id=? AND a=? AND b=?", (latest, ns_id, a, b)
                )

        conn.executemany(
            "UPDATE graph_entities SET n_records = n_records - ? WHERE ns_id=? AND eid=?",
            [(n, ns_id, eid) for eid, n in df.items()],
        )
        orphans: list[int] = []
        for part in _chunks(sorted(df)):
            orphans += [int(r[0]) for r in conn.execute(
                f"SELECT eid FROM graph_entities WHERE ns_id=? AND eid IN {_marks(len(part))} AND n_records <= 0",
                (ns_id, *part))]
        for part in _chunks(orphans):
            clause = _marks(len(part))
            conn.execute(f"DELETE FROM graph_edges WHERE ns_id=? AND (a IN {clause} OR b IN {clause})",
                         (ns_id, *part, *part))
            conn.execute(f"DELETE FROM graph_postings WHERE ns_id=? AND eid IN {clause}", (ns_id, *part))
            conn.execute(f"DELETE FROM graph_entities WHERE ns_id=? AND eid IN {clause}", (ns_id, *part))
        max_ts = conn.execute("SELECT max(ts) FROM graph_postings WHERE ns_id=?", (ns_id,)).fetchone()[0]
        conn.execute(
            "UPDATE graph_stats SET n_records = max(n_records - ?, 0), max_ts=?, version = version + 1"
            " WHERE ns_id=?",
            (len(by_rid), max_ts, ns_id),
        )
        self.invalidate(ns_id)

    def drop_namespace(self, conn: sqlite3.Connection, ns_id: int) -> None:
        """Delete the whole graph of ``ns_id`` inside the caller's transaction.

        The ``graph_stats`` row stays (counters only, zeroed with a new version) so that other processes
        holding a cached copy notice the drop.
        """
        conn.execute("DELETE FROM graph_edges WHERE ns_id=?", (ns_id,))
        conn.execute("DELETE FROM graph_postings WHERE ns_id=?", (ns_id,))
        conn.execute("DELETE FROM graph_entities WHERE ns_id=?", (ns_id,))
        conn.execute(
            "UPDATE graph_stats SET n_records=0, max_ts=NULL, version = version + 1 WHERE ns_id=?", (ns_id,)
        )
        self.invalidate(ns_id)

    def invalidate(self, ns_id: int | None = None) -> None:
        """Forget the cached keys of ``ns_id`` (all namespaces if None); the next query reloads them."""
        with self._lock:
            if ns_id is None:
                self._cache.clear()
            else:
                self._cache.pop(ns_id, None)

    @staticmethod
    def _indexed(conn: sqlite3.Connection, ns_id: int, rids: Sequence[int]) -> list[int]:
        found: set[int] = set()
        for part in _chunks(rids):
            sql = f"SELECT DISTINCT rid FROM graph_postings WHERE ns_id=? AND rid IN {_marks(len(part))}"
            found.update(int(r[0]) for r in conn.execute(sql, (ns_id, *part)))
        return sorted(found)

    # ------------------------------------------------------------------------------------------ reads

    def record_count(self, conn: sqlite3.Connection, ns_id: int) -> int:
        """Number of records of ``ns_id`` that name at least one entity."""
        stats = _read_stats(conn, ns_id)
        return 0 if stats is None else stats.n_records

    def reference_time(self, conn: sqlite3.Connection, ns_id: int) -> float | None:
        """The newest record time of ``ns_id`` (what edge recency is measured from by default)."""
        stats = _read_stats(conn, ns_id)
        return None if stats is None else stats.max_ts

    def recency(self, last_ts: float | None, now: float | None) -> float:
        """``0.5 ** (age / half_life)``, 1.0 when either time is unknown or the edge is newer than ``now``."""
        if last_ts is None or now is None or last_ts >= now:
            return 1.0
        return float(0.5 ** ((now - last_ts) / self.half_life_s))

    def entities_in(self, conn: sqlite3.Connection, ns_id: int, text: str) -> list[tuple[int, str]]:
        """The known entities of ``ns_id`` that ``text`` names, as ``(eid, display name)`` in order of mention.

        A key matches as a run of whole tokens (case-insensitive, possessives ignored) or, when written in CJK
        characters (two or more), as a substring; :func:`extract_entities`' names of the text are looked up
        too. Overlapping matches: the longer wins.
        """
        if not text or not text.strip():
            return []
        cache = self._sync(conn, ns_id)
        if cache is None or not cache.by_key:
            return []
        by_key = cache.by_key
        toks = _tokens(text)
        hits: list[tuple[int, int, int]] = []  # (start, end, eid) in the normalised text
        for i in range(len(toks)):
            for n in range(1, min(cache.max_tokens, len(toks) - i) + 1):
                eid = by_key.get(" ".join(t for _, _, t in toks[i : i + n]))
                if eid is not None:
                    hits.append((toks[i][0], toks[i + n - 1][1], eid))
            start, _, tok = toks[i]
            if cache.max_cjk >= 2 and len(tok) > 2 and _CJK_RE.match(tok):
                for lo in range(len(tok) - 1):
                    for hi in range(lo + 2, min(len(tok), lo + cache.max_cjk) + 1):
                        if hi - lo == len(tok):
                            continue  # the whole token: matched above
                        eid = by_key.get(tok[lo:hi])
                        if eid is not None:
                            hits.append((start + lo, start + hi, eid))
        extracted = [by_key.get(entity_key(name)) for name in extract_entities(text)]
        hits.sort(key=lambda h: (h[0], h[0] - h[1]))
        order: list[int] = []
        covered_end = -1
        for start, end, eid in hits:
            if start < covered_end:
                continue
            covered_end = end
            order.append(eid)
        order.extend(e for e in extracted if e is not None)
        eids = list(dict.fromkeys(order))
        names = self.display_names(conn, ns_id, eids)
        return [(eid, names[eid]) for eid in eids if eid in names]

    def _sync(self, conn: sqlite3.Connection, ns_id: int) -> _KeyCache | None:
        """The key cache of ``ns_id``, brought up to date with the database."""
        stats = _read_stats(conn, ns_id)
        if stats is None:
            self.invalidate(ns_id)
            return None
        with self._lock:
            cache = self._cache.get(ns_id)
            if cache is not None and cache.version == stats.version and cache.last_eid >= stats.last_eid:
                return cache
            if cache is None or cache.version != stats.version:
                cache = _KeyCache(version=stats.version)
                rows = conn.execute("SELECT eid, key FROM graph_entities WHERE ns_id=?", (ns_id,))
            else:  # only appends since the last load: read the new entities
                rows = conn.execute(
                    "SELECT eid, key FROM graph_entities WHERE ns_id=? AND eid>?", (ns_id, cache.last_eid)
                )
            cache.load(rows)
            cache.last_eid = max(cache.last_eid, stats.last_eid)
            self._cache[ns_id] = cache
            return cache

    def known_keys(self, conn: sqlite3.Connection, ns_id: int) -> Collection[str]:
        """The normalised keys of every entity of ``ns_id`` (a read-only view of the cache)."""
        cache = self._sync(conn, ns_id)
        return () if cache is None else cache.by_key.keys()

    def entities_for(
        self, conn: sqlite3.Connection, ns_id: int, texts: Sequence[tuple[str, str | None]]
    ) -> list[list[str]]:
        """The entity names of each ``(text, speaker)`` of a batch, for :meth:`add` (:func:`record_entities`).

        The namespace's known entities, the batch's speakers and the names found earlier in the batch count as
        known, so a name that opens a sentence ("Marco is a chef.") is kept once it has been seen anywhere.
        """
        known = set(self.known_keys(conn, ns_id))
        known.update(s.strip().casefold() for _, s in texts if s and s.strip())
        out: list[list[str]] = []
        for text, speaker in texts:
            names = record_entities(text, speaker=speaker, known=known)
            known.update(n.casefold() for n in names)
            out.append(names)
        return out

    def display_names(self, conn: sqlite3.Connection, ns_id: int, eids: Sequence[int]) -> dict[int, str]:
        """eid -> display name, for the entities of ``ns_id`` among ``eids``."""
        return {eid: name for eid, (name, _) in self.entity_info(conn, ns_id, eids).items()}

    def entity_info(self, conn: sqlite3.Connection, ns_id: int, eids: Sequence[int]) -> dict[int, tuple[str, int]]:
        """eid -> (display name, number of records naming it), for the entities of ``ns_id`` among ``eids``."""
        out: dict[int, tuple[str, int]] = {}
        for part in _chunks(sorted({int(e) for e in eids})):
            for eid, name, n in conn.execute(
                f"SELECT eid, name, n_records FROM graph_entities WHERE ns_id=? AND eid IN {_marks(len(part))}",
                (ns_id, *part),
            ):
                out[int(eid)] = (name, int(n))
        return out

    def postings(
        self, conn: sqlite3.Connection, ns_id: int, eids: Sequence[int], *, limit: int | None = None
    ) -> dict[int, list[tuple[int, float | None]]]:
        """eid -> ``(rid, ts)`` of the records naming it, newest first (at most ``limit`` per entity)."""
        out: dict[int, list[tuple[int, float | None]]] = {}
        for eid in dict.fromkeys(int(e) for e in eids):
            rows = conn.execute(
                "SELECT rid, ts FROM graph_postings WHERE ns_id=? AND eid=? ORDER BY ts DESC, rid DESC LIMIT ?",
                (ns_id, eid, -1 if limit is None else int(limit)),
            )
            out[eid] = [(int(r), ts) for r, ts in rows]
        return out

    def neighbours(
        self,
        conn: sqlite3.Connection,
        ns_id: int,
        eids: Sequence[int],
        *,
        now: float | None = None,
        limit: int | None = None,
    ) -> dict[int, list[tuple[int, float]]]:
        """eid -> its neighbours ``(eid, weight)``, heaviest first (at most ``limit``), ties by eid.

        ``weight = count * recency(last_ts, now)``; ``now`` defaults to :meth:`reference_time`.
        """
        if now is None:
            now = self.reference_time(conn, ns_id)
        out: dict[int, list[tuple[int, float]]] = {}
        for eid in dict.fromkeys(int(e) for e in eids):
            rows = conn.execute(
                "SELECT b, count, last_ts FROM graph_edges WHERE ns_id=? AND a=?"
                " UNION ALL SELECT a, count, last_ts FROM graph_edges WHERE ns_id=? AND b=?",
                (ns_id, eid, ns_id, eid),
            ).fetchall()
            weighted = sorted(
                ((int(other), float(count) * self.recency(last_ts, now)) for other, count, last_ts in rows),
                key=lambda x: (-x[1], x[0]),
            )
            out[eid] = weighted if limit is None else weighted[:limit]
        return out

    def edge(self, conn: sqlite3.Connection, ns_id: int, a: int, b: int) -> tuple[int, float | None] | None:
        """``(count, last_ts)`` of the edge between entities ``a`` and ``b`` of ``ns_id``, or None."""
        lo, hi = (a, b) if a < b else (b, a)
        row = conn.execute(
            "SELECT count, last_ts FROM graph_edges WHERE ns_id=? AND a=? AND b=?", (ns_id, lo, hi)
        ).fetchone()
        return None if row is None else (int(row[0]), row[1])

    def find(self, conn: sqlite3.Connection, ns_id: int, name: str) -> int | None:
        """The eid of the entity of ``ns_id`` whose key equals ``name``'s, or None."""
        row = conn.execute(
            "SELECT eid FROM graph_entities WHERE ns_id=? AND key=?", (ns_id, entity_key(name))
        ).fetchone()
        return None if row is None else int(row[0])
