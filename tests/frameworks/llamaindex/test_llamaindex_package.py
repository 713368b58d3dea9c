"""The llamaindex_memory_ext package: its public surface, its runnable docstrings, and import isolation."""

from __future__ import annotations

import doctest
import importlib
import subprocess
import sys

import pytest

pytest.importorskip("llama_index.core")

import llamaindex_memory_ext

MODULES = ["llamaindex_memory_ext", "llamaindex_memory_ext.retriever", "llamaindex_memory_ext.memory_block",
           "llamaindex_memory_ext.memory", "llamaindex_memory_ext.embeddings", "llamaindex_memory_ext.agent"]


def test_every_public_class_is_exported_from_the_package() -> None:
    assert list(llamaindex_memory_ext.__all__) == sorted(llamaindex_memory_ext.__all__)
    for name in MODULES[1:]:
        module = importlib.import_module(name)
        for public in module.__all__:
            assert public in llamaindex_memory_ext.__all__, f"{name}.{public} is public but not exported"
            assert getattr(llamaindex_memory_ext, public) is getattr(module, public)


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str) -> None:
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0, f"{result.failed} docstring example(s) failed in {name}"


def test_the_engine_alone_imports_no_llamaindex() -> None:
    code = "import sys, memory_ext; print([m for m in sys.modules if m.split('.')[0] == 'llama_index'])"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False)
    assert out.stdout.strip() == "[]", out.stderr


def test_without_llamaindex_the_error_names_the_extra() -> None:
    code = ("import sys; sys.modules['llama_index'] = None; sys.modules['llama_index.core'] = None\n"
            "try:\n    import llamaindex_memory_ext\n"
            "except ImportError as exc:\n    print(type(exc).__name__, exc)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False)
    assert "MissingDependencyError" in out.stdout and 'memory-ext[llamaindex]' in out.stdout, out.stdout + out.stderr
