"""Every notebook in notebooks/ runs top to bottom without an error (offline, with nbclient) and is stored stripped."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")

REPO = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((REPO / "notebooks").glob("*.ipynb"))
TIMEOUT_PER_CELL_S = 300


def test_there_are_notebooks() -> None:
    assert NOTEBOOKS, "notebooks/*.ipynb not found"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_is_stored_without_outputs(path: Path) -> None:
    book = nbformat.read(path, as_version=4)
    nbformat.validate(book)
    for index, cell in enumerate(book.cells):
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, \
                f"{path.name} cell {index} has outputs: strip them before committing"


def execute(path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, repo: Path):
    """Run a notebook top to bottom in a fresh kernel; fail with the cell's traceback on any error."""
    # the kernel inherits this environment: it finds the repository (05_benchmarks reads ../shared/data from it),
    # writes matplotlib's cache in the temporary folder, and never reaches for a network model
    monkeypatch.setenv("MEMORY_EXT_REPO", str(repo))
    monkeypatch.setenv("MPLBACKEND", "Agg")
    monkeypatch.setenv("MPLCONFIGDIR", str(tmp_path / "mpl"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
    book = nbformat.read(path, as_version=4)
    # kernel "python3" is ipykernel's own spec, launched with this interpreter (sys.executable)
    client = nbclient.NotebookClient(book, kernel_name="python3", timeout=TIMEOUT_PER_CELL_S,
                                     resources={"metadata": {"path": str(tmp_path)}})
    try:
        client.execute()
    except nbclient.exceptions.CellExecutionError as exc:  # the message names the cell and the traceback
        pytest.fail(f"{path.name} failed:\n{exc}", pytrace=False)
    errors = [output for cell in book.cells if cell.cell_type == "code" for output in cell.get("outputs", [])
              if output.get("output_type") == "error"]
    assert not errors, f"{path.name}: {errors}"
    return book


def stdout_of(book) -> str:
    return "".join(o.get("text", "") for cell in book.cells if cell.cell_type == "code"
                   for o in cell.get("outputs", []) if o.get("output_type") == "stream")


@pytest.mark.slow
@pytest.mark.timeout(600)
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_runs_top_to_bottom(path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    execute(path, tmp_path, monkeypatch, REPO)


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_benchmark_notebook_skips_gracefully_without_the_data(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    path = REPO / "notebooks" / "05_benchmarks.ipynb"
    if not path.is_file():
        pytest.skip("no 05_benchmarks.ipynb")
    bare = tmp_path / "checkout"          # a "repository" with no shared/data beside it
    bare.mkdir()
    out = stdout_of(execute(path, tmp_path, monkeypatch, bare))
    assert "LoCoMo dev data absent: skipped." in out and "MADial dev data absent: skipped." in out
