"""Row-level security on a PostgreSQL store: a connection scoped to one user reads only that user's rows.

The engine scopes every query by namespace itself; ``storage.postgres_rls: true`` adds PostgreSQL policies as
defence in depth, so that a connection that is *not* the engine — an analytics role, a support console, a
hand-written query — reads only the rows of one user even when its SQL forgets the ``WHERE``.

What :func:`enable_rls` installs, in the store's schema:

* on ``namespaces``: a row is visible when its ``user_id`` is the *current user* (below);
* on every table with an ``ns_id`` column (turns, records, embeddings, memory files, claims, history, the
  keyword, graph, time, evidence and sparse indexes, the pgvector tables, the queue — and any table an index
  creates later): a row is visible when its namespace is one of the current user's;
* on tables keyed by a memory file (``file_turns``): when the file is visible;
* ``rls_roles``, the roles pinned to one user (:func:`grant_reader` with ``user_id``): each role sees its own row.

The *current user* of a connection is the ``user_id`` its role is pinned to in ``rls_roles``, else the
``memory_ext.user_id`` setting of the session or transaction (``SET memory_ext.user_id = 'ana'``, or
``SELECT set_config('memory_ext.user_id', 'ana', true)``). Unset (or empty), nothing is visible. A role pinned
to a user cannot read another user's rows whatever it sets; a role that is not pinned reads the user its session
names — that scopes a well-behaved client (an analytics job per tenant), it does not stop one that sets the
setting to someone else: pin such roles.

Policies bind roles other than the tables' owner: the engine connects as the owner (the role that created the
schema), which PostgreSQL exempts, so the engine itself is unaffected. Superusers and ``BYPASSRLS`` roles are
exempt too — never give them to a scoped reader (:func:`grant_reader` refuses). Everything here is idempotent:
the store calls :func:`enable_rls` at every open and after every index creates its tables.

For an analytics role::

    CREATE ROLE analyst LOGIN PASSWORD '...';                 -- as an administrator: no SUPERUSER, no BYPASSRLS

    from memory_ext.store.pg.rls import grant_reader
    with psycopg.connect(owner_dsn, autocommit=True) as conn:  # as the engine's role (the owner)
        grant_reader(conn, "memory_ext", "analyst")              # reads the user its session sets
        grant_reader(conn, "memory_ext", "ana_support", user_id="ana")   # reads Ana's rows, nothing else
"""

from __future__ import annotations

import re
from typing import Any

from ...errors import ConfigError

__all__ = ["POLICY", "ROLES_TABLE", "SETTING", "disable_rls", "enable_rls", "grant_reader", "revoke_reader",
           "rls_enabled"]

SETTING = "memory_ext.user_id"
"""The session (or transaction) setting naming the user a connection reads."""
POLICY = "memory_ext_user"
"""The name of the policy on each table."""
ROLES_TABLE = "rls_roles"
"""The table of roles pinned to one user: ``rls_roles(role_name, user_id)``."""

_ROLE = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")


def _raw(conn: Any) -> Any:
    """The psycopg connection under a store connection (:class:`PgConnection`), or ``conn`` itself."""
    return getattr(conn, "raw", conn)


def _schema_name(schema: str) -> str:
    """The schema's name as the catalog spells it (the store creates it unquoted: folded to lower case)."""
    if not schema.isidentifier() or not schema.isascii():
        raise ConfigError("storage.postgres_schema", schema, "use a plain identifier such as memory_ext")
    return schema.lower()


def _role_name(role: str) -> str:
    if not isinstance(role, str) or not _ROLE.fullmatch(role):
        raise ConfigError("role", role, "give a plain PostgreSQL role name (letters, digits, _)")
    return role.lower()


def _current_user(schema: str) -> str:
    """SQL: the user a connection reads (its pinned user, else its setting; NULL when neither)."""
    return (f"COALESCE((SELECT p.user_id FROM {schema}.{ROLES_TABLE} p WHERE p.role_name = current_user::text),"
            f" NULLIF(current_setting('{SETTING}', true), ''))")


def _policies(schema: str) -> dict[str, str]:
    """The row filter of each kind of table."""
    user = _current_user(schema)
    own_ns = f"(SELECT n.ns_id FROM {schema}.namespaces n WHERE n.user_id = {user})"
    return {
        "namespaces": f"user_id = {user}",
        "ns_id": f"ns_id IN {own_ns}",
        "fid": f"fid IN (SELECT f.fid FROM {schema}.files f WHERE f.ns_id IN {own_ns})",
        ROLES_TABLE: "role_name = current_user::text",
    }


def _tables(raw: Any, schema: str) -> dict[str, set[str]]:
    """Every ordinary table of the schema -> its column names."""
    out: dict[str, set[str]] = {}
    for table, column in raw.execute(
            "SELECT c.relname, a.attname FROM pg_class c JOIN pg_namespace s ON s.oid = c.relnamespace"
            " JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped"
            " WHERE s.nspname = %s AND c.relkind IN ('r', 'p')", (schema,)).fetchall():
        out.setdefault(table, set()).add(column)
    return out


def _kind(table: str, columns: set[str]) -> str | None:
    """Which row filter a table gets (None: the table holds no user's rows — ``meta``)."""
    if table in ("namespaces", ROLES_TABLE):
        return table
    if "ns_id" in columns:
        return "ns_id"
    if "fid" in columns:
        return "fid"
    return None


def _owner(raw: Any, schema: str) -> str:
    """The schema's owner (the engine's role, which creates the tables of later indexes), quoted."""
    row = raw.execute("SELECT quote_ident(pg_get_userbyid(nspowner)) FROM pg_namespace WHERE nspname = %s",
                      (schema,)).fetchone()
    if row is None:
        raise ConfigError("storage.postgres_schema", schema, "no such schema: open the store once first")
    return str(row[0])


def rls_enabled(conn: Any, schema: str) -> bool:
    """True when :func:`enable_rls` ran on this schema (its ``rls_roles`` table exists)."""
    schema = _schema_name(schema)
    row = _raw(conn).execute("SELECT to_regclass(%s) IS NOT NULL", (f"{schema}.{ROLES_TABLE}",)).fetchone()
    return bool(row and row[0])


def enable_rls(conn: Any, schema: str) -> list[str]:
    """Turn row-level security on for every table of ``schema`` holding a user's rows; returns the tables it
    changed (empty when every table was covered already). Run inside the caller's transaction, as the owner."""
    schema = _schema_name(schema)
    raw = _raw(conn)
    raw.execute(f"CREATE TABLE IF NOT EXISTS {schema}.{ROLES_TABLE}(role_name TEXT PRIMARY KEY,"
                " user_id TEXT NOT NULL)")
    secured = {t for (t,) in raw.execute(
        "SELECT c.relname FROM pg_class c JOIN pg_namespace s ON s.oid = c.relnamespace WHERE s.nspname = %s"
        " AND c.relrowsecurity", (schema,)).fetchall()}
    has_policy = {t for (t,) in raw.execute(
        "SELECT tablename FROM pg_policies WHERE schemaname = %s AND policyname = %s", (schema, POLICY)).fetchall()}
    policies = _policies(schema)
    changed: list[str] = []
    for table, columns in sorted(_tables(raw, schema).items()):
        kind = _kind(table, columns)
        if kind is None:
            continue
        if table not in has_policy:
            raw.execute(f"CREATE POLICY {POLICY} ON {schema}.{table} USING ({policies[kind]})")
        if table not in secured:
            raw.execute(f"ALTER TABLE {schema}.{table} ENABLE ROW LEVEL SECURITY")
        if table not in has_policy or table not in secured:
            changed.append(table)
    return changed


def disable_rls(conn: Any, schema: str) -> None:
    """Remove what :func:`enable_rls` installed (the policies, row-level security, ``rls_roles``)."""
    schema = _schema_name(schema)
    raw = _raw(conn)
    for (table,) in raw.execute("SELECT tablename FROM pg_policies WHERE schemaname = %s AND policyname = %s",
                                (schema, POLICY)).fetchall():
        raw.execute(f"DROP POLICY IF EXISTS {POLICY} ON {schema}.{table}")
        raw.execute(f"ALTER TABLE {schema}.{table} DISABLE ROW LEVEL SECURITY")
    raw.execute(f"DROP TABLE IF EXISTS {schema}.{ROLES_TABLE}")


def grant_reader(conn: Any, schema: str, role: str, *, user_id: str | None = None) -> None:
    """Let ``role`` (an existing role, not a superuser, not ``BYPASSRLS``, not the tables' owner) read the
    store's tables under row-level security, which this turns on if it is not yet.

    ``user_id``: pin the role to that user (it reads that user's rows and nothing else, whatever it sets); None:
    the role reads the user its session names in ``memory_ext.user_id`` (nothing when unset), and an earlier
    pin is removed. Tables the schema's owner creates later (a new index) are granted too. Run as the owner (or a
    superuser).
    """
    schema = _schema_name(schema)
    name = _role_name(role)
    raw = _raw(conn)
    row = raw.execute("SELECT rolsuper, rolbypassrls FROM pg_roles WHERE rolname = %s", (name,)).fetchone()
    if row is None:
        raise ConfigError("role", role, "create it first (CREATE ROLE ... LOGIN), as an administrator")
    if row[0] or row[1]:
        raise ConfigError("role", role, "a superuser or BYPASSRLS role ignores row-level security: use a plain role")
    owned = raw.execute("SELECT count(*) FROM pg_tables WHERE schemaname = %s AND tableowner = %s",
                        (schema, name)).fetchone()
    if owned and owned[0]:
        raise ConfigError("role", role, "this role owns the store's tables (the owner is exempt from row-level "
                          "security): grant a separate role")
    if user_id is not None and (not isinstance(user_id, str) or not user_id):
        raise ConfigError("user_id", user_id, "give the user id of a namespace (a non-empty string), or None")
    enable_rls(raw, schema)
    raw.execute(f"GRANT USAGE ON SCHEMA {schema} TO {name}")
    raw.execute(f"GRANT SELECT ON ALL TABLES IN SCHEMA {schema} TO {name}")
    raw.execute(f"ALTER DEFAULT PRIVILEGES FOR ROLE {_owner(raw, schema)} IN SCHEMA {schema}"
                f" GRANT SELECT ON TABLES TO {name}")
    if user_id is None:
        raw.execute(f"DELETE FROM {schema}.{ROLES_TABLE} WHERE role_name = %s", (name,))
    else:
        raw.execute(f"INSERT INTO {schema}.{ROLES_TABLE}(role_name, user_id) VALUES(%s, %s)"
                    " ON CONFLICT (role_name) DO UPDATE SET user_id = EXCLUDED.user_id", (name, user_id))


def revoke_reader(conn: Any, schema: str, role: str) -> None:
    """Undo :func:`grant_reader`: the role reads nothing of the store any more."""
    schema = _schema_name(schema)
    name = _role_name(role)
    raw = _raw(conn)
    raw.execute(f"ALTER DEFAULT PRIVILEGES FOR ROLE {_owner(raw, schema)} IN SCHEMA {schema}"
                f" REVOKE SELECT ON TABLES FROM {name}")
    raw.execute(f"REVOKE ALL ON ALL TABLES IN SCHEMA {schema} FROM {name}")
    raw.execute(f"REVOKE USAGE ON SCHEMA {schema} FROM {name}")
    if rls_enabled(raw, schema):
        raw.execute(f"DELETE FROM {schema}.{ROLES_TABLE} WHERE role_name = %s", (name,))
