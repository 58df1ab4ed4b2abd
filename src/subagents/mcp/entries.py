"""Validating one ``mcpServers`` entry, with ``${VAR}`` expansion as Claude Code does it.

An entry is one of four shapes (Claude Code's): a stdio command, a streamable-HTTP or SSE URL, or
an in-process server of a ``claude-agent-sdk`` program. ``parse_entry`` validates one entry,
expands ``${VAR}`` / ``${VAR:-default}`` in the fields Claude Code expands (``command``, ``args``,
``env`` values, ``url``, ``headers`` values) and returns a ``ConfiguredServer`` — or the reason
it cannot be used, naming the server and the field. No I/O and no SDK import.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from subagents.mcp.config import ConfiguredServer, Scope
from subagents.mcp.entry_models import HttpServer, SdkServer, ServerEntry, StdioServer

_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
_TYPE_ALIASES = {"streamable-http": "http", "streamable_http": "http", "streamableHttp": "http"}


_KNOWN_KEYS = {"type", "command", "args", "env", "url", "headers", "name"}


def parse_entry(
    name: str,
    raw: Any,
    *,
    scope: Scope,
    source: str,
    env: Mapping[str, str],
    warnings: list[str],
) -> ConfiguredServer:
    """Validate and expand one ``mcpServers`` entry; unusable ones carry their ``error``."""
    where = f"{source}: MCP server {name!r}"

    def failed(reason: str) -> ConfiguredServer:
        return ConfiguredServer(name=name, entry=None, scope=scope, source=source, error=reason)

    if not isinstance(raw, dict):
        return failed(f"{where}: expected an object, got {type(raw).__name__}")
    unknown = sorted(str(k) for k in raw if k not in _KNOWN_KEYS)
    if unknown:
        warnings.append(f"{where}: unknown field(s) ignored: {', '.join(unknown)}")
    data = {k: v for k, v in raw.items() if k in _KNOWN_KEYS}
    try:
        entry = _validate(data)
    except ValidationError as exc:
        return failed(f"{where}: {_first_error(exc)}")
    except ValueError as exc:
        return failed(f"{where}: {exc}")
    missing: list[str] = []
    entry = _expanded(entry, env, missing)
    if missing:
        names = ", ".join(sorted(set(missing)))
        return failed(f"{where}: missing environment variables: {names}")
    return ConfiguredServer(name=name, entry=entry, scope=scope, source=source)


def _validate(data: dict[str, Any]) -> ServerEntry:
    kind = data.get("type")
    if isinstance(kind, str):
        kind = _TYPE_ALIASES.get(kind, kind)
        data["type"] = kind
    if kind is None:
        kind = "http" if "url" in data and "command" not in data else "stdio"
    if kind == "stdio":
        return StdioServer.model_validate(_drop(data, "name"))
    if kind in ("http", "sse"):
        data["type"] = kind
        return HttpServer.model_validate(_drop(data, "name"))
    if kind == "sdk":
        return SdkServer.model_validate({k: v for k, v in data.items() if k in ("type", "name")})
    raise ValueError(f"field `type`: unsupported transport {kind!r} (stdio, http, sse or sdk)")


def _drop(data: dict[str, Any], key: str) -> dict[str, Any]:
    return {k: v for k, v in data.items() if k != key}


def _first_error(exc: ValidationError) -> str:
    err = exc.errors(include_url=False)[0]
    where = ".".join(str(p) for p in err["loc"]) or "(entry)"
    return f"field `{where}`: {err['msg']}"


def expand(text: str, env: Mapping[str, str], missing: list[str]) -> str:
    """``${VAR}`` and ``${VAR:-default}`` replaced from ``env``; unset names go to ``missing``."""

    def value(match: re.Match[str]) -> str:
        name, default = match.group(1), match.group(2)
        found = env.get(name)
        if found is not None and (found != "" or default is None):
            return found
        if default is not None:
            return default
        missing.append(name)
        return ""

    return _VARIABLE.sub(value, text) if "${" in text else text


def _expanded(entry: ServerEntry, env: Mapping[str, str], missing: list[str]) -> ServerEntry:
    if isinstance(entry, StdioServer):
        return entry.model_copy(
            update={
                "command": expand(entry.command, env, missing),
                "args": [expand(a, env, missing) for a in entry.args],
                "env": {k: expand(v, env, missing) for k, v in entry.env.items()},
            }
        )
    if isinstance(entry, HttpServer):
        return entry.model_copy(
            update={
                "url": expand(entry.url, env, missing),
                "headers": {k: expand(v, env, missing) for k, v in entry.headers.items()},
            }
        )
    return entry


def parse_servers(
    raw: Any,
    *,
    scope: Scope,
    source: str,
    env: Mapping[str, str],
    warnings: list[str],
) -> list[ConfiguredServer]:
    """Every entry of one ``mcpServers`` object (a non-object is one warning, no servers)."""
    if raw is None:
        return []
    if not isinstance(raw, dict):
        warnings.append(f"{source}: `mcpServers` must be an object, got {type(raw).__name__}")
        return []
    servers = []
    for name, entry in raw.items():
        if not isinstance(name, str) or not name.strip():
            warnings.append(f"{source}: an MCP server needs a non-empty name, got {name!r}")
            continue
        servers.append(
            parse_entry(name, entry, scope=scope, source=source, env=env, warnings=warnings)
        )
    return servers
