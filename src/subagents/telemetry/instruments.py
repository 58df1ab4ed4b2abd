"""The metric instruments: tokens and cost per agent type and model, tool calls and their
durations, running children (docs/telemetry.md, "Metrics").

The ``gen_ai.client.*`` histograms follow the GenAI semantic conventions (bucket boundaries as
they advise) and are recorded per call. The ``subagents.*`` counters answer "which agent type
spent what": they are *observable* counters over running totals kept here, so a model call adds
to a dictionary and the SDK reads the totals only when it exports (measured: recording five
counter measurements per call cost more than the call's spans).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from opentelemetry.metrics import CallbackOptions, Meter, Observation
from opentelemetry.util.types import AttributeValue

from subagents.messages import Usage
from subagents.models.pricing import cost_usd

TOKEN_BUCKETS = (1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304)
DURATION_BUCKETS = (0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48)
TOKEN_KINDS = ("input", "output", "cache_read", "cache_creation")

Attributes = Mapping[str, AttributeValue]


@dataclass(kw_only=True, frozen=True, slots=True)
class _CallLabels:
    """The attribute sets of one (operation, model, agent type), built once."""

    call: Attributes
    input: Attributes
    output: Attributes
    by_agent: tuple[str, str]


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
        self._tokens: dict[tuple[str, str, str], int] = {}
        self._cost: dict[tuple[str, str], float] = {}
        self._tool_calls: dict[tuple[str, str, str], int] = {}
        self._labels: dict[tuple[tuple[tuple[str, AttributeValue], ...], str], _CallLabels] = {}
        meter.create_observable_counter(
            "subagents.token.usage",
            [self._observe_tokens],
            unit="{token}",
            description="Tokens by agent type, model and kind",
        )
        meter.create_observable_counter(
            "subagents.cost.usage",
            [self._observe_cost],
            unit="USD",
            description="Cost by agent type and model (models/pricing.py)",
        )
        meter.create_observable_counter(
            "subagents.tool.calls",
            [self._observe_tool_calls],
            unit="{call}",
            description="Tool calls by tool, agent type and outcome",
        )

    def model_call(
        self, usage: Usage, model: str, call: Attributes, agent_type: str, seconds: float
    ) -> None:
        """One model call's tokens, cost and duration (``call``: its operation attributes)."""
        labels = self._labels_for(call, model, agent_type)
        self.call_duration.record(seconds, labels.call)
        total_input = (
            usage.input_tokens + usage.cache_read_input_tokens + usage.cache_creation_input_tokens
        )
        self.token_histogram.record(total_input, labels.input)
        self.token_histogram.record(usage.output_tokens, labels.output)
        tokens = self._tokens
        for kind, count in zip(
            TOKEN_KINDS,
            (
                usage.input_tokens,
                usage.output_tokens,
                usage.cache_read_input_tokens,
                usage.cache_creation_input_tokens,
            ),
            strict=True,
        ):
            if count:
                key = (*labels.by_agent, kind)
                tokens[key] = tokens.get(key, 0) + count
        try:
            cost = cost_usd(model, usage)
        except ValueError:  # a malformed SUBAGENTS_PRICES: the session reports it elsewhere
            return
        self._cost[labels.by_agent] = self._cost.get(labels.by_agent, 0.0) + cost

    def failed_call(self, call: Attributes, seconds: float) -> None:
        self.call_duration.record(seconds, call)

    def tool_call(self, tool: str, agent_type: str, outcome: str, seconds: float) -> None:
        key = (tool, agent_type, outcome)
        self._tool_calls[key] = self._tool_calls.get(key, 0) + 1
        self.tool_duration.record(
            seconds, {"gen_ai.tool.name": tool, "gen_ai.agent.name": agent_type, "outcome": outcome}
        )

    def _labels_for(self, call: Attributes, model: str, agent_type: str) -> _CallLabels:
        key = (tuple(call.items()), model)
        labels = self._labels.get(key)
        if labels is None:
            with_model = {**call, "gen_ai.response.model": model}
            labels = self._labels[key] = _CallLabels(
                call=with_model,
                input={**with_model, "gen_ai.token.type": "input"},
                output={**with_model, "gen_ai.token.type": "output"},
                by_agent=(agent_type, model),
            )
        return labels

    def _observe_tokens(self, _options: CallbackOptions) -> Iterable[Observation]:
        for (agent_type, model, kind), count in list(self._tokens.items()):
            attributes = {"gen_ai.agent.name": agent_type, "gen_ai.response.model": model}
            yield Observation(count, {**attributes, "type": kind})

    def _observe_cost(self, _options: CallbackOptions) -> Iterable[Observation]:
        for (agent_type, model), cost in list(self._cost.items()):
            yield Observation(
                cost, {"gen_ai.agent.name": agent_type, "gen_ai.response.model": model}
            )

    def _observe_tool_calls(self, _options: CallbackOptions) -> Iterable[Observation]:
        for (tool, agent_type, outcome), count in list(self._tool_calls.items()):
            attributes = {"gen_ai.tool.name": tool, "gen_ai.agent.name": agent_type}
            yield Observation(count, {**attributes, "outcome": outcome})
