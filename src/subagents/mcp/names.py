"""How MCP servers and tools are named for the model: ``mcp__<server>__<tool>``.

Characters outside ``A-Za-z0-9_-`` become ``_`` (as in Claude Code), so whatever a server calls
itself or its tools, the name a model sees is one every provider accepts. A full name longer
than ``MAX_TOOL_NAME`` is not offered at all (OpenAI-compatible servers and Anthropic's API both
accept 64 characters): cutting it could make two tools one.
"""

from __future__ import annotations

import re

PREFIX = "mcp__"
MAX_TOOL_NAME = 64
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


def normalize(name: str) -> str:
    return _UNSAFE.sub("_", name)


def tool_name(server_key: str, tool: str) -> str:
    """The name the model calls: ``mcp__<server>__<tool>`` (both parts normalised)."""
    return f"{PREFIX}{normalize(server_key)}__{normalize(tool)}"
