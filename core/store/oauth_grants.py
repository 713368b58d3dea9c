"""The built-in authorization server's state (``memext serve --oauth``): registered clients, authorization codes,
access and refresh tokens — in one SQLite file, tokens and codes kept only as SHA-256 digests.

Each grant (one consent of the owner) is a *family*: its code, and every access and refresh token issued from it,
share a family id, pinned to the memory user the owner picked. A code used twice, or a refresh token used again
after it was rotated, revokes the whole family (RFC 6749 §4.1.2, OAuth 2.1 §4.3.1).

>>> import tempfile, os
>>> store = OAuthStore(os.path.join(tempfile.mkdtemp(), "oauth.sqlite3"))
>>> store.put_token("secret-access-token", kind="access", client_id="c1", user_id="ana", scopes=["memory"],
...                 resource="http://127.0.0.1:8765/mcp", expires_at=None, family="f1")
>>> store.token("secret-access-token", "access").user_id
'ana'
>>> store.revoke_family("f1"); store.token("secret-access-token", "access") is None
True
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["OAuthStore", "StoredCode", "StoredToken", "digest"]

SCHEMA = """
CREATE TABLE IF NOT EXISTS clients (client_id TEXT PRIMARY KEY, info TEXT NOT NULL, created_at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS codes (digest TEXT PRIMARY KEY, client_id TEXT NOT NULL, user_id TEXT NOT NULL,
    scopes TEXT NOT NULL, resource TEXT, redirect_uri TEXT NOT NULL, redirect_explicit INTEGER NOT NULL,
    challenge TEXT NOT NULL, expires_at REAL NOT NULL, used INTEGER NOT NULL DEFAULT 0, family TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS tokens (digest TEXT PRIMARY KEY, kind TEXT NOT NULL, client_id TEXT NOT NULL,
    user_id TEXT NOT NULL, scopes TEXT NOT NULL, resource TEXT, expires_at INTEGER, family TEXT NOT NULL,
    revoked INTEGER NOT NULL DEFAULT 0);
CREATE INDEX IF NOT EXISTS tokens_family ON tokens (family);
"""


def digest(secret: str) -> str:
    """The SHA-256 hex digest under which a code or token is stored (the secret itself never is)."""
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class StoredCode:
    """An authorization code as stored (without the code)."""

    client_id: str
    user_id: str
    scopes: list[str]
    resource: str | None
    redirect_uri: str
    redirect_explicit: bool
    challenge: str
    expires_at: float
    used: bool
    family: str


@dataclass(frozen=True)
class StoredToken:
    """An access or refresh token as stored (without the token)."""

    kind: str
    client_id: str
    user_id: str
    scopes: list[str]
    resource: str | None
    expires_at: int | None
    family: str
    revoked: bool


class OAuthStore:
    """The SQLite file of the built-in authorization server (created with mode 0600 if missing)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path).expanduser()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if not self.path.exists():
            self.path.touch(mode=0o600)
        self._lock = threading.Lock()
        self._valid: dict[str, StoredToken] = {}
        """Access tokens found valid, by digest: a request checks memory, not the file (cleared by any revocation)."""
        self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.executescript(SCHEMA)
        self.purge()

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def _run(self, sql: str, args: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        with self._lock:
            return self._db.execute(sql, args).fetchall()

    # clients (dynamic registration, RFC 7591)
    def put_client(self, client_id: str, info: dict[str, Any]) -> None:
        self._run("INSERT OR REPLACE INTO clients VALUES (?, ?, ?)", (client_id, json.dumps(info), time.time()))

    def client(self, client_id: str) -> dict[str, Any] | None:
        rows = self._run("SELECT info FROM clients WHERE client_id = ?", (client_id,))
        return json.loads(rows[0][0]) if rows else None

    # authorization codes
    def put_code(self, code: str, *, client_id: str, user_id: str, scopes: list[str], resource: str | None,
                 redirect_uri: str, redirect_explicit: bool, challenge: str, expires_at: float, family: str) -> None:
        self._run("INSERT INTO codes VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 0, ?)",
                  (digest(code), client_id, user_id, " ".join(scopes), resource, redirect_uri, int(redirect_explicit),
                   challenge, expires_at, family))

    def code(self, code: str) -> StoredCode | None:
        rows = self._run("SELECT client_id, user_id, scopes, resource, redirect_uri, redirect_explicit, challenge, "
                         "expires_at, used, family FROM codes WHERE digest = ?", (digest(code),))
        if not rows:
            return None
        c, u, s, r, uri, explicit, ch, exp, used, fam = rows[0]
        return StoredCode(c, u, s.split(), r, uri, bool(explicit), ch, exp, bool(used), fam)

    def use_code(self, code: str) -> bool:
        """Mark a code used; False when it already was (a replay: the caller revokes its family)."""
        with self._lock:
            cursor = self._db.execute("UPDATE codes SET used = 1 WHERE digest = ? AND used = 0", (digest(code),))
            return cursor.rowcount == 1

    # access and refresh tokens
    def put_token(self, token: str, *, kind: str, client_id: str, user_id: str, scopes: list[str],
                  resource: str | None, expires_at: int | None, family: str) -> None:
        self._run("INSERT INTO tokens VALUES (?, ?, ?, ?, ?, ?, ?, ?, 0)",
                  (digest(token), kind, client_id, user_id, " ".join(scopes), resource, expires_at, family))

    def token(self, token: str, kind: str, *, include_revoked: bool = False) -> StoredToken | None:
        """The token's record if it is of this kind and (unless ``include_revoked``) not revoked."""
        key = digest(token)
        if kind == "access" and key in self._valid:
            return self._valid[key]
        rows = self._run("SELECT kind, client_id, user_id, scopes, resource, expires_at, family, revoked FROM tokens "
                         "WHERE digest = ? AND kind = ?", (key, kind))
        if not rows:
            return None
        k, c, u, s, r, exp, fam, revoked = rows[0]
        if revoked and not include_revoked:
            return None
        record = StoredToken(k, c, u, s.split(), r, exp, fam, bool(revoked))
        if kind == "access" and not revoked:
            with self._lock:
                if len(self._valid) > 10000:
                    self._valid.clear()
                self._valid[key] = record
        return record

    def revoke_token(self, token: str) -> bool:
        """Revoke one token; False when it was already revoked or unknown."""
        with self._lock:
            self._valid.clear()
            cursor = self._db.execute("UPDATE tokens SET revoked = 1 WHERE digest = ? AND revoked = 0",
                                      (digest(token),))
            return cursor.rowcount == 1

    def revoke_family(self, family: str) -> None:
        """Revoke every token of a grant, and its code."""
        with self._lock:
            self._valid.clear()
            self._db.execute("UPDATE tokens SET revoked = 1 WHERE family = ?", (family,))
            self._db.execute("UPDATE codes SET used = 1 WHERE family = ?", (family,))

    def purge(self, now: float | None = None) -> None:
        """Drop expired codes and tokens that expired more than a day ago."""
        now = time.time() if now is None else now
        self._run("DELETE FROM codes WHERE expires_at < ?", (now - 86400,))
        self._run("DELETE FROM tokens WHERE expires_at IS NOT NULL AND expires_at < ?", (now - 86400,))
