"""Zero the unallocated bytes of a SQLite database file: what ``secure_delete`` does not reach.

``PRAGMA secure_delete=ON`` overwrites a deleted cell and a freed page with zeros, but when a b-tree balance
moves cells between sibling pages, SQLite rebuilds each page from its cells without clearing the space the
cells used to occupy: the old copies stay in the unallocated gap of a *live* page (between its cell pointer
array and its cell content area). Deleting the row later zeroes only its live copy. A store written a few turns
at a time and then forgotten one memory at a time leaves such copies (issue 22: a forgotten entity key in a
leaf page of ``graph_entities``' unique index).

:func:`scrub` walks every b-tree from the roots listed in ``sqlite_schema`` (page 1 included) and the freelist,
and overwrites with zeros every byte that no reader interprets: the gap of each b-tree page, the body of each
freeblock, the unused tail of each freelist trunk page and whole freelist leaf pages (the SQLite file format,
https://www.sqlite.org/fileformat2.html). Nothing a query can read changes, so a concurrent reader (this
process's or another's) sees the same rows, whichever version of a page it reads.

The caller (:meth:`memory_ext.store.sqlite.TruthStore.purge`) holds the store's write lock, has checkpointed
and truncated the write-ahead log (the database file is the whole truth), passes a descriptor it keeps open
(closing any descriptor of the file would drop the POSIX locks SQLite holds on it) and, when bytes were written,
reopens its write connection (its page cache still holds the old bytes, which the next write would copy back).
A page that does not parse as the format says is left untouched and reported: the purge then falls back to
``VACUUM``.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterable
from dataclasses import dataclass, field

__all__ = ["ScrubResult", "scrub"]

_BTREE_TYPES = {2: True, 5: True, 10: False, 13: False}
"""B-tree page type -> interior (index interior 2, table interior 5, index leaf 10, table leaf 13)."""


@dataclass
class ScrubResult:
    """What a scrub found and did."""

    pages: int = 0
    """B-tree and freelist pages examined."""
    pages_written: int = 0
    """Pages in which non-zero unallocated bytes were overwritten."""
    bytes_zeroed: int = 0
    problems: list[str] = field(default_factory=list)
    """Pages that did not parse (nothing was written when there is any)."""


def _ranges_to_zero(page: bytes, hdr: int, usable: int) -> tuple[list[tuple[int, int]], list[int], str | None]:
    """``(unallocated ranges, child pages, problem)`` of one b-tree page whose header starts at ``hdr``."""
    kind = page[hdr]
    if kind not in _BTREE_TYPES:
        return [], [], f"not a b-tree page (type {kind})"
    interior = _BTREE_TYPES[kind]
    first_free, ncell, content, _frag = struct.unpack_from(">HHHB", page, hdr + 1)
    content = content or 65536
    ptr_start = hdr + (12 if interior else 8)
    ptr_end = ptr_start + 2 * ncell
    if not ptr_end <= content <= usable:
        return [], [], f"cell content starts at {content}, outside [{ptr_end}, {usable}]"
    out = [(ptr_end, content)]
    children: list[int] = []
    if interior:
        for offset in struct.unpack_from(f">{ncell}H", page, ptr_start):
            if not content <= offset <= usable - 4:
                return [], [], f"cell at {offset}, outside the content area"
            children.append(struct.unpack_from(">I", page, offset)[0])
        children.append(struct.unpack_from(">I", page, hdr + 8)[0])
    block, previous = first_free, 0
    while block:
        if block <= previous or block < content or block + 4 > usable:
            return [], [], f"freeblock at {block} out of order or outside the content area"
        following, size = struct.unpack_from(">HH", page, block)
        if size < 4 or block + size > usable:
            return [], [], f"freeblock at {block} of {size} bytes"
        out.append((block + 4, block + size))
        previous, block = block, following
    return out, children, None


def scrub(fd: int, roots: Iterable[int]) -> ScrubResult:
    """Zero the unallocated bytes of the database open on ``fd`` (see the module docstring); ``roots`` are the
    root pages of every table and index (``SELECT rootpage FROM sqlite_schema``). Writes nothing when any page
    does not parse; ``fsync``s what it wrote."""
    result = ScrubResult()
    header = os.pread(fd, 100, 0)
    if len(header) < 100 or not header.startswith(b"SQLite format 3\x00"):
        result.problems.append("no SQLite header")
        return result
    page_size = int.from_bytes(header[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    usable = page_size - header[20]
    n_pages = os.fstat(fd).st_size // page_size
    writes: list[tuple[int, int]] = []  # (file offset, length) of ranges holding a non-zero byte

    def note(pgno: int, page: bytes, ranges: Iterable[tuple[int, int]]) -> None:
        wrote = False
        for start, stop in ranges:
            if stop > start and page.count(0, start, stop) != stop - start:
                writes.append(((pgno - 1) * page_size + start, stop - start))
                wrote = True
        result.pages_written += wrote

    seen: set[int] = set()
    stack = [1, *(int(r) for r in roots if int(r) > 1)]
    while stack:
        pgno = stack.pop()
        if pgno in seen:
            continue
        if not 1 <= pgno <= n_pages:
            result.problems.append(f"page {pgno}: beyond the file's {n_pages} pages")
            continue
        seen.add(pgno)
        page = os.pread(fd, page_size, (pgno - 1) * page_size)
        ranges, children, problem = _ranges_to_zero(page, 100 if pgno == 1 else 0, usable)
        result.pages += 1
        if problem is not None:
            result.problems.append(f"page {pgno}: {problem}")
            continue
        note(pgno, page, ranges)
        stack.extend(children)
    trunk, remaining = struct.unpack_from(">II", header, 32)
    while trunk and remaining > 0:
        if trunk in seen or not 1 < trunk <= n_pages:
            result.problems.append(f"freelist trunk page {trunk}: loops or lies beyond the file")
            break
        seen.add(trunk)
        page = os.pread(fd, page_size, (trunk - 1) * page_size)
        following, n_leaves = struct.unpack_from(">II", page, 0)
        if 8 + 4 * n_leaves > usable:
            result.problems.append(f"freelist trunk page {trunk}: {n_leaves} leaves do not fit")
            break
        result.pages += 1
        note(trunk, page, [(8 + 4 * n_leaves, usable)])
        for leaf in struct.unpack_from(f">{n_leaves}I", page, 8):
            if leaf in seen or not 1 < leaf <= n_pages:
                result.problems.append(f"freelist leaf page {leaf}: in use or beyond the file")
                continue
            seen.add(leaf)
            result.pages += 1
            note(leaf, os.pread(fd, page_size, (leaf - 1) * page_size), [(0, usable)])
        remaining -= 1 + n_leaves
        trunk = following
    if result.problems:
        result.pages_written = 0
        return result
    for offset, length in writes:
        os.pwrite(fd, bytes(length), offset)
        result.bytes_zeroed += length
    if writes:
        os.fsync(fd)
    return result
