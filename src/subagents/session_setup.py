"""What a ``Session`` reads before its first turn: settings, definitions, permissions, hooks,
telemetry and MCP servers, each from its ``SessionOptions`` and the project's files.

Each function takes what it needs and reports problems through ``warn`` (the session's warning
list, shown after ``init``); only what the user asked for explicitly and cannot be honoured —
an invalid ``--agents`` value — raises.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from subagents.agents.catalog import DefinitionWatch, definition_folders
from subagents.agents.definitions import DefinitionSet, load_definitions
from subagents.agents.mcp_scope import load_session_config, session_servers
from subagents.agents.runtime import AgentRuntime
from subagents.config import RuntimeConfig
from subagents.hooks.config import EMPTY_CONFIG, config_from_settings
from subagents.hooks.engine import HookEngine
from subagents.observe import RunObserver
from subagents.permissions.checker import PermissionChecker
from subagents.permissions.context import context_from_settings
from subagents.permissions.hook_conditions import PermissionRuleConditions
from subagents.permissions.modes import parse_mode
from subagents.session_options import SessionOptions
from subagents.settings import Settings, load_settings
from subagents.state import ProjectState

if TYPE_CHECKING:
    from subagents.mcp.servers import McpServers

Warn = Callable[[str], None]


def session_settings(options: SessionOptions, cwd: Path, state: ProjectState) -> Settings:
    if not options.load_settings:
        return Settings()
    return load_settings(
        cwd=cwd,
        subagents_home=state.home,
        extra_file=options.settings_file,
        trusted=options.trusted,
    )


def session_definitions(
    options: SessionOptions, cwd: Path, state: ProjectState, warn: Warn
) -> DefinitionSet:
    """The agent definitions on disk plus ``--agents``; a bad ``--agents`` entry raises."""
    definitions = load_definitions(
        cwd=cwd,
        subagents_home=state.home,
        trusted=options.trusted,
        cli_agents=options.agents_json,
    )
    cli_errors = definitions.cli_errors()
    if cli_errors:
        raise ValueError("; ".join(str(e) for e in cli_errors))
    for error in definitions.errors:
        warn(f"agent definition skipped: {error}")
    for warning in definitions.warnings:
        warn(warning)
    return definitions


def watch_definitions(
    options: SessionOptions, runtime: AgentRuntime, *, cwd: Path, state: ProjectState, warn: Warn
) -> DefinitionWatch:
    """A watch that reloads the definitions on disk when their files change, for the rest of
    the session; a reload's new errors and warnings are reported (an old one is not again)."""
    home, trusted = Path.home(), options.trusted

    def reloaded(definitions: DefinitionSet) -> None:
        old = {str(e) for e in runtime.definitions.errors}
        runtime.definitions = definitions
        for error in definitions.errors:
            if str(error) not in old:
                warn(f"agent definition skipped: {error}")
        for warning in definitions.warnings:
            warn(warning)  # an identical earlier warning is not repeated

    watch = DefinitionWatch(
        folders=lambda: definition_folders(cwd, home, state.home, trusted),
        load=lambda: session_definitions(options, cwd, state, warn),
        on_reload=reloaded,
    )
    watch.prime()
    return watch


def session_permissions(
    options: SessionOptions, settings: Settings, cwd: Path, warn: Warn
) -> PermissionChecker:
    mode = parse_mode(options.permission_mode) if options.permission_mode else None
    context = context_from_settings(
        settings,
        cwd=cwd,
        mode=mode,
        allowed_tools=options.allowed_tools,
        disallowed_tools=options.disallowed_tools,
        on_warning=warn,
    )
    return PermissionChecker(context=context, ask_callback=options.ask_callback)


def session_hooks(
    options: SessionOptions,
    settings: Settings,
    definitions: DefinitionSet,
    *,
    session_id: str,
    transcript: Path,
    cwd: Path,
    warn: Warn,
) -> HookEngine | None:
    """The session's hook engine: settings hooks and ``SessionOptions.hooks`` (an SDK's
    callbacks), plus a place for definitions' own frontmatter hooks, which must run even
    when no settings file has a hook."""
    config = config_from_settings(settings)  # HookConfigError names the bad file
    if options.hooks is not None:
        config = options.hooks if config is None else config.merged(options.hooks)
    if config is None and not any(d.hooks for d in definitions.definitions.values()):
        return None  # no hook anywhere: the loop skips the hook calls altogether
    for warning in config.warnings if config is not None else ():
        warn(warning)
    return HookEngine(
        config or EMPTY_CONFIG,
        session_id=session_id,
        transcript_path=transcript,
        project_dir=cwd,
        on_warning=warn,
        conditions=PermissionRuleConditions(),
    )


def session_telemetry(config: RuntimeConfig, warn: Warn) -> RunObserver | None:
    if not config.telemetry:
        return None
    from subagents.telemetry import from_environment

    try:
        return from_environment()
    except (ImportError, ValueError) as exc:  # a broken set-up must not cost the run
        warn(f"telemetry is off: {exc}")
        return None


def session_mcp(
    options: SessionOptions,
    settings: Settings,
    *,
    cwd: Path,
    state: ProjectState,
    session_id: str,
    warn: Warn,
) -> McpServers | None:
    """The session's MCP servers (started by the run); the configuration's warnings."""
    config = load_session_config(
        cwd=cwd,
        state=state,
        settings=settings.values,
        cli_configs=options.mcp_config,
        extra=options.mcp_servers,
        strict=options.strict_mcp_config or not options.load_settings,
        trusted=options.trusted,
    )
    servers = session_servers(
        config, cwd=cwd, state=state, session_id=session_id, sdk=options.mcp_sdk, warn=warn
    )
    for warning in config.warnings:
        warn(warning)
    return servers
