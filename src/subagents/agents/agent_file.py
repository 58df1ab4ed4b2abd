"""Reading one Claude Code agent file (``.claude/agents/*.md``) the way Claude Code reads it.

Outcomes, and what ``agents validate`` makes of them:

* **loaded** — a definition, plus a warning for every value that was ignored (a bad
  ``permissionMode``, ``maxTurns: 0``, ``isolation: none``, an unknown field ...): Claude Code
  ignores such values, so a file written for it must load here too.
* **skipped** — not an agent file: no frontmatter at its top, or frontmatter with neither
  ``name`` nor ``description`` (reference notes kept beside agents). One warning; not an error.
* **refused** — what Claude Code refuses as well: a frontmatter block that never closes, YAML
  that does not parse even after Claude Code's quote-retry, a missing or non-text ``name`` or
  ``description``, the reserved name ``verification``, or a file that cannot be read safely
  (a FIFO, a device, over the size cap, not UTF-8, nested or aliased past the bounds).

Values follow Claude Code (``loadAgentsDir.ts``): the literal two characters ``\\n`` in a
description become a newline; ``tools`` missing = every tool, ``tools:``/``[]``/``""`` = no tools,
``*`` = every tool, entries split on commas and spaces; ``model: INHERIT`` is ``inherit``;
``background`` is true only for ``true``/``"true"``; ``maxTurns`` takes the leading digits of
a string.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from subagents.agents.frontmatter import (
    clean_name,
    key_lines,
    load_frontmatter,
    positive_int,
    split_frontmatter,
    split_tool_list,
)
from subagents.agents.schema import (
    PERMISSION_MODE_NAMES,
    AgentDefinition,
    DefinitionError,
    DefinitionSource,
    ParsedFile,
    is_reserved_name,
    reserved_message,
)
from subagents.config_files import ConfigFileError, ConfigSyntaxError, read_config_text

MAX_FRONTMATTER_CHARS: Final = 256 * 1024
"""Largest frontmatter parsed: bounds the YAML work per file (~0.5 s worst case)."""

AGENT_COLORS: Final = ("red", "blue", "green", "yellow", "purple", "orange", "pink", "cyan")
MEMORY_SCOPES: Final = ("user", "project", "local")
KNOWN_FIELDS: Final = frozenset(
    {
        "name",
        "description",
        "tools",
        "disallowedTools",
        "model",
        "permissionMode",
        "maxTurns",
        "maxTokens",
        "maxWallTimeMs",
        "maxBudgetUsd",
        "background",
        "isolation",
        "color",
        "memory",
        "hooks",
        "mcpServers",
        "requiredMcpServers",
        "skills",
    }
)

Warn = Callable[[str, str], None]
"""``warn(field, message)``: a value was ignored."""


def read_agent_file(path: Path, *, source: DefinitionSource) -> ParsedFile:
    """Read and parse one file; anything unsafe or unreadable is one error naming the file."""
    label = str(path)
    try:
        text = read_config_text(path)
    except ConfigFileError as exc:
        return ParsedFile(error=DefinitionError(file=label, field="file", message=_own(exc, path)))
    if text is None:
        error = DefinitionError(file=label, field="file", message="no such file")
        return ParsedFile(error=error)
    return parse_agent_markdown(text, path=label, source=source)


def _own(exc: ConfigFileError, path: Path) -> str:
    """The error text without the path prefix (``DefinitionError`` adds the file itself)."""
    return str(exc).removeprefix(f"{path}: ")


def parse_agent_markdown(text: str, *, path: str, source: DefinitionSource) -> ParsedFile:
    """One definition file's text → a definition, one error, or a skip (see module doc)."""
    block = split_frontmatter(text)
    if block is None:
        return _skipped(path, "no YAML frontmatter at the top of the file")
    if isinstance(block, str):
        return _refused(path, "frontmatter", block, line=1)
    if len(block.yaml_text) > MAX_FRONTMATTER_CHARS:
        message = f"larger than {MAX_FRONTMATTER_CHARS:,} characters (real ones are a few KB)"
        return _refused(path, "frontmatter", message, line=1)
    try:
        data = load_frontmatter(block.yaml_text)
    except ConfigSyntaxError as exc:
        line = exc.line + 1 if exc.line is not None else None
        return _refused(path, "frontmatter", f"invalid YAML: {exc}", line=line)
    if data is None:
        data = {}
    if not isinstance(data, dict):
        message = "must be a mapping of fields (name: ..., description: ...)"
        return _refused(path, "frontmatter", message, line=2)
    data = {str(key): value for key, value in data.items()}
    if "name" not in data and "description" not in data:
        return _skipped(path, "frontmatter has no 'name' or 'description'")
    return _from_fields(data, block.body, block.yaml_text, path=path, source=source)


def _skipped(path: str, why: str) -> ParsedFile:
    return ParsedFile(skipped=True, warnings=[f"{path}: skipped, not an agent definition: {why}"])


def _refused(path: str, field: str, message: str, *, line: int | None = None) -> ParsedFile:
    return ParsedFile(error=DefinitionError(file=path, field=field, message=message, line=line))


def _from_fields(
    data: dict[str, Any], body: str, yaml_text: str, *, path: str, source: DefinitionSource
) -> ParsedFile:
    lines = key_lines(yaml_text)
    result = ParsedFile()

    def warn(field: str, message: str) -> None:
        line = lines.get(field)
        where = f" (line {line})" if line is not None else ""
        result.warnings.append(f"{path}: {field}: {message}{where}")

    name, description = data.get("name"), data.get("description")
    problem = _required_text("name", name) or _required_text("description", description)
    if problem is not None:
        field, message = problem
        return _refused(path, field, message, line=lines.get(field))
    assert isinstance(name, str)
    assert isinstance(description, str)
    agent_type = clean_name(name)
    if agent_type != name.strip():
        warn("name", f"control characters replaced by spaces: {agent_type!r}")
    if is_reserved_name(agent_type):
        return _refused(path, "name", reserved_message(), line=lines.get("name"))
    extra = {key: value for key, value in data.items() if key not in KNOWN_FIELDS}
    for key in extra:
        warn(key, "unknown field, kept but not used")
    if not body.strip():
        warn("body", "the system prompt (Markdown body) is empty")
    result.definition = AgentDefinition(
        name=agent_type,
        # Claude Code unescapes a written "\n" (the two characters) into a line break.
        description=description.replace("\\n", "\n"),
        system_prompt=body.strip(),
        source=source,
        path=path,
        extra=extra,
        **_optional_fields(data, warn),
    )
    return result


def _required_text(field: str, value: Any) -> tuple[str, str] | None:
    if value is None:
        return field, "required field is missing"
    if not isinstance(value, str):
        kind = type(value).__name__
        return field, f"must be text, not {kind} (put the value in quotes)"
    if not value.strip():
        return field, "must not be empty"
    return None


def _optional_fields(data: dict[str, Any], warn: Warn) -> dict[str, Any]:
    """Every optional field, each read on its own: a bad value is warned about and ignored."""
    fields: dict[str, Any] = {}
    for key, reader in _READERS.items():
        if key in data:
            value = reader(data[key], _FieldWarn(key, warn))
            if value is not None:
                fields[_ATTRIBUTES.get(key, key)] = value
    return fields


@dataclass(frozen=True, slots=True)
class _FieldWarn:
    """``warn(message)`` for one field's reader; a message about a nested field
    (``hooks.Stop[0].type: ...``) is reported under that field."""

    key: str
    warn: Warn

    def __call__(self, message: str) -> None:
        head, sep, rest = message.partition(": ")
        if sep and head.startswith(f"{self.key}.") and " " not in head:
            self.warn(head, rest)
        else:
            self.warn(self.key, message)


def _tools(value: Any, warn: Callable[[str], None]) -> tuple[str, ...] | None:
    entries = split_tool_list(value)
    if entries == () and value not in (None, "", []):
        warn(f"{value!r} is not a tool list; the agent gets no tools (as in Claude Code)")
    return entries


def _no_tools_is_default(value: Any, warn: Callable[[str], None]) -> tuple[str, ...]:
    """``tools`` returns ``None`` for every tool; for the others ``*`` is spelled out."""
    entries = split_tool_list(value)
    return ("*",) if entries is None else entries


def _model(value: Any, warn: Callable[[str], None]) -> str | None:
    if not isinstance(value, str):
        warn(f"must be text, not {type(value).__name__}; ignored (the parent's model is used)")
        return None
    model = value.strip()
    if not model:
        return None
    return "inherit" if model.lower() == "inherit" else model


def _permission_mode(value: Any, warn: Callable[[str], None]) -> str | None:
    if value in PERMISSION_MODE_NAMES:
        return str(value)
    if value == "auto":
        warn(
            "'auto' (classifier-approved mode) is not built here; ignored, the agent "
            "takes its parent's mode"
        )
        return None
    if value not in (None, ""):
        choices = ", ".join(PERMISSION_MODE_NAMES)
        warn(f"{value!r} is not a permission mode ({choices}); ignored")
    return None


def _max_turns(value: Any, warn: Callable[[str], None]) -> int | None:
    turns = positive_int(value)
    if turns is None and value is not None:
        warn(f"{value!r} is not a positive whole number; ignored (no turn limit)")
    return turns


def _positive_limit(unit: str) -> Callable[[Any, Callable[[str], None]], int | None]:
    """``maxTokens``, ``maxWallTimeMs`` (ours, docs/compaction.md §8), read like ``maxTurns``."""

    def read(value: Any, warn: Callable[[str], None]) -> int | None:
        limit = positive_int(value)
        if limit is None and value is not None:
            warn(f"{value!r} is not a positive whole number of {unit}; ignored (no limit)")
        return limit

    return read


def _max_budget_usd(value: Any, warn: Callable[[str], None]) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool) and 0 < value < math.inf:
        return float(value)
    if value is not None:
        warn(f"{value!r} is not a positive number of US dollars; ignored (no cost limit)")
    return None


def _background(value: Any, warn: Callable[[str], None]) -> bool | None:
    if value not in (True, False, "true", "false", None):
        warn(f"{value!r} is not true or false; ignored (runs in the foreground)")
    return True if value in (True, "true") else None


def _choice(allowed: tuple[str, ...], meaning: str) -> Callable[[Any, Callable[[str], None]], Any]:
    def read(value: Any, warn: Callable[[str], None]) -> str | None:
        if value in allowed:
            return str(value)
        if value is not None:
            warn(f"{value!r} is not one of {', '.join(allowed)}; ignored ({meaning})")
        return None

    return read


def _hooks(value: Any, warn: Callable[[str], None]) -> Any:
    from subagents.hooks.config import HookConfigError, parse_hooks  # lazy: see schema

    if value is None:
        return None
    try:
        config = parse_hooks(value, "frontmatter")
    except HookConfigError as exc:
        problem = str(exc).removeprefix("frontmatter: ")
        warn(f"{problem}; this agent will refuse to start until its hooks are fixed")
        return value
    for message in config.warnings:
        warn(message.removeprefix("frontmatter: "))
    return value


def _mcp_servers(value: Any, warn: Callable[[str], None]) -> tuple[Any, ...] | None:
    if isinstance(value, dict):  # {name: config}: one inline entry per server
        value = [{name: config} for name, config in value.items()]
    if isinstance(value, str):
        value = list(split_tool_list(value) or ())
    if not isinstance(value, list):
        warn("must be a list of server names or {name: config} entries; ignored")
        return None
    kept = [item for item in value if isinstance(item, str) or _inline_server(item)]
    if len(kept) != len(value):
        warn("entries that are neither a name nor a {name: config} object were ignored")
    return tuple(kept)


def _inline_server(item: Any) -> bool:
    return isinstance(item, dict) and len(item) == 1 and isinstance(next(iter(item.values())), dict)


_READERS: Final[dict[str, Callable[[Any, Callable[[str], None]], Any]]] = {
    "tools": _tools,
    "disallowedTools": _no_tools_is_default,
    "model": _model,
    "permissionMode": _permission_mode,
    "maxTurns": _max_turns,
    "maxTokens": _positive_limit("tokens"),
    "maxWallTimeMs": _positive_limit("milliseconds"),
    "maxBudgetUsd": _max_budget_usd,
    "background": _background,
    "isolation": _choice(("worktree",), "runs without isolation"),
    "color": _choice(AGENT_COLORS, "default colour"),
    "memory": _choice(MEMORY_SCOPES, "no persistent memory"),
    "hooks": _hooks,
    "mcpServers": _mcp_servers,
    "requiredMcpServers": _no_tools_is_default,
    "skills": _no_tools_is_default,
}

_ATTRIBUTES: Final = {
    "disallowedTools": "disallowed_tools",
    "permissionMode": "permission_mode",
    "maxTurns": "max_turns",
    "maxTokens": "max_tokens",
    "maxWallTimeMs": "max_wall_ms",
    "maxBudgetUsd": "max_cost_usd",
    "mcpServers": "mcp_servers",
    "requiredMcpServers": "required_mcp_servers",
}
