"""MCP servers: configuration, connections over the official ``mcp`` SDK, and their tools.

Nothing is imported here: ``subagents.mcp.config`` and ``subagents.mcp.sources`` are plain
Python; the SDK is imported only by the modules that connect to a server, and only when a session
has a server to start (see docs/mcp.md).
"""
