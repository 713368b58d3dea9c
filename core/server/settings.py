"""Settings of ``memext serve``: command line > ``MEMORY_EXT_*`` environment > the config file's ``server:``
section > defaults; and the bearer tokens, optionally pinned to a user.

Tokens come from ``--token TOKEN[:USER_ID]`` (repeatable), a tokens file (one ``TOKEN [USER_ID]`` per line,
``#`` comments), ``MEMORY_EXT_TOKENS`` (``TOKEN[:USER_ID]`` separated by commas) or the config file
(``server.tokens``: strings or ``{token, user_id}`` mappings). A token pinned to a user reads and writes only that
user's memory. Only hashes of the tokens are kept in memory after loading, and none is ever logged. SIGHUP makes
a running server re-read its tokens files (:meth:`ServerSettings.reload_tokens`); the other sources stay as started.

The guards in front of every route (:mod:`memory_ext.server.guards`) take ``allowed_hosts``, ``allowed_origins``
and ``max_body_bytes`` from the same sources.

>>> table = TokenTable.parse(["s3cret-admin", "s3cret-ana:ana"])
>>> table.authenticate("Bearer s3cret-ana").user_id, table.authenticate("Bearer s3cret-admin").user_id
('ana', None)
>>> table.authenticate("Bearer wrong") is None
True
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import logging
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..config import read_config_file
from ..errors import ConfigError
from ..store.locate import is_dsn
from .guards import DEFAULT_MAX_BODY_BYTES, parse_allowed_hosts, parse_allowed_origins, parse_max_body_bytes

__all__ = ["ENV_PREFIX", "Principal", "ServerSettings", "TokenTable", "is_loopback", "load_config_file"]

ENV_PREFIX = "MEMORY_EXT_"
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8765
SERVER_KEYS = ("path", "embedder", "host", "port", "tokens", "tokens_file", "log_level", "allowed_hosts",
               "allowed_origins", "max_body_bytes", "oauth")

logger = logging.getLogger("memory_ext.server")


@dataclass(frozen=True)
class Principal:
    """Who is calling: ``user_id`` is the user a token is pinned to (None: any user); ``client`` a log-safe id."""

    user_id: str | None
    client: str

    def may_access(self, user_id: str | None) -> bool:
        return self.user_id is None or user_id == self.user_id


LOCAL = Principal(user_id=None, client="local")
"""The caller when the server has no tokens (loopback only) or speaks stdio to the process that launched it."""


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode("utf-8")).digest()


@dataclass
class TokenTable:
    """Bearer tokens (kept as SHA-256 digests) and the user each is pinned to."""

    entries: dict[bytes, str | None] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.entries)

    def __len__(self) -> int:
        return len(self.entries)

    def add(self, token: str, user_id: str | None = None) -> None:
        token = token.strip()
        if len(token) < 8 or any(c.isspace() for c in token):
            raise ConfigError("server.tokens", "<a token>", "tokens are at least 8 characters without spaces "
                                                            "(generate one: python -c 'import secrets; "
                                                            "print(secrets.token_urlsafe(32))')")
        self.entries[_digest(token)] = user_id or None

    @classmethod
    def parse(cls, specs: Iterable[str | Mapping[str, Any]]) -> TokenTable:
        """Tokens from ``TOKEN`` / ``TOKEN:USER_ID`` strings or ``{"token": ..., "user_id": ...}`` mappings."""
        table = cls()
        for spec in specs:
            if isinstance(spec, Mapping):
                if not isinstance(spec.get("token"), str):
                    raise ConfigError("server.tokens", "<a mapping without token>", "give {token: ..., user_id: ...}")
                table.add(spec["token"], spec.get("user_id"))
            else:
                token, _, user = str(spec).partition(":")
                table.add(token, user.strip() or None)
        return table

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> TokenTable:
        """One ``TOKEN [USER_ID]`` per line; blank lines and ``#`` comments are skipped."""
        p = Path(path).expanduser()
        if not p.is_file():
            raise ConfigError("tokens_file", str(path), "give the path of an existing tokens file")
        table = cls()
        for line in p.read_text(encoding="utf-8").splitlines():
            line = line.split("#", 1)[0].strip()
            if line:
                token, *rest = line.split()
                table.add(token, rest[0] if rest else None)
        return table

    def merge(self, other: TokenTable) -> None:
        self.entries.update(other.entries)

    def replace(self, other: TokenTable) -> None:
        """Take ``other``'s tokens in place of these (one assignment: a request sees the old table or the new)."""
        self.entries = dict(other.entries)

    def copy(self) -> TokenTable:
        return TokenTable(dict(self.entries))

    def authenticate(self, authorization: str | None) -> Principal | None:
        """The principal of an ``Authorization: Bearer ...`` header value, or None if it is missing or unknown."""
        if not authorization:
            return None
        scheme, _, token = authorization.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            return None
        digest = _digest(token.strip())
        for known, user_id in self.entries.items():
            if hmac.compare_digest(known, digest):
                return Principal(user_id=user_id, client=known.hex()[:8])
        return None


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and loopback addresses (127.0.0.0/8, ::1)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def load_config_file(path: str | os.PathLike[str]) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(server_section, engine_config)`` of a YAML/TOML/JSON file; the engine part is validated by the engine."""
    data = read_config_file(path)
    server = data.pop("server", None) or {}
    if not isinstance(server, dict):
        raise ConfigError("server", server, "the server section is a mapping of " + ", ".join(SERVER_KEYS))
    unknown = sorted(set(server) - set(SERVER_KEYS))
    if unknown:
        raise ConfigError(f"server.{unknown[0]}", server[unknown[0]], "valid keys: " + ", ".join(SERVER_KEYS))
    return server, data


@dataclass
class ServerSettings:
    """Everything ``memext serve`` needs; build it with :meth:`resolve`."""

    path: str
    embedder: str | None = None
    engine_config: dict[str, Any] | str | None = None
    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    tokens: TokenTable = field(default_factory=TokenTable)
    log_level: str = "info"
    allowed_hosts: tuple[str, ...] = ()
    """``Host`` names answered besides the bound host and loopback (``*``: any); see :mod:`.guards`."""
    allowed_origins: tuple[str, ...] = ()
    """Browser origins answered besides the server's own (``*``: any)."""
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    """The largest request body; a larger one is 413."""
    tokens_files: tuple[str, ...] = ()
    """The tokens files, re-read on SIGHUP."""
    static_tokens: TokenTable = field(default_factory=TokenTable)
    """The tokens of the command line, the environment and the config file (kept as started on SIGHUP)."""
    oauth_section: dict[str, Any] | None = None
    """The config file's ``server.oauth`` (read by :func:`memory_ext.server.oauth.resolve_oauth`)."""
    oauth: Any = None
    """The :class:`~memory_ext.server.oauth.OAuthConfig` in use (None: static bearer tokens only)."""

    @classmethod
    def resolve(cls, *, path: str | None = None, embedder: str | None = None, config: str | None = None,
                host: str | None = None, port: int | None = None, tokens: Iterable[str] = (),
                tokens_file: str | None = None, log_level: str | None = None,
                allowed_hosts: Iterable[str] | None = None, allowed_origins: Iterable[str] | None = None,
                max_body_bytes: int | None = None, env: Mapping[str, str] | None = None) -> ServerSettings:
        """Merge the command line (the arguments), the environment and the config file's ``server:`` section."""
        env = os.environ if env is None else env

        def pick(name: str, given: Any, section: Mapping[str, Any], default: Any = None) -> Any:
            if given is not None:
                return given
            if env.get(ENV_PREFIX + name.upper()):
                return env[ENV_PREFIX + name.upper()]
            return section.get(name, default)

        config = config if config is not None else env.get(ENV_PREFIX + "CONFIG") or None
        section: dict[str, Any] = {}
        engine_config: dict[str, Any] | str | None = None
        if config is not None:
            section, engine_config = load_config_file(config)
            if not section:
                engine_config = config  # a plain engine config file: the engine reads it itself
        raw_port = pick("port", port, section, DEFAULT_PORT)
        try:
            port_number = int(raw_port)
        except (TypeError, ValueError):
            raise ConfigError("port", raw_port, "give a TCP port number (1-65535)") from None
        if not 0 <= port_number <= 65535:
            raise ConfigError("port", raw_port, "give a TCP port number (1-65535; 0 picks a free one)")
        static = TokenTable.parse(tokens)
        env_tokens = env.get(ENV_PREFIX + "TOKENS", "")
        static.merge(TokenTable.parse(t for t in env_tokens.split(",") if t.strip()))
        static.merge(TokenTable.parse(section.get("tokens") or ()))
        files = tuple(dict.fromkeys(str(f) for f in (tokens_file, env.get(ENV_PREFIX + "TOKENS_FILE"),
                                                     section.get("tokens_file")) if f))
        table = static.copy()
        for file in files:
            table.merge(TokenTable.from_file(file))
        hosts = parse_allowed_hosts(pick("allowed_hosts", list(allowed_hosts) if allowed_hosts else None, section))
        origins = parse_allowed_origins(pick("allowed_origins", list(allowed_origins) if allowed_origins else None,
                                             section))
        body_limit = parse_max_body_bytes(pick("max_body_bytes", max_body_bytes, section, DEFAULT_MAX_BODY_BYTES))
        store = pick("path", path, section, "~/.memory_ext")
        if not is_dsn(store):  # a DSN is not a file path
            store = str(Path(store).expanduser())
        return cls(path=str(store), embedder=pick("embedder", embedder, section),
                   engine_config=engine_config or None, host=str(pick("host", host, section, DEFAULT_HOST)),
                   port=port_number, tokens=table, log_level=str(pick("log_level", log_level, section, "info")).lower(),
                   allowed_hosts=hosts, allowed_origins=origins, max_body_bytes=body_limit, tokens_files=files,
                   static_tokens=static, oauth_section=section.get("oauth"))

    @property
    def tokens_required(self) -> bool:
        """Whether requests need a token: there are tokens, or a tokens file (even an empty one) is configured."""
        return bool(self.tokens) or bool(self.tokens_files) or self.oauth is not None

    def reload_tokens(self) -> bool:
        """Re-read the tokens files into :attr:`tokens`, in place (what SIGHUP does to a running server).

        The tokens of the command line, the environment and the config file stay as started. A file that cannot
        be read or holds a bad line leaves the tokens in use unchanged and logs an error; True when the new
        tokens are in use.
        """
        if not self.tokens_files:
            logger.warning("SIGHUP: no tokens file to re-read (--tokens-file, MEMORY_EXT_TOKENS_FILE or "
                           "server.tokens_file); the %d token(s) in use stay", len(self.tokens))
            return False
        fresh = self.static_tokens.copy()
        try:
            for file in self.tokens_files:
                fresh.merge(TokenTable.from_file(file))
        except (ConfigError, OSError, UnicodeDecodeError) as exc:
            reason = str(exc) if isinstance(exc, ConfigError) else type(exc).__name__
            logger.error("SIGHUP: could not re-read the tokens file(s) (%s); the %d token(s) in use stay", reason,
                         len(self.tokens))
            return False
        self.tokens.replace(fresh)
        logger.info("SIGHUP: tokens re-read; %d token(s) in use", len(fresh))
        if not fresh:
            logger.warning("no tokens left: every request but health and OpenAPI is refused until tokens are added")
        return True

    def check_binding(self) -> None:
        """Refuse to serve beyond loopback without tokens."""
        if not is_loopback(self.host) and not self.tokens and self.oauth is None:
            raise ConfigError("host", self.host,
                              "binding anything but loopback needs bearer tokens: pass --token, --tokens-file or "
                              "MEMORY_EXT_TOKENS (or bind --host 127.0.0.1)")
