"""Defect 6 of issue 14: the ``memext`` command's defaults, errors and terminal safety."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from memory_ext import __version__
from memory_ext.cli import main
from tests.fault.faultkit import SnapshotReader, scan_bytes


class Terminal(io.StringIO):
    """A text stream that says it is a terminal."""

    def isatty(self) -> bool:
        return True


def _store(tmp_path: Path, turns: list[dict[str, str]] | None = None) -> list[str]:
    file = tmp_path / "turns.json"
    file.write_text(json.dumps(turns or [{"role": "user", "content": "I adopted a beagle called Toby"}]))
    common = ["--path", str(tmp_path / "store"), "--embedder", "hashing"]
    assert main(["ingest", str(file), *common]) == 0
    return common


def test_without_user_every_subcommand_uses_the_default_user(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    common = _store(tmp_path)
    assert "for user 'default'" in capsys.readouterr().out
    assert main(["search", "beagle", *common]) == 0
    assert "Toby" in capsys.readouterr().out
    assert main(["prompt", *common]) == 0 and "daily" in capsys.readouterr().out
    assert main(["retrieve", "nope-not-a-hook", *common]) == 2  # retrieve without --user: any namespace
    assert main(["forget", "--all", *common]) == 0
    assert json.loads(capsys.readouterr().out)["namespace"]["user_id"] == "default"


@pytest.mark.parametrize(("content", "needle"), [(None, "cannot read it"), ("[{\"role\": \"user\", ", "not valid JSON"),
                                                 ("{\"role\": \"user\"}\nnot json\n", "line 2"),
                                                 ("{\"turns\": 5}", "turns[0]"),
                                                 (b"\xff\xfe\x00bad", "cannot read it")])
def test_a_missing_or_malformed_file_is_one_line_and_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                             content: str | bytes | None, needle: str) -> None:
    file = tmp_path / "turns.jsonl"
    if isinstance(content, bytes):
        file.write_bytes(content)
    elif content is not None:
        file.write_text(content)
    assert main(["ingest", str(file), "--path", str(tmp_path / "store"), "--embedder", "hashing"]) == 2
    err = capsys.readouterr().err
    assert needle in err and err.count("\n") == 1 and "Traceback" not in err
    assert not (tmp_path / "store").exists()


@pytest.mark.parametrize("command", [["search", "beagle"], ["stats"], ["prompt"], ["compact"], ["forget", "--all"],
                                     ["retrieve", "abcdef"]])
def test_a_mistyped_path_is_an_error_not_a_new_store(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                    command: list[str]) -> None:
    assert main([*command, "--path", str(tmp_path / "typo"), "--embedder", "hashing"]) == 2
    assert "no memory-ext store" in capsys.readouterr().err
    assert not (tmp_path / "typo").exists()


def test_compact_of_an_unknown_user_says_nothing_was_compacted(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    common = _store(tmp_path)
    capsys.readouterr()
    assert main(["compact", *common, "--user", "ghost"]) == 0
    out = capsys.readouterr().out
    assert "no namespace ghost/-" in out and "nothing was compacted" in out and "compacted 1" not in out


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == 0 and capsys.readouterr().out.strip() == f"memext {__version__}"


def test_ansi_escapes_in_user_text_are_neutralised_on_a_terminal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    evil = "Toby the beagle \x1b[2J\x1b]0;pwned\x07 \x1b[31mred"
    common = _store(tmp_path, [{"role": "user", "content": evil}])
    capsys.readouterr()
    terminal = Terminal()
    monkeypatch.setattr("sys.stdout", terminal)
    assert main(["search", "beagle", *common]) == 0
    assert main(["prompt", *common]) == 0
    shown = terminal.getvalue()
    assert "\x1b" not in shown and "\x07" not in shown and "\\x1b[2J" in shown
    monkeypatch.undo()
    assert main(["search", "beagle", *common, "--json"]) == 0  # a pipe gets the stored text unchanged
    assert "\\u001b[2J" in capsys.readouterr().out


@pytest.mark.timeout(90)
def test_forget_purge_finishes_a_pending_purge(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    common = _store(tmp_path, [{"role": "user", "content": f"my secret is wombatquill {i}"} for i in range(10)])
    store = tmp_path / "store"
    capsys.readouterr()
    with SnapshotReader(store / "memory.sqlite3") as reader:
        assert main(["forget", "--all", *common]) == 0
        assert json.loads(capsys.readouterr().out)["purge_complete"] is False
        assert main(["forget", "--purge", "--wait", "0", *common]) == 1
        assert "purge pending" in capsys.readouterr().err
        reader.release()
    assert main(["forget", "--purge", *common]) == 0
    assert "purge complete" in capsys.readouterr().out
    assert scan_bytes(store, [b"wombatquill"]) == {}


def test_a_corrupt_store_is_one_line_not_a_traceback(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    common = _store(tmp_path)
    db = tmp_path / "store" / "memory.sqlite3"
    db.write_bytes(db.read_bytes()[:5000])
    capsys.readouterr()
    assert main(["search", "beagle", *common]) == 2
    err = capsys.readouterr().err
    assert "cannot be read" in err and "backup" in err and err.count("\n") == 1 and "Traceback" not in err
