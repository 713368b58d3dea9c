"""The chroma vector backend in server mode: HttpClient against a real ``chroma run`` (see conftest.py).

Each test uses its own collection prefix, so tests sharing the session's server never see each other's vectors.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

if os.environ.get("MEMORY_EXT_REQUIRE_SERVERS") != "1":  # in CI a missing chromadb fails in the fixture
    pytest.importorskip("chromadb")

from memory_ext.config import StorageConfig
from memory_ext.errors import StoreError
from memory_ext.store.chroma import MAX_IN_FILTER, ChromaVectorIndex
from memory_ext.store.chroma_server import free_port
from memory_ext.store.sqlite import TruthStore
from memory_ext.store.vector import NumpyVectorIndex

pytestmark = pytest.mark.server

DIM = 24
EMBEDDER = "test-random:24"


def unit_rows(rng: np.random.Generator, n: int) -> np.ndarray:
    v = rng.normal(size=(n, DIM)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def write(store: TruthStore, index: ChromaVectorIndex, user: str, vectors: np.ndarray) -> list[int]:
    """What the engine does for a batch: SQLite rows first, then the derived index, in one transaction."""
    with store.transaction("test add") as conn:
        ns_id = store.ensure_namespace(conn, (user, ""))
        rows = [{"id": uuid.uuid4().hex, "kind": "turn", "text": user, "index_text": user, "turn_ids": []}
                for _ in range(len(vectors))]
        rids = store.insert_records(conn, ns_id, rows)
        store.insert_embeddings(conn, ns_id, rids, vectors, EMBEDDER)
        index.add(conn, ns_id, rids, vectors)
    return rids


def ns(store: TruthStore, user: str) -> int:
    ns_id = store.find_namespace((user, ""))
    assert ns_id is not None
    return ns_id


@pytest.fixture
def storage(chroma_server: Any) -> StorageConfig:
    return StorageConfig(vector_backend="chroma", chroma_mode="http", chroma_host=chroma_server.host,
                         chroma_port=chroma_server.port, chroma_collection_prefix=f"t{uuid.uuid4().hex[:10]}")


@pytest.fixture
def store(tmp_path: Path) -> Iterator[TruthStore]:
    s = TruthStore(tmp_path / "store")
    yield s
    s.close()


@pytest.fixture
def index(storage: StorageConfig, store: TruthStore) -> Iterator[ChromaVectorIndex]:
    idx = ChromaVectorIndex(storage=storage, directory=store.directory, embedder_id=EMBEDDER, dim=DIM)
    yield idx
    idx.close()


def test_server_started_quickly(chroma_server: Any) -> None:
    assert chroma_server.startup_s < 30


def test_add_search_remove_in_interleaved_namespaces(store: TruthStore, index: ChromaVectorIndex) -> None:
    rng = np.random.default_rng(0)
    owned: dict[str, list[int]] = {"ana": [], "ben": [], "chen": []}
    for _round in range(3):
        for user in owned:
            owned[user] += write(store, index, user, unit_rows(rng, 5))
            for other in (u for u in owned if owned[u]):
                hits = index.search(store.reader(), ns(store, other), unit_rows(rng, 1)[0], 100)
                assert sorted(r for r, _ in hits) == sorted(owned[other])
    with store.transaction("test remove") as conn:
        index.remove(conn, ns(store, "ana"), owned["ana"][:5] + owned["ben"])  # ben's rids: not ana's to remove
    hits = index.search(store.reader(), ns(store, "ana"), unit_rows(rng, 1)[0], 100)
    assert sorted(r for r, _ in hits) == sorted(owned["ana"][5:])
    assert index.collection.count() == 45 - 5


def test_matches_numpy_reference_and_filters(store: TruthStore, index: ChromaVectorIndex) -> None:
    rng = np.random.default_rng(1)
    write(store, index, "noise", unit_rows(rng, 150))
    rids = write(store, index, "ana", unit_rows(rng, MAX_IN_FILTER + 300))
    reference = NumpyVectorIndex()
    ns_id = ns(store, "ana")
    small = set(rng.choice(rids, 30, replace=False).tolist())
    large = set(rng.choice(rids, MAX_IN_FILTER + 100, replace=False).tolist())
    for allowed in (None, small, large):
        for q in unit_rows(rng, 8):
            got = index.search(store.reader(), ns_id, q, 10, allowed=allowed)
            want = reference.search(store.reader(), ns_id, q, 10, allowed=allowed)
            assert [r for r, _ in got] == [r for r, _ in want]
            np.testing.assert_allclose([s for _, s in got], [s for _, s in want], atol=1e-3)


def test_k_larger_than_partition(store: TruthStore, index: ChromaVectorIndex) -> None:
    rng = np.random.default_rng(2)
    rids = write(store, index, "ana", unit_rows(rng, 4))
    write(store, index, "ben", unit_rows(rng, 40))
    hits = index.search(store.reader(), ns(store, "ana"), unit_rows(rng, 1)[0], 50)
    assert sorted(r for r, _ in hits) == rids
    assert [s for _, s in hits] == sorted((s for _, s in hits), reverse=True)


def test_failing_add_leaves_nothing_behind(storage: StorageConfig, store: TruthStore,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    index = ChromaVectorIndex(storage=storage, directory=store.directory, embedder_id=EMBEDDER, dim=DIM,
                              batch_size=4)
    rng = np.random.default_rng(3)
    before = write(store, index, "ana", unit_rows(rng, 3))
    real_upsert = index.collection.upsert
    calls = {"n": 0}

    def upsert_failing_on_third_batch(**kwargs: object) -> None:
        calls["n"] += 1
        if calls["n"] == 3:
            raise ConnectionError("server went away")
        real_upsert(**kwargs)

    monkeypatch.setattr(index.collection, "upsert", upsert_failing_on_third_batch)
    with pytest.raises(StoreError, match="nothing was written"):
        write(store, index, "ana", unit_rows(rng, 10))
    monkeypatch.undo()
    assert sorted(index.collection.get(include=[])["ids"]) == sorted(str(r) for r in before)
    assert store.count("embeddings") == 3
    index.close()


def test_two_clients_share_the_server(storage: StorageConfig, store: TruthStore) -> None:
    """Server mode's point: another host's client sees the vectors at once (the truth store is shared too)."""
    writer = ChromaVectorIndex(storage=storage, directory=store.directory, embedder_id=EMBEDDER, dim=DIM)
    reader = ChromaVectorIndex(storage=storage, directory=store.directory, embedder_id=EMBEDDER, dim=DIM)
    rng = np.random.default_rng(4)
    rids = write(store, writer, "ana", unit_rows(rng, 6))
    hits = reader.search(store.reader(), ns(store, "ana"), unit_rows(rng, 1)[0], 10)
    assert sorted(r for r, _ in hits) == rids
    assert not (store.directory / "chroma").exists()  # http mode keeps nothing in the store folder
    writer.close()
    reader.close()


def test_unreachable_server_is_a_clear_store_error(tmp_path: Path) -> None:
    port = free_port()
    storage = StorageConfig(vector_backend="chroma", chroma_mode="http", chroma_host="127.0.0.1", chroma_port=port)
    with pytest.raises(StoreError, match=rf"127\.0\.0\.1:{port}.*chroma run --path <dir> --host 127\.0\.0\.1"):
        ChromaVectorIndex(storage=storage, directory=tmp_path, embedder_id=EMBEDDER, dim=DIM)


def test_engine_end_to_end_against_the_server(chroma_server: Any, tmp_path: Path) -> None:
    engine_mod = pytest.importorskip("memory_ext.engine")
    from memory_ext import Turn

    config = {"storage": {"vector_backend": "chroma", "chroma_mode": "http", "chroma_host": chroma_server.host,
                          "chroma_port": chroma_server.port, "chroma_collection_prefix": f"e{uuid.uuid4().hex[:8]}"}}
    with engine_mod.MemoryEngine.open(tmp_path / "store", config=config, embedder="hashing") as engine:
        engine.add_turns([Turn(role="user", content="I adopted a beagle puppy called Toby."),
                          Turn(role="user", content="我下周要去杭州出差，想去西湖边走走。")], "ana")
        engine.add_turns([Turn(role="user", content="I adopted a grey cat called Miso.")], "ben")
        result = engine.search("beagle puppy Toby", "ana", k=5)
        assert result.items and "Toby" in result.items[0].text
        assert all("Miso" not in item.text for item in result.items)
        assert not result.channel_errors
        assert "vector" in result.items[0].channels
        assert "西湖" in engine.search("杭州 西湖", "ana", k=1).items[0].text
