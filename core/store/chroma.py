"""The ``chroma`` vector backend: a derived index in Chroma (embedded ``PersistentClient`` or a server).

Select it with ``{"storage": {"vector_backend": "chroma"}}`` (needs ``pip install "memory-ext[chroma]"``);
``storage.chroma_mode = "http"`` talks to a server started with
``chroma run --path <dir> --host 127.0.0.1 --port 8000``.

How it works, and why:

* **Derived, never the truth.** SQLite keeps every vector; Chroma only indexes them, so ``memext reindex`` can
  rebuild it. Every hit Chroma returns is checked against the ``embeddings`` table of the caller's SQLite
  connection (``ns_id`` and ``rid`` must both match): a search sees exactly the truth store's snapshot, never a
  vector whose SQLite transaction has not committed or was rolled back, and never another namespace's row, even
  if Chroma holds a stale entry. Scores are recomputed from the SQLite row (exactly what the numpy index
  returns); a Chroma entry whose score disagrees with it by more than 1e-3 is not this store's and is dropped.
* **One collection per embedder**: named from ``chroma_collection_prefix``, the sanitised embedder id, the
  dimension and a crc32 of the exact id (see :func:`collection_name`); cosine space
  (``configuration={"hnsw": {"space": "cosine"}}``, the chromadb 1.x form); ``embedding_function=None`` so Chroma
  never loads its default model; ids are ``str(rid)``; metadata ``{"ns_id", "rid"}``; no documents (user text
  never leaves SQLite).
* **All or nothing writes.** :meth:`ChromaVectorIndex.add` runs inside the engine's SQLite transaction. It
  upserts in batches; if a batch fails it deletes what it wrote, restores entries it overwrote, and raises
  :class:`~memory_ext.errors.StoreError`, so the engine's rollback leaves both stores as they were.
* **Deletes after the commit.** Inside the engine, :meth:`ChromaVectorIndex.remove` and ``drop_namespace`` only
  queue the deletion; it runs once the SQLite transaction has committed (``TruthStore.after_commit``). A crash
  before the commit leaves Chroma untouched (the forget never happened); a crash after it leaves extra entries,
  which search ignores and :meth:`ChromaVectorIndex.reconcile` (run at every open) deletes. Reconcile also
  re-adds vectors SQLite has and Chroma lacks.
* **Purging Chroma's own files.** Chroma keeps every upserted vector in its log (``embeddings_queue`` in
  ``chroma.sqlite3``) and deleted vectors in its HNSW segment files until it compacts. After a forget the
  embedded (``persistent``) collection is therefore rebuilt from SQLite (:meth:`ChromaVectorIndex.purge`: delete
  the collection, create it again, re-add the remaining vectors, remove the old segment folders) — O(vectors of
  the store) per forget. A Chroma *server*'s files are out of reach: the receipt then lists
  ``chroma-server:<collection>`` in ``pending_purge`` and ``purge_complete`` is False; run ``chroma utils
  vacuum`` on the server's data directory (docs/operations.md).
* **Scrubbing the HNSW files' slack.** Chroma's hnswlib allocates an index's element memory with ``malloc``
  (uninitialised) and, when it first writes the segment (the collection's first vectors), writes that memory's
  whole capacity to ``data_level0.bin`` and ``length.bin`` — slots past the index's element count included. Those
  bytes are whatever this process freed last: SQLite page buffers holding a just-forgotten turn's text, say (seen
  after a purge's rebuild, with or without vectors pending). So after any write that created a segment's files,
  after every purge and at open, :meth:`ChromaVectorIndex.scrub` zeroes every segment's bytes past the element
  count its ``header.bin`` records (embedded mode only; never the live slots). A purge that leaves the collection
  empty makes its HNSW files itself (:meth:`ChromaVectorIndex._make_segment`), so they are scrubbed before the
  receipt, not made later from memory that may still hold the forgotten text.
* **Search** filters with ``where={"ns_id": ...}``. An ``allowed`` set of up to :data:`MAX_IN_FILTER` rids is
  pushed into Chroma as ``{"rid": {"$in": [...]}}`` under ``$and``; a larger one would make every query a
  huge request, so Chroma is asked for more of the namespace's neighbours (growing ×4) and the set is applied in
  Python until ``k`` allowed hits are found or the namespace is exhausted. Scores are cosine similarities
  of the SQLite rows, best first, ties by rid. Candidates come from Chroma's HNSW index (ef_search 100), so
  recall is near-exact rather than guaranteed exact on very large namespaces.
"""

from __future__ import annotations

import contextlib
import os
import re
import struct
import threading
import warnings
import zlib
from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, cast

import numpy as np

from ..errors import ConfigError, EmbedderError, MissingDependencyError, StoreError
from ..registry import vector_backends
from .interface import Connection
from .statements import sql_of
from .vector import VectorBatches

if TYPE_CHECKING:

    from chromadb.api.client import Client

    from ..config import StorageConfig

__all__ = ["MAX_IN_FILTER", "ChromaSql", "ChromaVectorIndex", "collection_name"]

MAX_IN_FILTER = 1_000
"""Largest ``allowed`` set sent to Chroma as an ``$in`` filter; larger sets are applied in Python."""

_MAX_NAME = 63  # the strictest Chroma rule (3-63 chars; 1.x servers accept more)
_PREFIX_RE = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9_-]{0,30}[A-Za-z0-9])?$")
_SQL_CHUNK = 500
_SEGMENT_DIR = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
_SCORE_TOLERANCE = 1e-3  # Chroma's float32 cosine vs ours; a foreign vector differs by far more
_HNSW_HEADER = struct.Struct("<iQQQQ")  # hnswlib header.bin: version, offsetLevel0, max_elements, count, slot size
_HNSW_VERSION = 1  # hnswlib's PERSISTENCE_VERSION: the only layout scrub() knows
T = TypeVar("T")


@dataclass(frozen=True)
class ChromaSql:
    """The Chroma index's reads of the truth store's ``embeddings``, as each backend writes them
    (:mod:`memory_ext.store.statements`); Chroma's own ``chroma.sqlite3`` is read with ``sqlite3`` directly."""

    truth: str
    """``(dim, embedder_id)`` -> ``rid, ns_id, vector`` of every embedding of that dimension and embedder."""
    vectors: str
    """``{ids}`` template, ``(ns_id, dim, *rids)`` -> ``rid, vector``."""


def collection_name(prefix: str, embedder_id: str, dim: int, store_id: str | None = None) -> str:
    """The Chroma collection of one embedder: ``<prefix>_<slug>_d<dim>_<crc32 of embedder_id [+ store_id]>``.

    The slug keeps the id readable; the crc32 keeps two ids that sanitise alike apart, and, given a
    ``store_id``, two truth stores that share one Chroma server apart (their rids would collide otherwise).

    >>> collection_name("memory_ext", "hashing-v1:256", 256)
    'memory_ext_hashing-v1_256_d256_5d464af6'
    """
    if not isinstance(prefix, str) or not _PREFIX_RE.match(prefix):
        raise ConfigError("storage.chroma_collection_prefix", prefix,
                          "use 1-32 letters, digits, '_' or '-', starting and ending with a letter or digit")
    key = embedder_id if store_id is None else f"{embedder_id}\0{store_id}"
    crc = f"{zlib.crc32(key.encode('utf-8')):08x}"
    tail = f"_d{int(dim)}_{crc}"
    slug = re.sub(r"[^A-Za-z0-9_-]+", "_", embedder_id).strip("_-") or "embedder"
    slug = slug[: max(1, _MAX_NAME - len(prefix) - 1 - len(tail))].rstrip("_-") or "e"
    return f"{prefix}_{slug}{tail}"


def _batches(items: Sequence[T], size: int) -> Iterator[Sequence[T]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def _zero_tail(path: Path, start: int) -> int:
    """Overwrite the non-zero bytes of ``path`` from offset ``start`` to its end with zeroes (in place: the file
    keeps its size and Chroma's open handles stay valid); returns how many were non-zero."""
    if not path.is_file() or path.stat().st_size <= start:
        return 0
    with path.open("r+b") as fh:
        fh.seek(start)
        tail = fh.read()
        nonzero = len(tail) - tail.count(0)
        if nonzero:
            fh.seek(start)
            fh.write(bytes(len(tail)))
            fh.flush()
            os.fsync(fh.fileno())
    return nonzero


def _too_many_results(exc: Exception) -> bool:
    """Errors older chromadb versions raise when n_results exceeds what the filter or index holds."""
    text = str(exc).lower()
    return any(s in text for s in ("number of requested results", "contigious", "contiguous", "n_results"))


class _Current:
    """The index's current collection: a purge replaces the collection, and every holder of this object (the
    index, a caller of :attr:`ChromaVectorIndex.collection`) follows it."""

    def __init__(self, target: Any) -> None:
        self.target = target

    def __getattr__(self, name: str) -> Any:
        return getattr(self.target, name)


@vector_backends.register("chroma")
class ChromaVectorIndex(VectorBatches):
    """Cosine search in a Chroma collection (embedded or client/server), one collection per embedder.

    The engine builds it from ``storage.vector_backend = "chroma"``; by hand::

        index = ChromaVectorIndex(storage=StorageConfig(vector_backend="chroma"), directory=store_dir,
                                  embedder_id="hashing-v1:256", dim=256)
        with truth_store.transaction("add") as conn:   # vectors are written to SQLite first
            index.add(conn, ns_id, rids, vectors)
        index.search(truth_store.reader(), ns_id, query_vector, k=10)   # [(rid, cosine), ...]

    ``add``/``remove``/``search`` take the truth store's SQLite connection (see the module docstring).
    ``store_id`` (a stable id of the truth store) gives each store its own collection, so several stores can
    share one server; without it, give each store its own ``chroma_collection_prefix``. ``batch_size`` caps the
    ids per Chroma request (default: the client's maximum).
    """

    name = "vector:chroma"

    def __init__(self, *, storage: StorageConfig, directory: Path, embedder_id: str, dim: int,
                 store_id: str | None = None, batch_size: int | None = None,
                 on_commit: Callable[[Callable[[], None]], None] | None = None,
                 reader: Callable[[], Connection] | None = None, **_: object) -> None:
        self._on_commit = on_commit  # TruthStore.after_commit: deletions wait for the SQLite commit
        self._reader = reader  # the truth store's reader: reconcile and purge rebuild from it
        self._dirty = False  # something was deleted since the last purge
        self._scrubbed: set[str] = set()  # segment folders scrubbed since they appeared (see scrub)
        self._rebuilding = threading.RLock()
        try:
            import chromadb
            from chromadb.config import Settings
        except ImportError:
            raise MissingDependencyError("chromadb", "chroma", "the chroma vector backend") from None
        if not isinstance(dim, int) or dim <= 0:
            raise EmbedderError(str(embedder_id), f"dimension must be a positive integer, got {dim!r}")
        if batch_size is not None and batch_size <= 0:
            raise ValueError(f"batch_size must be positive, got {batch_size!r}")
        self.embedder_id = str(embedder_id)
        self.dim = dim
        self.mode = storage.chroma_mode
        self.collection_name = collection_name(storage.chroma_collection_prefix, self.embedder_id, dim, store_id)
        settings = Settings(anonymized_telemetry=False)
        if storage.chroma_mode == "http":
            host, port = storage.chroma_host, storage.chroma_port
            self.location = f"http://{host}:{port}"
            try:
                self._client = chromadb.HttpClient(host=host, port=port, settings=settings)
                self._client.heartbeat()
            except Exception as exc:  # chromadb raises ValueError or httpx errors
                raise StoreError(
                    f"cannot reach the Chroma server at {host}:{port} ({type(exc).__name__}: {exc}); start it "
                    f"with `chroma run --path <dir> --host {host} --port {port}`, fix storage.chroma_host/"
                    f"chroma_port, or use storage.chroma_mode='persistent'"
                ) from exc
        else:
            path = Path(storage.chroma_path).expanduser() if storage.chroma_path else Path(directory) / "chroma"
            self.location = str(path)
            try:
                self._client = chromadb.PersistentClient(path=str(path), settings=settings)
            except Exception as exc:
                raise StoreError(f"cannot open the Chroma store at {str(path)!r} ({type(exc).__name__}: {exc}); "
                                 f"check that the folder is writable, or set storage.chroma_path") from exc
        try:
            self._collection = _Current(self._client.get_or_create_collection(
                self.collection_name,
                embedding_function=None,
                configuration={"hnsw": {"space": "cosine"}},
                metadata={"embedder_id": self.embedder_id, "dim": dim, "created_by": "memory-ext"},
            ))
            with warnings.catch_warnings():  # chromadb records embedding_function=None as "legacy" and warns
                warnings.filterwarnings("ignore", "legacy embedding function config", DeprecationWarning)
                config = self._collection.configuration or {}
            space = (config.get("hnsw") or {}).get("space") or (self._collection.metadata or {}).get("hnsw:space")
            self._batch = batch_size or int(self._client.get_max_batch_size())
        except Exception as exc:
            self._close_client()
            raise StoreError(f"Chroma at {self.location}: cannot open collection {self.collection_name!r} "
                             f"({type(exc).__name__}: {exc})") from exc
        stored_id = (self._collection.metadata or {}).get("embedder_id")
        if space != "cosine" or (stored_id is not None and stored_id != self.embedder_id):
            self._close_client()
            raise StoreError(
                f"Chroma collection {self.collection_name!r} at {self.location} was not made by memory-ext for "
                f"embedder {self.embedder_id!r} (space {space!r}, embedder {stored_id!r}); delete it or set "
                f"another storage.chroma_collection_prefix"
            )
        self._closed = False
        if self.mode != "http":
            self.scrub()  # files a crashed or older process wrote

    # -- helpers -------------------------------------------------------------------------------------------
    @property
    def collection(self) -> Any:
        """The underlying ``chromadb`` collection (read it; writes belong to the engine)."""
        return self._collection

    def _call(self, operation: str, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        if self._closed:
            raise StoreError(f"{operation}: the chroma vector index is closed")
        try:
            return fn(*args, **kwargs)
        except Exception as exc:
            raise StoreError(f"Chroma at {self.location}, collection {self.collection_name!r}: {operation} "
                             f"failed ({type(exc).__name__}: {exc})") from exc

    def _check(self, vectors: Any, n: int | None) -> np.ndarray:
        arr = np.asarray(vectors, dtype=np.float32)
        if arr.ndim == 1:
            arr = arr.reshape(1, -1)
        if arr.ndim != 2 or arr.shape[1] != self.dim or (n is not None and arr.shape[0] != n):
            want = f"({n}, {self.dim})" if n is not None else f"({self.dim},)"
            raise EmbedderError(self.embedder_id, f"expected vectors of shape {want}, got {arr.shape}")
        if not np.isfinite(arr).all():
            raise EmbedderError(self.embedder_id, "vectors contain NaN or infinite values")
        return arr

    # -- writes --------------------------------------------------------------------------------------------
    def add(self, conn: Connection, ns_id: int, rids: Sequence[int], vectors: np.ndarray) -> None:
        """Upsert ``rids`` with ``vectors`` into the namespace; all or nothing (raises StoreError on failure)."""
        rids = [int(r) for r in rids]
        if not rids:
            return
        if len(set(rids)) != len(rids):
            raise StoreError(f"add: duplicate rids in one batch: {rids[:10]}")
        arr = self._check(vectors, len(rids))
        if self._closed:
            raise StoreError("add: the chroma vector index is closed")
        ids = [str(r) for r in rids]
        previous: dict[str, tuple[Any, Any]] = {}
        for chunk in _batches(ids, self._batch):
            got = self._call("add (read previous entries)", self._collection.get, ids=list(chunk),
                             include=["embeddings", "metadatas"])
            # both are present: asked for by `include`
            embeddings, metadatas = cast(list[Any], got["embeddings"]), cast(list[Any], got["metadatas"])
            for i, pid in enumerate(got["ids"]):
                previous[pid] = (embeddings[i], metadatas[i])
        written = 0
        try:
            for start in range(0, len(ids), self._batch):
                end = min(start + self._batch, len(ids))
                written = end  # a failed request may still have been applied in part: undo it too
                self._collection.upsert(
                    ids=ids[start:end],
                    embeddings=arr[start:end],
                    metadatas=[{"ns_id": int(ns_id), "rid": r} for r in rids[start:end]],
                )
        except Exception as exc:
            problem = self._undo(ids[:written], previous)
            raise StoreError(
                f"Chroma at {self.location}, collection {self.collection_name!r}: add of {len(ids)} vectors "
                f"failed ({type(exc).__name__}: {exc}); "
                + (f"cleaning up also failed ({problem}); the stale entries are ignored by search and "
                   f"`memext reindex` removes them" if problem else "nothing was written")
            ) from exc
        self._scrub_new()

    def _undo(self, ids: Sequence[str], previous: dict[str, tuple[Any, Any]]) -> str | None:
        try:
            for chunk in _batches(list(ids), self._batch):
                self._collection.delete(ids=list(chunk))
            back = [pid for pid in ids if pid in previous]
            for chunk in _batches(back, self._batch):
                self._collection.upsert(ids=list(chunk),
                                        embeddings=np.asarray([previous[p][0] for p in chunk], dtype=np.float32),
                                        metadatas=[previous[p][1] for p in chunk])
        except Exception as exc:  # noqa: BLE001  returned to the caller, which names it in its StoreError
            return f"{type(exc).__name__}: {exc}"
        return None

    def remove(self, conn: Connection, ns_id: int, rids: Sequence[int]) -> None:
        """Delete the namespace's ``rids`` (ids of other namespaces are never touched) — after the commit of the
        caller's transaction when the engine gave ``on_commit``, at once otherwise."""
        ids = [str(int(r)) for r in rids]

        def delete() -> None:
            for chunk in _batches(ids, self._batch):
                self._call("remove", self._collection.delete, ids=list(chunk), where={"ns_id": int(ns_id)})
            self._dirty = self._dirty or bool(ids)

        self._after_commit(delete)

    def _after_commit(self, step: Callable[[], None]) -> None:
        if self._on_commit is None:
            step()
        else:
            self._on_commit(step)

    def invalidate(self, ns_id: int | None = None) -> None:
        """Nothing is cached in this process: Chroma is always current."""

    @staticmethod
    def create_schema(conn: Connection) -> None:
        """Nothing in SQLite: the collection is created when the index opens."""

    def drop_namespace(self, conn: Connection, ns_id: int) -> None:
        """Delete every vector of the namespace (after the commit, as :meth:`remove`)."""
        def delete() -> None:
            self._call("drop namespace", self._collection.delete, where={"ns_id": int(ns_id)})
            self._dirty = True

        self._after_commit(delete)

    # -- repair and purge ----------------------------------------------------------------------------------
    def _truth(self) -> dict[int, tuple[int, bytes]]:
        """``{rid: (ns_id, vector blob)}`` of every vector of this dimension in the truth store."""
        if self._reader is None:
            raise StoreError("the chroma index was built without the truth store's reader")
        reader = self._reader()
        return {int(r[0]): (int(r[1]), r[2]) for r in reader.execute(
            sql_of(reader).chroma.truth, (self.dim, self.embedder_id))
            if isinstance(r[2], bytes) and len(r[2]) == 4 * self.dim}

    def _add_truth(self, truth: dict[int, tuple[int, bytes]], rids: Sequence[int]) -> None:
        for chunk in _batches(sorted(rids), self._batch):
            self._call("repair (add)", self._collection.upsert, ids=[str(r) for r in chunk],
                       embeddings=np.stack([np.frombuffer(truth[r][1], dtype=np.float32) for r in chunk]),
                       metadatas=[{"ns_id": truth[r][0], "rid": r} for r in chunk])
        if rids:
            self._scrub_new()

    def _segments(self) -> list[Path]:
        """The HNSW segment folders (with a ``header.bin``) of the embedded store."""
        root = Path(self.location)
        if self.mode == "http" or not root.is_dir():
            return []
        return [c for c in root.iterdir() if c.is_dir() and _SEGMENT_DIR.match(c.name) and (c / "header.bin").is_file()]

    def _scrub_new(self) -> None:
        """After a write: scrub the segment folders that appeared since the last scrub (a fresh collection's first
        write creates its HNSW files; one directory listing otherwise)."""
        if self.mode != "http" and any(c.name not in self._scrubbed for c in self._segments()):
            self.scrub()

    def scrub(self) -> int:
        """Zero the slack of every HNSW segment under the embedded store: the bytes of ``data_level0.bin`` and
        ``length.bin`` past the element count ``header.bin`` records, which hnswlib wrote from uninitialised
        memory (see the module docstring). Returns how many non-zero bytes were overwritten; a segment whose
        header is not hnswlib's known layout is left alone. Chroma writes a slot (at its offset, from memory it
        has initialised) only when the slot gets an element, so zeroes past the count stay correct."""
        cleared = 0
        segments = self._segments()
        self._scrubbed = {c.name for c in segments}
        for child in segments:
            raw = (child / "header.bin").read_bytes()
            if len(raw) < _HNSW_HEADER.size:
                continue
            version, _, max_elements, count, slot = _HNSW_HEADER.unpack_from(raw)
            if version != _HNSW_VERSION or slot <= 0 or count > max_elements:
                continue
            for name, size in (("data_level0.bin", slot), ("length.bin", 4)):
                cleared += _zero_tail(child / name, count * size)
        return cleared

    def _make_segment(self) -> None:
        """Make an empty collection write its HNSW files now (one placeholder entry, id ``0``, which no record has,
        added and deleted), so the scrub that follows covers them: left to the indexer's next write, they would
        hold this moment's freed memory — the just-forgotten text included — until that write's own scrub."""
        self._call("purge (create segment)", self._collection.upsert, ids=["0"],
                   embeddings=np.eye(1, self.dim, dtype=np.float32), metadatas=[{"ns_id": -1, "rid": 0}])
        self._call("purge (create segment)", self._collection.delete, ids=["0"])

    def reconcile(self) -> dict[str, int]:
        """Make the collection hold exactly the truth store's vectors (run at open; cheap when counts agree).

        Returns ``{"removed": extra entries deleted, "added": missing vectors re-added}``.
        """
        if self._reader is None:
            return {"removed": 0, "added": 0}
        truth = self._truth()
        if self._call("reconcile (count)", self._collection.count) == len(truth):
            return {"removed": 0, "added": 0}
        held = {int(i) for i in self._call("reconcile (ids)", self._collection.get, include=[])["ids"]}
        extra = sorted(held - set(truth))
        for chunk in _batches([str(r) for r in extra], self._batch):
            self._call("repair (delete)", self._collection.delete, ids=list(chunk))
        missing = sorted(set(truth) - held)
        self._add_truth(truth, missing)
        self._dirty = self._dirty or bool(extra)
        return {"removed": len(extra), "added": len(missing)}

    def purge(self, *, force: bool = False) -> tuple[str, ...]:
        """Remove deleted vectors from Chroma's own files (see the module docstring); returns what is still
        pending: nothing for an embedded collection, ``chroma-server:<collection>`` for a server. ``force``
        rebuilds even when this process deleted nothing (after a crash between a forget and its purge)."""
        if not (self._dirty or force):
            return ()
        if self.mode == "http" or self._reader is None:
            return (f"chroma-server:{self.collection_name}",)
        with self._rebuilding:
            truth = self._truth()
            metadata = dict(self._collection.metadata or {})
            self._call("purge (delete collection)", self._client.delete_collection, self.collection_name)
            self._collection.target = self._call("purge (create collection)", self._client.create_collection,
                                                 self.collection_name, embedding_function=None,
                                                 configuration={"hnsw": {"space": "cosine"}}, metadata=metadata)
            self._add_truth(truth, list(truth))
            if not truth:
                self._make_segment()
        self._remove_orphan_segments()
        self.scrub()
        pending = self._vacuum()
        self._dirty = bool(pending)
        return pending

    def _vacuum(self) -> tuple[str, ...]:
        """Rewrite ``chroma.sqlite3`` so the deleted log rows leave its free pages too (Chroma's own connection
        does not overwrite deleted rows). Returns the file when it could not be rewritten (busy)."""
        import sqlite3 as _sqlite3

        db = Path(self.location) / "chroma.sqlite3"
        if not db.exists():
            return ()
        try:
            conn = _sqlite3.connect(db, isolation_level=None, timeout=5)
            try:
                conn.execute("PRAGMA secure_delete=ON")
                conn.execute("VACUUM")
            finally:
                conn.close()
        except _sqlite3.Error:
            return (f"chroma:{db.name}",)
        return ()

    def _remove_orphan_segments(self) -> None:
        """Delete segment folders (HNSW files) no collection uses any more: they hold deleted vectors."""
        import shutil
        import sqlite3 as _sqlite3

        root = Path(self.location)
        db = root / "chroma.sqlite3"
        if not db.exists():
            return
        conn = _sqlite3.connect(f"{db.as_uri()}?mode=ro", uri=True)
        try:
            live = {str(r[0]) for r in conn.execute("SELECT id FROM segments")}
        finally:
            conn.close()
        for child in root.iterdir():
            if child.is_dir() and _SEGMENT_DIR.match(child.name) and child.name not in live:
                shutil.rmtree(child, ignore_errors=True)

    # -- reads ---------------------------------------------------------------------------------------------
    def search(self, conn: Connection, ns_id: int, query: np.ndarray, k: int, *,
               allowed: Collection[int] | None = None) -> list[tuple[int, float]]:
        """The ``k`` rids of namespace ``ns_id`` nearest to ``query``: ``(rid, cosine similarity)``, best first."""
        if k <= 0:
            return []
        q = self._check(query, 1)[0]
        ns_id = int(ns_id)
        where: dict[str, Any] = {"ns_id": ns_id}
        keep: set[int] | None = None
        if allowed is not None:
            allowed_set = {int(r) for r in allowed}
            if not allowed_set:
                return []
            k = min(k, len(allowed_set))
            if len(allowed_set) <= MAX_IN_FILTER:
                where = {"$and": [{"ns_id": ns_id}, {"rid": {"$in": sorted(allowed_set)}}]}
            else:
                keep = allowed_set
        n = k if keep is None else 4 * k
        while True:
            hits = self._query(q, n, where)
            exhausted = len(hits) < n
            if keep is not None:
                hits = [h for h in hits if h[0] in keep]
            found = self._verify(conn, ns_id, q, hits)
            if len(found) >= k or exhausted:
                break
            n *= 4
        found.sort(key=lambda h: (-h[1], h[0]))
        return found[:k]

    def _query(self, q: np.ndarray, n: int, where: dict[str, Any]) -> list[tuple[int, float]]:
        try:
            if self._closed:
                raise StoreError("search: the chroma vector index is closed")
            with self._rebuilding:  # a purge swaps the collection: searches wait for the whole one
                res = self._collection.query(query_embeddings=q.reshape(1, -1), n_results=n, where=where,
                                             include=["distances"])
        except StoreError:
            raise
        except Exception as exc:
            if not _too_many_results(exc):
                raise StoreError(f"Chroma at {self.location}, collection {self.collection_name!r}: search "
                                 f"failed ({type(exc).__name__}: {exc})") from exc
            # older chromadb: n_results may not exceed the matching count; ask again with that count
            count = len(self._call("search (count)", self._collection.get, where=where, include=[])["ids"])
            if count == 0:
                return []
            res = self._call("search", self._collection.query, query_embeddings=q.reshape(1, -1),
                             n_results=min(n, count), where=where, include=["distances"])
        ids, dists = res["ids"][0], cast(list[list[float]], res["distances"])[0]  # present: asked for by `include`
        return [(int(i), 1.0 - float(d)) for i, d in zip(ids, dists, strict=True)]

    def _verify(self, conn: Connection, ns_id: int, q: np.ndarray,
                hits: list[tuple[int, float]]) -> list[tuple[int, float]]:
        """Keep the hits whose vector is in the truth store (same namespace, same vector); score them exactly.

        The score becomes the cosine of the query and the SQLite float32 row, as the numpy index computes it; a
        Chroma entry whose vector differs from SQLite's (written by another store into a shared collection) is
        dropped rather than trusted.
        """
        rows: dict[int, bytes] = {}
        statements = sql_of(conn)
        for chunk in _batches([rid for rid, _ in hits], _SQL_CHUNK):
            rows.update((int(r[0]), r[1]) for r in conn.execute(
                statements.chroma.vectors.format(ids=statements.marks(len(chunk))), (ns_id, self.dim, *chunk)))
        if not rows:
            return []
        q_unit = q / max(float(np.linalg.norm(q)), 1e-12)
        out = []
        for rid, approx in hits:
            blob = rows.get(rid)
            if blob is None:
                continue
            vec = np.frombuffer(blob, dtype=np.float32)
            exact = float(vec @ q_unit) / max(float(np.linalg.norm(vec)), 1e-12)
            if abs(exact - approx) <= _SCORE_TOLERANCE:
                out.append((rid, exact))
        return out

    # -- lifecycle -----------------------------------------------------------------------------------------
    def _closable(self) -> Client:
        """The client as the class chromadb's factories build (their declared ``ClientAPI`` has no ``close``)."""
        return cast("Client", self._client)

    def _close_client(self) -> None:
        """Release the client after a failed construction; the construction error is the one reported."""
        with contextlib.suppress(Exception):
            self._closable().close()

    def close(self) -> None:
        """Release the client (the embedded store stays on disk). Idempotent."""
        if self._closed:
            return
        if self._dirty and self.mode != "http":
            with contextlib.suppress(Exception):  # a forget's purge left undone: finish it before closing
                self.purge()
        self._closed = True
        try:
            self._closable().close()
        except Exception as exc:
            raise StoreError(f"Chroma at {self.location}: close failed ({type(exc).__name__}: {exc})") from exc

    def __repr__(self) -> str:
        return f"ChromaVectorIndex({self.mode}, {self.location!r}, collection={self.collection_name!r})"
