"""OpenTelemetry of the in-process engine, read back with the SDK's in-memory span exporter and metric reader:
one span per operation (GenAI memory conventions), the search's stage timings as events, no namespace unless
configured, errors typed, metrics of operations and latency; and the engine without OpenTelemetry at all."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("opentelemetry.sdk")

from opentelemetry.trace import SpanKind, StatusCode

from memory_ext import InvalidQueryError, MemoryEngine, Turn, telemetry
from tests.otel_kit import Collected, collect

ROOT = Path(__file__).resolve().parents[2]
TURNS = [Turn(role="user", content="Maya is allergic to shellfish.", external_id="allergy"),
         Turn(role="user", content="Maya is planning a trip to Kyoto in April."),
         Turn(role="assistant", content="Kyoto in April means cherry blossoms; book early.")]


@pytest.fixture
def otel() -> Iterator[Collected]:
    yield from collect()


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[MemoryEngine]:
    with MemoryEngine.open(tmp_path / "store", embedder="hashing") as opened:
        yield opened


def test_one_span_per_operation_following_the_genai_memory_conventions(engine: MemoryEngine,
                                                                        otel: Collected) -> None:
    engine.add_turns(TURNS, "maya", wait=True)
    result = engine.search("what can't Maya eat?", "maya", k=2)
    engine.update("maya", "allergy", content="Maya is allergic to shellfish and peanuts.")
    engine.delete("maya", ["allergy"])  # runs forget inside: still one span
    engine.stats()
    spans = otel.finished()
    assert [s.name for s in spans] == ["create_memory", "search_memory", "update_memory", "delete_memory",
                                       "memory_ext.stats"]
    added, searched, updated, deleted, stats = spans
    assert all(s.kind == SpanKind.INTERNAL and s.attributes is not None for s in spans)
    assert dict(searched.attributes or {}) == {
        "memory_ext.operation": "search", "memory_ext.face": "engine", "gen_ai.operation.name": "search_memory",
        "gen_ai.memory.store.id": engine._store.store_id, "gen_ai.memory.record.count": len(result.items)}
    assert (added.attributes or {})["gen_ai.memory.record.count"] == 3
    assert (updated.attributes or {})["gen_ai.operation.name"] == "update_memory"
    assert (deleted.attributes or {})["memory_ext.operation"] == "delete"
    assert "gen_ai.operation.name" not in (stats.attributes or {})  # no memory operation of the conventions
    assert len({s.context.trace_id for s in spans}) == 5  # each its own trace: none nested in another


def test_the_search_stages_are_span_events(engine: MemoryEngine, otel: Collected) -> None:
    engine.add_turns(TURNS, "maya", wait=True)
    result = engine.search("Kyoto trip", "maya")
    (span,) = [s for s in otel.finished() if s.name == "search_memory"]
    stages = {str((e.attributes or {})["memory_ext.stage"]): (e.attributes or {})["memory_ext.stage.duration_ms"]
              for e in span.events if e.name == "memory_ext.search.stage"}
    assert stages == {stage: pytest.approx(ms) for stage, ms in result.timings_ms.items()}
    assert {"total", "rank"} <= set(stages)


def test_no_namespace_text_or_query_by_default(engine: MemoryEngine, otel: Collected) -> None:
    engine.add_turns(TURNS, {"user_id": "maya", "agent_id": "travel", "session_id": "s-1"}, wait=True)
    engine.search("shellfish allergy", {"user_id": "maya", "agent_id": "travel"})
    engine.get_memory({"user_id": "maya", "agent_id": "travel"}, "allergy")
    for span in otel.finished():
        values = [str(v) for v in (span.attributes or {}).values()] + [
            str(v) for e in span.events for v in (e.attributes or {}).values()]
        assert not any(secret in v for v in values for secret in ("maya", "travel", "s-1", "allergy", "shellfish",
                                                                    "Kyoto"))
        assert not any(k.startswith("memory_ext.namespace") or k == "gen_ai.memory.record.id"
                       for k in (span.attributes or {}))


def test_the_namespace_when_configured(engine: MemoryEngine) -> None:
    for otel in collect(namespace_attributes=True):
        engine.add_turns(TURNS, {"user_id": "maya", "agent_id": "travel", "session_id": "s-1"}, wait=True)
        engine.get_memory({"user_id": "maya", "agent_id": "travel"}, "allergy")
        added, got = otel.finished()
        assert {k: v for k, v in (added.attributes or {}).items() if k.startswith("memory_ext.namespace")} == {
            "memory_ext.namespace.user_id": "maya", "memory_ext.namespace.agent_id": "travel",
            "memory_ext.namespace.session_id": "s-1"}
        assert (got.attributes or {})["gen_ai.memory.record.id"] == "allergy"


def test_the_environment_switches_the_namespace_on(engine: MemoryEngine, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(telemetry.ENV_NAMESPACE, "1")
    for otel in collect():
        engine.namespaces()
        engine.search("bees", "ana")
        assert (otel.finished()[-1].attributes or {})["memory_ext.namespace.user_id"] == "ana"


def test_a_failed_operation_is_an_error_span_and_metric(engine: MemoryEngine, otel: Collected) -> None:
    with pytest.raises(InvalidQueryError):
        engine.search("", "maya")
    (span,) = otel.finished()
    assert span.status.status_code == StatusCode.ERROR and span.status.description == "InvalidQueryError"
    assert (span.attributes or {})["error.type"] == "InvalidQueryError"
    assert not span.events  # the exception (its message may hold user text) is not recorded
    (failed,) = [p for p in otel.points("memory_ext.operations") if p.attributes.get("error.type")]
    assert dict(failed.attributes) == {"memory_ext.operation": "search", "memory_ext.face": "engine",
                                       "error.type": "InvalidQueryError"} and failed.value == 1


def test_counters_and_latency_histograms(engine: MemoryEngine, otel: Collected) -> None:
    engine.add_turns(TURNS, "maya", wait=True)
    for query in ("shellfish", "Kyoto", "cherry blossoms"):
        engine.search(query, "maya")
    counts = {p.attributes["memory_ext.operation"]: p.value for p in otel.points("memory_ext.operations")}
    assert counts == {"add_turns": 1, "search": 3}
    durations = {p.attributes["memory_ext.operation"]: p for p in otel.points("memory_ext.operation.duration")}
    assert durations["search"].count == 3 and durations["search"].sum > 0
    genai = {p.attributes["gen_ai.operation.name"]: p.count for p in otel.points("gen_ai.client.operation.duration")}
    assert genai == {"create_memory": 1, "search_memory": 3}


def test_async_twins_make_the_same_single_span(engine: MemoryEngine, otel: Collected) -> None:
    import asyncio

    async def run() -> None:
        await engine.aadd_turns(TURNS, "maya", wait=True)
        await engine.asearch("Kyoto", "maya")

    asyncio.run(run())
    assert [s.name for s in otel.finished()] == ["create_memory", "search_memory"]


def test_the_face_is_an_attribute(engine: MemoryEngine, otel: Collected) -> None:
    with telemetry.face("rest"):
        engine.namespaces()
    engine.namespaces()
    assert [(s.attributes or {})["memory_ext.face"] for s in otel.finished()] == ["rest", "engine"]


def test_the_engine_works_without_opentelemetry() -> None:
    """The extra is optional: with ``opentelemetry`` unimportable the engine runs, and telemetry says it is off."""
    code = ("import sys, tempfile\n"
            "sys.modules['opentelemetry'] = None\n"
            "from memory_ext import MemoryEngine, telemetry\n"
            "with MemoryEngine.open(tempfile.mkdtemp(), embedder='hashing') as engine:\n"
            "    engine.add_turns([{'role': 'user', 'content': 'Maya keeps bees.'}], 'maya', wait=True)\n"
            "    print(engine.search('bees', 'maya').items[0].text)\n"
            "print(telemetry.configure(), 'opentelemetry.trace' in sys.modules)\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORY_EXT_")}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (env.get("PYTHONPATH"), str(ROOT)) if p)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env,
                         check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n")[:2] == ["Maya keeps bees.", "False False"]


def test_importing_the_engine_does_not_import_opentelemetry() -> None:
    code = "import sys, memory_ext; from memory_ext import MemoryEngine; print('opentelemetry' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False)
    assert out.stdout.strip() == "False", out.stderr
