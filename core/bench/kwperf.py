"""Keyword-index performance: ingest rate, cold load, warm search p50/p95 at scale in ONE namespace.

``python -m memory_ext.bench.kwperf [--docs 100000] [--queries 300] [--lang en|zh|mixed]``

The corpus is synthetic but shaped like chat turns: 15-40 words each, about 40 % English stop words, content
words drawn from a Zipf law (s = 1.07) over a 40,000-word invented vocabulary; Chinese turns draw real words
from jieba's own dictionary by their frequency. Queries are 3-8 content words (a question) or about 40 (a
dialogue used as the query). Everything is generated from a seed: nothing is downloaded.
"""

from __future__ import annotations

import argparse
import random
import resource
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from ..store.keyword import KeywordIndex
from ..text.tokenize import EN_STOP_WORDS, warm_up

__all__ = ["main", "make_docs"]

_SYLLABLES = [c + v for c in "bcdfghjklmnprstvwz" for v in ("a", "e", "i", "o", "u", "ai", "ou", "ee")]


class _Zipf:
    """Draw items from a fixed list with probability proportional to ``rank ** -s``."""

    def __init__(self, items: Sequence[str], rng: np.random.Generator, s: float = 1.07,
                 weights: Sequence[float] | None = None) -> None:
        self.items = list(items)
        w = np.asarray(weights, dtype=np.float64) if weights is not None else np.arange(1, len(items) + 1) ** -s
        self.cdf = np.cumsum(w / w.sum())
        self.rng = rng

    def draw(self, n: int) -> list[str]:
        idx = np.searchsorted(self.cdf, self.rng.random(n), side="right")
        return [self.items[min(int(i), len(self.items) - 1)] for i in idx]


def _english_vocab(n: int, rng: random.Random) -> list[str]:
    words: set[str] = set()
    while len(words) < n:
        words.add("".join(rng.choice(_SYLLABLES) for _ in range(rng.choice((1, 2, 2, 3, 3, 4)))))
    return sorted(words, key=lambda w: (len(w), w))  # short words are the frequent ones


def _jieba_vocab(limit: int = 60_000) -> tuple[list[str], list[float]]:
    import jieba  # the dictionary file ships inside the jieba wheel

    words: list[tuple[float, str]] = []
    path = Path(jieba.__file__).with_name("dict.txt")
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            parts = line.split()
            if len(parts) >= 2 and 1 <= len(parts[0]) <= 4:
                words.append((float(parts[1]), parts[0]))
    words.sort(reverse=True)
    top = words[:limit]
    return [w for _, w in top], [f for f, _ in top]


def make_docs(*, lang: str = "en", seed: int = 0) -> Callable[..., list[str]]:
    """Return ``gen(count, words_hint=0)``: a deterministic generator of chat-like texts (0: 15-40 words)."""
    rng = random.Random(seed)
    nrng = np.random.default_rng(seed)
    en = _Zipf(_english_vocab(40_000, rng), nrng)
    stops = sorted(EN_STOP_WORDS)
    zh: _Zipf | None = None
    if lang in ("zh", "mixed"):
        words, freqs = _jieba_vocab()
        zh = _Zipf(words, nrng, weights=freqs)

    def gen(count: int, words_hint: int = 0) -> list[str]:
        out = []
        for _ in range(count):
            n_words = words_hint or rng.randint(15, 40)
            chinese = zh is not None and (lang == "zh" or rng.random() < 0.3)
            if chinese:
                assert zh is not None
                text = "".join(zh.draw(n_words))
                out.append("，".join(text[i : i + 12] for i in range(0, len(text), 12)) + "。")
            else:
                content = en.draw(n_words)
                words = [w if rng.random() > 0.4 else rng.choice(stops) for w in content]
                out.append(" ".join(words).capitalize() + rng.choice([".", "!", "?", "..."]))
        return out

    return gen


def _pct(values: list[float], q: float) -> float:
    return float(np.percentile(values, q)) if values else float("nan")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m memory_ext.bench.kwperf", description=__doc__.split("\n")[0])
    parser.add_argument("--docs", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--lang", choices=("en", "zh", "mixed"), default="en")
    parser.add_argument("--batch", type=int, default=1000, help="documents per write transaction")
    parser.add_argument("--db", type=Path, default=None, help="SQLite file (default: a temporary directory)")
    args = parser.parse_args(argv)

    warm_up()
    gen = make_docs(lang=args.lang, seed=1)
    with tempfile.TemporaryDirectory() as tmp:
        path = args.db or Path(tmp) / "kw.db"
        conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        KeywordIndex.create_schema(conn)
        index = KeywordIndex()
        ns = 1
        texts = gen(args.docs)
        t0 = time.perf_counter()
        for start in range(0, args.docs, args.batch):
            conn.execute("BEGIN")
            index.add(conn, ns, list(enumerate(texts[start : start + args.batch], start=start + 1)))
            conn.execute("COMMIT")
        ingest_s = time.perf_counter() - t0
        print(f"docs={args.docs} lang={args.lang} ingest {args.docs / ingest_s:,.0f} docs/s ({ingest_s:.1f} s); "
              f"db {path.stat().st_size / 1e6:.0f} MB")

        reader = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        short = [" ".join(q.split()[: random.Random(i).randint(3, 8)]) for i, q in enumerate(gen(args.queries, 8))]
        long = gen(max(args.queries // 3, 20), 40)

        t0 = time.perf_counter()
        index.search(reader, ns, short[0], args.k)
        print(f"cold first search (lazy load of the namespace): {1000 * (time.perf_counter() - t0):.0f} ms")

        def run(queries: list[str]) -> list[float]:
            times = []
            for q in queries:
                t = time.perf_counter()
                index.search(reader, ns, q, args.k)
                times.append(1000 * (time.perf_counter() - t))
            return times

        run(short[:20])  # warm-up
        for name, queries in (("short queries (3-8 words)", short), ("long queries (~40 words)", long)):
            times = run(queries)
            print(f"{name}: p50 {statistics.median(times):.2f} ms  p95 {_pct(times, 95):.2f} ms  "
                  f"max {max(times):.2f} ms  (n={len(times)})")

        # streaming: one new turn committed before every search (the incremental path)
        extra = gen(200)
        times = []
        for i, (text, q) in enumerate(zip(extra, short * 2, strict=False)):
            conn.execute("BEGIN")
            index.add(conn, ns, [(args.docs + 1 + i, text)])
            conn.execute("COMMIT")
            t = time.perf_counter()
            index.search(reader, ns, q, args.k)
            times.append(1000 * (time.perf_counter() - t))
        print(f"add 1 turn + search, x200: search p50 {statistics.median(times):.2f} ms  p95 {_pct(times, 95):.2f} ms")

        t0 = time.perf_counter()
        index.invalidate(ns)
        index.search(reader, ns, short[0], args.k)
        print(f"full reload after invalidate: {1000 * (time.perf_counter() - t0):.0f} ms")
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(f"peak RSS {rss:.0f} MB")
        reader.close()
        conn.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
