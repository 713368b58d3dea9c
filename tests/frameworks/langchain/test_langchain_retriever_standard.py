"""LangChain's standard retriever suite (langchain-tests ``RetrieversIntegrationTests``) against MemoryRetriever.

Until ``asyncio_mode = "auto"`` is set in the pytest configuration, the module-level ``asyncio`` mark runs the
suite's async test; the warning it gives on the sync tests is silenced here.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langchain_core")
pytest.importorskip("langchain_tests")
pytest.importorskip("pytest_asyncio")

from langchain_tests.integration_tests import RetrieversIntegrationTests

from langchain_memory_ext import MemoryRetriever
from memory_ext import MemoryEngine
from tests.conftest import make_turns

pytestmark = [
    pytest.mark.asyncio,
    pytest.mark.filterwarnings("ignore:.*is marked with '@pytest.mark.asyncio' but it is not an async function"),
]


class TestMemoryRetrieverStandard(RetrieversIntegrationTests):
    @pytest.fixture(autouse=True)
    def _engine(self, tmp_path: Path) -> Iterator[None]:
        self._eng = MemoryEngine.open(tmp_path / "store", embedder="hashing")
        self._eng.add_turns(make_turns("ana"), "ana")
        try:
            yield
        finally:
            self._eng.close()

    @property
    def retriever_constructor(self) -> type[MemoryRetriever]:
        return MemoryRetriever

    @property
    def retriever_constructor_params(self) -> dict[str, Any]:
        return {"engine": self._eng, "user_id": "ana"}

    @property
    def retriever_query_example(self) -> str:
        return "What did Ana say about her sister Lena and the puppy?"
