"""LLMs: the small protocol memory-ext calls, the one JSON call (:func:`ask_json`), a deadline helper, and a
scripted fake for tests and demos.

The engine never needs an LLM. Optional parts that can use one (the LLM planner, the LLM summariser, the LLM
reranker, eviction relevance) call it through :class:`LLM`: one method that takes a prompt and returns text,
and all of them through :func:`ask_json` (a deadline, JSON repair, one retry with the error fed back). Adapters
wrap framework models —
``langchain_memory_ext.LangChainLLM`` and ``llamaindex_memory_ext.LlamaIndexLLM`` — and :class:`ScriptedLLM`
answers from a script, for tests and offline demos.

>>> from memory_ext.llm import Delay, ScriptedLLM
>>> llm = ScriptedLLM(['{"answer": 42}', {"answer": 43}, ValueError("provider down")])
>>> llm.complete("first?")
'{"answer": 42}'
>>> llm.complete("second?")
'{"answer": 43}'
>>> llm.complete("third?")
Traceback (most recent call last):
    ...
ValueError: provider down
>>> [call.prompt for call in llm.calls]
['first?', 'second?', 'third?']
>>> ScriptedLLM([Delay(5.0, then="late")]).complete("slow?", timeout=0.01)
Traceback (most recent call last):
    ...
TimeoutError: scripted LLM 'scripted': no answer within 0.01 s
"""

from __future__ import annotations

import ast
import asyncio
import json
import re
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar, runtime_checkable

__all__ = ["LLM", "Delay", "InvalidAnswer", "LLMCall", "ScriptedLLM", "acomplete", "ask_json", "call_with_timeout",
           "parse_json", "parse_json_object"]

T = TypeVar("T")


@runtime_checkable
class LLM(Protocol):
    """What memory-ext needs of a language model: text in, text out.

    ``id`` names the model (it appears in ``SearchPlan.planner`` and in error messages).

    ``complete(prompt, system=..., json_schema=..., timeout=...)`` returns the model's answer as a string:

    - ``system`` — an optional system instruction;
    - ``json_schema`` — when given, the caller wants one JSON value of that shape. Callers always state the
      shape in the prompt as well, so an implementation may ignore it or hand it to its provider's JSON mode;
      callers validate the answer either way;
    - ``timeout`` — seconds the caller will wait. An implementation passes it to its client or enforces it
      (:func:`call_with_timeout`) and raises :class:`TimeoutError` when it passes.

    Failures are exceptions (any type); callers treat every exception as a failed call.

    An implementation may also define ``async def acomplete(...)`` with the same arguments; :func:`acomplete`
    uses it when present and otherwise runs ``complete`` in a worker thread, so an event loop is never blocked.
    """

    id: str

    def complete(self, prompt: str, *, system: str | None = None, json_schema: Mapping[str, Any] | None = None,
                 timeout: float | None = None) -> str:
        """The model's answer to ``prompt``."""
        ...


async def acomplete(llm: LLM, prompt: str, *, system: str | None = None,
                    json_schema: Mapping[str, Any] | None = None, timeout: float | None = None) -> str:
    """Async call of any :class:`LLM`: its own ``acomplete`` if it has one, else ``complete`` in a worker thread."""
    native = getattr(llm, "acomplete", None)
    if native is not None:
        return await native(prompt, system=system, json_schema=json_schema, timeout=timeout)
    return await asyncio.to_thread(llm.complete, prompt, system=system, json_schema=json_schema, timeout=timeout)


def call_with_timeout(fn: Callable[[], T], timeout: float | None, what: str = "the call") -> T:
    """Run ``fn()`` and return its value, or raise :class:`TimeoutError` after ``timeout`` seconds.

    ``fn`` runs in a daemon thread, so a call that never returns cannot block the caller or interpreter exit
    (it is abandoned, not killed). With ``timeout=None`` it runs in the caller's thread. Exceptions propagate.
    """
    if timeout is None:
        return fn()
    if timeout <= 0:
        raise TimeoutError(f"{what}: no time left (timeout {timeout:g} s)")
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:  # noqa: BLE001  (handed to the caller below)
            box["error"] = exc

    worker = threading.Thread(target=run, name="memory-ext-llm", daemon=True)
    worker.start()
    worker.join(timeout)
    if worker.is_alive():
        raise TimeoutError(f"{what}: no answer within {timeout:g} s")
    if "error" in box:
        raise box["error"]
    return box["value"]


class InvalidAnswer(ValueError):
    """An LLM answer that holds no usable JSON value (after repair, and after the retry :func:`ask_json` makes)."""


_FENCE_RE = re.compile(r"```[a-zA-Z0-9_-]*\s*\n?(.*?)```", re.DOTALL)
_TRAILING_COMMA_RE = re.compile(r",\s*([}\]])")
_PY_LITERALS_RE = re.compile(r"(\"(?:\\.|[^\"\\])*\"|'(?:\\.|[^'\\])*')|\b(true|false|null)\b")
_CLOSING = {"{": "}", "[": "]"}


def _outermost(text: str, opens: str) -> str | None:
    """The first balanced ``{...}`` (or ``[...]`` when ``opens`` has ``[``) in ``text`` (quotes of either kind
    respected), or None."""
    starts = [i for i in (text.find(c) for c in opens) if i >= 0]
    if not starts:
        return None
    start = min(starts)
    stack: list[str] = []
    quote, escaped = "", False
    for i in range(start, len(text)):
        ch = text[i]
        if quote:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == quote:
                quote = ""
        elif ch in "\"'":
            quote = ch
        elif ch in _CLOSING:
            stack.append(_CLOSING[ch])
        elif ch in "}]":
            if not stack or stack.pop() != ch:
                return None
            if not stack:
                return text[start:i + 1]
    return None


def parse_json(text: str, *, array: bool = True) -> Any:
    """The JSON object (or array, unless ``array=False``) in an LLM answer, repairing code fences, prose around
    it, single quotes, Python literals and trailing commas. Raises :class:`InvalidAnswer` when none is found.

    >>> parse_json("Sure! ```json\\n{'a': true, 'b': [1, 2,],}\\n``` Hope this helps.")
    {'a': True, 'b': [1, 2]}
    >>> parse_json("The scores are [3, 7.5] as asked.")
    [3, 7.5]
    """
    kinds: tuple[type, ...] = (dict, list) if array else (dict,)
    if not isinstance(text, str):
        raise InvalidAnswer(f"the LLM returned {type(text).__name__}, not text")
    candidates = [text.strip()]
    fenced = _FENCE_RE.search(text)
    if fenced:
        candidates.append(fenced.group(1).strip())
    for source in list(candidates):
        found = _outermost(source, "{[" if array else "{")
        if found:
            candidates.append(found)
    for candidate in candidates:
        for attempt in (candidate, _TRAILING_COMMA_RE.sub(r"\1", candidate)):
            try:
                value = json.loads(attempt)
            except ValueError:
                continue
            if isinstance(value, kinds):
                return value
    for candidate in candidates[1:] or candidates:  # Python-style values: single quotes, True/None
        literal = _PY_LITERALS_RE.sub(lambda m: m.group(1) or {"true": "True", "false": "False", "null": "None"}
                                      [m.group(2)], _TRAILING_COMMA_RE.sub(r"\1", candidate))
        try:
            value = ast.literal_eval(literal)
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            continue
        if isinstance(value, kinds):
            return value
    if not array:
        raise InvalidAnswer("no JSON object found in the answer" if "{" not in text else
                            "the answer's JSON object does not parse")
    raise InvalidAnswer("no JSON value found in the answer" if not ({"{", "["} & set(text)) else
                        "the answer's JSON does not parse")


def parse_json_object(text: str) -> dict[str, Any]:
    """The JSON object in an LLM answer (repaired as :func:`parse_json` does); :class:`InvalidAnswer` otherwise.

    >>> parse_json_object('note: {"a": "x } y"} trailing }')
    {'a': 'x } y'}
    """
    value: dict[str, Any] = parse_json(text, array=False)
    return value


def ask_json(llm: LLM, prompt: str, *, validate: Callable[[Any], T], timeout: float | None,
             system: str | None = None, json_schema: Mapping[str, Any] | None = None,
             invalid: type[ValueError] = InvalidAnswer, what: str = "valid", array: bool = False) -> T:
    """Ask ``llm`` for one JSON value and return ``validate(value)``: the one way memory-ext calls an LLM.

    - the answer is repaired (:func:`parse_json`: code fences, prose around it, trailing commas...; a JSON
      object unless ``array=True`` allows an array too) and handed to ``validate``, which returns the caller's
      value or raises ``ValueError`` saying what is wrong;
    - an unusable answer is asked again once, with the error and the previous answer fed back;
    - ``timeout`` (seconds, ``None`` for none) is the deadline of the whole call, retry included; it is passed to
      the LLM and enforced (:func:`call_with_timeout`), so a hanging client cannot hold the caller;
    - failures raise: :class:`TimeoutError` past the deadline, ``invalid`` (default :class:`InvalidAnswer`)
      when the retry is unusable too, and whatever the LLM raised. Callers turn them into their fallback.

    >>> llm = ScriptedLLM(["I think {'scores': [1, 2,]}", ])
    >>> ask_json(llm, "Score these.", validate=lambda v: v["scores"], timeout=5)
    [1, 2]
    >>> llm = ScriptedLLM(["no idea", '{"scores": [3]}'])
    >>> ask_json(llm, "Score it.", validate=lambda v: v["scores"], timeout=5), len(llm.calls)
    ([3], 2)
    >>> "Your previous answer was not valid" in llm.calls[1].prompt
    True
    """
    deadline = None if timeout is None else time.monotonic() + timeout
    name = str(getattr(llm, "id", type(llm).__name__))

    def ask(text: str) -> Any:
        remaining = None if deadline is None else deadline - time.monotonic()
        if remaining is not None and remaining <= 0:
            raise TimeoutError(f"no answer within {timeout:g} s")
        try:
            return call_with_timeout(lambda: llm.complete(text, system=system, json_schema=json_schema,
                                                          timeout=remaining), remaining, f"LLM {name!r}")
        except TimeoutError:
            if timeout is None:
                raise
            raise TimeoutError(f"no answer within {timeout:g} s") from None

    def check(answer: Any) -> T:
        try:
            return validate(parse_json(answer, array=array))
        except (ValueError, LookupError, TypeError) as exc:  # a missing key or a wrong type is a bad answer
            raise invalid(str(exc) or type(exc).__name__) from None

    answer = ask(prompt)
    try:
        return check(answer)
    except invalid as first:
        retry = (f"{prompt}\n\nYour previous answer was not {what}: {first}\n"
                 f"Previous answer: {str(answer)[:500]!r}\nAnswer again with only the JSON object.")
        try:
            return check(ask(retry))
        except invalid as second:
            raise invalid(f"invalid answer, also after one retry: {second}") from None


@dataclass(frozen=True)
class LLMCall:
    """One call a :class:`ScriptedLLM` received."""

    prompt: str
    system: str | None = None
    json_schema: Mapping[str, Any] | None = None
    timeout: float | None = None


@dataclass(frozen=True)
class Delay:
    """A script step that answers late: sleep ``seconds``, then play ``then``.

    Like a client with a timeout, it raises :class:`TimeoutError` once the call's ``timeout`` has passed; with
    ``ignore_timeout=True`` it sleeps the full time regardless, like a client that hangs (the caller's own
    deadline must then cut it off).
    """

    seconds: float
    then: Step = ""
    ignore_timeout: bool = False


Step = str | Mapping[str, Any] | list[Any] | BaseException | type[BaseException] | Delay
"""A script step: text (returned as is), a mapping or list (returned as JSON), an exception (raised), a Delay."""


class ScriptedLLM:
    """An in-memory :class:`LLM` that plays a script: the test and demo fake.

    ``script`` is either a sequence of steps, played one per call in order, or a function from the
    :class:`LLMCall` to a step (for answers that depend on the prompt). A step is a string (returned), a mapping
    or list (returned as JSON text), an exception instance or class (raised), or a :class:`Delay`. A finished
    script raises :class:`LookupError`, unless ``repeat_last=True`` replays the last step. Every call is recorded
    in :attr:`calls`. Thread-safe.

    >>> llm = ScriptedLLM(lambda call: {"echo": call.prompt.upper()}, id="echo")
    >>> llm.complete("hi"), llm.id
    ('{"echo": "HI"}', 'echo')
    """

    def __init__(self, script: Iterable[Step] | Callable[[LLMCall], Step], *, id: str = "scripted",
                 repeat_last: bool = False) -> None:
        self.id = id
        self._fn = script if callable(script) else None
        self._steps: list[Step] = [] if callable(script) else list(script)
        self._repeat_last = repeat_last
        self._lock = threading.Lock()
        self.calls: list[LLMCall] = []
        """every call received, in order"""

    def complete(self, prompt: str, *, system: str | None = None, json_schema: Mapping[str, Any] | None = None,
                 timeout: float | None = None) -> str:
        call = LLMCall(prompt=prompt, system=system, json_schema=json_schema, timeout=timeout)
        with self._lock:
            index = len(self.calls)
            self.calls.append(call)
        if self._fn is not None:
            step = self._fn(call)
        elif index < len(self._steps):
            step = self._steps[index]
        elif self._repeat_last and self._steps:
            step = self._steps[-1]
        else:
            raise LookupError(f"scripted LLM {self.id!r}: the script has {len(self._steps)} step(s) and call "
                              f"{index + 1} was made; add steps, pass repeat_last=True or a function")
        return self._play(step, timeout)

    async def acomplete(self, prompt: str, *, system: str | None = None,
                        json_schema: Mapping[str, Any] | None = None, timeout: float | None = None) -> str:
        """Async twin of :meth:`complete` (runs it in a worker thread)."""
        return await asyncio.to_thread(self.complete, prompt, system=system, json_schema=json_schema,
                                       timeout=timeout)

    def _play(self, step: Step, timeout: float | None) -> str:
        while isinstance(step, Delay):
            if timeout is not None and not step.ignore_timeout and step.seconds > timeout:
                time.sleep(timeout)
                raise TimeoutError(f"scripted LLM {self.id!r}: no answer within {timeout:g} s")
            time.sleep(step.seconds)
            if timeout is not None:
                timeout = max(0.0, timeout - step.seconds)
            step = step.then
        if isinstance(step, BaseException) or (isinstance(step, type) and issubclass(step, BaseException)):
            raise step
        if isinstance(step, str):
            return step
        if isinstance(step, (Mapping, list)):
            return json.dumps(step, ensure_ascii=False, default=str)
        raise TypeError(f"scripted LLM {self.id!r}: a step must be a str, mapping, list, exception or Delay, "
                        f"got {type(step).__name__}")

    def __repr__(self) -> str:
        return f"ScriptedLLM(id={self.id!r}, calls={len(self.calls)})"
