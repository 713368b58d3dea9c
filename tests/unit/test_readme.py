"""The README is what a newcomer reads in ten minutes: its two commands are the ones CI runs (.ci/run), it shows
each face, it stays short, and every Python snippet in it runs as written, in a temporary directory (a snippet of
a feature still being built is marked not-run with the reason; the other blocks are checked with docs/'s in
test_docs_blocks.py; the rules are in tests/unit/docblocks.py)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from docblocks import PYTHON, README, ROOT, blocks, run_python

TEXT = README.read_text(encoding="utf-8")
BLOCKS = blocks(README)
RUNNABLE = [block for block in BLOCKS if block.language in PYTHON and block.not_run is None]
INSTALL_AND_DEMO = 'pip install -e ".[all]" && memext demo'
INSTALL_AND_TEST = 'pip install -e ".[all,test]" && pytest'


def test_the_readme_has_snippets() -> None:
    assert len(RUNNABLE) >= 3


def test_the_two_commands_are_the_ones_ci_runs() -> None:
    shell = [block.body.strip() for block in BLOCKS if block.language == "bash"]
    assert INSTALL_AND_DEMO in shell and INSTALL_AND_TEST in shell
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert 'pip install -e ".[all,test]"' in ci and re.search(r"^\s*(\S+=\S+ )*pytest\s*$", ci, re.M)


def test_the_readme_reads_in_ten_minutes() -> None:
    assert len(TEXT.splitlines()) <= 250
    headings = re.findall(r"^## (.+)$", TEXT, re.M)
    for face in ("LangChain", "Agent", "LlamaIndex", "MCP"):
        section = next((h for h in headings if face in h), None)
        assert section, f"no section for {face}"
        body = TEXT.split(f"## {section}\n", 1)[1].split("\n## ", 1)[0]
        assert "```" in body, f"the {face} section has no example"
    assert any("Limit" in h for h in headings) and any("Result" in h for h in headings)


@pytest.mark.parametrize("block", RUNNABLE, ids=[b.name for b in RUNNABLE])
def test_readme_snippet_runs(block, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run_python(block, tmp_path, monkeypatch)
