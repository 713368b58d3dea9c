"""The child process of ``test_close_while_reading.py``: closes an engine while a timed-out channel call is still
reading the store, then lets the call go on. A crash (SQLite connection freed under a running statement) shows as
the child's exit code; the parent asserts 0 and the lines printed here.

``python close_child.py STORE MODE`` with MODE ``udf`` (the call is stuck inside a statement: a SQL function
that waits on an event) or ``busy`` (the call runs heavy statements back to back until told to stop).
"""

from __future__ import annotations

import sys
import threading
from typing import Any

import numpy as np

from memory_ext import MemoryEngine
from memory_ext.embed import HashingEmbedder
from memory_ext.errors import StoreError

HEAVY = "SELECT COUNT(*) FROM turns a, turns b WHERE a.content LIKE '%' || b.speaker || '%'"


class StuckReader(HashingEmbedder):
    """Its first query embedding (inside the vector channel's call) reads the store on the calling thread's own
    read connection and blocks there, past ``recall.channel_timeout_s``."""

    def __init__(self, mode: str) -> None:
        super().__init__()
        self.mode = mode
        self.store: Any = None
        self.entered, self.release, self.left = threading.Event(), threading.Event(), threading.Event()
        self.outcome = "none"

    def embed_query(self, text: str) -> np.ndarray:
        if self.store is not None and not self.entered.is_set():
            conn = self.store.reader()
            try:
                if self.mode == "udf":
                    conn.create_function("hold", 0, self._hold)
                    conn.execute("SELECT hold(), COUNT(*) FROM turns").fetchall()  # blocks inside the statement
                else:
                    self.entered.set()
                    while not self.release.is_set():
                        conn.execute(HEAVY).fetchall()
                conn.execute("SELECT COUNT(*) FROM turns").fetchall()  # a read after the close
                self.outcome = "read after close succeeded"
            except StoreError as exc:
                self.outcome = f"StoreError: {exc}"
            except Exception as exc:  # noqa: BLE001  reported to the parent
                self.outcome = f"{type(exc).__name__}: {exc}"
            finally:
                self.left.set()
        return super().embed_query(text)

    def _hold(self) -> int:
        self.entered.set()
        self.release.wait()
        return 1


def main() -> None:
    store, mode = sys.argv[1], sys.argv[2]
    embedder = StuckReader(mode)
    engine = MemoryEngine.open(store, embedder=embedder, config={"recall": {"channel_timeout_s": 0.3}})
    engine.add_turns([{"role": "user", "content": f"turn {i}: Ana walked by the harbour with Bob", "speaker": "Ana"}
                      for i in range(300)], "ana", wait=True)
    embedder.store = engine._store
    result = engine.search("harbour walk", "ana", k=3)
    assert embedder.entered.is_set()
    print("degraded", result.degraded, sorted(e.channel for e in result.channel_errors
                                              if e.error_type == "TimeoutError"), flush=True)
    engine.close()  # the stuck call is still inside its read
    print("closed", flush=True)
    embedder.release.set()
    embedder.left.wait()
    print("outcome", embedder.outcome, flush=True)


if __name__ == "__main__":
    main()
