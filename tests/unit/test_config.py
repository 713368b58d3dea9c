"""EngineConfig loading and build-time validation."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from memory_ext import ConfigError, EngineConfig, MemoryEngine


def test_defaults_and_frozen() -> None:
    cfg = EngineConfig()
    assert cfg.recall.rrf_k == 60 and cfg.globals.vector_enabled
    with pytest.raises(ValidationError, match="frozen"):
        cfg.recall.rrf_k = 10  # type: ignore[misc]


@pytest.mark.parametrize(("data", "field", "hint"), [
    ({"recal": {}}, "recal", "valid keys: globals, ingest, lifecycle, limits, recall, storage"),
    ({"recall": {"rrf_kk": 3}}, "recall.rrf_kk", "valid keys:"),
    ({"recall": {"rrf_k": "many"}}, "recall.rrf_k", "integer"),
    ({"globals": {"vectr_enabled": True}}, "globals.vectr_enabled", "vector_enabled"),
])
def test_unknown_keys_and_bad_types(data: dict, field: str, hint: str) -> None:
    with pytest.raises(ConfigError) as info:
        EngineConfig.from_dict(data)
    assert info.value.field == field and hint in str(info.value)


@pytest.mark.parametrize(("data", "field", "hint"), [
    ({"recall": {"keyword_recaller": "kw"}}, "recall.keyword_recaller", "valid names: keyword"),
    ({"recall": {"vector_recaller": "keyword"}}, "recall.vector_recaller", "valid names:"),
    ({"storage": {"vector_backend": "faiss"}}, "storage.vector_backend", "chroma, numpy"),
    ({"recall": {"channel_weights": {"vectr": 1.0}}}, "recall.channel_weights.vectr", "graph, keyword, keyword_l0"),
    ({"recall": {"graph_recaller": "keyword"}}, "recall.graph_recaller", "valid names: graph"),
    ({"recall": {"channel_weights": {"vector": -1.0}}}, "recall.channel_weights.vector", ">= 0"),
    ({"globals": {"layers_index_enabled": True}, "recall": {"fusion": "rrf"}}, "recall.fusion", "zscore"),
    ({"globals": {"rerank_enabled": True}, "recall": {"fusion": "rrf"}}, "recall.fusion", "fusion: zscore"),
    ({"recall": {"keyword_l0_recaller": "keyword"}}, "recall.keyword_l0_recaller", "valid names: keyword_l0"),
    ({"globals": {"rerank_enabled": True}}, "globals.rerank_enabled", "reranker"),
    ({"globals": {"llm_planner_enabled": True}}, "globals.llm_planner_enabled", "pass an LLM"),
    ({"globals": {"vector_enabled": False}, "storage": {"vector_backend": "chroma"}}, "storage.vector_backend",
     "vector_enabled is false"),
])
def test_invalid_names_and_switches_fail_when_the_engine_is_built(tmp_path: Path, data: dict, field: str,
                                                                  hint: str) -> None:
    with pytest.raises(ConfigError) as info:
        MemoryEngine.open(tmp_path / "s", config=data, embedder="hashing")
    assert info.value.field == field and hint in str(info.value)
    assert not (tmp_path / "s").exists()  # nothing was created


def test_unknown_embedder_name(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="valid names: e5, hashing"):
        MemoryEngine.open(tmp_path / "s", embedder="e6")


@pytest.mark.parametrize("suffix", [".yaml", ".toml", ".json"])
def test_load_from_files(tmp_path: Path, suffix: str) -> None:
    body = {
        ".yaml": "recall:\n  rrf_k: 20\nglobals:\n  vector_enabled: false\n",
        ".toml": "[recall]\nrrf_k = 20\n[globals]\nvector_enabled = false\n",
        ".json": '{"recall": {"rrf_k": 20}, "globals": {"vector_enabled": false}}',
    }[suffix]
    path = tmp_path / f"cfg{suffix}"
    path.write_text(body)
    cfg = EngineConfig.from_file(path)
    assert cfg.recall.rrf_k == 20 and not cfg.globals.vector_enabled
    with MemoryEngine.open(tmp_path / "s", config=str(path)) as eng:
        assert eng.config.recall.rrf_k == 20


def test_bad_file(tmp_path: Path) -> None:
    path = tmp_path / "cfg.yaml"
    path.write_text("recall: [unclosed")
    with pytest.raises(ConfigError, match="does not parse"):
        EngineConfig.from_file(path)
    with pytest.raises(ConfigError, match="existing"):
        EngineConfig.from_file(tmp_path / "missing.toml")


def test_the_configuration_reference_is_up_to_date() -> None:
    from memory_ext.config import reference_markdown

    doc = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"
    assert doc.read_text(encoding="utf-8").strip() == reference_markdown().strip(), (
        "regenerate it: python -c 'from memory_ext.config import reference_markdown; print(reference_markdown())'"
        " > docs/configuration.md")
    for section in EngineConfig.model_fields.values():
        for key, field in section.annotation.model_fields.items():  # type: ignore[union-attr]
            assert field.description, f"{key} has no docstring"
