"""``subagents mcp list [--json]``: the configured MCP servers, connected to, with their tools.

The configuration is loaded as a session would load it (the same files, ``--cwd``,
``--mcp-config``, ``--strict-mcp-config``); every server is started (concurrently, each bounded
by ``MCP_TIMEOUT``), listed with its status and tools, and closed again. A server that fails is
listed with the reason; the exit status is 0 unless the configuration itself is unusable.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import Any, TextIO


def add_mcp_arguments(parser: argparse.ArgumentParser, *, default: Any = None) -> None:
    """``--mcp-config`` (repeatable) and ``--strict-mcp-config``, for a run and for ``mcp list``."""
    parser.add_argument(
        "--mcp-config",
        action="append",
        default=[] if default is None else default,
        metavar="FILE_OR_JSON",
        help='MCP servers from a file or a JSON string ({"mcpServers": {...}}); repeatable',
    )
    parser.add_argument(
        "--strict-mcp-config",
        action="store_true",
        default=False if default is None else default,
        help="use only the servers of --mcp-config",
    )


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("mcp", help="list the configured MCP servers")
    parser.set_defaults(handler=run, mcp_command=None)
    actions = parser.add_subparsers(dest="mcp_command", metavar="{list}")
    list_parser = actions.add_parser("list", help="servers, their status and tools")
    list_parser.add_argument("--json", action="store_true", help="print a JSON list")
    # SUPPRESS: a subcommand default would overwrite the same option given before the command.
    list_parser.add_argument("--cwd", default=argparse.SUPPRESS, help="the project folder")
    add_mcp_arguments(list_parser, default=argparse.SUPPRESS)


def run(args: argparse.Namespace) -> int:
    if getattr(args, "mcp_command", None) != "list":
        print("usage: subagents mcp list [--json]", file=sys.stderr)
        return 2
    cwd = Path(getattr(args, "cwd", None) or Path.cwd()).expanduser()
    if not cwd.is_dir():
        print(f"subagents: --cwd {cwd}: not a directory", file=sys.stderr)
        return 2
    configs = getattr(args, "mcp_config", None) or []
    strict = bool(getattr(args, "strict_mcp_config", False))
    try:
        return asyncio.run(_list(cwd, configs, strict, as_json=args.json, out=sys.stdout))
    except ValueError as exc:
        print(f"subagents: {exc}", file=sys.stderr)
        return 2


async def _list(cwd: Path, configs: list[str], strict: bool, *, as_json: bool, out: TextIO) -> int:
    from subagents.agents.mcp_scope import load_session_config
    from subagents.settings import load_settings
    from subagents.state import ProjectState, canonical_project

    cwd = canonical_project(cwd)
    state = ProjectState.for_cwd(cwd)
    settings = load_settings(cwd=cwd, subagents_home=state.home)
    config = load_session_config(
        cwd=cwd, state=state, settings=settings.values, cli_configs=configs, strict=strict
    )
    for warning in config.warnings:
        print(f"subagents: warning: {warning}", file=sys.stderr)
    rows = await _describe(config, cwd)
    if as_json:
        out.write(json.dumps(rows, indent=2) + "\n")
    else:
        _print(rows, out)
    return 0


async def _describe(config: Any, cwd: Path) -> list[dict[str, Any]]:
    if not config.servers:
        return []
    from subagents.mcp.servers import McpServers, McpSettings

    def warn(message: str) -> None:
        print(f"subagents: warning: {message}", file=sys.stderr)

    settings = McpSettings.from_env()
    settings.warn = warn
    servers = McpServers(config=config, cwd=cwd, settings=settings)
    try:
        await servers.start()
        rows = servers.describe()
    finally:
        await servers.close()
    return rows


def _print(rows: list[dict[str, Any]], out: TextIO) -> None:
    if not rows:
        out.write("No MCP servers configured.\n")
        return
    for row in rows:
        tools = row["tools"]
        out.write(
            f"{row['name']}: {row['status']} ({row['transport']}, {row['scope']}: "
            f"{row['source']}) — {len(tools)} tool(s)\n"
        )
        if row["error"]:
            out.write(f"  error: {row['error']}\n")
        for tool in tools:
            flag = " (read-only)" if tool["readOnly"] else ""
            out.write(f"  - {tool['name']}{flag}\n")
