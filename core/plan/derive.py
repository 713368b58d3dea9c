"""What an agent is doing, derived from its recent turns and its tools: the :class:`~memory_ext.models.ActionState`
a search follows (the one derivation every face calls; none re-implements it).

From a conversation's recent turns (oldest first) and, when given, the tools' JSON-schema specs:

* ``current_subgoal``: the latest user request;
* ``last_tool_name``, ``last_tool_args``, ``last_tool_result``: the last tool call and the result answering it
  (matched by call id, else by tool name, else by position); of a turn that called several tools, the first
  that failed, else the last;
* ``failure_signal``: that result's error line when the result is flagged as an error (:attr:`Turn.is_error`,
  set by the faces from LangChain's ``ToolMessage.status``, LlamaIndex's ``is_error``, MCP's ``isError``) or reads
  as one: an HTTP 4xx/5xx, a traceback, an exception class, a JSON ``{"error": …}`` / ``{"status": "error"}`` /
  ``{"success": false}``, or error words in English, Chinese, Japanese, Korean, Russian, German, French, Spanish,
  Italian or Portuguese (:func:`error_signal`); None once a later call of that turn succeeded;
* ``missing_slots``: the required parameters (per the tool's schema) of the tool being called or just attempted
  that its call left out or empty, and those its error result names as missing; for a request no call answers
  yet (the first, or one after earlier calls), those of the tools it is about to call that the conversation has
  not given a value for (:mod:`memory_ext.plan.slots`: the tools ranked by the request's words, a value read
  after a word naming its parameter); ``slot_hints``: what each one's value is (its description, enum values and
  type);
* ``tentative_action``: a call still waiting for its result — never the name of a tool not called yet;
* ``available_tools``: the tools' names; ``recent_context``: the last turns as readable lines;
* ``recent_calls``: every call of the turns (name and arguments), oldest first, at most :data:`RECENT_CALLS`.

>>> from memory_ext import Turn
>>> turns = [
...     Turn(role="user", content="Book me a room in Lisbon from April 14 to 16"),
...     Turn(role="assistant", content="", tool_calls=({"id": "c1", "name": "book_hotel",
...          "args": {"city": "Lisbon", "check_in": "14/04/2026"}},)),
...     Turn(role="tool", content="HTTP 422 Unprocessable Entity: check_in", tool_name="book_hotel",
...          tool_call_id="c1", is_error=True),
... ]
>>> tools = [{"name": "book_hotel", "description": "Book a hotel room", "parameters": {"type": "object",
...           "properties": {"city": {"type": "string"}, "check_in": {"type": "string"},
...                          "check_out": {"type": "string"}}, "required": ["city", "check_in", "check_out"]}}]
>>> state = derive_action_state(turns, tools)
>>> state.current_subgoal, state.last_tool_name, state.last_tool_args["check_in"]
('Book me a room in Lisbon from April 14 to 16', 'book_hotel', '14/04/2026')
>>> state.failure_signal, state.missing_slots, state.available_tools
('HTTP 422 Unprocessable Entity: check_in', ('check_out',), ('book_hotel',))
>>> derive_action_state(turns[:1], tools).last_tool_name is None    # nothing called yet: no tool invented
True
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from ..errors import InvalidArgumentError
from ..ingest.calls import turn_line
from ..ingest.failures import _result_error
from ..ingest.turns import ToolCall, TurnView, clean, view_turn
from ..models import ActionState, Turn
from .slots import ParamSpec, missing_params, param_specs, slot_hint

__all__ = ["RECENT_CALLS", "RECENT_TURNS", "ToolSpec", "derive_action_state", "error_signal", "tool_specs",
           "turns_from_messages"]

SUBGOAL_MAX_CHARS: Final = 500
"""The subgoal (the latest user request) is cut at this many characters."""
RESULT_MAX_CHARS: Final = 500
"""The last tool result is cut at this many characters."""
FAILURE_MAX_CHARS: Final = 200
"""The failure signal (the error line of the result) is cut at this many characters."""
RECENT_TURNS: Final = 6
"""How many of the last turns ``recent_context`` shows."""
RECENT_CALLS: Final = 12
"""``recent_calls`` keeps at most this many calls (the latest)."""
RECENT_MAX_CHARS: Final = 1200
"""``recent_context`` keeps at most this many characters (its end: the latest turns)."""

_MORE_ERROR_WORDS_RE: Final = re.compile(
    r"エラー|失敗|例外|오류|실패|에러|예외|ошибк|не удалось|исключени|\bfehler|fehlgeschlagen|\berreur|\béchec"
    r"|\bhas fallado|\bfall[óo]\b|\bfallid[oa]|\berrore\b|\bfallit[oa]\b|\berro\b|\bfalhou\b|錯誤|失敗",
    re.IGNORECASE)
_MISSING_CUE_RE: Final = re.compile(
    r"missing|required|not (?:provided|given|specified|supplied)|must (?:be )?(?:provide|specif|give|suppl)"
    r"|缺少|缺失|必填|必须提供|未提供|필수|必須|обязательн|fehlt|manquant|requis|falta", re.IGNORECASE)

@dataclass(frozen=True, slots=True)
class ToolSpec:
    """A tool as the derivation reads its JSON-schema spec: name, description, parameters and required ones;
    ``params`` each parameter's description, type and enum values (:class:`~memory_ext.plan.slots.ParamSpec`)."""

    name: str
    description: str = ""
    parameters: tuple[str, ...] = ()
    required: tuple[str, ...] = ()
    params: tuple[ParamSpec, ...] = field(default=(), repr=False, compare=False)


def tool_specs(tools: Sequence[Mapping[str, Any]] | None) -> list[ToolSpec]:
    """The specs of ``tools``: OpenAI / LangChain ``{"name", "description", "parameters": {"properties",
    "required"}}``, the same wrapped as ``{"type": "function", "function": {…}}``, Anthropic's ``input_schema``
    or MCP's ``inputSchema``. A spec without a name is an :class:`~memory_ext.errors.InvalidArgumentError`.

    >>> tool_specs([{"type": "function", "function": {"name": "get_weather", "parameters": {
    ...     "properties": {"city": {}, "unit": {}}, "required": ["city"]}}}])
    [ToolSpec(name='get_weather', description='', parameters=('city', 'unit'), required=('city',))]
    """
    if tools is None:
        return []
    if isinstance(tools, (str, bytes, Mapping)) or not isinstance(tools, Sequence):
        raise InvalidArgumentError("tools", tools, "pass a list of tool specs (mappings with a name and parameters)")
    out = []
    for i, raw in enumerate(tools):
        spec = raw.get("function") if isinstance(raw, Mapping) and isinstance(raw.get("function"), Mapping) else raw
        if not isinstance(spec, Mapping) or not isinstance(spec.get("name"), str) or not spec["name"].strip():
            raise InvalidArgumentError(f"tools[{i}]", raw, 'each tool is a mapping with a "name" (and "parameters" '
                                                           'as a JSON schema), or {"type": "function", "function": '
                                                           "{...}}")
        schema: Mapping[str, Any] = next((spec[k] for k in ("parameters", "input_schema", "inputSchema", "args_schema")
                       if isinstance(spec.get(k), Mapping)), {})
        props = schema.get("properties")
        required = schema.get("required")
        out.append(ToolSpec(
            name=spec["name"].strip(), description=str(spec.get("description") or ""),
            parameters=tuple(str(p) for p in props) if isinstance(props, Mapping) else (),
            required=tuple(str(r) for r in required) if isinstance(required, (list, tuple)) else (),
            params=param_specs(schema)))
    return out


def error_signal(text: str) -> str | None:
    """The error line of a tool result that reads as an error, else None (a success, or no text).

    >>> error_signal('{"error": {"message": "check_in must be YYYY-MM-DD"}}')
    'check_in must be YYYY-MM-DD'
    >>> error_signal("预订失败：入住日期格式错误")
    '预订失败：入住日期格式错误'
    >>> error_signal("Fehler: Datum ungültig"), error_signal('{"booking_id": "H-1", "status": "confirmed"}')
    ('Fehler: Datum ungültig', None)
    """
    if not text or not text.strip():
        return None
    found = _result_error(text)
    if found is not None:
        return clean(found.gist, FAILURE_MAX_CHARS) or "error"
    head = text.strip()[:2000]
    if head[:1] in "{[":
        return None  # JSON that _result_error read as a success
    match = _MORE_ERROR_WORDS_RE.search(head)
    if match is None:
        return None
    line = next(ln for ln in head.splitlines() if _MORE_ERROR_WORDS_RE.search(ln))
    return clean(line, FAILURE_MAX_CHARS)


_ROLES: Final = {"user": "user", "human": "user", "assistant": "assistant", "ai": "assistant", "model": "assistant",
                  "system": "system", "developer": "system", "tool": "tool", "function": "tool", "ipython": "tool"}
_ERROR_STATUS: Final = frozenset({"error", "failed", "failure"})


def _text_of(content: Any) -> str:
    """The text of a message's content: a string, or a list of parts (``{"type": "text", "text": …}``)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, (list, tuple)):
        parts = [p if isinstance(p, str) else str(p.get("text") or "") if isinstance(p, Mapping) else ""
                 for p in content]
        return "\n".join(p for p in parts if p)
    return json.dumps(content, ensure_ascii=False, default=str)


def turns_from_messages(messages: Sequence[Mapping[str, Any]], session_id: str | None = None) -> list[Turn]:
    """Chat messages as plain mappings — the OpenAI chat format (``role``, ``content`` as text or parts,
    ``name``, ``tool_calls``, ``tool_call_id``), as τ-bench and most agent logs keep them — as turns. A tool
    message is an error when it says so: ``is_error`` / ``isError`` (MCP) true, or ``status`` ``"error"``
    (LangChain). The frameworks' own message objects have their converters in the faces.

    >>> turns = turns_from_messages([
    ...     {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function", "function": {
    ...         "name": "book_hotel", "arguments": '{"check_in": "14/04/2026"}'}}]},
    ...     {"role": "tool", "tool_call_id": "c1", "name": "book_hotel", "content": "HTTP 422", "isError": True}])
    >>> turns[1].tool_name, turns[1].tool_call_id, turns[1].is_error
    ('book_hotel', 'c1', True)
    """
    out = []
    for i, m in enumerate(messages):
        if not isinstance(m, Mapping):
            raise InvalidArgumentError(f"messages[{i}]", m, "each message is a mapping with a role and a content")
        role = _ROLES.get(str(m.get("role") or "").strip().lower())
        if role is None:
            raise InvalidArgumentError(f"messages[{i}].role", m.get("role"),
                                       "valid roles: " + ", ".join(sorted(_ROLES)))
        calls = tuple(dict(c) for c in m.get("tool_calls") or () if isinstance(c, Mapping))
        text = _text_of(m.get("content"))
        name = m.get("name") if isinstance(m.get("name"), str) and m["name"].strip() else None
        call_id = m.get("tool_call_id")
        status = m.get("status")
        error = bool(m.get("is_error") or m.get("isError")) or (
            isinstance(status, str) and status.lower() in _ERROR_STATUS)
        tool = role == "tool"
        if not text.strip() and not calls:
            if not tool:
                continue  # an empty message: nothing to derive from
            text = "(no output)"
        out.append(Turn.coerce({
            "role": role, "content": text, "speaker": None if tool else name, "session_id": session_id,
            "external_id": m.get("id") if isinstance(m.get("id"), str) and m["id"] else None, "tool_calls": calls,
            "tool_name": name if tool else None,
            "tool_call_id": str(call_id) if tool and call_id else None, "is_error": tool and error}, i))
    return out


def _view(turn: Turn, index: int) -> TurnView:
    view = view_turn({"id": turn.id or f"turn-{index}", "role": turn.role.value, "speaker": turn.speaker,
                      "content": turn.content, "session_id": turn.session_id, "tool_calls": list(turn.tool_calls),
                      "metadata": turn.stored_metadata()}, index)
    assert view is not None  # a Turn always has an id here, a role and a content
    return view


def _calls_of(turn: Turn, view: TurnView) -> list[ToolCall]:
    """The calls a turn makes (a tool turn makes none: its ``tool_calls``, if any, name the call it answers)."""
    return [] if turn.role.value == "tool" else view.calls


def _tool_of(turn: Turn, view: TurnView) -> str | None:
    """The tool a tool turn answers: its ``tool_name``, else the call its ``tool_calls`` names."""
    return turn.tool_name or (view.calls[0].name if view.calls else None)


def _results(views: Sequence[TurnView], turns: Sequence[Turn], k: int) -> dict[int, int]:
    """Call index (in ``views[k].calls``) -> index of the tool turn answering it: by call id, else by tool name,
    else in order; among the tool turns right after turn ``k`` (until a user turn or another calling turn)."""
    calls = views[k].calls
    answers: dict[int, int] = {}
    for j in range(k + 1, len(turns)):
        t = turns[j]
        if t.role.value == "user" or _calls_of(t, views[j]):
            break
        if t.role.value != "tool":
            continue
        free = [c for c in range(len(calls)) if c not in answers]
        name = _tool_of(t, views[j])
        hit = next((c for c in free if t.tool_call_id and calls[c].call_id == t.tool_call_id), None)
        if hit is None and t.tool_call_id and any(calls[c].call_id for c in free):
            continue  # answers a call not in this turn
        if hit is None:
            hit = next((c for c in free if name and calls[c].name == name), None)
        if hit is None and free and not name:
            hit = free[0]
        if hit is not None:
            answers[hit] = j
    return answers


def _failure(call: ToolCall, result: Turn | None) -> str | None:
    if call.error:
        return clean(call.error, FAILURE_MAX_CHARS) or "error"
    if result is None:
        if call.result is None:
            return None
        text = call.result if isinstance(call.result, str) else json.dumps(call.result, default=str)
        return error_signal(text)
    return _result_failure(result)


def _result_failure(result: Turn) -> str | None:
    """The failure signal of a tool turn: its error line; a turn flagged as an error has one in any case."""
    signal = error_signal(result.content)
    if result.is_error:
        return signal or clean(result.content, FAILURE_MAX_CHARS) or "error"
    return signal


def _empty(value: Any) -> bool:
    return value is None or (isinstance(value, str) and not value.strip()) or value in ([], {})


def _missing_of_call(spec: ToolSpec | None, call: ToolCall, failure: str | None) -> list[str]:
    args = call.args or {}
    missing = [p for p in spec.required if _empty(args.get(p))] if spec is not None else []
    if failure and _MISSING_CUE_RE.search(failure):
        names = spec.parameters if spec is not None else ()
        missing += [p for p in names if p not in missing and re.search(
            rf"(?<![A-Za-z0-9_]){re.escape(p)}(?![A-Za-z0-9_])", failure)]
    return missing


def _request_missing(items: Sequence[Turn], views: Sequence[TurnView], last_user: int,
                     specs: Sequence[ToolSpec]) -> list[ParamSpec]:
    """The missing slots of the request in turn ``last_user`` (no call answers it yet): the unsupplied required
    parameters of the tools it is about to call (:func:`memory_ext.plan.slots.missing_params`). What the user said
    in any turn counts as given, and so does a parameter an earlier call passed."""
    said = "\n".join(t.content for t in items[:last_user + 1] if t.role.value == "user")
    passed = {k for t, v in zip(items, views, strict=True) for c in _calls_of(t, v)
              for k, val in (c.args or {}).items() if not _empty(val)}
    return missing_params(items[last_user].content, specs, said=said, passed=passed)


def _hints(params: Sequence[ParamSpec]) -> dict[str, str] | None:
    """Slot -> what its value is (:func:`memory_ext.plan.slots.slot_hint`), for the slots that have a hint."""
    hints = {p.name: h for p in params if (h := slot_hint(p))}
    return hints or None


def _recent(turns: Sequence[Turn]) -> str | None:
    lines = [turn_line(t.role.value, t.speaker, t.content, t.tool_calls, t.stored_metadata())
             for t in turns[-RECENT_TURNS:]]
    text = "\n".join(clean(ln, RESULT_MAX_CHARS) for ln in lines)
    return text[-RECENT_MAX_CHARS:] or None


def derive_action_state(turns: Sequence[Turn | Mapping[str, Any]],
                        tools: Sequence[Mapping[str, Any]] | None = None, *,
                        token_budget: int | None = None) -> ActionState:
    """The :class:`~memory_ext.models.ActionState` of a conversation's recent ``turns`` (oldest first: the
    messages an agent sends its model, converted by its face) and, when given, its ``tools`` (JSON-schema specs,
    :func:`tool_specs`); ``token_budget`` is passed through. See the module docstring for what each field is.

    Pass the result to ``engine.search(query, action_state=state)``. Bad input is an
    :class:`~memory_ext.errors.InvalidTurnError` naming the turn, or an
    :class:`~memory_ext.errors.InvalidArgumentError` naming the tool.
    """
    items = [Turn.coerce(t, i) for i, t in enumerate(turns)]  # type: ignore[arg-type]
    if token_budget is not None and (isinstance(token_budget, bool) or not isinstance(token_budget, int)
                                     or token_budget <= 0):
        raise InvalidArgumentError("token_budget", token_budget, "give a positive number of tokens, or None")
    specs = tool_specs(tools)
    by_name = {s.name: s for s in specs}
    views = [_view(t, i) for i, t in enumerate(items)]
    last_user = next((i for i in range(len(items) - 1, -1, -1)
                      if items[i].role.value == "user" and items[i].content.strip()), None)
    subgoal = clean(items[last_user].content, SUBGOAL_MAX_CHARS) if last_user is not None else None
    fields: dict[str, Any] = {"current_subgoal": subgoal or None, "available_tools": tuple(s.name for s in specs),
                              "token_budget": token_budget, "recent_context": _recent(items)}
    fields["recent_calls"] = tuple({"name": c.name, "args": dict(c.args or {})}
                                   for i in range(len(items)) for c in _calls_of(items[i], views[i]))[-RECENT_CALLS:]
    k = next((i for i in range(len(items) - 1, -1, -1) if _calls_of(items[i], views[i])), None)
    if k is not None:
        calls = views[k].calls
        answers = _results(views, items, k)
        outcomes = [(c, items[answers[c]] if c in answers else None) for c in range(len(calls))]
        failures = [_failure(calls[c], result) for c, result in outcomes]
        pick = next((c for c, f in enumerate(failures) if f), len(calls) - 1)
        call, result = calls[pick], outcomes[pick][1]
        failure = failures[pick]
        pending = [c.name for c, (_, r) in zip(calls, outcomes, strict=True)
                   if r is None and c.result is None and not c.error]
        fields.update(
            last_tool_name=call.name, last_tool_args=dict(call.args or {}), failure_signal=failure,
            last_tool_result=clean(result.content, RESULT_MAX_CHARS) or None if result is not None else None,
            tentative_action=pending[-1] if pending and k == len(items) - 1 else None,
            missing_slots=tuple(_missing_of_call(by_name.get(call.name), call, failure)))
        spec = by_name.get(call.name)
        if spec is not None:
            fields["slot_hints"] = _hints([p for p in spec.params if p.name in fields["missing_slots"]])
    else:
        j = next((i for i in range(len(items) - 1, -1, -1) if items[i].role.value == "tool"), None)
        if j is not None:  # its call is out of the window: the tool turn still says what ran
            tool_turn = items[j]
            fields.update(last_tool_name=_tool_of(tool_turn, views[j]), failure_signal=_result_failure(tool_turn),
                          last_tool_result=clean(tool_turn.content, RESULT_MAX_CHARS) or None)
    if specs and last_user is not None and (k is None or last_user > k) and not fields.get("missing_slots"):
        # a request no call answers yet: the slots of the call it asks for
        params = _request_missing(items, views, last_user, specs)
        fields.update(missing_slots=tuple(p.name for p in params), slot_hints=_hints(params))
    return ActionState(**fields)
