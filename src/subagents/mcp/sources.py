"""Where MCP servers are configured, and which entry wins (see docs/mcp.md, "Configuration").

Lowest precedence first; a later source replaces a server of the same name:

1. user: ``~/.claude.json`` ``mcpServers`` (``$CLAUDE_CONFIG_DIR/.claude.json`` when set), then
   ``<SUBAGENTS_HOME>/mcp.json``;
2. settings ``mcpServers``;
3. project: ``<cwd>/.mcp.json`` (trusted workspaces only; ``disabledMcpjsonServers`` /
   ``enabledMcpjsonServers`` / ``enableAllProjectMcpServers`` from settings apply);
4. local: ``~/.claude.json`` ``projects[<cwd>].mcpServers``;
5. ``--mcp-config`` values in order, then the library's ``extra`` servers.

``strict`` keeps 5 only. A discovered file that cannot be used is a warning (fewer servers can only
make a run stricter); a ``--mcp-config`` value that cannot be used raises ``McpConfigError``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from subagents.config_files import ConfigFileError, ConfigSyntaxError, load_json, read_config_text
from subagents.mcp.config import ConfiguredServer, McpConfig, McpConfigError, Scope

MAX_CONFIG_BYTES = 16 << 20
"""Largest MCP configuration file read (``~/.claude.json`` also holds Claude Code's history)."""


@dataclass(kw_only=True, frozen=True)
class McpSources:
    """What discovery reads: the folders, the settings, the command line."""

    cwd: Path
    home: Path
    subagents_home: Path
    settings: Mapping[str, Any]
    """The merged settings' top-level values (``mcpServers``, ``enabledMcpjsonServers``, ...)."""
    cli_configs: Sequence[str] = ()
    """``--mcp-config`` values: a file path or an inline JSON object."""
    extra: Mapping[str, Any] | None = None
    """Servers given by the library (``SessionOptions.mcp_servers``), highest precedence."""
    strict: bool = False
    trusted: bool = True


def parse_servers(
    raw: Any, *, scope: Scope, source: str, env: Mapping[str, str], warnings: list[str]
) -> list[ConfiguredServer]:
    """``entries.parse_servers``, imported only when there is something to parse."""
    if not raw and isinstance(raw, dict | None):
        return []
    from subagents.mcp import entries

    return entries.parse_servers(raw, scope=scope, source=source, env=env, warnings=warnings)


def load_mcp_config(sources: McpSources, env: Mapping[str, str] | None = None) -> McpConfig:
    """Every configured server after precedence, with every warning met on the way."""
    env = os.environ if env is None else env
    config = McpConfig()
    found = [] if sources.strict else _discovered(sources, env, config.warnings)
    for value in sources.cli_configs:
        raw, source = _cli_config(value)
        found += parse_servers(raw, scope="cli", source=source, env=env, warnings=config.warnings)
    if sources.extra:
        source = "SessionOptions.mcp_servers"
        raw = dict(sources.extra)
        found += parse_servers(raw, scope="cli", source=source, env=env, warnings=config.warnings)
    for server in found:
        config.servers[server.name] = server
        if server.error is not None:
            config.warnings.append(server.error)
    return config


def _discovered(
    sources: McpSources, env: Mapping[str, str], warnings: list[str]
) -> list[ConfiguredServer]:
    def parse(raw: Any, scope: Scope, source: str) -> list[ConfiguredServer]:
        return parse_servers(raw, scope=scope, source=source, env=env, warnings=warnings)

    claude_json = _claude_json_path(sources.home, env)
    user = _read_json(claude_json, warnings) or {}
    ours = sources.subagents_home / "mcp.json"
    found = [
        *parse(user.get("mcpServers"), "user", str(claude_json)),
        *parse((_read_json(ours, warnings) or {}).get("mcpServers"), "user", str(ours)),
        *parse(sources.settings.get("mcpServers"), "settings", "settings"),
    ]
    if sources.trusted:
        path = sources.cwd / ".mcp.json"
        project = parse((_read_json(path, warnings) or {}).get("mcpServers"), "project", str(path))
        found += _approved(project, sources.settings, warnings)
    local = _local_servers(user, sources.cwd)
    found += parse(local, "local", f"{claude_json} (projects[{sources.cwd}])")
    return found


def _approved(
    servers: list[ConfiguredServer], settings: Mapping[str, Any], warnings: list[str]
) -> list[ConfiguredServer]:
    """``disabledMcpjsonServers`` removes; a non-empty ``enabledMcpjsonServers`` keeps only its
    names, unless ``enableAllProjectMcpServers`` is true."""
    disabled = _names(settings.get("disabledMcpjsonServers"))
    enabled = _names(settings.get("enabledMcpjsonServers"))
    enable_all = settings.get("enableAllProjectMcpServers") is True
    kept = []
    for server in servers:
        if server.name in disabled or (enabled and not enable_all and server.name not in enabled):
            warnings.append(
                f"{server.source}: MCP server {server.name!r} is not enabled by the settings "
                "(disabledMcpjsonServers / enabledMcpjsonServers); not started"
            )
            continue
        kept.append(server)
    return kept


def _names(value: Any) -> set[str]:
    return {v for v in value if isinstance(v, str)} if isinstance(value, list) else set()


def _local_servers(user: Mapping[str, Any], cwd: Path) -> Any:
    projects = user.get("projects")
    if not isinstance(projects, dict):
        return None
    for key in (str(cwd), os.path.realpath(cwd)):
        project = projects.get(key)
        if isinstance(project, dict) and project.get("mcpServers"):
            return project["mcpServers"]
    return None


def _claude_json_path(home: Path, env: Mapping[str, str]) -> Path:
    configured = env.get("CLAUDE_CONFIG_DIR")
    if configured:
        return Path(configured).expanduser() / ".claude.json"
    return home / ".claude.json"


def _cli_config(value: str) -> tuple[Any, str]:
    """One ``--mcp-config`` value: inline JSON (it starts with ``{``) or a file."""
    text = value.strip()
    if text.startswith("{"):
        source = "--mcp-config (inline JSON)"
        data = _parse_json(text, source)
    else:
        path = Path(value).expanduser()
        source = f"--mcp-config {path}"
        try:
            raw = _read_text(path)
        except ConfigFileError as exc:
            raise McpConfigError(f"{source}: {_without_path(exc, path)}") from None
        if raw is None:
            raise McpConfigError(f"{source}: no such file")
        data = _parse_json(raw, source)
    if not isinstance(data, dict):
        raise McpConfigError(f"{source}: expected a JSON object with `mcpServers`")
    servers = data.get("mcpServers")
    if not isinstance(servers, dict):
        raise McpConfigError(f"{source}: expected an object `mcpServers`")
    return servers, source


def _parse_json(text: str, source: str) -> Any:
    try:
        return load_json(text)
    except ConfigSyntaxError as exc:
        raise McpConfigError(f"{source}: {exc}") from None
    except json.JSONDecodeError as exc:
        raise McpConfigError(f"{source}: {_json_problem(exc)}") from None


def _json_problem(exc: json.JSONDecodeError) -> str:
    return f"not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})"


def _read_json(path: Path, warnings: list[str]) -> dict[str, Any] | None:
    """A discovered file's object; None (with a warning, unless it is simply absent) otherwise.

    Read as every configuration file is (``config_files``): regular files only, so a FIFO or a
    device planted in its place can neither hang nor flood us, and at most ``MAX_CONFIG_BYTES``."""
    try:
        text = _read_text(path)
        if text is None:
            return None
        data = load_json(text)
    except json.JSONDecodeError as exc:
        warnings.append(f"{path}: MCP configuration ignored: {_json_problem(exc)}")
        return None
    except ConfigFileError as exc:
        warnings.append(f"{path}: MCP configuration ignored: {_without_path(exc, path)}")
        return None
    if not isinstance(data, dict):
        warnings.append(f"{path}: MCP configuration ignored: not a JSON object")
        return None
    return data


def _read_text(path: Path) -> str | None:
    return read_config_text(path, max_bytes=MAX_CONFIG_BYTES)


def _without_path(exc: ConfigFileError, path: Path) -> str:
    return str(exc).removeprefix(f"{path}: ")


@dataclass(kw_only=True)
class InlineServers:
    """A definition's ``mcpServers``: names of configured servers, and its own entries."""

    names: list[str]
    servers: list[ConfiguredServer]


def inline_servers(
    entries: Sequence[str | Mapping[str, Any]],
    *,
    source: str,
    warn: Callable[[str], None],
    env: Mapping[str, str] | None = None,
) -> InlineServers:
    """Split and validate a definition's entries; every problem is one warning."""
    env = os.environ if env is None else env
    warnings: list[str] = []
    names: list[str] = []
    servers: list[ConfiguredServer] = []
    for entry in entries:
        if isinstance(entry, str):
            names.append(entry)
            continue
        for server in parse_servers(
            dict(entry), scope="agent", source=source, env=env, warnings=warnings
        ):
            servers.append(server)
            if server.error is not None:
                warnings.append(server.error)
    for warning in warnings:
        warn(warning)
    return InlineServers(names=names, servers=servers)
