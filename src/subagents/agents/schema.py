"""What an agent definition is (``--agents`` JSON is read in ``agents/cli_agents.py``).

``AgentDefinition`` is the frozen record the rest of the runtime reads. Markdown files (Claude
Code's format: YAML frontmatter, then the body as system prompt) are read leniently, field by
field, exactly as Claude Code reads them (``agents/agent_file.py``); ``--agents JSON`` given on
the command line is read strictly here (a typo in a flag must not pass silently), with the same
meaning for every value (``tools: []`` is no tools, ``"*"`` is every tool).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Literal

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
