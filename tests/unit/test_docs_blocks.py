"""Every fenced code block of the README and docs/ runs or is marked for what it is, and every relative link of
the README and docs/ reaches an existing page and heading (the README's Python snippets run in test_readme.py).
The rules are in tests/unit/docblocks.py."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from docblocks import DOC_PAGES, PYTHON, README, ROOT, blocks, broken_links, problem, run_python

BLOCKS = [block for page in [README, *DOC_PAGES] for block in blocks(page)]
RUNNABLE = [block for block in BLOCKS if block.language in PYTHON and block.not_run is None and block.path != README]
# pages another piece of work adds (a link to one is checked once it exists)
PENDING: frozenset[str] = frozenset()


def test_the_docs_have_blocks() -> None:
    assert len(BLOCKS) >= 40 and len(RUNNABLE) >= 10


@pytest.mark.parametrize("block", BLOCKS, ids=[b.name for b in BLOCKS])
def test_block_is_tagged_for_what_it_is(block) -> None:
    assert problem(block) is None, f"{block.name}: {problem(block)}"


@pytest.mark.parametrize("block", RUNNABLE, ids=[b.name for b in RUNNABLE])
def test_python_block_runs(block, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run_python(block, tmp_path, monkeypatch)


@pytest.mark.parametrize("page", [README, *DOC_PAGES], ids=lambda p: str(p.relative_to(ROOT)))
def test_links_reach_a_page_and_heading(page: Path) -> None:
    assert broken_links(page, PENDING) == []


def test_benchmarks_page_is_the_current_results() -> None:
    """docs/benchmarks.md holds the results and the commands, not the history of the work (design-notes/)."""
    text = (ROOT / "docs" / "benchmarks.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 300
    diary = re.findall(r"[Ii]ssue \d+|branch `|\b\d\d:\d\d(?:[–-]\d\d:\d\d)? UTC", text)
    assert diary == []
    assert "memext bench locomo" in text and "memext bench madial" in text


def test_not_run_markers_give_a_reason_and_compile() -> None:
    """A not-run marker is an exception, not a way around the test: each gives its reason."""
    marked = [block for block in BLOCKS if block.not_run is not None]
    assert all(block.not_run for block in marked)
