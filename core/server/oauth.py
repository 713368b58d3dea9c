"""OAuth 2.1 for ``memext serve`` (the MCP authorization spec): the HTTP server is a resource server, with a
built-in authorization server (``--oauth``) or an external identity provider's JWTs (``--oauth-issuer``).

- **Resource server** (both modes). RFC 9728 metadata at ``/.well-known/oauth-protected-resource/mcp`` (resource
  ``<public>/mcp``) and ``/.well-known/oauth-protected-resource`` (resource ``<public>``); a request without a
  valid token is 401 with ``WWW-Authenticate: Bearer resource_metadata="…"``; a token issued for another resource
  (RFC 8707 ``resource`` / JWT ``aud``) or expired is 401 ``invalid_token``; a token without the required scope
  (``memory``) is 403 ``insufficient_scope``. An OAuth token is always pinned to one memory user. Tokens are never
  passed on: the ``Authorization`` header is removed from the request once it is verified.
- **Built-in authorization server** (:class:`BuiltinAuthorizationServer`, the ``mcp`` SDK's handlers): RFC 8414
  metadata, authorization code with PKCE ``S256`` only, clients registered by Client ID Metadata Document (an
  ``https`` client id whose origin ``client_metadata`` allows) or by dynamic registration (RFC 7591), a consent page
  where the owner — with an owner token of the server (``--token``; a pinned one grants only its user) — picks the
  memory user the client gets, refresh tokens (rotated; a reused one revokes its grant) and revocation. Codes and
  tokens are stored as SHA-256 digests (:mod:`memory_ext.store.oauth_grants`).
- **External identity provider** (:class:`JWTVerifier`): JWTs verified with the issuer's JWKS (joserfc, the JOSE
  layer of authlib): signature, ``iss``, ``aud``, ``exp``/``nbf`` with a clock skew; a claim (``sub`` by default)
  names the memory user.

Settings: :mod:`memory_ext.server.oauth_config`.
"""

from __future__ import annotations

import hashlib
import hmac
import html
import json
import logging
import secrets
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import httpx
from mcp.server.auth.provider import (
    AccessToken,
    AuthorizationCode,
    AuthorizationParams,
    AuthorizeError,
    RefreshToken,
    TokenError,
    construct_redirect_uri,
)
from mcp.shared.auth import OAuthClientInformationFull, OAuthMetadata, OAuthToken

from .auth import AuthRefusal
from .oauth_config import DEFAULT_SCOPE, OAuthConfig
from .settings import Principal, TokenTable

__all__ = ["CONSENT_PATH", "BuiltinAuthorizationServer", "JWTVerifier", "OAuthConfig", "OAuthServer"]

logger = logging.getLogger("memory_ext.server")
CONSENT_PATH = "/oauth/consent"
CODE_TTL = 300
PENDING_TTL = 600
MAX_PENDING = 1000
"""Authorization requests waiting for the owner at once; more are refused (``temporarily_unavailable``)."""
MAX_DOCUMENT_BYTES = 65536

# -- verifying tokens (the resource server) ---------------------------------------------------------------------------


class TokenRefused(Exception):
    """A token that is not valid here; the message is safe to show (it holds no token)."""


def _client_tag(client_id: str) -> str:
    return "oauth-" + hashlib.sha256(client_id.encode("utf-8")).hexdigest()[:8]


class JWTVerifier:
    """Verify an external identity provider's JWTs with its JWKS (fetched on first use and when a ``kid`` is new)."""

    def __init__(self, config: OAuthConfig) -> None:
        self.config = config
        self._keys: Any = None
        self._fetched = 0.0

    async def _jwks_url(self) -> str:
        if self.config.jwks_url:
            return self.config.jwks_url
        assert self.config.issuer is not None
        issuer = urlsplit(self.config.issuer.rstrip("/"))
        origin = f"{issuer.scheme}://{issuer.netloc}"
        candidates = (f"{origin}/.well-known/oauth-authorization-server{issuer.path}",  # RFC 8414 §3.1
                      f"{origin}{issuer.path}/.well-known/openid-configuration")  # OpenID Connect Discovery
        async with httpx.AsyncClient(timeout=10) as http:
            for url in candidates:
                response = await http.get(url)
                if response.status_code == 200 and isinstance(response.json().get("jwks_uri"), str):
                    return str(response.json()["jwks_uri"])
        raise TokenRefused("the identity provider's metadata names no jwks_uri (set server.oauth.jwks_url)")

    async def _key_set(self, kid: str | None) -> Any:
        """The issuer's keys; fetched again for a ``kid`` they lack (a rotation), at most every 30 seconds."""
        from joserfc.jwk import KeySet

        unknown = self._keys is not None and kid is not None and all(k.kid != kid for k in self._keys.keys)
        if self._keys is None or (unknown and time.monotonic() - self._fetched > 30):
            url = await self._jwks_url()
            async with httpx.AsyncClient(timeout=10) as http:
                response = await http.get(url)
            response.raise_for_status()
            self._keys = KeySet.import_key_set(response.json())
            self._fetched = time.monotonic() if unknown else 0.0
        return self._keys

    async def verify(self, token: str) -> tuple[str, str, list[str], str | None, int | None]:
        """``(user_id, client_id, scopes, audience, expires_at)`` of a valid token; :class:`TokenRefused` otherwise."""
        from joserfc import jwt
        from joserfc.errors import ExpiredTokenError, InvalidClaimError, JoseError, MissingClaimError
        from joserfc.jws import extract_compact

        if token.count(".") != 2:
            raise TokenRefused("unknown bearer token")
        try:
            kid = extract_compact(token.encode("ascii")).headers().get("kid")
            decoded = jwt.decode(token, await self._key_set(kid), algorithms=list(self.config.algorithms))
            registry = jwt.JWTClaimsRegistry(leeway=self.config.leeway, iss={"essential": True,
                                                                            "value": self.config.issuer or ""},
                                             exp={"essential": True})
            registry.validate(decoded.claims)
        except ExpiredTokenError:
            raise TokenRefused("the token has expired") from None
        except (MissingClaimError, InvalidClaimError) as exc:
            raise TokenRefused(f"the token's claims are not valid here ({exc.description})") from None
        except (JoseError, ValueError) as exc:
            raise TokenRefused(f"the token's signature or form is not valid ({type(exc).__name__})") from None
        except (OSError, httpx.HTTPError) as exc:  # the identity provider did not answer
            logger.warning("OAuth: the identity provider's keys could not be fetched (%s)", type(exc).__name__)
            raise TokenRefused("the identity provider's keys could not be fetched; try again") from None
        claims = decoded.claims
        audiences = claims.get("aud")
        audiences = [audiences] if isinstance(audiences, str) else list(audiences or [])
        audience = next((a for a in audiences if self.config.accepts_resource(a)), None)
        user = claims.get(self.config.user_claim)
        if not isinstance(user, str) or not user:
            raise TokenRefused(f"the token has no {self.config.user_claim!r} claim naming the memory user")
        raw_scopes = claims.get("scope", claims.get("scp", ""))
        scopes = raw_scopes.split() if isinstance(raw_scopes, str) else [str(s) for s in raw_scopes or []]
        client = str(claims.get("client_id") or claims.get("azp") or claims.get("sub"))
        return user, client, scopes, audience, int(claims["exp"]) + self.config.leeway


class OAuthServer:
    """The OAuth side of one app: its routes, and the verification of a bearer token that is not a static one."""

    def __init__(self, config: OAuthConfig, owner_tokens: TokenTable) -> None:
        self.config = config
        self.owner_tokens = owner_tokens
        self.provider: BuiltinAuthorizationServer | None = None
        self.jwt: JWTVerifier | None = None
        if config.mode == "builtin":
            from ..store.oauth_grants import OAuthStore

            assert config.state_path is not None
            self.provider = BuiltinAuthorizationServer(config, OAuthStore(config.state_path), owner_tokens)
        else:
            self.jwt = JWTVerifier(config)
        self.public_paths = frozenset(str(getattr(r, "path", "")) for r in self.routes())

    def close(self) -> None:
        if self.provider is not None:
            self.provider.store.close()

    def challenge(self, path: str, error: str | None = None, description: str | None = None) -> str:
        """The ``WWW-Authenticate`` value of a refusal on ``path``."""
        parts = [f'resource_metadata="{self.config.metadata_url(path)}"']
        if error:
            parts.append(f'error="{error}"')
        if description:
            parts.append('error_description="{}"'.format(description.replace('"', "'")))
        if error == "insufficient_scope" or error is None:
            parts.append('scope="{}"'.format(" ".join(self.config.scopes)))
        return "Bearer " + ", ".join(parts)

    async def authenticate(self, authorization: str, path: str) -> Principal | AuthRefusal:
        """The principal of a bearer token issued by the authorization server, or the refusal (401 / 403)."""
        scheme, _, token = authorization.partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            return self._refuse(401, path, "invalid_token", "send 'Authorization: Bearer <token>'")
        try:
            if self.provider is not None:
                record = await self.provider.load_access_token(token)
                if record is None:
                    raise TokenRefused("unknown or revoked bearer token")
                user, client, scopes = record.subject, record.client_id, record.scopes
                resource, expires = record.resource, record.expires_at
            else:
                assert self.jwt is not None
                user, client, scopes, resource, expires = await self.jwt.verify(token)
        except TokenRefused as exc:
            return self._refuse(401, path, "invalid_token", str(exc))
        if expires is not None and expires < time.time():
            return self._refuse(401, path, "invalid_token", "the token has expired")
        if not self.config.accepts_resource(resource):
            return self._refuse(401, path, "invalid_token", "the token was issued for another resource "
                                                            f"(this server is {self.config.resource_urls[0]})")
        missing = [s for s in self.config.scopes if s not in scopes]
        if missing:
            return self._refuse(403, path, "insufficient_scope", f"the token lacks the scope {missing[0]!r}")
        if not user:
            return self._refuse(401, path, "invalid_token", "the token names no memory user")
        return Principal(user_id=user, client=_client_tag(client))

    def _refuse(self, status: int, path: str, error: str, description: str) -> AuthRefusal:
        fix = ("get a new token from the authorization server (the MCP client does it by itself)" if status == 401
               else "authorize the client again with the scope " + " ".join(self.config.scopes))
        kind = "AuthenticationError" if status == 401 else "PermissionDeniedError"
        return AuthRefusal(status=status, error_type=kind, message=description, fix=fix,
                           www_authenticate=self.challenge(path, error, description))

    def openapi(self, schema: dict[str, Any], bearer_scheme: str) -> dict[str, Any]:
        """Declare the OAuth flow in the OpenAPI document; every ``/v1`` operation takes it or the bearer scheme."""
        scopes = {s: "read and write the memory of the user the owner granted" for s in self.config.scopes}
        if self.config.mode == "builtin":
            base = self.config.public_url
            scheme: dict[str, Any] = {"type": "oauth2", "description": "memext serve --oauth (PKCE S256; the owner "
                                                                      "picks the memory user on the consent page)",
                                      "flows": {"authorizationCode": {"authorizationUrl": base + "/authorize",
                                                                      "tokenUrl": base + "/token",
                                                                      "refreshUrl": base + "/token",
                                                                      "scopes": scopes}}}
        else:
            scheme = {"type": "openIdConnect", "description": f"JWTs of {self.config.issuer}",
                      "openIdConnectUrl": f"{str(self.config.issuer).rstrip('/')}/.well-known/openid-configuration"}
        schema.setdefault("components", {}).setdefault("securitySchemes", {})["oauth2"] = scheme
        for path, operations in schema.get("paths", {}).items():
            if path.startswith("/v1/") and isinstance(operations, dict):
                for operation in operations.values():
                    if isinstance(operation, dict):
                        operation["security"] = [{bearer_scheme: []}, {"oauth2": list(self.config.scopes)}]
        return schema

    def routes(self) -> list[Any]:
        """Protected-resource metadata; with the built-in server its metadata, endpoints and consent page."""
        from mcp.server.auth.handlers.metadata import ProtectedResourceMetadataHandler
        from mcp.server.auth.routes import build_resource_metadata_url, cors_middleware
        from mcp.shared.auth import ProtectedResourceMetadata
        from starlette.routing import Route

        routes: list[Any] = []
        for resource in self.config.resource_urls:  # (model_validate keeps a path-less URL without a slash)
            metadata = ProtectedResourceMetadata.model_validate(
                {"resource": resource, "authorization_servers": [self.config.issuer_url],
                 "scopes_supported": list(self.config.scopes), "resource_name": "memory-ext"})
            path = urlsplit(str(build_resource_metadata_url(metadata.resource))).path
            routes.append(Route(path, endpoint=cors_middleware(ProtectedResourceMetadataHandler(metadata).handle,
                                                               ["GET", "OPTIONS"]), methods=["GET", "OPTIONS"]))
        if self.provider is not None:
            routes += self.provider.routes()
        return routes


# -- the built-in authorization server --------------------------------------------------------------------------------

class _Code(AuthorizationCode):
    family: str


class _Refresh(RefreshToken):
    family: str


class _Access(AccessToken):
    family: str


@dataclass
class _Pending:
    client: OAuthClientInformationFull
    params: AuthorizationParams
    csrf: str
    expires_at: float


@dataclass
class BuiltinAuthorizationServer:
    """The ``mcp`` SDK's ``OAuthAuthorizationServerProvider`` over :class:`~memory_ext.store.oauth_grants.OAuthStore`
    (the server's grants: clients, codes, tokens)."""

    config: OAuthConfig
    store: Any
    owner_tokens: TokenTable
    pending: dict[str, _Pending] = field(default_factory=dict)
    _documents: dict[str, tuple[float, OAuthClientInformationFull]] = field(default_factory=dict)

    @staticmethod
    def _new_secret() -> str:
        from authlib.common.security import generate_token  # type: ignore[import-untyped]

        return str(generate_token(48))

    # clients
    async def get_client(self, client_id: str) -> OAuthClientInformationFull | None:
        if client_id.startswith(("https://", "http://")):
            return await self._metadata_document(client_id)
        info = self.store.client(client_id)
        return OAuthClientInformationFull.model_validate(info) if info else None

    async def register_client(self, client_info: OAuthClientInformationFull) -> None:
        assert client_info.client_id is not None
        self.store.put_client(client_info.client_id, client_info.model_dump(mode="json", exclude_none=True))

    async def _metadata_document(self, client_id: str) -> OAuthClientInformationFull | None:
        """A Client ID Metadata Document: fetched (when its origin is allowed), checked, kept 5 minutes."""
        cached = self._documents.get(client_id)
        if cached and cached[0] > time.monotonic():
            return cached[1]
        if not self.config.client_metadata_allowed(client_id):
            logger.warning("OAuth: client metadata document of %s not fetched (its origin is not in "
                           "server.oauth.client_metadata)", urlsplit(client_id).netloc)
            return None
        from pydantic import ValidationError

        try:
            body = b""
            async with httpx.AsyncClient(timeout=5, follow_redirects=False) as http, \
                    http.stream("GET", client_id, headers={"Accept": "application/json"}) as response:
                if response.status_code != 200:
                    raise ValueError(f"status {response.status_code}")
                async for chunk in response.aiter_bytes():
                    body += chunk
                    if len(body) > MAX_DOCUMENT_BYTES:
                        raise ValueError(f"larger than {MAX_DOCUMENT_BYTES} bytes")
            document = json.loads(body)
            if not isinstance(document, dict) or document.get("client_id") != client_id:
                raise ValueError("its client_id is not its URL")
            if document.get("token_endpoint_auth_method", "none") != "none" or "client_secret" in document:
                raise ValueError("a metadata document client is public (token_endpoint_auth_method none)")
            document.setdefault("scope", " ".join(self.config.scopes))
            document.setdefault("grant_types", ["authorization_code", "refresh_token"])
            document["token_endpoint_auth_method"] = "none"
            info = OAuthClientInformationFull.model_validate(document)
            if not info.redirect_uris:
                raise ValueError("it names no redirect_uris")
        except (httpx.HTTPError, ValueError, ValidationError) as exc:
            logger.warning("OAuth: client metadata document of %s refused (%s)", urlsplit(client_id).netloc,
                           str(exc).splitlines()[0][:200])
            return None
        self._documents[client_id] = (time.monotonic() + 300, info)
        return info

    # authorization
    async def authorize(self, client: OAuthClientInformationFull, params: AuthorizationParams) -> str:
        if params.resource is not None and not self.config.accepts_resource(params.resource):
            raise AuthorizeError("invalid_target", f"this server issues tokens for {self.config.resource_urls[0]}")
        now = time.time()
        for key in [k for k, p in self.pending.items() if p.expires_at < now]:
            del self.pending[key]
        if len(self.pending) >= MAX_PENDING:
            raise AuthorizeError("temporarily_unavailable", "too many authorization requests wait for the owner")
        request_id = secrets.token_urlsafe(24)
        self.pending[request_id] = _Pending(client, params, secrets.token_urlsafe(24), now + PENDING_TTL)
        return f"{self.config.public_url}{CONSENT_PATH}?request={request_id}"

    def grant(self, pending: _Pending, user_id: str) -> str:
        """Issue the code of an approved request; the URL to send the browser back to."""
        code = self._new_secret()
        params = pending.params
        assert pending.client.client_id is not None
        self.store.put_code(code, client_id=pending.client.client_id, user_id=user_id,
                            scopes=params.scopes or list(self.config.scopes),
                            resource=params.resource or self.config.resource_urls[0],
                            redirect_uri=str(params.redirect_uri),
                            redirect_explicit=params.redirect_uri_provided_explicitly,
                            challenge=params.code_challenge, expires_at=time.time() + CODE_TTL,
                            family=secrets.token_hex(16))
        return construct_redirect_uri(str(params.redirect_uri), code=code, state=params.state)

    async def load_authorization_code(self, client: OAuthClientInformationFull,
                                      authorization_code: str) -> _Code | None:
        stored = self.store.code(authorization_code)
        if stored is None or stored.client_id != client.client_id:
            return None
        if stored.used:  # a replayed code: whatever it gave is revoked
            logger.warning("OAuth: an authorization code was used again; its grant is revoked")
            self.store.revoke_family(stored.family)
            return None
        from pydantic import AnyUrl

        return _Code(code=authorization_code, scopes=stored.scopes, expires_at=stored.expires_at,
                     client_id=stored.client_id, code_challenge=stored.challenge,
                     redirect_uri=AnyUrl(stored.redirect_uri),
                     redirect_uri_provided_explicitly=stored.redirect_explicit, resource=stored.resource,
                     subject=stored.user_id, family=stored.family)

    async def exchange_authorization_code(self, client: OAuthClientInformationFull,
                                          authorization_code: _Code) -> OAuthToken:
        if not self.store.use_code(authorization_code.code):
            self.store.revoke_family(authorization_code.family)
            raise TokenError("invalid_grant", "the authorization code was already used")
        assert authorization_code.subject is not None
        return self._issue(authorization_code.client_id, authorization_code.subject, authorization_code.scopes,
                           authorization_code.resource, authorization_code.family)

    def _issue(self, client_id: str, user_id: str, scopes: list[str], resource: str | None, family: str) -> OAuthToken:
        access, refresh = self._new_secret(), self._new_secret()
        now = int(time.time())
        self.store.put_token(access, kind="access", client_id=client_id, user_id=user_id, scopes=scopes,
                             resource=resource, expires_at=now + self.config.access_ttl, family=family)
        self.store.put_token(refresh, kind="refresh", client_id=client_id, user_id=user_id, scopes=scopes,
                             resource=resource, expires_at=now + self.config.refresh_ttl, family=family)
        return OAuthToken(access_token=access, expires_in=self.config.access_ttl, scope=" ".join(scopes),
                          refresh_token=refresh)

    async def load_refresh_token(self, client: OAuthClientInformationFull, refresh_token: str) -> _Refresh | None:
        stored = self.store.token(refresh_token, "refresh", include_revoked=True)
        if stored is None or stored.client_id != client.client_id:
            return None
        if stored.revoked:  # a rotated refresh token used again: stolen or replayed, the grant ends
            logger.warning("OAuth: a rotated refresh token was used again; its grant is revoked")
            self.store.revoke_family(stored.family)
            return None
        return _Refresh(token=refresh_token, client_id=stored.client_id, scopes=stored.scopes,
                        expires_at=stored.expires_at, resource=stored.resource, subject=stored.user_id,
                        family=stored.family)

    async def exchange_refresh_token(self, client: OAuthClientInformationFull, refresh_token: _Refresh,
                                     scopes: list[str]) -> OAuthToken:
        if not self.store.revoke_token(refresh_token.token):
            self.store.revoke_family(refresh_token.family)
            raise TokenError("invalid_grant", "the refresh token was already used")
        assert refresh_token.subject is not None
        return self._issue(refresh_token.client_id, refresh_token.subject, scopes, refresh_token.resource,
                           refresh_token.family)

    async def load_access_token(self, token: str) -> _Access | None:
        stored = self.store.token(token, "access")
        if stored is None:
            return None
        return _Access(token=token, client_id=stored.client_id, scopes=stored.scopes, expires_at=stored.expires_at,
                       resource=stored.resource, subject=stored.user_id, family=stored.family)

    async def revoke_token(self, token: _Access | _Refresh) -> None:
        self.store.revoke_family(token.family)

    async def exchange_identity_assertion(self, client: OAuthClientInformationFull, params: Any) -> OAuthToken:
        raise TokenError("unsupported_grant_type", "this server issues tokens by authorization code only")

    # routes
    def routes(self) -> list[Any]:
        from mcp.server.auth.handlers.metadata import MetadataHandler
        from mcp.server.auth.routes import build_metadata, cors_middleware, create_auth_routes
        from mcp.server.auth.settings import ClientRegistrationOptions, RevocationOptions
        from pydantic import AnyHttpUrl
        from starlette.routing import Route

        issuer = AnyHttpUrl(self.config.public_url)
        registration = ClientRegistrationOptions(enabled=True, valid_scopes=list(self.config.scopes),
                                                 default_scopes=list(self.config.scopes))
        revocation = RevocationOptions(enabled=True)
        built = build_metadata(issuer, None, registration, revocation).model_dump(mode="json", exclude_none=True)
        metadata = OAuthMetadata.model_validate({  # the issuer exactly as configured (no trailing slash added)
            **built, "issuer": self.config.public_url, "client_id_metadata_document_supported":
            bool(self.config.client_metadata),
            "token_endpoint_auth_methods_supported": ["none", "client_secret_post", "client_secret_basic"]})
        routes = [r for r in create_auth_routes(self, issuer, client_registration_options=registration,
                                                revocation_options=revocation)
                  if r.path != "/.well-known/oauth-authorization-server"]
        routes.insert(0, Route("/.well-known/oauth-authorization-server",
                               endpoint=cors_middleware(MetadataHandler(metadata).handle, ["GET", "OPTIONS"]),
                               methods=["GET", "OPTIONS"]))
        routes.append(Route(CONSENT_PATH, endpoint=self.consent, methods=["GET", "POST"]))
        return routes

    async def consent(self, request: Any) -> Any:
        """``GET``: the consent page of a pending request; ``POST``: the owner's answer (same origin only)."""
        from starlette.responses import RedirectResponse

        if request.method == "GET":
            pending = self.pending.get(request.query_params.get("request", ""))
            if pending is None or pending.expires_at < time.time():
                return _page(None, request.query_params.get("request", ""), "This authorization request is unknown "
                                                                             "or expired: start again from the client.",
                             404)
            return _page(pending, request.query_params["request"])
        origin = request.headers.get("origin")
        own = f"{request.url.scheme}://{request.headers.get('host', '')}"
        if origin is not None and origin != own and origin != self.config.public_url:
            logger.warning("OAuth: a consent answer from another origin was refused")
            return _page(None, "", "This answer came from another site and was refused.", 403)
        form = await request.form()
        request_id = str(form.get("request", ""))
        pending = self.pending.get(request_id)
        if pending is None or pending.expires_at < time.time():
            return _page(None, request_id, "This authorization request is unknown or expired: start again from the "
                                           "client.", 404)
        if not hmac.compare_digest(str(form.get("csrf", "")), pending.csrf):
            return _page(None, request_id, "This answer does not belong to the page it claims to come from.", 403)
        if form.get("decision") != "allow":
            del self.pending[request_id]
            return RedirectResponse(construct_redirect_uri(str(pending.params.redirect_uri), error="access_denied",
                                                           error_description="the owner refused",
                                                           state=pending.params.state), status_code=303)
        owner = self.owner_tokens.authenticate("Bearer " + str(form.get("owner_token", "")).strip())
        user_id = str(form.get("user_id", "")).strip()
        if owner is None:
            return _page(pending, request_id, "That is not an owner token of this server.", 401)
        if not user_id or len(user_id) > 200:
            return _page(pending, request_id, "Name the memory user the client gets.", 400)
        if not owner.may_access(user_id):
            return _page(pending, request_id, f"This owner token is pinned to {owner.user_id!r}: it can grant only "
                                              "that user.", 403)
        del self.pending[request_id]
        logger.info("OAuth: the owner (%s) granted a client a user's memory", owner.client)
        return RedirectResponse(self.grant(pending, user_id), status_code=303)


def _page(pending: _Pending | None, request_id: str, error: str | None = None, status: int = 200) -> Any:
    """The consent page (the inspector's stylesheet; no script; the form posts to this origin)."""
    from starlette.responses import HTMLResponse

    from .inspector import SECURITY_HEADERS

    e = html.escape
    body = ""
    if error:
        body += f'<div class="error" role="alert">{e(error)}</div>'
    headers = dict(SECURITY_HEADERS)
    headers["Cache-Control"] = "no-store"
    if pending is not None:
        client = pending.client
        redirect = urlsplit(str(pending.params.redirect_uri))
        name = client.client_name or client.client_id or "an MCP client"
        scopes = " ".join(pending.params.scopes or ())
        body += (f'<h1>Connect {e(name)} to this memory?</h1>'
                 f'<div class="card"><p><span class="label">Client</span> {e(str(client.client_id))}</p>'
                 f'<p><span class="label">Returns to</span> {e(redirect.scheme + "://" + redirect.netloc)}</p>'
                 f'<p><span class="label">Access</span> {e(scopes or DEFAULT_SCOPE)}: read and write the memory of the '
                 'user you pick, nothing else</p></div>'
                 f'<form method="post" action="{CONSENT_PATH}">'
                 f'<input type="hidden" name="request" value="{e(request_id)}">'
                 f'<input type="hidden" name="csrf" value="{e(pending.csrf)}">'
                 '<div class="field"><label for="user_id">Memory user the client gets</label>'
                 '<input id="user_id" name="user_id" required autocomplete="off" maxlength="200"></div>'
                 '<div class="field"><label for="owner_token">Owner token of this server</label>'
                 '<input id="owner_token" name="owner_token" type="password" required autocomplete="off">'
                 '<p class="hint">A --token of memext serve; a token pinned to a user grants only that user.</p></div>'
                 '<div class="row actions"><button type="submit" name="decision" value="allow">Allow</button>'
                 '<button type="submit" name="decision" value="deny" class="danger" formnovalidate>Deny</button>'
                 '</div></form>')
        # the answer redirects to the client: the form may lead there, and nowhere else
        target = f"{redirect.scheme}://{redirect.netloc}" if redirect.netloc else f"{redirect.scheme}:"
        headers["Content-Security-Policy"] = headers["Content-Security-Policy"].replace(
            "form-action 'self'", f"form-action 'self' {target}")
    page = ('<!doctype html><html lang="en"><head><meta charset="utf-8">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            '<meta name="referrer" content="no-referrer"><title>memory-ext: connect a client</title>'
            '<link rel="icon" href="/inspector/icon.svg" type="image/svg+xml">'
            '<link rel="stylesheet" href="/inspector/inspector.css"></head><body>'
            '<header class="top"><span class="brand">memory-ext</span></header>'
            f'<main>{body}</main></body></html>')
    return HTMLResponse(page, status_code=status, headers=headers)
