"""The runnable examples in the server's and the client's docstrings stay true."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = ["memory_ext.interface", "memory_ext.server", "memory_ext.server.settings", "memory_ext.server.schemas",
           "memory_ext.server.guards", "memory_ext.client"]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str) -> None:
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0, f"{result.failed} docstring example(s) failed in {name}"
