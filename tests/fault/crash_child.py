"""The child process of the crash suite: writes to a store until it is killed.

``python crash_child.py STORE LOG SEED [chroma]``. It opens the store, then runs seeded random operations —
ingest batches, forget (a session or a record), pre_compress, compaction — and appends one line per *finished*
operation to LOG (flushed and fsynced before the next one starts), so the parent knows what was committed:

    add <session> <turn id> <turn id> ...      the batch committed
    forget-start <session>                     a forget began (its turns may or may not be gone)
    forget <session>                           it committed
    ...

Timestamps advance a simulated clock by hours per batch, so weeks and months finish and compaction has work.
"""

from __future__ import annotations

import json
import os
import random
import sys
from datetime import UTC, datetime, timedelta

from memory_ext import MemoryEngine, Namespace


def main() -> None:
    store, log_path, seed = sys.argv[1], sys.argv[2], int(sys.argv[3])
    config = {"storage": {"vector_backend": "chroma"}} if "chroma" in sys.argv[4:] else None
    rng = random.Random(seed)
    engine = MemoryEngine.open(store, embedder="hashing", config=config)
    log = open(log_path, "a", encoding="utf-8")  # noqa: SIM115

    def note(line: str) -> None:
        log.write(line + "\n")
        log.flush()
        os.fsync(log.fileno())

    start = datetime(2026, 1, 5, tzinfo=UTC) + timedelta(days=seed % 200)
    note("ready")
    for step in range(10_000):
        now = start + timedelta(hours=7 * step)
        user = rng.choice(["ana", "bob"])
        session = f"{user}-s{rng.randrange(6)}"
        ns = Namespace(user, session_id=session)
        op = rng.choices(["add", "forget", "forget_record", "pre_compress", "compact"], [8, 1, 1, 1, 1])[0]
        if op == "add":
            turns = [{"role": rng.choice(["user", "assistant"]), "speaker": user.title(),
                      "content": f"{user} step {step} turn {i}: {rng.choice(['Porto', 'Lyon', 'a beagle'])} "
                                 f"{'word ' * rng.randrange(1, 60)}", "timestamp": (now + timedelta(minutes=i))}
                     for i in range(rng.randrange(1, 9))]
            result = engine.add_turns(turns, ns)
            note(f"add {session} " + " ".join(result.turn_ids))
        elif op == "forget":
            note(f"forget-start {session}")
            engine.forget(ns)
            note(f"forget {session}")
        elif op == "forget_record":
            items = engine.search("Porto beagle", Namespace(user), k=1).items
            if items:
                note(f"forget-start-turns {' '.join(items[0].turn_ids)}")
                engine.forget(Namespace(user), record_ids=[items[0].id])
                note(f"forget-turns {' '.join(items[0].turn_ids)}")
        elif op == "pre_compress":
            context = [{"role": "user", "content": f"{user} context {step}: remember the train to Lyon"},
                       {"role": "assistant", "content": f"{user} context {step}: noted, seat {rng.randrange(99)}"}]
            hook = engine.pre_compress(ns, json.dumps(context), now=now)
            note(f"pre_compress {user} {hook}")
        else:
            engine.maybe_compact(Namespace(user), now=now)
            note(f"compact {user}")
    engine.close()


if __name__ == "__main__":
    main()
