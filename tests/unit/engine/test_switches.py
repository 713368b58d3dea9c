"""Capability switches: every combination of vector_enabled, graph_enabled and layers_index_enabled builds the
channels it should (all off: keyword alone), and each switched-on channel changes what a search can find."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest

from memory_ext import MemoryEngine, Turn

LONG_ANSWER = ("To rotate the Postgres credentials without downtime: create the new role with the same grants, "
               "deploy the services with the new secret, then revoke the old role. " + "Detail. " * 90)
TURNS = [
    Turn(role="user", speaker="Ana", content="My brother Marco came to visit last weekend."),
    Turn(role="assistant", content="Lovely! What did you two do?"),
    Turn(role="user", speaker="Ana", content="Marco works as a pastry chef in Turin."),
    Turn(role="user", speaker="Ana", content="How do I change database passwords safely?"),
    Turn(role="assistant", content=LONG_ANSWER),
    Turn(role="tool", content=json.dumps({"rows": [{"id": i, "name": f"item {i}"} for i in range(60)]}),
         tool_calls=({"name": "list_items"},)),
]
SWITCHES = ("vector_enabled", "graph_enabled", "layers_index_enabled")


def expected_channels(vector: bool, graph: bool, layers: bool) -> set[str]:
    out = {"keyword"}
    if vector:
        out.add("vector")
    if graph:
        out.add("graph")
    if layers:
        out |= {"keyword_l0", "keyword_l1"} | ({"vector_l0", "vector_l1"} if vector else set())
    return out


@pytest.mark.parametrize("combo", list(itertools.product([False, True], repeat=3)),
                         ids=lambda c: "-".join(f"{s.split('_')[0]}={int(v)}"
                                                for s, v in zip(SWITCHES, c, strict=True)))
def test_every_switch_combination(tmp_path: Path, combo: tuple[bool, bool, bool]) -> None:
    vector, graph, layers = combo
    config = {"globals": dict(zip(SWITCHES, combo, strict=True))}
    with MemoryEngine.open(tmp_path, embedder="hashing", config=config) as engine:
        engine.add_turns(TURNS, "ana")
        result = engine.search("rotate Postgres credentials", "ana", k=3)
        ran = {name.split(".", 1)[1] for name in result.timings_ms if name.startswith("channel.")}
        assert ran == expected_channels(vector, graph, layers)
        assert result.items[0].text == LONG_ANSWER and not result.degraded
        assert not result.warnings


def test_layer_channels_say_so_when_nothing_is_indexed(tmp_path: Path) -> None:
    with MemoryEngine.open(tmp_path / "off", embedder="hashing") as engine:  # written without layers
        engine.add_turns(TURNS, "ana")
    with MemoryEngine.open(tmp_path / "off", embedder="hashing",
                           config={"globals": {"layers_index_enabled": True}}) as engine:
        result = engine.search("rotate Postgres credentials", "ana", k=3)
        assert result.items  # the other channels still answer
        assert any("no L0 or L1 layers" in w for w in result.warnings)
        assert not any(name.startswith("channel.keyword_l") for name in result.timings_ms)


def test_layer_channels_find_a_long_record_by_its_title(tmp_path: Path) -> None:
    with MemoryEngine.open(tmp_path, embedder="hashing", config={"globals": {"layers_index_enabled": True}}) as e:
        e.add_turns(TURNS, "ana")
        item = e.search("Postgres credentials without downtime", "ana", k=1).items[0]
        assert item.text == LONG_ANSWER
        assert {"keyword_l0", "keyword_l1"} <= set(item.channels)


def test_graph_channel_reaches_a_related_entity(tmp_path: Path) -> None:
    """"What does Ana's brother do?" names Ana only; the graph links Ana to Marco and Marco to his job."""
    query = "What does Ana's brother do for a living?"
    ranks = {}
    for graph in (False, True):
        with MemoryEngine.open(tmp_path / str(graph), embedder="hashing",
                               config={"globals": {"graph_enabled": graph, "vector_enabled": False}}) as e:
            e.add_turns(TURNS, "ana")
            texts = [i.text for i in e.search(query, "ana", k=6).items]
            ranks[graph] = texts.index(TURNS[2].content) if TURNS[2].content in texts else 99
    # without the graph the turn already ranks right below Marco's visit (the assistant's question between them
    # yields to its answer, rank/carriers.py); the graph keeps it there
    assert ranks[True] <= ranks[False] and ranks[True] <= 1


def test_temporal_channel_finds_what_a_day_was_about(tmp_path: Path) -> None:
    from datetime import UTC, datetime

    monday = datetime(2026, 5, 11, 9, tzinfo=UTC)  # "last Saturday" asked on Monday 11 May = 9 May
    chat = [Turn(role="user", speaker="Ana", timestamp=monday, session_id="mon",
                 content="Yesterday's hike was fun, but on Saturday I ran my first half marathon!"),
            Turn(role="user", speaker="Ana", timestamp=datetime(2026, 5, 1, 9, tzinfo=UTC), session_id="may1",
                 content="I ran a few laps around the park."),
            Turn(role="user", speaker="Ana", timestamp=datetime(2026, 4, 20, 9, tzinfo=UTC), session_id="apr",
                 content="I ran to the bakery and back.")]
    found = {}
    for temporal in (False, True):
        with MemoryEngine.open(tmp_path / str(temporal), embedder="hashing",
                               config={"globals": {"temporal_enabled": temporal}}) as e:
            e.add_turns(chat, "ana")
            result = e.search("What did Ana do last Saturday?", "ana", k=3, now=monday)
            found[temporal] = result.items[0]
            assert ("channel.temporal" in result.timings_ms) is temporal
    assert found[True].text == chat[0].content and "temporal" in found[True].channels
    plain = MemoryEngine.open(tmp_path / "True", embedder="hashing")
    try:  # no time in the question: the channel is not called at all
        assert "channel.temporal" not in plain.search("half marathon", "ana").timings_ms
    finally:
        plain.close()


def test_context_discloses_long_turns_as_abstract_or_title_within_the_budget(tmp_path: Path) -> None:
    with MemoryEngine.open(tmp_path, embedder="hashing", config={"recall": {"context_budget_tokens": 120}}) as e:
        e.add_turns(TURNS, "ana")
        result = e.search("rotate Postgres credentials", "ana", k=2)
        assert result.items[0].text == LONG_ANSWER
        assert "abridged from" in result.context and LONG_ANSWER not in result.context
        assert "Postgres" in result.context  # the abstract or title still says what the turn is about
        from memory_ext.text import estimate_tokens

        assert estimate_tokens(result.context) <= 120
    with MemoryEngine.open(tmp_path, embedder="hashing") as e:  # the default budget holds the whole turn
        assert LONG_ANSWER in e.search("rotate Postgres credentials", "ana", k=1).context


def test_turns_channel_searches_raw_turns_only(tmp_path: Path) -> None:
    with MemoryEngine.open(tmp_path, embedder="hashing", config={"globals": {"turns_channel_enabled": True}}) as e:
        e.add_turns(TURNS, "ana")
        result = e.search("pastry chef in Turin", "ana", k=2, explain=True)
        assert "channel.turns" in result.timings_ms
        assert result.items[0].text == TURNS[2].content and "turns" in result.items[0].channels
        channels = result.items[0].explanation["routes"]["query"]["channels"]
        assert channels["turns"]["z"] > 0
