"""No input poisons a namespace (issue 22, section 3), the engine face: JSON values of a turn (metadata, tool calls,
attachments), search arguments and update() are refused at the door with a typed error naming the path, the value
and the fix, and nothing is written; a row an older version stored unchecked is repaired as it is read, so it can
never make a read fail."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from memory_ext import MemoryEngine, Turn
from memory_ext.config import EngineConfig
from memory_ext.errors import (
    ConfigError,
    InvalidArgumentError,
    InvalidNamespaceError,
    InvalidQueryError,
    InvalidTurnError,
    ValidationError,
)
from memory_ext.store.sqlite import DB_FILE
from memory_ext.validate import MAX_JSON_DEPTH, check_json, repair_json, repair_text, stored_json


def nested(depth: int, leaf: Any = 1) -> dict[str, Any]:
    """``{"a": {"a": ... leaf}}`` with ``depth`` objects, built without recursion."""
    value: Any = leaf
    for _ in range(depth):
        value = {"a": value}
    return value  # type: ignore[no-any-return]


def turn(**kw: Any) -> dict[str, Any]:
    return {"role": "user", "content": "I moved to Lisbon last spring", **kw}


def counts(engine: MemoryEngine) -> tuple[int, int]:
    stats = engine.stats()
    return stats.turns, stats.records


BAD_METADATA: list[tuple[str, Any, str]] = [  # (id, metadata, the field the error names)
    ("surrogate-value", {"k": "\ud800"}, "turns[0].metadata.k"),
    ("surrogate-deep-value", {"a": [{"b": "x\udfff"}]}, "turns[0].metadata.a[0].b"),
    ("surrogate-key", {"\ud800": 1}, "turns[0].metadata.<key>"),
    ("nul-key", {"k\x00": 1}, "turns[0].metadata.<key>"),
    ("nul-value", {"k": "a\x00b"}, "turns[0].metadata.k"),
    ("nan", {"k": float("nan")}, "turns[0].metadata.k"),
    ("inf-in-list", {"k": [1.0, float("-inf")]}, "turns[0].metadata.k[1]"),
    ("tuple-key", {"a": {(1, 2): "x"}}, "turns[0].metadata.a"),
    ("nested-300", nested(300), "turns[0].metadata.a"),
    ("nested-100000", nested(100_000), "turns[0].metadata.a"),
    ("deeper-than-the-limit", nested(33), "turns[0].metadata.a"),
    ("too-big", {"k": "x" * 70_000}, "turns[0].metadata"),
]


@pytest.mark.parametrize(("metadata", "field"), [(m, f) for _, m, f in BAD_METADATA],
                         ids=[i for i, _, _ in BAD_METADATA])
def test_bad_metadata_is_refused_and_nothing_is_written(engine: MemoryEngine, metadata: Any, field: str) -> None:
    engine.add_turns([turn(content="an earlier turn")], "ana")
    before = counts(engine)
    with pytest.raises(InvalidTurnError) as info:
        engine.add_turns([turn(content="fine"), turn(metadata=metadata)], "ana")
    err = info.value
    assert err.field.startswith(field.replace("turns[0]", "turns[1]"))
    assert err.fix and str(err).startswith(err.field)
    assert counts(engine) == before
    assert [t.content for t in engine.get_turns("ana")] == ["an earlier turn"]


def test_metadata_at_the_limits_is_stored_and_read_back(engine: MemoryEngine) -> None:
    deep = nested(32)  # 32 objects: the default limit (limits.max_metadata_depth)
    big = {"k": "x" * 60_000}
    engine.add_turns([turn(metadata=deep), turn(content="big metadata", metadata=big),
                      turn(content="paired surrogates are one character", metadata={"emoji": "😀"})], "ana")
    stored = engine.get_turns("ana")
    assert stored[0].metadata == deep and stored[1].metadata == big and stored[2].metadata == {"emoji": "😀"}


def test_the_caps_are_configurable_and_bounded(tmp_path: Path) -> None:
    config = {"limits": {"max_metadata_depth": 2, "max_metadata_bytes": 64}}
    with MemoryEngine.open(tmp_path / "s", embedder="hashing", config=config) as engine:
        engine.add_turns([turn(metadata={"a": {"b": 1}})], "ana")
        with pytest.raises(InvalidTurnError, match=r"nested deeper than 2 levels \(limits.max_metadata_depth\)"):
            engine.add_turns([turn(metadata={"a": {"b": {}}})], "ana")
        with pytest.raises(InvalidTurnError, match=r"limits\.max_metadata_bytes") as info:
            engine.add_turns([turn(metadata={"k": "x" * 100})], "ana")
        assert info.value.field == "turns[0].metadata"
        with pytest.raises(InvalidTurnError, match="max_metadata_depth"):  # tool calls nest no deeper either
            engine.add_turns([turn(tool_calls=[{"name": "f", "args": {"a": {"b": 1}}}])], "ana")
        assert engine.stats().turns == 1
    with pytest.raises(ConfigError, match="max_metadata_depth"):
        EngineConfig.from_dict({"limits": {"max_metadata_depth": MAX_JSON_DEPTH + 1}})


@pytest.mark.parametrize(("name", "value", "field"), [
    ("tool_calls", [{"name": "f", "args": {"q": "\ud800"}}], "turns[0].tool_calls[0].args.q"),
    ("tool_calls", [{"name": "f\x00"}], "turns[0].tool_calls[0].name"),
    ("attachments", [{"url": "\udfff"}], "turns[0].attachments[0].url"),
    ("tool_calls", [nested(200)], "turns[0].tool_calls[0]"),
    ("speaker", "An\ud800a", "turns[0].speaker"),
    ("external_id", "e\ud800", "turns[0].external_id"),
])
def test_other_turn_fields(engine: MemoryEngine, name: str, value: Any, field: str) -> None:
    with pytest.raises(InvalidTurnError) as info:
        engine.add_turns([turn(**{name: value})], "ana")
    assert info.value.field.startswith(field)
    assert engine.stats().turns == 0


def test_a_turn_object_cannot_hold_poison() -> None:
    with pytest.raises(InvalidTurnError) as info:
        Turn(role="user", content="hi", metadata={"k": "\ud800"})
    assert info.value.field == "metadata.k" and "lone surrogate" in info.value.fix


@pytest.mark.parametrize("namespace", [{"user_id": "a\ud800"}, {"user_id": "ana", "agent_id": "\udfff"},
                                       {"user_id": "ana", "session_id": "s\ud800"}])
def test_namespace_ids(engine: MemoryEngine, namespace: dict[str, str]) -> None:
    with pytest.raises(InvalidNamespaceError):
        engine.add_turns([turn()], namespace)
    with pytest.raises(InvalidNamespaceError):
        engine.search("Lisbon", namespace)


@pytest.mark.parametrize(("kwargs", "field"), [
    ({"query": "where \ud800"}, "query"),
    ({"query": "where\x00"}, "query"),
    ({"filters": {"speaker": "An\ud800a"}}, "filters.speaker"),
    ({"filters": {"session_id": ["s1", "\udfff"]}}, "filters.session_id[1]"),
    ({"filters": {"metadata": {"topic": "\ud800"}}}, "filters.metadata.topic"),
    ({"filters": {"metadata": {"\ud800": 1}}}, "filters.metadata.<key>"),
    ({"filters": {"metadata": nested(5000)}}, "filters.metadata"),
])
def test_search_arguments(engine: MemoryEngine, kwargs: dict[str, Any], field: str) -> None:
    engine.add_turns([turn(speaker="Ana", metadata={"topic": "moving"})], "ana")
    call = {"query": "Lisbon", **kwargs}
    with pytest.raises(InvalidQueryError) as info:
        engine.search(call.pop("query"), "ana", **call)
    assert info.value.field.startswith(field)


@pytest.mark.parametrize(("kwargs", "field"), [
    ({"content": "now \ud800"}, "content"),
    ({"metadata": {"k": "\ud800"}}, "metadata.k"),
    ({"metadata": {"k\x00": 1}}, "metadata.<key>"),
    ({"metadata": nested(300)}, "metadata.a"),
])
def test_update_is_refused_and_writes_nothing(engine: MemoryEngine, kwargs: dict[str, Any], field: str) -> None:
    added = engine.add_turns([turn(external_id="home")], "ana")
    before = counts(engine)
    with pytest.raises(InvalidTurnError) as info:
        engine.update("ana", "home", **kwargs)
    assert field in info.value.field
    assert counts(engine) == before
    assert [v.operation for v in engine.history("ana", "home")] == ["add"]
    assert engine.get_turns("ana")[0].id == added.turn_ids[0]


@pytest.mark.parametrize("offset", [10**30, 2**63, -1, 1.5, True])
def test_absurd_offsets(engine: MemoryEngine, offset: Any) -> None:
    with pytest.raises(InvalidArgumentError) as info:
        engine.get_turns("ana", offset=offset)
    assert info.value.field == "offset"
    with pytest.raises(InvalidArgumentError):
        engine.get_turns("ana", limit=offset)


# -- rows stored before the rules: repaired as they are read -----------------------------------------------------
POISON = {"k": "\ud800", "\udfff": "key", "n": float("nan"), "deep": nested(300), "ok": "fine 😀"}


def poison(store: Path, **columns: Any) -> None:
    """Overwrite the JSON columns of every stored turn, the way an older version, which checked nothing, wrote them
    (``json.dumps`` escapes lone surrogates and writes NaN)."""
    conn = sqlite3.connect(store / DB_FILE)
    with conn:
        for column, value in columns.items():
            conn.execute(f"UPDATE turns SET {column} = ?", (json.dumps(value),))
    conn.close()


def encodable(value: Any) -> bool:
    json.dumps(value, ensure_ascii=False, allow_nan=False).encode("utf-8")
    return True


def test_a_poisoned_row_is_repaired_on_read(tmp_path: Path) -> None:
    store = tmp_path / "store"
    with MemoryEngine.open(store, embedder="hashing") as engine:
        engine.add_turns([turn(metadata={"topic": "moving"}, external_id="home"),
                          {"role": "assistant", "content": "Lisbon is sunny."}], "ana", wait=True)
    poison(store, metadata=POISON, tool_calls=[{"name": "f\ud800", "args": nested(20)}])
    with MemoryEngine.open(store, embedder="hashing") as engine:
        turns = engine.get_turns("ana")
        meta = turns[0].metadata
        assert meta["k"] == "\ufffd" and meta["\ufffd"] == "key" and meta["n"] is None and meta["ok"] == "fine 😀"
        assert encodable(meta) and turns[0].model_dump_json()
        assert all(t.model_dump_json() for t in turns)
        result = engine.search("where did I move? Lisbon", "ana", k=2)
        assert result.items and all(encodable(i.metadata) for i in result.items)
        assert result.model_dump_json()
        hook = engine.hooks("ana")[0]
        assert engine.retrieve(hook.id, "ana").model_dump_json()
        assert [v.operation for v in engine.history("ana", "home")] == ["add"]
        # a new version carries the stored metadata on: still deeper than today's limit, so it must be replaced
        with pytest.raises(InvalidTurnError, match="max_metadata_depth"):
            engine.update("ana", "home", content="I moved to Porto")
        engine.update("ana", "home", content="I moved to Porto", metadata={"k": meta["k"]})
        assert engine.get_turns("ana")[-1].metadata == {"k": "\ufffd"}


# -- the helpers themselves -------------------------------------------------------------------------------------
def test_repair_keeps_clean_values_and_cuts_what_is_too_deep() -> None:
    clean = {"a": [1, 2.5, "x", None, True], "b": {"c": "😀"}}
    assert repair_json(clean) is clean
    assert repair_text("plain") == "plain"
    cut = repair_json(nested(MAX_JSON_DEPTH + 50))
    depth, item = 0, cut
    while isinstance(item, dict):
        depth, item = depth + 1, item["a"]
    assert depth == MAX_JSON_DEPTH and isinstance(item, str) and json.loads(item) == nested(50)
    assert stored_json("[" * 100_000 + "]" * 100_000, list) == []  # beyond json's recursion limit: empty
    assert stored_json("{}", dict) == {} and stored_json('{"a": "\\ud83d\\ude00"}', dict) == {"a": "😀"}


def test_check_json_refuses_cycles_without_recursing() -> None:
    loop: dict[str, Any] = {}
    loop["self"] = loop
    with pytest.raises(ValidationError, match="nested deeper"):
        check_json("metadata", loop)
