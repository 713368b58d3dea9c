"""Defaults that follow the embedder: with sentence-mixed turn vectors (e5, ``ingest.sentence_vectors`` above 0)
the keyword channel weighs 0.5 and item scores use the cosine constants fitted for those vectors; with one vector
per turn (``hashing``, ``sentence_vectors: 0``) keyword 1.0 and the turn-vector constants. A weight the user
sets is kept as set, also through the configuration round trips of ``memext migrate``."""

from __future__ import annotations

from pathlib import Path

import pytest

from memory_ext import MemoryEngine
from memory_ext.config import EngineConfig
from memory_ext.rank.calibration import SENTENCE_MIXED, TURN_VECTORS
from memory_ext.store.migrate import locate


def _open(tmp_path: Path, name: str, config: dict[str, object] | EngineConfig | None = None,
          embedder: str | None = None) -> MemoryEngine:
    return MemoryEngine.open(tmp_path / name, config=config, embedder=embedder)


@pytest.mark.parametrize(("config", "embedder", "keyword", "calibration"), [
    (None, None, 0.5, SENTENCE_MIXED),                                    # e5, sentences mixed: the default
    ({"ingest": {"sentence_vectors": 0}}, None, 1.0, TURN_VECTORS),       # e5, one vector per turn
    ({"ingest": {"window_vectors": "mean"}}, None, 1.0, TURN_VECTORS),   # no pass in context: nothing mixed
    (None, "hashing", 1.0, TURN_VECTORS),                                 # no token states: nothing mixed
    ({"recall": {"channel_weights": {"keyword": 0.8, "vector": 1.0}}}, None, 0.8, SENTENCE_MIXED),  # as set
])
def test_the_keyword_weight_and_score_constants_follow_the_turn_vectors(
        tmp_path: Path, config: dict[str, object] | None, embedder: str | None, keyword: float,
        calibration: object) -> None:
    with _open(tmp_path, "s", config, embedder) as engine:
        assert engine.config.recall.channel_weights["keyword"] == keyword
        assert engine._read._calibration is calibration


def test_a_user_weight_equal_to_the_old_default_is_kept(tmp_path: Path) -> None:
    """Setting ``channel_weights`` at all (even to the plain defaults) opts out of the embedder's default."""
    plain = {"keyword": 1.0, "vector": 1.0, "sparse": 2.0}
    with _open(tmp_path, "s", {"recall": {"channel_weights": plain}}) as engine:
        assert engine.config.recall.channel_weights == plain


def test_migrate_location_configs_keep_unset_defaults_unset(tmp_path: Path) -> None:
    """``memext migrate`` opens the target from the source's configuration with storage keys changed: a weight
    the user never set must stay the embedder's default there (verification searches compare both sides)."""
    base = EngineConfig.from_dict({"recall": {"rrf_k": 30}})
    target = locate(tmp_path / "target").engine_config(base)
    assert "channel_weights" not in target.recall.model_fields_set and target.recall.rrf_k == 30
    with _open(tmp_path, "t", target) as engine:
        assert engine.config.recall.channel_weights["keyword"] == 0.5
    chosen = locate(tmp_path / "target").engine_config(
        EngineConfig.from_dict({"recall": {"channel_weights": {"keyword": 1.0}}}))
    with _open(tmp_path, "u", chosen) as engine:
        assert engine.config.recall.channel_weights == {"keyword": 1.0}
