"""docs/agents.md: its Python examples run as written, in order, in one session (offline: hashing embedder,
scripted chat models)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytest.importorskip("langchain.agents")
pytest.importorskip("llama_index.core")

GUIDE = Path(__file__).resolve().parents[3] / "docs" / "agents.md"


def test_the_agents_guide_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocks = re.findall(r"```python\n(.*?)```", GUIDE.read_text(encoding="utf-8"), flags=re.S)
    assert len(blocks) >= 5
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {"__name__": "agents_guide"}
    try:
        for index, code in enumerate(blocks):
            exec(compile(code, f"docs/agents.md[python block {index}]", "exec"), namespace)
    finally:
        engine = namespace.get("engine")
        if engine is not None and hasattr(engine, "close"):
            engine.close()
