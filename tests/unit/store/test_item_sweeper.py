"""The process holding the writer sweeps expired items on a timer (the embedded engine, hence ``memext serve``)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

import memory_ext.lifecycle.items as items_module
from memory_ext import MemoryEngine


def test_the_writer_sweeps_expired_items_on_its_timer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(items_module, "SWEEP_INTERVAL_S", 0.01)
    past = datetime(2020, 1, 1, tzinfo=UTC)  # stamped by the caller's clock: expired by the time the timer runs
    with MemoryEngine.open(tmp_path / "s", embedder="hashing") as engine:
        engine.put_items("ana", [{"namespace": ["notes"], "key": "n1", "value": {"text": "call the vet"},
                                  "text": "call the vet", "ttl_minutes": 1}], now=past)
        assert engine.get_items("ana", [(["notes"], "n1")], now=past)[0] is not None
        assert engine.item_sweeps is not None
        while engine.get_turns("ana"):  # each timer run sets the event; the first one after the put removes it
            engine.item_sweeps.clear()
            assert engine.item_sweeps.wait(30)
        assert engine.get_items("ana", [(["notes"], "n1")], now=past) == [None]


def test_a_read_only_engine_does_not_sweep(tmp_path: Path) -> None:
    MemoryEngine.open(tmp_path / "s", embedder="hashing").close()
    with MemoryEngine.open(tmp_path / "s", embedder="hashing", read_only=True) as engine:
        assert engine.item_sweeps is None and engine.sweep_items() == 0
