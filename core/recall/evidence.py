"""The evidence channel: the query's evidence nodes (entity, tag, entity x tag, day, month, event frame),
expanded to their records.

Query keys (all looked up in the namespace's :class:`~memory_ext.store.evidence.EvidenceSnapshot`; a key no
record has is dropped; no key left -> no hit):

* **entities** ``e:``: the known entity keys the query names (whole-token runs, CJK substrings, longer match
  wins, as the graph channel matches them), the names :func:`~memory_ext.text.entities.extract_entities` finds in
  it, and the route's ``speakers``;
* **tags** ``t:``: :func:`~memory_ext.text.entities.extract_tags` of the query without ``question``, plus the
  base verb forms a question uses ("Where did Ana *go*", "What does Ana *like*": see :func:`query_tags`);
* **entity x tag** ``et:`` for each pair;
* **days and months** ``d:`` / ``m:`` of ``request.route.time_filter`` when set (days only for a window of at
  most :data:`MAX_FILTER_DAYS` days, months for at most :data:`MAX_FILTER_MONTHS` months);
* **event frames** ``ev:`` for each entity x day of the filter.

Score of a record: ``sum over the matched nodes n it is posted under of weight(kind(n)) * log(1 + N / df(n))``
(``N`` = records with a node, ``df`` = records under the node): a rare node counts more than a common one, and a
compound node (``et``, ``ev``) more than its parts, both by its lower document frequency and by its kind weight
(:data:`KIND_WEIGHTS`). Every record reached is returned (``fill=0.0``), restricted to ``request.allowed``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import UTC, date, datetime, time, timedelta
from typing import TYPE_CHECKING, Any, Final

import numpy as np

from ..store.evidence import SKIP_TAGS, day_key, month_key, span_days, span_months
from ..store.graph import entity_key
from ..text.entities import extract_entities, extract_tags
from .base import Hits, RecallRequest

if TYPE_CHECKING:
    from ..store.evidence import EvidenceIndex, EvidenceSnapshot

__all__ = ["KIND_WEIGHTS", "MAX_FILTER_DAYS", "MAX_FILTER_MONTHS", "EvidenceRecaller", "query_keys", "query_tags"]

#: Weight of a node by kind: compound nodes count more than their parts, coarse tags and months less.
KIND_WEIGHTS: Final[dict[str, float]] = {"e": 1.0, "t": 0.5, "et": 1.5, "d": 1.0, "m": 0.5, "ev": 1.5}
MAX_FILTER_DAYS: Final = 31
MAX_FILTER_MONTHS: Final = 12

# base verb forms of questions ("did she go", "does he like") that extract_tags' past / present forms miss
_QUERY_TAG_RES: Final = (
    ("event", re.compile(r"\b(?:go|visit|attend|join|meet|travel|move|start|finish|graduate|marry|buy|adopt"
                         r"|celebrate|participate|take\s+part|run|win|host)\b")),
    ("preference", re.compile(r"\b(?:like|love|enjoy|prefer|hate|favou?rites?)\b")),
    ("emotion", re.compile(r"\b(?:feel|feeling)\b")),
    ("plan", re.compile(r"\b(?:plan|planning|intend)\b")),
)


def query_tags(query: str) -> list[str]:
    """The tags of a query: :func:`extract_tags` without ``question``, plus base verb forms of questions.

    >>> query_tags("What sport does Ana enjoy?"), query_tags("Where did Ana go last week?")
    (['preference'], ['event'])
    """
    tags = [t for t in extract_tags(query) if t not in SKIP_TAGS]
    low = query.lower()
    for tag, pattern in _QUERY_TAG_RES:
        if tag not in tags and pattern.search(low):
            tags.append(tag)
    return tags


def _utc(dt: datetime) -> datetime:
    return dt.astimezone(UTC) if dt.tzinfo is not None else dt


def _filter_dates(route: Any) -> tuple[list[date], list[date]]:
    """(days, months) of the route's time filter ``[start, end)``, each empty when the window is too long for it.

    An end inside a day (not at UTC midnight) includes that day.
    """
    window = getattr(route, "time_filter", None) if route is not None else None
    if not window or window[0] is None or window[1] is None:
        return [], []
    start_dt, end_dt = _utc(window[0]), _utc(window[1])
    start, end = start_dt.date(), end_dt.date()
    if end_dt.time() != time.min or end <= start:
        end = max(end, start) + timedelta(days=1)
    days = span_days(start, end) if (end - start).days <= MAX_FILTER_DAYS else []
    months = span_months(start, end)
    return days, months if len(months) <= MAX_FILTER_MONTHS else []


def _speakers(route: Any) -> list[str]:
    """Entity keys of the speakers the route is about (``EvidenceRoute.speakers``)."""
    out: list[str] = []
    for name in getattr(route, "speakers", ()) or ():
        key = entity_key(name) if isinstance(name, str) else None
        if key:
            out.append(key)
    return out


def query_keys(snap: EvidenceSnapshot, query: str, route: Any = None) -> list[str]:
    """The evidence keys of ``query`` (and its route's time filter and speakers) that ``snap`` has,
    in the order: entities, tags, entity x tag, days, months, event frames."""
    index = snap.index
    ents = snap.match_entities(query)
    ents += [k for k in (entity_key(n) for n in extract_entities(query)) if k]
    ents += _speakers(route)
    ents = [e for e in dict.fromkeys(ents) if "e:" + e in index]
    tags = [t for t in query_tags(query) if "t:" + t in index]
    days, months = _filter_dates(route)
    keys = [f"e:{e}" for e in ents]
    keys += [f"t:{t}" for t in tags]
    keys += [f"et:{e}|{t}" for e in ents for t in tags]
    keys += [day_key(d) for d in days]
    keys += [month_key(m) for m in months]
    keys += [f"ev:{e}|{d.isoformat()}" for e in ents for d in days]
    return [k for k in dict.fromkeys(keys) if k in index]


class EvidenceRecaller:
    """Evidence-node recall (see the module docstring).

    ``ctx`` is the engine's :class:`~memory_ext.recall.base.RecallContext`; it must carry an ``evidence_index``
    (an :class:`~memory_ext.store.evidence.EvidenceIndex`) and a ``store``.
    """

    channel = "evidence"

    def __init__(self, ctx: Any, *, kind_weights: dict[str, float] | None = None) -> None:
        index = getattr(ctx, "evidence_index", None)
        if index is None:
            raise ValueError("the evidence channel needs an evidence index (RecallContext.evidence_index)")
        self.ctx = ctx
        self.index: EvidenceIndex = index
        self.kind_weights = dict(KIND_WEIGHTS if kind_weights is None else {**KIND_WEIGHTS, **kind_weights})

    def keys(self, request: RecallRequest) -> list[str]:
        """The evidence keys ``request`` matches in its namespace (what :meth:`recall` expands; for explain)."""
        snap = self.index.snapshot(self.ctx.store.reader(), request.ns_id)
        return [] if snap is None else query_keys(snap, request.query, request.route)

    def recall(self, request: RecallRequest) -> Hits:
        """The records posted under the query's evidence nodes, scored by kind weight x idf (see module doc)."""
        if request.allowed is not None and len(request.allowed) == 0:
            return Hits.empty()
        snap = self.index.snapshot(self.ctx.store.reader(), request.ns_id)
        if snap is None or snap.size == 0:
            return Hits.empty()
        keys = query_keys(snap, request.query, request.route)
        if not keys:
            return Hits.empty()
        return self._score(snap, keys, request)

    def _score(self, snap: EvidenceSnapshot, keys: Sequence[str], request: RecallRequest) -> Hits:
        idxs = [snap.index[k] for k in keys]
        weights = np.array([self.kind_weights.get(k.split(":", 1)[0], 1.0) for k in keys], np.float64)
        gains = weights * snap.idf(idxs)
        recs, counts = snap.postings_many(idxs)
        per = np.repeat(gains, counts)
        if request.allowed is not None:
            keep = snap.record_index(request.allowed)[recs]
            recs, per = recs[keep], per[keep]
        if not len(recs):
            return Hits.empty()
        scores = np.bincount(recs, weights=per, minlength=len(snap.rids))
        hit = np.flatnonzero(np.bincount(recs, minlength=len(snap.rids)))
        return Hits(snap.rids[hit].astype(np.int64, copy=False), scores[hit], fill=0.0)
