"""Evidence node keys of records: who, what kind, when (the write pipeline derives them once per record).

See :mod:`memory_ext.store.evidence` for what each key kind means and how the index stores them; this module
only computes them, from a record's text, speaker, time and its +-1 neighbours of the same session.

>>> node_keys("I love playing tennis.", speaker="Ana", ref_ts=1683554160.0)
['d:2023-05-08', 'e:ana', 'et:ana|preference', 'ev:ana|2023-05-08', 'm:2023-05', 't:preference']
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import Any, Final

from ..store.evidence import SKIP_TAGS, day_key, month_key, span_days, span_months
from ..text.entities import extract_tags
from ..text.entity_keys import entity_key, known_in, record_entities
from ..text.timeexpr import extract_times

__all__ = ["MAX_FRAME_DAYS", "MAX_FRAME_ENTITIES", "batch_entities", "node_keys", "window_keys"]

MIN_CONFIDENCE: Final = 0.5  # time expressions below it give no node
MAX_DAY_SPAN: Final = 7  # a resolved span of at most this many days gives its days
MAX_MONTH_SPAN: Final = 92  # ... of at most this many days its months
MAX_ENTITIES: Final = 12  # entity nodes per record
MAX_FRAME_ENTITIES: Final = 8  # entities per record in event frames (the record's first, then its neighbours')
MAX_FRAME_DAYS: Final = 4  # days per record in event frames (its own day first)
MAX_FRAME_SPAN: Final = 3  # a resolved span of at most this many days gives event-frame days





def _utc_date(dt: datetime) -> date:
    return (dt.astimezone(UTC) if dt.tzinfo is not None else dt).date()


def _time_nodes(text: str, reference: datetime) -> tuple[list[date], list[date], list[date]]:
    """(days, months, frame days) the time expressions of ``text`` resolve to (confidence >= 0.5), in order of
    mention; frame days come from spans of at most :data:`MAX_FRAME_SPAN` days (a day, "a few days ago")."""
    days: list[date] = []
    months: list[date] = []
    frame: list[date] = []
    for m in extract_times(text, reference):
        if m.confidence < MIN_CONFIDENCE:
            continue
        start, end = _utc_date(m.start), _utc_date(m.end)
        n = (end - start).days
        if n <= MAX_DAY_SPAN:
            got = span_days(start, end)
            days += got
            months += span_months(start, end)
            if n <= MAX_FRAME_SPAN:
                frame += got
        elif n <= MAX_MONTH_SPAN:
            months += span_months(start, end)
    return days, months, frame


def _entity_keys(names: Iterable[str], limit: int = MAX_ENTITIES) -> list[str]:
    keys = [k for k in dict.fromkeys(entity_key(n) for n in names) if k]
    return keys[:limit]


def _text_of(neighbour: Any) -> tuple[str, str | None]:
    """A neighbour given as a text, a ``(text, speaker)`` pair or a dict with ``text`` / ``speaker``."""
    if isinstance(neighbour, str):
        return neighbour, None
    if isinstance(neighbour, Mapping):
        return str(neighbour.get("text") or ""), neighbour.get("speaker")
    text, speaker = neighbour
    return str(text or ""), speaker


@dataclass(frozen=True)
class _Facets:
    """What one text contributes: entity keys, tags, own day, resolved days / months / event-frame days."""

    ents: list[str]
    tags: list[str]
    own: date | None
    days: list[date]
    months: list[date]
    frame_days: list[date]


def _facets(text: str, speaker: str | None, reference: datetime | None, entities: Sequence[str] | None,
            known: Collection[str], *, tags: bool = True) -> _Facets:
    names = record_entities(text, speaker=speaker, known=known_in(text, known)) if entities is None else entities
    tag_list = [t for t in extract_tags(text) if t not in SKIP_TAGS] if tags else []
    if reference is None:
        return _Facets(_entity_keys(names), tag_list, None, [], [], [])
    days, months, frame = _time_nodes(text, reference)
    return _Facets(_entity_keys(names), tag_list, reference.date(), days, months, frame)


def _reference(ref_ts: float | None) -> datetime | None:
    if ref_ts is None or not math.isfinite(float(ref_ts)):
        return None
    return datetime.fromtimestamp(float(ref_ts), UTC)


def _keys(f: _Facets, neighbours: Iterable[_Facets]) -> list[str]:
    keys: list[str] = [f"e:{e}" for e in f.ents]
    keys += [f"t:{t}" for t in f.tags]
    keys += [f"et:{e}|{t}" for e in f.ents for t in f.tags]
    if f.own is not None:
        keys += [day_key(d) for d in (f.own, *f.days)]
        keys += [month_key(d) for d in (f.own, *f.months)]
        frame_ents = list(f.ents)
        frame_days = [f.own, *f.frame_days]
        for nb in neighbours:
            frame_ents += nb.ents
            frame_days += nb.frame_days
        frame_ents = list(dict.fromkeys(frame_ents))[:MAX_FRAME_ENTITIES]
        frame_days = list(dict.fromkeys(frame_days))[:MAX_FRAME_DAYS]
        keys += [f"ev:{e}|{d.isoformat()}" for e in frame_ents for d in frame_days]
    return sorted(set(keys))


def node_keys(
    text: str,
    *,
    speaker: str | None = None,
    ref_ts: float | None = None,
    neighbours: Sequence[Any] = (),
    entities: Sequence[str] | None = None,
    known: Collection[str] = (),
) -> list[str]:
    """The evidence node keys of one record, sorted (see the module docstring for the kinds).

    ``entities`` are the record's entity names when the caller has them already (e.g. from
    :func:`batch_entities`); otherwise they are extracted with
    :func:`~memory_ext.text.entity_keys.record_entities` (``known``: entity keys already known in the namespace).
    ``neighbours``: the texts (or ``(text, speaker)`` pairs) of the record's +-1 neighbours of its session; their
    time expressions are resolved against the record's ``ref_ts``.

    >>> node_keys("我昨天去了杭州，特别喜欢西湖。", speaker="小红",
    ...           ref_ts=1683554160.0)  # doctest: +NORMALIZE_WHITESPACE
    ['d:2023-05-07', 'd:2023-05-08', 'e:小红', 'e:杭州', 'e:西湖', 'et:小红|event', 'et:小红|preference',
     'et:杭州|event', 'et:杭州|preference', 'et:西湖|event', 'et:西湖|preference', 'ev:小红|2023-05-07',
     'ev:小红|2023-05-08', 'ev:杭州|2023-05-07', 'ev:杭州|2023-05-08', 'ev:西湖|2023-05-07', 'ev:西湖|2023-05-08',
     'm:2023-05', 't:event', 't:preference']
    """
    reference = _reference(ref_ts)
    own = _facets(text or "", speaker, reference, entities, known)
    nbs = [_facets(t, s, reference, None, known, tags=False) for t, s in map(_text_of, neighbours) if t]
    return _keys(own, nbs)


def window_keys(items: Sequence[Mapping[str, Any]], known: Collection[str] = ()) -> list[list[str]]:
    """:func:`node_keys` of each item of a batch (mappings with ``text``, ``speaker``, ``ref_ts``,
    ``session_id`` and optionally ``neighbours`` and ``entities``).

    An item without a ``neighbours`` entry takes as neighbours the previous and the next item of the batch with
    the same ``session_id`` (their time expressions resolved against their own ``ref_ts``; each text is analysed
    once). The namespace's ``known`` keys, the batch's speakers and the names found earlier in the batch count as
    known (as :func:`batch_entities` does).
    """
    known_set = set(known)
    known_set.update(entity_key(str(it.get("speaker"))) for it in items if it.get("speaker"))
    facets: list[_Facets] = []
    for it in items:
        entities = it.get("entities")
        f = _facets(str(it.get("text") or ""), it.get("speaker"), _reference(it.get("ref_ts")), entities, known_set)
        if entities is None:
            known_set.update(f.ents)
        facets.append(f)
    by_session: dict[Any, list[int]] = defaultdict(list)
    for i, it in enumerate(items):
        by_session[it.get("session_id")].append(i)
    batch_nb: dict[int, list[int]] = {}
    for idxs in by_session.values():
        for j, i in enumerate(idxs):
            batch_nb[i] = [idxs[k] for k in (j - 1, j + 1) if 0 <= k < len(idxs)]
    out: list[list[str]] = []
    for i, it in enumerate(items):
        nb = it.get("neighbours")
        if nb is None:
            nbs = [facets[k] for k in batch_nb.get(i, [])]
        else:
            reference = _reference(it.get("ref_ts"))
            nbs = [_facets(t, s, reference, None, known_set, tags=False) for t, s in map(_text_of, nb) if t]
        out.append(_keys(facets[i], nbs))
    return out


def batch_entities(texts: Sequence[tuple[str, str | None]], known: Collection[str] = ()) -> list[list[str]]:
    """The entity names of each ``(text, speaker)`` of a batch (:func:`record_entities`).

    ``known`` (the namespace's entity keys), the batch's speakers and the names found earlier in the batch count
    as known, so a name that opens a sentence ("Marco is a chef.") is kept once it has been seen anywhere.

    >>> batch_entities([("I met Marco.", "Ana"), ("Marco is a chef.", "Ana")])
    [['Ana', 'Marco'], ['Ana', 'Marco']]
    """
    known_set = set(known)
    known_set.update(s.strip().casefold() for _, s in texts if s and s.strip())
    out: list[list[str]] = []
    for text, speaker in texts:
        names = record_entities(text, speaker=speaker, known=known_set)
        known_set.update(n.casefold() for n in names)
        out.append(names)
    return out
