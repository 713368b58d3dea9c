"""Supersession by statement frames, at write time: a later statement that gives a subject another value replaces
the earlier one, whatever words say the change.

The claims extractor (:mod:`memory_ext.ingest.claims`) supersedes what its rules read ("I moved to Berlin" after "I
live in Paris"). Most changes are said otherwise: "I finally replaced the old iPhone — I'm on a Pixel 8 now", "Mom's
flight got rebooked: she lands at Heathrow on the 13th", "卡罗拉卖掉了，上周提了一辆比亚迪海豹". They have the frame of
an update (:func:`memory_ext.rank.updates.restates`): the two statements share a subject — a named thing both speak
of, or a content word with no other subject named — and the later one holds a value (a time, a number, a name, a
thing counted by a Chinese measure word) of a type the earlier one holds, which the earlier does not.

Each user statement's frame is kept in the ``claims`` table, one row per anchor (subject ``~<anchor>``, attribute
:data:`FRAME_ATTRIBUTE`, the frame as JSON; empty for a statement without a value), so a new statement reads only the
earlier statements that share one of its anchors. An anchor :data:`SHARED_MAX` earlier statements of the same speaker
hold already (superseded or not, with a value or not) is the store's theme, not a subject ("gym" in a training
diary, "LGBTQ" in a conversation about activism): it links nothing. Both values must stand in a sentence that
shares the subject (:func:`replaces`). Only where an assistant speaks (:func:`in_conversation`) does a statement
replace another by its frame.

The older statement gets ``valid_to`` (the newer one's time) and ``superseded_by``; nothing is hidden from a default
search (it ranks below its successor, :func:`memory_ext.retrieval.fuse.promote_successors`), ``search(as_of=...)``
before the change and questions about the past find it.

>>> old = frame_row("My sister Lena lives in Porto.")
>>> replaces("Lena moved to Coimbra last month.", old)
True
>>> replaces("My sister Lena lives in Coimbra.", frame_row("I live in Porto."))
False
"""

from __future__ import annotations

import json
from dataclasses import replace as dc_replace
from typing import Final

from ..rank.updates import Frame, frame_of, stem, updates
from ..store.claims import count_claims, insert_claim, live_claims, supersede_record
from ..store.interface import Connection
from ..text.sentences import split_sentences

__all__ = ["FRAME_ATTRIBUTE", "SHARED_MAX", "frame_row", "in_conversation", "mark_conversation", "replaces",
           "supersede_frames"]

FRAME_ATTRIBUTE: Final = "frame"
"""The ``claims.attribute`` of frame rows (real claims have attributes such as ``residence``)."""
ANCHOR_PREFIX: Final = "~"
"""Frame rows' subjects are ``~<anchor>``: never a claim's subject."""
_CONVERSATION: Final = ("~", "~assistant", "conversation")
"""The (holder, subject, attribute) of the row that marks a namespace where an assistant speaks."""
SHARED_MAX: Final = 2
"""An anchor that this many earlier live statements of one speaker hold already is a theme, not a subject."""


def _sentence_frames(text: str) -> list[Frame]:
    """The frame of each sentence of a statement that holds a value, with the whole's subjects; none when the
    statement states nothing current. A value stands in the sentence that names its subject: "Hey Gina! I'm on the
    hunt for a spot for my dance studio. Oh, I've been to Paris yesterday!" says nothing of where the studio is."""
    whole = frame_of(text)
    if whole.subjects is None:
        return []
    parts = split_sentences(text)
    frames = [whole] if len(parts) <= 1 else [dc_replace(f, subjects=whole.subjects) for f in map(frame_of, parts)
                                              if f.subjects is not None]
    return [f for f in frames if any(f.values.values())]


def frame_row(text: str) -> str | None:
    """The frames of a statement as stored (JSON: its subjects, each sentence's anchors and values), or None when
    it states no current value (a question, a hypothetical, how things used to be, or no time, number, name or
    counted thing)."""
    frames = _sentence_frames(text)
    if not frames:
        return None
    return json.dumps({"s": sorted(frames[0].subjects or ()),
                       "f": [{"a": sorted(f.anchors), "v": {k: sorted(v) for k, v in f.values.items() if v}}
                             for f in frames]}, ensure_ascii=False)


def _frames(row: str) -> list[Frame]:
    data = json.loads(row)
    subjects = frozenset(data["s"])
    return [Frame(anchors=frozenset(f["a"]), subjects=subjects,
                  values={k: frozenset(f["v"].get(k, ())) for k in ("time", "number", "name", "object")})
            for f in data["f"]]


def replaces(newer: str, older: str | None, common: frozenset[str] = frozenset()) -> bool:
    """Whether the statement ``newer`` (its text) replaces the one of frame row ``older`` (``common``: stemmed
    anchors that link nothing): a sentence of one restates a sentence of the other with another value."""
    if older is None:
        return False
    olds = _frames(older)
    return any(updates(old, new, common) for new in _sentence_frames(newer) for old in olds)


def supersede_frames(conn: Connection, ns_id: int, holder: str, rid: int, record_id: str, text: str,
                     ts: float | None, *, replace: bool = True) -> int:
    """Record the frame of the statement ``text`` (record ``rid``/``record_id`` by ``holder`` at ``ts``) and,
    with ``replace`` (:func:`in_conversation`), supersede the earlier live statements of ``holder`` it replaces;
    returns how many it superseded."""
    whole = frame_of(text)
    if whole.subjects is None:
        return 0
    keys = sorted({stem(a) for a in whole.anchors})
    row = frame_row(text) or ""  # a statement without a value is counted (a theme's words), never replaced
    changed = _supersede(conn, ns_id, holder, rid, record_id, text, ts, keys) if replace and row else 0
    for key in keys:
        insert_claim(conn, ns_id, rid, holder, ANCHOR_PREFIX + key, FRAME_ATTRIBUTE, row, False, ts)
    return changed


def _supersede(conn: Connection, ns_id: int, holder: str, rid: int, record_id: str, text: str, ts: float | None,
               keys: list[str]) -> int:
    common: set[str] = set()
    candidates: dict[int, tuple[str, float | None]] = {}
    for key in keys:
        if count_claims(conn, ns_id, holder, ANCHOR_PREFIX + key, FRAME_ATTRIBUTE, rid) >= SHARED_MAX:
            common.add(key)  # superseded statements count: a diary's entries do not replace each other in turn
            continue
        for old_rid, value, _negated, old_ts in live_claims(conn, ns_id, holder, ANCHOR_PREFIX + key,
                                                            FRAME_ATTRIBUTE, rid):
            if value:
                candidates[int(old_rid)] = (str(value), old_ts)
    changed = 0
    for old_rid, (value, old_ts) in sorted(candidates.items()):
        if ts is not None and old_ts is not None and old_ts > ts:
            continue  # the stored statement is newer: this one was already out of date
        if replaces(text, value, frozenset(common)):
            supersede_record(conn, ns_id, old_rid, ts, record_id)
            changed += 1
    return changed


def mark_conversation(conn: Connection, ns_id: int, assistant_rid: int) -> None:
    """Mark namespace ``ns_id`` as a conversation with an assistant (``assistant_rid``: one of its turns)."""
    insert_claim(conn, ns_id, assistant_rid, *_CONVERSATION, "", False, None)


def in_conversation(conn: Connection, ns_id: int) -> bool:
    """Whether an assistant speaks in namespace ``ns_id``: only there do statements replace each other by their
    frames. Memories written one by one (MADial's) and talk between people (LoCoMo's) tell events, each dated; there
    only the claims extractor supersedes."""
    return count_claims(conn, ns_id, *_CONVERSATION, -1) > 0
