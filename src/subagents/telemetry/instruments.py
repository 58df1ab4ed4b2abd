"""The metric instruments: tokens and cost per agent type and model, tool calls and their
durations, running children (docs/telemetry.md, "Metrics").

The two ``gen_ai.client.*`` histograms follow the GenAI semantic conventions (bucket boundaries
as they advise); the ``subagents.*`` counters answer "which agent type spent what" directly.
"""

from __future__ import annotations

from collections.abc import Mapping

from opentelemetry.metrics import Meter
from opentelemetry.util.types import AttributeValue

from subagents.messages import Usage
from subagents.models.pricing import cost_usd

TOKEN_BUCKETS = (1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304)
DURATION_BUCKETS = (0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48)

Attributes = Mapping[str, AttributeValue]


class Instruments:
    """Every instrument of one meter, created once."""

    def __init__(self, meter: Meter) -> None:
        self.token_histogram = meter.create_histogram(
            "gen_ai.client.token.usage",
            unit="{token}",
            description="Tokens used per model call (GenAI semantic conventions)",
            explicit_bucket_boundaries_advisory=TOKEN_BUCKETS,
        )
        self.call_duration = meter.create_histogram(
            "gen_ai.client.operation.duration",
            unit="s",
            description="Duration of a model call, retries included",
            explicit_bucket_boundaries_advisory=DURATION_BUCKETS,
        )
        self.tokens = meter.create_counter(
            "subagents.token.usage", unit="{token}", description="Tokens by agent type and model"
        )
        self.cost = meter.create_counter(
            "subagents.cost.usage", unit="USD", description="Cost by agent type and model"
        )
        self.tool_calls = meter.create_counter(
            "subagents.tool.calls", unit="{call}", description="Tool calls by tool and outcome"
        )
        self.tool_duration = meter.create_histogram(
            "subagents.tool.duration",
            unit="s",
            description="Duration of a tool call, hooks and permission check included",
            explicit_bucket_boundaries_advisory=DURATION_BUCKETS,
        )
        self.running = meter.create_up_down_counter(
            "subagents.agents.running", unit="{agent}", description="Child agents running now"
        )
        self.agent_runs = meter.create_counter(
            "subagents.agent.runs", unit="{agent}", description="Finished agent runs by reason"
        )

    def model_call(
        self, usage: Usage, model: str, call: Attributes, agent_type: str, seconds: float
    ) -> None:
        """One model call's tokens, cost and duration (``call``: its operation attributes)."""
        self.call_duration.record(seconds, call)
        total_input = (
            usage.input_tokens + usage.cache_read_input_tokens + usage.cache_creation_input_tokens
        )
        self.token_histogram.record(total_input, {**call, "gen_ai.token.type": "input"})
        self.token_histogram.record(usage.output_tokens, {**call, "gen_ai.token.type": "output"})
        by_agent = {"gen_ai.agent.name": agent_type, "gen_ai.response.model": model}
        for kind, count in (
            ("input", usage.input_tokens),
            ("output", usage.output_tokens),
            ("cache_read", usage.cache_read_input_tokens),
            ("cache_creation", usage.cache_creation_input_tokens),
        ):
            if count:
                self.tokens.add(count, {**by_agent, "type": kind})
        try:
            cost = cost_usd(model, usage)
        except ValueError:  # a malformed SUBAGENTS_PRICES: the session reports it elsewhere
            return
        self.cost.add(cost, by_agent)

    def failed_call(self, call: Attributes, seconds: float) -> None:
        self.call_duration.record(seconds, call)
