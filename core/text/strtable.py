"""A read-only table of strings to integers held in numpy arrays instead of Python objects.

A Python ``dict`` of 250,000-500,000 short strings costs 60-120 bytes per entry (the string object, the int
object, the hash slot): the e5 vocabulary and jieba's dictionary held as dicts were ~40 and ~65 MB of the
process. :class:`StrTable` keeps 16 bytes per entry: each key's 64-bit ``hash()`` (SipHash, salted per
process, so a table is built in the process that uses it), 32 bits of a second, independent hash
(:func:`check_all`) and its value, sorted by the first hash. A lookup hashes many candidate strings at once
(``map(hash, ...)`` runs in C) and finds them with one ``np.searchsorted``; a string counts as present when
both hashes match an entry's, so a string that is not a key passes for one with odds of about 2**-96 per
lookup. Keys whose first hashes clash with each other are kept apart, exactly.

>>> table = StrTable(["猫", "圣诞节", "cat"], [3, 7, 9])
>>> table.lookup(["cat", "dog", "猫"]).tolist()
[9, -1, 3]
>>> len(table), "cat" in table
(3, True)
"""

from __future__ import annotations

import ctypes
import sys
from collections.abc import Sequence

import numpy as np

__all__ = ["StrTable", "check_all", "hash_all", "release_freed_heap"]

_SALT = "\x01"
VALUE_MAX = 2**31 - 1
"""Values are stored as int32, from 0 to this."""


def release_freed_heap() -> bool:
    """Give the heap memory freed so far back to the OS (glibc's ``malloc_trim``; Linux only).

    Building a table frees hundreds of thousands of strings and a few sorting buffers; glibc keeps such
    freed heap pages unless told (measured: jieba's dictionary left 52 MB resident without, 22 MB with).
    True when glibc trimmed something."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        trim = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return False
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return bool(trim(0))


def hash_all(keys: Sequence[str]) -> np.ndarray:
    """``hash()`` of each string, as int64."""
    return np.fromiter(map(hash, keys), np.int64, len(keys))


def check_all(keys: Sequence[str]) -> np.ndarray:
    """Each string's check value (uint32): the low 32 bits of ``hash("\\x01" + key)``, a second SipHash
    whose input differs from ``hash(key)``'s, hence independent of it."""
    return np.fromiter(map(hash, map(_SALT.__add__, keys)), np.int64, len(keys)).astype(np.uint32)


class StrTable:
    """``keys`` to ``values`` (integers from 0 to :data:`VALUE_MAX`); a key given twice keeps its last value,
    as a ``dict`` would."""

    def __init__(self, keys: Sequence[str], values: Sequence[int] | np.ndarray) -> None:
        self._build(hash_all(keys), check_all(keys), np.asarray(values, dtype=np.int64))

    @classmethod
    def from_hashes(cls, hashes: np.ndarray, checks: np.ndarray, values: np.ndarray) -> StrTable:
        """A table from keys already hashed (:func:`hash_all`, :func:`check_all`); later duplicates win."""
        table = cls.__new__(cls)
        table._build(np.asarray(hashes, np.int64), np.asarray(checks, np.uint32), np.asarray(values, np.int64))
        return table

    def _build(self, hashes: np.ndarray, checks: np.ndarray, values: np.ndarray) -> None:
        if not len(hashes) == len(checks) == len(values):
            raise ValueError(f"{len(hashes)} keys but {len(values)} values")
        if len(values) and (int(values.min()) < 0 or int(values.max()) > VALUE_MAX):
            raise ValueError(f"values must be integers from 0 to {VALUE_MAX}")
        # the last occurrence of each key wins: unique over the reversed arrays keeps the first one it sees
        # (a stable lexsort of two integer columns: np.unique over a structured (hash, check) array compares
        # records one by one, seconds for jieba's 1.3 million words and prefixes)
        h, c = hashes[::-1], checks[::-1]
        order = np.lexsort((c, h))  # sorted by hash, then check; equal keys in the reversed order
        h, c = h[order], c[order]
        new = np.ones(len(order), bool)
        new[1:] = (h[1:] != h[:-1]) | (c[1:] != c[:-1])
        first = order[new]
        self._hash = np.ascontiguousarray(h[new])
        self._check = np.ascontiguousarray(c[new])
        self._values = values[::-1][first].astype(np.int32)
        clash = np.flatnonzero(self._hash[1:] == self._hash[:-1]) + 1  # after the first key of a shared hash
        self._clash: dict[tuple[int, int], int] = {
            (int(self._hash[i]), int(self._check[i])): int(self._values[i]) for i in clash}

    def __len__(self) -> int:
        return len(self._hash)

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and int(self.lookup([key])[0]) >= 0

    @property
    def nbytes(self) -> int:
        """Bytes of the arrays (what the table keeps resident)."""
        return int(self._hash.nbytes + self._check.nbytes + self._values.nbytes)

    def lookup(self, keys: Sequence[str], default: int = -1) -> np.ndarray:
        """The value of each of ``keys`` (int64), ``default`` where it is not in the table."""
        out = np.full(len(keys), default, dtype=np.int64)
        if not len(keys) or not len(self._hash):
            return out
        h = hash_all(keys)
        pos = np.searchsorted(self._hash, h)
        np.minimum(pos, len(self._hash) - 1, out=pos)
        cand = np.flatnonzero(self._hash[pos] == h)
        if not len(cand):
            return out
        check = check_all([keys[i] for i in cand.tolist()])
        found = self._check[pos[cand]] == check
        out[cand[found]] = self._values[pos[cand[found]]]
        if self._clash:
            for i, c in zip(cand[~found].tolist(), check[~found].tolist(), strict=True):
                value = self._clash.get((int(h[i]), int(c)))
                if value is not None:
                    out[i] = value
        return out
