"""OpenTelemetry for subagents: traces, metrics and events of every agent, model and tool call.

Imported only when telemetry is wanted (``SUBAGENTS_TELEMETRY=1``, or a caller building a
``Telemetry``); it needs the ``telemetry`` extra (``opentelemetry-api``/``-sdk`` and the OTLP
exporter). ``Telemetry`` implements the runtime's ``observe.RunObserver`` seam; ``from_environment``
builds one configured by the standard ``OTEL_*`` variables. See docs/telemetry.md.
"""

from __future__ import annotations

try:
    import opentelemetry.sdk  # noqa: F401  (the one place that says what is missing)
except ImportError as exc:
    raise ImportError(
        "telemetry needs the OpenTelemetry packages: pip install 'subagents[telemetry]'"
    ) from exc

from subagents.telemetry.otel import Telemetry
from subagents.telemetry.settings import TelemetrySettings
from subagents.telemetry.setup import from_environment

__all__ = ["Telemetry", "TelemetrySettings", "from_environment"]
