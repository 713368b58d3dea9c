"""Conformance, export and import: a store exported as JSON lines and imported into a SQLite or a PostgreSQL store
answers the same — search finds the same memories with the same ids and scores (as the source after a reindex:
an import derives every index again), ``history`` shows the same versions,
``render_prompt`` the same files, ``retrieve`` the same ``pre_compress`` archive — and importing the file again
adds nothing; a bad line names its number and writes nothing. mem0's ``get_all`` output imports in one call.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from memory_ext import MemoryEngine, Turn
from memory_ext.errors import InvalidImportError
from tests.conftest import RULES_START, StoreTarget, rules_turns
from tests.postgres.conformance_kit import assert_same_ranking, table_counts

pytestmark = pytest.mark.postgres

QUERIES = ["What is my Nordea card?", "Who flies to Lisbon?", "What is my locker code?", "passport number"]


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str], dict[str, Any]]:
    """A SQLite store with versions, a delete, a pre_compress archive and a file with a set importance, its export
    as text lines, and what it answers."""
    path = tmp_path_factory.mktemp("source") / "store"
    with MemoryEngine.open(path, embedder="hashing") as engine:
        engine.add_turns(rules_turns(), "maya")
        engine.add_turns([Turn(role="user", content="My locker code is zebra-31.", external_id="locker",
                               session_id="gym", timestamp=RULES_START + timedelta(days=2))], "maya")
        engine.update("maya", "locker", content="My locker code is lynx-77.")
        engine.delete("maya", ["rules:6"])
        hook = engine.pre_compress("maya", "User: remember the Lisbon hotel is Casa Azul.\nAssistant: Noted.",
                                   task_state={"goal": "travel paperwork"})
        engine.set_importance(engine.hooks("maya")[0].id, 90, "maya")
        engine.add_turns([Turn(role="user", content="Ben's own note about the marathon.")], "ben")
        engine.reindex()  # an import derives every index again: it ranks as the source does after a reindex
        answers = {
            "search": {q: engine.search(q, "maya", k=4, now=datetime(2026, 3, 5, tzinfo=UTC)) for q in QUERIES},
            "memories": [m.model_dump() for m in engine.list_memories("maya", limit=100).items],
            "history": {m.id: [v.model_dump() for v in engine.history("maya", m.id)]
                        for m in engine.list_memories("maya", limit=100).items} | {
                "rules:6": [v.model_dump() for v in engine.history("maya", "rules:6")]},
            "prompt": engine.render_prompt("maya"),
            "archive": engine.retrieve(hook, "maya").text,
            "hook": hook,
            "as_of": engine.search("What is my locker code?", "maya", k=2,
                                   as_of=RULES_START + timedelta(days=3)).items[0].text,
        }
        lines = [json.dumps(line) for line in engine.export()]
    return path, lines, answers


@pytest.fixture
def imported(store_target: StoreTarget, exported: tuple[Path, list[str], dict[str, Any]]) -> Iterator[MemoryEngine]:
    engine = store_target.open()
    try:
        engine.import_records(exported[1], wait=True)
        yield engine
    finally:
        engine.close()


def test_the_export_holds_every_kind_of_line(exported: tuple[Path, list[str], dict[str, Any]]) -> None:
    lines = [json.loads(line) for line in exported[1]]
    assert lines[0]["format"] == "memory-ext" and lines[0]["embedder_id"]
    kinds = {line["type"] for line in lines}
    assert kinds == {"header", "namespace", "turn", "history", "file"}
    assert {(line["user_id"]) for line in lines if line["type"] == "namespace"} == {"maya", "ben"}
    replaced = [line for line in lines if line["type"] == "turn" and line["replaced"]]
    assert [line["content"] for line in replaced] == ["My locker code is zebra-31."]
    assert not any("Lisbon flight on Friday leaves at nine" in line for line in exported[1]), "deleted is gone"


def test_an_imported_store_answers_the_same(imported: MemoryEngine,
                                            exported: tuple[Path, list[str], dict[str, Any]]) -> None:
    answers = exported[2]
    for query, before in answers["search"].items():
        after = imported.search(query, "maya", k=4, now=datetime(2026, 3, 5, tzinfo=UTC))
        assert [i.id for i in after.items] == [i.id for i in before.items], query
        assert_same_ranking(before, after, what=query)
        assert after.context == before.context
    assert [m.model_dump() for m in imported.list_memories("maya", limit=100).items] == answers["memories"]
    for memory_id, versions in answers["history"].items():
        assert [v.model_dump() for v in imported.history("maya", memory_id)] == versions, memory_id
    assert imported.render_prompt("maya") == answers["prompt"]
    assert imported.retrieve(answers["hook"], "maya").text == answers["archive"]
    assert imported.search("What is my locker code?", "maya", k=2,
                           as_of=RULES_START + timedelta(days=3)).items[0].text == answers["as_of"]
    assert [m.content for m in imported.list_memories("ben").items] == ["Ben's own note about the marathon."]


def test_importing_the_same_file_again_adds_nothing(imported: MemoryEngine,
                                                    exported: tuple[Path, list[str], dict[str, Any]]) -> None:
    before = table_counts(imported)
    again = imported.import_records(exported[1], wait=True)
    assert (again.turns, again.files, again.history) == (0, 0, 0)
    assert again.skipped_turns == sum(1 for line in exported[1] if '"type": "turn"' in line)
    assert table_counts(imported) == before


@pytest.mark.parametrize(("line", "change", "field"), [
    (3, lambda d: "not json {", "line"),
    (3, lambda d: {**d, "role": "robot"}, "role"),
    (4, lambda d: {**d, "metadata": {"k": "a\x00b"}}, "metadata"),
    (1, lambda d: {**d, "format": "other"}, "format"),
    (2, lambda d: {**d, "type": "mystery"}, "type"),
])
def test_a_bad_line_names_its_number_and_nothing_is_written(store_target: StoreTarget,
                                                            exported: tuple[Path, list[str], dict[str, Any]],
                                                            line: int, change: Any, field: str) -> None:
    lines = list(exported[1])
    changed = change(json.loads(lines[line - 1]))
    lines[line - 1] = changed if isinstance(changed, str) else json.dumps(changed)
    with store_target.open() as engine:
        with pytest.raises(InvalidImportError) as err:
            engine.import_records(lines)
        assert err.value.line == line and field in err.value.field and f"line {line}" in str(err.value)
        assert engine.stats().turns == 0 and engine.namespaces() == []


MEM0_GET_ALL = {"results": [
    # mem0 (OSS) Memory.get_all: id, memory, hash, metadata, created_at, updated_at, user_id, optional agent/run ids
    {"id": "5f9b2f2e-2b67-4f4f-9a30-1c8b1b7d2a11", "memory": "Is allergic to shellfish",
     "hash": "0d4c5ab2e2b1f4f0b0a1e4f0e3c2b1a9", "metadata": {"source": "chat"},
     "created_at": "2024-07-26T10:29:36.630547-07:00", "updated_at": None, "user_id": "alex"},
    {"id": "a3c1e4d2-7f1b-4f2e-8d3c-9b8a7f6e5d4c", "memory": "Prefers window seats on long flights",
     "hash": "9f8e7d6c5b4a39281706f5e4d3c2b1a0", "metadata": None,
     "created_at": "2024-07-26T10:31:02.118903-07:00", "updated_at": "2024-08-01T09:12:44.000001-07:00",
     "user_id": "alex", "agent_id": "travel-agent", "run_id": "trip-2024"},
]}


def test_mem0_get_all_output_imports_in_one_call(store_target: StoreTarget, tmp_path: Path) -> None:
    with store_target.open() as engine:
        report = engine.import_records(MEM0_GET_ALL, format="mem0", wait=True)
        assert (report.namespaces, report.turns) == (2, 2)
        mine = engine.list_memories("alex").items
        assert [(m.id, m.content, m.metadata["source"]) for m in mine] == [
            ("5f9b2f2e-2b67-4f4f-9a30-1c8b1b7d2a11", "Is allergic to shellfish", "chat")]
        assert mine[0].timestamp == datetime(2024, 7, 26, 17, 29, 36, 630547, tzinfo=UTC)
        assert mine[0].metadata["mem0"]["hash"] == "0d4c5ab2e2b1f4f0b0a1e4f0e3c2b1a9"
        from memory_ext import Namespace

        agent = engine.list_memories(Namespace("alex", "travel-agent")).items
        assert agent[0].session_id == "trip-2024"
        assert agent[0].metadata["mem0"]["updated_at"] == "2024-08-01T09:12:44.000001-07:00"
        assert engine.search("what can't alex eat?", "alex", k=1).items[0].text == "Is allergic to shellfish"
        again = engine.import_records(MEM0_GET_ALL["results"], format="mem0")  # a bare list works too
        assert (again.turns, again.skipped_turns) == (0, 2)
        with pytest.raises(InvalidImportError) as err:
            engine.import_records([{"id": "x", "memory": "no owner"}], format="mem0")
        assert err.value.line == 1 and "user" in err.value.fix


def test_the_langgraph_store_items_travel_too(store_target: StoreTarget, tmp_path: Path) -> None:
    pytest.importorskip("langgraph")
    from langchain_memory_ext import MemoryStore

    with MemoryEngine.open(tmp_path / "source", embedder="hashing") as source:
        store = MemoryStore(engine=source, user_id="maya")
        store.put(("users", "maya", "prefs"), "food", {"text": "Maya is allergic to shellfish", "level": 3})
        store.put(("users", "maya", "prefs"), "seat", {"text": "Maya likes aisle seats"}, index=False)
        store.put(("users", "maya", "prefs"), "food", {"text": "Maya is allergic to shellfish and peanuts"})
        lines = list(source.export())
    assert [line["key"] for line in lines if line["type"] == "item"] == ["food", "seat"]
    with store_target.open() as target:
        report = target.import_records(lines, wait=True)
        assert report.items == 2
        copy = MemoryStore(engine=target, user_id="maya")
        food = copy.get(("users", "maya", "prefs"), "food")
        assert food is not None and food.value == {"text": "Maya is allergic to shellfish and peanuts"}
        assert copy.get(("users", "maya", "prefs"), "seat") is not None
        hits = copy.search(("users", "maya"), query="what is Maya allergic to?", limit=1)
        assert [h.key for h in hits] == ["food"]
        assert [v.operation for v in target.history("maya", "food")] == ["add", "update"]
        assert target.import_records(lines).items == 0
