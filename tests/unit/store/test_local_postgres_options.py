"""``memext postgres start`` is durable unless asked (issue 22 §5): the command line of the server."""

from __future__ import annotations

from pathlib import Path

import pytest

from memory_ext.store.pg.server import UNSAFE_FAST_OPTIONS, LocalPostgres


def test_the_local_server_keeps_fsync_on_by_default(tmp_path: Path) -> None:
    options = LocalPostgres(tmp_path, 5433).server_options()
    assert "fsync=off" not in options and "synchronous_commit=off" not in options
    assert "full_page_writes=off" not in options and "-p 5433" in options


def test_unsafe_fast_turns_them_off_only_when_asked(tmp_path: Path) -> None:
    options = LocalPostgres(tmp_path, 5433, unsafe_fast=True).server_options()
    assert options.endswith(UNSAFE_FAST_OPTIONS) and "fsync=off" in options


def test_the_command_line_flag_reaches_the_server(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    import memory_ext.store.cli as cli
    from memory_ext.store.pg import server as server_module

    made: list[LocalPostgres] = []

    def fake_start(self: LocalPostgres, timeout: float = 60) -> LocalPostgres:
        made.append(self)
        return self

    monkeypatch.setattr(server_module.LocalPostgres, "start", fake_start)
    monkeypatch.setattr(cli, "_check_vector", lambda dsn: None)
    parser = cli.argparse.ArgumentParser()
    cli.add_postgres_parser(parser.add_subparsers(dest="command"))
    for argv, unsafe in ((["postgres", "start", "--dir", str(tmp_path / "a")], False),
                         (["postgres", "start", "--dir", str(tmp_path / "b"), "--unsafe-fast"], True)):
        args = parser.parse_args(argv)
        assert args.func(args) == 0
        assert made[-1].unsafe_fast is unsafe
        assert ("fsync=off" in made[-1].server_options()) is unsafe
        assert ("WARNING: PostgreSQL runs with fsync=off" in capsys.readouterr().err) is unsafe
