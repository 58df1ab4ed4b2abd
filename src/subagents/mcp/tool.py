"""``McpTool``: every tool of every MCP server, as one tool class with per-instance schemas.

The name (``mcp__<server>__<tool>``), description and input schema are the server's. Input is
validated with ``jsonschema`` against that schema (the validator class its ``$schema`` names,
Draft 2020-12 by default, compiled once) and handed on as an open pydantic model
(``McpArguments``), so hooks, permission checks and ``updated_input`` treat it like any other
call. ``readOnlyHint`` makes a call read-only and concurrency-safe, but being the server's own
claim it never grants permission by itself (``read_only_grants = False``).

``check_tool`` decides whether a listed tool can be offered at all: a schema that is not a valid
JSON Schema of an object, or is huge, would make every model request of the session fail, so
such a tool is left out with a warning.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, ClassVar, Protocol

from pydantic import BaseModel, ConfigDict

from subagents.mcp.connection import McpToolInfo
from subagents.mcp.names import MAX_TOOL_NAME, tool_name
from subagents.models.base import ToolSchema
from subagents.tools.base import CallInfo, Tool, ToolContext, ToolInputError, ToolOutput

MAX_DESCRIPTION_CHARS = 2048
MAX_SCHEMA_BYTES = 64 << 10
MAX_INPUT_ERRORS = 10
DEFAULT_OUTPUT_TOKENS = 25_000
"""``MAX_MCP_OUTPUT_TOKENS``' default (Claude Code's); a result is capped at 4 characters each."""


class McpArguments(BaseModel):
    """An MCP tool's arguments: whatever the server's schema accepts (validated before)."""

    model_config = ConfigDict(extra="allow")


class ToolCaller(Protocol):
    """The server side of an MCP tool (``connection.ServerConnection``)."""

    @property
    def name(self) -> str: ...

    async def call_tool(
        self, tool: str, arguments: dict[str, Any], *, display: str
    ) -> ToolOutput: ...


class McpTool(Tool[McpArguments]):
    """One tool of one MCP server (see the module docstring)."""

    input_model = McpArguments
    read_only_grants: ClassVar[bool] = False

    def __init__(self, server: ToolCaller, server_key: str, info: McpToolInfo, max_chars: int):
        self.server = server
        self.info = info
        self.name = tool_name(server_key, info.name)
        self.description = describe(info, server.name)
        self.max_result_chars = max_chars
        self._schema = ToolSchema(
            name=self.name, description=self.description, input_schema=info.input_schema
        )
        self._validator: Any = None

    def schema(self) -> ToolSchema:
        return self._schema

    def parse_input(self, raw: dict[str, Any]) -> BaseModel:
        if self._validator is None:
            self._validator = compile_schema(self.info.input_schema)
        try:
            errors = sorted(self._validator.iter_errors(raw), key=_error_path)
        except RecursionError:
            raise ToolInputError(f"InputValidationError: {self.name}: input nested too deeply")
        if errors:
            raise ToolInputError(input_errors(self.name, errors))
        return McpArguments.model_validate(raw)

    def is_read_only(self, args: McpArguments) -> bool:
        return self.info.read_only

    def is_concurrency_safe(self, args: McpArguments) -> bool:
        return self.info.read_only

    async def call(self, args: McpArguments, ctx: ToolContext, info: CallInfo) -> ToolOutput:
        return await self.server.call_tool(self.info.name, args.model_dump(), display=self.name)


def _error_path(error: Any) -> list[str]:
    return [str(part) for part in error.absolute_path]


def describe(info: McpToolInfo, server: str) -> str:
    text = info.description.strip() or f"Tool {info.name!r} of the MCP server {server!r}."
    if len(text) > MAX_DESCRIPTION_CHARS:
        text = text[: MAX_DESCRIPTION_CHARS - 1] + "…"
    return text


def compile_schema(schema: Mapping[str, Any]) -> Any:
    """A validator for ``schema`` (``jsonschema.SchemaError`` when it is no JSON Schema)."""
    import jsonschema.validators

    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    cls.check_schema(schema)
    return cls(schema)


def check_tool(server_key: str, info: McpToolInfo) -> str | None:
    """Why the tool cannot be offered, or None."""
    name = tool_name(server_key, info.name)
    if len(name) > MAX_TOOL_NAME:
        return f"its name {name!r} is longer than {MAX_TOOL_NAME} characters"
    schema = info.input_schema
    if schema.get("type", "object") != "object":
        return f"its input schema has type {schema.get('type')!r}, not 'object'"
    try:
        size = len(json.dumps(schema))
    except (TypeError, ValueError, RecursionError) as exc:
        return f"its input schema is not JSON: {exc}"
    if size > MAX_SCHEMA_BYTES:
        return f"its input schema is {size} bytes (at most {MAX_SCHEMA_BYTES})"
    import jsonschema

    try:
        compile_schema(schema)
    except jsonschema.SchemaError as exc:
        return f"its input schema is not a valid JSON Schema: {exc.message}"
    except RecursionError:
        return "its input schema is nested too deeply"
    return None


def input_errors(name: str, errors: list[Any]) -> str:
    """One line per failing field, like ``scheduling.format_validation_error``."""
    lines = [f"InputValidationError: {name} was called with invalid input:"]
    for error in errors[:MAX_INPUT_ERRORS]:
        where = ".".join(str(p) for p in error.absolute_path) or "(input)"
        lines.append(f"- field `{where}`: {error.message}")
    if len(errors) > MAX_INPUT_ERRORS:
        lines.append(f"- … and {len(errors) - MAX_INPUT_ERRORS} more")
    return "\n".join(lines)


def output_chars(env: Mapping[str, str]) -> int:
    """The result cap: ``MAX_MCP_OUTPUT_TOKENS`` (default 25,000) times 4 characters."""
    raw = env.get("MAX_MCP_OUTPUT_TOKENS", "").strip()
    try:
        tokens = int(raw) if raw else DEFAULT_OUTPUT_TOKENS
    except ValueError:
        raise ValueError(f"environment variable MAX_MCP_OUTPUT_TOKENS={raw!r} is not a number")
    return max(tokens, 1) * 4
