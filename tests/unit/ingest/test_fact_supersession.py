"""One claims extractor feeds the derived fact records and supersession: when a statement is superseded, the fact
record derived from it is superseded too (``superseded_by`` and ``valid_to``, like its turn), in English and Chinese.
"""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from memory_ext import MemoryEngine, Turn
from memory_ext.ingest.kinds import derive_kinds
from memory_ext.lifecycle.conflicts import extract_claims

MON = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
MOVED = MON + timedelta(days=30)


@pytest.fixture
def eng(tmp_path: Path):
    e = MemoryEngine.open(tmp_path / "store", embedder="hashing")
    yield e
    e.close()


def rows(path: Path, kind: str) -> dict[str, tuple[str, str | None, float | None]]:
    """text -> (id, superseded_by, valid_to) of the records of one kind."""
    conn = sqlite3.connect(f"file:{path / 'memory.sqlite3'}?mode=ro", uri=True)
    try:
        return {text: (rid, by, valid_to) for rid, text, by, valid_to in conn.execute(
            "SELECT id, text, superseded_by, valid_to FROM records WHERE kind=?", (kind,))}
    finally:
        conn.close()


@pytest.mark.parametrize(("old", "new", "old_fact", "query"), [
    ("I live in Oslo.", "I moved to Porto.", "Ana lives in Oslo", "Where does Ana live?"),
    ("我住在奥斯陆。", "我搬到了波尔图。", "Ana住在奥斯陆", "Ana住在哪里？"),
])
def test_a_move_supersedes_the_old_fact_record_with_its_turn(eng: MemoryEngine, old: str, new: str,
                                                              old_fact: str, query: str) -> None:
    eng.add_turns([Turn(role="user", speaker="Ana", content=old, timestamp=MON, session_id="s1"),
                   Turn(role="assistant", content="Noted!", timestamp=MON, session_id="s1")], "ana")
    eng.add_turns([Turn(role="user", speaker="Ana", content=new, timestamp=MOVED, session_id="s2")], "ana")

    turns, facts = rows(eng.path, "turn"), rows(eng.path, "fact")
    new_id = turns[new][0]
    assert turns[old][1:] == (new_id, pytest.approx(MOVED.timestamp()))  # the turn, as before
    assert facts[old_fact][1:] == (new_id, pytest.approx(MOVED.timestamp()))  # and now its fact record
    assert all(by is None for text, (_, by, _) in facts.items() if text != old_fact)

    now = [i.text for i in eng.search(query, "ana", k=3, now=MOVED + timedelta(days=1)).items]
    assert now[0] == new
    then = [i.text for i in eng.search(query, "ana", k=3, as_of=MON + timedelta(days=1)).items]
    assert old in then and new not in then


def test_a_restated_fact_supersedes_the_old_fact_but_not_itself(eng: MemoryEngine) -> None:
    eng.add_turns([Turn(role="user", content="I work at Google.", timestamp=MON)], "u")
    eng.add_turns([Turn(role="user", content="I work at Microsoft now.", timestamp=MOVED)], "u")
    facts = rows(eng.path, "fact")
    assert facts["the user works at Google"][1] == rows(eng.path, "turn")["I work at Microsoft now."][0]
    assert facts["the user works at Microsoft now"][1:] == (None, None)


def test_derived_facts_carry_the_claims_of_their_clause() -> None:
    turn = {"id": "t1", "role": "user", "speaker": "Ana", "ts": MON.timestamp(), "session_id": "s",
            "content": "I live in Oslo and I love sushi. Do you like sushi?"}
    got = {r.text: [(c.attribute, c.value, c.negated) for c in r.claims] for r in derive_kinds([turn], 0)}
    assert got == {"Ana lives in Oslo": [("residence", "oslo", False)],
                   "Ana loves sushi": [("opinion:sushi", "like", False)]}
    # the same extractor reads the turn for supersession
    assert {(c.attribute, c.value) for c in extract_claims(turn["content"], speaker="Ana")} == {
        ("residence", "oslo"), ("opinion:sushi", "like")}
