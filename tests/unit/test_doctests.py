"""The runnable examples in the engine's docstrings stay true."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = [
    "memory_ext",
    "memory_ext.config",
    "memory_ext.embed",
    "memory_ext.engine",
    "memory_ext.errors",
    "memory_ext.operations",
    "memory_ext.wire",
    "memory_ext.ingest.calls",
    "memory_ext.ingest.derive",
    "memory_ext.ingest.kinds",
    "memory_ext.ingest.layers",
    "memory_ext.rank.select",
    "memory_ext.store.timeindex",
    "memory_ext.store.snapshots",
    "memory_ext.store.evidence",
    "memory_ext.recall.evidence",
    "memory_ext.recall.temporal",
    "memory_ext.lifecycle.api",
    "memory_ext.lifecycle.compact",
    "memory_ext.lifecycle.conflicts",
    "memory_ext.lifecycle.files",
    "memory_ext.lifecycle.precompress",
    "memory_ext.lifecycle.summary",
    "memory_ext.store.graph",
    "memory_ext.recall.graph",
    "memory_ext.llm",
    "memory_ext.models",
    "memory_ext.rank.fusion",
    "memory_ext.rank.zscore",
    "memory_ext.rank.rerank",
    "memory_ext.store.chroma_server",
    "memory_ext.plan.derive",
    "memory_ext.plan.heuristic",
    "memory_ext.plan.slots",
    "memory_ext.plan.llm_planner",
    "memory_ext.rank.mmr",
    "memory_ext.registry",
    "memory_ext.retrieval.context",
    "memory_ext.text.entities",
    "memory_ext.text.participants",
    "memory_ext.retrieval.participants",
    "memory_ext.text.timecalendar",
    "memory_ext.text.timeexpr",
    "memory_ext.text.timerules_en",
    "memory_ext.text.timerules_zh",
    "memory_ext.text.tokenize",
    "memory_ext.validate",
    "memory_ext.cli",
    "memory_ext.telemetry",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str) -> None:
    if name == "memory_ext.telemetry":
        pytest.importorskip("opentelemetry.sdk")  # the otel extra
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0, f"{result.failed} docstring example(s) failed in {name}"
