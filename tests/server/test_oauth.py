"""OAuth 2.1 (the MCP authorization spec) on a live `memext serve`: the protected-resource and authorization-server
metadata, the whole connector flow with the official `mcp` SDK's OAuth client (discovery, dynamic registration,
PKCE, the owner's consent, tool calls, refresh), Client ID Metadata Documents served from loopback, revocation,
an external identity provider's JWTs (keys and JWKS made by the test), and the attacks on the flow."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import re
import secrets
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import httpx
import httpx2
import pytest
import uvicorn
from mcp import ClientSession
from mcp.client.auth import AuthorizationCodeResult, OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import OAuthClientInformationFull, OAuthClientMetadata, OAuthToken

from memory_ext import ConfigError, MemoryEngine
from memory_ext.server import TokenTable, build_app
from memory_ext.server.oauth_config import OAuthConfig
from memory_ext.store.chroma_server import free_port

from .conftest import ADMIN, ANA

REDIRECT = "http://127.0.0.1:9/callback"  # never opened: the test reads the code from the redirect itself


# -- servers -----------------------------------------------------------------------------------------------------------


@dataclass
class OAuthLive:
    url: str
    engine: MemoryEngine | None
    config: OAuthConfig

    @property
    def mcp_url(self) -> str:
        return self.url + "/mcp"


@contextmanager
def oauth_server(store: Path, *, mode: str = "builtin", tokens: tuple[str, ...] = (ADMIN, f"{ANA}:ana"),
                 **config: Any) -> Iterator[OAuthLive]:
    """`memext serve --oauth` (or ``--oauth-issuer``) in a thread of the test, on a free loopback port."""
    port = free_port()
    public = f"http://127.0.0.1:{port}"
    oauth = OAuthConfig.resolve(mode=mode, public_url=public, store_path=str(store), env={},
                                issuer=config.pop("issuer", None), section=config)
    engine = MemoryEngine.open(store, embedder="hashing")
    app = build_app(engine, tokens=TokenTable.parse(tokens), host="127.0.0.1", oauth=oauth)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", access_log=False))
    thread = threading.Thread(target=server.run, name=f"memext-oauth-{port}", daemon=True)
    thread.start()
    while not server.started:
        if not thread.is_alive():
            raise RuntimeError("the OAuth test server did not start")
        time.sleep(0.02)
    try:
        yield OAuthLive(public, engine, oauth)
    finally:
        server.should_exit = True
        thread.join(timeout=30)


@contextmanager
def documents_server(documents: dict[str, Any]) -> Iterator[str]:
    """A loopback HTTP server answering GET ``path`` with ``documents[path]`` as JSON (JWKS, IdP and client
    metadata); the dict may be changed while it runs."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = documents.get(self.path)
            payload = json.dumps(body).encode() if body is not None else b"{}"
            self.send_response(200 if body is not None else 404)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, *args: Any) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


# -- the owner at the consent page -------------------------------------------------------------------------------------


def consent_form(http: httpx.Client, authorize_url: str) -> tuple[str, dict[str, str]]:
    """Follow ``/authorize`` to the consent page; its URL and hidden fields."""
    response = http.get(authorize_url)
    assert response.status_code == 302, response.text
    page_url = response.headers["location"]
    page = http.get(page_url)
    assert page.status_code == 200, page.text
    assert "inspector.css" in page.text and "<script" not in page.text
    redirect = parse_qs(urlsplit(authorize_url).query)["redirect_uri"][0]
    back = "{0.scheme}://{0.netloc}".format(urlsplit(redirect))
    assert f"form-action 'self' {back};" in page.headers["Content-Security-Policy"]  # the form may lead back there
    fields = dict(re.findall(r'<input type="hidden" name="(\w+)" value="([^"]*)"', page.text))
    return page_url, fields


def approve(authorize_url: str, *, owner: str = ADMIN, user: str = "ana", origin: str | None = None) -> httpx.Response:
    """The owner opens the consent page and allows the client ``user``'s memory; the answer (a 303 to the client)."""
    with httpx.Client(timeout=30, follow_redirects=False) as http:
        page_url, fields = consent_form(http, authorize_url)
        base = "{0.scheme}://{0.netloc}".format(urlsplit(page_url))
        return http.post(base + "/oauth/consent", data={**fields, "user_id": user, "owner_token": owner,
                                                        "decision": "allow"},
                         headers={"Origin": origin or base})


def code_of(answer: httpx.Response) -> tuple[str, str | None]:
    assert answer.status_code == 303, answer.text
    query = parse_qs(urlsplit(answer.headers["location"]).query)
    assert "code" in query, query
    return query["code"][0], query.get("state", [None])[0]


def pkce() -> tuple[str, str]:
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).decode().rstrip("=")
    return verifier, challenge


def register(live: OAuthLive, redirect: str = REDIRECT) -> str:
    response = httpx.post(live.url + "/register", json={"redirect_uris": [redirect], "client_name": "test client",
                                                         "token_endpoint_auth_method": "none"})
    assert response.status_code == 201, response.text
    return str(response.json()["client_id"])


def authorize_url(live: OAuthLive, client_id: str, challenge: str, **extra: str) -> str:
    params = {"response_type": "code", "client_id": client_id, "redirect_uri": REDIRECT, "code_challenge": challenge,
              "code_challenge_method": "S256", "state": "st-1", "resource": live.mcp_url, **extra}
    return live.url + "/authorize?" + urlencode(params)


def exchange(live: OAuthLive, client_id: str, code: str, verifier: str, **extra: str) -> httpx.Response:
    return httpx.post(live.url + "/token", data={"grant_type": "authorization_code", "code": code,
                                                 "client_id": client_id, "redirect_uri": REDIRECT,
                                                 "code_verifier": verifier, "resource": live.mcp_url, **extra})


def tokens_by_hand(live: OAuthLive, user: str = "ana") -> tuple[str, dict[str, Any]]:
    client_id = register(live)
    verifier, challenge = pkce()
    code, state = code_of(approve(authorize_url(live, client_id, challenge), user=user))
    assert state == "st-1"
    response = exchange(live, client_id, code, verifier)
    assert response.status_code == 200, response.text
    return client_id, response.json()


def mcp_call(url: str, token: str, tool: str, arguments: dict[str, Any]) -> Any:
    async def run() -> Any:
        async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60) as http, \
                streamable_http_client(url, http_client=http) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            return await session.call_tool(tool, arguments)

    return asyncio.run(run())


# -- metadata and the resource server ----------------------------------------------------------------------------------


def test_metadata_and_the_401_challenge(tmp_path: Path) -> None:
    with oauth_server(tmp_path / "store") as live, httpx.Client(base_url=live.url, timeout=30) as http:
        refused = http.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
        assert refused.status_code == 401
        challenge = refused.headers["www-authenticate"]
        assert challenge.startswith("Bearer ")
        assert f'resource_metadata="{live.url}/.well-known/oauth-protected-resource/mcp"' in challenge
        rest = http.post("/v1/search", json={"user_id": "ana", "query": "x"})
        assert rest.status_code == 401
        root_metadata = f'resource_metadata="{live.url}/.well-known/oauth-protected-resource"'
        assert root_metadata in rest.headers["www-authenticate"]
        assert rest.json()["error"]["type"] == "AuthenticationError"

        prm = http.get("/.well-known/oauth-protected-resource/mcp").json()
        assert prm["resource"] == live.mcp_url and prm["authorization_servers"] == [live.url]
        assert prm["scopes_supported"] == ["memory"] and prm["bearer_methods_supported"] == ["header"]
        assert http.get("/.well-known/oauth-protected-resource").json()["resource"] == live.url

        metadata = http.get("/.well-known/oauth-authorization-server").json()
        from authlib.oauth2.rfc8414 import AuthorizationServerMetadata

        AuthorizationServerMetadata(metadata).validate()  # RFC 8414, checked by authlib
        assert metadata["issuer"] == live.url
        assert metadata["code_challenge_methods_supported"] == ["S256"]
        assert metadata["client_id_metadata_document_supported"] is True
        assert {"authorization_code", "refresh_token"} <= set(metadata["grant_types_supported"])
        for endpoint in ("authorization_endpoint", "token_endpoint", "registration_endpoint", "revocation_endpoint"):
            assert metadata[endpoint].startswith(live.url + "/")

        openapi = http.get("/openapi.json").json()
        flow = openapi["components"]["securitySchemes"]["oauth2"]["flows"]["authorizationCode"]
        assert flow["authorizationUrl"] == live.url + "/authorize" and flow["tokenUrl"] == live.url + "/token"
        assert {"oauth2": ["memory"]} in openapi["paths"]["/v1/search"]["post"]["security"]

        # static bearer tokens keep working next to OAuth
        with httpx.Client(base_url=live.url, headers={"Authorization": f"Bearer {ANA}"}) as ana:
            assert ana.post("/v1/search", json={"user_id": "ana", "query": "x"}).status_code == 200


def test_the_sdk_oauth_client_does_the_whole_connector_flow(tmp_path: Path) -> None:
    """Discovery → dynamic registration → PKCE → the owner's consent → tool calls → refresh, with the `mcp` SDK."""
    with oauth_server(tmp_path / "store", access_ttl=3) as live:
        asyncio.run(_connector_flow(live))


class MemoryStorage:
    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client: OAuthClientInformationFull | None = None
        self.history: list[OAuthToken] = []

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens
        self.history.append(tokens)

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client = client_info


async def _connector_flow(live: OAuthLive) -> None:
    storage = MemoryStorage()
    answers: list[tuple[str, str | None]] = []
    consents: list[str] = []

    async def redirect_handler(url: str) -> None:  # the browser: the owner approves Ana's memory
        consents.append(url)
        answers.append(code_of(await asyncio.to_thread(approve, url)))

    async def callback_handler() -> AuthorizationCodeResult:
        code, state = answers.pop()
        return AuthorizationCodeResult(code=code, state=state)

    provider = OAuthClientProvider(live.mcp_url, OAuthClientMetadata(
        redirect_uris=[REDIRECT], client_name="connector test", grant_types=["authorization_code", "refresh_token"],
        token_endpoint_auth_method="none"), storage, redirect_handler, callback_handler)

    async def session_calls(*calls: tuple[str, dict[str, Any]]) -> list[Any]:
        async with httpx2.AsyncClient(auth=provider, timeout=60) as http, \
                streamable_http_client(live.mcp_url, http_client=http) as (read, write), \
                ClientSession(read, write) as session:
            await session.initialize()
            results: list[Any] = [[t.name for t in (await session.list_tools()).tools]]
            for name, arguments in calls:
                results.append(await session.call_tool(name, arguments))
            return results

    tools, saved, found, other = await session_calls(
        ("save_memory", {"user_id": "ana", "content": "Ana's cello teacher is Mrs Okafor."}),
        ("search_memory", {"user_id": "ana", "query": "who teaches Ana the cello?", "k": 3}),
        ("search_memory", {"user_id": "ben", "query": "anything", "k": 3}))
    assert {"search_memory", "save_memory"} <= set(tools)
    assert not saved.is_error and not found.is_error
    assert "Okafor" in json.dumps(found.structured_content)
    assert other.is_error and "PermissionDenied" in other.content[0].text  # the grant is Ana's memory only
    assert len(consents) == 1 and storage.client is not None and storage.tokens is not None
    asked = parse_qs(urlsplit(consents[0]).query)
    assert asked["code_challenge_method"] == ["S256"] and asked["resource"] == [live.mcp_url]
    first = storage.tokens

    # REST takes the same token, pinned to the same user
    with httpx.Client(base_url=live.url, headers={"Authorization": f"Bearer {first.access_token}"}) as rest:
        assert [n["user_id"] for n in rest.get("/v1/namespaces").json()] == ["ana"]
        assert [row["user_id"] for row in rest.get("/v1/overview").json()] == ["ana"]  # the inspector's first call
        assert rest.post("/v1/search", json={"user_id": "ben", "query": "x"}).status_code == 403

    await asyncio.sleep(3.5)  # the access token expires (access_ttl=3): the client refreshes it, no new consent
    with httpx.Client(base_url=live.url, headers={"Authorization": f"Bearer {first.access_token}"}) as rest:
        expired = rest.post("/v1/search", json={"user_id": "ana", "query": "x"})
        assert expired.status_code == 401 and "expired" in expired.json()["error"]["message"]
    (_, again) = await session_calls(("search_memory", {"user_id": "ana", "query": "cello teacher", "k": 1}))
    assert "Okafor" in json.dumps(again.structured_content)
    assert len(consents) == 1, "a refresh, not a new consent"
    assert storage.tokens.access_token != first.access_token
    assert storage.tokens.refresh_token != first.refresh_token  # rotated

    # the rotated refresh token used again (stolen): refused, and the grant is revoked
    assert storage.client.client_id is not None and first.refresh_token is not None
    reuse = httpx.post(live.url + "/token", data={"grant_type": "refresh_token", "refresh_token": first.refresh_token,
                                                  "client_id": storage.client.client_id})
    assert reuse.status_code == 400 and reuse.json()["error"] == "invalid_grant"
    with httpx.Client(base_url=live.url, headers={"Authorization": f"Bearer {storage.tokens.access_token}"}) as rest:
        assert rest.post("/v1/search", json={"user_id": "ana", "query": "x"}).status_code == 401


def test_revocation_ends_the_grant(tmp_path: Path) -> None:
    with oauth_server(tmp_path / "store") as live:
        client_id, tokens = tokens_by_hand(live)
        result = mcp_call(live.mcp_url, tokens["access_token"], "save_memory",
                          {"user_id": "ana", "content": "Ana likes figs."})
        assert not result.is_error
        revoked = httpx.post(live.url + "/revoke", data={"token": tokens["refresh_token"], "client_id": client_id,
                                                         "client_secret": ""})  # (the SDK's handler wants the field)
        assert revoked.status_code == 200
        with httpx.Client(base_url=live.url, headers={"Authorization": f"Bearer {tokens['access_token']}"}) as rest:
            refused = rest.post("/v1/search", json={"user_id": "ana", "query": "figs"})
        assert refused.status_code == 401 and "resource_metadata" in refused.headers["www-authenticate"]
        again = httpx.post(live.url + "/token", data={"grant_type": "refresh_token", "client_id": client_id,
                                                      "refresh_token": tokens["refresh_token"]})
        assert again.status_code == 400


def test_tokens_are_stored_hashed(tmp_path: Path) -> None:
    with oauth_server(tmp_path / "store") as live:
        _, tokens = tokens_by_hand(live)
    raw = (tmp_path / "store" / "oauth.sqlite3").read_bytes()
    raw += b"".join(p.read_bytes() for p in (tmp_path / "store").glob("oauth.sqlite3-*"))
    for secret in (tokens["access_token"], tokens["refresh_token"]):
        assert secret.encode() not in raw
        assert hashlib.sha256(secret.encode()).hexdigest().encode() in raw  # the digest is the key


def test_a_client_id_metadata_document_registers_the_client(tmp_path: Path) -> None:
    documents: dict[str, Any] = {}
    with documents_server(documents) as docs:
        client_id = docs + "/oauth/client.json"
        documents["/oauth/client.json"] = {"client_id": client_id, "client_name": "Loopback connector",
                                           "redirect_uris": [REDIRECT], "token_endpoint_auth_method": "none",
                                           "grant_types": ["authorization_code", "refresh_token"]}
        with oauth_server(tmp_path / "store", client_metadata=["http://127.0.0.1:*"]) as live:
            verifier, challenge = pkce()
            with httpx.Client(timeout=30) as http:
                page_url, _ = consent_form(http, authorize_url(live, client_id, challenge))
                assert "Loopback connector" in http.get(page_url).text
            code, _ = code_of(approve(authorize_url(live, client_id, challenge)))
            response = exchange(live, client_id, code, verifier)
            assert response.status_code == 200, response.text
            assert not mcp_call(live.mcp_url, response.json()["access_token"], "list_memories",
                                {"user_id": "ana"}).is_error
        # not allowed by default: a plain-http loopback document is never fetched
        with oauth_server(tmp_path / "store2") as live:
            refused = httpx.get(authorize_url(live, client_id, pkce()[1]))
            assert refused.status_code == 400 and "not found" in refused.json()["error_description"]
        # a document that names another client id is refused
        documents["/oauth/client.json"]["client_id"] = "https://evil.example/client.json"
        with oauth_server(tmp_path / "store3", client_metadata=["http://127.0.0.1:*"]) as live:
            assert httpx.get(authorize_url(live, client_id, pkce()[1])).status_code == 400


# -- attacks -----------------------------------------------------------------------------------------------------------


def test_a_wrong_redirect_uri_gets_no_code(tmp_path: Path) -> None:
    with oauth_server(tmp_path / "store") as live:
        client_id = register(live)
        _, challenge = pkce()
        response = httpx.get(authorize_url(live, client_id, challenge, redirect_uri="https://evil.example/cb"))
        assert response.status_code == 400 and "location" not in response.headers  # never sent to the attacker
        assert response.json()["error"] == "invalid_request"
        # nor can the code be redeemed with another redirect_uri than the one it was issued for
        verifier, challenge = pkce()
        code, _ = code_of(approve(authorize_url(live, client_id, challenge)))
        assert exchange(live, client_id, code, verifier, redirect_uri="https://evil.example/cb").status_code == 400


def test_a_replayed_code_is_refused_and_revokes_what_it_gave(tmp_path: Path) -> None:
    with oauth_server(tmp_path / "store") as live:
        client_id = register(live)
        verifier, challenge = pkce()
        code, _ = code_of(approve(authorize_url(live, client_id, challenge)))
        first = exchange(live, client_id, code, verifier)
        assert first.status_code == 200
        replay = exchange(live, client_id, code, verifier)
        assert replay.status_code == 400 and replay.json()["error"] == "invalid_grant"
        bearer = {"Authorization": f"Bearer {first.json()['access_token']}"}
        with httpx.Client(base_url=live.url, headers=bearer) as rest:
            assert rest.get("/v1/namespaces").status_code == 401  # RFC 6749 §4.1.2: the first tokens are revoked


def test_pkce_plain_and_a_wrong_verifier_are_refused(tmp_path: Path) -> None:
    with oauth_server(tmp_path / "store") as live:
        client_id = register(live)
        verifier = secrets.token_urlsafe(48)
        plain = httpx.get(authorize_url(live, client_id, verifier, code_challenge_method="plain"))
        assert plain.status_code in (302, 400)
        where = plain.headers.get("location", "") + plain.text
        assert "consent" not in where and "invalid_request" in where  # no consent page for a plain challenge
        missing = httpx.get(live.url + "/authorize?" + urlencode({"response_type": "code", "client_id": client_id,
                                                                   "redirect_uri": REDIRECT}))
        assert "consent" not in missing.headers.get("location", "")
        verifier, challenge = pkce()
        code, _ = code_of(approve(authorize_url(live, client_id, challenge)))
        wrong = exchange(live, client_id, code, secrets.token_urlsafe(48))
        assert wrong.status_code == 400 and wrong.json()["error"] == "invalid_grant"


def test_a_token_for_another_resource_is_not_issued_nor_accepted(tmp_path: Path) -> None:
    with oauth_server(tmp_path / "store") as live:
        client_id = register(live)
        _, challenge = pkce()
        response = httpx.get(authorize_url(live, client_id, challenge, resource="https://other.example/mcp"))
        assert response.status_code == 302
        assert "error=invalid_target" in response.headers["location"] and "consent" not in response.headers["location"]
    # an identity provider's token whose audience is another server: 401 (see also test_external_identity_provider)


def test_a_consent_forged_from_another_origin_is_refused(tmp_path: Path) -> None:
    with oauth_server(tmp_path / "store") as live:
        client_id = register(live)
        _, challenge = pkce()
        forged = approve(authorize_url(live, client_id, challenge), origin="https://evil.example")
        assert forged.status_code == 403 and "location" not in forged.headers
        with httpx.Client(timeout=30) as http:  # a cross-site form cannot know the page's CSRF value either
            _, fields = consent_form(http, authorize_url(live, client_id, challenge))
            answer = http.post(live.url + "/oauth/consent", data={**fields, "csrf": "guessed", "user_id": "ana",
                                                                  "owner_token": ADMIN, "decision": "allow"},
                               headers={"Origin": live.url})
            assert answer.status_code == 403 and "location" not in answer.headers
            # a wrong owner token, or a pinned one granting another user, gets no code
            _, fields = consent_form(http, authorize_url(live, client_id, challenge))
            for owner, user, status in (("not-an-owner-token", "ana", 401), (ANA, "ben", 403)):
                answer = http.post(live.url + "/oauth/consent", data={**fields, "user_id": user, "owner_token": owner,
                                                                      "decision": "allow"},
                                   headers={"Origin": live.url})
                assert answer.status_code == status and "location" not in answer.headers
            # the pinned token may grant its own user; "Deny" sends the client access_denied
            assert code_of(approve(authorize_url(live, client_id, challenge), owner=ANA, user="ana"))[0]
            _, fields = consent_form(http, authorize_url(live, client_id, challenge))
            denied = http.post(live.url + "/oauth/consent", data={**fields, "decision": "deny"},
                               headers={"Origin": live.url})
            assert denied.status_code == 303 and "error=access_denied" in denied.headers["location"]


def test_user_a_token_does_not_reach_user_b(tmp_path: Path) -> None:
    with oauth_server(tmp_path / "store") as live:
        with httpx.Client(base_url=live.url, headers={"Authorization": f"Bearer {ADMIN}"}) as admin:
            admin.post("/v1/turns", json={"user_id": "ben", "turns": [{"role": "user", "content": "Ben's PIN is 77"}]})
        _, ana = tokens_by_hand(live, user="ana")
        token = ana["access_token"]
        for tool, arguments in (("search_memory", {"user_id": "ben", "query": "PIN"}),
                                ("list_memories", {"user_id": "ben"}),
                                ("forget", {"user_id": "ben", "everything": True})):
            result = mcp_call(live.mcp_url, token, tool, arguments)
            assert result.is_error and "PermissionDenied" in result.content[0].text
        with httpx.Client(base_url=live.url, headers={"Authorization": f"Bearer {token}"}) as rest:
            assert rest.post("/v1/search", json={"user_id": "ben", "query": "PIN"}).status_code == 403
            assert rest.get("/v1/stats").status_code == 403
        with httpx.Client(base_url=live.url, headers={"Authorization": f"Bearer {ADMIN}"}) as admin:
            assert len(admin.get("/v1/turns", params={"user_id": "ben"}).json()) == 1  # untouched


# -- an external identity provider -------------------------------------------------------------------------------------


def test_external_identity_provider_jwts(tmp_path: Path) -> None:
    from joserfc import jwt
    from joserfc.jwk import KeySet, RSAKey

    key = RSAKey.generate_key(2048, parameters={"kid": "k1", "use": "sig", "alg": "RS256"})
    stranger = RSAKey.generate_key(2048, parameters={"kid": "k1", "alg": "RS256"})
    documents: dict[str, Any] = {}
    with documents_server(documents) as origin:
        idp = origin + "/"  # an issuer with a trailing slash (Auth0's form): compared exactly, discovered without
        documents["/.well-known/openid-configuration"] = {"issuer": idp, "jwks_uri": origin + "/jwks.json"}
        documents["/jwks.json"] = KeySet([key]).as_dict(private=False)
        with oauth_server(tmp_path / "store", mode="external", issuer=idp, user_claim="email", leeway=30,
                          tokens=()) as live:
            now = int(time.time())

            def token(signer: Any = key, **claims: Any) -> str:
                base = {"iss": idp, "aud": live.mcp_url, "sub": "u-123", "email": "ana@example.com",
                        "scope": "openid memory", "iat": now, "exp": now + 600}
                base.update(claims)
                return jwt.encode({"alg": "RS256", "kid": "k1"}, {k: v for k, v in base.items() if v is not None},
                                  signer)

            def status(value: str) -> tuple[int, str]:
                response = httpx.post(live.url + "/v1/search", json={"user_id": "ana@example.com", "query": "x"},
                                      headers={"Authorization": f"Bearer {value}"})
                return response.status_code, response.headers.get("www-authenticate", "")

            prm = httpx.get(live.url + "/.well-known/oauth-protected-resource/mcp").json()
            assert prm["authorization_servers"] == [idp]
            assert status(token())[0] == 200
            assert not mcp_call(live.mcp_url, token(), "save_memory",
                                {"user_id": "ana@example.com", "content": "Ana flies on Tuesday."}).is_error
            assert mcp_call(live.mcp_url, token(), "list_memories", {"user_id": "ben@example.com"}).is_error
            assert status(token(aud=live.url))[0] == 200  # the server's base URL is this resource too
            assert status(token(exp=now - 10))[0] == 200  # within the clock skew (30 s)
            code, challenge = status(token(exp=now - 120))
            assert code == 401 and 'error="invalid_token"' in challenge and "expired" in challenge
            assert status(token(aud="https://other.example/mcp"))[0] == 401  # a token for another resource
            assert status(token(iss="https://other-idp.example"))[0] == 401
            assert status(token(iss=origin))[0] == 401  # not exactly the issuer
            assert status(token(signer=stranger))[0] == 401  # not signed by the issuer's keys
            assert status(token(email=None))[0] == 401  # no claim naming the memory user
            code, challenge = status(token(scope="openid"))
            assert code == 403 and 'error="insufficient_scope"' in challenge and 'scope="memory"' in challenge
            assert status("not.a.jwt")[0] == 401
            # the identity provider rotates its key: the server fetches the JWKS again
            rotated = RSAKey.generate_key(2048, parameters={"kid": "k2", "alg": "RS256"})
            documents["/jwks.json"] = KeySet([key, rotated]).as_dict(private=False)
            fresh = jwt.encode({"alg": "RS256", "kid": "k2"}, {"iss": idp, "aud": live.mcp_url, "scope": "memory",
                                                               "email": "ana@example.com", "exp": now + 600}, rotated)
            assert status(fresh)[0] == 200


# -- settings ----------------------------------------------------------------------------------------------------------


def test_oauth_settings_refuse_what_cannot_work(tmp_path: Path) -> None:
    from types import SimpleNamespace

    from memory_ext.server import ServerSettings
    from memory_ext.server.oauth_config import resolve_oauth

    args = SimpleNamespace(oauth=True, oauth_issuer=None, public_url=None, oauth_user_claim=None)
    settings = ServerSettings.resolve(path=str(tmp_path), env={})
    with pytest.raises(ConfigError) as info:  # the owner approves clients with a token: --oauth needs one
        resolve_oauth(args, settings, env={})
    assert info.value.field == "token" and "--token" in info.value.fix
    settings = ServerSettings.resolve(path=str(tmp_path), host="0.0.0.0", tokens=["owner-token-123"], env={})
    with pytest.raises(ConfigError) as info:
        resolve_oauth(args, settings, env={})
    assert info.value.field == "public_url"
    with pytest.raises(ConfigError):
        resolve_oauth(SimpleNamespace(**{**vars(args), "public_url": "http://memory.example.com"}), settings, env={})
    config = resolve_oauth(SimpleNamespace(**{**vars(args), "public_url": "https://memory.example.com/"}), settings,
                           env={})
    assert config is not None and config.resource_urls[0] == "https://memory.example.com/mcp"
    settings.oauth = config
    settings.check_binding()  # OAuth counts as authentication beyond loopback
    external = ServerSettings.resolve(path=str(tmp_path), host="0.0.0.0", env={})
    config = resolve_oauth(SimpleNamespace(oauth=False, oauth_issuer="https://idp.example.com",
                                           oauth_user_claim="email", public_url="https://memory.example.com"),
                           external, env={})
    assert config is not None and config.mode == "external" and config.user_claim == "email"
    assert resolve_oauth(SimpleNamespace(oauth=False, oauth_issuer=None, public_url=None, oauth_user_claim=None),
                         ServerSettings.resolve(path=str(tmp_path), env={}), env={}) is None
    with pytest.raises(ConfigError) as info:
        OAuthConfig.resolve(mode="builtin", public_url=None, store_path=str(tmp_path), section={"colour": "red"},
                            env={})
    assert info.value.field == "server.oauth.colour"


def test_memext_serve_oauth_on_the_command_line(tmp_path: Path) -> None:
    import signal
    import subprocess

    from .conftest import serve_command, subprocess_env, wait_ready

    store, port = tmp_path / "store", free_port()
    refused = subprocess.run(serve_command("--path", str(store), "--embedder", "hashing", "--port", str(port),
                                           "--oauth"), env=subprocess_env(), capture_output=True, text=True,
                             timeout=120, check=False)
    assert refused.returncode == 2 and "owner token" in refused.stderr and "Traceback" not in refused.stderr
    proc = subprocess.Popen(serve_command("--path", str(store), "--create", "--embedder", "hashing", "--port",
                                          str(port), "--oauth"), env=subprocess_env(MEMORY_EXT_TOKENS=ADMIN),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        url = f"http://127.0.0.1:{port}"
        wait_ready(url, proc)
        challenge = httpx.get(url + "/mcp", timeout=30)
        assert challenge.status_code == 401
        assert f"{url}/.well-known/oauth-protected-resource/mcp" in challenge.headers["www-authenticate"]
        assert httpx.get(url + "/.well-known/oauth-authorization-server").json()["issuer"] == url
        live = OAuthLive(url, None, OAuthConfig.resolve(mode="builtin", public_url=url, store_path=str(store),
                                                        env={}))
        _, tokens = tokens_by_hand(live)
        assert httpx.get(url + "/v1/namespaces", headers={"Authorization": f"Bearer {tokens['access_token']}"}
                         ).status_code == 200
    finally:
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=60)
    assert tokens["access_token"] not in stderr and ADMIN not in stderr
    assert (store / "oauth.sqlite3").is_file()


@pytest.mark.parametrize("name", ["memory_ext.server.oauth_config", "memory_ext.store.oauth_grants"])
def test_docstring_examples(name: str) -> None:
    import doctest
    import importlib

    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.failed == 0 and result.attempted > 0


def test_a_verified_token_goes_no_further_than_the_check() -> None:
    """Tokens are never passed through: the routes and tools behind the check get the request without them."""
    from starlette.types import Message, Receive, Scope, Send

    from memory_ext.server.auth import STATE_KEY, AuthMiddleware

    seen: list[Scope] = []

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        seen.append(scope)
        await send({"type": "http.response.start", "status": 204, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    async def run(token: str) -> list[Message]:
        sent: list[Message] = []

        async def send(message: Message) -> None:
            sent.append(message)

        async def receive() -> Message:
            return {"type": "http.request", "body": b""}

        scope = {"type": "http", "method": "GET", "path": "/v1/stats", "headers": [
            (b"host", b"127.0.0.1"), (b"authorization", f"Bearer {token}".encode())]}
        await AuthMiddleware(app, TokenTable.parse([ADMIN, f"{ANA}:ana"]))(scope, receive, send)
        return sent

    assert asyncio.run(run(ANA))[0]["status"] == 204
    assert [k for k, _ in seen[0]["headers"]] == [b"host"]
    assert seen[0]["state"][STATE_KEY].user_id == "ana"
    assert asyncio.run(run("unknown-token-123"))[0]["status"] == 401 and len(seen) == 1
