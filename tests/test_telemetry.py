"""Telemetry through the library API, with the OpenTelemetry SDK's in-memory exporter: the span
tree of a run with two sync children, a background child and a fork (parents, links, GenAI
attributes, token counts that add up to the result's usage), the SPEC §15 events, the metrics,
and privacy by default (docs/telemetry.md)."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from cli_helpers import agent_call
from subagents.config import RuntimeConfig
from subagents.models.scripted import ScriptedModel
from subagents.session import Session, SessionOptions
from subagents.telemetry import Telemetry

USAGE = {
    "input_tokens": 11,
    "output_tokens": 7,
    "cache_read_input_tokens": 5,
    "cache_creation_input_tokens": 3,
}


def _turn(**turn: Any) -> dict[str, Any]:
    return {"usage": USAGE, **turn}


SCRIPT: dict[str, Any] = {
    "agents": [
        {
            "agent_type": "main",
            "turns": [
                _turn(
                    tool_calls=[
                        agent_call("first sync job", "Explore"),
                        agent_call("second sync job", "general-purpose"),
                    ]
                ),
                _turn(
                    tool_calls=[
                        agent_call("background job", "general-purpose", run_in_background=True),
                        agent_call("fork job"),
                    ]
                ),
                _turn(text="main is done"),
                _turn(text="main is done, background too"),
            ],
        },
        {"agent_type": "fork", "turns": [_turn(text="fork result")]},
        {
            "match": "background job",
            "turns": [
                _turn(tool_calls=[{"name": "Read", "input": {"file_path": "notes.txt"}}]),
                _turn(text="background result"),
            ],
        },
        {"match": "sync job", "turns": [_turn(text="sync result")]},
    ]
}


class Recorded:
    def __init__(self, spans: Sequence[ReadableSpan], metrics: InMemoryMetricReader) -> None:
        self.spans = list(spans)
        self.metrics = metrics
        self.by_id = {s.context.span_id: s for s in self.spans}

    def named(self, prefix: str) -> list[ReadableSpan]:
        return [s for s in self.spans if s.name.startswith(prefix)]

    def parent(self, span: ReadableSpan) -> ReadableSpan | None:
        return self.by_id.get(span.parent.span_id) if span.parent is not None else None

    def metric_points(self, name: str) -> Iterator[Any]:
        data = self.metrics.get_metrics_data()
        assert data is not None
        for resource in data.resource_metrics:
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    if metric.name == name:
                        yield from metric.data.data_points


async def _run(
    tmp_path: Path,
    *,
    log_prompts: bool = False,
    tool_details: bool = False,
    settings: dict[str, Any] | None = None,
    script: dict[str, Any] = SCRIPT,
    config: RuntimeConfig | None = None,
) -> tuple[Recorded, Any]:
    (tmp_path / "notes.txt").write_text("secret notes\n")
    exporter = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    reader = InMemoryMetricReader()
    telemetry = Telemetry(
        tracer_provider=tracer_provider,
        meter_provider=MeterProvider(metric_readers=[reader]),
        log_prompts=log_prompts,
        tool_details=tool_details,
    )
    settings_file = None
    if settings is not None:
        settings_file = tmp_path / "settings.json"
        settings_file.write_text(json.dumps(settings))
    model = ScriptedModel.from_dict(script)
    session = Session(
        SessionOptions(
            model=model,
            cwd=tmp_path,
            home=tmp_path / "home",
            observer=telemetry,
            load_settings=settings is not None,
            settings_file=settings_file,
            config=config,
        )
    )
    result = await session.run("coordinate the work")
    assert result.subtype == "success", result.payload
    assert len(model.requests) >= 3
    result.model_calls = len(model.requests)
    return Recorded(exporter.get_finished_spans(), reader), result


async def test_the_span_tree_of_sync_background_and_fork_children(tmp_path: Path) -> None:
    rec, result = await _run(tmp_path)

    assert len({s.context.trace_id for s in rec.spans}) == 1, "one trace per session"
    (session,) = rec.named("session")
    assert session.parent is None
    assert session.attributes["session.id"] == result.session_id
    (main,) = rec.named("invoke_agent main")
    assert rec.parent(main) is session
    assert main.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert main.attributes["gen_ai.agent.id"] == result.session_id

    children = [s for s in rec.named("invoke_agent ") if s is not main]
    assert sorted(str(s.attributes["gen_ai.agent.name"]) for s in children) == [
        "Explore",
        "fork",
        "general-purpose",
        "general-purpose",
    ]
    calls = {s.attributes["gen_ai.tool.call.id"]: s for s in rec.named("execute_tool Agent")}
    assert len(calls) == 4 and all(rec.parent(c) is main for c in calls.values())
    runs = {run.agent_id: run for run in result.agents}
    for child in children:
        run = runs[str(child.attributes["gen_ai.agent.id"])]
        call = calls[run.tool_use_id]
        background = bool(child.attributes["subagents.agent.is_background"])
        assert background == (run.prompt == "background job")
        if background:  # under its owner, linked to the call that launched it
            assert rec.parent(child) is main
            assert [link.context.span_id for link in child.links] == [call.context.span_id]
            assert child.links[0].attributes == {"subagents.link": "launched_by"}
        else:  # under the call that spawned it
            assert rec.parent(child) is call
            assert not child.links
        assert child.attributes["subagents.agent.is_fork"] == (run.agent_type == "fork")
        assert child.attributes["subagents.agent.parent_id"] == result.session_id
        assert child.attributes["subagents.agent.reason"] == "completed"

    (read,) = rec.named("execute_tool Read")
    background_span = next(c for c in children if c.attributes["subagents.agent.is_background"])
    assert rec.parent(read) is background_span
    assert read.attributes["gen_ai.tool.name"] == "Read"
    assert "error.type" not in read.attributes


async def test_model_call_spans_follow_genai_conventions_and_add_up(tmp_path: Path) -> None:
    rec, result = await _run(tmp_path)

    chats = rec.named("chat ")
    assert len(chats) == result.model_calls
    for chat in chats:
        parent = rec.parent(chat)
        assert parent is not None and parent.name.startswith("invoke_agent ")
        assert parent.attributes["gen_ai.agent.id"] == chat.attributes["gen_ai.agent.id"]
        assert chat.kind.name == "CLIENT"
        assert chat.attributes["gen_ai.operation.name"] == "chat"
        assert chat.attributes["gen_ai.provider.name"] == "scripted"
        assert chat.attributes["gen_ai.request.model"] == "scripted"
        assert chat.attributes["gen_ai.response.model"] == "scripted"
        assert chat.attributes["gen_ai.usage.cache_read.input_tokens"] == 5
        assert chat.attributes["gen_ai.usage.cache_creation.input_tokens"] == 3
        assert chat.attributes["gen_ai.usage.input_tokens"] == 11 + 5 + 3
        assert tuple(chat.attributes["gen_ai.response.finish_reasons"]) in {
            ("end_turn",),
            ("tool_use",),
        }

    usage = result.payload["usage"]

    def total(key: str) -> int:
        return sum(int(c.attributes[key]) for c in chats)

    assert total("gen_ai.usage.output_tokens") == usage["output_tokens"]
    assert total("gen_ai.usage.cache_read.input_tokens") == usage["cache_read_input_tokens"]
    assert total("gen_ai.usage.cache_creation.input_tokens") == usage["cache_creation_input_tokens"]
    all_input = (
        usage["input_tokens"]
        + usage["cache_read_input_tokens"]
        + usage["cache_creation_input_tokens"]
    )
    assert total("gen_ai.usage.input_tokens") == all_input
    # Each agent span carries its own run's totals (its chat spans'); they add up to the
    # session's too.
    agents = rec.named("invoke_agent ")
    for agent in agents:
        own = [
            c
            for c in chats
            if c.attributes["gen_ai.agent.id"] == agent.attributes["gen_ai.agent.id"]
        ]
        for key in ("gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens"):
            assert agent.attributes[key] == sum(int(c.attributes[key]) for c in own), key
    assert (
        sum(int(a.attributes["gen_ai.usage.output_tokens"]) for a in agents)
        == (usage["output_tokens"])
    )


async def test_spec_15_events_and_metrics(tmp_path: Path) -> None:
    rec, result = await _run(tmp_path)

    for span in rec.named("invoke_agent "):
        events = {e.name: e for e in span.events}
        selected = events["subagents.agent.selected"].attributes
        assert selected is not None
        assert selected["agent_type"] == span.attributes["gen_ai.agent.name"]
        assert selected["is_fork"] == span.attributes["subagents.agent.is_fork"]
        assert selected["is_async"] == span.attributes["subagents.agent.is_background"]
        assert selected["model"] == "scripted"
        terminated = events["subagents.agent.terminated"].attributes
        assert terminated is not None
        assert terminated["reason"] == "completed" and int(terminated["duration_ms"]) >= 0
    sources = {
        str(s.attributes["gen_ai.agent.name"]): s.attributes["subagents.agent.source"]
        for s in rec.named("invoke_agent ")
    }
    assert sources == {
        "main": "session",
        "Explore": "built-in",
        "general-purpose": "built-in",
        "fork": "fork",
    }

    usage = result.payload["usage"]
    tokens: dict[str, int] = {}
    for point in rec.metric_points("subagents.token.usage"):
        kind = str(point.attributes["type"])
        tokens[kind] = tokens.get(kind, 0) + point.value
    assert tokens == {
        "input": usage["input_tokens"],
        "output": usage["output_tokens"],
        "cache_read": usage["cache_read_input_tokens"],
        "cache_creation": usage["cache_creation_input_tokens"],
    }
    by_type = {
        str(p.attributes["gen_ai.agent.name"]): p.value
        for p in rec.metric_points("subagents.token.usage")
        if p.attributes["type"] == "output"
    }
    assert by_type["Explore"] == 7 and by_type["general-purpose"] == 3 * 7
    running = [p.value for p in rec.metric_points("subagents.agents.running")]
    assert running and all(v == 0 for v in running), "every child counted down again"
    calls = {
        str(p.attributes["gen_ai.tool.name"]): p.value
        for p in rec.metric_points("subagents.tool.calls")
    }
    assert calls == {"Agent": 4, "Read": 1}
    durations = list(rec.metric_points("gen_ai.client.operation.duration"))
    assert sum(p.count for p in durations) == len(rec.named("chat "))


def _all_text(rec: Recorded) -> str:
    parts: list[str] = []
    for span in rec.spans:
        parts.append(json.dumps(dict(span.attributes or {}), default=str))
        for event in span.events:
            parts.append(json.dumps(dict(event.attributes or {}), default=str))
    return "\n".join(parts)


async def test_no_prompt_or_tool_content_is_recorded_by_default(tmp_path: Path) -> None:
    rec, _ = await _run(tmp_path)

    text = _all_text(rec)
    for secret in ("coordinate the work", "first sync job", "sync result", "secret notes"):
        assert secret not in text
    assert "notes.txt" not in text  # a tool input
    assert "job" not in text  # the Agent calls' descriptions


async def test_content_is_recorded_when_asked(tmp_path: Path) -> None:
    rec, _ = await _run(tmp_path, log_prompts=True, tool_details=True)

    (main,) = rec.named("invoke_agent main")
    messages = json.loads(str(main.attributes["gen_ai.input.messages"]))
    assert "coordinate the work" in messages[0]["parts"][0]["content"]
    outputs = [json.loads(str(c.attributes["gen_ai.output.messages"])) for c in rec.named("chat ")]
    assert any(p.get("content") == "sync result" for o in outputs for p in o[0]["parts"])
    (read,) = rec.named("execute_tool Read")
    assert json.loads(str(read.attributes["gen_ai.tool.call.arguments"])) == {
        "file_path": "notes.txt"
    }
    assert "secret notes" in str(read.attributes["gen_ai.tool.call.result"])


async def test_permission_decisions_name_the_rule(tmp_path: Path) -> None:
    rule = "Read(./notes.txt)"
    rec, _ = await _run(tmp_path, settings={"permissions": {"deny": [rule]}})

    (read,) = rec.named("execute_tool Read")
    assert read.attributes["error.type"] == "permission_denied"
    (decision,) = [e for e in read.events if e.name == "subagents.permission.decision"]
    attributes = dict(decision.attributes or {})
    assert attributes["tool"] == "Read" and attributes["behavior"] == "deny"
    assert attributes["decided_by"] == "rule" and attributes["rule"] == rule
    assert str(attributes["rule_source"]).endswith("settings.json")
    assert "message" not in attributes  # it quotes the call: only with tool details
    by_mode = [
        e
        for s in rec.named("execute_tool Agent")
        for e in s.events
        if e.name == "subagents.permission.decision"
    ]
    assert by_mode == [], "an allow by the mode alone is not recorded"


async def test_an_allow_by_rule_is_recorded_with_its_rule(tmp_path: Path) -> None:
    rule = "Read(./notes.txt)"
    # With a deny rule in force, rules are matched even for a read-only call.
    permissions = {"allow": [rule], "deny": ["Bash(rm:*)"]}
    rec, _ = await _run(tmp_path, settings={"permissions": permissions})

    (read,) = rec.named("execute_tool Read")
    assert "error.type" not in read.attributes
    (decision,) = [e for e in read.events if e.name == "subagents.permission.decision"]
    attributes = dict(decision.attributes or {})
    assert attributes["behavior"] == "allow" and attributes["decided_by"] == "rule"
    assert attributes["rule"] == rule


async def test_a_compaction_summary_is_a_model_call_of_the_agent_it_compacts(
    tmp_path: Path,
) -> None:
    big = tmp_path / "big.txt"
    big.write_text("".join(f"line {i:04d} {'x' * 90}\n" for i in range(400)))  # ~10,000 tokens
    script = {
        "agents": [
            {
                "agent_type": "main",
                "turns": [
                    _turn(tool_calls=[{"name": "Read", "input": {"file_path": str(big)}}]),
                    _turn(text="final answer"),
                ],
            },
            {"agent_type": "compact", "turns": [_turn(text="SUMMARY: big.txt was read")]},
        ]
    }
    config = RuntimeConfig(autocompact_tokens=6000)
    rec, result = await _run(tmp_path, script=script, config=config)

    (main,) = rec.named("invoke_agent main")
    chats = rec.named("chat ")
    assert len(chats) == result.model_calls == 3
    assert all(rec.parent(c) is main for c in chats)
    (summary,) = [c for c in chats if c.attributes.get("subagents.call.purpose") == "compaction"]
    assert summary.attributes["subagents.compaction.ordinal"] == 1
    assert summary.attributes["gen_ai.agent.name"] == "main"  # the agent pays for its summary
    assert summary.attributes["gen_ai.agent.id"] == result.session_id
    assert summary.attributes["gen_ai.usage.output_tokens"] == 7
    usage = result.payload["usage"]
    assert (
        sum(int(c.attributes["gen_ai.usage.output_tokens"]) for c in chats)
        == (usage["output_tokens"])
        == 3 * 7
    )
    (event,) = [e for e in main.events if e.name == "subagents.compaction"]
    assert event.attributes is not None and event.attributes["method"] == "summary"
    outputs = {
        str(p.attributes["gen_ai.agent.name"]): p.value
        for p in rec.metric_points("subagents.token.usage")
        if p.attributes["type"] == "output"
    }
    assert outputs == {"main": 3 * 7}
    durations = {
        p.attributes.get("subagents.call.purpose"): p.count
        for p in rec.metric_points("gen_ai.client.operation.duration")
    }
    assert durations == {None: 2, "compaction": 1}


async def test_memory_loaded_is_an_event_of_the_call_that_spawned_the_agent(
    tmp_path: Path,
) -> None:
    agents = tmp_path / ".claude" / "agents"
    agents.mkdir(parents=True)
    definition = (
        "---\nname: noter\ndescription: Keeps notes\nmemory: project\n---\nYou keep notes.\n"
    )
    (agents / "noter.md").write_text(definition)
    script = {
        "agents": [
            {
                "agent_type": "main",
                "turns": [_turn(tool_calls=[agent_call("take notes", "noter")]), _turn(text="ok")],
            },
            {"agent_type": "noter", "turns": [_turn(text="noted")]},
        ]
    }
    rec, _ = await _run(tmp_path, script=script)

    (call,) = rec.named("execute_tool Agent")
    (child,) = rec.named("invoke_agent noter")
    assert rec.parent(child) is call
    (loaded,) = [e for s in rec.spans for e in s.events if e.name == "subagents.memory_loaded"]
    assert loaded in call.events
    attributes = dict(loaded.attributes or {})
    assert attributes["scope"] == "project" and attributes["source"] == "project"
    assert attributes["loaded"] is False  # no MEMORY.md yet
