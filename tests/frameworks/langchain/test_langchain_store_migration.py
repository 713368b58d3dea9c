"""An item file of the previous release (``langgraph_store.sqlite3`` beside the store) moves into the truth store.

The fixture below is the previous release's schema, copied verbatim: the file is written as that code wrote it
(items with TTL and record ids, the namespaces' first-seen order, embedded vectors), then the store is opened.
"""

from __future__ import annotations

import json
import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("langgraph.store.base")

from langchain_memory_ext import MemoryStore
from memory_ext import MemoryEngine, Namespace

OLD_SCHEMA = """
CREATE TABLE IF NOT EXISTS items (
    part TEXT NOT NULL,
    ns TEXT NOT NULL,
    key TEXT NOT NULL,
    value TEXT NOT NULL,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    turn_id TEXT,
    PRIMARY KEY (part, ns, key)
);
CREATE INDEX IF NOT EXISTS items_turn ON items (part, turn_id);
CREATE TABLE IF NOT EXISTS namespaces (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    part TEXT NOT NULL,
    ns TEXT NOT NULL,
    UNIQUE (part, ns)
);
CREATE TABLE IF NOT EXISTS vectors (
    part TEXT NOT NULL,
    ns TEXT NOT NULL,
    key TEXT NOT NULL,
    path TEXT NOT NULL,
    vector BLOB NOT NULL,
    PRIMARY KEY (part, ns, key, path)
);
ALTER TABLE items ADD COLUMN record_id TEXT;
ALTER TABLE items ADD COLUMN expires_at REAL;
ALTER TABLE items ADD COLUMN ttl_minutes REAL;
CREATE INDEX IF NOT EXISTS items_expiry ON items (part, expires_at);
"""
START = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
ANA = '["ana", ""]'


def _embed(texts: list[str]) -> list[list[float]]:
    return [[float(len(t)), float(t.count("a")), 1.0] for t in texts]


def _write_old_file(path: Path, turn_ids: tuple[str, ...], record_ids: tuple[str, ...]) -> None:
    db = sqlite3.connect(path / "langgraph_store.sqlite3")
    db.executescript(OLD_SCHEMA)
    stamp, later = START.isoformat(), (START + timedelta(minutes=5)).isoformat()
    rows = [  # (part, ns, key, value, created, updated, turn, record, expires_at, ttl)
        (ANA, "notes", "n1", json.dumps({"text": "Lena lives in Porto", "city": "Porto", "杭州": 1},
                                        ensure_ascii=False), stamp, later, turn_ids[0], record_ids[0], None, None),
        (ANA, "notes", "n2", json.dumps({"text": "call the vet", "when": {"__memory_ext_type__": "date",
                                                                          "value": "2026-03-02"}}),
         stamp, stamp, turn_ids[1], record_ids[1], (START + timedelta(minutes=30)).timestamp(), 30.0),
        (ANA, "a.b", "k", json.dumps({"n": 1}), stamp, stamp, None, None, None, None),
    ]
    db.executemany("INSERT INTO namespaces (part, ns) VALUES (?, ?)", [(ANA, "notes"), (ANA, "a.b")])
    db.executemany("INSERT INTO items (part, ns, key, value, created_at, updated_at, turn_id, record_id, expires_at,"
                   " ttl_minutes) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)
    db.executemany("INSERT INTO vectors VALUES (?, ?, ?, ?, ?)",
                   [(ANA, "notes", key, "text", np.asarray(_embed([text])[0], dtype=np.float64).tobytes())
                    for key, text in (("n1", "Lena lives in Porto"), ("n2", "call the vet"))])
    db.commit()
    db.close()


def test_the_old_item_file_is_imported_losslessly_and_removed(tmp_path: Path) -> None:
    path = tmp_path / "s"
    with MemoryEngine.open(path, embedder="hashing") as engine:
        added = engine.add_turns([{"role": "user", "content": "Lena lives in Porto", "external_id": "n1",
                                   "session_id": "notes"},
                                  {"role": "user", "content": "call the vet", "external_id": "n2",
                                   "session_id": "notes"}], Namespace("ana"))
    _write_old_file(path, added.turn_ids, added.record_ids[:2])
    clock = [START]
    with MemoryEngine.open(path, embedder="hashing") as engine:
        assert not any(p.name.startswith("langgraph_store") for p in path.iterdir())  # not left in two places
        store = MemoryStore(engine=engine, user_id="ana", clock=lambda: clock[0],
                            index={"dims": 3, "embed": _embed, "fields": ["text"]})
        n1, n2 = store.get(("notes",), "n1"), store.get(("notes",), "n2", refresh_ttl=False)
        assert n1 is not None and n1.value == {"text": "Lena lives in Porto", "city": "Porto", "杭州": 1}
        assert n1.created_at == START and n1.updated_at == START + timedelta(minutes=5)
        assert n2 is not None and n2.value["when"].isoformat() == "2026-03-02"
        assert [i.key for i in store.search(())] == ["n1", "n2", "k"]  # namespace order, then insertion order
        assert store.list_namespaces() == [("a", "b"), ("notes",)]
        hits = store.search(("notes",), query="Lena lives in Porto")  # the imported vectors rank it
        assert hits[0].key == "n1" and hits[0].score == pytest.approx(1.0)
        assert [i.key for i in store.search(("notes",), filter={"杭州": 1})] == ["n1"]
        clock[0] = START + timedelta(minutes=31)  # the imported TTL still holds
        assert store.get(("notes",), "n2") is None and store.sweep_ttl() == 1
        assert [t.content for t in engine.get_turns("ana")] == ["Lena lives in Porto"]
        receipt = engine.forget("ana")  # forget reaches the imported items: they are rows of the truth store
        assert receipt.purge_complete and store.search(()) == [] and store.list_namespaces() == []
        store.close()


def test_a_crash_after_the_import_leaves_nothing_behind(tmp_path: Path) -> None:
    """The file is renamed ``*.migrated`` after the commit and overwritten; a leftover one goes at the next open."""
    path = tmp_path / "s"
    MemoryEngine.open(path, embedder="hashing").close()
    secret = b"my bank PIN is 4242"  # the whole phrase: four digits alone turn up by chance in a lock file's pid
    (path / "langgraph_store.sqlite3.migrated").write_bytes(secret)
    MemoryEngine.open(path, embedder="hashing").close()
    assert not (path / "langgraph_store.sqlite3.migrated").exists()
    assert secret not in b"".join(p.read_bytes() for p in path.iterdir() if p.is_file())
