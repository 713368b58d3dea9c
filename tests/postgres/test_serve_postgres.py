"""memext serve in front of a PostgreSQL memory: two servers (two "hosts") on one schema serve the same memories."""

from __future__ import annotations

import pytest

from memory_ext.client import RemoteEngine
from memory_ext.server import background_server
from memory_ext.server.settings import ServerSettings

pytestmark = pytest.mark.postgres


def test_two_servers_share_one_postgres_memory(postgres_dsn: str, pg_schema: str) -> None:
    config = {"storage": {"postgres_schema": pg_schema}}
    with background_server(postgres_dsn, embedder="hashing", config=config) as a, \
            background_server(postgres_dsn, embedder="hashing", config=config) as b, \
            RemoteEngine(a.url) as via_a, RemoteEngine(b.url) as via_b:
        via_a.add_turns([{"role": "user", "content": "I keep bees on the roof of the library"}], "zoe", wait=True)
        hits = via_b.search("bees on the roof", "zoe", k=1)
        assert hits.items and "bees" in hits.items[0].text
        assert via_b.stats().vector_backend == "pgvector"


def test_server_settings_keep_a_dsn() -> None:
    settings = ServerSettings.resolve(path="postgresql://memory@db-host:5432/memory")
    assert settings.path == "postgresql://memory@db-host:5432/memory"
