"""The hook points the loop calls; ``subagents.hooks`` implements them from settings.

The loop knows nothing of settings files or shell commands: it calls these methods at the right
moments and acts on what they return. ``None`` for ``ToolContext.hooks`` means no hooks at all, and
costs nothing on the hot path.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol

if TYPE_CHECKING:
    from subagents.tools.base import ToolContext, ToolOutput


@dataclass(kw_only=True, slots=True)
class PreToolVerdict:
    """What PreToolUse hooks decided. ``None`` decision = no opinion (normal permission flow)."""

    decision: Literal["allow", "deny", "ask"] | None = None
    reason: str = ""
    updated_input: dict[str, Any] | None = None
    additional_context: str = ""


@dataclass(kw_only=True, slots=True)
class StopVerdict:
    """A Stop/SubagentStop hook may block the end of a run: the reason goes back to the model."""

    block: bool = False
    reason: str = ""


class LoopHooks(Protocol):
    async def pre_tool_use(
        self, tool_name: str, tool_input: dict[str, Any], tool_use_id: str, ctx: ToolContext
    ) -> PreToolVerdict: ...

    async def post_tool_use(
        self,
        tool_name: str,
        tool_input: dict[str, Any],
        tool_use_id: str,
        output: ToolOutput,
        ctx: ToolContext,
    ) -> str:
        """Runs after a call (PostToolUse, or PostToolUseFailure for an error result).

        Returns extra context to append to the tool result ("" for none)."""
        ...

    async def stop(self, final_text: str, ctx: ToolContext) -> StopVerdict: ...
