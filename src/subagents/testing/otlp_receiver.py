"""A small OTLP/HTTP receiver on 127.0.0.1: what a collector would get from a run, decoded.

``OTLPReceiver`` accepts ``POST /v1/traces`` and ``/v1/metrics`` in the protobuf encoding (the
default of ``OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf``), gzip or not, decodes each body with
``opentelemetry-proto`` into an ``ExportTraceServiceRequest``/``ExportMetricsServiceRequest`` and
keeps it. ``spans()`` flattens what arrived into ``ReceivedSpan`` rows. Our end-to-end test,
the telemetry benchmark and the README's trace picture all use it; it needs the ``telemetry``
extra (import this module only then).
"""

from __future__ import annotations

import gzip
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue


@dataclass(kw_only=True)
class ReceivedSpan:
    """One span as it arrived, with its resource's and its own attributes as plain values."""

    name: str
    trace_id: str
    span_id: str
    parent_span_id: str
    kind: int
    start_ns: int
    end_ns: int
    attributes: dict[str, Any]
    resource: dict[str, Any]
    events: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    links: list[str] = field(default_factory=list)
    """Span ids this span links to."""
    status_code: int = 0


class OTLPReceiver:
    """``with OTLPReceiver() as receiver:`` serves on ``receiver.endpoint`` until the block ends."""

    def __init__(self) -> None:
        self.traces: list[trace_service_pb2.ExportTraceServiceRequest] = []
        self.metrics: list[metrics_service_pb2.ExportMetricsServiceRequest] = []
        self.bodies = 0
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def endpoint(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def __enter__(self) -> OTLPReceiver:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def receive(self, path: str, body: bytes) -> bytes:
        """Decode one export; the (empty) protobuf response to send back."""
        if path == "/v1/traces":
            request = trace_service_pb2.ExportTraceServiceRequest.FromString(body)
            with self._lock:
                self.traces.append(request)
                self.bodies += 1
            answer: bytes = trace_service_pb2.ExportTraceServiceResponse().SerializeToString()
            return answer
        if path == "/v1/metrics":
            metrics = metrics_service_pb2.ExportMetricsServiceRequest.FromString(body)
            with self._lock:
                self.metrics.append(metrics)
                self.bodies += 1
            done: bytes = metrics_service_pb2.ExportMetricsServiceResponse().SerializeToString()
            return done
        raise KeyError(path)

    def spans(self) -> list[ReceivedSpan]:
        with self._lock:
            requests = list(self.traces)
        return [span for request in requests for span in _spans(request)]

    def metric_names(self) -> set[str]:
        with self._lock:
            requests = list(self.metrics)
        return {
            metric.name
            for request in requests
            for resource in request.resource_metrics
            for scope in resource.scope_metrics
            for metric in scope.metrics
        }


def _handler(receiver: OTLPReceiver) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            if self.headers.get("Content-Encoding") == "gzip":
                body = gzip.decompress(body)
            try:
                answer = receiver.receive(self.path, body)
            except KeyError:
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, format: str, *args: Any) -> None:
            pass  # quiet: a test's output is its own

    return Handler


def _spans(request: trace_service_pb2.ExportTraceServiceRequest) -> list[ReceivedSpan]:
    found: list[ReceivedSpan] = []
    for resource_spans in request.resource_spans:
        resource = _attributes(resource_spans.resource.attributes)
        for scope in resource_spans.scope_spans:
            for span in scope.spans:
                found.append(
                    ReceivedSpan(
                        name=span.name,
                        trace_id=span.trace_id.hex(),
                        span_id=span.span_id.hex(),
                        parent_span_id=span.parent_span_id.hex(),
                        kind=span.kind,
                        start_ns=span.start_time_unix_nano,
                        end_ns=span.end_time_unix_nano,
                        attributes=_attributes(span.attributes),
                        resource=resource,
                        events=[(e.name, _attributes(e.attributes)) for e in span.events],
                        links=[link.span_id.hex() for link in span.links],
                        status_code=span.status.code,
                    )
                )
    return found


def _attributes(pairs: Any) -> dict[str, Any]:
    return {pair.key: _value(pair.value) for pair in pairs if isinstance(pair, KeyValue)}


def _value(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [_value(v) for v in value.array_value.values]
    if kind is None:
        return None
    return getattr(value, kind)
