"""The thread count of numpy's BLAS (OpenBLAS), which the engine sets when it opens (``globals.blas_threads``).

A search multiplies small matrices (the query against a namespace's vectors, MMR's pool against itself). OpenBLAS
splits even those over all cores, and its threads hand work over by spinning and sleeping: on a machine whose
cores are busy (the background indexer, other processes) one such product then waits for a core for milliseconds
instead of taking microseconds. Measured on LoCoMo dev questions with the hashing embedder on 2 cores: search
p50 / p95 3.2 / 16.2 ms with OpenBLAS's default threads, 2.6 / 4.0 ms with one (load average 0.6); under a load
of 7, p50 33 vs 4.6 ms. Bulk work does not need BLAS threads either: the embedder brings its own, and the
indexer runs its batches on threads of its own.

The setting is process-wide (OpenBLAS has one thread count per process), like the embedder's OpenMP threads; a
BLAS other than OpenBLAS (MKL, Accelerate) is left alone.

>>> limit_blas_threads(None)
False
"""

from __future__ import annotations

import contextlib
import ctypes
import glob
import os
import threading

__all__ = ["blas_libraries", "limit_blas_threads"]

_SETTERS = ("openblas_set_num_threads", "scipy_openblas_set_num_threads64_", "scipy_openblas_set_num_threads",
            "openblas_set_num_threads64_")
_lock = threading.Lock()


def blas_libraries() -> list[str]:
    """Paths of the OpenBLAS libraries loaded in this process (numpy's first)."""
    import numpy as np

    found: list[str] = []
    root = os.path.dirname(os.path.dirname(os.path.abspath(np.__file__)))
    for folder in ("numpy.libs", os.path.join("numpy", ".dylibs")):
        found += sorted(glob.glob(os.path.join(root, folder, "*openblas*")))
    # Linux: whatever else is mapped (a system libopenblas)
    with contextlib.suppress(OSError), open("/proc/self/maps", encoding="utf-8", errors="replace") as maps:
        for line in maps:
            parts = line.split(maxsplit=5)
            path = parts[5].strip() if len(parts) == 6 else ""
            if "openblas" in os.path.basename(path).lower() and path not in found:
                found.append(path)
    return found


def limit_blas_threads(threads: int | None) -> bool:
    """Set OpenBLAS's thread count to ``threads`` (None: leave it); True when an OpenBLAS library took it."""
    if threads is None:
        return False
    with _lock:
        done = False
        for path in blas_libraries():
            try:
                lib = ctypes.CDLL(path)
            except OSError:
                continue
            for name in _SETTERS:
                setter = getattr(lib, name, None)
                if setter is not None:
                    setter.argtypes = [ctypes.c_int]
                    setter.restype = None
                    setter(int(threads))
                    done = True
                    break
        return done
