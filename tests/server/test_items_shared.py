"""Two hosts, one server: ``MemoryStore(engine=RemoteEngine(...))`` items are the server's, so every host sees
every other host's puts, searches, namespaces and deletes. Each host has its own local directory (nothing of
the store is kept there)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest

pytest.importorskip("langgraph.store.base")

from langchain_memory_ext import MemoryStore
from memory_ext.client import PermissionDeniedError, RemoteEngine
from tests.server.conftest import ADMIN, ANA, LiveServer

NS = ("users", "ana", "memories")
START = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)


def _host(live: LiveServer, tmp_path: Path, name: str, token: str = ADMIN) -> RemoteEngine:
    return RemoteEngine(live.url, token=token, path=tmp_path / name)


def test_two_hosts_share_put_get_search_list_and_delete(live_server: LiveServer, tmp_path: Path) -> None:
    a_engine, b_engine = _host(live_server, tmp_path, "host-a"), _host(live_server, tmp_path, "host-b")
    a, b = MemoryStore(engine=a_engine, user_id="ana"), MemoryStore(engine=b_engine, user_id="ana")
    try:
        a.put(NS, "m1", {"text": "Ana's sister Lena lives in Porto", "year": 2024, "when": START})
        a.put(NS, "m2", {"text": "Ana adopted a beagle called Toby", "year": 2026})
        a.put(("users", "ana", "prefs"), "p1", {"text": "Ana drinks her coffee black"}, index=False)
        got = b.get(NS, "m1")
        assert got is not None and got.value == {"text": "Ana's sister Lena lives in Porto", "year": 2024,
                                                 "when": START}
        assert [i.key for i in b.search(("users", "ana"), query="where does Lena live?", limit=1)] == ["m1"]
        assert [i.key for i in b.search(("users",), filter={"year": {"$gte": 2025}})] == ["m2"]
        assert b.list_namespaces(prefix=("users",)) == [("users", "ana", "memories"), ("users", "ana", "prefs")]
        b.put(NS, "m1", {"text": "Ana's sister Lena moved to Lisbon", "year": 2025})  # an update from host B
        updated = a.get(NS, "m1")
        assert updated is not None and updated.value["year"] == 2025 and updated.created_at == got.created_at
        b.delete(NS, "m2")
        assert a.get(NS, "m2") is None and [i.key for i in a.search(NS)] == ["m1"]
        assert all("Toby" not in t.content for t in live_server.engine.get_turns("ana"))  # every version went
        assert asyncio.run(b.aget(NS, "m1")) is not None
        assert [i.key for i in asyncio.run(a.asearch(("users",), filter={"year": 2025}))] == ["m1"]
        # nothing of the store is kept on either host
        assert not any(p.is_file() for host in ("host-a", "host-b") if (tmp_path / host).exists()
                       for p in (tmp_path / host).rglob("*"))
    finally:
        a.close()
        b.close()
        a_engine.close()
        b_engine.close()


def test_ttl_on_two_hosts_and_the_writer_sweeps(live_server: LiveServer, tmp_path: Path) -> None:
    """The items' TTL is timed by the caller's clock; expired items are never returned to any host, and the
    server's engine (the writer) removes them with their turns."""
    now = [START]
    a_engine, b_engine = _host(live_server, tmp_path, "host-a"), _host(live_server, tmp_path, "host-b")
    a = MemoryStore(engine=a_engine, user_id="ana", clock=lambda: now[0])
    b = MemoryStore(engine=b_engine, user_id="ana", clock=lambda: now[0])
    try:
        a.put(("scratch",), "tmp", {"text": "call the vet"}, ttl=30)
        assert b.get(("scratch",), "tmp", refresh_ttl=False) is not None
        now[0] += timedelta(minutes=31)
        assert b.get(("scratch",), "tmp") is None and b.search(()) == [] and b.list_namespaces() == []
        assert live_server.engine.sweep_items("ana", now=now[0]) == 1
        assert live_server.engine.get_turns("ana") == []
    finally:
        for closable in (a, b, a_engine, b_engine):
            closable.close()


def test_a_pinned_token_reaches_only_its_users_items(live_server: LiveServer, tmp_path: Path) -> None:
    admin = _host(live_server, tmp_path, "admin")
    ana = _host(live_server, tmp_path, "ana", token=ANA)
    try:
        MemoryStore(engine=admin, user_id="bob").put(("notes",), "n1", {"text": "Bob's locker code is 0451"})
        mine = MemoryStore(engine=ana, user_id="ana")
        mine.put(("notes",), "n1", {"text": "Ana's note"})
        theirs = MemoryStore(engine=ana, user_id="bob")
        for call in (lambda: theirs.get(("notes",), "n1"), lambda: theirs.search(()),
                     lambda: theirs.list_namespaces(), lambda: theirs.put(("notes",), "n2", {"x": 1}),
                     lambda: theirs.delete(("notes",), "n1"), theirs.sweep_ttl):
            with pytest.raises(PermissionDeniedError):
                call()
        got = mine.get(("notes",), "n1")
        assert got is not None and got.value == {"text": "Ana's note"}
        bob = MemoryStore(engine=admin, user_id="bob").get(("notes",), "n1")
        assert bob is not None and bob.value["text"].startswith("Bob")
        with httpx.Client(base_url=live_server.url, headers={"Authorization": f"Bearer {ANA}"}) as raw:
            response = raw.post("/v1/store/search", json={"user_id": "bob", "prefix": []})
            assert response.status_code == 403
            assert raw.post("/v1/store/search", json={"prefix": []}).json()[0]["key"] == "n1"  # its own user
    finally:
        admin.close()
        ana.close()


def test_bad_item_input_is_a_typed_error_through_the_server(live_server: LiveServer, tmp_path: Path) -> None:
    from memory_ext.errors import InvalidNamespaceError, InvalidQueryError

    engine = _host(live_server, tmp_path, "host")
    try:
        with pytest.raises(InvalidQueryError, match=r"filter\.year"):
            engine.search_items("ana", ["users"], filter={"year": {"$near": 1}})
        with pytest.raises(InvalidNamespaceError):
            engine.put_items("ana", [{"namespace": ["a.b"], "key": "k", "value": {}}])
        assert engine.get_items("ana", [(["nothing"], "here")]) == [None]
    finally:
        engine.close()
