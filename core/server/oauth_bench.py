"""What OAuth costs on an authenticated MCP tool call: ``python -m memory_ext.server.oauth_bench [--calls N]``.

One ``memext serve --oauth`` (uvicorn in a thread of this process, loopback, hashing embedder, a store of a few
hundred turns) and two MCP sessions on it, both pinned to the same user: one with a static bearer token
(``--token T:ana``), one with an access token the built-in authorization server issued (registration, PKCE, the
owner's consent, the code exchange — done here over HTTP). ``--calls`` ``search_memory`` calls per session, after
warm-up, alternating call by call; p50 / p95 of each path and the differences. On a busy machine the end-to-end
difference is mostly noise, so the verification itself is timed too: the token check each request runs in
:class:`~memory_ext.server.auth.AuthMiddleware` (static table lookup vs the OAuth store's), 5000 times each, in
microseconds. Prints one JSON object.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import hashlib
import json
import re
import secrets
import tempfile
import threading
import time
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

__all__ = ["oauth_access_token", "run_oauth_overhead"]

OWNER = "bench-owner-token-0123456789"
PINNED = "bench-ana-token-0123456789"
REDIRECT = "http://127.0.0.1:9/callback"


def oauth_access_token(base_url: str, owner_token: str, user_id: str) -> str:
    """An access token for ``user_id`` from ``memext serve --oauth`` at ``base_url``: dynamic registration, PKCE
    S256, the consent page answered with the owner token, and the code exchange (what a connector does)."""
    import httpx

    with httpx.Client(base_url=base_url, timeout=30) as http:
        client_id = http.post("/register", json={"redirect_uris": [REDIRECT], "client_name": "bench",
                                                 "token_endpoint_auth_method": "none"}).json()["client_id"]
        verifier = secrets.token_urlsafe(48)
        challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).decode().rstrip("=")
        consent = http.get("/authorize?" + urlencode({
            "response_type": "code", "client_id": client_id, "redirect_uri": REDIRECT, "code_challenge": challenge,
            "code_challenge_method": "S256", "resource": base_url + "/mcp"})).headers["location"]
        page = http.get(consent).text
        fields = dict(re.findall(r'<input type="hidden" name="(\w+)" value="([^"]*)"', page))
        answer = http.post("/oauth/consent", data={**fields, "user_id": user_id, "owner_token": owner_token,
                                                   "decision": "allow"}, headers={"Origin": base_url})
        code = parse_qs(urlsplit(answer.headers["location"]).query)["code"][0]
        tokens = http.post("/token", data={"grant_type": "authorization_code", "code": code, "client_id": client_id,
                                           "redirect_uri": REDIRECT, "code_verifier": verifier,
                                           "resource": base_url + "/mcp"}).json()
        return str(tokens["access_token"])


async def _paired_calls(url: str, tokens: dict[str, str], calls: int, warmup: int) -> dict[str, list[float]]:
    import httpx2
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    async def open_session(token: str, stack: Any) -> ClientSession:
        http = await stack.enter_async_context(httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"},
                                                                  timeout=60))
        read, write = await stack.enter_async_context(streamable_http_client(url, http_client=http))
        session = await stack.enter_async_context(ClientSession(read, write))
        await session.initialize()
        return session

    from contextlib import AsyncExitStack

    times: dict[str, list[float]] = {name: [] for name in tokens}
    async with AsyncExitStack() as stack:
        sessions = {name: await open_session(token, stack) for name, token in tokens.items()}
        for i in range(warmup + calls):
            order = list(sessions) if i % 2 == 0 else list(reversed(sessions))
            for name in order:
                t0 = time.perf_counter()
                result = await sessions[name].call_tool("search_memory", {"user_id": "ana", "query": "cello", "k": 5})
                elapsed = (time.perf_counter() - t0) * 1000
                if result.is_error:
                    raise RuntimeError(f"search_memory failed on the {name} path: {result.content}")
                if i >= warmup:
                    times[name].append(elapsed)
    return times


def run_oauth_overhead(calls: int = 300, warmup: int = 30, turns: int = 300) -> dict[str, Any]:
    """p50 / p95 (ms) of ``search_memory`` over MCP with a static bearer token and with an OAuth access token."""
    import uvicorn

    from ..bench.metrics import percentile
    from ..engine import MemoryEngine
    from ..store.chroma_server import free_port
    from .app import build_app
    from .oauth_config import OAuthConfig
    from .settings import TokenTable

    path = tempfile.mkdtemp(prefix="memext-oauth-bench-")
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    engine = MemoryEngine.open(path, embedder="hashing")
    engine.add_turns([{"role": "user", "content": f"note {i}: the cello lesson moved to room {i % 17}"}
                      for i in range(turns)], "ana")
    config = OAuthConfig.resolve(mode="builtin", public_url=base, store_path=path, env={})
    app = build_app(engine, tokens=TokenTable.parse([OWNER, f"{PINNED}:ana"]), host="127.0.0.1", oauth=config)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", access_log=False))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.02)
    try:
        token = oauth_access_token(base, OWNER, "ana")
        times = asyncio.run(_paired_calls(base + "/mcp", {"bearer": PINNED, "oauth": token}, calls, warmup))
        verify = asyncio.run(_verification_us(app, token))
    finally:
        server.should_exit = True
        thread.join(timeout=30)
    stats = {name: {"p50_ms": round(percentile(v, 50), 3), "p95_ms": round(percentile(v, 95), 3), "n": len(v)}
             for name, v in times.items()}
    return {**stats, "oauth_minus_bearer_p50_ms": round(stats["oauth"]["p50_ms"] - stats["bearer"]["p50_ms"], 3),
            "oauth_minus_bearer_p95_ms": round(stats["oauth"]["p95_ms"] - stats["bearer"]["p95_ms"], 3),
            "verify_us": verify, "calls": calls, "turns": turns}


async def _verification_us(app: Any, oauth_token: str, rounds: int = 5000) -> dict[str, dict[str, float]]:
    """The token check of one request, static bearer vs OAuth (p50 / p95 in microseconds)."""
    from ..bench.metrics import percentile
    from .auth import AuthMiddleware

    middleware = app
    while not isinstance(middleware, AuthMiddleware):  # the guards in front of it
        middleware = middleware.app
    assert middleware.oauth is not None
    out: dict[str, dict[str, float]] = {}
    for name, header in (("bearer", f"Bearer {PINNED}"), ("oauth", f"Bearer {oauth_token}")):
        samples: list[float] = []
        for _ in range(rounds):
            t0 = time.perf_counter()
            if middleware.tokens.authenticate(header) is None:
                await middleware.oauth.authenticate(header, "/mcp")
            samples.append((time.perf_counter() - t0) * 1e6)
        out[name] = {"p50_us": round(percentile(samples, 50), 1), "p95_us": round(percentile(samples, 95), 1)}
    return out


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--warmup", type=int, default=30)
    args = parser.parse_args()
    print(json.dumps(run_oauth_overhead(args.calls, args.warmup), indent=2))
