"""Tracer and meter providers from the standard ``OTEL_*`` variables, once per process.

A process whose tracer (or meter) provider is already set — by the application, or by
``opentelemetry-instrument`` — keeps it: we only add our spans to it. Otherwise one SDK provider
is built from the environment (resource from ``OTEL_SERVICE_NAME``/``OTEL_RESOURCE_ATTRIBUTES``,
service name ``subagents`` by default; exporters from ``OTEL_TRACES_EXPORTER``/
``OTEL_METRICS_EXPORTER`` and ``OTEL_EXPORTER_OTLP_PROTOCOL``; endpoints, headers and batching
read by the exporters and processors themselves) and installed globally, so other
instrumentation in the process exports through the same pipeline.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import AlwaysOffExemplarFilter, MeterProvider
from opentelemetry.sdk.metrics.export import (
    ConsoleMetricExporter,
    MetricExporter,
    MetricReader,
    PeriodicExportingMetricReader,
)
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter, SpanExporter

from subagents.telemetry.attributes import package_version
from subagents.telemetry.otel import Telemetry
from subagents.telemetry.settings import TelemetrySettings

_process_telemetry: Telemetry | None = None


def from_environment(env: Mapping[str, str] | None = None) -> Telemetry:
    """The process's ``Telemetry``, built on first use from the environment."""
    global _process_telemetry
    if _process_telemetry is None:
        settings = TelemetrySettings.from_env(env)
        tracer_provider, owns_traces = _tracer_provider(settings, env)
        meter_provider, owns_metrics = _meter_provider(settings, env)
        _process_telemetry = Telemetry(
            tracer_provider=tracer_provider,
            meter_provider=meter_provider,
            log_prompts=settings.log_prompts,
            tool_details=settings.tool_details,
            flush_at_session_end=owns_traces or owns_metrics,
        )
    return _process_telemetry


def resource(env: Mapping[str, str] | None = None) -> Resource:
    env = os.environ if env is None else env
    attributes: dict[str, str] = {"service.version": package_version()}
    named = env.get("OTEL_SERVICE_NAME") or "service.name=" in env.get(
        "OTEL_RESOURCE_ATTRIBUTES", ""
    )
    if not named:
        attributes["service.name"] = "subagents"
    return Resource.create(attributes)


def _tracer_provider(
    settings: TelemetrySettings, env: Mapping[str, str] | None
) -> tuple[trace.TracerProvider, bool]:
    current = trace.get_tracer_provider()
    if not isinstance(current, trace.ProxyTracerProvider):
        return current, False
    provider = TracerProvider(resource=resource(env))
    for name in settings.traces_exporters:
        provider.add_span_processor(BatchSpanProcessor(_span_exporter(name, settings)))
    trace.set_tracer_provider(provider)
    return provider, True


def _meter_provider(
    settings: TelemetrySettings, env: Mapping[str, str] | None
) -> tuple[metrics.MeterProvider, bool]:
    current = metrics.get_meter_provider()
    # The API's placeholder is private: told apart by name, so a provider set by anyone wins.
    if type(current).__name__ != "_ProxyMeterProvider":
        return current, False
    readers: list[MetricReader] = [
        PeriodicExportingMetricReader(_metric_exporter(name, settings))
        for name in settings.metrics_exporters
    ]
    # Exemplars (a trace id sampled into each metric point) are off unless asked for with
    # OTEL_METRICS_EXEMPLAR_FILTER: they cost a context look-up per measurement.
    chosen = (os.environ if env is None else env).get("OTEL_METRICS_EXEMPLAR_FILTER")
    provider = MeterProvider(
        resource=resource(env),
        metric_readers=readers,
        exemplar_filter=None if chosen else AlwaysOffExemplarFilter(),
    )
    metrics.set_meter_provider(provider)
    return provider, True


def _span_exporter(name: str, settings: TelemetrySettings) -> SpanExporter:
    if name == "console":
        return ConsoleSpanExporter()
    if settings.traces_protocol == "grpc":
        try:
            from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
        except ImportError as exc:
            raise ImportError(_GRPC_MISSING) from exc
        grpc_spans: SpanExporter = OTLPSpanExporter()
        return grpc_spans
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
        OTLPSpanExporter as HTTPSpanExporter,
    )

    return HTTPSpanExporter()


def _metric_exporter(name: str, settings: TelemetrySettings) -> MetricExporter:
    if name == "console":
        return ConsoleMetricExporter()
    if settings.metrics_protocol == "grpc":
        try:
            from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter
        except ImportError as exc:
            raise ImportError(_GRPC_MISSING) from exc
        grpc_metrics: MetricExporter = OTLPMetricExporter()
        return grpc_metrics
    from opentelemetry.exporter.otlp.proto.http.metric_exporter import (
        OTLPMetricExporter as HTTPMetricExporter,
    )

    return HTTPMetricExporter()


_GRPC_MISSING = (
    "OTEL_EXPORTER_OTLP_PROTOCOL=grpc needs opentelemetry-exporter-otlp-proto-grpc "
    "(pip install opentelemetry-exporter-otlp-proto-grpc), or use http/protobuf"
)
