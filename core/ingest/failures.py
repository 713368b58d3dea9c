"""Failure patterns: a tool call or action followed by an error, and the fix that followed when there is one;
and the error and tool-chain readers the procedures of :mod:`memory_ext.ingest.kinds` use too.

>>> json_error('{"error": "timeout contacting airline API"}')
(True, 'timeout contacting airline API')
>>> _classes_of("HTTP 429 Too Many Requests")
['http 429', 'rate limit']
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from memory_ext.ingest.derive import DerivedRecord
from memory_ext.ingest.turns import (
    ASSISTANT_NAMES,
    FENCE_RE,
    INLINE_CODE_RE,
    LOOKAHEAD,
    LOOKBACK,
    ToolCall,
    TurnView,
    clean,
    make_record,
    same_session,
    sentences_of,
)
from memory_ext.text.sentences import is_question

__all__ = ["call_outcome", "failure_records", "json_error", "lesson_text", "prose_error", "slot_records"]


# ------------------------------------------------------------------------------------------ errors

_ERR_CLASS_RE: Final = re.compile(r"\b([A-Z][A-Za-z0-9]*(?:Error|Exception|Timeout|Fault))\b")
_TIMEOUT_RE: Final = re.compile(r"\btim(?:e[sd]?\s*-?\s*out|eout|ing\s+out)\b|\bdeadline\s+exceeded\b|超时",
                                re.IGNORECASE)
_HTTP_RE: Final = re.compile(
    r"\b(?:http(?:/\d(?:\.\d)?)?|status(?:[\s_]?code)?|code|error|response)[\s:=\"'#]*(?P<a>[45]\d\d)\b"
    r"|\b(?P<b>[45]\d\d)\s+(?:error|bad\s+request|unauthori[sz]ed|forbidden|not\s+found|too\s+many|internal"
    r"|service\s+unavailable|bad\s+gateway|gateway\s+timeout|conflict|unprocessable)",
    re.IGNORECASE,
)
_HTTP_NAMES: Final = {"400": "bad request", "401": "unauthorized", "403": "forbidden", "404": "not found",
                      "408": "timeout", "409": "conflict", "422": "invalid input", "429": "rate limit",
                      "500": "server error", "502": "bad gateway", "503": "service unavailable",
                      "504": "timeout"}
_ERR_WORDS_RE: Final = re.compile(
    r"(?P<trace>traceback \(most recent call last\))|(?P<failed>\bfail(?:ed|ure|s)?\b)|(?P<err>\berror\b)"
    r"|(?P<exc>\bexception\b)|(?P<exit>\bexit (?:code|status) [1-9]\d*)|(?P<conn>\bconnection (?:refused|reset|error))"
    r"|(?P<rate>\brate[\s-]?limit)|(?P<perm>\bpermission denied|\baccess denied|\bunauthori[sz]ed|\bforbidden)"
    r"|(?P<nf>\bnot found\b|\bno such file\b|command not found)|(?P<crash>\bcrash(?:ed|es)?\b)"
    r"|(?P<zh>失败|报错|出错|错误|异常|崩溃)",
    re.IGNORECASE,
)
_ERR_GROUP_NAMES: Final = {"trace": "exception", "failed": "failed", "err": "error", "exc": "exception",
                           "exit": "nonzero exit", "conn": "connection error", "rate": "rate limit",
                           "perm": "permission denied", "nf": "not found", "crash": "crash"}
_STRONG_PROSE_RE: Final = re.compile(
    r"traceback \(most recent call last\)|\b[A-Z][A-Za-z0-9]*(?:Error|Exception)\b|\berror\s*:"
    r"|\bexit (?:code|status) [1-9]"
    r"|\b(?:failed|fails|crashed|timed out|errored)\b|报错|失败|超时|出错|异常|崩溃",
)
_JSON_ERR_KEYS: Final = ("error", "errors", "exception", "error_message", "errorMessage", "fault")
_NO_ERROR_RE: Final = re.compile(r"\b(?:no|0|zero|without)\s+(?:errors?|failures?|exceptions?)\b"
                                 r"|没有(?:报错|错误|失败)")


@dataclass(slots=True)
class _Err:
    classes: list[str]
    gist: str


def _classes_of(text: str) -> list[str]:
    classes: list[str] = []
    if _TIMEOUT_RE.search(text):
        classes.append("timeout")
    for m in _HTTP_RE.finditer(text):
        code = m.group("a") or m.group("b")
        classes.append(f"http {code}")
        if code in _HTTP_NAMES:
            classes.append(_HTTP_NAMES[code])
        break
    for m in _ERR_CLASS_RE.finditer(text):
        classes.append(m.group(1))
        if len(classes) >= 4:
            break
    for m in _ERR_WORDS_RE.finditer(text):
        name = m.lastgroup or ""
        classes.append(m.group() if name == "zh" else _ERR_GROUP_NAMES.get(name, "error"))
        if len(classes) >= 6:
            break
    specific = [c for c in classes if c not in ("error", "failed", "exception")]
    generic = [c for c in classes if c in ("error", "failed", "exception")]
    return list(dict.fromkeys(specific + generic))[:5]


def _error_line(text: str) -> str:
    if "Traceback" in text:
        lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
        for ln in reversed(lines):
            if _ERR_CLASS_RE.search(ln) or ":" in ln:
                return clean(ln, 120)
    for ln in text.splitlines():
        if _STRONG_PROSE_RE.search(ln) or _TIMEOUT_RE.search(ln) or _HTTP_RE.search(ln) or _ERR_WORDS_RE.search(ln):
            cm = _ERR_CLASS_RE.search(ln)
            if cm:
                return clean(ln[cm.start():], 120)
            for s in sentences_of(ln):
                if _STRONG_PROSE_RE.search(s) or _TIMEOUT_RE.search(s) or _HTTP_RE.search(s) or _ERR_WORDS_RE.search(s):
                    return clean(s, 120)
            return clean(ln, 120)
    return clean(text, 120)


def json_error(content: str) -> tuple[bool, str | None]:
    """(is JSON, error message or None)."""
    s = content.strip()
    if not s or s[0] not in "{[" or len(s) > 50000:
        return False, None
    try:
        data = json.loads(s)
    except ValueError:
        return False, None
    if not isinstance(data, Mapping):
        return True, None
    for key in _JSON_ERR_KEYS:
        v = data.get(key)
        if v and v not in ("null", "none", "None"):
            if isinstance(v, Mapping):
                v = v.get("message") or v.get("type") or v.get("code") or json.dumps(v, default=str)
            elif isinstance(v, list):
                v = v[0] if v else ""
                if isinstance(v, Mapping):
                    v = v.get("message") or json.dumps(v, default=str)
            return True, clean(str(v), 120) or key
    status = data.get("status") or data.get("state")
    if isinstance(status, str) and status.lower() in ("error", "failed", "failure", "timeout", "timed_out"):
        msg = data.get("message") or data.get("detail") or status
        return True, clean(f"{status}: {msg}" if msg != status else status, 120)
    code = data.get("status_code") or data.get("statusCode") or data.get("code") or (
        status if isinstance(status, int) else None)
    if isinstance(code, int) and 400 <= code < 600:
        msg = data.get("message") or data.get("detail") or ""
        return True, clean(f"HTTP {code} {msg}", 120)
    if data.get("ok") is False or data.get("success") is False:
        msg = data.get("message") or data.get("detail") or data.get("reason") or "failed"
        return True, clean(f"failed: {msg}", 120)
    return True, None


def _result_error(content: str) -> _Err | None:
    """The error of a tool result, or None when it succeeded."""
    is_json, msg = json_error(content)
    if is_json:
        if msg is None:
            return None
        classes = _classes_of(msg) or ["error"]
        return _Err(classes, msg)
    if not content.strip() or (_NO_ERROR_RE.search(content)
                               and not _STRONG_PROSE_RE.search(_NO_ERROR_RE.sub("", content))):
        return None
    head = content[:2000]
    if not (_STRONG_PROSE_RE.search(head) or _TIMEOUT_RE.search(head) or _HTTP_RE.search(head)
            or re.match(r"\s*(?:error|exception|fatal)\b", head, re.IGNORECASE)):
        return None
    return _Err(_classes_of(head) or ["error"], _error_line(head))


def turn_error(t: TurnView) -> _Err | None:
    """The error of a tool-result turn: its text's, or — for a turn its face flagged as an error
    (:attr:`~memory_ext.ingest.turns.TurnView.is_error`) whose text reads like anything — its first line."""
    err = _result_error(t.content)
    if err is None and t.is_error:
        line = next((ln for ln in t.content.splitlines() if ln.strip()), "")
        return _Err(_classes_of(t.content[:2000]) or ["error"], clean(line, 120) or "error")
    return err


_TECH_RE: Final = re.compile(r"`|\$ |\b(?:pip|npm|git|docker|python|node|api|http|sql|server|build|deploy|install"
                             r"|compile|script|command|request|endpoint|query|database|tool|function|package)\b",
                             re.IGNORECASE)


def prose_error(t: TurnView, known_tools: Sequence[str]) -> _Err | None:
    """An error a user or assistant reports in prose, in a technical context only."""
    content = t.content
    if not content or len(content) > 20000:
        return None
    head = content[:4000]
    if not _STRONG_PROSE_RE.search(head) or (_NO_ERROR_RE.search(head) and not _ERR_CLASS_RE.search(head)):
        return None
    technical = ("Traceback" in head or _ERR_CLASS_RE.search(head) or _HTTP_RE.search(head)
                 or any(n in head for n in known_tools) or _TECH_RE.search(head))
    if not technical:
        return None
    return _Err(_classes_of(head) or ["error"], _error_line(head))


# ------------------------------------------------------------------------------------------ tool chains


def args_gist(args: Mapping[str, Any] | None, limit: int = 60) -> str:
    if not args:
        return ""
    parts = []
    for k, v in list(args.items())[:6]:
        if isinstance(v, (dict, list)):
            v = json.dumps(v, ensure_ascii=False, default=str)
        parts.append(f"{k}={v}")
    return clean(", ".join(parts), limit)


def _args_diff(old: Mapping[str, Any] | None, new: Mapping[str, Any] | None) -> str:
    if not new:
        return ""
    old = old or {}
    changed = {k: v for k, v in new.items() if k not in old or old[k] != v}
    return args_gist(changed, 80)


def _answering_result(turns: Sequence[TurnView | None], k: int, call: ToolCall) -> TurnView | None:
    """The tool-result turn answering ``call`` (made at turn ``k``), if it is in the sequence."""
    src = turns[k]
    for j in range(k + 1, min(len(turns), k + 6)):
        r = turns[j]
        if r is None or src is None or not same_session(r, src):
            continue
        if r.role != "tool":
            if r.calls or r.role == "user":
                break
            continue
        rid = r.metadata.get("tool_call_id") or r.metadata.get("call_id")
        rname = r.metadata.get("tool_name") or r.metadata.get("name") or r.metadata.get("tool") or r.speaker
        if call.call_id and rid:
            if str(rid) == call.call_id:
                return r
            continue
        if rname and rname != "tool" and rname != call.name and len(src.calls) > 1:
            continue
        return r
    return None


def call_outcome(turns: Sequence[TurnView | None], k: int, call: ToolCall) -> tuple[str, _Err | None, TurnView | None]:
    """("ok" | "error" | "unknown", error, result turn) of a call made at turn ``k``."""
    if call.error:
        return "error", _Err(_classes_of(call.error) or ["error"], clean(call.error, 120)), None
    if call.result is not None:
        text = call.result if isinstance(call.result, str) else json.dumps(call.result, default=str)
        err = _result_error(text)
        return ("error" if err else "ok"), err, None
    r = _answering_result(turns, k, call)
    if r is None:
        return "unknown", None, None
    err = turn_error(r)
    return ("error" if err else "ok"), err, r


def _tool_of_result(turns: Sequence[TurnView | None], i: int) -> tuple[str | None, ToolCall | None, TurnView | None]:
    """(tool name, the call, the calling turn) a tool-result turn answers."""
    r = turns[i]
    assert r is not None
    rid = r.metadata.get("tool_call_id") or r.metadata.get("call_id")
    rname = r.metadata.get("tool_name") or r.metadata.get("name") or r.metadata.get("tool")
    if not isinstance(rname, str) or not rname:
        rname = r.speaker if r.speaker and r.speaker.lower() not in ASSISTANT_NAMES else None
    for k in range(i - 1, max(-1, i - LOOKBACK), -1):
        c = turns[k]
        if c is None or not same_session(c, r):
            continue
        if c.calls:
            for call in c.calls:
                if rid and call.call_id == str(rid):
                    return call.name, call, c
            named = [call for call in c.calls if rname and call.name == rname]
            if named:
                return rname, named[0], c
            if not rid and not rname:
                return c.calls[-1].name, c.calls[-1], c
        if c.role == "user":
            break
    return rname, None, None


def known_tools(turns: Sequence[TurnView | None]) -> list[str]:
    names: dict[str, None] = {}
    for t in turns:
        if t is not None:
            for c in t.calls:
                names[c.name] = None
    return list(names)


# ------------------------------------------------------------------------------------------ failure patterns

FIX_CUE_RE: Final = re.compile(
    r"\b(?:fix(?:ed|es)?|solv(?:e|ed|es)|resolv(?:e|ed|es)|solution|workaround|instead|works\s+now|worked"
    r"|retry|retried|increas(?:e|ed|ing)|rais(?:e|ed|ing)\s+the|set\s+\w+|install(?:ed|ing)?|upgrad(?:e|ed|ing)"
    r"|downgrad(?:e|ed|ing)|switch(?:ed)?\s+to|use\s+\w+|add(?:ed)?\s+\w+|chang(?:e|ed)|run\s+`)"
    r"|解决|修复|改成|换成|改为|设置|安装|升级|重试|加上|就好了|可以了|正常了|改用",
    re.IGNORECASE,
)


def command_gist(content: str) -> str:
    for m in FENCE_RE.finditer(content):
        lines = [ln.strip().lstrip("$> ").strip() for ln in m.group(1).splitlines() if ln.strip()]
        lines = [ln for ln in lines if not ln.startswith("#")]
        if lines:
            return "`" + clean("; ".join(lines[:2]), 90) + "`"
    for m in INLINE_CODE_RE.finditer(content):
        code = m.group(1).strip()
        if " " in code or "=" in code or "-" in code:
            return f"`{clean(code, 90)}`"
    return ""


def _fix_text(t: TurnView) -> str:
    content = t.content
    if not content or len(content) > 20000:
        return ""
    prose = FENCE_RE.sub(" ", content) if "```" in content else content
    for raw in sentences_of(prose):
        s = raw.strip()
        if FIX_CUE_RE.search(s) and not is_question(s, loose=True) and not _STRONG_PROSE_RE.search(s):
            cmd = command_gist(content)
            gist = clean(s.rstrip("。.!！"), 100)
            return f"{gist} ({cmd})" if cmd and cmd.strip("`") not in gist else gist
    cmd = command_gist(content)
    return f"run {cmd}" if cmd else ""


RETRY_LOOKAHEAD: Final = 2 * LOOKAHEAD
"""How far (in turns of the session) a successful call of the failed tool still counts as its fix: agents look
things up (other tools, the user) before they retry."""


def _retried_gist(failed: ToolCall | None, call: ToolCall) -> str:
    """How a successful retry of the failed call reads: the arguments that changed."""
    diff = _args_diff(failed.args if failed else None, call.args)
    return f"retried {call.name} with {diff}" if diff else f"retried {call.name}"


def _later_turns(turns: Sequence[TurnView | None], i: int, lookahead: int) -> Iterator[tuple[int, TurnView]]:
    """The turns after turn ``i`` in its session, at most ``lookahead`` on, without tool results (a result is the
    same failure again, a new one, or the answer to a call seen before)."""
    src = turns[i]
    assert src is not None
    for k in range(i + 1, min(len(turns), i + lookahead + 1)):
        t = turns[k]
        if t is None:
            continue
        if not same_session(t, src):
            return
        if t.role != "tool":
            yield k, t


def _same_tool_success(turns: Sequence[TurnView | None], i: int, tool: str, failed: ToolCall | None
                       ) -> tuple[str, list[TurnView], int, ToolCall] | None:
    """The first successful call of ``tool`` after the error at turn ``i`` in its session, as a fix."""
    for k, t in _later_turns(turns, i, RETRY_LOOKAHEAD):
        for call in t.calls:
            if call.name != tool:
                continue
            status, _, result = call_outcome(turns, k, call)
            if status == "ok":
                return _retried_gist(failed, call), [t] + ([result] if result else []), k, call
    return None


def _find_fix(turns: Sequence[TurnView | None], i: int, tool: str | None, failed: ToolCall | None
              ) -> tuple[str, list[TurnView], int | None, ToolCall | None]:
    """(fix gist, the turns that show it, index of the turn that gives it, the successful call of the same tool
    when that is the fix) for an error at turn ``i``."""
    retried = _same_tool_success(turns, i, tool, failed) if tool else None
    if retried is not None:
        return retried
    for k, t in _later_turns(turns, i, LOOKAHEAD):
        if t.calls:
            for call in t.calls:
                status, _, result = call_outcome(turns, k, call)
                if status == "ok" and not (result is not None and not result.content.strip()):
                    same = bool(tool) and call.name == tool
                    if same:
                        gist = _retried_gist(failed, call)
                    else:
                        gist = f"used {call.name}" + (f"({args_gist(call.args)})" if call.args else "") + " instead"
                    return gist, [t] + ([result] if result else []), k, call if same else None
            continue
        if t.role == "user" and prose_error(t, [tool] if tool else []) is not None:
            continue
        gist = _fix_text(t)
        if gist:
            return gist, [t], k, None
    return "", [], None, None


@dataclass(slots=True)
class _Failure:
    index: int
    tool: str | None
    call: ToolCall | None
    call_turn: TurnView | None
    err: _Err


def _failures(turns: Sequence[TurnView | None], start: int, known: Sequence[str]) -> list[_Failure]:
    out: list[_Failure] = []
    call: ToolCall | None
    call_turn: TurnView | None
    for i in range(max(0, start), len(turns)):
        t = turns[i]
        if t is None:
            continue
        if t.role == "tool":
            err = turn_error(t)
            if err is None:
                continue
            tool, call, call_turn = _tool_of_result(turns, i)
            out.append(_Failure(i, tool, call, call_turn, err))
            continue
        embedded = [c for c in t.calls if c.error]
        if embedded:
            c = embedded[0]
            out.append(_Failure(i, c.name, c, t, _Err(_classes_of(c.error or "") or ["error"],
                                                       clean(c.error or "", 120))))
            continue
        if t.calls or t.role not in ("user", "assistant"):
            continue
        err = prose_error(t, known)
        if err is None:
            continue
        tool = next((n for n in known if n in t.content), None)
        call, call_turn = None, None
        # commentary on a failure already recorded (a tool result just before): not a second failure
        if any(f.index >= i - 3 and (tool is None or f.tool == tool) for f in out):
            continue
        if tool is None:
            for k in range(i - 1, max(-1, i - 4), -1):
                prev = turns[k]
                if prev is not None and prev.calls and same_session(prev, t):
                    tool, call, call_turn = prev.calls[-1].name, prev.calls[-1], prev
                    break
        if tool is None:
            cmd = command_gist(t.content)
            tool = cmd or None
        out.append(_Failure(i, tool, call, call_turn, err))
    return out


def _value(v: Any) -> str:
    """An argument value as the lesson quotes it: strings in single quotes, the rest as JSON."""
    if isinstance(v, str):
        return "'" + clean(v, 40) + "'"
    return clean(json.dumps(v, ensure_ascii=False, default=str), 40)


def lesson_text(tool: str, error: str, failed: Mapping[str, Any] | None, succeeded: Mapping[str, Any] | None
                ) -> str:
    """The lesson of a failed call followed by a successful call of the same tool, from the structured calls:
    the error and the failed values of the arguments that changed, then the values that worked.

    >>> lesson_text("book_hotel", "HTTP 422 invalid date", {"city": "Lisbon", "check_in": "14/04/2026"},
    ...             {"city": "Lisbon", "check_in": "2026-04-14"})
    "book_hotel failed: HTTP 422 invalid date (check_in '14/04/2026'); succeeded with check_in '2026-04-14'"
    >>> lesson_text("search", "timeout", {"q": "tokyo"}, {"q": "tokyo"})
    'search failed: timeout; succeeded on retry with the same arguments'
    """
    failed, succeeded = dict(failed or {}), dict(succeeded or {})
    changed = [k for k in succeeded if k not in failed or failed[k] != succeeded[k]]
    dropped = [k for k in failed if k not in succeeded]
    before = [f"{k} {_value(failed[k])}" for k in changed if k in failed][:4]
    before += [f"{k} {_value(failed[k])}" for k in dropped][:2]
    after = [f"{k} {_value(succeeded[k])}" for k in changed][:4] + [f"without {k}" for k in dropped][:2]
    error = clean(error, 110)
    head = f"{tool} failed: {error}" + (f" ({', '.join(before)})" if before else "")
    tail = f"succeeded with {', '.join(after)}" if after else "succeeded on retry with the same arguments"
    return clean(head, 170) + "; " + clean(tail, 120)


def failure_records(turns: Sequence[TurnView | None], first: int) -> list[DerivedRecord]:
    known = known_tools(turns)
    out = []
    for f in _failures(turns, first - LOOKAHEAD, known):
        src = turns[f.index]
        assert src is not None
        fix, fix_turns, fix_at, fixed = _find_fix(turns, f.index, f.tool, f.call)
        if fixed is not None and fix_at is not None and fix_at >= first:
            # a lesson is anchored to the call that worked (its role marks it: rank/zscore.py), the error next
            fixer = turns[fix_at]
            assert fixer is not None
            source, context = fixer, [src]
        elif f.index >= first:
            source, context = src, [src]
        elif fix_at is not None and fix_at >= first:  # the fix arrived in this batch, the error before it
            fixer = turns[fix_at]
            assert fixer is not None
            source, context = fixer, [src]
        else:
            continue
        tool = f.tool or "action"
        classes = f.err.classes
        specific = [c for c in classes if c not in ("error", "failed", "exception")]
        err = ", ".join((specific or classes)[:2])
        gist = f.err.gist
        if f.tool and gist.startswith(f.tool):  # "flight_search failed: timeout ..." -> "timeout ..."
            gist = clean(re.sub(r"^[\s:,-]*(?:failed|error|raised)?[\s:,-]*", "", gist[len(f.tool):]), 120) or gist
        lesson = lesson_text(tool, gist or err, f.call.args if f.call else None, fixed.args) \
            if fixed is not None and f.tool else None
        if lesson is not None:
            text = lesson
        else:
            text = f"{tool} failed with {err}" + (f" ({gist})" if gist and gist.lower() != err.lower() else "")
            text = clean(text, 170)
            if fix:
                text += f"; fix: {clean(fix, 110)}"
        ctx = context + ([f.call_turn] if f.call_turn is not None else []) + fix_turns
        tools = [tool] + [c.name for t in fix_turns for c in t.calls if c.name != tool]
        if lesson is not None:  # the lesson's text has the arguments that matter: their names key it
            worked = (fixed.args if fixed is not None else None) or {}
            before = (f.call.args if f.call is not None else None) or {}
            changed = [k for k in worked if before.get(k) != worked[k]]
            args = f" lesson fix succeeded {' '.join(changed)}"
        else:
            args = f" args: {args_gist(f.call.args)}" if f.call and f.call.args else ""
        index = (f"{text} | tool {' '.join(tools)} failure error failed {' '.join(classes)}{args}"
                 f" | {clean(src.content, 200)}")
        tags = ["failure", *(n.strip("`") for n in tools), *classes]
        out.append(make_record("failure_pattern", source, text, index, ctx, tags, tools + [
            c for c in classes if _ERR_CLASS_RE.fullmatch(c)]))
    return out



# ------------------------------------------------------------------------------------------ slot values

SLOT_VALUE_MIN_CHARS: Final = 3
"""A call argument shorter than this (``2``, ``"no"``) is not looked for in the user's words."""


def _slot_value(v: Any) -> str | None:
    if isinstance(v, bool) or v is None:
        return None
    if isinstance(v, (int, float)):
        v = str(v)
    if not isinstance(v, str):
        return None
    v = v.strip()
    return v if SLOT_VALUE_MIN_CHARS <= len(v) <= 80 else None


def slot_records(turns: Sequence[TurnView | None], first: int) -> list[DerivedRecord]:
    """A ``fact`` record per tool-call argument whose value a user turn gave literally, so the value is found by
    the parameter's name: ``book_hotel(check_in="2026-04-14")`` after "check in on 2026-04-14, please" ->
    ``"check_in: '2026-04-14' (given for book_hotel)"``, anchored to the user turn (to the call when that turn
    was stored before this batch). Calls of the turns ``turns[first:]`` only; one record per parameter and
    value in a session.

    >>> from memory_ext.ingest.turns import view_turn
    >>> ts = [view_turn({"id": "u", "role": "user", "content": "Check in on 2026-04-14 please"}, 0),
    ...       view_turn({"id": "a", "role": "assistant", "content": "", "tool_calls": [
    ...           {"name": "book_hotel", "arguments": {"check_in": "2026-04-14", "nights": 2}}]}, 1)]
    >>> [(r.text, r.turn_ids) for r in slot_records(ts, 0)]
    [("check_in: '2026-04-14' (given for book_hotel)", ['u', 'a'])]
    """
    out: list[DerivedRecord] = []
    seen: set[tuple[Any, str, str]] = set()
    for i in range(max(0, first), len(turns)):
        t = turns[i]
        if t is None or not t.calls or t.role == "tool":
            continue
        for call in t.calls:
            for param, raw in (call.args or {}).items():
                value = _slot_value(raw)
                if value is None or (t.session, param, value.casefold()) in seen:
                    continue
                pattern = re.compile(r"(?<![\w])" + re.escape(value) + r"(?![\w])", re.IGNORECASE)
                for k in range(i - 1, max(-1, i - LOOKBACK - 1), -1):
                    u = turns[k]
                    if u is None or not same_session(u, t):
                        continue
                    if u.role != "user" or not pattern.search(u.content):
                        continue
                    seen.add((t.session, param, value.casefold()))
                    label = param.replace("_", " ")
                    text = f"{param}: {_value(raw)} (given for {call.name})"
                    index = (f"{text} | parameter {param} {label} value {value} {call.name} slot argument"
                             f" | {clean(u.content, 200)}")
                    source, context = (u, [t]) if k >= first else (t, [u])
                    out.append(make_record("fact", source, text, index, context, ["slot", param, call.name],
                                           [call.name]))
                    break
    return out
