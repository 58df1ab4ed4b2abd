"""``subagents agents list|show|validate``: the definitions a run would see, and what is wrong.

``list --json`` is part of the public contract (SPEC §19): a JSON list of
``{name, description, source, path, tools, model}`` with ``tools`` null when the agent inherits
every tool. Load errors never hide the list: they go to stderr and the list still prints.
``validate`` is the strict one: it prints each error as ``<file>: <field>: <message>`` and exits
1 when there is any.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any, TextIO

from subagents.agents.agent_file import read_agent_file
from subagents.agents.definitions import (
    AgentDefinition,
    DefinitionSet,
    load_definitions,
    load_folder,
)
from subagents.agents.schema import DefinitionError

_DESCRIPTION_WIDTH = 60


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``agents`` subcommand; its parser sets ``handler=run``."""
    parser = subparsers.add_parser("agents", help="list, show and validate agent definitions")
    parser.set_defaults(handler=run, agents_command=None)
    actions = parser.add_subparsers(dest="agents_command", metavar="{list,show,validate}")

    list_parser = actions.add_parser("list", help="every agent type with its source and path")
    list_parser.add_argument("--json", action="store_true", help="print a JSON list")
    show_parser = actions.add_parser("show", help="one definition in full")
    show_parser.add_argument("name", help="agent type (case and separators ignored)")
    show_parser.add_argument("--json", action="store_true", help="print a JSON object")
    validate_parser = actions.add_parser("validate", help="check definition files, exit 1 if bad")
    validate_parser.add_argument(
        "path", nargs="?", help="a definition file or folder (default: every source for --cwd)"
    )
    for sub in (list_parser, show_parser, validate_parser):
        # SUPPRESS: a subcommand default would overwrite the same option given before `agents`.
        sub.add_argument("--cwd", default=argparse.SUPPRESS, help="project folder")
        sub.add_argument("--agents", default=argparse.SUPPRESS, help="extra definitions (JSON)")


def run(args: argparse.Namespace) -> int:
    """Run ``agents <command>``; the return value is the exit code."""
    command = getattr(args, "agents_command", None)
    if command == "list":
        return _list(args, sys.stdout, sys.stderr)
    if command == "show":
        return _show(args, sys.stdout, sys.stderr)
    if command == "validate":
        return _validate(args, sys.stdout, sys.stderr)
    print("usage: subagents agents {list,show,validate} ...", file=sys.stderr)
    return 2


def _load(args: argparse.Namespace) -> DefinitionSet:
    cwd = getattr(args, "cwd", None)
    return load_definitions(
        cwd=Path(cwd) if cwd else Path.cwd(), cli_agents=getattr(args, "agents", None)
    )


def summary(definition: AgentDefinition) -> dict[str, Any]:
    """The public ``agents list --json`` entry of a definition."""
    return {
        "name": definition.name,
        "description": definition.description,
        "source": definition.source,
        "path": definition.path,
        "tools": list(definition.tools) if definition.tools is not None else None,
        "model": definition.model,
    }


def details(definition: AgentDefinition) -> dict[str, Any]:
    """Everything about a definition, with Claude Code's field names (``show --json``)."""
    return {
        **summary(definition),
        "disallowedTools": list(definition.disallowed_tools),
        "permissionMode": definition.permission_mode,
        "maxTurns": definition.max_turns,
        "maxTokens": definition.max_tokens,
        "maxWallTimeMs": definition.max_wall_ms,
        "maxBudgetUsd": definition.max_cost_usd,
        "background": definition.background,
        "isolation": definition.isolation,
        "color": definition.color,
        "memory": definition.memory,
        "hooks": definition.hooks,
        "mcpServers": list(definition.mcp_servers),
        "requiredMcpServers": list(definition.required_mcp_servers),
        "skills": list(definition.skills),
        "readOnly": definition.read_only,
        "extra": definition.extra,
        "systemPrompt": definition.system_prompt,
    }


def _report(loaded: DefinitionSet, err: TextIO) -> None:
    for error in loaded.errors:
        print(f"error: {error}", file=err)
    for warning in loaded.warnings:
        print(f"warning: {warning}", file=err)


def _list(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    loaded = _load(args)
    _report(loaded, err)
    definitions = list(loaded.definitions.values())
    if args.json:
        print(json.dumps([summary(d) for d in definitions], indent=2, default=str), file=out)
        return 0
    rows = [("NAME", "SOURCE", "MODEL", "TOOLS", "DESCRIPTION")]
    rows += [
        (d.name, d.source, d.model or "inherit", _tools_text(d), _shorten(d.description))
        for d in definitions
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    for row in rows:
        cells = [cell.ljust(width) for cell, width in zip(row, widths, strict=False)]
        print("  ".join([*cells, row[4]]).rstrip(), file=out)
    return 0


def _tools_text(definition: AgentDefinition) -> str:
    tools = "all" if definition.tools is None else ", ".join(definition.tools)
    if definition.disallowed_tools:
        tools += f" (not {', '.join(definition.disallowed_tools)})"
    return tools


def _shorten(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= _DESCRIPTION_WIDTH else flat[: _DESCRIPTION_WIDTH - 3] + "..."


def _show(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    loaded = _load(args)
    definition = loaded.find(args.name)
    if definition is None:
        known = ", ".join(loaded.names())
        print(f"error: unknown agent type '{args.name}' (known: {known})", file=err)
        return 1
    if args.json:
        print(json.dumps(details(definition), indent=2, default=str), file=out)
        return 0
    for key, value in details(definition).items():
        if key != "systemPrompt" and value not in (None, [], {}, False):
            print(f"{key}: {value if isinstance(value, str) else json.dumps(value)}", file=out)
    print(f"\n{definition.system_prompt}", file=out)
    return 0


def _validate(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    loaded = _load(args) if args.path is None else _validate_path(Path(args.path))
    for error in loaded.errors:
        print(str(error), file=out)
    for warning in loaded.warnings:
        print(f"warning: {warning}", file=err)
    count = len(loaded.definitions)
    status = "ok" if not loaded.errors else f"{len(loaded.errors)} error(s)"
    print(f"{count} definition(s) loaded, {status}, {len(loaded.warnings)} warning(s)", file=err)
    return 1 if loaded.errors else 0


def _validate_path(path: Path) -> DefinitionSet:
    if path.is_dir():
        return load_folder(path, source="project")
    result = DefinitionSet()
    if not os.path.lexists(path):
        result.errors.append(_missing(path))
        return result
    result.add_file(read_agent_file(path, source="project"))  # a FIFO, a loop: it says so
    return result


def _missing(path: Path) -> DefinitionError:
    return DefinitionError(file=str(path), field="path", message="no such file or folder")
