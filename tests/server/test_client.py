"""RemoteEngine beyond the conformance suite: transport failures, a closed client, the local state directory."""

from __future__ import annotations

from pathlib import Path

import pytest

from memory_ext import EngineLike, InvalidArgumentError, ValidationError
from memory_ext.client import RemoteEngine, ServerUnavailableError
from memory_ext.server import background_server

from .conftest import free_port


def test_an_unreachable_server_is_a_clear_error() -> None:
    with pytest.raises(ServerUnavailableError) as info:
        RemoteEngine(f"http://127.0.0.1:{free_port()}", timeout=5)
    assert "ConnectError" in str(info.value)
    with pytest.raises(InvalidArgumentError):
        RemoteEngine("127.0.0.1:8765")


def test_closed_client_and_local_state(tmp_path: Path) -> None:
    with background_server(tmp_path / "store", embedder="hashing", tokens=["t-0123456789:maya"]) as server:
        engine = RemoteEngine(server.url, token="t-0123456789", path=tmp_path / "local")
        assert engine.user_id == "maya" and engine.embedder is None
        assert isinstance(engine, EngineLike) and not (tmp_path / "local").exists()  # a check runs no property
        assert engine.path == tmp_path / "local" and engine.path.is_dir()
        assert engine.health()
        engine.add_turns([{"role": "user", "content": "I keep bees."}], "maya")
        assert [t.content for t in server.engine.get_turns("maya")] == ["I keep bees."]
        engine.close()
        engine.close()  # idempotent
        with pytest.raises(ValidationError) as info:
            engine.search("bees", "maya")
        assert info.value.field == "engine"


def test_background_server_refuses_to_bind_beyond_loopback_without_tokens(tmp_path: Path) -> None:
    from memory_ext import ConfigError

    with pytest.raises(ConfigError), background_server(tmp_path / "store", embedder="hashing", host="0.0.0.0"):
        pass
    assert not (tmp_path / "store").exists()
