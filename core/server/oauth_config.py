"""The OAuth settings of ``memext serve`` (``--oauth``, ``--oauth-issuer``, ``--public-url``, ``server.oauth``,
``MEMORY_EXT_OAUTH_*``); light to import (the command line's parser uses it). See :mod:`memory_ext.server.oauth`.

>>> config = OAuthConfig.resolve(mode="builtin", public_url="http://127.0.0.1:8765", store_path="/tmp/s", env={})
>>> config.resource_urls
('http://127.0.0.1:8765/mcp', 'http://127.0.0.1:8765')
>>> config.metadata_url("/mcp")
'http://127.0.0.1:8765/.well-known/oauth-protected-resource/mcp'
>>> config.client_metadata_allowed("https://claude.ai/oauth/client.json"), config.client_metadata_allowed("https://10.0.0.5/c")
(True, False)
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from ..errors import ConfigError
from ..store.locate import is_dsn
from .settings import is_loopback

__all__ = ["DEFAULT_SCOPE", "OAuthConfig", "add_oauth_arguments", "resolve_oauth"]

DEFAULT_SCOPE = "memory"
PRM_PATH = "/.well-known/oauth-protected-resource"
OAUTH_KEYS = ("mode", "public_url", "issuer", "jwks_url", "audience", "user_claim", "leeway", "scopes",
              "client_metadata", "state", "access_ttl", "refresh_ttl", "algorithms")
ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA")


def _norm(url: str) -> str:
    """A URL compared as a resource: lower-case scheme and host, no trailing slash."""
    parts = urlsplit(url.strip())
    return f"{parts.scheme.lower()}://{parts.netloc.lower()}{parts.path.rstrip('/')}"


def _strings(name: str, value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return tuple(v.strip() for v in value.replace(",", " ").split() if v.strip())
    if isinstance(value, list | tuple):
        return tuple(str(v).strip() for v in value if str(v).strip())
    raise ConfigError(f"server.oauth.{name}", value, "give a list of strings (or one string, comma-separated)")


@dataclass(frozen=True)
class OAuthConfig:
    """What the resource server and the authorization server need; build it with :meth:`resolve`."""

    mode: str
    """``builtin`` (``--oauth``) or ``external`` (``--oauth-issuer``)."""
    public_url: str
    """The server's base URL as clients reach it (no trailing slash); the issuer of the built-in server."""
    scopes: tuple[str, ...] = (DEFAULT_SCOPE,)
    """Scopes a token must carry (403 ``insufficient_scope`` otherwise)."""
    state_path: str | None = None
    """The built-in server's SQLite file (default ``<store>/oauth.sqlite3``)."""
    client_metadata: tuple[str, ...] = ("https://*",)
    """Origins whose Client ID Metadata Documents are fetched: ``https://*`` (any https host), an origin, or
    ``http://127.0.0.1:*`` (any port); empty: dynamic registration only."""
    access_ttl: int = 3600
    refresh_ttl: int = 30 * 86400
    issuer: str | None = None
    """The external identity provider: exactly the ``iss`` of its tokens (a trailing slash matters)."""
    jwks_url: str | None = None
    """Its JWKS (default: ``jwks_uri`` of its RFC 8414 / OpenID metadata)."""
    audience: tuple[str, ...] = ()
    """Accepted ``aud`` values besides :attr:`resource_urls`."""
    user_claim: str = "sub"
    """The claim that names the memory user."""
    leeway: int = 60
    """Clock skew allowed on ``exp``, ``nbf`` and ``iat``, in seconds."""
    algorithms: tuple[str, ...] = ALGORITHMS

    @property
    def issuer_url(self) -> str:
        """The authorization server named in the protected-resource metadata."""
        return self.issuer if self.mode == "external" and self.issuer else self.public_url

    @property
    def resource_urls(self) -> tuple[str, str]:
        """This server as a resource: ``<public>/mcp`` (the MCP endpoint) and ``<public>`` (REST, inspector)."""
        return (self.public_url + "/mcp", self.public_url)

    def metadata_url(self, path: str) -> str:
        """The RFC 9728 metadata URL for a request path (``/mcp``: the path-suffixed form)."""
        suffix = "/mcp" if path == "/mcp" or path.startswith("/mcp/") else ""
        return self.public_url + PRM_PATH + suffix

    def accepts_resource(self, resource: str | None) -> bool:
        accepted = {_norm(u) for u in (*self.resource_urls, *self.audience)}
        return resource is not None and _norm(resource) in accepted

    def client_metadata_allowed(self, client_id: str) -> bool:
        """Whether a URL client id may be fetched (its origin matches :attr:`client_metadata`)."""
        parts = urlsplit(client_id)
        if parts.scheme not in ("https", "http") or not parts.hostname or parts.username or parts.password:
            return False
        port = parts.port or (443 if parts.scheme == "https" else 80)
        host = parts.hostname.lower()
        for pattern in self.client_metadata:
            p = urlsplit(pattern.replace(":*", ""))
            if p.scheme != parts.scheme:
                continue
            if p.hostname == "*" or pattern == f"{parts.scheme}://*":
                if parts.scheme == "https" and not _private_literal(host):
                    return True  # any public https host (a private address only when listed by name)
                continue
            any_port = pattern.endswith(":*")
            if p.hostname == host and (any_port or (p.port or (443 if p.scheme == "https" else 80)) == port):
                return True
        return False

    @classmethod
    def resolve(cls, *, mode: str | None, public_url: str | None, store_path: str, host: str = "127.0.0.1",
                port: int = 8765, issuer: str | None = None, user_claim: str | None = None,
                section: Mapping[str, Any] | None = None, env: Mapping[str, str] | None = None) -> OAuthConfig:
        """Merge the arguments (the command line), ``MEMORY_EXT_OAUTH_*`` and the config file's ``server.oauth``."""
        env = os.environ if env is None else env
        section = dict(section or {})
        unknown = sorted(set(section) - set(OAUTH_KEYS))
        if unknown:
            raise ConfigError(f"server.oauth.{unknown[0]}", section[unknown[0]], "valid keys: " + ", ".join(OAUTH_KEYS))

        def pick(name: str, given: Any = None, default: Any = None) -> Any:
            if given is not None:
                return given
            if env.get("MEMORY_EXT_OAUTH_" + name.upper()):
                return env["MEMORY_EXT_OAUTH_" + name.upper()]
            return section.get(name, default)

        issuer = pick("issuer", issuer)
        mode = mode or ("external" if issuer else pick("mode"))
        if mode not in ("builtin", "external"):
            raise ConfigError("server.oauth.mode", mode, "give builtin (--oauth) or external (--oauth-issuer URL)")
        if mode == "external" and not issuer:
            raise ConfigError("server.oauth.issuer", None, "give the identity provider's issuer URL (--oauth-issuer)")
        base = public_url or env.get("MEMORY_EXT_PUBLIC_URL") or section.get("public_url")
        if not base:
            if not is_loopback(host):
                raise ConfigError("public_url", None, "OAuth needs the URL clients reach the server by when it is "
                                                      "not bound to loopback: give --public-url https://memory.example.com")
            base = f"http://{'[' + host + ']' if ':' in host else host}:{port}"
        base = str(base).rstrip("/")
        parts = urlsplit(base)
        if parts.scheme not in ("http", "https") or not parts.hostname or parts.query or parts.fragment:
            raise ConfigError("public_url", base, "give an absolute http(s) URL without query, e.g. "
                                                  "https://memory.example.com")
        if parts.scheme == "http" and not is_loopback(parts.hostname):
            raise ConfigError("public_url", base, "OAuth needs https beyond loopback: serve behind a TLS proxy "
                                                  "and give its https URL")
        state = pick("state")
        if mode == "builtin" and not state:
            if is_dsn(store_path):
                raise ConfigError("server.oauth.state", None, "a PostgreSQL store needs a file for the OAuth state: "
                                                              "set MEMORY_EXT_OAUTH_STATE or server.oauth.state")
            state = str(Path(store_path) / "oauth.sqlite3")
        scopes = _strings("scopes", pick("scopes")) if pick("scopes") is not None else (DEFAULT_SCOPE,)
        cimd = pick("client_metadata")
        try:
            return cls(mode=mode, public_url=base, scopes=scopes, state_path=state,
                       client_metadata=_strings("client_metadata", cimd) if cimd is not None else ("https://*",),
                       access_ttl=int(pick("access_ttl", default=3600)), refresh_ttl=int(pick("refresh_ttl",
                                                                                              default=30 * 86400)),
                       issuer=str(issuer).strip() if issuer else None, jwks_url=pick("jwks_url"),
                       audience=_strings("audience", pick("audience")),
                       user_claim=str(pick("user_claim", user_claim, "sub")), leeway=int(pick("leeway", default=60)),
                       algorithms=_strings("algorithms", pick("algorithms")) or ALGORITHMS)
        except ValueError as exc:
            raise ConfigError("server.oauth", str(exc),
                              "access_ttl, refresh_ttl and leeway are whole seconds") from None


def _private_literal(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        address = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return False
    return address.is_private or address.is_loopback or address.is_link_local or address.is_reserved


def add_oauth_arguments(parser: Any) -> None:
    """The OAuth options of ``memext serve``; the rest are in the config file's ``server.oauth`` section."""
    parser.add_argument("--oauth", action="store_true",
                        help="be an OAuth 2.1 authorization server too (MCP connectors: claude.ai, mcp-remote); the "
                             "owner approves each client with a --token (env MEMORY_EXT_OAUTH_MODE=builtin)")
    parser.add_argument("--oauth-issuer", default=None, metavar="URL",
                        help="accept JWTs of this identity provider (its JWKS), instead of --oauth "
                             "(env MEMORY_EXT_OAUTH_ISSUER)")
    parser.add_argument("--oauth-user-claim", default=None, metavar="CLAIM",
                        help="with --oauth-issuer: the claim naming the memory user (default sub)")
    parser.add_argument("--public-url", default=None, metavar="URL",
                        help="the URL clients reach the server by, e.g. https://memory.example.com (OAuth's issuer "
                             "and resource; default http://HOST:PORT on loopback; env MEMORY_EXT_PUBLIC_URL)")


def resolve_oauth(args: Any, settings: Any, env: Mapping[str, str] | None = None) -> OAuthConfig | None:
    """The OAuth configuration of ``memext serve`` (None: static bearer tokens only)."""
    env = os.environ if env is None else env
    section = settings.oauth_section or {}
    if not isinstance(section, Mapping):
        raise ConfigError("server.oauth", section, "the oauth section is a mapping of " + ", ".join(OAUTH_KEYS))
    issuer = getattr(args, "oauth_issuer", None)
    mode = "builtin" if getattr(args, "oauth", False) else ("external" if issuer else None)
    if mode is None and not (env.get("MEMORY_EXT_OAUTH_MODE") or env.get("MEMORY_EXT_OAUTH_ISSUER") or section):
        return None
    if mode is None:
        mode = env.get("MEMORY_EXT_OAUTH_MODE") or None
    config = OAuthConfig.resolve(mode=mode, public_url=getattr(args, "public_url", None), store_path=settings.path,
                                 host=settings.host, port=settings.port, issuer=issuer,
                                 user_claim=getattr(args, "oauth_user_claim", None), section=section, env=env)
    if config.mode == "builtin" and not settings.tokens:
        raise ConfigError("token", None, "--oauth needs an owner token: the owner approves each client with it on the "
                                         "consent page (give --token OWNER_TOKEN, MEMORY_EXT_TOKENS or a tokens file)")
    return config
