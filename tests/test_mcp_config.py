"""Where MCP servers are configured, which entry wins, ``${VAR}`` expansion and bad input."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from subagents.mcp.config import McpConfig, McpConfigError
from subagents.mcp.entry_models import HttpServer, StdioServer
from subagents.mcp.names import normalize, tool_name
from subagents.mcp.sources import McpSources, inline_servers, load_mcp_config


def _write(path: Path, data: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data) if not isinstance(data, str) else data)
    return path


def _load(tmp_path: Path, env: dict[str, str] | None = None, **options: Any) -> McpConfig:
    fields: dict[str, Any] = {
        "cwd": tmp_path / "proj",
        "home": tmp_path / "home",
        "subagents_home": tmp_path / "sa",
        "settings": {},
        **options,
    }
    return load_mcp_config(McpSources(**fields), env=env or {})


def _servers(name: str, command: str) -> dict[str, Any]:
    return {"mcpServers": {name: {"command": command}}}


def test_precedence_local_over_project_over_settings_over_user(tmp_path: Path) -> None:
    project = tmp_path / "proj"
    claude = {
        "mcpServers": {"a": {"command": "user-a"}, "u": {"command": "user-u"}},
        "projects": {str(project): {"mcpServers": {"a": {"command": "local-a"}}}},
    }
    _write(tmp_path / "home" / ".claude.json", claude)
    _write(tmp_path / "sa" / "mcp.json", _servers("s", "ours-s"))
    _write(project / ".mcp.json", {"mcpServers": {"a": {"command": "project-a"},
                                                  "p": {"command": "project-p"}}})  # fmt: skip
    settings = {"mcpServers": {"p": {"command": "settings-p"}, "s": {"command": "settings-s"}}}

    config = _load(tmp_path, settings=settings)

    commands = {n: s.entry.command for n, s in config.servers.items()}  # type: ignore[union-attr]
    assert commands == {"a": "local-a", "u": "user-u", "s": "settings-s", "p": "project-p"}
    assert config.servers["a"].scope == "local" and config.servers["p"].scope == "project"
    assert config.warnings == []


def test_cli_configs_win_and_strict_keeps_only_them(tmp_path: Path) -> None:
    _write(tmp_path / "proj" / ".mcp.json", _servers("a", "project-a"))
    file = _write(tmp_path / "extra.json", _servers("a", "file-a"))
    inline = json.dumps(_servers("b", "inline-b"))

    loose = _load(tmp_path, cli_configs=(str(file), inline))
    strict = _load(tmp_path, cli_configs=(inline,), strict=True)

    assert loose.servers["a"].entry.command == "file-a"  # type: ignore[union-attr]
    assert set(loose.servers) == {"a", "b"}
    assert set(strict.servers) == {"b"}


def test_untrusted_workspace_skips_the_project_file(tmp_path: Path) -> None:
    _write(tmp_path / "proj" / ".mcp.json", _servers("a", "project-a"))

    assert _load(tmp_path, trusted=False).servers == {}


def test_settings_can_disable_or_select_project_servers(tmp_path: Path) -> None:
    _write(tmp_path / "proj" / ".mcp.json", {"mcpServers": {n: {"command": n} for n in "abc"}})

    disabled = _load(tmp_path, settings={"disabledMcpjsonServers": ["a"]})
    enabled = _load(tmp_path, settings={"enabledMcpjsonServers": ["b"]})
    every = _load(
        tmp_path, settings={"enabledMcpjsonServers": ["b"], "enableAllProjectMcpServers": True}
    )

    assert set(disabled.servers) == {"b", "c"}
    assert any("'a' is not enabled" in w for w in disabled.warnings)
    assert set(enabled.servers) == {"b"}
    assert set(every.servers) == {"a", "b", "c"}


def test_variables_are_expanded_where_claude_code_expands_them(tmp_path: Path) -> None:
    entry = {
        "command": "${BIN}/server",
        "args": ["--root", "${ROOT:-/default}", "${EMPTY:-fallback}"],
        "env": {"TOKEN": "${TOKEN}"},
    }
    web = {"type": "http", "url": "https://${HOST}/mcp", "headers": {"Auth": "Bearer ${TOKEN}"}}
    extra = {"local": entry, "web": web}
    env = {"BIN": "/opt", "TOKEN": "t0k", "HOST": "example.com", "EMPTY": ""}

    config = _load(tmp_path, env=env, extra=extra)

    local = config.servers["local"].entry
    assert isinstance(local, StdioServer)
    assert local.command == "/opt/server"
    assert local.args == ["--root", "/default", "fallback"]
    assert local.env == {"TOKEN": "t0k"}
    remote = config.servers["web"].entry
    assert isinstance(remote, HttpServer)
    assert remote.url == "https://example.com/mcp" and remote.headers == {"Auth": "Bearer t0k"}


def test_a_missing_variable_fails_that_server_only(tmp_path: Path) -> None:
    extra = {"bad": {"command": "x", "args": ["${NOPE}", "${ALSO_NOPE}"]}, "good": {"command": "y"}}

    config = _load(tmp_path, extra=extra)

    assert config.servers["bad"].entry is None
    error = config.servers["bad"].error or ""
    assert "'bad'" in error and "missing environment variables: ALSO_NOPE, NOPE" in error
    assert error in config.warnings
    assert config.servers["good"].entry is not None


@pytest.mark.parametrize(
    ("entry", "expected"),
    [
        ({"command": ""}, "field `command`"),
        ({"command": "x", "args": "not a list"}, "field `args`"),
        ({"type": "http", "url": "ftp://x"}, "field `url`"),
        ({"type": "ws", "url": "ws://x"}, "unsupported transport 'ws'"),
        ("just a string", "expected an object"),
    ],
)
def test_a_malformed_entry_names_the_server_and_the_field(
    tmp_path: Path, entry: Any, expected: str
) -> None:
    file = _write(
        tmp_path / "proj" / ".mcp.json", {"mcpServers": {"x": entry, "ok": {"command": "y"}}}
    )

    config = _load(tmp_path)

    assert config.servers["x"].entry is None
    error = config.servers["x"].error or ""
    assert str(file) in error and "'x'" in error and expected in error
    assert config.servers["ok"].entry is not None


def test_shapes_without_a_type_and_aliases(tmp_path: Path) -> None:
    extra = {
        "url-only": {"url": "http://127.0.0.1:1/mcp"},
        "alias": {"type": "streamable-http", "url": "http://127.0.0.1:1/mcp"},
        "sse": {"type": "sse", "url": "http://127.0.0.1:1/sse"},
        "sdk": {"type": "sdk", "name": "sdk"},
        "extra-key": {"command": "x", "timeout": 5},
    }

    config = _load(tmp_path, extra=extra)

    assert [config.servers[n].transport for n in extra] == ["http", "http", "sse", "sdk", "stdio"]
    assert any("unknown field(s) ignored: timeout" in w for w in config.warnings)


def test_unusable_discovered_files_are_warnings(tmp_path: Path) -> None:
    _write(tmp_path / "home" / ".claude.json", "{not json")
    _write(tmp_path / "sa" / "mcp.json", "[1, 2]")
    project = tmp_path / "proj"
    project.mkdir()
    os.mkfifo(project / ".mcp.json")  # must not hang

    config = _load(tmp_path)

    assert config.servers == {}
    joined = "\n".join(config.warnings)
    assert ".claude.json: MCP configuration ignored" in joined
    assert "mcp.json: MCP configuration ignored: not a JSON object" in joined
    assert "not a regular file" in joined


def test_claude_config_dir_moves_the_user_file(tmp_path: Path) -> None:
    _write(tmp_path / "elsewhere" / ".claude.json", _servers("moved", "x"))

    config = _load(tmp_path, env={"CLAUDE_CONFIG_DIR": str(tmp_path / "elsewhere")})

    assert set(config.servers) == {"moved"}


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("{bad json", "not valid JSON (line 1"),
        ('{"servers": {}}', "expected an object `mcpServers`"),
        ("/no/such/file.json", "no such file"),
    ],
)
def test_a_bad_mcp_config_argument_stops_the_run(tmp_path: Path, value: str, expected: str) -> None:
    with pytest.raises(McpConfigError, match="--mcp-config") as raised:
        _load(tmp_path, cli_configs=(value,))
    assert expected in str(raised.value)


def test_a_definitions_entries_split_into_names_and_own_servers() -> None:
    warnings: list[str] = []

    found = inline_servers(
        ["github", {"own": {"command": "x"}}, {"broken": {"command": ""}}],
        source="agent 'a'",
        warn=warnings.append,
        env={},
    )

    assert found.names == ["github"]
    assert [s.name for s in found.servers] == ["own", "broken"]
    assert found.servers[0].scope == "agent"
    assert len(warnings) == 1 and "'broken'" in warnings[0]


def test_names_are_normalised_for_the_model() -> None:
    assert normalize("my server.v2") == "my_server_v2"
    assert tool_name("git hub", "list/repos") == "mcp__git_hub__list_repos"
