"""jieba's precise-mode segmentation (HMM on) over jieba's own dictionary, kept in numpy (:class:`StrTable`).

``jieba.dt.initialize()`` builds a ``dict`` of its 349,046 words and all their prefixes (498,113 strings, ~65
MB resident), and ``jieba.posseg`` another of each word's part-of-speech tag (~50 MB with its HMM tables).
This module reads the same ``dict.txt`` into one :class:`StrTable` (words and prefixes, 8 MB) and gives the
same words as ``jieba.lcut(text, HMM=True)``: the same DAG of dictionary words (every prefix of a word is in
the table, so a scan that stops at the first fragment that is not a prefix finds every word jieba finds), the
same route (``log(freq or 1) - log(total)`` summed, ties to the longer word, in the same float arithmetic) and
jieba's own HMM (``jieba.finalseg``, small tables) for runs of single characters that are not a word. Tested
against jieba on Chinese text (tests/unit/text/test_segment.py).

>>> lcut("我喜欢圣诞节")
['我', '喜欢', '圣诞节']
>>> word_freq("圣诞节") > 0, word_tag("北京")
(True, 'ns')
"""

from __future__ import annotations

import math
import os
import re
import threading
from collections.abc import Iterator

import numpy as np

from memory_ext.text.strtable import _SALT, StrTable, check_all, hash_all, release_freed_heap

__all__ = ["Dictionary", "dictionary", "lcut", "loaded", "word_freq", "word_tag"]

# jieba's own block patterns (jieba.re_han_default, jieba.re_skip_default)
_RE_HAN = re.compile("([\u4e00-\u9fd5a-zA-Z0-9+#&\\._%\\-]+)")
_RE_SKIP = re.compile("(\r\n|\\s)")
_BATCH_LEN = 4
_MEMO_SIZE = 2048


class Dictionary:
    """jieba's ``dict.txt``: word frequencies (0 for a prefix that is no word), tags, the total frequency."""

    def __init__(self, path: str) -> None:
        words: list[str] = []
        freqs: list[int] = []
        tags: list[str] = []
        with open(path, "rb") as fh:
            for lineno, raw in enumerate(fh, 1):
                line = raw.strip().decode("utf-8")
                if not line:
                    continue
                parts = line.split(" ")
                try:
                    freqs.append(int(parts[1]))
                except (IndexError, ValueError):
                    raise ValueError(f"{path}: invalid dictionary entry at line {lineno}: {line}") from None
                words.append(parts[0])
                tags.append(parts[2] if len(parts) == 3 else "")
        self.total = sum(freqs)  # jieba counts a word given twice twice
        self._logtotal = math.log(self.total)
        self.max_len = max(len(w) for w in words)
        self.tag_names = sorted(set(tags))
        tag_index = {t: i for i, t in enumerate(self.tag_names)}
        if len(self.tag_names) >= 255:
            raise ValueError(f"{path}: more part-of-speech tags than this table holds")
        n_prefix = sum(len(w) - 1 for w in words)
        # prefixes first, words after them: a word's own entry (its last line) wins over a prefix of another;
        # the prefixes are hashed from generators, never held as a list
        hashes = np.empty(n_prefix + len(words), np.int64)
        hashes[:n_prefix] = np.fromiter((hash(w[:i]) for w in words for i in range(1, len(w))), np.int64, n_prefix)
        hashes[n_prefix:] = hash_all(words)
        checks = np.empty(len(hashes), np.uint32)
        checks[:n_prefix] = np.fromiter((hash(_SALT + w[:i]) for w in words for i in range(1, len(w))), np.int64,
                                        n_prefix).astype(np.uint32)
        checks[n_prefix:] = check_all(words)
        # value: frequency * 256 + tag index + 1 (0 for a bare prefix, which has neither)
        values = np.zeros(len(hashes), np.int64)
        values[n_prefix:] = np.asarray(freqs, np.int64) * 256 + np.asarray([tag_index[t] + 1 for t in tags])
        self.table = StrTable.from_hashes(hashes, checks, values)
        self._memo: dict[str, list[str]] = {}

    def freq_tag(self, word: str) -> tuple[int, str]:
        """The word's frequency and part-of-speech tag (``jieba.posseg``'s table) in one lookup: ``(0, "")``
        when it is only a prefix of words, or unknown; ``""`` for a word without a tag."""
        value = max(int(self.table.lookup([word])[0]), 0)
        code = value & 0xFF
        return value >> 8, self.tag_names[code - 1] if code else ""

    def freq(self, word: str) -> int:
        """The word's frequency in the dictionary; 0 when it is only a prefix of words, or unknown."""
        return self.freq_tag(word)[0]

    def tag(self, word: str) -> str:
        """The word's part-of-speech tag in the dictionary; ``""`` if it has none."""
        return self.freq_tag(word)[1]

    def _words(self, sentence: str) -> list[list[tuple[int, float]]]:
        """jieba's ``get_DAG`` with its route weights: for each start ``k``, ``(j, log(freq) - log(total))`` of
        every dictionary word ``sentence[k:j + 1]`` (``(k, -log(total))`` when there is none)."""
        n = len(sentence)
        width = min(_BATCH_LEN, n)
        # the first lengths of every start in one lookup, then length by length while a fragment is still a
        # prefix of some word
        vals = self.table.lookup([sentence[k:k + m] for k in range(n) for m in range(1, width + 1)])
        vals = vals.reshape(n, width)
        vals[np.arange(n)[:, None] + np.arange(1, width + 1)[None, :] > n] = -1  # fragments cut by the end
        starts, lens = np.nonzero(vals >= 256)
        found = [(starts.tolist(), (starts + lens).tolist(), (vals[starts, lens] >> 8).tolist())]
        active = np.flatnonzero(vals[:, -1] >= 0).tolist() if width == _BATCH_LEN else []
        length = width + 1
        while active:
            active = [k for k in active if k + length <= n]
            got = self.table.lookup([sentence[k:k + length] for k in active]).tolist()
            words = [(k, v) for k, v in zip(active, got, strict=True) if v >= 256]
            found.append(([k for k, _ in words], [k + length - 1 for k, _ in words], [v >> 8 for _, v in words]))
            active = [k for k, v in zip(active, got, strict=True) if v >= 0]
            length += 1
        logtotal = self._logtotal
        out: list[list[tuple[int, float]]] = [[] for _ in range(n)]
        for ks, ends, freqs in found:
            for k, j, f in zip(ks, ends, freqs, strict=True):
                out[k].append((j, math.log(f) - logtotal))
        for k in range(n):
            if not out[k]:
                out[k].append((k, 0.0 - logtotal))  # jieba: log(FREQ.get(char) or 1)
        return out

    def _cut_block(self, sentence: str) -> Iterator[str]:
        """jieba's ``__cut_DAG`` over one block of its ``re_han`` pattern."""
        from jieba import finalseg

        words = self._words(sentence)
        n = len(sentence)
        score = [0.0] * (n + 1)
        end = [0] * (n + 1)
        for idx in range(n - 1, -1, -1):
            # jieba: max((log(freq or 1) - logtotal + route[x + 1][0], x) for x in DAG[idx]), ties to larger x
            score[idx], end[idx] = max((w + score[j + 1], j) for j, w in words[idx])
        x = 0
        buf = ""
        while x < n:
            y = end[x] + 1
            word = sentence[x:y]
            if y - x == 1:
                buf += word
            else:
                if buf:
                    yield from self._flush(buf, finalseg)
                    buf = ""
                yield word
            x = y
        if buf:
            yield from self._flush(buf, finalseg)

    def _flush(self, buf: str, finalseg: object) -> Iterator[str]:
        if len(buf) == 1:
            yield buf
        elif not self.freq(buf):
            yield from finalseg.cut(buf)  # type: ignore[attr-defined]
        else:
            yield from buf

    def lcut(self, sentence: str) -> list[str]:
        """``jieba.lcut(sentence, HMM=True)``."""
        cached = self._memo.get(sentence)
        if cached is not None:
            return list(cached)
        out: list[str] = []
        for blk in _RE_HAN.split(sentence):
            if not blk:
                continue
            if _RE_HAN.match(blk):
                out.extend(self._cut_block(blk))
            else:
                for part in _RE_SKIP.split(blk):
                    if _RE_SKIP.match(part):
                        out.append(part)
                    else:
                        out.extend(part)
        if len(self._memo) >= _MEMO_SIZE:  # a text is cut for its keywords and its entities: a small memo
            self._memo.clear()
        self._memo[sentence] = out
        return list(out)


_lock = threading.Lock()
_dictionary: Dictionary | None = None


def dictionary() -> Dictionary:
    """jieba's default dictionary, loaded once per process (about a second), thread-safely."""
    global _dictionary
    if _dictionary is None:
        with _lock:
            if _dictionary is None:
                import jieba

                _dictionary = Dictionary(os.path.join(os.path.dirname(jieba.__file__), "dict.txt"))
                release_freed_heap()  # the strings of the load are freed; their heap pages go back
    return _dictionary


def loaded() -> bool:
    """Whether this process has loaded the dictionary (on its first CJK text, or :func:`dictionary`)."""
    return _dictionary is not None


def lcut(sentence: str) -> list[str]:
    """jieba's precise-mode words of ``sentence`` (HMM on), as ``jieba.lcut(sentence, HMM=True)``."""
    return dictionary().lcut(sentence)


def word_freq(word: str) -> int:
    """The frequency of ``word`` in jieba's dictionary (0 when it is not a word of it)."""
    return dictionary().freq(word)


def word_tag(word: str) -> str:
    """The part-of-speech tag of ``word`` in jieba's dictionary (``""`` when it has none)."""
    return dictionary().tag(word)
