"""OpenTelemetry for the engine: one span per engine operation on every face, and metrics of them.

Optional (the ``otel`` extra: ``opentelemetry-api`` and ``opentelemetry-sdk``); nothing here imports OpenTelemetry
until the first operation, and without it the engine runs exactly as before. With it, every public operation of
:class:`~memory_ext.MemoryEngine` — called in process, through the REST API or an MCP tool (both call the same
engine) — makes one span through the globally configured tracer provider (or the one given to :func:`configure`),
following the OpenTelemetry GenAI semantic conventions for memory operations (``gen_ai.memory.client`` spans):

* span name and ``gen_ai.operation.name``: ``search_memory`` (search and the reads), ``create_memory``
  (``add_turns``, ``import_records``, ``pre_compress``), ``upsert_memory`` (``put_items``), ``update_memory``
  (``update``, ``compact``, ``reindex``, ...), ``delete_memory`` (``forget``, ``delete``, ...); operations the
  conventions have no name for (``stats``, ``namespaces``, ``overview``, ``list_item_namespaces``) are spans named
  ``memory_ext.<operation>`` without it. Span kind ``INTERNAL`` (the memory runs in this process).
* ``memory_ext.operation`` (the engine method), ``memory_ext.face`` (``engine``, ``rest``, ``mcp``),
  ``gen_ai.memory.store.id`` (the store's random id), ``gen_ai.memory.record.count`` (records returned, added or
  removed), ``error.type`` and an error status on failure (the exception's class name; never its message).
* a search's stage timings (``SearchResult.timings_ms``) as span events ``memory_ext.search.stage`` with
  ``memory_ext.stage`` and ``memory_ext.stage.duration_ms``.
* **Privacy**: no memory text and no query ever. The namespace (``memory_ext.namespace.user_id``, ``.agent_id``,
  ``.session_id``) and the record id an operation names (``gen_ai.memory.record.id``: it may be an app's
  ``external_id``) only when configured: ``configure(namespace_attributes=True)`` or
  ``MEMORY_EXT_OTEL_NAMESPACE=1``; off by default.

Metrics (through the global meter provider, or the one given to :func:`configure`): ``memory_ext.operations``
(counter of operations), ``memory_ext.operation.duration`` (histogram, seconds), both by ``memory_ext.operation``,
``memory_ext.face`` and ``error.type``; and the conventions' ``gen_ai.client.operation.duration`` (seconds, by
``gen_ai.operation.name`` and ``error.type``) for the memory operations. ``MEMORY_EXT_OTEL=off`` turns all of it
off.

>>> import tempfile
>>> from opentelemetry.sdk.trace import TracerProvider
>>> from opentelemetry.sdk.trace.export import SimpleSpanProcessor
>>> from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
>>> from memory_ext import MemoryEngine
>>> exporter, provider = InMemorySpanExporter(), TracerProvider()
>>> provider.add_span_processor(SimpleSpanProcessor(exporter))
>>> configure(tracer_provider=provider)
True
>>> with MemoryEngine.open(tempfile.mkdtemp(), embedder="hashing") as engine:
...     _ = engine.add_turns([{"role": "user", "content": "Maya keeps bees."}], "maya", wait=True)
...     _ = engine.search("bees", "maya")
>>> [(span.name, span.attributes["memory_ext.operation"]) for span in exporter.get_finished_spans()]
[('create_memory', 'add_turns'), ('search_memory', 'search')]
>>> configure()  # back to OpenTelemetry's global providers
True
"""

from __future__ import annotations

import contextvars
import functools
import inspect
import os
import threading
import time
import weakref
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, TypeVar

__all__ = ["GENAI_OPERATION", "TRACED_OPERATIONS", "configure", "face", "traced_operations"]

GENAI_OPERATION: Mapping[str, str | None] = {
    "search": "search_memory", "search_items": "search_memory", "get_turns": "search_memory",
    "get_memory": "search_memory", "list_memories": "search_memory", "history": "search_memory",
    "get_items": "search_memory", "retrieve": "search_memory", "render_prompt": "search_memory",
    "hooks": "search_memory", "export": "search_memory", "replaced_turns": "search_memory",
    "add_turns": "create_memory", "import_records": "create_memory", "pre_compress": "create_memory",
    "put_items": "upsert_memory",
    "update": "update_memory", "set_importance": "update_memory", "compact": "update_memory",
    "maybe_compact": "update_memory", "reindex": "update_memory",
    "forget": "delete_memory", "delete": "delete_memory", "delete_items": "delete_memory",
    "sweep_items": "delete_memory", "purge": "delete_memory",
    "stats": None, "namespaces": None, "overview": None, "list_item_namespaces": None,
}
"""Engine method -> its ``gen_ai.operation.name`` (None: the conventions name no such memory operation).

>>> GENAI_OPERATION["search"], GENAI_OPERATION["add_turns"], GENAI_OPERATION["forget"], GENAI_OPERATION["stats"]
('search_memory', 'create_memory', 'delete_memory', None)
"""
TRACED_OPERATIONS = tuple(GENAI_OPERATION)
"""The engine methods that make a span (their async twins run them, so they make the same one)."""

SCOPE = "memory_ext"
ENV_SWITCH = "MEMORY_EXT_OTEL"
ENV_NAMESPACE = "MEMORY_EXT_OTEL_NAMESPACE"
_TRUE = ("1", "true", "yes", "on")

_FACE: contextvars.ContextVar[str] = contextvars.ContextVar("memory_ext_face", default="engine")
_IN_OPERATION: contextvars.ContextVar[bool] = contextvars.ContextVar("memory_ext_in_operation", default=False)

C = TypeVar("C", bound=type)


@contextmanager
def face(name: str) -> Iterator[None]:
    """Calls to the engine inside this block come from the face ``name`` (``rest``, ``mcp``): their spans and
    metrics say so. Context-local (asyncio tasks and ``asyncio.to_thread`` carry it)."""
    token = _FACE.set(name)
    try:
        yield
    finally:
        _FACE.reset(token)


class _Telemetry:
    """The tracer and the instruments (built once OpenTelemetry is importable)."""

    def __init__(self, tracer_provider: Any, meter_provider: Any, namespace_attributes: bool) -> None:
        from opentelemetry import metrics, trace

        from . import __version__

        self.trace = trace
        self.namespace_attributes = namespace_attributes
        self.tracer = trace.get_tracer(SCOPE, __version__, tracer_provider=tracer_provider)
        meter = metrics.get_meter(SCOPE, __version__, meter_provider=meter_provider)
        self.operations = meter.create_counter("memory_ext.operations", unit="{operation}",
                                               description="Engine operations, by operation, face and error type")
        self.duration = meter.create_histogram("memory_ext.operation.duration", unit="s",
                                               description="Duration of engine operations")
        self.genai_duration = meter.create_histogram("gen_ai.client.operation.duration", unit="s",
                                                     description="GenAI operation duration")
        self.store_ids: weakref.WeakKeyDictionary[Any, str | None] = weakref.WeakKeyDictionary()

    def store_id(self, engine: Any) -> str | None:
        """The store's random id (``gen_ai.memory.store.id``), read once per engine."""
        if engine not in self.store_ids:
            try:
                self.store_ids[engine] = engine._store.store_id
            except Exception:  # noqa: BLE001 - a read-only store without one, a closed engine: no attribute
                self.store_ids[engine] = None
        return self.store_ids[engine]

    def run(self, name: str, signature: inspect.Signature, method: Callable[..., Any], engine: Any,
            args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        genai = GENAI_OPERATION.get(name)
        where = _FACE.get()
        attributes: dict[str, Any] = {"memory_ext.operation": name, "memory_ext.face": where}
        if genai is not None:
            attributes["gen_ai.operation.name"] = genai
        store_id = self.store_id(engine)
        if store_id is not None:
            attributes["gen_ai.memory.store.id"] = store_id
        if self.namespace_attributes:
            attributes.update(_named(signature, engine, args, kwargs))
        token = _IN_OPERATION.set(True)
        start = time.perf_counter()
        error: str | None = None
        try:
            with self.tracer.start_as_current_span(genai or f"memory_ext.{name}", kind=self.trace.SpanKind.INTERNAL,
                                                   attributes=attributes, record_exception=False,
                                                   set_status_on_exception=False) as span:
                try:
                    result = method(engine, *args, **kwargs)
                except BaseException as exc:
                    error = type(exc).__name__
                    span.set_attribute("error.type", error)
                    span.set_status(self.trace.Status(self.trace.StatusCode.ERROR, error))
                    raise
                if span.is_recording():  # a provider that keeps it (not the API's no-op default)
                    _describe(span, result)
                return result
        finally:
            _IN_OPERATION.reset(token)
            elapsed = time.perf_counter() - start
            measured: dict[str, Any] = {"memory_ext.operation": name, "memory_ext.face": where}
            if error is not None:
                measured["error.type"] = error
            self.operations.add(1, measured)
            self.duration.record(elapsed, measured)
            if genai is not None:
                self.genai_duration.record(elapsed, {"gen_ai.operation.name": genai,
                                                     **({"error.type": error} if error else {})})


def _named(signature: inspect.Signature, engine: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
           ) -> dict[str, Any]:
    """The namespace and the record id the call names (only with ``namespace_attributes``)."""
    from .models import Namespace

    try:
        bound = signature.bind(engine, *args, **kwargs).arguments
    except TypeError:
        return {}
    out: dict[str, Any] = {}
    namespace = bound.get("namespace")
    if namespace is not None:
        try:
            ns = Namespace.coerce(namespace)
        except Exception:  # noqa: BLE001 - a bad namespace: the operation itself reports it
            ns = None
        if ns is not None:
            for key in ("user_id", "agent_id", "session_id"):
                value = getattr(ns, key)
                if value is not None:
                    out[f"memory_ext.namespace.{key}"] = value
    ident = bound.get("id", bound.get("memory_id"))
    if isinstance(ident, str):
        out["gen_ai.memory.record.id"] = ident
    return out


def _describe(span: Any, result: Any) -> None:
    """``gen_ai.memory.record.count`` of a result, and a search's stage timings as events."""
    count = _record_count(result)
    if count is not None:
        span.set_attribute("gen_ai.memory.record.count", count)
    timings = getattr(result, "timings_ms", None)
    if isinstance(timings, Mapping):
        for stage, ms in timings.items():
            if isinstance(ms, (int, float)):
                span.add_event("memory_ext.search.stage", {"memory_ext.stage": str(stage),
                                                           "memory_ext.stage.duration_ms": float(ms)})


def _record_count(result: Any) -> int | None:
    if isinstance(result, bool):
        return None
    if isinstance(result, int):
        return result
    if isinstance(result, (list, tuple)):
        return len(result)
    for sized in ("items", "turn_ids"):
        value = getattr(result, sized, None)
        if isinstance(value, (list, tuple)):
            return len(value)
    for counted in ("records", "turns"):
        value = getattr(result, counted, None)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return None


# -- switching it on ---------------------------------------------------------------------------------------------
_lock = threading.Lock()
_state: dict[str, Any] = {"telemetry": None, "resolved": False}


def _active() -> _Telemetry | None:
    """The telemetry, built on first use; None when OpenTelemetry is not installed or it is switched off."""
    if _state["resolved"]:
        return _state["telemetry"]
    with _lock:
        if not _state["resolved"]:
            _state["telemetry"] = _build(None, None, None)
            _state["resolved"] = True
    return _state["telemetry"]


def _build(tracer_provider: Any, meter_provider: Any, namespace_attributes: bool | None) -> _Telemetry | None:
    if os.environ.get(ENV_SWITCH, "").strip().lower() in ("0", "off", "false", "no"):
        return None
    if namespace_attributes is None:
        namespace_attributes = os.environ.get(ENV_NAMESPACE, "").strip().lower() in _TRUE
    try:
        return _Telemetry(tracer_provider, meter_provider, namespace_attributes)
    except ImportError:
        return None


def configure(*, tracer_provider: Any = None, meter_provider: Any = None, namespace_attributes: bool | None = None,
              enabled: bool = True) -> bool:
    """Set where the spans and metrics go (default: OpenTelemetry's global providers) and whether spans carry the
    namespace (default: ``MEMORY_EXT_OTEL_NAMESPACE``, off); ``enabled=False`` turns telemetry off. Returns
    whether telemetry is on (False when OpenTelemetry is not installed: ``pip install "memory-ext[otel]"``).
    """
    with _lock:
        _state["telemetry"] = _build(tracer_provider, meter_provider, namespace_attributes) if enabled else None
        _state["resolved"] = True
        return _state["telemetry"] is not None


def traced_operations(cls: C) -> C:
    """Class decorator: each method of :data:`TRACED_OPERATIONS` makes one span (and its metrics) when telemetry
    is on; a call made inside another traced operation (``delete`` runs ``forget``) is part of that one."""
    for name in TRACED_OPERATIONS:
        method = cls.__dict__.get(name)
        if callable(method):
            setattr(cls, name, _traced(name, method))
    return cls


def _traced(name: str, method: Callable[..., Any]) -> Callable[..., Any]:
    signature = inspect.signature(method)

    @functools.wraps(method)
    def traced(self: Any, *args: Any, **kwargs: Any) -> Any:
        telemetry = _active()
        if telemetry is None or _IN_OPERATION.get():
            return method(self, *args, **kwargs)
        return telemetry.run(name, signature, method, self, args, kwargs)

    return traced
