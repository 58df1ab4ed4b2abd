"""What one configured MCP server is, and where it came from (no SDK, no pydantic here).

``entries.py`` validates an ``mcpServers`` entry into one of the entry models; ``sources.py``
finds the files and applies precedence. A run whose configuration names no server never imports
either's validation code.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from subagents.mcp.names import normalize

if TYPE_CHECKING:
    from subagents.mcp.entry_models import ServerEntry

Scope = Literal["user", "settings", "project", "local", "cli", "agent"]


class McpConfigError(ValueError):
    """A configuration the user named (``--mcp-config``) that cannot be used."""


@dataclass(kw_only=True)
class ConfiguredServer:
    """One server as configured: its name, entry, and where the entry came from."""

    name: str
    """As written in the configuration (shown to the user)."""
    entry: ServerEntry | None
    """None when the entry cannot be used (``error`` says why)."""
    scope: Scope
    source: str
    """The file (or ``--mcp-config``, ``settings``, ``agent <type>``) the entry came from."""
    error: str | None = None

    @property
    def key(self) -> str:
        """The name in tool names: ``mcp__<key>__<tool>``."""
        return normalize(self.name)

    @property
    def transport(self) -> str:
        return self.entry.type if self.entry is not None else "unknown"


@dataclass(kw_only=True)
class McpConfig:
    """Every configured server, by name, after precedence; and what was wrong on the way."""

    servers: dict[str, ConfiguredServer] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
