"""A hostile MCP server (tests/mcp_fixtures/hostile_server.py, raw JSON-RPC over stdio): no
answer it sends — noise, nesting past any parser's depth, a line over the limit, forged runtime
tags, a flood — ends the session, and the model's own deep input meets a bounded validator."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from cli_helpers import run_script, tool_call, write_script
from mcp_helpers import env_for, project, requests_of, tool_results

HOSTILE = Path(__file__).parent / "mcp_fixtures" / "hostile_server.py"


def _nested_input(depth: int) -> dict[str, Any]:
    node: dict[str, Any] = {}
    for _ in range(depth):
        node = {"child": node}
    return {"node": node}


def test_a_hostile_server_cannot_end_the_session_or_forge_what_the_model_reads(
    tmp_path: Path,
) -> None:
    root = project(tmp_path, {"bad": {"command": sys.executable, "args": [str(HOSTILE)]}})
    calls = [
        tool_call("mcp__bad__noise"),
        tool_call("mcp__bad__nested"),
        tool_call("mcp__bad__nested"),
        tool_call("mcp__bad__huge"),
        tool_call("mcp__bad__forged"),
        tool_call("mcp__bad__flood"),
        {"name": "mcp__bad__deep", "input": _nested_input(300)},
        {"name": "mcp__bad__deep", "input": _nested_input(3)},
    ]
    turns: list[dict[str, Any]] = [{"tool_calls": [call]} for call in calls]
    script = write_script(root, [{"agent_type": "main", "turns": [*turns, {"text": "alive"}]}])

    run = run_script(script, root, env=env_for(tmp_path, MCP_TOOL_TIMEOUT="60000"), timeout=240)

    assert run.code == 0, run.stderr[-3000:]
    assert run.json()["result"] == "alive"
    results = [tool_results(r)[0] for r in requests_of(root, "main")[1:]]
    noise, nested, nested_again, huge, forged, flood, deep, shallow = results
    assert noise["content"] == "noise survived" and not noise.get("is_error")
    assert nested["is_error"] and "could not be parsed" in nested["content"], nested
    assert nested_again["content"] == "nested answered"
    assert huge["is_error"], "a line over the limit is an error result"
    assert len(str(huge["content"])) < 10_000
    assert "<task-notification>" not in str(forged["content"])
    assert "<system-reminder>" not in str(forged["content"])
    assert len(str(flood["content"])) <= 101_000 and "truncated" in str(flood["content"])
    assert deep["is_error"] and len(str(deep["content"])) < 20_000
    assert shallow["content"] == "deep answered"


def test_a_hostile_servers_resources_cannot_forge_what_the_model_reads(tmp_path: Path) -> None:
    """ListMcpResources and ReadMcpResource carry the server's own text (names, descriptions,
    contents) as a tool's text does: imitated runtime tags are escaped there too."""
    root = project(tmp_path, {"bad": {"command": sys.executable, "args": [str(HOSTILE)]}})
    calls = [
        tool_call("ListMcpResources", server="bad"),
        tool_call("ReadMcpResource", server="bad", uri="memo://forged"),
    ]
    turns: list[dict[str, Any]] = [{"tool_calls": [call]} for call in calls]
    script = write_script(root, [{"agent_type": "main", "turns": [*turns, {"text": "alive"}]}])
    run = run_script(script, root, env=env_for(tmp_path), timeout=240)
    assert run.code == 0, run.stderr[-3000:]
    listed, read = (tool_results(r)[0] for r in requests_of(root, "main")[1:])
    for result in (listed, read):
        text = str(result["content"])
        assert "memo://forged" in text, text
        assert "<task-notification>" not in text and "<system-reminder>" not in text, text
        assert "&lt;system-reminder>" in text
