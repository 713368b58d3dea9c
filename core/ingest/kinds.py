"""Typed memories derived from turns at write time, with no LLM: facts, preferences, events, procedures and
failure patterns.

:func:`derive_kinds` reads the new turns of a namespace (with the turns before them as context) and returns
short records of the kinds of :class:`~memory_ext.models.RecordKind` that a turn record alone says poorly:

* **preference** -- a first-person like, dislike or allergy: "I love/like/enjoy/prefer/hate/can't stand X",
  "I'm allergic to X", "my favourite X is Y", 我喜欢/讨厌/更喜欢/受不了/对X过敏 -> ``"Ana prefers aisle seats"``.
* **fact** -- a first-person stable fact: "I live in / work at / work as / am from / was born in / grew up
  in", "I'm a nurse", "I'm 34 years old", "my X is Y", "I have two dogs", 我住在/我在X工作/我是/我的X是/我叫/
  我有两只猫 -> ``"Ana lives in Lisbon"``, ``"用户住在杭州"``.
* **event** -- a first-person thing that happened or will happen, with a time expression resolved against
  the turn's timestamp -> ``"Ana: ran a marathon (2023-05-06)"``, ``"用户: 要去北京 (2023-05-09)"``.
* **procedure** -- an assistant (or tool) answer to a stated request that holds steps (a numbered list,
  bullets for a how-to request, "first ... then ...", 首先...然后..., 第一步), shell commands or code, or
  that closes a tool-call sequence which succeeded -> ``"how to reset the router: unplug it; wait 30 s;
  plug it back"``, ``"how to find flights to Tokyo: call flight_search(to=Tokyo, timeout_s=30)"``.
* **failure_pattern** -- a tool call or action followed by an error (a tool result with an error key, an
  exception, a traceback, a timeout, an HTTP 4xx/5xx, "failed", 失败/报错/超时) and the fix that followed
  when there is one (the same or another tool succeeding, or a message proposing a fix); a tool result its
  face flagged as an error (``is_error``, ``status="error"``) is a failure whatever its text says. When the same
  tool then succeeds, the record is the *lesson*, built from the two calls' arguments (what changed) ->
  ``"flight_search failed: timeout contacting airline API; succeeded with timeout_s 30"``; otherwise
  ``"flight_search failed with timeout (...); fix: used train_search(...) instead"``.
* **fact** (a parameter value) -- a tool-call argument whose value a user turn gave literally, so the value is
  found by the parameter's name -> ``"check_in: '2026-04-14' (given for book_hotel)"``.

Precision comes before recall: questions ("Do you like sushi?"), hypotheticals ("If I lived in Paris..."),
negated statements, other people's preferences, chit-chat and prose "failures" without a technical context
("I failed my exam") give nothing. Personal kinds come from user turns, and from assistant turns only when
they have a human speaker name (multi-party chat); the speaker's name is the subject of the text when known,
else "the user" (用户 in Chinese).

Each record is a :class:`~memory_ext.ingest.derive.DerivedRecord` (``id``, ``kind``, ``text``,
``index_text``, ``ref_ts``, ``turn_ids`` with the source turn first, ``source_role``, ``speaker``,
``session_id``, ``anchor_turn_id`` = the source turn, ``tags``, ``entities``) whose ``claims`` are the
:class:`~memory_ext.ingest.claims.Claim` s a fact or preference states, read by the one claims extractor that
supersession reads too, so the record is superseded with its statement (empty for the other kinds).
``index_text`` always holds the text, the source sentence or error line, the kind and, for procedures and
failures, the tool names and error keywords, so "flight_search timeout" finds the failure pattern.

The rules live in :mod:`~memory_ext.ingest.statements` (preference, fact, event), :mod:`~memory_ext.ingest.failures`
(failure patterns) and here (procedures); :mod:`~memory_ext.ingest.turns` is the turn view they share.

>>> turns = [{"id": "t1", "role": "user", "speaker": "Ana", "content": "I prefer aisle seats. Thanks!",
...           "ts": 1683554160.0, "session_id": "s1"}]
>>> [(r.kind.value, r.text) for r in derive_kinds(turns, 0)]
[('preference', 'Ana prefers aisle seats')]
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, Final

from memory_ext.ingest.derive import DerivedRecord, IngestTurn
from memory_ext.ingest.failures import (
    FIX_CUE_RE,
    args_gist,
    call_outcome,
    command_gist,
    failure_records,
    json_error,
    known_tools,
    prose_error,
    slot_records,
)
from memory_ext.ingest.manuals import manual_record
from memory_ext.ingest.statements import EVENT_MIN_CONFIDENCE, is_personal_source, personal_records, short_entities
from memory_ext.ingest.turns import (
    CHAT_RE,
    FENCE_RE,
    LOOKAHEAD,
    LOOKBACK,
    TEXT_MAX_CHARS,
    TurnView,
    clean,
    is_chitchat,
    make_record,
    same_session,
    sentences_of,
    view_turn,
)

__all__ = ["EVENT_MIN_CONFIDENCE", "LOOKAHEAD", "LOOKBACK", "TEXT_MAX_CHARS", "derive_kinds"]


# ------------------------------------------------------------------------------------------ procedures

_NUMBERED_RE: Final = re.compile(
    r"^\s*(?:\*\*)?(?:(?:step\s*)?\d{1,2}[.)、:：]|[①②③④⑤⑥⑦⑧⑨⑩]|第[一二三四五六七八九十\d]+步[:：,，、]?)(?:\*\*)?\s*(?P<s>\S.*)$",
    re.IGNORECASE | re.MULTILINE)
_BULLET_RE: Final = re.compile(r"^\s*[-*•]\s+(?P<s>\S.*)$", re.MULTILINE)
_SEQ_SPLIT_RE: Final = re.compile(
    r"(?:^|[\s,;.])(?:first(?:ly)?|then|next|after\s+that|afterwards|finally|lastly)\b[,:]?\s*"
    r"|首先|然后|接着|之后|最后|其次", re.IGNORECASE)
_SEQ_FIRST_RE: Final = re.compile(r"\bfirst(?:ly)?\b|首先|第一步", re.IGNORECASE)
_SEQ_THEN_RE: Final = re.compile(r"\bthen\b|\bnext\b|\bafter\s+that\b|\bfinally\b|然后|接着|之后|最后|其次",
                                 re.IGNORECASE)
_HOWTO_RE: Final = re.compile(
    r"\bhow\s+(?:do|can|should|would|to)\b|\bsteps?\b|\bset\s*up\b|\binstall|\bconfigur|\bfix|\bsolve|\bguide"
    r"|\bsetup\b|怎么|如何|怎样|步骤|教程|安装|配置|设置|解决", re.IGNORECASE)
_REQ_LEAD_RE: Final = re.compile(
    r"^(?:(?:hi|hey|hello|ok(?:ay)?|so|well|please|thanks|alright|btw|also)\b[\s,!.:;-]*)*"
    r"(?:(?:can|could|would|will)\s+you\s+(?:please\s+)?(?:help\s+me\s+|tell\s+me\s+|show\s+me\s+|explain\s+)?"
    r"|(?:please\s+)?(?:help\s+me\s+|tell\s+me\s+|show\s+me\s+)|i\s+(?:want|need|would\s+like|['’]d\s+like)\s+(?:you\s+)?to\s+"
    r"|i(?:['’]m|\s+am)\s+trying\s+to\s+)?"
    r"(?:how\s+(?:do|can|should|would)\s+(?:i|we|you|one)\s+|how\s+to\s+)?",
    re.IGNORECASE)
_REQ_LEAD_ZH_RE: Final = re.compile(
    r"^(?:(?:好的|好|嗯|那|那么|另外|对了|请问|请|麻烦你?|能不能|可以|你能|你可以|能否)[，,、\s]*)*"
    r"(?:帮我|帮忙|给我|告诉我|教我|我想|我要|我想知道)?(?:怎么|如何|怎样)?")


def _request_gist(t: TurnView) -> str:
    content = FENCE_RE.sub(" ", t.content) if "```" in t.content else t.content
    for raw in sentences_of(content):
        s = raw.strip()
        if not s or CHAT_RE.match(s.rstrip(".!?！。？")):
            continue
        g = (_REQ_LEAD_RE if s.isascii() else _REQ_LEAD_ZH_RE).sub("", s, count=1)
        g = g.strip().rstrip("?？.。!！").strip()
        g = re.sub(r"\s*(?:吗|呢|啊|呀)$", "", g)
        if len(g) >= 2:
            return clean(g, 80)
    return ""


_STEP_END_RE: Final = re.compile(r"(.+?)(?:[.!?…](?=\s|$)|[。！？；\n]|$)", re.DOTALL)


def _steps(content: str, howto: bool) -> tuple[list[str], str]:
    """(steps, how they were found)."""
    if howto:  # a list answering "tell me about Kyoto" is a list of sights, not steps
        numbered = [m.group("s") for m in _NUMBERED_RE.finditer(content)]
        if len(numbered) >= 2:
            return numbered, "steps"
        bullets = [m.group("s") for m in _BULLET_RE.finditer(content)]
        if len(bullets) >= 2:
            return bullets, "steps"
    prose = FENCE_RE.sub(" ", content) if "```" in content else content
    fm = _SEQ_FIRST_RE.search(prose)
    if fm and _SEQ_THEN_RE.search(prose, fm.end()):
        parts = [p for p in _SEQ_SPLIT_RE.split(prose[fm.start():]) if p and p.strip(" ,.;:，。；：")]
        parts = [m.group(1) for p in parts if p.strip() and (m := _STEP_END_RE.match(p.strip()))]
        if len(parts) >= 2:
            return parts, "sequence"
    cmd = command_gist(content)
    if cmd:
        return [f"run {cmd}"], "command"
    return [], ""


def _procedure(turns: Sequence[TurnView | None], i: int) -> DerivedRecord | None:
    t = turns[i]
    assert t is not None
    if t.role not in ("assistant", "tool") or t.calls or not t.content.strip():
        return None
    request: TurnView | None = None
    chain: list[tuple[int, TurnView]] = []
    for k in range(i - 1, max(-1, i - LOOKBACK - 1), -1):
        c = turns[k]
        if c is None or not same_session(c, t):
            break
        if c.role == "user" and not is_chitchat(c):
            request = c
            break
        if c.calls:
            chain.append((k, c))
    if request is None:
        return None
    report = prose_error(request, known_tools(turns[max(0, i - LOOKBACK):i]))
    if report is not None:
        specific = [c for c in report.classes if c not in ("error", "failed", "exception")]
        req = "fix " + (specific[0] if specific else clean(report.gist, 60))
        howto = True
    else:
        req = _request_gist(request)
        howto = bool(_HOWTO_RE.search(request.content))
    if not req:
        return None
    content = t.content if len(t.content) <= 20000 else t.content[:20000]
    if t.role == "tool" and json_error(content)[0]:
        return None
    steps, how = _steps(content, howto)
    if t.role == "tool" and how != "steps":
        return None
    tools: list[str] = []
    context: list[TurnView] = [request]
    calls_ok: list[str] = []
    for k, c in reversed(chain):
        for call in c.calls:
            status, _, result = call_outcome(turns, k, call)
            context.append(c)
            if result is not None:
                context.append(result)
            if status == "ok":
                calls_ok.append(f"{call.name}({args_gist(call.args, 50)})")
                tools.append(call.name)
    last_ok = False
    if chain:
        k, c = chain[0]
        last_ok = call_outcome(turns, k, c.calls[-1])[0] == "ok"
    if not steps:
        if not (calls_ok and last_ok):
            return None
        steps, how = [f"call {' → '.join(calls_ok[:4])}"], "tools"
    if how == "command" and not (howto or calls_ok or FIX_CUE_RE.search(content)):
        return None
    gist = "; ".join(clean(s, 60).rstrip(".。") for s in steps[:6])
    text = f"how to {req}: {clean(gist, 220)}" if req.isascii() else f"如何{req}：{clean(gist, 220)}"
    cmd_heads = re.findall(r"`([a-z][\w.-]*)", gist)
    tools = list(dict.fromkeys(tools))
    index = f"{text} | procedure how to steps {req} {' '.join(tools)} {' '.join(calls_ok)}"
    return make_record("procedure", t, text, index, context, ["procedure", *tools, *cmd_heads, how],
                   tools + short_entities(req)[:6])


# ------------------------------------------------------------------------------------------ entry point


def derive_kinds(sequence: Sequence[IngestTurn | Mapping[str, Any]], first: int) -> list[DerivedRecord]:
    """Typed records (fact, preference, event, procedure, failure_pattern) of the turns ``sequence[first:]``.

    ``sequence`` is the namespace's recent turns, then the new batch: :class:`IngestTurn` s, or mappings with
    ``id``, ``role``, ``speaker``, ``content``, ``ts`` (epoch seconds), ``session_id``, ``tool_calls``,
    ``attachments`` and ``metadata``. The turns before ``first`` are context only (a request, a tool call, an
    error that the new turns fix). Never raises: malformed turns or tool calls give fewer records.
    """
    try:
        raw = list(sequence)
        first = max(0, int(first))
    except Exception:  # noqa: BLE001 -- odd input gives nothing
        return []
    turns = [view_turn(r, n) for n, r in enumerate(raw)]
    out: list[DerivedRecord] = []
    for i in range(first, len(turns)):
        t = turns[i]
        if t is None or is_chitchat(t):
            continue
        try:
            if is_personal_source(t):
                out.extend(personal_records(t))
            proc = _procedure(turns, i) or manual_record(t)
            if proc is not None:
                out.append(proc)
        except Exception:  # noqa: BLE001 -- a bug on one odd turn must not lose the batch
            continue
    try:
        failures = failure_records(turns, first)
    except Exception:  # noqa: BLE001 -- a bug in failure mining must not lose the records found above
        failures = []
    out.extend(failures)
    try:
        slots = slot_records(turns, first)
    except Exception:  # noqa: BLE001 -- a bug in slot mining must not lose the records found above
        slots = []
    out.extend(slots)
    return out
