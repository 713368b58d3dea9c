"""Bearer tokens: refusals (no token, wrong token, a token pinned to another user), the loopback rule, settings
from flags, environment and file, and logs without secrets."""

from __future__ import annotations

import logging
from pathlib import Path

import httpx
import pytest

from memory_ext import ConfigError
from memory_ext.client import AuthenticationError, PermissionDeniedError, RemoteEngine
from memory_ext.server import ServerSettings, TokenTable

from .conftest import ADMIN, ANA, LiveServer

SECRET_TEXT = "my bank PIN is 4921"


def test_no_token_and_wrong_token_are_refused(live_server: LiveServer) -> None:
    for token in (None, "not-a-known-token"):
        with live_server.client(token) as client:
            response = client.post("/v1/search", json={"user_id": "ana", "query": "x"})
            assert response.status_code == 401
            assert response.headers["www-authenticate"].startswith("Bearer")
            error = response.json()["error"]
            assert error["type"] == "AuthenticationError" and error["field"] == "Authorization"
    with httpx.Client(base_url=live_server.url, headers={"Authorization": f"Basic {ADMIN}"}) as client:
        assert client.get("/v1/namespaces").status_code == 401
    with pytest.raises(AuthenticationError):
        RemoteEngine(live_server.url)
    with pytest.raises(AuthenticationError):
        RemoteEngine(live_server.url, token="not-a-known-token")


def test_a_pinned_token_reaches_only_its_user(live_server: LiveServer) -> None:
    with live_server.client(ADMIN) as admin:
        admin.post("/v1/turns", json={"user_id": "ben", "turns": [{"role": "user", "content": "Ben's secret plan"}]})
        hook = admin.get("/v1/hooks", params={"user_id": "ben"}).json()[0]["id"]
    with live_server.client(ANA) as ana:
        assert ana.post("/v1/turns", json={"user_id": "ana", "turns": [{"role": "user", "content": "hi"}]}
                        ).status_code == 200
        for response in (ana.post("/v1/search", json={"user_id": "ben", "query": "plan"}),
                         ana.get("/v1/turns", params={"user_id": "ben"}),
                         ana.post("/v1/forget", json={"user_id": "ben"}),
                         ana.get(f"/v1/files/{hook}", params={"user_id": "ben"}),
                         ana.get("/v1/stats")):
            assert response.status_code == 403, response.text
            assert response.json()["error"]["type"] == "PermissionDeniedError"
        # without a namespace, a pinned token is held to its own user: another user's file is not found
        assert ana.get(f"/v1/files/{hook}").status_code == 404
        assert [n["user_id"] for n in ana.get("/v1/namespaces").json()] == ["ana"]
    remote = RemoteEngine(live_server.url, token=ANA)
    assert remote.user_id == "ana"
    with pytest.raises(PermissionDeniedError):
        remote.search("plan", "ben")
    with pytest.raises(PermissionDeniedError):
        remote.get_turns("ben")
    assert remote.get_turns("ana")[0].content == "hi"
    remote.close()
    with live_server.client(ADMIN) as admin:
        assert len(admin.get("/v1/turns", params={"user_id": "ben"}).json()) == 1  # untouched


def test_logs_hold_no_token_and_no_memory_text(live_server: LiveServer, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    with live_server.client(ANA) as client:
        client.post("/v1/turns", json={"user_id": "ana", "turns": [{"role": "user", "content": SECRET_TEXT}]})
        client.post("/v1/search", json={"user_id": "ana", "query": SECRET_TEXT})
        client.post("/v1/turns", json={"user_id": "ana", "turns": [{"role": "robot", "content": SECRET_TEXT}]})
    with live_server.client("wrong-token-but-long") as client:
        client.post("/v1/search", json={"user_id": "ana", "query": SECRET_TEXT})
    text = "\n".join(r.getMessage() for r in caplog.records)
    assert "/v1/search" in text  # requests are logged...
    for secret in (ANA, ADMIN, "wrong-token-but-long", SECRET_TEXT, "4921"):
        assert secret not in text  # ...without tokens or memory text


def test_tokens_are_required_beyond_loopback(tmp_path: Path) -> None:
    for host in ("127.0.0.1", "localhost", "::1"):
        ServerSettings.resolve(path=str(tmp_path), host=host, env={}).check_binding()
    with pytest.raises(ConfigError) as info:
        ServerSettings.resolve(path=str(tmp_path), host="0.0.0.0", env={}).check_binding()
    assert info.value.field == "host" and "token" in info.value.fix
    ServerSettings.resolve(path=str(tmp_path), host="0.0.0.0", tokens=["a-long-token-1"], env={}).check_binding()


def test_settings_from_flags_environment_and_file(tmp_path: Path) -> None:
    tokens_file = tmp_path / "tokens"
    tokens_file.write_text("# comment\nfile-token-123 ana\nfile-admin-123\n")
    config = tmp_path / "memext.yaml"
    config.write_text("server:\n  host: 0.0.0.0\n  port: 9000\n  tokens: [{token: cfg-token-123, user_id: ben}]\n"
                      "globals:\n  graph_enabled: true\n")
    env = {"MEMORY_EXT_PORT": "9100", "MEMORY_EXT_TOKENS": "env-token-123:chen,env-admin-123",
           "MEMORY_EXT_TOKENS_FILE": str(tokens_file), "MEMORY_EXT_EMBEDDER": "hashing",
           "MEMORY_EXT_PATH": str(tmp_path / "store")}
    settings = ServerSettings.resolve(config=str(config), port=9200, env=env)
    assert (settings.host, settings.port, settings.embedder) == ("0.0.0.0", 9200, "hashing")  # flag > env > file
    assert settings.path == str(tmp_path / "store")
    assert settings.engine_config == {"globals": {"graph_enabled": True}}
    assert ServerSettings.resolve(config=str(config), env=env).port == 9100
    table = settings.tokens
    assert [table.authenticate(f"Bearer {t}").user_id for t in  # type: ignore[union-attr]
            ("file-token-123", "file-admin-123", "cfg-token-123", "env-token-123", "env-admin-123")] == \
        ["ana", None, "ben", "chen", None]
    with pytest.raises(ConfigError):
        TokenTable.parse(["short"])
    bad = tmp_path / "bad.yaml"
    bad.write_text("server:\n  colour: red\n")
    with pytest.raises(ConfigError) as info:
        ServerSettings.resolve(config=str(bad), env={})
    assert info.value.field == "server.colour"
