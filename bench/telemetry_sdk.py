"""An OpenTelemetry SDK for the `echo_otel` workload: what a deployment under `opentelemetry-instrument` runs (a
batch span processor, a periodic metric reader), with exporters that drop what they are given, so that the row
measures making the telemetry, not a collector."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import MetricExporter, MetricExportResult, PeriodicExportingMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult


class Dropped(SpanExporter):
    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return SpanExportResult.SUCCESS


class DroppedMetrics(MetricExporter):
    def export(self, metrics_data: Any, timeout_millis: float = 10_000, **kwargs: Any) -> MetricExportResult:
        return MetricExportResult.SUCCESS

    def force_flush(self, timeout_millis: float = 10_000) -> bool:
        return True

    def shutdown(self, timeout_millis: float = 30_000, **kwargs: Any) -> None:
        pass


def configure() -> None:
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(BatchSpanProcessor(Dropped()))
    trace.set_tracer_provider(tracer_provider)
    reader = PeriodicExportingMetricReader(DroppedMetrics(), export_interval_millis=10_000)
    metrics.set_meter_provider(MeterProvider(metric_readers=[reader]))
