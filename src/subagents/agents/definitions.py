"""Where agent definitions come from, which one wins, and which tools a child gets (SPEC §2).

Layers, later overriding earlier by name (compared case- and separator-insensitively):

1. built-ins (``general-purpose``, ``Explore``, ``Plan``, ``verification``);
2. user: ``~/.claude/agents``, then ``$SUBAGENTS_HOME/agents`` (default ``~/.subagents``);
3. project, only when the workspace is trusted: ``.claude/agents``, then ``.subagents/agents``
   of the nearest folder from ``cwd`` up to the git root that has one of them;
4. ``--agents JSON`` from the command line.

``verification`` is reserved: no layer may replace the built-in checker, because the runtime
trusts its verdict. Any other built-in may be overridden. A broken file costs only itself: it
becomes one ``DefinitionError`` and every other file still loads.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from subagents import state
from subagents.agents.agent_file import read_agent_file
from subagents.agents.builtin import BUILTIN_AGENTS, Verdict, parse_verdict
from subagents.agents.schema import (
    CLI_FILE,
    AgentDefinition,
    DefinitionError,
    DefinitionSource,
    ParsedFile,
    normalize_agent_type,
)

__all__ = [
    "ALWAYS_BLOCKED_FOR_CHILDREN",
    "AgentDefinition",
    "DefinitionError",
    "DefinitionSet",
    "Verdict",
    "load_definitions",
    "load_folder",
    "normalize_agent_type",
    "parse_verdict",
    "resolve_tool_names",
    "tool_base_name",
]

ALWAYS_BLOCKED_FOR_CHILDREN = frozenset(
    {"TeamCreate", "TeamDelete", "EnterWorktree", "ExitWorktree"}
)
"""Tools no child gets: worktrees are made by the host, and teams do not nest."""

AGENT_TOOL_NAMES = frozenset({"Agent", "Task"})
"""The Agent tool and its alias; a child gets it only when its definition lists it."""


@dataclass(kw_only=True)
class DefinitionSet:
    """Every definition that loaded (by name), plus what went wrong along the way."""

    definitions: dict[str, AgentDefinition] = field(default_factory=dict)
    errors: list[DefinitionError] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def find(self, agent_type: str) -> AgentDefinition | None:
        """The definition for ``agent_type``: exact name first, then ignoring case/separators."""
        exact = self.definitions.get(agent_type)
        if exact is not None:
            return exact
        key = normalize_agent_type(agent_type)
        for definition in self.definitions.values():
            if normalize_agent_type(definition.name) == key:
                return definition
        return None

    def names(self) -> list[str]:
        """Agent types in load order (built-ins first)."""
        return list(self.definitions)

    def cli_errors(self) -> list[DefinitionError]:
        """Errors in ``--agents``: the caller must refuse to start when there are any."""
        return [error for error in self.errors if error.file == CLI_FILE]

    def add(self, definition: AgentDefinition) -> None:
        """Add ``definition``, replacing any earlier one with the same (normalized) name."""
        key = normalize_agent_type(definition.name)
        for name in [n for n in self.definitions if normalize_agent_type(n) == key]:
            del self.definitions[name]
        self.definitions[definition.name] = definition

    def add_file(self, parsed: ParsedFile) -> None:
        """Take in one read file: its warnings, its error, and its definition if it has one
        (a skipped file, one that is not an agent definition, brings only its warning)."""
        self.warnings.extend(parsed.warnings)
        if parsed.error is not None:
            self.errors.append(parsed.error)
        if parsed.definition is not None:
            self.add(parsed.definition)

    def merge(self, other: DefinitionSet) -> None:
        """Layer ``other`` on top of this set."""
        for definition in other.definitions.values():
            self.add(definition)
        self.errors.extend(other.errors)
        self.warnings.extend(other.warnings)


def load_definitions(
    *,
    cwd: Path,
    home: Path | None = None,
    subagents_home: Path | None = None,
    trusted: bool = True,
    cli_agents: str | None = None,
) -> DefinitionSet:
    """Every definition visible from ``cwd``, layered by precedence (see the module docstring)."""
    home = home if home is not None else Path.home()
    if subagents_home is None:
        subagents_home = state.subagents_home(home)
    result = DefinitionSet()
    for builtin in BUILTIN_AGENTS:
        result.add(builtin)
    result.merge(load_folder(home / ".claude" / "agents", source="user"))
    result.merge(load_folder(subagents_home / "agents", source="user"))
    if trusted:
        project = find_project_root(cwd)
        if project is not None and not _same_path(project, home):
            result.merge(load_folder(project / ".claude" / "agents", source="project"))
            result.merge(load_folder(project / ".subagents" / "agents", source="project"))
    if cli_agents is not None:
        from subagents.agents.cli_agents import parse_cli_agents  # only for --agents

        definitions, errors = parse_cli_agents(cli_agents)
        for definition in definitions:
            result.add(definition)
        result.errors.extend(errors)
    return result


def load_folder(folder: Path, *, source: DefinitionSource) -> DefinitionSet:
    """Every ``*.md`` below ``folder`` (sorted); a missing folder is simply empty."""
    result = DefinitionSet()
    if not folder.is_dir():
        return result
    origin: dict[str, str] = {}
    for path in markdown_files(folder, result.warnings):
        parsed = read_agent_file(path, source=source)
        result.add_file(parsed)
        if parsed.definition is None:
            continue
        key = normalize_agent_type(parsed.definition.name)
        if key in origin:
            result.warnings.append(
                f"{path}: name: '{parsed.definition.name}' is also defined in {origin[key]}; "
                "this file wins"
            )
        origin[key] = str(path)
    return result


MAX_FOLDER_DEPTH = 16
"""Deepest sub-folder of an agents folder that is searched."""
MAX_FOLDER_FILES = 5_000
"""Most ``*.md`` files read from one agents folder."""


def markdown_files(folder: Path, warnings: list[str]) -> list[Path]:
    """The ``*.md`` files below ``folder``, sorted, following symlinks that stay inside it.

    A symlink leading outside the folder, a loop, a special file (FIFO, device, socket) or a
    folder past ``MAX_FOLDER_DEPTH`` is skipped with a warning; nothing here reads a file."""
    root = folder.resolve()
    found: list[Path] = []
    seen_dirs: set[tuple[int, int]] = set()
    pending = [(folder, 0)]
    while pending and len(found) < MAX_FOLDER_FILES:
        directory, depth = pending.pop()
        try:
            info = directory.stat()
            entries = sorted(os.scandir(directory), key=lambda entry: entry.name)
        except OSError as exc:
            warnings.append(f"{directory}: skipped: cannot list folder: {exc.strerror or exc}")
            continue
        if (info.st_dev, info.st_ino) in seen_dirs:
            continue  # reached twice through symlinks: a loop or an alias, read it once
        seen_dirs.add((info.st_dev, info.st_ino))
        for entry in entries:
            _visit(Path(entry.path), root, depth, pending, found, warnings)
    if len(found) >= MAX_FOLDER_FILES:
        warnings.append(f"{folder}: only the first {MAX_FOLDER_FILES} definition files were read")
    return sorted(found[:MAX_FOLDER_FILES])


def _visit(
    path: Path,
    root: Path,
    depth: int,
    pending: list[tuple[Path, int]],
    found: list[Path],
    warnings: list[str],
) -> None:
    try:
        resolved = path.resolve(strict=True)
        mode = resolved.stat().st_mode
    except (OSError, RuntimeError) as exc:  # a dangling link or a symlink loop
        if path.suffix == ".md" or path.is_symlink():
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else "a loop"
            warnings.append(f"{path}: skipped: cannot follow: {reason}")
        return
    if resolved != root and not resolved.is_relative_to(root):
        warnings.append(f"{path}: skipped: a symlink that leads outside {root}")
        return
    if stat.S_ISDIR(mode):
        if depth + 1 > MAX_FOLDER_DEPTH:
            warnings.append(f"{path}: skipped: deeper than {MAX_FOLDER_DEPTH} folders")
        else:
            pending.append((path, depth + 1))
    elif path.suffix == ".md":
        if stat.S_ISREG(mode):
            found.append(path)
        else:
            warnings.append(f"{path}: skipped: not a regular file (a FIFO, device or socket)")


def find_project_root(cwd: Path) -> Path | None:
    """The nearest folder from ``cwd`` up to its git root holding project agent folders."""
    start = cwd.resolve()
    candidates = [start]
    git_root = next((p for p in (start, *start.parents) if (p / ".git").exists()), None)
    if git_root is not None:
        candidates = [start, *start.parents[: len(start.parents) - len(git_root.parents)]]
    for candidate in candidates:
        if (candidate / ".claude" / "agents").is_dir() or (
            candidate / ".subagents" / "agents"
        ).is_dir():
            return candidate
    return None


def _same_path(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve()
    except OSError:
        return False


def tool_base_name(entry: str) -> str:
    """The tool an entry names: ``Bash(git status:*)`` counts for ``Bash``."""
    return entry.split("(", 1)[0].strip()


def _with_aliases(names: set[str]) -> set[str]:
    return names | AGENT_TOOL_NAMES if names & AGENT_TOOL_NAMES else names


def tool_listed(tool: str, names: set[str]) -> bool:
    """Whether a ``tools``/``disallowedTools`` list names ``tool``: by name, or an MCP server
    entry (``mcp__github`` or ``mcp__github__*``) standing for every tool of that server."""
    if tool in names:
        return True
    for name in names:
        server = name.removesuffix("__*")
        if (
            server.startswith("mcp__")
            and server.count("__") == 1
            and tool.startswith(server + "__")
        ):
            return True
    return False


def resolve_tool_names(definition: AgentDefinition, available: Sequence[str]) -> list[str]:
    """The tools a child of this type gets, in ``available`` order.

    Listed tools (or all, when the definition inherits) that are available, minus
    ``disallowed_tools`` (which always win), minus what children never get, minus the Agent
    tool unless the definition asks for it by name (nesting is opt-in).
    """
    listed = None
    if definition.tools is not None:
        listed = _with_aliases({tool_base_name(entry) for entry in definition.tools})
    denied = _with_aliases({tool_base_name(entry) for entry in definition.disallowed_tools})
    if "*" in denied:  # `disallowedTools: "*"`: nothing is left (Claude Code ignores it)
        return []
    wants_agent = listed is not None and bool(listed & AGENT_TOOL_NAMES)
    chosen = []
    for tool in available:
        if listed is not None and not tool_listed(tool, listed):
            continue
        if tool_listed(tool, denied) or tool in ALWAYS_BLOCKED_FOR_CHILDREN:
            continue
        if tool in AGENT_TOOL_NAMES and not wants_agent:
            continue
        chosen.append(tool)
    return chosen
