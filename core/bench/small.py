"""The small-store suite: ``memext bench small`` — first answers on the stores a new user builds in minutes.

Short chats (3-12 turns, English and Chinese, ``memory_ext/data/small_chats_{dev,heldout}.json``, written for
this suite) with four kinds of question:

- ``fact``: the user's statement that answers it must be the first item — not the assistant's "Noted." after it,
  nor the user's own earlier question that asked for it (**fact P@1**);
- ``update``: a later statement replaced an earlier one ("Lena moved to Coimbra" after "Lena lives in Porto"); the
  newer must be first for a present-tense question (**update accuracy**);
- ``past``: a question about before the change ("where did Lena live before?"): the replaced statement must be
  among the first two (**past@2**);
- ``none``: nothing in the chat answers it: the best item's bounded score must be below 0.5 (**no-answer < 0.5**).

Each chat is its own namespace of one store; every question is asked with ``now`` a day after the chat's last turn.
**Repeated context lines** counts, over all questions, the lines of ``SearchResult.context`` shown more than once.
The dev part is for tuning; the held-out part (chosen before any tuning, every other chat of each language) only
for checking.

>>> chats = load_small_chats("dev")
>>> len(chats) >= 20 and {c.language for c in chats} == {"en", "zh"}
True
>>> rows = [{"kind": "fact", "ok": 1.0}, {"kind": "none", "ok": 0.0}, {"kind": "fact", "ok": 0.0}]
>>> summarize_small(rows)["fact_p@1"]
0.5
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from importlib import resources
from typing import Any

__all__ = ["KINDS", "PARTS", "SmallChat", "SmallQuestion", "format_small_markdown", "load_small_chats",
           "run_small", "summarize_small"]

PARTS = ("dev", "heldout")
KINDS = ("fact", "update", "past", "none")
NO_ANSWER_BELOW = 0.5
"""A no-answer question passes when the best item's bounded score is below this."""
PAST_DEPTH = 2
"""A past question passes when the replaced statement is among this many first items."""
METRICS = {"fact": "fact_p@1", "update": "update_acc", "past": f"past@{PAST_DEPTH}", "none": "no_answer<0.5"}


@dataclass(frozen=True)
class SmallQuestion:
    """One question of a chat: ``answer`` / ``replaced`` are turn indexes (None for a no-answer question)."""

    question: str
    kind: str
    answer: int | None = None
    replaced: int | None = None


@dataclass(frozen=True)
class SmallChat:
    """One chat of the suite: its turns (``Turn`` fields) and questions."""

    id: str
    language: str
    turns: tuple[dict[str, Any], ...]
    questions: tuple[SmallQuestion, ...]


def load_small_chats(part: str) -> list[SmallChat]:
    """The chats of one part of the suite (``dev`` or ``heldout``)."""
    if part not in PARTS:
        raise ValueError(f"part must be one of {', '.join(PARTS)}, got {part!r}")
    text = resources.files("memory_ext").joinpath(f"data/small_chats_{part}.json").read_text(encoding="utf-8")
    return [SmallChat(id=c["id"], language=c["language"], turns=tuple(c["turns"]),
                      questions=tuple(SmallQuestion(**q) for q in c["questions"]))
            for c in json.loads(text)["chats"]]


def _repeated_lines(context: str) -> int:
    lines = [line.strip() for line in context.splitlines() if line.strip()]
    return len(lines) - len(set(lines))


def _ask(engine: Any, chat: SmallChat, q: SmallQuestion, now: datetime, k: int) -> dict[str, Any]:
    result = engine.search(q.question, chat.id, k=k, now=now)
    ranked: list[int] = []
    for item in result.items:
        ext = item.external_ids[0] if item.external_ids else None
        ranked.append(int(ext.rsplit(":", 1)[1]) if ext and ext.startswith(chat.id + ":") else -1)
    best = result.items[0].score if result.items else 0.0
    if q.kind == "none":
        ok = best < NO_ANSWER_BELOW
    elif q.kind == "past":
        ok = q.replaced in ranked[:PAST_DEPTH] if q.replaced is not None else q.answer in ranked[:PAST_DEPTH]
    else:
        ok = bool(ranked) and ranked[0] == q.answer
    return {"chat": chat.id, "language": chat.language, "question": q.question, "kind": q.kind, "ok": float(ok),
            "best_score": round(float(best), 4), "ranked": ranked[:3],
            "top": result.items[0].text if result.items else None,
            "repeated_context_lines": _repeated_lines(result.context or "")}


def run_small(chats: Sequence[SmallChat], *, embedder: Any = "e5", config: Any = None,
              k: int = 5) -> list[dict[str, Any]]:
    """Ingest every chat (one namespace each, one temporary store) and ask its questions; a row per question
    (``kind``, ``ok`` 0/1, ``best_score``, the first turn indexes, ``repeated_context_lines``). ``config``: what
    :meth:`~memory_ext.MemoryEngine.open` takes (an ``EngineConfig``, a mapping, a file path or None)."""
    from ..engine import MemoryEngine

    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="memext-small-") as tmp, \
            MemoryEngine.open(tmp, config=config, embedder=embedder) as engine:
        for chat in chats:
            turns = [{**t, "external_id": f"{chat.id}:{i}"} for i, t in enumerate(chat.turns)]
            engine.add_turns(turns, chat.id)
        for chat in chats:
            now = datetime.fromisoformat(chat.turns[-1]["timestamp"]) + timedelta(days=1)
            rows.extend(_ask(engine, chat, q, now, k) for q in chat.questions)
    return rows


def summarize_small(rows: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """The suite's figures from :func:`run_small` rows: each kind's share of passes (``fact_p@1``,
    ``update_acc``, ``past@2``, ``no_answer<0.5``; absent kinds are left out), ``score`` (the mean of the
    present kinds' shares: what ``memext bench select`` compares) and ``repeated_context_lines``."""
    out: dict[str, float] = {}
    for kind in KINDS:
        oks = [float(r["ok"]) for r in rows if r["kind"] == kind]
        if oks:
            out[METRICS[kind]] = round(sum(oks) / len(oks), 4)
    shares = [out[METRICS[kind]] for kind in KINDS if METRICS[kind] in out]
    out["score"] = round(sum(shares) / len(shares), 4) if shares else 0.0
    out["repeated_context_lines"] = float(sum(int(r.get("repeated_context_lines", 0)) for r in rows))
    out["questions"] = float(len(rows))
    return out


def format_small_markdown(results: Mapping[str, Mapping[str, float]]) -> str:
    """A table of :func:`summarize_small` figures, one row per part."""
    cols = [*METRICS.values(), "repeated_context_lines", "questions"]
    lines = ["| part | " + " | ".join(cols) + " |", "|---" * (len(cols) + 1) + "|"]
    for part, summary in results.items():
        cells = [f"{summary[c]:.3f}" if c in summary and c not in ("repeated_context_lines", "questions")
                 else str(int(summary[c])) if c in summary else "–" for c in cols]
        lines.append(f"| {part} | " + " | ".join(cells) + " |")
    return "\n".join(lines)
