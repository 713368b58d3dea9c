"""A turn record flagged for a sparse encoding while the indexer's batch holding it is in flight (claimed without
the flag, written after it) keeps its queue item and gets its encoding on the next round: no encoding is lost to
the race between an excerpt search's demand (``ingest.sparse_encodings: on_demand``) and the indexer."""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from memory_ext import MemoryEngine, Namespace, Turn
from memory_ext.embed import HashingEmbedder


class SparseHashing(HashingEmbedder):
    """The hashing embedder plus a sparse view (hashed words), counting the texts it sparse-encodes."""

    def __init__(self) -> None:
        super().__init__(dim=64)
        self.sparse_texts: list[str] = []

    def embed_sparse(self, texts: Sequence[str]) -> list[tuple[np.ndarray, np.ndarray]]:
        self.sparse_texts += texts
        out = []
        for text in texts:
            idx = sorted({zlib.crc32(w.encode()) % 4096 for w in text.lower().split()})
            out.append((np.array(idx, dtype=np.int32), np.ones(len(idx), dtype=np.float32)))
        return out


def test_a_turn_flagged_while_its_batch_is_in_flight_gets_its_encoding(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    emb = SparseHashing()
    notes = ["Bart saw a clever fox by the river", "Bart baked a cake for his birthday",
             "Bart lost his blue kite at the beach"]
    with MemoryEngine.open(tmp_path / "s", embedder=emb, config={"ingest": {"background_indexing": False}}) as eng:
        store = eng._store
        real = store.work_sources
        flagged: list[int] = []

        def sources_then_demand(rids: Sequence[int]) -> dict:
            # the indexer has claimed its batch (no sparse flag: nothing asked yet); an excerpt search asks now
            out = real(rids)
            ns_id = store.find_namespace(Namespace.coerce("u").key)
            turns = [t.record_rid for t in store.list_turns(ns_id) if t.record_rid is not None]
            if not flagged:
                with store.transaction("demand") as conn:
                    store.queue_sparse(conn, ns_id, turns)
                flagged.extend(turns)
            return out

        monkeypatch.setattr(store, "work_sources", sources_then_demand)
        eng.add_turns([Turn(role="user", content=c) for c in notes], "u")  # indexed before it returns
        monkeypatch.undo()
        assert flagged and eng.pending("u") == 0
        assert sorted(emb.sparse_texts) == sorted(notes)  # each turn encoded once, on the round after the flag
        ns_id = store.find_namespace(Namespace.coerce("u").key)
        matrix = eng._read.channels.context.sparse_index.matrix(store.reader(), ns_id)
        assert sorted(int(r) for r in matrix.rids) == sorted(flagged)
        assert eng.stats().vectors >= len(notes)  # and the vectors of the round that was redone are written
