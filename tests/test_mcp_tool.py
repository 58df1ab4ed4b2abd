"""``McpTool`` without a server: validation by the server's schema, which tools are offered,
how results become text, and how permissions treat a server's read-only claim."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from mcp_types import (
    CallToolResult,
    EmbeddedResource,
    ImageContent,
    ResourceLink,
    TextContent,
    TextResourceContents,
)

from subagents.abort import AbortSignal
from subagents.events import AgentRef
from subagents.loop.scheduling import PreparedCall, execute_call, prepare_calls
from subagents.mcp.config import ConfiguredServer
from subagents.mcp.connection import McpToolInfo, ServerConnection
from subagents.mcp.results import render_result
from subagents.mcp.servers import McpSettings, ToolSet
from subagents.mcp.tool import McpTool, check_tool
from subagents.permissions.checker import PermissionChecker
from subagents.permissions.context import PermissionContext
from subagents.permissions.rules import parse_rule
from subagents.tools.base import ToolContext, ToolOutput

SCHEMA = {
    "type": "object",
    "properties": {"text": {"type": "string"}, "n": {"type": "integer", "minimum": 1}},
    "required": ["text"],
    "additionalProperties": False,
}


class FakeServer:
    name = "srv"

    def __init__(self, content: str = "ok") -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.content = content

    async def call_tool(self, tool: str, arguments: dict[str, Any], *, display: str) -> ToolOutput:
        self.calls.append((tool, arguments))
        return ToolOutput(content=self.content)


def _tool(server: Any = None, *, read_only: bool = False, schema: Any = None) -> McpTool:
    info = McpToolInfo(
        name="say", description="Say it.", input_schema=schema or SCHEMA, read_only=read_only
    )
    return McpTool(server or FakeServer(), "srv", info, 1_000)


def _ctx(tmp_path: Path, checker: PermissionChecker | None = None) -> ToolContext:
    return ToolContext(
        cwd=tmp_path,
        roots=(tmp_path,),
        abort=AbortSignal(),
        agent=AgentRef(agent_id="a1", agent_type="main"),
        can_use_tool=checker,
    )


def _prepared(tool: McpTool, raw: dict[str, Any]) -> PreparedCall:
    block = {"type": "tool_use", "id": "t1", "name": tool.name, "input": raw}
    return prepare_calls([block], {tool.name: tool})[0]  # type: ignore[list-item]


def test_the_model_sees_the_servers_name_description_and_schema() -> None:
    tool = _tool(read_only=True)

    schema = tool.schema()

    assert schema.name == "mcp__srv__say"
    assert schema.description == "Say it."
    assert schema.input_schema == SCHEMA
    assert tool.is_read_only(tool.parse_input({"text": "x"}))


def test_input_is_validated_against_the_servers_schema_naming_each_field() -> None:
    call = _prepared(_tool(), {"text": 3, "n": 0, "extra": True})

    assert call.error is not None
    assert call.error.startswith(
        "InputValidationError: mcp__srv__say was called with invalid input"
    )
    assert "- field `text`: 3 is not of type 'string'" in call.error
    assert "- field `n`: 0 is less than the minimum of 1" in call.error
    assert "'extra' was unexpected" in call.error


async def test_valid_input_reaches_the_server_as_given(tmp_path: Path) -> None:
    server = FakeServer()
    tool = _tool(server)

    result = await execute_call(_prepared(tool, {"text": "hi", "n": 2}), _ctx(tmp_path))

    assert result.block["content"] == "ok" and not result.block.get("is_error")
    assert server.calls == [("say", {"text": "hi", "n": 2})]


async def test_results_are_capped_like_other_tools(tmp_path: Path) -> None:
    tool = _tool(FakeServer("y" * 5_000))

    result = await execute_call(_prepared(tool, {"text": "hi"}), _ctx(tmp_path))

    content = str(result.block["content"])
    assert content.startswith("y" * 1_000) and "4000 more characters not shown" in content


@pytest.mark.parametrize(
    ("schema", "reason"),
    [
        ({"type": "string"}, "not 'object'"),
        ({"type": "object", "properties": {"a": {"type": "nonsense"}}}, "not a valid JSON Schema"),
        ({"type": "object", "description": "x" * 70_000}, "bytes (at most"),
    ],
)
def test_tools_that_would_break_every_request_are_left_out(schema: Any, reason: str) -> None:
    info = McpToolInfo(name="t", description="", input_schema=schema, read_only=False)

    problem = check_tool("srv", info)

    assert problem is not None and reason in problem


def test_long_and_clashing_names_are_left_out_with_a_warning() -> None:
    warnings: list[str] = []
    settings = McpSettings(warn=warnings.append)
    server = ServerConnection(
        ConfiguredServer(name="srv", entry=None, scope="cli", source="test"),
        cwd=Path("/"),
        timeouts=settings.timeouts,
    )
    server.tools = [
        McpToolInfo(name=name, description="", input_schema={}, read_only=False)
        for name in ("a.b", "a_b", "x" * 80)
    ]

    tools = ToolSet(settings=settings).tools_of(server)

    assert [t.name for t in tools] == ["mcp__srv__a_b"]
    assert tools[0].schema().input_schema == {"type": "object"}
    assert len(warnings) == 2
    assert "is taken" in warnings[0] and "longer than 64" in warnings[1]


def test_results_keep_text_and_name_what_is_not_text() -> None:
    result = CallToolResult(
        content=[
            TextContent(type="text", text="first"),
            ImageContent(type="image", data="aGVsbG8=", mime_type="image/png"),
            EmbeddedResource(
                type="resource",
                resource=TextResourceContents(uri="file:///a.txt", text="inside"),
            ),
            ResourceLink(type="resource_link", uri="file:///b", name="b"),
        ],
        is_error=True,
    )

    output = render_result(result, server="srv", tool="t")

    assert output.is_error
    assert output.content.split("\n\n") == [
        "first",
        "[image: image/png, 5 bytes — not shown: tool results reach the model as text]",
        "[resource file:///a.txt]\ninside",
        "[resource link: file:///b (b)]",
    ]


def test_structured_content_stands_in_for_missing_blocks() -> None:
    result = CallToolResult(content=[], structured_content={"answer": 42})

    output = render_result(result, server="srv", tool="t")

    assert '"answer": 42' in output.content
    assert output.metadata == {
        "mcp": {"server": "srv", "tool": "t", "structuredContent": {"answer": 42}}
    }


def _checker(tmp_path: Path, **rules: list[str]) -> PermissionChecker:
    parsed = {k: tuple(parse_rule(r) for r in v) for k, v in rules.items()}
    return PermissionChecker(context=PermissionContext(project_root=tmp_path, **parsed))


async def _verdict(tmp_path: Path, checker: PermissionChecker) -> tuple[bool, str]:
    tool = _tool(read_only=True)
    result = await execute_call(_prepared(tool, {"text": "x"}), _ctx(tmp_path, checker))
    return not result.block.get("is_error"), str(result.block["content"])


async def test_a_servers_read_only_claim_does_not_grant_permission(tmp_path: Path) -> None:
    asked, message = await _verdict(tmp_path, _checker(tmp_path))
    by_server, _ = await _verdict(tmp_path, _checker(tmp_path, allow=["mcp__srv"]))
    by_wildcard, _ = await _verdict(tmp_path, _checker(tmp_path, allow=["mcp__srv__*"]))
    denied, why = await _verdict(
        tmp_path, _checker(tmp_path, allow=["mcp__srv"], deny=["mcp__srv__say"])
    )

    assert not asked and "mcp__srv__say" in message  # an ask, denied headless
    assert by_server and by_wildcard
    assert not denied and "mcp__srv__say" in why and "denied" in why
