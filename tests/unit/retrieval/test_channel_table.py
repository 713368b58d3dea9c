"""Recall channels in one table: custom recallers by name, per-channel options from configuration, warnings."""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from memory_ext import (
    ConfigError,
    GlobalsConfig,
    HashingEmbedder,
    InvalidArgumentError,
    MemoryEngine,
    RecallConfig,
    Turn,
    register_recaller,
)
from memory_ext.recall import Hits, KeywordRecaller, RecallContext, RecallRequest
from memory_ext.recall.channels import CHANNEL_NAMES, CHANNELS, builtin_recallers, implementations
from memory_ext.registry import recallers
from tests.conftest import make_turns

EXCERPT = ("I went hiking with my dad yesterday. It was great! Did you see anything? We saw a fox near the river. "
           "Do you like animals? I love foxes, they are so clever.")


@register_recaller("table_test_pinned", channel="keyword")
class PinnedKeyword:
    """A keyword channel that finds only the records containing one word (an option), all with score 1."""

    channel = "keyword"

    def __init__(self, ctx: RecallContext, *, word: str = "cello") -> None:
        self.ctx = ctx
        self.word = word

    def recall(self, request: RecallRequest) -> Hits:
        rows = self.ctx.store.reader().execute("SELECT rid, text FROM records WHERE ns_id=?", (request.ns_id,))
        found = [int(rid) for rid, text in rows if self.word in text.lower()]
        return Hits(np.array(found, np.int64), np.ones(len(found)), fill=0.0)


@register_recaller("table_test_loud_keyword", channel="keyword")
class LoudKeyword(KeywordRecaller):
    """BM25 with every score multiplied (a built-in subclassed, with an option of its own)."""

    def __init__(self, ctx: RecallContext, *, gain: float) -> None:
        super().__init__(ctx)
        self.gain = gain

    def recall(self, request: RecallRequest) -> Hits:
        hits = super().recall(request)
        return Hits(hits.rids, hits.scores * self.gain, fill=0.0)


KEYWORD_ONLY = {"globals": {"vector_enabled": False, "temporal_enabled": False}}


def _open(tmp_path: Path, recall: dict | None = None, name: str = "s") -> MemoryEngine:
    eng = MemoryEngine.open(tmp_path / name, config={**KEYWORD_ONLY, "recall": recall or {}})
    eng.add_turns(make_turns("ana"), "ana")
    return eng


def test_the_table_names_every_channel_with_its_selection_key_and_switch() -> None:
    assert len(set(CHANNEL_NAMES)) == len(CHANNELS)
    for spec in CHANNELS:
        assert RecallConfig.model_fields[spec.selection_key].default == spec.name
        assert spec.switch is None or isinstance(GlobalsConfig.model_fields[spec.switch].default, bool)
        assert spec.recaller.channel == spec.name and implementations(spec.name)[:1] != []
    assert builtin_recallers()["graph"] is recallers.resolve("recall.graph_recaller", "graph")


def test_a_registered_recaller_is_selected_by_configuration_and_changes_the_ranking(tmp_path: Path) -> None:
    query = "Where is Lena moving?"
    with _open(tmp_path, name="builtin") as eng:
        builtin = [i.text for i in eng.search(query, "ana", k=3).items]
    with _open(tmp_path, {"keyword_recaller": "table_test_pinned"}, name="pinned") as eng:
        pinned = eng.search(query, "ana", k=3)
    assert "Porto" in builtin[0]
    assert "cello" in pinned.items[0].text and pinned.items[0].channels == {"keyword": 1}
    assert [i.text for i in pinned.items] != builtin


def test_channel_options_reach_the_constructor(tmp_path: Path) -> None:
    query = "Where is Lena moving?"
    with _open(tmp_path, {"keyword_recaller": "table_test_pinned",
                          "channel_options": {"keyword": {"word": "beagle"}}}) as eng:
        assert "beagle" in eng.search(query, "ana", k=1).items[0].text
    with _open(tmp_path, {"keyword_recaller": "table_test_loud_keyword",
                          "channel_options": {"keyword": {"gain": 10.0}}}, name="loud") as eng:
        loud = eng.search(query, "ana", k=1, trace=True).trace
    with _open(tmp_path, name="plain") as eng:
        plain = eng.search(query, "ana", k=1, trace=True).trace
    assert loud and plain
    (rid, score), (rid0, score0) = loud["channels"]["keyword"]["best"][0], plain["channels"]["keyword"]["best"][0]
    assert rid == rid0 and score == pytest.approx(10.0 * score0)


def test_built_in_channel_options_change_what_the_channel_scores(tmp_path: Path) -> None:
    query = "What did Ana say on March 1, 2026?"  # a day: the temporal channel scores turns said that day

    def best_temporal(options: dict) -> float:
        with MemoryEngine.open(tmp_path / str(len(list(tmp_path.iterdir()))), embedder="hashing",
                               config={"recall": {"channel_options": options}}) as eng:
            eng.add_turns(make_turns("ana"), "ana")
            trace = eng.search(query, "ana", k=3, now="2026-03-02", trace=True).trace
        assert trace is not None
        return trace["channels"]["temporal"]["best"][0][1]

    assert best_temporal({}) == pytest.approx(0.4)  # said that day: said_weight (0.4) x confidence 1
    assert best_temporal({"temporal": {"said_weight": 0.25}}) == pytest.approx(0.25)


@pytest.mark.parametrize(("recall", "field", "hint"), [
    ({"channel_options": {"temporal": {"half_life_days": 10}}}, "recall.channel_options.temporal.half_life_days",
     "valid options: breadth_exponent, said_weight"),
    ({"channel_options": {"keyword": {"k1": 1.2}}}, "recall.channel_options.keyword.k1", "takes no options"),
    ({"channel_options": {"vectr": {"x": 1}}}, "recall.channel_options.vectr", "valid names: evidence, graph"),
    ({"keyword_recaller": "table_test_pinned", "channel_options": {"keyword": {"gain": 2}}},
     "recall.channel_options.keyword.gain", "valid options: word"),
    ({"keyword_recaller": "bm25s"}, "recall.keyword_recaller", "table_test_loud_keyword, table_test_pinned"),
    ({"graph_recaller": "table_test_pinned"}, "recall.graph_recaller", "valid names: graph"),
])
def test_unknown_names_and_options_fail_at_open(tmp_path: Path, recall: dict, field: str, hint: str) -> None:
    with pytest.raises(ConfigError) as info:
        MemoryEngine.open(tmp_path / "s", embedder="hashing", config={"recall": recall})
    assert info.value.field == field and hint in str(info.value)
    assert not (tmp_path / "s").exists()  # nothing was created


def test_an_option_value_the_recaller_refuses_fails_at_open(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="said_weight must be between 0 and 1") as info:
        MemoryEngine.open(tmp_path / "s", embedder="hashing",
                          config={"recall": {"channel_options": {"temporal": {"said_weight": 2.0}}}})
    assert info.value.field == "recall.channel_options.temporal"


def test_register_recaller_refuses_bad_registrations() -> None:
    with pytest.raises(InvalidArgumentError, match="valid channels: evidence, graph, keyword"):
        register_recaller("table_test_x", channel="keywrd")
    with pytest.raises(InvalidArgumentError, match="recall"):
        register_recaller("table_test_y", channel="keyword")(object)
    with pytest.raises(InvalidArgumentError, match="this name is taken"):
        register_recaller("graph", channel="graph")(PinnedKeyword)
    assert register_recaller("table_test_pinned", channel="keyword")(PinnedKeyword) is PinnedKeyword  # idempotent


class _SparseHashing(HashingEmbedder):
    """The hashing embedder plus a sparse view (hashed words)."""

    def __init__(self) -> None:
        super().__init__(dim=64)

    def embed_sparse(self, texts: Sequence[str]) -> list[tuple[np.ndarray, np.ndarray]]:
        out = []
        for text in texts:
            idx = sorted({zlib.crc32(w.encode()) % 4096 for w in text.lower().split()})
            out.append((np.array(idx, dtype=np.int32), np.ones(len(idx), dtype=np.float32)))
        return out


def test_sparse_without_a_sparse_head_says_so_when_it_would_have_run(tmp_path: Path) -> None:
    notes = [Turn(role="user", content="Bart saw a clever fox by the river with his dad"),
             Turn(role="user", content="Bart baked a cake for his birthday")]
    with MemoryEngine.open(tmp_path / "hashing", embedder="hashing") as eng:  # sparse_enabled is on by default
        eng.add_turns(notes, "u")
        excerpt = eng.search(EXCERPT, "u", k=2)
        assert [w for w in excerpt.warnings if w.startswith("sparse channel")] == [
            "sparse channel: switched on (globals.sparse_enabled) but it cannot run: the embedder 'hashing-v1:256' "
            "has no sparse head (embed_sparse); it found nothing"]
        assert "fox" in excerpt.items[0].text  # the other channels still answer
        assert not eng.search("When did Bart see a fox?", "u", k=2).warnings  # a question would not use it
    with MemoryEngine.open(tmp_path / "off", embedder="hashing", config={"globals": {"sparse_enabled": False}}) as eng:
        eng.add_turns(notes, "u")
        assert not eng.search(EXCERPT, "u", k=2).warnings
    with MemoryEngine.open(tmp_path / "sparse", embedder=_SparseHashing()) as eng:
        eng.add_turns(notes, "u")
        res = eng.search(EXCERPT, "u", k=2)
        assert not res.warnings and "sparse" in res.items[0].channels

