"""Content first: a turn that only acknowledges or only asks never ranks above the turn that carries its content.

"Noted." after "I'm allergic to shellfish.", "What's my dog called?" before "He's a beagle called Biscuit" and an
assistant's "Okay, Tuesdays and Fridays." after the user's "the gym is Tuesdays and Fridays now" all match a query
about what the statement says (their window vectors see it), but the item to return is the statement. The shape
of a turn is measured against its neighbours, not looked up in a word list:

- its **sentences** are split at ``. ! ? 。！？`` and the like; a sentence ending in ``?`` or ``？`` asks;
- its **novelty** is what its non-asking sentences say that the neighbouring turn does not: the number of their
  tokens (words; for Chinese, characters counted by :data:`CJK_PER_TOKEN`) absent from the neighbour, and of
  their *content* tokens (words of at least :data:`CONTENT_MIN_LEN` letters or holding a digit; Chinese
  character pairs);

and a turn **depends on** a neighbour in its session said by another speaker (:func:`carriers`):

- it **asks** (it has a question sentence and its other sentences add at most :data:`ACK_TOKENS` tokens to the
  turn before): it depends on the next turn, which answers it;
- it **acknowledges** (it asks nothing, holds at most :data:`ACK_MAX_TOKENS` tokens and adds at most
  :data:`ACK_TOKENS` to the turn before, which asked nothing): it depends on the turn before;
- it is an assistant's **restating reply** (an assistant turn after a user turn that asked nothing, sharing content
  with it and adding at most :data:`RESTATE_CONTENT` content tokens to it): it depends on the user's turn; so does
  any reply of the **agent itself** (an assistant turn without a speaker name) to a user statement, advice
  included ("Lovely. The monstera likes bright indirect light." after "I keep a monstera…"): a question that is not
  about what the assistant said asks for the user's words first;
- it **answers** a question but adds at most :data:`ACK_TOKENS` tokens to the :data:`CONTEXT_TURNS` turns before
  it and shares content tokens with an earlier turn of the asker: it depends on that turn, which it tells back
  ("Black, no sugar." after "Do you remember how I take my coffee?"). Only an assistant's answer to the user:
  between two people (LoCoMo, where both speakers ask and answer) the same rule cost 0.004 evid_recall@5 and @10.
  An answer restating someone else's words is left alone: on LoCoMo that rule cost 0.014 evid_recall@5 and 0.02
  @10;
- it is the agent's **non-answer** to the user's question (an assistant turn without a speaker name, at most
  :data:`ACK_MAX_TOKENS` tokens, sharing no content token with the question or the turns before: "You haven't told
  me yet.", "你还没告诉过我呢。") followed by the user's statement adding more than :data:`ACK_TOKENS` tokens to it
  ("它叫年糕，是一只橘猫。"): it depends on that statement. Between two named people (LoCoMo's speakers) a short reply
  sharing nothing with the question is an answer ("Oscar, after my grandfather."): an earlier non-answer rule for
  every speaker cost LoCoMo dev 0.014 evid_recall@5 (docs/design-notes/small-store.md).

:func:`content_first` then caps each dependent turn's score just below its carrier's: the statement is the item, the
acknowledgement at most its context. The carrier keeps its own score (an acknowledgement's window matches what its
neighbours say, on both sides: lending its score to one of them would rank that one for the other's words). The
thresholds were chosen on the dev part of the small-store suite (``memext bench small``) and checked on its held-out
part and on LoCoMo (docs/design-notes/small-store.md).

>>> shape = turn_shape("Got it, thanks!", "I'm allergic to shellfish.")
>>> shape.asks, shape.novel_tokens
(False, 3)
>>> turn_shape("What's my dog called?", None).asks
True
>>> turn_shape("He's a beagle called Biscuit, three years old.", "What's my dog called?").novel_content
4
"""

from __future__ import annotations

import functools
import itertools
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

import numpy as np

from ..store.catalog import KIND_CODES, Catalog
from ..text.tokenize import term_set

__all__ = ["ACK_TOKENS", "CJK_PER_TOKEN", "CONTENT_MIN_LEN", "RESTATE_CONTENT", "TurnShape", "after_carriers",
           "carriers", "content_first", "turn_shape"]

ACK_TOKENS: Final = 3
"""A turn whose non-asking sentences add at most this many tokens to its neighbour carries no content of its own."""
ACK_MAX_TOKENS: Final = 8
"""An acknowledgement is short: at most this many tokens in all ("Turn 7: … day 7." after "Turn 6: … day 6." adds
one token but is a statement of its own)."""
RESTATE_CONTENT: Final = 4
"""An assistant reply adding at most this many content tokens to the user statement before it restates it."""
CONTENT_MIN_LEN: Final = 4
"""Words of at least this many letters (or holding a digit) are content tokens."""
CJK_PER_TOKEN: Final = 2
"""Chinese characters per token when counting novelty (a Chinese word is about two characters)."""
NEIGHBOUR_SCAN: Final = 64
"""How far (catalog positions) to look for a turn's neighbour turns: derived records sit between turns."""
MARGIN: Final = 1e-4
"""How far below its carrier a dependent turn is put."""
CONTEXT_TURNS: Final = 6
"""How many turns before an answer are read to tell whether it only restates one of them."""

_SENTENCE_RE: Final = re.compile(r"[^.!?。！？…\n]+[.!?。！？…\n]*")
_ASKS_RE: Final = re.compile(r"[?？]")
_WORD_RE: Final = re.compile(r"[^\W_]+", re.UNICODE)
_CJK_RE: Final = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")
_TURN: Final = KIND_CODES["turn"]
SHAPE_CACHE: Final = 4096
"""How many measured texts (and turn shapes) are kept: a store's turns are measured again by every search that
ranks them, and a turn's text does not change under its id (an edit is a new text, a new key)."""


@functools.lru_cache(maxsize=SHAPE_CACHE)
def _tokens(text: str) -> tuple[frozenset[str], frozenset[str], int]:
    """``(words and characters, content tokens, Chinese character count)`` of ``text`` (cached: searches measure the
    same turns again)."""
    words: set[str] = set()
    content: set[str] = set()
    cjk = 0
    for word in _WORD_RE.findall(text.lower()):
        chars = _CJK_RE.findall(word)
        if chars:
            cjk += len(chars)
            words.update(chars)
            content.update(a + b for a, b in itertools.pairwise(chars))
            rest = _CJK_RE.sub(" ", word).split()
        else:
            rest = [word]
        for w in rest:
            if len(w) == 1 and w.isascii() and not w.isdigit():
                continue  # "m" of "I'm", "s" of "it's": no word of their own
            words.add(w)
            if len(w) >= CONTENT_MIN_LEN or any(c.isdigit() for c in w):
                content.add(w)
    return frozenset(words), frozenset(content), cjk


@dataclass(frozen=True)
class TurnShape:
    """What :func:`turn_shape` measured: whether the turn asks, and what its non-asking sentences add to the
    neighbour (``novel_tokens``: words, Chinese characters / :data:`CJK_PER_TOKEN`; ``novel_content``)."""

    asks: bool
    novel_tokens: int
    novel_content: int
    tokens: int = 0
    """Tokens of its non-asking sentences (counted as ``novel_tokens`` is)."""
    shared_content: int = 0
    """Content tokens its non-asking sentences share with the neighbour."""


@functools.lru_cache(maxsize=SHAPE_CACHE)
def turn_shape(text: str, neighbour: str | None) -> TurnShape:
    """The shape of turn ``text`` against the ``neighbour`` turn's text (None: measured against nothing; cached, the
    shape is a function of the two texts)."""
    sentences = [s.strip() for s in _SENTENCE_RE.findall(text) if s.strip()]
    asks = any(_ASKS_RE.search(s) for s in sentences)
    said = " ".join(s for s in sentences if not _ASKS_RE.search(s))
    words, content, _ = _tokens(said)
    n_words, n_content, _ = _tokens(neighbour or "")
    novel = words - n_words
    cjk_novel = sum(1 for w in novel if _CJK_RE.fullmatch(w))
    novel_tokens = len(novel) - cjk_novel + -(-cjk_novel // CJK_PER_TOKEN)
    cjk_all = sum(1 for w in words if _CJK_RE.fullmatch(w))
    return TurnShape(asks=asks, novel_tokens=novel_tokens, novel_content=len(content - n_content),
                     tokens=len(words) - cjk_all + -(-cjk_all // CJK_PER_TOKEN),
                     shared_content=len(content & n_content))


def _neighbour(cat: Catalog, pos: int, step: int) -> int:
    """The turn before (``step`` -1) or after (+1) ``pos`` in its session (-1: none within
    :data:`NEIGHBOUR_SCAN` positions)."""
    q = int((cat.prev_turn if step < 0 else cat.next_turn)[pos])
    return q if q >= 0 and abs(q - pos) <= NEIGHBOUR_SCAN else -1


def _other(cat: Catalog, p: int, q: int) -> bool:
    """Whether turn ``q`` exists and another speaker (or role) said it than ``p``."""
    return q >= 0 and (cat.speaker[q] != cat.speaker[p] or cat.assistant[q] != cat.assistant[p])


def _earlier(cat: Catalog, p: int, n: int) -> list[int]:
    """Up to ``n`` turns before ``p`` in its session, nearest first."""
    out: list[int] = []
    q = _neighbour(cat, p, -1)
    while q >= 0 and len(out) < n:
        out.append(q)
        q = _neighbour(cat, q, -1)
    return out


def _said_before(cat: Catalog, p: int, n: int) -> list[int]:
    """Up to ``n`` turns of the speaker of turn ``p`` before it, in any session, nearest first."""
    out: list[int] = []
    q = p - 1
    while q >= 0 and len(out) < n and p - q <= NEIGHBOUR_SCAN * n:
        if cat.kind[q] == _TURN and cat.speaker[q] == cat.speaker[p] and cat.assistant[q] == cat.assistant[p]:
            out.append(q)
        q -= 1
    return out


def _restated(text: str, earlier: Sequence[int], texts: Mapping[int, str]) -> int | None:
    """What an answer to a question that adds at most :data:`ACK_TOKENS` tokens to the turns before it
    restates: the earlier turn sharing most content tokens with it (-1: it shares none, a non-answer such as
    "I don't know yet"); None for an answer that says something new."""
    context = " ".join(texts.get(q, "") for q in earlier)
    if turn_shape(text, context).novel_tokens > ACK_TOKENS:
        return None
    own = _tokens(text)[1]
    best, shared = -1, 0
    for q in earlier[1:]:  # earlier[0] is the question itself
        n = len(own & _tokens(texts.get(q, ""))[1])
        if n > shared:
            best, shared = q, n
    return best


def carriers(cat: Catalog, positions: Sequence[int], text_of: Callable[[Sequence[int]], Mapping[int, str]], *,
             restating: bool = True) -> dict[int, int]:
    """For each of ``positions`` (turns) that depends on a neighbour (see the module docstring): its carrier's
    position. ``text_of(positions)`` returns the texts of catalog positions; ``restating=False`` leaves the
    assistant's replies alone (a question about what the assistant said)."""
    near = {p: (_neighbour(cat, p, -1), _neighbour(cat, p, 1)) for p in positions if cat.kind[p] == _TURN}
    near = {p: n for p, n in near.items() if max(n) >= 0}  # a turn alone in its session depends on nothing
    if not near:
        return {}
    wanted = sorted({q for p, (b, a) in near.items() for q in (p, b, a) if q >= 0})
    texts = dict(text_of(wanted))
    out: dict[int, int] = {}
    answers: list[int] = []
    unnamed = {code for name, code in cat.speaker_codes.items() if not name}  # the agent's own turns: no name
    for p, (before, after) in near.items():
        text = texts.get(p)
        if text is None:
            continue
        prev = texts.get(before) if _other(cat, p, before) else None
        shape = turn_shape(text, prev)
        if shape.asks and shape.novel_tokens <= ACK_TOKENS:
            if _other(cat, p, after) and after in texts:
                out[p] = after
            continue
        if prev is None:
            continue
        if _ASKS_RE.search(prev):
            if cat.assistant[p] and not cat.assistant[before]:  # an assistant answering the user's question:
                answers.append(p)  # new unless it tells back what the user said before
            continue
        elif (shape.novel_tokens <= ACK_TOKENS and shape.tokens <= ACK_MAX_TOKENS) or (
                restating and cat.assistant[p] and not cat.assistant[before]
                and ((shape.novel_content <= RESTATE_CONTENT and shape.shared_content > 0)
                     or int(cat.speaker[p]) in unnamed)):
            out[p] = before
    if answers:
        earlier = {p: _earlier(cat, p, CONTEXT_TURNS) for p in answers}
        texts.update(text_of(sorted({q for qs in earlier.values() for q in qs} - set(texts))))
        for p in answers:
            source = _restated(texts[p], earlier[p], texts)
            before, after = near[p]
            if source is not None and source >= 0 and cat.speaker[source] == cat.speaker[before] \
                    and cat.assistant[source] == cat.assistant[before]:
                out[p] = source  # what the asker said before, told back
            elif restating and (source is None or source < 0) and int(cat.speaker[p]) in unnamed and after in texts \
                    and _tells(cat, p, after, texts, earlier[p]):
                out[p] = after  # the agent could not answer; the asker then said it
    return out


def _tells(cat: Catalog, p: int, after: int, texts: Mapping[int, str], earlier: Sequence[int]) -> bool:
    """Whether the agent's reply ``p`` to the user's question is a non-answer that the asker's next turn ``after``
    answers: the reply is short, shares no content token with the question or the turns before it (it tells
    nothing back) and the asker's next turn is a statement adding content to it. Only the agent's own replies (an
    assistant turn without a speaker name): between two named people (LoCoMo) a short reply is an answer."""
    shape = turn_shape(texts[p], " ".join(texts.get(q, "") for q in earlier))
    if shape.asks or shape.tokens > ACK_MAX_TOKENS or shape.shared_content:
        return False
    if cat.speaker[after] != cat.speaker[earlier[0]] or cat.assistant[after] != cat.assistant[earlier[0]]:
        return False
    told = turn_shape(texts[after], texts[p])
    return not told.asks and told.novel_tokens > ACK_TOKENS


@functools.lru_cache(maxsize=4096)
def _units(text: str) -> frozenset[str]:
    """A text's words (:func:`memory_ext.text.tokenize`), Chinese by character: where a word boundary falls in
    Chinese is arbitrary ("家猫" in the question, "橘猫" in the answer), so two Chinese texts are compared by the
    characters they share. Cached: the same stored turns meet every question of their store."""
    out: set[str] = set()
    for word in term_set(text):
        out.update(word if _CJK_RE.search(word) else (word,))
    return frozenset(out)


def content_first(cat: Catalog, total: np.ndarray, text_of: Callable[[Sequence[int]], Mapping[int, str]], *,
                  top: int, restating: bool = True, query: str | None = None) -> dict[int, int]:
    """Cap the score of every dependent turn among the ``top`` best of ``total`` just below its carrier's when the
    carrier is among them too (in place; the carrier keeps its own score). Returns {dependent position: carrier
    position}. With ``query``, an assistant's reply to a user's statement that holds more of the query's words
    than the statement is what the question asks for ("order 4412 refund" → "Order 4412 is cancelled, refund in
    5 days" after "Please cancel order 4412"): it is left alone, unless a later statement replaced the one it
    answers (``cat.successor``): then it is as out of date as that statement and stays below it, or the words it
    holds more are the user's own from the turns before (:data:`CONTEXT_TURNS`): "Norway in August is lovely."
    after "…we booked Norway instead, same dates." tells back the "August" of "a trip to Iceland in August"."""
    finite = np.flatnonzero(np.isfinite(total))
    if finite.size < 2:
        return {}
    best = finite[np.argsort(-total[finite], kind="stable")[:top]]
    candidates = set(best.tolist())
    links = {p: c for p, c in carriers(cat, best.tolist(), text_of, restating=restating).items()
             if c in candidates}  # a carrier far down the ranking does not pull its dependent out of the results
    words = _units(query) if query else frozenset()
    replies = [p for p, c in links.items() if c < p and cat.assistant[p] and not cat.assistant[c]]
    if words and replies:
        said = {p: _said_before(cat, links[p], CONTEXT_TURNS) for p in replies}
        texts = text_of(sorted({q for p in replies for q in (p, links[p], *said[p])}))
        for p in replies:
            if links[p] in cat.successor:
                continue  # a reply to a statement a later one replaced is as out of date as the statement
            own, reply = words & _units(texts.get(links[p], "")), words & _units(texts.get(p, ""))
            if len(reply) > len(own) and reply - own - set().union(*(_units(texts.get(q, "")) for q in said[p])):
                del links[p]  # the reply holds more of what is asked, news of its own: no dependent for this
                # question ("Norway in August is lovely" after "we booked Norway instead, same dates" only tells
                # back the user's "Iceland in August" before)

    def chain(p: int) -> list[int]:  # p, its carrier, that one's carrier, ... up to the turn carrying content
        out = [p]
        while out[-1] in links and links[out[-1]] not in out and len(out) < 8:
            out.append(links[out[-1]])
        return out

    for path in sorted((chain(p) for p in links), key=len):
        for q, c in zip(path[-2::-1], path[:0:-1], strict=True):  # from the carrier outwards
            total[q] = min(total[q], total[c] - MARGIN)
    return links


def after_carriers(rids: Sequence[int], scores: Sequence[float],
                   dependents: Mapping[int, int]) -> tuple[list[int], list[float]]:
    """A final ranking (after diversification, which may swap near-equal scores) with each dependent rid put
    right after its carrier when both are in it, its score lowered to its carrier's. ``dependents``: dependent
    rid -> carrier rid.

    >>> after_carriers([7, 3, 5], [0.9, 0.8, 0.7], {7: 3})
    ([3, 7, 5], [0.8, 0.8, 0.7])
    """
    present = set(rids)
    score_of = dict(zip(rids, scores, strict=True))
    waiting: dict[int, list[int]] = {}
    out: list[int] = []

    def emit(rid: int, depth: int = 0) -> None:
        out.append(rid)
        for dependent in waiting.pop(rid, []) if depth < 8 else []:
            score_of[dependent] = min(score_of[dependent], score_of[rid])
            emit(dependent, depth + 1)

    for rid in rids:
        carrier = dependents.get(rid)
        if carrier is not None and carrier in present and carrier not in out:
            waiting.setdefault(carrier, []).append(rid)
        else:
            emit(rid)
    for rid in [r for held in waiting.values() for r in held]:  # a cycle (never built by carriers): as it was
        if rid not in out:
            out.append(rid)
    return out, [score_of[r] for r in out]
