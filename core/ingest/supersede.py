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
import re
from dataclasses import dataclass
from dataclasses import replace as dc_replace
from typing import Final

from ..rank.updates import Frame, _new_object, _same_tail, frame_of, stem, updates, value_spans
from ..store.claims import count_claims, insert_claim, live_claims, supersede_record
from ..store.interface import Connection
from ..text.sentences import sentences
from .claim_words import PEOPLE
from .claims import clause_subjects

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


@dataclass(frozen=True)
class _Sentence:
    """One sentence of a statement as supersession reads it: its frame (anchors, values, its own subjects), the
    names its subjects are given, and its typed values (:func:`memory_ext.rank.updates.value_spans`)."""

    frame: Frame
    names: frozenset[str]
    values: tuple[tuple[str, str], ...]
    units: frozenset[str] = frozenset()
    """Stemmed words that say what a number counts ("150 euros", "20 minutes"): they link no two statements."""
    text: str = ""


def _sentences(text: str) -> list[_Sentence]:
    """The sentences of a statement that state a value; none when it states nothing current. Each has its own
    subjects (a sentence that names none, "she is vegetarian", has the one before's). A value stands in the
    sentence that names its subject: "Hey Gina! I'm on the hunt for a spot for my dance studio. Oh, I've been to
    Paris yesterday!" says nothing of where the studio is."""
    if frame_of(text).subjects is None:
        return []
    out: list[_Sentence] = []
    previous: frozenset[str] = frozenset()
    for part in (s.text.strip() for s in sentences(text, merge=True, abbreviations=True)):
        if not part:
            continue
        frame = frame_of(part)
        if frame.subjects is None:
            continue
        subjects = frame.subjects or previous
        previous = subjects
        if not any(frame.values.values()):
            continue
        names = frozenset(n for _, _, _, n in clause_subjects(part) if n)
        out.append(_Sentence(dc_replace(frame, subjects=subjects), names,
                             tuple((v.kind, v.value) for v in value_spans(part)), _units(part), part))
    return out


_UNIT = re.compile(r"\d[\d,.]*\s*([a-z]{3,})\b")


def _units(sentence: str) -> frozenset[str]:
    return frozenset(stem(m.group(1)) for m in _UNIT.finditer(sentence.casefold()))


def frame_row(text: str) -> str | None:
    """The frames of a statement as stored (JSON: each sentence's anchors, values, subjects, their names and
    typed values), or None when it states no current value (a question, a hypothetical, how things used to be, or
    no time, number, name or counted thing)."""
    parts = _sentences(text)
    if not parts:
        return None
    return json.dumps({"f": [{"a": sorted(p.frame.anchors),
                              "v": {k: sorted(v) for k, v in p.frame.values.items() if v},
                              "s": sorted(p.frame.subjects or ()), "n": sorted(p.names),
                              "t": [list(v) for v in p.values], "u": sorted(p.units)} for p in parts]},
                      ensure_ascii=False)


def _stored(row: str) -> list[_Sentence]:
    data = json.loads(row)
    return [_Sentence(Frame(anchors=frozenset(f["a"]), subjects=frozenset(f["s"]),
                            values={k: frozenset(f["v"].get(k, ())) for k in ("time", "number", "name", "object")}),
                      frozenset(f["n"]), tuple((k, v) for k, v in f["t"]), frozenset(f.get("u", ())))
            for f in data["f"] if "t" in f]  # rows of an earlier version: read as stating nothing


def _agrees(subject: str | None, name: str | None, anchors: frozenset[str], old: _Sentence) -> bool:
    """Whether a clause whose subject is ``subject`` (None: unnamed; ``name``: its given name; ``anchors``: its
    sentence's) speaks of the subject of the sentence ``old``: the same subject, "Mom" and "my mom", a name and the
    one "my sister Lena" gives, a name acting on the named subject; "I" and "my phone" only when the other
    sentence speaks of a phone ("My flight to Lisbon is TP 433" is not about "I'm going to a conference in
    Lisbon")."""
    olds = old.frame.subjects or frozenset()
    if subject is None or not olds:
        return True
    owner, _, thing = subject.partition(":")
    if not thing and owner != "self" and owner != "assistant" and (
            old.names | {s for s in olds if not s.startswith("self") and s != "assistant"}) & anchors:
        return True  # someone else acts on the one it was about: "Mrs. Hall moved Emma's lessons to Thursdays"
    for other in olds:
        if subject == other or (name is not None and name == other) or subject in old.names:
            return True
        if _same_one(subject, other):
            return True
        if _owned(subject, other, old, anchors) or _owned(other, subject, old, anchors, new_side=False):
            return True
    return False


def _same_one(a: str, b: str) -> bool:
    """"Mom" and "my mom" (mom, self:mom), 我妈 and 我妈妈; not "Leo's coach" and "my coach"."""
    if "self" in (a, b):
        return False
    owner_a, owner_b = a.rpartition(":")[0], b.rpartition(":")[0]
    return (not owner_a or not owner_b or owner_a == owner_b) and _same_tail(a, b)


def _owned(whose: str, owner: str, old: _Sentence, anchors: frozenset[str], *, new_side: bool = True) -> bool:
    """``whose`` is the thing of ``owner`` ("my phone", "Leo's lessons": self:phone, leo:lessons) that the other
    sentence speaks of: the thing is no person and the sentence of ``owner`` names it."""
    first, _, thing = whose.partition(":")
    if not thing or thing in PEOPLE or not (first == owner or _same_one(first, owner) or first in old.names):
        return False
    words = old.frame.anchors if new_side else anchors  # the owner's sentence must speak of the thing
    return stem(thing) in {stem(w) for w in words}


def _changes(new: str, old: _Sentence) -> bool:
    """Whether the sentence ``new`` gives another value of a type ``old`` holds, in a clause about the same subject
    that does not also restate an old value of that type: "…, I'm now flying on March 4" changes "flying to Tokyo
    on March 3"; "My hotel … booked from March 3 to March 10" adds to it (March 3 stands in the clause)."""
    olds: dict[str, set[str]] = {}
    for kind, value in old.values:
        olds.setdefault(kind, set()).add(value)
    every = {v for vs in olds.values() for v in vs}
    old_words = {stem(w) for w in old.frame.anchors}
    spans = value_spans(new)
    anchors = frame_of(new).anchors
    clauses = clause_subjects(new)
    for i, (start, _clause, subject, name) in enumerate(clauses):
        end = clauses[i + 1][0] if i + 1 < len(clauses) else len(new)
        here = [v for v in spans if start <= v.start < end]
        if not here or not _agrees(subject, name, anchors, old):
            continue
        restated = {v.kind for v in here if v.value in olds.get(v.kind, ())}
        for v in here:
            if v.kind not in olds or v.kind in restated or v.value in every:
                continue
            if v.kind == "name" and stem(v.value) in old_words:
                continue  # a word the earlier statement says: not a new name
            if v.kind == "object" and not _new_object(v.value, old.frame):
                continue
            return True
    return False


def replaces(newer: str, older: str | None, common: frozenset[str] = frozenset()) -> bool:
    """Whether the statement ``newer`` (its text) replaces the one of frame row ``older`` (``common``: stemmed
    anchors that link nothing): a sentence of one restates a sentence of the other (:func:`updates`, through a
    word that is no unit: "350 euros" says nothing of "a budget of 2000 euros") and changes one of its values
    (:func:`_changes`)."""
    if older is None:
        return False
    olds = _stored(older)
    for part in _sentences(newer):
        words = {stem(w) for w in part.frame.anchors} - part.units - common
        if any(words & {stem(w) for w in old.frame.anchors} - old.units and updates(old.frame, part.frame, common)
               and _changes(part.text, old) for old in olds):
            return True
    return False


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
