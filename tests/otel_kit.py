"""The SDK's in-memory span exporter and metric reader, wired into :func:`memory_ext.telemetry.configure` for one
test (the telemetry and the server-face tests share it)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from memory_ext import telemetry


@dataclass
class Collected:
    spans: InMemorySpanExporter
    metrics: InMemoryMetricReader

    def finished(self) -> list[ReadableSpan]:
        return list(self.spans.get_finished_spans())

    def points(self, name: str) -> list[Any]:
        data = self.metrics.get_metrics_data()
        return [p for rm in (data.resource_metrics if data else []) for sm in rm.scope_metrics
                for m in sm.metrics if m.name == name for p in m.data.data_points]


def collect(namespace_attributes: bool | None = None) -> Iterator[Collected]:
    spans, reader = InMemorySpanExporter(), InMemoryMetricReader()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    assert telemetry.configure(tracer_provider=tracer_provider, meter_provider=MeterProvider(metric_readers=[reader]),
                               namespace_attributes=namespace_attributes)
    try:
        yield Collected(spans, reader)
    finally:
        telemetry.configure()  # back to the global providers and the environment's choice
