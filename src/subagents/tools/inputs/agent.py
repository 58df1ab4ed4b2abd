"""The Agent tool's input, imported at the first call (``tools.base.LazyInput``); until then a
run sends the schema from ``tools/input_schemas.json`` (``AgentTool`` drops the fields its
environment does not offer from a copy)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from subagents.tools.base import BuiltinToolInput

PermissionModeName = Literal["acceptEdits", "bypassPermissions", "default", "dontAsk", "plan"]


class AgentInput(BuiltinToolInput):
    description: str = Field(min_length=1, description="A short (3-5 word) description of the task")
    prompt: str = Field(min_length=1, description="The task for the agent to perform")
    subagent_type: str | None = Field(
        default=None, description="The type of agent to use (omit to fork yourself)"
    )
    model: Literal["sonnet", "opus", "haiku"] | None = Field(
        default=None, description="Model override for this agent"
    )
    run_in_background: bool | None = Field(
        default=None, description="Run in the background; you are notified when it completes"
    )
    name: str | None = Field(default=None, description="A name to address the agent by")
    team_name: str | None = Field(default=None, description="Team to spawn the agent into")
    mode: PermissionModeName | None = Field(default=None, description="Permission mode")
    isolation: Literal["worktree"] | None = Field(
        default=None, description='"worktree" runs the agent in its own git worktree'
    )
    cwd: str | None = Field(default=None, description="Working directory (absolute path)")
    resume_from: str | None = Field(
        default=None, description="Continue a finished agent (by id) in a new run"
    )
