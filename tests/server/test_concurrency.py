"""Many clients at once against one server: no error and no lost write (counts, never timings)."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor

from memory_ext import Turn
from memory_ext.client import RemoteEngine

from .conftest import ADMIN, LiveServer

CLIENTS = 24
WRITES = 5
USERS = ("ana", "ben", "chen", "dara")
"""Several clients share each user, so writes to one namespace really interleave."""


def _client_work(url: str, index: int) -> list[str]:
    user = USERS[index % len(USERS)]
    found: list[str] = []
    with RemoteEngine(url, token=ADMIN) as engine:
        for n in range(WRITES):
            fact = f"client {index} note {n}: the locker code is {index * 100 + n}"
            added = engine.add_turns([Turn(role="user", content=fact, external_id=f"c{index}:{n}",
                                           session_id=f"client-{index}")], user)
            assert len(added.turn_ids) == 1
            result = engine.search(f"client {index} note {n} locker code", user, k=3)
            found.extend(item.text for item in result.items)
    return found


def test_two_dozen_threaded_clients_write_and_search(live_server: LiveServer) -> None:
    with ThreadPoolExecutor(max_workers=CLIENTS) as pool:
        results = list(pool.map(lambda i: _client_work(live_server.url, i), range(CLIENTS)))
    assert all(results)  # every search found something
    with RemoteEngine(live_server.url, token=ADMIN) as engine:
        assert engine.stats().turns == CLIENTS * WRITES
        for index in range(CLIENTS):
            turns = engine.get_turns({"user_id": USERS[index % len(USERS)], "session_id": f"client-{index}"})
            assert sorted(t.external_id or "" for t in turns) == [f"c{index}:{n}" for n in range(WRITES)]
        # each client's last write is searchable by its own words
        for index in range(CLIENTS):
            code = str(index * 100 + WRITES - 1)
            hits = engine.search(f"locker code {code}", USERS[index % len(USERS)], k=5).items
            assert any(code in h.text for h in hits)


def test_concurrent_async_clients(live_server: LiveServer) -> None:
    async def run() -> None:
        engine = RemoteEngine(live_server.url, token=ADMIN)

        async def one(index: int) -> int:
            await engine.aadd_turns([{"role": "user", "content": f"async client {index} likes tea number {index}"}],
                                    {"user_id": "tea", "session_id": f"a{index}"})
            result = await engine.asearch(f"tea number {index}", "tea", k=3)
            return len(result.items)

        counts = await asyncio.gather(*(one(i) for i in range(CLIENTS)))
        assert all(c >= 1 for c in counts)
        assert len(await engine.aget_turns("tea")) == CLIENTS
        await engine.aclose()

    asyncio.run(run())
