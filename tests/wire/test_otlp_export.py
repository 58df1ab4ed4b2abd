"""Telemetry end to end: the real CLI with ``SUBAGENTS_TELEMETRY=1`` exports over OTLP/HTTP to a
receiver on 127.0.0.1 (protobuf decoded with ``opentelemetry-proto``), configured only by the
standard variables; the trace context reaches hook processes and continues a ``TRACEPARENT``
the CLI was started with (docs/telemetry.md)."""

from __future__ import annotations

import json
from pathlib import Path

from cli_helpers import agent_call, run_script, tool_call, write_script
from mcp_helpers import demo, env_for, project, requests_of, tool_results
from subagents.testing.otlp_receiver import OTLPReceiver, ReceivedSpan

OUTER_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
OUTER_SPAN = "00f067aa0ba902b7"


def _project(tmp_path: Path) -> Path:
    (tmp_path / "notes.txt").write_text("hello\n")
    folder = tmp_path / ".claude"
    folder.mkdir()
    hook = {"type": "command", "command": 'echo "$TRACEPARENT" >> traceparents.txt'}
    settings = {"hooks": {"PreToolUse": [{"matcher": "Read", "hooks": [hook]}]}}
    (folder / "settings.json").write_text(json.dumps(settings))
    return write_script(
        tmp_path,
        [
            {
                "agent_type": "main",
                "turns": [
                    {"tool_calls": [agent_call("look around", "Explore")]},
                    {"text": "all done"},
                ],
            },
            {
                "agent_type": "Explore",
                "turns": [
                    {"tool_calls": [tool_call("Read", file_path="notes.txt")]},
                    {"text": "found notes"},
                ],
            },
        ],
    )


def _env(receiver: OTLPReceiver) -> dict[str, str]:
    return {
        "SUBAGENTS_TELEMETRY": "1",
        "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint,
        "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
        "OTEL_SERVICE_NAME": "subagents-e2e",
        "OTEL_RESOURCE_ATTRIBUTES": "deployment.environment=test",
        "TRACEPARENT": f"00-{OUTER_TRACE}-{OUTER_SPAN}-01",
    }


def _one(spans: list[ReceivedSpan], name: str) -> ReceivedSpan:
    (found,) = [s for s in spans if s.name == name]
    return found


def test_a_cli_run_exports_its_spans_over_otlp_http(tmp_path: Path) -> None:
    script = _project(tmp_path)
    with OTLPReceiver() as receiver:
        run = run_script(script, tmp_path, env=_env(receiver))
        assert run.code == 0, run.stderr
        spans = receiver.spans()
        metric_names = receiver.metric_names()

    result = run.json()
    assert result["subtype"] == "success"
    assert {s.trace_id for s in spans} == {OUTER_TRACE}, "continues the caller's trace"
    session = _one(spans, "session")
    assert session.parent_span_id == OUTER_SPAN
    assert session.resource["service.name"] == "subagents-e2e"
    assert session.resource["deployment.environment"] == "test"
    assert session.attributes["session.id"] == result["session_id"]
    main = _one(spans, "invoke_agent main")
    call = _one(spans, "execute_tool Agent")
    child = _one(spans, "invoke_agent Explore")
    read = _one(spans, "execute_tool Read")
    assert main.parent_span_id == session.span_id
    assert call.parent_span_id == main.span_id
    assert child.parent_span_id == call.span_id
    assert read.parent_span_id == child.span_id
    chats = [s for s in spans if s.name.startswith("chat ")]
    assert len(chats) == 4
    assert (
        sum(c.attributes["gen_ai.usage.output_tokens"] for c in chats)
        == (result["usage"]["output_tokens"])
    )
    assert {c.parent_span_id for c in chats} == {main.span_id, child.span_id}
    assert ("subagents.agent.selected", {
        "agent_type": "Explore", "model": child.attributes["gen_ai.request.model"],
        "source": "built-in", "is_fork": False, "is_async": False,
    }) in child.events  # fmt: skip
    assert {"subagents.token.usage", "gen_ai.client.token.usage", "subagents.tool.calls"} <= (
        metric_names
    )

    # The PreToolUse hook ran inside the Read call's span and got its trace context.
    (traceparent,) = (tmp_path / "traceparents.txt").read_text().split()
    assert traceparent == f"00-{OUTER_TRACE}-{read.span_id}-01"


def test_telemetry_off_exports_nothing(tmp_path: Path) -> None:
    script = _project(tmp_path)
    with OTLPReceiver() as receiver:
        env = {**_env(receiver), "SUBAGENTS_TELEMETRY": "0"}
        run = run_script(script, tmp_path, env=env)
        assert run.code == 0, run.stderr
    assert receiver.bodies == 0
    assert (tmp_path / "traceparents.txt").read_text().split() == []


def test_a_bad_exporter_setting_costs_the_telemetry_not_the_run(tmp_path: Path) -> None:
    script = _project(tmp_path)
    with OTLPReceiver() as receiver:
        env = {**_env(receiver), "OTEL_TRACES_EXPORTER": "jaeger-thrift"}
        run = run_script(script, tmp_path, env=env)
    assert run.code == 0, run.stderr
    assert run.json()["subtype"] == "success"
    assert receiver.bodies == 0


def test_an_mcp_server_continues_the_session_trace_and_its_tools_are_extension_spans(
    tmp_path: Path,
) -> None:
    root = project(tmp_path, {"demo": demo()})
    main = {
        "agent_type": "main",
        "turns": [
            {"tool_calls": [{"name": "mcp__demo__env_value", "input": {"name": "TRACEPARENT"}}]},
            {"text": "done"},
        ],
    }
    script = write_script(root, [main])
    with OTLPReceiver() as receiver:
        run = run_script(script, root, env={**env_for(tmp_path), **_env(receiver)})
        assert run.code == 0, run.stderr
        spans = receiver.spans()

    call = _one(spans, "execute_tool mcp__demo__env_value")
    assert call.attributes["gen_ai.tool.type"] == "extension"
    assert "error.type" not in call.attributes
    (result,) = tool_results(requests_of(root, "main")[1])
    _, trace_id, span_id, _ = str(result["content"]).split("-")
    # The session's servers start before its main agent: under the session span.
    assert (trace_id, span_id) == (OUTER_TRACE, _one(spans, "session").span_id)
