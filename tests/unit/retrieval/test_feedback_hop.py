"""The second retrieval hop (``recall.feedback_weight``, :mod:`memory_ext.retrieval.feedback`): pseudo-relevance
feedback from the first ranking's best turn brings in a turn of another session that shares the found turn's
topic words but none of the question's."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

import pytest

from memory_ext import MemoryEngine, Turn
from memory_ext.config import EngineConfig

FILLER = ["I went hiking with my kids on the mountain trail", "We had pizza for dinner with friends",
          "My dog loves running on the beach", "Work has been busy with the quarterly report",
          "I started reading a novel about space", "The weather was rainy all week so we stayed in",
          "My brother visited us from Ohio", "I signed up for a yoga class on Mondays",
          "We planted tomatoes in the garden", "The kids had a school concert on Friday",
          "I baked bread for the first time", "We watched a movie about dinosaurs"]
FOUND = "I painted a sunset over the lake last weekend, watercolor on canvas."
SECOND = "My new canvas shows a horse in watercolor; it hangs in the hallway now."


def _turns() -> list[Turn]:
    t0 = datetime(2023, 5, 1, 10)
    turns: list[Turn] = []
    for n, text in enumerate(FILLER):
        turns.append(Turn(role="user", speaker="Melanie", content=text, timestamp=t0 + timedelta(days=n),
                          session_id=f"s{n}"))
        turns.append(Turn(role="user", speaker="Caroline", content="That sounds lovely, tell me more!",
                          timestamp=t0 + timedelta(days=n, minutes=1), session_id=f"s{n}"))
    turns.append(Turn(role="user", speaker="Melanie", content=FOUND, timestamp=t0 + timedelta(days=3, hours=2),
                      session_id="s3"))
    turns.append(Turn(role="user", speaker="Melanie", content=SECOND, timestamp=t0 + timedelta(days=9, hours=2),
                      session_id="s9"))
    return turns


def _search(tmp_path: Path, name: str, recall: dict[str, object]) -> tuple[list[str], dict[str, float]]:
    config = EngineConfig.from_dict({"recall": recall})
    with MemoryEngine.open(tmp_path / name, embedder="hashing", config=config) as engine:
        engine.add_turns(_turns(), "melanie", wait=True)
        result = engine.search("What has Melanie painted?", "melanie", k=3)
        return [item.text for item in result.items], dict(result.timings_ms)


def test_the_second_hop_brings_in_the_other_sessions_turn(tmp_path: Path) -> None:
    off, off_timings = _search(tmp_path, "off", {"feedback_weight": 0.0})
    on, on_timings = _search(tmp_path, "on", {"feedback_weight": 3.0, "feedback_docs": 1})
    assert off[0] == FOUND and on[0] == FOUND
    assert SECOND not in off  # no question word is in it: the first hop alone misses it
    assert SECOND in on       # the found turn's "watercolor" and "canvas" lead to it
    assert "feedback" in on_timings and "feedback" not in off_timings


def test_weight_zero_is_the_first_hop_alone(tmp_path: Path) -> None:
    """Weight 0 switches the hop off: the other feedback settings then change nothing."""
    plain, timings = _search(tmp_path, "a", {"feedback_weight": 0.0})
    assert "feedback" not in timings
    assert plain == _search(tmp_path, "b", {"feedback_weight": 0.0, "feedback_docs": 1, "feedback_keep": 0,
                                            "feedback_decay": 0.0, "feedback_gate": 0.0})[0]


def test_rank_decay_lets_the_best_turn_choose_the_expansion_terms() -> None:
    from memory_ext.retrieval.feedback import feedback_terms

    df = {"watercolor": 3, "canvas": 4, "pizza": 3, "dinner": 4}
    texts = ["watercolor canvas", "pizza dinner pizza"]  # the first hop's best turn first
    kw = {"exclude": set(), "df": lambda ts: {t: df.get(t, 0) for t in ts}, "n_docs": 100, "n_terms": 1}
    assert feedback_terms(texts, **kw)[0][0] == "pizza"  # alike: the second turn's repeated word wins
    assert feedback_terms(texts, doc_weights=[1.0, 0.5], **kw)[0][0] == "watercolor"


def test_rank_decay_pulls_the_rocchio_vector_towards_the_best_turn() -> None:
    import numpy as np

    from memory_ext.retrieval.feedback import rocchio_vector

    query, best, second = np.array([1.0, 0.0, 0.0]), np.array([0.0, 1.0, 0.0]), np.array([0.0, 0.0, 1.0])
    alike = rocchio_vector(query, [best, second], 1.0)
    decayed = rocchio_vector(query, [best, second], 1.0, [1.0, 0.5])
    assert abs(float(alike[1]) - float(alike[2])) < 1e-6
    assert float(decayed[1]) > 2 * float(decayed[2]) * 0.99


def test_explain_shows_the_second_hops_part_of_every_score(tmp_path: Path) -> None:
    """With the hop on, a turn's raw score is the query route's score plus the feedback route's weighted score,
    plus what keeping the first hop's best turns in front raised it by — each part named in ``explanation``."""
    hop = {"feedback_weight": 0.5, "feedback_docs": 3, "feedback_keep": 2}
    with MemoryEngine.open(tmp_path / "z", embedder="hashing",
                           config=EngineConfig.from_dict({"recall": hop})) as engine:
        engine.add_turns(_turns(), "melanie", wait=True)
        items = engine.search("What has Melanie painted?", "melanie", k=5, explain=True).items
    assert items[0].text == FOUND
    for item in items:
        exp = item.explanation
        assert exp is not None and exp["route_weights"] == {"query": 1.0, "feedback": 0.5}
        parts = sum(exp["route_weights"][name] * route["route_score"] for name, route in exp["routes"].items())
        raised = exp.get("feedback_keep", {}).get("raised_by", 0.0)
        assert raised >= 0.0 and parts + raised == pytest.approx(item.raw_score)
    with MemoryEngine.open(tmp_path / "r", embedder="hashing",
                           config=EngineConfig.from_dict({"recall": {**hop, "fusion": "rrf"}})) as engine:
        engine.add_turns(_turns(), "melanie", wait=True)
        items = engine.search("What has Melanie painted?", "melanie", k=5, explain=True).items
    channels = {name for item in items for name in (item.explanation or {})["channels"]}
    assert {"keyword", "keyword@feedback"} <= channels
    for item in items:
        exp = item.explanation
        assert exp is not None
        for name, c in exp["channels"].items():
            assert c["weight"] == (0.5 if name.endswith("@feedback") else 1.0)
            assert c["contribution"] == pytest.approx(c["weight"] / (60 + c["rank"]))
        raised = exp.get("feedback_keep", {}).get("raised_by", 0.0)
        assert sum(c["contribution"] for c in exp["channels"].values()) + raised == pytest.approx(item.raw_score)


def _hop_runs(engine: MemoryEngine, query: str, **kw: object) -> tuple[bool, float]:
    result = engine.search(query, "melanie", k=3, **kw)  # type: ignore[arg-type]
    return "feedback" in result.timings_ms, result.items[0].score if result.items else 0.0


@pytest.mark.parametrize("embedder", ["hashing", "e5"])
def test_the_gate_expands_only_a_question_the_store_has_something_close_to(tmp_path: Path, embedder: str) -> None:
    """``recall.feedback_gate``: the hop runs when the first ranking's best turn would be returned with at least
    that score, so an off-topic question is not expanded with unrelated turns (query drift)."""
    config = EngineConfig.from_dict({"recall": {"feedback_weight": 0.5, "feedback_gate": 0.5}})
    with MemoryEngine.open(tmp_path / "gated", embedder=embedder, config=config) as engine:
        engine.add_turns(_turns(), "melanie", wait=True)
        on_topic, on_score = _hop_runs(engine, "What has Melanie painted with watercolor?")
        off_topic, off_score = _hop_runs(engine, "Which mutual fund did the accountant recommend for retirement?")
    assert on_score >= 0.5 and on_topic
    assert off_score < 0.5 and not off_topic


def test_the_hop_never_runs_on_an_action_route(tmp_path: Path) -> None:
    from memory_ext import ActionState

    config = EngineConfig.from_dict({"recall": {"feedback_weight": 0.5}})  # no gate: it would run otherwise
    with MemoryEngine.open(tmp_path / "acting", embedder="hashing", config=config) as engine:
        engine.add_turns(_turns(), "melanie", wait=True)
        assert _hop_runs(engine, "What has Melanie painted?")[0]
        assert not _hop_runs(engine, "What has Melanie painted?",
                             action_state=ActionState(current_subgoal="frame the watercolor"))[0]
