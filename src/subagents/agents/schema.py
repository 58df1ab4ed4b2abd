"""What an agent definition is, and how one is read from ``--agents`` JSON.

``AgentDefinition`` is the frozen record the rest of the runtime reads. Markdown files (Claude
Code's format: YAML frontmatter, then the body as system prompt) are read leniently, field by
field, exactly as Claude Code reads them (``agents/agent_file.py``); ``--agents JSON`` given on
the command line is read strictly here (a typo in a flag must not pass silently), with the same
meaning for every value (``tools: []`` is no tools, ``"*"`` is every tool).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from subagents.agents.frontmatter import clean_name, split_tool_list

DefinitionSource = Literal["built-in", "user", "project", "cli"]
PermissionMode = Literal["acceptEdits", "bypassPermissions", "default", "dontAsk", "plan"]

PERMISSION_MODE_NAMES: tuple[PermissionMode, ...] = (
    "acceptEdits",
    "bypassPermissions",
    "default",
    "dontAsk",
    "plan",
)

CLI_FILE = "--agents"
"""The ``file`` of errors found in the ``--agents`` JSON given on the command line."""

RESERVED_NAME = "verification"

_SEPARATORS = re.compile(r"[\s_\-]+")


def normalize_agent_type(name: str) -> str:
    """The comparison key of an agent type: case and ``-``/``_``/space separators ignored.

    Models and users write ``general_purpose``, ``General Purpose`` or ``explore``; all of them
    mean a definition named ``general-purpose`` or ``Explore``.
    """
    return _SEPARATORS.sub("", name).lower()


def is_reserved_name(name: str) -> bool:
    """True for any spelling of ``verification``, which only the built-in may use."""
    return normalize_agent_type(name) == RESERVED_NAME


@dataclass(kw_only=True, frozen=True)
class AgentDefinition:
    """One agent type: its prompt, tools, model and limits, and where it came from."""

    name: str
    """The agent type, as ``subagent_type`` names it: any non-empty text (``Python Testing
    Expert``, even ``../x``). It is data, never a path: files and ids use the agent id."""
    description: str
    """When to use this agent; shown to the coordinating model."""
    tools: tuple[str, ...] | None = None
    """Allowed tools (entries like ``Bash(git status:*)`` allowed); ``None`` inherits all,
    ``()`` means no tools at all."""
    disallowed_tools: tuple[str, ...] = ()
    """Tools removed even when ``tools`` or inheritance would grant them (``*``: every tool)."""
    model: str | None = None
    """``sonnet``, ``opus``, ``haiku``, ``inherit`` or a full model id; ``None`` inherits."""
    permission_mode: PermissionMode | None = None
    """The child's permission mode; ``None`` takes the parent's."""
    max_turns: int | None = None
    """Model calls allowed before the child ends with ``max_turns``."""
    max_tokens: int | None = None
    """Tokens (all four usage counters) allowed before the child ends with ``max_tokens``."""
    max_wall_ms: int | None = None
    """Wall time allowed before the child ends with ``max_wall_time``."""
    max_cost_usd: float | None = None
    """US dollars (``models.pricing``) allowed before the child ends with ``max_budget_usd``."""
    background: bool = False
    """Always run this agent in the background."""
    isolation: Literal["worktree"] | None = None
    """``worktree``: run in a fresh git worktree managed by the host."""
    color: str | None = None
    """Display colour in the interactive panel."""
    memory: str | None = None
    """Persistent memory scope (Claude Code: ``user``, ``project`` or ``local``)."""
    hooks: Any = None
    """Hook settings active while this agent runs, in the settings-file shape, as written.
    Checked at load (a warning) and again when the agent starts: malformed hooks refuse the
    start rather than run the agent without them."""
    mcp_servers: tuple[str | dict[str, Any], ...] = ()
    """MCP servers by name, or inline ``{name: config}`` entries."""
    required_mcp_servers: tuple[str, ...] = ()
    """MCP servers that must be connected for this agent to start."""
    skills: tuple[str, ...] = ()
    """Skills preloaded into the agent's context."""
    system_prompt: str = ""
    """The Markdown body (or the ``prompt`` of a ``--agents`` entry)."""
    source: DefinitionSource
    """Which layer defined it; later layers override earlier ones by name."""
    path: str | None = None
    """The file it was read from; ``None`` for built-ins and ``--agents``."""
    extra: dict[str, Any] = field(default_factory=dict)
    """Frontmatter fields this runtime does not know, kept as written."""
    read_only: bool = False
    """Read-only research agent: gets the slimmed context (no CLAUDE.md, no git status)."""
    critical_reminder: str | None = None
    """A short reminder repeated to the agent on every turn (built-in verification uses it)."""


@dataclass(kw_only=True, frozen=True)
class DefinitionError:
    """A definition that could not be loaded: which file, which field, what is wrong."""

    file: str
    field: str
    message: str
    line: int | None = None
    """1-based line in ``file`` when it is known."""

    def __str__(self) -> str:
        where = f" (line {self.line})" if self.line is not None else ""
        return f"{self.file}: {self.field}: {self.message}{where}"


@dataclass(kw_only=True)
class ParsedFile:
    """The outcome of reading one definition file: a definition, an error (a file Claude Code
    would refuse too), or neither when it is not an agent file at all (``skipped``, with a
    warning saying so), plus warnings about values that were ignored."""

    definition: AgentDefinition | None = None
    error: DefinitionError | None = None
    skipped: bool = False
    warnings: list[str] = field(default_factory=list)


def reserved_message() -> str:
    """Why a user, project or CLI definition may not be named ``verification``."""
    return (
        "'verification' is reserved for the built-in verification agent and cannot be "
        "overridden; choose another name"
    )


# -- --agents JSON ---------------------------------------------------------------------------


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
