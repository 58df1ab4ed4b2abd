"""What an agent definition is, and how one is read from Markdown or from ``--agents`` JSON.

A definition file is Claude Code's format, unchanged: YAML frontmatter between ``---`` lines,
then the Markdown body, which is the system prompt. Field names are Claude Code's
(``disallowedTools``, ``permissionMode``, ``maxTurns`` ...). Validation goes through a pydantic
model so a wrong type is reported once, naming the file, the field and (when YAML can tell) the
line; the result is a frozen ``AgentDefinition`` the rest of the runtime reads.

Unknown fields are never fatal: Claude Code adds fields over time and a file written for a newer
version must still load here. They are kept in ``AgentDefinition.extra`` and warned about.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

DefinitionSource = Literal["built-in", "user", "project", "cli"]
PermissionMode = Literal["acceptEdits", "bypassPermissions", "default", "dontAsk", "plan"]

CLI_FILE = "--agents"
"""The ``file`` of errors found in the ``--agents`` JSON given on the command line."""

RESERVED_NAME = "verification"

_NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]*$")
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
    """The agent type, as ``subagent_type`` names it."""
    description: str
    """When to use this agent; shown to the coordinating model."""
    tools: tuple[str, ...] | None = None
    """Allowed tools (entries like ``Bash(git status:*)`` allowed); ``None`` inherits all."""
    disallowed_tools: tuple[str, ...] = ()
    """Tools removed even when ``tools`` or inheritance would grant them."""
    model: str | None = None
    """``sonnet``, ``opus``, ``haiku``, ``inherit`` or a full model id; ``None`` inherits."""
    permission_mode: PermissionMode | None = None
    """The child's permission mode; ``None`` takes the parent's."""
    max_turns: int | None = None
    """Model calls allowed before the child ends with ``max_turns``."""
    background: bool = False
    """Always run this agent in the background."""
    isolation: Literal["worktree"] | None = None
    """``worktree``: run in a fresh git worktree managed by the host."""
    color: str | None = None
    """Display colour in the interactive panel."""
    memory: str | None = None
    """Persistent memory scope (Claude Code: ``user``, ``project`` or ``local``)."""
    hooks: dict[str, Any] | None = None
    """Hook settings active while this agent runs, in the settings-file shape."""
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
    """1-based line in ``file`` when YAML could tell."""

    def __str__(self) -> str:
        where = f" (line {self.line})" if self.line is not None else ""
        return f"{self.file}: {self.field}: {self.message}{where}"


def split_names(value: str) -> list[str]:
    """Split a comma-separated list, keeping commas inside parentheses (``Bash(a, b)``)."""
    parts: list[str] = []
    depth = 0
    current: list[str] = []
    for char in value:
        if char == "," and depth == 0:
            parts.append("".join(current))
            current = []
            continue
        depth += {"(": 1, ")": -1}.get(char, 0)
        current.append(char)
    parts.append("".join(current))
    return [part.strip() for part in parts if part.strip()]


def _string_list(value: Any, what: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return tuple(split_names(value))
    if isinstance(value, list | tuple) and all(isinstance(item, str) for item in value):
        return tuple(item.strip() for item in value if item.strip())
    raise ValueError(f"must be a list of {what} or a comma-separated string")


class _AgentFields(BaseModel):
    """The optional fields shared by frontmatter and ``--agents`` entries (Claude Code names)."""

    tools: tuple[str, ...] | None = None
    disallowedTools: tuple[str, ...] = ()
    model: str | None = None
    permissionMode: PermissionMode | None = None
    maxTurns: int | None = Field(default=None, gt=0)
    background: bool = False
    isolation: Literal["worktree"] | None = None
    color: str | None = None
    memory: str | None = None
    hooks: dict[str, Any] | None = None
    mcpServers: tuple[str | dict[str, Any], ...] = ()
    requiredMcpServers: tuple[str, ...] = ()
    skills: tuple[str, ...] = ()

    @field_validator("tools", mode="before")
    @classmethod
    def _tools(cls, value: Any) -> tuple[str, ...] | None:
        # Missing, empty and "*" all mean: inherit every tool of the parent.
        names = _string_list(value, "tool names")
        return None if not names or "*" in names else names

    @field_validator("disallowedTools", mode="before")
    @classmethod
    def _disallowed(cls, value: Any) -> tuple[str, ...]:
        return _string_list(value, "tool names")

    @field_validator("requiredMcpServers", "skills", mode="before")
    @classmethod
    def _names(cls, value: Any) -> tuple[str, ...]:
        return _string_list(value, "names")

    @field_validator("maxTurns", mode="before")
    @classmethod
    def _turns(cls, value: Any) -> Any:
        if isinstance(value, bool):  # pydantic only reports ValueError as a field error
            raise ValueError("must be a positive whole number, not true/false")  # noqa: TRY004
        return value

    @field_validator("mcpServers", mode="before")
    @classmethod
    def _mcp(cls, value: Any) -> Any:
        if value is None:
            return ()
        if isinstance(value, dict):  # {name: config} -> one inline entry per server
            return tuple({name: config} for name, config in value.items())
        if isinstance(value, str):
            return tuple(split_names(value))
        if isinstance(value, list):
            return tuple(value)
        raise ValueError("must be a list of server names or {name: config} entries")

    @field_validator("model", "color", "memory", mode="before")
    @classmethod
    def _blank_is_none(cls, value: Any) -> Any:
        return None if isinstance(value, str) and not value.strip() else value


class AgentFrontmatter(_AgentFields):
    """The YAML frontmatter of a definition file; unknown keys are allowed (and warned)."""

    model_config = ConfigDict(extra="allow")

    name: str
    description: str

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        return check_name(value)

    @field_validator("description")
    @classmethod
    def _description(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must not be empty: say when this agent should be used")
        return value.strip()


class CliAgentSpec(_AgentFields):
    """One entry of ``--agents JSON``: strict types, no unknown keys (a typo must not pass)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    description: str = Field(min_length=1)
    prompt: str


def check_name(value: str) -> str:
    """An agent type: letters, digits, ``-``, ``_``, ``.``, ``:``; starting alphanumeric."""
    value = value.strip()
    if not _NAME_PATTERN.match(value):
        raise ValueError(
            f"{value!r} is not a valid agent name (letters, digits, '-', '_', '.', ':'; "
            "starting with a letter or digit)"
        )
    return value


def to_definition(
    fields: _AgentFields,
    *,
    name: str,
    description: str,
    system_prompt: str,
    source: DefinitionSource,
    path: str | None,
    extra: dict[str, Any],
) -> AgentDefinition:
    """The runtime definition for validated fields."""
    return AgentDefinition(
        name=name,
        description=description,
        tools=fields.tools,
        disallowed_tools=fields.disallowedTools,
        model=fields.model,
        permission_mode=fields.permissionMode,
        max_turns=fields.maxTurns,
        background=fields.background,
        isolation=fields.isolation,
        color=fields.color,
        memory=fields.memory,
        hooks=fields.hooks,
        mcp_servers=fields.mcpServers,
        required_mcp_servers=fields.requiredMcpServers,
        skills=fields.skills,
        system_prompt=system_prompt,
        source=source,
        path=path,
        extra=extra,
    )


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
        problems.append((loc[0] if loc else "frontmatter", message))
    field_name, message = problems[0]
    others = [f"{name}: {text}" for name, text in problems[1:]]
    if others:
        message += f" (also: {'; '.join(others)})"
    return field_name, message


@dataclass(kw_only=True)
class ParsedFile:
    """The outcome of reading one definition file: a definition or an error, plus warnings."""

    definition: AgentDefinition | None = None
    error: DefinitionError | None = None
    warnings: list[str] = field(default_factory=list)


def parse_agent_markdown(text: str, *, path: str, source: DefinitionSource) -> ParsedFile:
    """Read one Claude Code definition file's text into a definition, or one clear error."""
    result = ParsedFile()
    split = _split_frontmatter(text)
    if isinstance(split, str):
        result.error = DefinitionError(file=path, field="frontmatter", message=split, line=1)
        return result
    yaml_text, body = split
    data = _load_yaml(yaml_text, path, result)
    if data is None:
        return result
    try:
        fields = AgentFrontmatter.model_validate(data)
    except ValidationError as exc:
        field_name, message = first_problem(exc)
        line = _key_lines(yaml_text).get(field_name)
        result.error = DefinitionError(file=path, field=field_name, message=message, line=line)
        return result
    extra = dict(fields.model_extra or {})
    for key in extra:
        result.warnings.append(f"{path}: {key}: unknown field, kept but not used")
    if not body.strip():
        result.warnings.append(f"{path}: body: the system prompt (Markdown body) is empty")
    result.definition = to_definition(
        fields,
        name=fields.name,
        description=fields.description,
        system_prompt=body.strip(),
        source=source,
        path=path,
        extra=extra,
    )
    return result


def _split_frontmatter(text: str) -> tuple[str, str] | str:
    """(yaml, body), or the reason there is no frontmatter block."""
    lines = text.removeprefix("\ufeff").splitlines(keepends=True)
    if not lines or lines[0].strip() != "---":
        return "the file must start with a '---' line opening the YAML frontmatter"
    for index in range(1, len(lines)):
        if lines[index].strip() == "---":
            return "".join(lines[1:index]), "".join(lines[index + 1 :])
    return "the YAML frontmatter has no closing '---' line"


def _load_yaml(yaml_text: str, path: str, result: ParsedFile) -> dict[str, Any] | None:
    """The frontmatter mapping, or ``None`` with ``result.error`` set."""
    try:
        data = yaml.safe_load(yaml_text)
    except yaml.YAMLError as exc:
        data = _lenient_yaml(yaml_text)
        if data is None:
            mark = getattr(exc, "problem_mark", None)
            line = mark.line + 2 if mark is not None else None
            problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
            message = f"invalid YAML: {problem}"
            result.error = DefinitionError(
                file=path, field="frontmatter", message=message, line=line
            )
            return None
        result.warnings.append(
            f"{path}: frontmatter: not valid YAML; read unquoted values with ': ' as plain text"
        )
    if data is None:
        data = {}
    if not isinstance(data, dict):
        message = "must be a mapping of fields (name: ..., description: ...)"
        result.error = DefinitionError(file=path, field="frontmatter", message=message, line=2)
        return None
    return {str(key): value for key, value in data.items()}


_PLAIN_ENTRY = re.compile(r"^([A-Za-z_][\w-]*):[ \t]+(\S.*?)\s*$")


def _lenient_yaml(yaml_text: str) -> dict[str, Any] | None:
    """Claude Code files often hold ``description: Use when: ...`` unquoted, which is not YAML.

    Retry with every top-level plain value quoted as a string; ``None`` if that fails too.
    """
    lines = []
    for line in yaml_text.splitlines():
        match = _PLAIN_ENTRY.match(line)
        if match and match.group(2)[0] not in "'\"[{|>&*!#":
            line = f"{match.group(1)}: {json.dumps(match.group(2))}"
        lines.append(line)
    try:
        data = yaml.safe_load("\n".join(lines))
    except yaml.YAMLError:
        return None
    return data if isinstance(data, dict) else None


def _key_lines(yaml_text: str) -> dict[str, int]:
    """1-based file line of each top-level frontmatter key (the ``---`` line is line 1)."""
    try:
        node = yaml.compose(yaml_text, Loader=yaml.SafeLoader)
    except yaml.YAMLError:
        return {}
    if not isinstance(node, yaml.MappingNode):
        return {}
    return {str(key.value): key.start_mark.line + 2 for key, _ in node.value}


def parse_cli_agents(text: str) -> tuple[list[AgentDefinition], list[DefinitionError]]:
    """Strictly parse ``--agents JSON``; every problem names the agent and the field."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        message = f"invalid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})"
        return [], [DefinitionError(file=CLI_FILE, field="json", message=message)]
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
    try:
        name = check_name(key)
    except ValueError as exc:
        return DefinitionError(file=CLI_FILE, field=f"{key}.name", message=str(exc))
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
    return to_definition(
        fields,
        name=name,
        description=fields.description.strip(),
        system_prompt=fields.prompt.strip(),
        source="cli",
        path=None,
        extra={},
    )


def reserved_message() -> str:
    """Why a user, project or CLI definition may not be named ``verification``."""
    return (
        "'verification' is reserved for the built-in verification agent and cannot be "
        "overridden; choose another name"
    )


def read_agent_file(path: Path, *, source: DefinitionSource) -> ParsedFile:
    """Read and parse one file; unreadable files and reserved names become errors."""
    label = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        result = ParsedFile()
        result.error = DefinitionError(file=label, field="file", message=f"cannot read: {exc}")
        return result
    result = parse_agent_markdown(text, path=label, source=source)
    if result.definition is not None and is_reserved_name(result.definition.name):
        split = _split_frontmatter(text)
        line = _key_lines(split[0]).get("name") if isinstance(split, tuple) else None
        result.error = DefinitionError(
            file=label, field="name", message=reserved_message(), line=line
        )
        result.definition = None
    return result
