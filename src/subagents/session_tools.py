"""What the main agent of a ``Session`` is given: its tools, its system prompt, the reminders of
its first message (the agent catalog, and the project context where the prompt lacks it)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from subagents.agents.agent_tool import AgentTool
from subagents.agents.plan_mode import ExitPlanModeTool
from subagents.agents.prompts import environment_for, main_system_prompt, profile_of
from subagents.agents.reminders import TurnReminders, reminders_for
from subagents.agents.runtime import AgentRuntime
from subagents.models.base import Model
from subagents.session_options import SessionOptions
from subagents.session_turns import select_tools
from subagents.tools.base import Tool
from subagents.tools.send_message import SendMessageTool
from subagents.tools.task_output import TaskOutputTool
from subagents.tools.task_stop import TaskStopTool
from subagents.tools.todo import TodoBoard, TodoWriteTool
from subagents.tools.web_search import WebSearchTool
from subagents.tools.worktree_tools import EnterWorktreeTool, ExitWorktreeTool, WorktreeSession


def main_tools(
    options: SessionOptions,
    runtime: AgentRuntime,
    *,
    todos: TodoBoard,
    session_id: str,
    teams: bool,
) -> list[Tool[Any]]:
    """``SessionOptions.tools`` (or the built-in set, filtered by ``tool_names`` and
    ``disallowed_tools``), then ``extra_tools``, then the MCP servers' tools."""
    mcp = runtime.mcp.tools() if runtime.mcp is not None else []
    if options.tools is not None:
        return [*options.tools, *options.extra_tools, *mcp]
    builtin = _builtin_tools(options, runtime, todos=todos, session_id=session_id, teams=teams)
    return [*builtin, *options.extra_tools, *mcp]


def _builtin_tools(
    options: SessionOptions,
    runtime: AgentRuntime,
    *,
    todos: TodoBoard,
    session_id: str,
    teams: bool,
) -> list[Tool[Any]]:
    from subagents.tools import core_tools

    agent = AgentTool(background_available=not runtime.config.background_disabled)
    worktrees = WorktreeSession(
        hooks=runtime.hooks.config if runtime.hooks is not None else None,
        session_id=session_id,
    )
    tools: list[Tool[Any]] = [
        agent,
        *core_tools(),
        TodoWriteTool(todos),
        WebSearchTool(options.web_search),
        ExitPlanModeTool(),
        TaskOutputTool(),
        TaskStopTool(),
        SendMessageTool(),
        EnterWorktreeTool(worktrees),
        ExitWorktreeTool(worktrees),
        *(_lead_tools() if teams else []),
    ]
    return select_tools(tools, options.tool_names, options.disallowed_tools)


def _lead_tools() -> list[Tool[Any]]:
    from subagents.agents.team_tools import lead_tools

    return lead_tools()


def system_prompt(
    options: SessionOptions,
    runtime: AgentRuntime,
    *,
    cwd: Path,
    model: Model,
    custom: str | None,
) -> str:
    """The main agent's system prompt (SessionOptions ``system_prompt``,
    ``system_prompt_file`` and ``append_system_prompt`` as documented there)."""
    return main_system_prompt(
        environment_for(runtime.project_context, cwd, model),
        context=runtime.context_block(read_only=False),
        custom=custom,
        append=options.append_system_prompt,
        profile=profile_of(model),
    )


def first_reminders(
    runtime: AgentRuntime, tool_names: list[str], *, custom: str | None
) -> TurnReminders | None:
    """The catalog; with an empty system prompt also the project context, which the
    prompt then does not hold (``main_system_prompt``)."""
    reminders = reminders_for(runtime, None, tool_names)
    blank = custom is not None and not custom.strip()
    context = runtime.context_block(read_only=False) if blank else ""
    if context:
        reminders = reminders or TurnReminders()
        reminders.context = context
    return reminders
