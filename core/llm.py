"""LLMs: the small protocol memory-ext calls, a deadline helper, and a scripted fake for tests and demos.

The engine never needs an LLM. Optional parts that can use one (the LLM planner) call it through :class:`LLM`:
one method that takes a prompt and returns text. Adapters wrap framework models —
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

import asyncio
import json
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar, runtime_checkable

__all__ = ["LLM", "Delay", "LLMCall", "ScriptedLLM", "acomplete", "call_with_timeout"]

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
