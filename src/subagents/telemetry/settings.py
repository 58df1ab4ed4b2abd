"""What the environment says about telemetry: exporters, protocol, and what content to record.

The OpenTelemetry variables keep their standard meaning (the SDK and the exporters read most of
them themselves: endpoints, headers, timeouts, batching, resource attributes); this reads the
ones that choose *which* exporters to build, and our two privacy switches.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

_TRUE = {"1", "true", "yes", "on"}

EXPORTERS = frozenset({"otlp", "console", "none"})
PROTOCOLS = frozenset({"http/protobuf", "grpc"})


@dataclass(kw_only=True, frozen=True)
class TelemetrySettings:
    """Exporter choice and content switches (docs/telemetry.md, "Configuration")."""

    traces_exporters: tuple[str, ...] = ("otlp",)
    metrics_exporters: tuple[str, ...] = ("otlp",)
    traces_protocol: str = "http/protobuf"
    metrics_protocol: str = "http/protobuf"
    log_prompts: bool = False
    """Prompts and model output on spans (``SUBAGENTS_TELEMETRY_LOG_PROMPTS``)."""
    tool_details: bool = False
    """Tool inputs and results, Agent descriptions, permission messages
    (``SUBAGENTS_TELEMETRY_TOOL_DETAILS``)."""

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> TelemetrySettings:
        env = os.environ if env is None else env
        protocol = _choice(env, "OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf", PROTOCOLS)
        return cls(
            traces_exporters=_exporters(env, "OTEL_TRACES_EXPORTER"),
            metrics_exporters=_exporters(env, "OTEL_METRICS_EXPORTER"),
            traces_protocol=_choice(env, "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", protocol, PROTOCOLS),
            metrics_protocol=_choice(
                env, "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL", protocol, PROTOCOLS
            ),
            log_prompts=_on(env, "SUBAGENTS_TELEMETRY_LOG_PROMPTS", "OTEL_LOG_USER_PROMPTS"),
            tool_details=_on(env, "SUBAGENTS_TELEMETRY_TOOL_DETAILS", "OTEL_LOG_TOOL_DETAILS"),
        )


def _on(env: Mapping[str, str], *names: str) -> bool:
    return any(env.get(name, "").strip().lower() in _TRUE for name in names)


def _exporters(env: Mapping[str, str], name: str) -> tuple[str, ...]:
    """A comma-separated exporter list (the specification allows several); ``none`` alone
    turns the signal off."""
    raw = env.get(name, "").strip()
    if not raw:
        return ("otlp",)
    chosen = tuple(part.strip().lower() for part in raw.split(",") if part.strip())
    unknown = [part for part in chosen if part not in EXPORTERS]
    if unknown:
        raise ValueError(
            f"{name}={raw!r}: unknown exporter {unknown[0]!r} (use otlp, console or none)"
        )
    return tuple(part for part in chosen if part != "none")


def _choice(env: Mapping[str, str], name: str, default: str, allowed: frozenset[str]) -> str:
    raw = env.get(name, "").strip().lower()
    if not raw:
        return default
    if raw not in allowed:
        raise ValueError(f"{name}={raw!r}: use one of {', '.join(sorted(allowed))}")
    return raw
