"""Stage 8, context: ``SearchResult.context``, the prompt-ready text of the items.

Each found turn is shown inside its source window (``recall.context_window_turns`` turns of the same exchange
on each side); windows of one session that overlap are merged and no turn is shown twice; blocks come in the
rank order of their best turn, within ``recall.context_budget_tokens``. A block that does not fit is disclosed
at a lower level: long turns (:data:`DISCLOSE_MIN_CHARS`) as their L1 abstract, then as their L0 title.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import numpy as np

from ..ingest.derive import WINDOW_MAX_GAP_S
from ..models import RetrievedItem
from ..store.catalog import Catalog
from ..store.interface import TruthStore
from ..store.rows import TurnRow
from ..text import estimate_tokens

__all__ = ["DISCLOSE_MIN_CHARS", "context_line", "render_context", "shown_turns"]

DISCLOSE_MIN_CHARS = 600
"""In ``SearchResult.context`` a turn at least this long may be shown as its L1 abstract or L0 title when the
whole text does not fit the budget."""


def context_line(when: float | None, speaker: str | None, role: str | None, text: str) -> str:
    """One line of context: ``[2023-05-08 13:56] Ana: text``."""
    stamp = datetime.fromtimestamp(when, UTC).strftime("%Y-%m-%d %H:%M") if when is not None else "undated"
    return f"[{stamp}] {speaker or role or 'memory'}: {text}"


def shown_turns(rows: Sequence[TurnRow], cat: Catalog, visible: np.ndarray | None) -> list[TurnRow]:
    """The ``rows`` a search may show: those whose own turn record passes ``visible`` (the search's filters and
    validity, :meth:`memory_ext.retrieval.scope.Scope.visible`; None: every row). A turn the catalog does not
    know (written after the search took its snapshot) is not shown under a mask."""
    if visible is None or not rows:
        return list(rows)
    pos = cat.pos_of(np.fromiter((r.record_rid if r.record_rid is not None else -1 for r in rows), np.int64,
                                 len(rows)))
    return [r for r, p in zip(rows, pos, strict=True) if p >= 0 and visible[p]]


def render_context(store: TruthStore, ns_id: int, items: Sequence[RetrievedItem], found: Mapping[str, TurnRow], *,
                   window_turns: int, budget_tokens: int, cat: Catalog | None = None,
                   visible: np.ndarray | None = None) -> str:
    """Prompt-ready text: each found turn inside its source window (±``window_turns`` turns of the same exchange),
    windows of one session merged where they overlap, best first, within ``budget_tokens``.

    With ``visible`` (a mask over ``cat``'s positions) a neighbour is shown only when its turn record passes it:
    the context obeys the same filters, ``update`` replacements and ``as_of`` as the items.
    """
    if visible is not None and cat is None:
        raise ValueError("render_context: a visible mask needs the catalog it is a mask of")
    n = window_turns
    budget = budget_tokens
    centres = [found[i.turn_ids[0]] for i in items if i.turn_ids and i.turn_ids[0] in found]
    blocks: list[dict[str, Any]] = []  # lo, hi, session, centres (best first)
    for turn in centres:
        lo, hi = turn.seq - n, turn.seq + n
        for b in blocks:
            if b["session"] == turn.session_id and lo <= b["hi"] + 1 and hi >= b["lo"] - 1:
                b["lo"], b["hi"] = min(b["lo"], lo), max(b["hi"], hi)
                b["centres"].append(turn)
                break
        else:
            blocks.append({"lo": lo, "hi": hi, "session": turn.session_id, "centres": [turn]})
    rows = store.turns_by_seq_ranges(ns_id, [(b["lo"], b["hi"]) for b in blocks])
    if visible is not None:
        assert cat is not None
        rows = shown_turns(rows, cat, visible)
    by_seq = {r.seq: r for r in rows}

    layers: dict[str, tuple[str, str]] = {}

    def disclose(r: Any, level: int) -> str:
        """A turn at disclosure level 2 (whole text), 1 (L1 abstract) or 0 (L0 title) — long turns only."""
        if level == 2 or len(r.content) < DISCLOSE_MIN_CHARS:
            return context_line(r.ts, r.speaker, r.role, r.content)
        if r.id not in layers:
            from ..lifecycle.summary import summarize

            summary = summarize([r])
            layers[r.id] = (summary.title, summary.abstract or summary.title)
        text = layers[r.id][1 if level == 1 else 0]
        return context_line(r.ts, r.speaker, r.role, f"{text} [abridged from {len(r.content)} characters; "
                                                     f"get_turns has the whole turn {r.id}]")

    shown: set[int] = set()  # turns already in an earlier block (blocks that grew can overlap)

    def members(lo: int, hi: int, block_centres: list[Any]) -> list[Any]:
        def near(r: Any) -> bool:  # same exchange as one of the block's found turns
            return any(r.session_id == c.session_id and (r.ts is None or c.ts is None or
                                                         abs(r.ts - c.ts) <= WINDOW_MAX_GAP_S)
                       for c in block_centres)

        return [r for s in range(lo, hi + 1) if (r := by_seq.get(s)) is not None and s not in shown and near(r)]

    def render(lo: int, hi: int, block_centres: list[Any], level: int = 2) -> str:
        return "\n".join(disclose(r, level) for r in members(lo, hi, block_centres))

    out: list[str] = []
    used = 0
    for b in blocks:  # in the rank order of their best turn
        # disclosure: the whole window (L2), else long turns as their abstract (L1), else as their title (L0)
        lo, hi, block_centres = b["lo"], b["hi"], b["centres"]
        text = next((t for level in (2, 1, 0)
                     if used + estimate_tokens(t := render(lo, hi, block_centres, level)) <= budget),
                    None)
        if text is None:
            if out:
                break
            best = b["centres"][0]  # the first block is too long: the best turn's own window, or the turn
            lo, hi, block_centres = best.seq - n, best.seq + n, [best]
            text = next((t for level in (2, 1, 0) if estimate_tokens(
                t := render(lo, hi, block_centres, level)) <= budget), None) \
                or next((t for level in (2, 1, 0) if estimate_tokens(t := disclose(best, level)) <= budget),
                        disclose(best, 0))
        if not text:
            continue
        shown.update(r.seq for r in members(lo, hi, block_centres))
        out.append(text)
        used += estimate_tokens(text)
    return "\n---\n".join(out)
