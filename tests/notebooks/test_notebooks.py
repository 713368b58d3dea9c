"""Every notebook in notebooks/ is stored executed (small outputs, no path of the machine that ran it) and runs top
to bottom again without an error, offline, every code cell producing output (nbclient).

Regenerate the stored outputs after changing a notebook (the default e5 embedder; 05 reads ../shared/data)::

    python tests/notebooks/test_notebooks.py                 # every notebook
    python tests/notebooks/test_notebooks.py 05_benchmarks   # one
    MEMORY_EXT_REPO=/path/to/a/checkout python tests/notebooks/test_notebooks.py 05_benchmarks
                             # a git worktree elsewhere: the checkout whose ../shared/data holds the dev data
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")

REPO = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((REPO / "notebooks").glob("*.ipynb"))
TIMEOUT_PER_CELL_S = 600      # per cell: 05's benchmark cells take minutes on a busy 2-core machine
MAX_NOTEBOOK_BYTES = 250_000          # outputs stay small: a few tables, a plot or two at 72 dpi
MAX_TEXT_LINES_PER_CELL = 120
# a path of the machine that executed the notebook: home folders, temporary folders, this checkout
MACHINE_PATH = re.compile(r"(/(?:home|Users|root|tmp|work|private|var/folders)/|\b[A-Z]:\\)")


@contextlib.contextmanager
def kernel_environment(workdir: Path, repo: Path) -> Iterator[None]:
    """The environment the kernel inherits: it finds the repository (05_benchmarks reads ../shared/data from it),
    writes matplotlib's cache in the work folder, and never reaches for a network model."""
    values = {
        "MEMORY_EXT_REPO": str(repo),
        "MPLBACKEND": "Agg",
        "MPLCONFIGDIR": str(workdir / "mpl"),
        "HF_HUB_OFFLINE": "1",
        "PYTHONWARNINGS": "ignore::DeprecationWarning",
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
    }
    saved = {key: os.environ.get(key) for key in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def execute(path: Path, workdir: Path, repo: Path = REPO) -> Any:
    """Run a notebook top to bottom in a fresh kernel started in `workdir`; return the executed notebook.
    Raises nbclient's CellExecutionError (naming the cell, with the traceback) on an error."""
    book = nbformat.read(path, as_version=4)
    with kernel_environment(workdir, repo):
        # kernel "python3" is ipykernel's own spec, launched with this interpreter (sys.executable)
        client = nbclient.NotebookClient(book, kernel_name="python3", timeout=TIMEOUT_PER_CELL_S,
                                         record_timing=False, resources={"metadata": {"path": str(workdir)}})
        client.execute()
    return book


def problems(book: Any) -> list[str]:
    """What is wrong with an executed notebook: errors, code cells without output, large or machine-specific
    outputs."""
    found = []
    for index, cell in enumerate(book.cells):
        if cell.cell_type != "code" or not cell.source.strip():
            continue
        outputs = cell.get("outputs", [])
        if not outputs:
            found.append(f"cell {index} has no output")
        lines = 0
        for output in outputs:
            if output.get("output_type") == "error":
                found.append(f"cell {index} raised {output.get('ename')}: {output.get('evalue')}")
            text = output.get("text", "") or "".join(
                value for key, value in output.get("data", {}).items() if key.startswith("text/"))
            lines += text.count("\n")
            match = MACHINE_PATH.search(text)
            if match:
                start = max(0, match.start() - 40)
                found.append(f"cell {index} shows a path of the machine: ...{text[start:match.end() + 40]!r}")
        if lines > MAX_TEXT_LINES_PER_CELL:
            found.append(f"cell {index} prints {lines} lines (at most {MAX_TEXT_LINES_PER_CELL})")
    return found


def stdout_of(book: Any) -> str:
    return "".join(o.get("text", "") for cell in book.cells if cell.cell_type == "code"
                   for o in cell.get("outputs", []) if o.get("output_type") == "stream")


def test_there_are_notebooks() -> None:
    assert NOTEBOOKS, "notebooks/*.ipynb not found"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_is_stored_executed(path: Path) -> None:
    """Opened on a code host the notebook shows what it does: every code cell was run, in order, and has output."""
    assert path.stat().st_size <= MAX_NOTEBOOK_BYTES, f"{path.name}: {path.stat().st_size:,} bytes stored"
    book = nbformat.read(path, as_version=4)
    nbformat.validate(book)
    counts = [cell.execution_count for cell in book.cells if cell.cell_type == "code" and cell.source.strip()]
    assert None not in counts and counts == sorted(counts), \
        f"{path.name} is not stored executed top to bottom: run `python tests/notebooks/test_notebooks.py`"
    assert problems(book) == [], f"{path.name}: {problems(book)}"


@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_runs_top_to_bottom(path: Path, tmp_path: Path) -> None:
    try:
        book = execute(path, tmp_path)
    except nbclient.exceptions.CellExecutionError as exc:  # the message names the cell and the traceback
        pytest.fail(f"{path.name} failed:\n{exc}", pytrace=False)
    assert problems(book) == [], f"{path.name}: {problems(book)}"


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_benchmark_notebook_skips_gracefully_without_the_data(tmp_path: Path) -> None:
    path = REPO / "notebooks" / "05_benchmarks.ipynb"
    if not path.is_file():
        pytest.skip("no 05_benchmarks.ipynb")
    bare = tmp_path / "checkout"          # a "repository" with no shared/data beside it
    bare.mkdir()
    book = execute(path, tmp_path, bare)
    out = stdout_of(book)
    assert "LoCoMo dev data absent: skipped." in out and "MADial dev data absent: skipped." in out
    assert problems(book) == []


def write_executed(names: list[str]) -> int:
    """Execute the notebooks (all, or those named by stem) and store them with their outputs."""
    chosen = [p for p in NOTEBOOKS if not names or p.stem in names or p.name in names]
    repo = Path(os.environ.get("MEMORY_EXT_REPO", REPO))
    for path in chosen:
        with tempfile.TemporaryDirectory(prefix="memext-nb-") as workdir:
            book = execute(path, Path(workdir), repo)
        found = problems(book)
        nbformat.write(book, path)
        print(f"{path.name}: {path.stat().st_size:,} bytes" + (f"; PROBLEMS: {json.dumps(found)}" if found else ""))
    return 0


if __name__ == "__main__":
    sys.exit(write_executed(sys.argv[1:]))
