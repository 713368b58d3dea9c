"""Servers the integration tests start themselves: a real ``chroma run`` on a free loopback port.

The server runs once per test session in a temporary folder and is terminated at the end. The tests are skipped
when chromadb or the ``chroma`` executable (next to this Python first, then on PATH) is missing, unless
``MEMORY_EXT_REQUIRE_SERVERS=1`` (CI), which turns that skip into a failure. A server that does not come up is a
failure, with the end of its log.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from memory_ext.errors import StoreError
from memory_ext.store.chroma_server import ChromaServer, find_chroma_executable, run_chroma_server

HOST = "127.0.0.1"
REQUIRE_SERVERS = os.environ.get("MEMORY_EXT_REQUIRE_SERVERS") == "1"
STARTUP_TIMEOUT_S = 60.0


@pytest.fixture(scope="session")
def chroma_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ChromaServer]:
    exe = find_chroma_executable()
    try:
        import chromadb  # noqa: F401
    except ImportError:
        exe = None
    if exe is None:
        why = "chromadb or the `chroma` executable (next to this Python or on PATH) is missing: " \
              "pip install 'memory-ext[chroma]'"
        if REQUIRE_SERVERS:
            pytest.fail(f"MEMORY_EXT_REQUIRE_SERVERS=1 but {why}")
        pytest.skip(why)
    saved_no_proxy = {key: os.environ.get(key) for key in ("NO_PROXY", "no_proxy")}
    for key in saved_no_proxy:  # HttpClient (httpx) honours proxy variables: keep loopback traffic local
        os.environ[key] = ",".join(filter(None, [os.environ.get(key), HOST, "localhost"]))
    try:
        with run_chroma_server(tmp_path_factory.mktemp("chroma-server"),
                               startup_timeout_s=STARTUP_TIMEOUT_S) as server:
            yield server
    except StoreError as exc:  # the server did not come up: a failure, with the end of its log
        pytest.fail(str(exc))
    finally:
        for key, value in saved_no_proxy.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
