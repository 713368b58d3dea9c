"""A writer process of the multi-writer tests: ``python writer_child.py DSN SCHEMA NAME USERS N``.

Opens the engine on the shared PostgreSQL schema and writes ``N`` turns, one ``add_turns`` call each, round-robin
over the comma-separated ``USERS`` (so several processes write the same namespaces), then waits until everything
it wrote is vector-indexed and prints ``ok``.
"""

from __future__ import annotations

import sys

from memory_ext import MemoryEngine, Turn


def main() -> None:
    dsn, schema, name, users, n = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4].split(","), int(sys.argv[5])
    config = {"storage": {"backend": "postgres", "postgres_schema": schema}}
    with MemoryEngine.open(dsn, config=config, embedder="hashing") as engine:
        for i in range(n):
            user = users[i % len(users)]
            engine.add_turns([Turn(role="user", speaker=name, external_id=f"{name}-{i}",
                                   content=f"{name} note {i}: the parcel for {user} arrived at depot {i * 7 % 13}")],
                             user)
        for user in users:
            assert engine.flush(user), "not fully indexed"
    print("ok", flush=True)


if __name__ == "__main__":
    main()
