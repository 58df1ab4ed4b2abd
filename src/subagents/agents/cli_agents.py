"""``--agents JSON``: agent definitions given on the command line, read strictly (a typo in a
flag must not pass silently) with pydantic, with the same meaning for every value as a
definition file (``tools: []`` is no tools, ``"*"`` is every tool).

Its own module, imported only when ``--agents`` is given: a ``-p`` run without it creates none
of this (``CliAgentSpec`` is a pydantic model class, ~2 M instructions to create even unbuilt).
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from subagents.agents.frontmatter import clean_name, split_tool_list
from subagents.agents.schema import (
    CLI_FILE,
    AgentDefinition,
    DefinitionError,
    PermissionMode,
    is_reserved_name,
    reserved_message,
)


def _tool_entries(value: Any) -> tuple[str, ...] | None:
    if not isinstance(value, str | list) or (
        isinstance(value, list) and not all(isinstance(item, str) for item in value)
    ):
        raise ValueError("must be a list of tool names or a comma-separated string")
    return split_tool_list(value)


class CliAgentSpec(BaseModel):
    """One entry of ``--agents JSON``: strict types, no unknown keys (a typo must not pass)."""

    model_config = ConfigDict(extra="forbid", strict=True, defer_build=True)  # only for --agents

    description: str = Field(min_length=1)
    prompt: str
    tools: tuple[str, ...] | None = None
    disallowedTools: tuple[str, ...] = ()
    model: str | None = None
    permissionMode: PermissionMode | None = None
    maxTurns: int | None = Field(default=None, gt=0)
    maxTokens: int | None = Field(default=None, gt=0)
    maxWallTimeMs: int | None = Field(default=None, gt=0)
    maxBudgetUsd: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    background: bool = False
    isolation: Literal["worktree"] | None = None
    color: str | None = None
    memory: Literal["user", "project", "local"] | None = None
    hooks: dict[str, Any] | None = None
    mcpServers: tuple[str | dict[str, Any], ...] = ()
    requiredMcpServers: tuple[str, ...] = ()
    skills: tuple[str, ...] = ()

    @field_validator("tools", mode="before")
    @classmethod
    def _tools(cls, value: Any) -> tuple[str, ...] | None:
        # [] and "" are no tools, "*" is every tool (None), as in Claude Code.
        return None if value is None else _tool_entries(value)

    @field_validator("disallowedTools", "requiredMcpServers", "skills", mode="before")
    @classmethod
    def _names(cls, value: Any) -> tuple[str, ...]:
        if value is None:
            return ()
        entries = _tool_entries(value)
        return ("*",) if entries is None else entries

    @field_validator("maxTurns", "maxTokens", "maxWallTimeMs", "maxBudgetUsd", mode="before")
    @classmethod
    def _limit(cls, value: Any) -> Any:
        if isinstance(value, bool):  # pydantic only reports ValueError as a field error
            raise ValueError("must be a positive number, not true/false")  # noqa: TRY004
        return value

    @field_validator("mcpServers", mode="before")
    @classmethod
    def _mcp(cls, value: Any) -> Any:
        if value is None:
            return ()
        if isinstance(value, dict):  # {name: config} -> one inline entry per server
            return tuple({name: config} for name, config in value.items())
        if isinstance(value, list):
            return tuple(value)
        raise ValueError("must be a list of server names or {name: config} entries")


def first_problem(error: ValidationError) -> tuple[str, str]:
    """(field, message) for a pydantic error: the first field, with any others appended."""
    problems = []
    for item in error.errors():
        loc = [str(part) for part in item["loc"]]
        message = str(item["msg"]).removeprefix("Value error, ")
        if item["type"] == "missing":
            message = "required field is missing"
        elif item["type"] == "extra_forbidden":
            message = "unknown field"
        if len(loc) > 1:
            message = f"{'.'.join(loc[1:])}: {message}"
        problems.append((loc[0] if loc else "json", message))
    field_name, message = problems[0]
    others = [f"{name}: {text}" for name, text in problems[1:]]
    if others:
        message += f" (also: {'; '.join(others)})"
    return field_name, message


def parse_cli_agents(text: str) -> tuple[list[AgentDefinition], list[DefinitionError]]:
    """Strictly parse ``--agents JSON``; every problem names the agent and the field."""
    try:
        data = json.loads(text)
    except (json.JSONDecodeError, RecursionError) as exc:
        detail = (
            f"{exc.msg} (line {exc.lineno}, column {exc.colno})"
            if isinstance(exc, json.JSONDecodeError)
            else "nested too deeply"
        )
        return [], [DefinitionError(file=CLI_FILE, field="json", message=f"invalid JSON: {detail}")]
    if not isinstance(data, dict):
        message = 'must be a JSON object {"NAME": {"description": ..., "prompt": ...}}'
        return [], [DefinitionError(file=CLI_FILE, field="json", message=message)]
    definitions: list[AgentDefinition] = []
    errors: list[DefinitionError] = []
    for key, spec in data.items():
        outcome = _cli_agent(key, spec)
        if isinstance(outcome, DefinitionError):
            errors.append(outcome)
        else:
            definitions.append(outcome)
    return definitions, errors


def _cli_agent(key: str, spec: Any) -> AgentDefinition | DefinitionError:
    name = clean_name(key)
    if not name:
        return DefinitionError(file=CLI_FILE, field=f"{key!r}.name", message="must not be empty")
    if is_reserved_name(name):
        return DefinitionError(file=CLI_FILE, field=f"{key}.name", message=reserved_message())
    if not isinstance(spec, dict):
        message = "must be an object with at least description and prompt"
        return DefinitionError(file=CLI_FILE, field=key, message=message)
    try:
        fields = CliAgentSpec.model_validate(spec)
    except ValidationError as exc:
        field_name, message = first_problem(exc)
        return DefinitionError(file=CLI_FILE, field=f"{key}.{field_name}", message=message)
    hooks_problem = _hooks_problem(fields.hooks)
    if hooks_problem is not None:
        return DefinitionError(file=CLI_FILE, field=f"{key}.hooks", message=hooks_problem)
    return AgentDefinition(
        name=name,
        description=fields.description.strip(),
        tools=fields.tools,
        disallowed_tools=fields.disallowedTools,
        model=(fields.model or "").strip() or None,
        permission_mode=fields.permissionMode,
        max_turns=fields.maxTurns,
        max_tokens=fields.maxTokens,
        max_wall_ms=fields.maxWallTimeMs,
        max_cost_usd=fields.maxBudgetUsd,
        background=fields.background,
        isolation=fields.isolation,
        color=fields.color,
        memory=fields.memory,
        hooks=fields.hooks,
        mcp_servers=fields.mcpServers,
        required_mcp_servers=fields.requiredMcpServers,
        skills=fields.skills,
        system_prompt=fields.prompt.strip(),
        source="cli",
    )


def _hooks_problem(hooks: dict[str, Any] | None) -> str | None:
    """Why ``--agents`` hooks cannot run (strict, like the rest of ``--agents``), or ``None``."""
    # Imported here: the hooks package loads the engine and the loop, which `agents list` and
    # the definition loader do not otherwise need (start-up time).
    from subagents.hooks.config import HookConfigError, parse_hooks

    try:
        parse_hooks(hooks, CLI_FILE)
    except HookConfigError as exc:
        return str(exc).removeprefix(f"{CLI_FILE}: ")
    return None
