"""The memext command on a PostgreSQL store: a DSN as --path, the schema from --config."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memory_ext.cli import main

pytestmark = pytest.mark.postgres


def test_ingest_search_stats_and_a_missing_store(postgres_dsn: str, pg_schema: str, tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "pg.json"
    config.write_text(json.dumps({"storage": {"postgres_schema": pg_schema}}))
    common = ["--path", postgres_dsn, "--embedder", "hashing", "--config", str(config)]
    assert main(["search", "beagle", "--user", "ana", *common]) == 2  # nothing there yet: no store is created
    assert "no memory-ext store in PostgreSQL schema" in capsys.readouterr().err
    turns = tmp_path / "turns.jsonl"
    turns.write_text('{"role": "user", "content": "I adopted a beagle called Toby"}\n'
                     '{"role": "user", "content": "My sister Lena moved to Porto"}\n')
    assert main(["ingest", str(turns), "--user", "ana", *common]) == 0
    assert postgres_dsn in capsys.readouterr().out  # the DSN, not a path mangled into a directory name
    assert main(["search", "beagle Toby", "--user", "ana", *common]) == 0
    assert "beagle called Toby" in capsys.readouterr().out
    assert main(["stats", *common]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert stats["turns"] == 2 and stats["vector_backend"] == "pgvector"
