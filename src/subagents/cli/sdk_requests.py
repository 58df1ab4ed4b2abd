"""The control requests ``claude-agent-sdk`` sends us, and our answers.

``initialize`` (hooks, agents, SDK MCP server names), ``interrupt``, ``set_permission_mode``,
``set_model``, ``stop_task``, ``mcp_status``; ``mcp_message``/``mcp_reconnect``/``mcp_toggle``
answer that MCP is not supported yet; anything else gets an error naming the subtype.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from subagents.cli.claude_models import choose
from subagents.cli.control import sdk_hooks
from subagents.cli.stream_session import SessionRequest, shown

if TYPE_CHECKING:
    from subagents.cli.stream_session import StreamSession

Line = dict[str, Any]


@dataclass(kw_only=True)
class SdkRequests:
    """Answers control requests; ``configured_model`` is the spec Claude names map onto."""

    configured_model: str
    current_spec: str
    """The spec the main agent runs now."""
    slash_commands: Callable[[], list[str]]
    sdk_mcp_servers: list[str] = field(default_factory=list)
    """Names of the SDK's in-process MCP servers (``--mcp-config`` entries of type ``sdk``)."""

    async def handle(self, stream: StreamSession, subtype: str, request: Line) -> Line:
        handler = getattr(self, f"_on_{subtype}", None) if subtype.isidentifier() else None
        if subtype in ("mcp_reconnect", "mcp_toggle"):
            raise RuntimeError(f"{subtype} is not supported: MCP servers start with the session")
        if handler is None:
            raise RuntimeError(f"unsupported control request subtype: {shown(subtype)}")
        result: Line = await handler(stream, request)
        return result

    async def _on_initialize(self, stream: StreamSession, request: Line) -> Line:
        if stream.session is not None:
            return {**self._server_info(stream), "hooks_applied": False}
        agents = request.get("agents")
        if agents is not None and not isinstance(agents, dict):
            raise ValueError("initialize: agents must be an object of definitions")
        hooks = sdk_hooks(stream.channel, request.get("hooks"))
        for warning in hooks.warnings:
            stream.warn(warning)
        stream.ensure_session(SessionRequest(agents=agents, hooks=hooks))
        return self._server_info(stream)

    def _server_info(self, stream: StreamSession) -> Line:
        session = stream.ensure_session()
        return {
            "commands": [
                {"name": n, "description": "", "argumentHint": ""} for n in self.slash_commands()
            ],
            "agents": [
                {"name": d.name, "description": d.description}
                for d in session.runtime.definitions.definitions.values()
            ],
            "output_style": "default",
            "available_output_styles": ["default"],
            "models": [
                {
                    "value": session.model.name,
                    "displayName": session.model.name,
                    "description": "the configured model",
                }
            ],
            "account": {},
            "pid": os.getpid(),
            "hook_on_failure_supported": True,
            "hooks_applied": True,
        }

    async def _on_interrupt(self, stream: StreamSession, request: Line) -> Line:
        if stream.session is not None:
            stream.session.interrupt()
        return {}

    async def _on_set_permission_mode(self, stream: StreamSession, request: Line) -> Line:
        from subagents.permissions.modes import parse_mode

        mode = request.get("mode")
        if mode == "auto":
            raise ValueError("permission mode 'auto' is not supported")
        parsed = parse_mode(str(mode))
        checker = stream.ensure_session().permissions
        checker.context = replace(checker.context, mode=parsed)
        return {"mode": parsed}

    async def _on_set_model(self, stream: StreamSession, request: Line) -> Line:
        session = stream.ensure_session()
        model = request.get("model")
        choice = choose(str(model) if model else None, self.configured_model)
        # The same spec keeps the same model object (a script keeps its per-agent counters).
        if choice.spec != self.current_spec:
            session.set_model(choice.spec)
            self.current_spec = choice.spec
        if choice.note:
            stream.warn(f"set_model: {choice.note}")
        return {"model": session.model.name}

    async def _on_stop_task(self, stream: StreamSession, request: Line) -> Line:
        session = stream.ensure_session()
        task_id = str(request.get("task_id") or "")
        state = session.registry.find(task_id)
        if state is None:
            raise ValueError(f"stop_task: no task {task_id!r} in this session")
        if state.status == "running":
            await session.registry.kill(task_id)
        return {}

    async def _on_mcp_status(self, stream: StreamSession, request: Line) -> Line:
        mcp = stream.ensure_session().runtime.mcp
        return {"mcpServers": mcp.statuses() if mcp is not None else []}


def sdk_mcp_server_names(configs: list[str]) -> list[str]:
    """Names of ``type: sdk`` servers in ``--mcp-config`` values (JSON; files are read)."""
    names: list[str] = []
    for raw in configs:
        text = raw
        if not raw.lstrip().startswith("{"):
            try:
                with open(raw, encoding="utf-8") as handle:
                    text = handle.read(1_000_000)
            except OSError:
                continue
        try:
            servers = json.loads(text).get("mcpServers", {})
        except (ValueError, AttributeError):
            continue
        if isinstance(servers, dict):
            names += [n for n, c in servers.items() if isinstance(c, dict)]
    return names
