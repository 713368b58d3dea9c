"""numpy's BLAS threads (globals.blas_threads): set when an engine opens, left alone with None."""

from __future__ import annotations

import ctypes

import pytest

from memory_ext import MemoryEngine
from memory_ext.blas import blas_libraries, limit_blas_threads


def _openblas_threads() -> int | None:
    for path in blas_libraries():
        lib = ctypes.CDLL(path)
        for name in ("openblas_get_num_threads", "scipy_openblas_get_num_threads64_",
                     "scipy_openblas_get_num_threads"):
            getter = getattr(lib, name, None)
            if getter is not None:
                getter.restype = ctypes.c_int
                return int(getter())
    return None


def test_none_leaves_blas_alone() -> None:
    assert limit_blas_threads(None) is False


def test_engine_open_sets_the_configured_threads(tmp_path) -> None:
    before = _openblas_threads()
    if before is None:
        pytest.skip("numpy is not linked against OpenBLAS here")
    try:
        with MemoryEngine.open(tmp_path / "a", embedder="hashing", config={"globals": {"blas_threads": 2}}):
            assert _openblas_threads() == 2
        with MemoryEngine.open(tmp_path / "b", embedder="hashing"):  # the default: one thread
            assert _openblas_threads() == 1
        with MemoryEngine.open(tmp_path / "c", embedder="hashing", config={"globals": {"blas_threads": None}}):
            assert _openblas_threads() == 1  # None: left as it was
    finally:
        limit_blas_threads(before)
