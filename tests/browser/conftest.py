"""Browser tests of the inspector page: Debian's ``chromium`` driven by Playwright for Python, against ``memext serve``
subprocesses on free loopback ports (hashing embedder, temporary stores).

Playwright never downloads a browser here: it launches the system's chromium (``MEMORY_EXT_CHROMIUM``, else
``chromium`` / ``chromium-browser`` on ``PATH``). Without chromium or the ``playwright`` package the tests skip with
the reason — unless ``MEMORY_EXT_REQUIRE_BROWSER=1`` (set by .ci/run, which installs chromium), where they fail.
The accessibility test injects axe-core's ``axe.min.js`` from the npm package .ci/run installs (pinned,
:data:`AXE_VERSION`) into a cache folder (``MEMORY_EXT_AXE`` names it); nothing is fetched from a CDN.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from memory_ext.store.chroma_server import free_port
from tests.conftest import REQUIRE_BROWSER
from tests.server.conftest import serve_command, subprocess_env, wait_ready

ADMIN = "admin-token-0123456789"
MAYA = "maya-token-0123456789"
"""The token server's tokens: ADMIN reaches every user; MAYA is pinned to the user "maya"."""
TIMEOUT_MS = 30_000
"""Playwright's wait for an element or a condition (auto-waiting; no test measures time)."""
AXE_VERSION = "4.14.1"
"""axe-core, the accessibility checker the tests inject into the page: installed from npm by .ci/run (pinned)."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.browser)


def _unavailable(why: str) -> None:
    if REQUIRE_BROWSER:
        pytest.fail(f"MEMORY_EXT_REQUIRE_BROWSER=1 but {why}")
    pytest.skip(why)


def chromium_path() -> str | None:
    """The system chromium Playwright launches (None: not installed)."""
    given = os.environ.get("MEMORY_EXT_CHROMIUM")
    if given:
        return given if Path(given).exists() else None
    return shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    """A headless chromium (the system's), shared by the session; each test opens its own context."""
    try:
        from playwright.sync_api import expect, sync_playwright
    except ImportError as exc:
        _unavailable(f"playwright is not installed ({exc}); pip install \"memory-ext[test]\"")
    executable = chromium_path()
    if executable is None:
        _unavailable("no chromium found (apt-get install chromium, or set MEMORY_EXT_CHROMIUM)")
    expect.set_options(timeout=TIMEOUT_MS)
    with sync_playwright() as p:
        try:
            launched = p.chromium.launch(executable_path=executable, headless=True,
                                         args=["--no-sandbox", "--disable-dev-shm-usage"])
        except Exception as exc:  # noqa: BLE001  reported: a skip with the reason, or a failure in CI
            _unavailable(f"chromium at {executable} did not start ({type(exc).__name__}: {exc})")
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    """A fresh page at 1280 x 900 (its own context: sessionStorage and downloads are per test); the page's
    console errors and uncaught exceptions are collected in ``page.errors``."""
    context = browser.new_context(viewport={"width": 1280, "height": 900}, accept_downloads=True)
    context.set_default_timeout(TIMEOUT_MS)
    pg = context.new_page()
    errors: list[str] = []
    pg.on("pageerror", lambda exc: errors.append(f"pageerror: {exc}"))
    pg.on("console", lambda msg: errors.append(f"console: {msg.text}") if msg.type == "error" else None)
    pg.errors = errors  # read by the tests (no_page_errors)
    try:
        yield pg
    finally:
        context.close()


@dataclass
class Served:
    """A ``memext serve`` subprocess: its URL and a REST client to write and check the store."""

    url: str
    token: str | None

    def client(self, token: str | None = None) -> httpx.Client:
        secret = token or self.token
        headers = {"Authorization": f"Bearer {secret}"} if secret else {}
        return httpx.Client(base_url=self.url, headers=headers, timeout=60)

    def add(self, user_id: str, turns: list[dict[str, Any]], agent_id: str | None = None) -> None:
        """Store ``turns`` for ``user_id`` and wait until they are fully indexed."""
        with self.client() as c:
            body: dict[str, Any] = {"user_id": user_id, "turns": turns, "wait": True}
            if agent_id:
                body["agent_id"] = agent_id
            c.post("/v1/turns", json=body).raise_for_status()

    def memories(self, user_id: str, **params: Any) -> list[dict[str, Any]]:
        """Every current memory of ``user_id`` (all pages)."""
        items: list[dict[str, Any]] = []
        cursor = None
        with self.client() as c:
            while True:
                query = {"user_id": user_id, "limit": 200, **params, **({"cursor": cursor} if cursor else {})}
                page = c.get("/v1/memories", params=query).raise_for_status().json()
                items += page["items"]
                cursor = page["next_cursor"]
                if not cursor:
                    return items


def _serve(tmp_path_factory: pytest.TempPathFactory, name: str, *args: str) -> Iterator[Served]:
    store = tmp_path_factory.mktemp(name) / "store"
    port = free_port()
    proc = subprocess.Popen(serve_command("--path", str(store), "--create", "--embedder", "hashing", "--port",
                                          str(port), "--log-level", "warning", *args),
                            env=subprocess_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_ready(url, proc)
        yield Served(url, ADMIN if args else None)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture(scope="module")
def open_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """``memext serve`` on loopback without tokens (the desktop setup: the page opens directly). Tests share it
    (one module), each with users of its own."""
    yield from _serve(tmp_path_factory, "open")


@pytest.fixture(scope="module")
def token_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """``memext serve`` with an admin token and one pinned to "maya"."""
    yield from _serve(tmp_path_factory, "tokens", "--token", ADMIN, "--token", f"{MAYA}:maya")


def axe_path() -> Path | None:
    """axe-core's ``axe.min.js``: ``MEMORY_EXT_AXE``, else the cache folder .ci/run installs it into
    (``$XDG_CACHE_HOME`` or ``~/.cache``, ``memory-ext/axe-core-<version>``); None when neither exists."""
    given = os.environ.get("MEMORY_EXT_AXE")
    if given:
        return Path(given) if Path(given).is_file() else None
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    default = cache / "memory-ext" / f"axe-core-{AXE_VERSION}" / "node_modules" / "axe-core" / "axe.min.js"
    return default if default.is_file() else None


@pytest.fixture(scope="session")
def axe_script() -> Path:
    """The axe-core script to inject with ``page.add_script_tag(path=...)`` (never fetched from a CDN)."""
    path = axe_path()
    if path is None:
        _unavailable(f"axe-core {AXE_VERSION} is not installed (npm install --prefix "
                     f"~/.cache/memory-ext/axe-core-{AXE_VERSION} axe-core@{AXE_VERSION}, or set MEMORY_EXT_AXE)")
    assert path is not None
    return path
