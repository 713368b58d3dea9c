"""Manuals as procedures: a document that tells an agent how to use a tool becomes a ``procedure`` record.

An agent's manuals (policy pages, runbooks, API notes) enter memory as turns — usually ``system`` turns, one per
document. A turn that *documents a tool* — it names a code identifier in a tool context (``Tool: x``, ``use x to``,
``call x``, a signature ``x(a: str, b: int)``, "arguments for x") — gets a derived ``procedure`` record that says
which tools the document explains and with which parameters, under the document's first line (its title):

    how to Submitting a Cash Back Dispute (Internal): submit_cash_back_dispute(user_id, transaction_id)

The record lifts its document when an action route asks for procedures (:mod:`memory_ext.plan.procedures`):
while an agent is in the middle of a task, the documents that explain a tool are what it needs next, and the
parameters it is working with (``user_id``, ``transaction_id``) find the ones that take them. Prose without a
tool gives nothing; parameters (the identifiers a signature or an argument list names) are never taken for
tools.

>>> doc = ("Submitting a Cash Back Dispute\\n\\nInstruct the customer to use the tool directly:\\n"
...        "- Tool to provide to the user: `submit_cash_back_dispute(user_id: str, transaction_id: str)`\\n"
...        "- Tell the customer to run the tool with their own user_id.")
>>> documented_tools(doc)
(('submit_cash_back_dispute',), ('user_id', 'transaction_id'))
>>> documented_tools("Our branches open at 9am. Use the mobile app to check your balance.")
((), ())
"""

from __future__ import annotations

import re
from typing import Final

from memory_ext.ingest.derive import DerivedRecord
from memory_ext.ingest.turns import TurnView, clean, make_record

__all__ = ["MANUAL_MIN_CHARS", "MAX_TOOLS", "documented_tools", "manual_record"]

MANUAL_MIN_CHARS: Final = 120
"""A turn shorter than this is a message, not a manual."""
MAX_TOOLS: Final = 6
"""At most this many tools (and, per document, 4x as many parameters) go into a manual's record."""

_IDENT: Final = r"[A-Za-z][A-Za-z0-9]*(?:_[A-Za-z0-9]+)+"
"""A code identifier: snake_case with at least one underscore (``get_user``, ``log_verification``)."""
_SIGNATURE_RE: Final = re.compile(rf"(?<![\w.])({_IDENT})\(([^()\n]{{0,400}})\)")
_CUE_RE: Final = re.compile(
    rf"\b(?:tools?|functions?|call(?:ing)?|use|using|run|invoke|arguments\s+(?:for|of)|parameters\s+(?:for|of))"
    rf"\b[\s:*`'\"]{{0,6}}(?:the\s+)?(?:tool\s+)?[*`'\"]*({_IDENT})\b(?![\s*`'\"]*\()", re.IGNORECASE)
_PARAM_LINE_RE: Final = re.compile(
    rf"^\s*(?:[-*•]|\d{{1,2}}[.)])\s+[*`'\"]*({_IDENT}|[a-z]+)[*`'\"]*(?:\s+\(|\s*:\s*(?:str|int|float|bool|string"
    rf"|integer|number|boolean|list|array|dict|object)\b)", re.IGNORECASE | re.MULTILINE)
_IDENT_RE: Final = re.compile(rf"(?<![\w.]){_IDENT}(?![\w(])")
_ARG_NAME_RE: Final = re.compile(r"(?:^|,)\s*\**([A-Za-z_][A-Za-z0-9_]*)\s*(?::|=|,|$)")


def documented_tools(text: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """``(tools, parameters)`` a text documents: identifiers named as tools (in a signature or after a tool cue
    word) and the parameter names its signatures and argument lists give; ``((), ())`` for prose."""
    params: dict[str, None] = {}
    tools: dict[str, None] = {}
    for m in _SIGNATURE_RE.finditer(text):
        tools[m.group(1)] = None
        for a in _ARG_NAME_RE.finditer(m.group(2)):
            params[a.group(1)] = None
    for m in _PARAM_LINE_RE.finditer(text):
        params[m.group(1)] = None
    for m in _CUE_RE.finditer(text):
        tools.setdefault(m.group(1), None)
    named = [t for t in tools if t not in params]
    if not named:
        return (), ()
    for m in _IDENT_RE.finditer(text):  # the other identifiers a manual names are its fields and values
        params.setdefault(m.group(0), None)
    return tuple(named), tuple(p for p in params if p not in tools)


def manual_record(turn: TurnView) -> DerivedRecord | None:
    """The ``procedure`` record of a turn that documents a tool (see the module docstring), else None."""
    if turn.calls or len(turn.content) < MANUAL_MIN_CHARS:
        return None
    tools, params = documented_tools(turn.content)
    if not tools:
        return None
    tools, params = tools[:MAX_TOOLS], params[:4 * MAX_TOOLS]
    title = clean(next((ln.strip(" #*") for ln in turn.content.splitlines() if ln.strip(" #*")), ""), 100)
    text = f"how to {title}: " + "; ".join(f"{t}({', '.join(params)})" if i == 0 else t
                                           for i, t in enumerate(tools))
    words = " ".join(re.sub(r"_", " ", n) for n in (*tools, *params))
    index = f"{text} | procedure tool manual {title} {' '.join(tools)} {' '.join(params)} {words}"
    return make_record("procedure", turn, clean(text, 300), index, [], ["procedure", "manual", *tools],
                       list(tools))

