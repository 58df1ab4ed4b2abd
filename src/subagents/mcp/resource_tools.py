"""``ListMcpResources`` and ``ReadMcpResource``: an MCP server's resources, read by URI.

Each pair is bound to the servers one agent sees (the session's, plus its own agent-scoped
ones), so a child never lists a server it was not given. Both are read-only, concurrency-safe
and need no permission (they only read what a server chose to expose), as in Claude Code; their
answers are JSON, blobs replaced by a placeholder as in tool results.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Protocol

from pydantic import Field

from subagents.mcp.results import placeholder
from subagents.runtime_tags import escape_runtime_tags
from subagents.tools.base import (
    BuiltinToolInput,
    CallInfo,
    Tool,
    ToolContext,
    ToolError,
    ToolOutput,
)

LIST_DESCRIPTION = (
    "List the resources (files, records, documents) that the connected MCP servers expose, with "
    "their URIs. Give `server` to list one server's only. Read one with ReadMcpResource."
)
READ_DESCRIPTION = "Read one resource of an MCP server by its URI (as listed by ListMcpResources)."


class ResourceServer(Protocol):
    """A server as these tools need it (``connection.ServerConnection``)."""

    @property
    def name(self) -> str: ...

    @property
    def has_resources(self) -> bool: ...

    async def list_resources(self) -> list[dict[str, Any]]: ...

    async def read_resource(self, uri: str) -> list[dict[str, Any]]: ...


class ListInput(BuiltinToolInput):
    server: str | None = Field(default=None, description="Only this server's resources")


class ReadInput(BuiltinToolInput):
    server: str = Field(min_length=1, description="The MCP server that has the resource")
    uri: str = Field(min_length=1, description="The resource's URI")


class _ResourceTool:
    """What both resource tools share: the servers they reach; read-only, parallel, unasked."""

    requires_permission = False

    def __init__(self, servers: Sequence[ResourceServer]) -> None:
        self.servers = list(servers)

    def is_read_only(self, args: Any) -> bool:
        return True

    def is_concurrency_safe(self, args: Any) -> bool:
        return True

    def _server(self, name: str) -> ResourceServer:
        for server in self.servers:
            if server.name == name:
                return server
        known = ", ".join(s.name for s in self.servers) or "none"
        raise ToolError(f"No MCP server named {name!r}. Servers: {known}")


class ListMcpResourcesTool(_ResourceTool, Tool[ListInput]):
    name = "ListMcpResources"
    aliases = ("ListMcpResourcesTool",)
    description = LIST_DESCRIPTION
    input_model = ListInput

    async def call(self, args: ListInput, ctx: ToolContext, info: CallInfo) -> ToolOutput:
        chosen = [self._server(args.server)] if args.server else self.servers
        found: list[dict[str, Any]] = []
        for server in chosen:
            if not server.has_resources:
                continue
            for resource in await server.list_resources():
                found.append({**_listed(resource), "server": server.name})
        if not found:
            return ToolOutput(content="No resources found. MCP servers may still have tools.")
        # The server's names and descriptions must not read as the runtime's messages.
        return ToolOutput(content=_defused(json.dumps(found, ensure_ascii=False, indent=2)))


class ReadMcpResourceTool(_ResourceTool, Tool[ReadInput]):
    name = "ReadMcpResource"
    aliases = ("ReadMcpResourceTool",)
    description = READ_DESCRIPTION
    input_model = ReadInput

    async def call(self, args: ReadInput, ctx: ToolContext, info: CallInfo) -> ToolOutput:
        server = self._server(args.server)
        contents = [_content(c) for c in await server.read_resource(args.uri)]
        text = json.dumps({"contents": contents}, ensure_ascii=False, indent=2)
        return ToolOutput(content=_defused(text))


def _defused(text: str) -> str:
    """A server's text with runtime tags escaped, as in a tool result (``mcp.results``); the
    JSON stays valid (``&lt;`` needs no escaping in a JSON string)."""
    return escape_runtime_tags(text)[0]


def _listed(resource: dict[str, Any]) -> dict[str, Any]:
    keys = ("uri", "name", "mimeType", "description")
    return {k: resource[k] for k in keys if k in resource}


def _content(content: dict[str, Any]) -> dict[str, Any]:
    if "blob" not in content:
        return content
    shown = {k: v for k, v in content.items() if k != "blob"}
    shown["text"] = placeholder("blob", content.get("mimeType"), content["blob"])
    return shown
