"""Bad input, table-driven (issue 14, "bad input"; the probe's 145 inputs reconstructed, and more).

Every row is one call with one wrong argument. Each asserts that the call raises a ``memory_ext.errors`` type,
that the error names the field, and that nothing was written: the truth store's row counts and the store
directory's file listing are the same before and after. Failed opens must not create a directory at all.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from memory_ext import MemoryEngine, Turn
from memory_ext.errors import MemoryExtError
from tests.fault.faultkit import file_listing, row_counts

Call = Callable[[MemoryEngine], Any]
CASES: list[tuple[str, Call, str]] = []  # (id, call, the field the error must name)
LONG = "secret words " * 20_000  # over limits.max_content_chars


def case(name: str, field: str) -> Callable[[Call], Call]:
    def register(fn: Call) -> Call:
        CASES.append((name, fn, field))
        return fn
    return register


def _bind(fn: Callable[[MemoryEngine, Any], Any], value: Any) -> Call:
    """The call ``fn(engine, value)`` with the bad value bound now (not when the loop variable moved on)."""
    return lambda e: fn(e, value)


def add(turn: Any, ns: Any = "ana") -> Call:
    return lambda e: e.add_turns([turn], ns)


def turn(**kw: Any) -> dict[str, Any]:
    return {"role": "user", "content": "I moved to Lisbon last spring", **kw}


# -- add_turns: the batch itself ---------------------------------------------------------------------------------
for i, bad in enumerate([None, 1, 2.5, True, "text", b"bytes", turn(), Turn(role="user", content="x"),
                         object()]):
    CASES.append((f"turns-{i}-{type(bad).__name__}", _bind(lambda e, b: e.add_turns(b, "ana"), bad), "turns"))
for i, bad in enumerate([None, 1, "a turn", b"bytes", [turn()], (1, 2), {}, {"content": "x"}, {"role": "user"}]):
    CASES.append((f"turn-item-{i}", add(bad), "turns[0]"))
CASES.append(("duplicate-ids", lambda e: e.add_turns([turn(id="t1"), turn(id="t1")], "ana"), "turns[].id"))
CASES.append(("too-many-turns", lambda e: e.add_turns([turn()] * (e.config.limits.max_batch_turns + 1), "ana"),
              "turns"))
# -- add_turns: fields of one turn -------------------------------------------------------------------------------
for i, bad in enumerate(["robot", "", "  ", None, 1, "USERS", "human", b"user", ["user"]]):
    CASES.append((f"role-{i}", add(turn(role=bad)), "role"))
for i, bad in enumerate([None, 1, 2.5, "", "   ", "\n\t", "a\x00b", "\x00", "a\ud800b", "\udfff", LONG, b"bytes",
                         ["list"], {"text": "x"}]):
    CASES.append((f"content-{i}", add(turn(content=bad)), "content"))
for i, bad in enumerate([1e20, -1e20, float("nan"), float("inf"), -float("inf"), "not a date", "2020-13-01",
                         "2020-02-30", datetime.max, datetime.min, datetime(9999, 12, 31, tzinfo=UTC), [], {},
                         "99999-01-01", 10**30]):
    CASES.append((f"timestamp-{i}", add(turn(timestamp=bad)), "timestamp"))
for i, bad in enumerate([1, 2.5, ["Ana"], "a\x00", "An\ud800a"]):
    CASES.append((f"speaker-{i}", add(turn(speaker=bad)), "speaker"))
for i, bad in enumerate([1, ["x"], "e\x00", "\udfff"]):
    CASES.append((f"external_id-{i}", add(turn(external_id=bad)), "external_id"))
for i, bad in enumerate(["", "   ", "a\x00", "s\ud800", "x" * 300, 5, "a\nb", "\u200bzero"]):
    CASES.append((f"session_id-{i}", add(turn(session_id=bad)), "session_id"))
for i, bad in enumerate(["calls", 5, [1, 2], {"a": 1}]):
    CASES.append((f"tool_calls-{i}", add(turn(tool_calls=bad)), "turns[0]"))
for i, bad in enumerate(["meta", 5, [1]]):
    CASES.append((f"metadata-{i}", add(turn(metadata=bad)), "turns[0]"))
# -- namespaces --------------------------------------------------------------------------------------------------
for i, bad in enumerate(["", " ", None, 1, "a\x00", "a\ud800", "x" * 257, {"user": "x"},
                         {"user_id": "a", "foo": 1}, b"ana", ["ana"], "a\nb", "\u202eana", {"user_id": ""}]):
    CASES.append((f"namespace-{i}", add(turn(), bad), "namespace" if not isinstance(bad, str) else "user_id"))
CASES.append(("namespace-agent", add(turn(), {"user_id": "ana", "agent_id": "a\x00"}), "agent_id"))
CASES.append(("namespace-session", add(turn(), {"user_id": "ana", "session_id": ""}), "session_id"))
# -- search ------------------------------------------------------------------------------------------------------
for i, bad in enumerate(["", "   ", None, 1, b"query", "x" * 20_001, ["q"]]):
    CASES.append((f"query-{i}", _bind(lambda e, b: e.search(b, "ana"), bad), "query"))
for i, bad in enumerate([0, -1, 1.5, "5", True, 1_001, None, float("nan")]):
    CASES.append((f"k-{i}", _bind(lambda e, b: e.search("Lisbon", "ana", k=b), bad), "k"))
for i, (bad, field) in enumerate([
        ("x", "filters"), ([], "filters"), ({"foo": 1}, "filters.foo"), ({"role": "robot"}, "filters.role"),
        ({"role": ["user", "robot"]}, "filters.role"), ({"kinds": ["facts"]}, "filters.kinds"),
        ({"kinds": "facts"}, "filters.kinds"), ({"session_id": ""}, "filters.session_id"),
        ({"session_id": 1}, "filters.session_id"), ({"since": "bad"}, "filters.since"),
        ({"until": 1e20}, "filters.until"), ({"speaker": []}, "filters.speaker"), ({"kinds": []}, "filters.kinds"),
        ({"role": "Robot"}, "filters.role"), ({"kinds": ["turn", "windows"]}, "filters.kinds"),
        ({"since": float("nan")}, "filters.since")]):
    CASES.append((f"filters-{i}", _bind(lambda e, b: e.search("Lisbon", "ana", filters=b), bad), field))
for i, bad in enumerate([1e20, -1e20, "bad", float("nan"), [], datetime.max]):
    CASES.append((f"now-{i}", _bind(lambda e, b: e.search("Lisbon", "ana", now=b), bad), "now"))
for i, bad in enumerate([1e20, "x", float("inf"), {}]):
    CASES.append((f"as_of-{i}", _bind(lambda e, b: e.search("Lisbon", "ana", as_of=b), bad), "as_of"))
for i, bad in enumerate(["x", {"foo": 1}, 5]):
    CASES.append((f"action_state-{i}", _bind(lambda e, b: e.search("Lisbon", "ana", action_state=b), bad),
                  "action_state"))
# -- forget ------------------------------------------------------------------------------------------------------
for i, bad in enumerate([[], [""], [1], ["no-such-record"], 5]):
    CASES.append((f"forget-record_ids-{i}", _bind(lambda e, b: e.forget("ana", record_ids=b), bad), "record_ids"))
for i, bad in enumerate([[], [""], ["zzzzzzzz"], 5]):
    CASES.append((f"forget-hook_ids-{i}", _bind(lambda e, b: e.forget("ana", hook_ids=b), bad), "hook_id"))
CASES.append(("forget-namespace", lambda e: e.forget(""), "user_id"))
# -- pre_compress ------------------------------------------------------------------------------------------------
for i, bad in enumerate([b"User: hi", bytearray(b"x"), "", "   ", None, "a\x00b", "User: hi \ud800",
                         "x" * 5_000_001]):
    CASES.append((f"pre_compress-context-{i}", _bind(lambda e, b: e.pre_compress("ana", b), bad), "full_context"))
CASES.append(("pre_compress-long-turn", lambda e: e.pre_compress("ana", [{"role": "user", "content": LONG}]),
              "content"))
CASES.append(("pre_compress-surrogate-turn", lambda e: e.pre_compress(
    "ana", '[{"role": "user", "content": "hi"}, {"role": "assistant", "content": "ok \\ud800"}]'), "content"))
for i, bad in enumerate([-1, "5", True, 1.5]):
    CASES.append((f"pre_compress-tokens-{i}",
                  _bind(lambda e, b: e.pre_compress("ana", "User: hi", estimated_tokens=b), bad), "estimated_tokens"))
for i, bad in enumerate(["x", {"a": object()}, [1], {"k": float("nan")}]):
    CASES.append((f"pre_compress-task_state-{i}",
                  _bind(lambda e, b: e.pre_compress("ana", "User: hi", task_state=b), bad), "task_state"))
for i, bad in enumerate([1e20, "bad"]):
    CASES.append((f"pre_compress-now-{i}", _bind(lambda e, b: e.pre_compress("ana", "User: hi", now=b), bad),
                  "now"))
# -- lifecycle ---------------------------------------------------------------------------------------------------
for i, bad in enumerate(["daily", "", None, 5, "WEEKLY "]):
    CASES.append((f"compact-period-{i}", _bind(lambda e, b: e.compact("ana", b), bad), "period"))
for i, bad in enumerate(["2020-13", "bad", 5]):
    CASES.append((f"compact-key-{i}", _bind(lambda e, b: e.compact("ana", "monthly", key=b), bad), "key"))
for i, bad in enumerate([1e20, "x", -1e20]):
    CASES.append((f"compact-now-{i}", _bind(lambda e, b: e.compact("ana", "weekly", now=b), bad), "now"))
    CASES.append((f"maybe_compact-now-{i}", _bind(lambda e, b: e.maybe_compact("ana", now=b), bad), "now"))
for i, bad in enumerate([-1, 101, "50", 1.5, True, None]):
    CASES.append((f"importance-{i}", _bind(lambda e, b: e.set_importance(e.hooks("ana")[0].id, b, "ana"), bad),
                  "importance"))
for i, bad in enumerate(["", None, 5, "zzzzzzzz", "abc"]):
    CASES.append((f"retrieve-{i}", _bind(lambda e, b: e.retrieve(b, "ana"), bad), "hook_id"))
    CASES.append((f"set_importance-hook-{i}", _bind(lambda e, b: e.set_importance(b, 50, "ana"), bad), "hook_id"))
for i, bad in enumerate([-1, "x", True, 1.5]):
    CASES.append((f"render_prompt-budget-{i}", _bind(lambda e, b: e.render_prompt("ana", budget_tokens=b), bad),
                  "budget_tokens"))
for i, bad in enumerate(["", 5]):
    CASES.append((f"render_prompt-query-{i}", _bind(lambda e, b: e.render_prompt("ana", query=b), bad), "query"))
for i, bad in enumerate([-1, "x", 1.5, True]):
    CASES.append((f"get_turns-limit-{i}", _bind(lambda e, b: e.get_turns("ana", limit=b), bad), "limit"))
    CASES.append((f"get_turns-offset-{i}", _bind(lambda e, b: e.get_turns("ana", offset=b), bad), "offset"))


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Any:
    path = tmp_path_factory.mktemp("bad-input") / "store"
    engine = MemoryEngine.open(path, embedder="hashing")
    engine.add_turns([turn(), {"role": "assistant", "content": "Lisbon is lovely in spring"}], "ana", wait=True)
    engine.pre_compress("ana", "User: remind me of the flight\nAssistant: TAP 123 at 9:40")
    engine.flush()  # the background indexer has written every vector: row counts stay still
    yield path, engine
    engine.close()


def _error_names(exc: MemoryExtError, field: str) -> bool:
    named = str(getattr(exc, "field", "") or "")
    return field in named or field in str(exc).split(":")[0] or field in str(exc)


@pytest.mark.parametrize(("name", "call", "field"), CASES, ids=[c[0] for c in CASES])
def test_bad_input_raises_a_typed_error_naming_the_field_and_writes_nothing(
        store: Any, name: str, call: Call, field: str) -> None:
    path, engine = store
    rows, files = row_counts(path / "memory.sqlite3"), file_listing(path)
    with pytest.raises(MemoryExtError) as info:
        call(engine)
    assert _error_names(info.value, field), f"{name}: {type(info.value).__name__}: {info.value}"
    assert row_counts(path / "memory.sqlite3") == rows
    assert file_listing(path) == files
    assert "secret words secret words" not in str(info.value)  # rejected content is not echoed


# -- opens that fail create nothing ------------------------------------------------------------------------------
class _ZeroDim:
    id, dim = "zero-dim", 0

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [[] for _ in texts]

    def embed_query(self, text: str) -> list[float]:
        return []


OPEN_CASES: list[tuple[str, dict[str, Any], str]] = [
    ("embedder-name", {"embedder": "bert"}, "embedder"),
    ("embedder-type", {"embedder": 5}, "embedder"),
    ("embedder-object", {"embedder": object()}, "embedder"),
    ("embedder-dim0", {"embedder": _ZeroDim()}, "embedder.dim"),
    ("config-unknown-key", {"config": {"foo": 1}}, "foo"),
    ("config-secret-key", {"config": {"storage": {"api_key": "sk-live-abcdef123456"}}}, "storage.api_key"),
    ("config-type", {"config": {"recall": {"rrf_k": "x"}}}, "recall.rrf_k"),
    ("config-file", {"config": "missing-config.yaml"}, "config"),
    ("config-kind", {"config": 5}, "config"),
    ("config-backend", {"config": {"storage": {"vector_backend": "faiss"}}}, "storage.vector_backend"),
    ("config-dir-mode", {"config": {"storage": {"dir_mode": 0o000}}}, "storage.dir_mode"),
    ("read-only-missing", {"read_only": True}, "store"),
]


@pytest.mark.parametrize(("name", "kwargs", "field"), OPEN_CASES, ids=[c[0] for c in OPEN_CASES])
def test_a_failed_open_creates_no_directory(tmp_path: Path, name: str, kwargs: dict[str, Any], field: str) -> None:
    target = tmp_path / "new" / "store"
    kwargs = {"embedder": "hashing", **kwargs}
    with pytest.raises(MemoryExtError) as info:
        MemoryEngine.open(target, **kwargs)
    assert _error_names(info.value, field), str(info.value)
    assert "sk-live" not in str(info.value) and "sk-live" not in repr(getattr(info.value, "value", ""))
    assert not (tmp_path / "new").exists()


def test_a_store_path_that_is_a_file_is_a_typed_error(tmp_path: Path) -> None:
    target = tmp_path / "store"
    target.write_text("not a directory")
    from memory_ext.errors import StoreError
    with pytest.raises(StoreError, match="is a file"):
        MemoryEngine.open(target, embedder="hashing")
    with pytest.raises(StoreError):
        MemoryEngine.open(target / "below", embedder="hashing")
    assert target.read_text() == "not a directory"


def test_the_table_is_as_large_as_the_probe() -> None:
    assert len(CASES) + len(OPEN_CASES) >= 145
    assert math.isfinite(len(CASES))
