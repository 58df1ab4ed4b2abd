"""``EnterWorktree`` / ``ExitWorktree``: the main session moves into a worktree and back.

Both tools share one ``WorktreeSession`` given at construction (the session builds it once and
passes it to both), so "one active at a time" and "where to return" live in one place. Entering
switches the *main agent's* context — ``ctx.cwd`` and ``ctx.roots``, which confine the file
tools and Bash — to the new worktree; exiting restores what was there before. They are for the
main session only: definitions never give them to children (``ALWAYS_BLOCKED_FOR_CHILDREN``),
and the tools refuse a child's call as well, in case a tool list was assembled by hand.

``ExitWorktree(action: "remove")`` refuses to throw work away: uncommitted changes or commits
beyond the base need ``discard_changes: true``. A refused exit changes nothing (the session
stays in the worktree); a removal that fails still returns the session to where it was and says
the worktree was kept.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from subagents.hooks.config import HookConfig
from subagents.tools import descriptions
from subagents.tools.base import (
    CallInfo,
    LazyInput,
    Tool,
    ToolContext,
    ToolError,
    ToolOutput,
)

if TYPE_CHECKING:
    from subagents.tools.inputs.worktree import EnterWorktreeInput, ExitWorktreeInput
    from subagents.worktrees.git import Worktree

ENTER_DESCRIPTION = descriptions.ENTER_WORKTREE

EXIT_DESCRIPTION = descriptions.EXIT_WORKTREE


@dataclass(kw_only=True)
class WorktreeSession:
    """The main session's worktree state, shared by EnterWorktree and ExitWorktree."""

    hooks: HookConfig | None = None
    """Settings hooks; their WorktreeCreate/WorktreeRemove apply outside a git repository."""
    session_id: str = ""
    active: Worktree | None = None
    previous_cwd: Path | None = None
    previous_roots: tuple[Path, ...] = ()


def _main_session_only(tool: str, ctx: ToolContext) -> None:
    if ctx.agent.parent_agent_id is not None:
        raise ToolError(f"{tool} is only available to the main session, not to sub-agents.")


class EnterWorktreeTool(Tool["EnterWorktreeInput"]):
    """Create a worktree and move the session's working directory into it."""

    name = "EnterWorktree"
    description = ENTER_DESCRIPTION
    input_model = LazyInput["EnterWorktreeInput"](
        "subagents.tools.inputs.worktree", "EnterWorktreeInput"
    )

    def __init__(self, session: WorktreeSession) -> None:
        self.session = session

    async def call(self, args: EnterWorktreeInput, ctx: ToolContext, info: CallInfo) -> ToolOutput:
        from subagents.worktrees.git import isolated_roots, random_session_name, working_dir_in

        _main_session_only(self.name, ctx)
        state = self.session
        if state.active is not None:
            raise ToolError(
                f"Already in worktree {state.active.path}; call ExitWorktree before entering "
                "another one."
            )
        worktree = await self._create(args.name or random_session_name(), ctx)
        state.active = worktree
        state.previous_cwd, state.previous_roots = ctx.cwd, ctx.roots
        ctx.roots = isolated_roots(ctx.roots, ctx.cwd, worktree.path)
        ctx.cwd = working_dir_in(worktree, ctx.cwd)
        on_branch = f" on branch {worktree.branch}" if worktree.branch else ""
        base = f" from {worktree.head_commit[:12]}" if worktree.head_commit else ""
        return ToolOutput(
            content=(
                f"Created worktree at {worktree.path}{on_branch}{base}. The working directory "
                f"is now {ctx.cwd}; ExitWorktree returns to {state.previous_cwd}."
            ),
            metadata=_fields(worktree),
        )

    async def _create(self, name: str, ctx: ToolContext) -> Worktree:
        from subagents.worktrees.commands import create_with_hooks
        from subagents.worktrees.git import NotAGitRepository, WorktreeError, create_named_worktree

        try:
            try:
                return await create_named_worktree(ctx.cwd, name)
            except NotAGitRepository:
                return await create_with_hooks(
                    ctx.cwd,
                    None,
                    hooks=self.session.hooks,
                    name=name,
                    session_id=self.session.session_id,
                    processes=ctx.processes,
                )
        except WorktreeError as exc:
            raise ToolError(f"Cannot create a worktree: {exc}") from None


class ExitWorktreeTool(Tool["ExitWorktreeInput"]):
    """Return from the active worktree, keeping or removing it."""

    name = "ExitWorktree"
    description = EXIT_DESCRIPTION
    input_model = LazyInput["ExitWorktreeInput"](
        "subagents.tools.inputs.worktree", "ExitWorktreeInput"
    )

    def __init__(self, session: WorktreeSession) -> None:
        self.session = session

    async def call(self, args: ExitWorktreeInput, ctx: ToolContext, info: CallInfo) -> ToolOutput:
        from subagents.worktrees.git import WorktreeError

        _main_session_only(self.name, ctx)
        worktree = self.session.active
        if worktree is None:
            raise ToolError("No worktree is active; EnterWorktree first.")
        if args.action == "remove" and not args.discard_changes:
            await self._refuse_if_changed(worktree)
        previous = self._restore(ctx)
        if args.action == "keep":
            return ToolOutput(
                content=f"Returned to {previous}; kept worktree {worktree.path}"
                + (f" (branch {worktree.branch})." if worktree.branch else "."),
                metadata=_fields(worktree),
            )
        try:
            await self._remove(worktree, ctx)
        except WorktreeError as exc:
            raise ToolError(
                f"Returned to {previous}, but the worktree at {worktree.path} could not be "
                f"removed and was kept: {exc}"
            ) from None
        return ToolOutput(content=f"Returned to {previous}; removed worktree {worktree.path}.")

    async def _refuse_if_changed(self, worktree: Worktree) -> None:
        from subagents.worktrees.git import WorktreeError, worktree_changes

        """Refuse (changing nothing) when removal would lose work or we cannot tell."""
        if worktree.hook_based:
            raise ToolError(
                f"Cannot check the hook-created worktree {worktree.path} for changes; call "
                "ExitWorktree with discard_changes: true to remove it anyway, or action: keep."
            )
        try:
            changes = await worktree_changes(worktree.path, worktree.head_commit, worktree.branch)
        except WorktreeError as exc:
            raise ToolError(f"Cannot inspect {worktree.path} before removing it: {exc}") from None
        if changes.any:
            raise ToolError(
                f"Refusing to remove worktree {worktree.path}: it has {changes.describe()} that "
                "would be lost. Call ExitWorktree with discard_changes: true to discard them, "
                "or with action: keep."
            )

    def _restore(self, ctx: ToolContext) -> Path:
        state = self.session
        if state.previous_cwd is not None:
            ctx.cwd, ctx.roots = state.previous_cwd, state.previous_roots
        state.active, state.previous_cwd, state.previous_roots = None, None, ()
        return ctx.cwd

    async def _remove(self, worktree: Worktree, ctx: ToolContext) -> None:
        from subagents.worktrees.commands import remove_with_hooks
        from subagents.worktrees.git import discard_worktree

        if worktree.hook_based:
            await remove_with_hooks(
                worktree,
                hooks=self.session.hooks,
                session_id=self.session.session_id,
                processes=ctx.processes,
            )
            return
        await discard_worktree(worktree)


def _fields(worktree: Worktree) -> dict[str, str]:
    fields = {"worktreePath": str(worktree.path)}
    if worktree.branch is not None:
        fields["worktreeBranch"] = worktree.branch
    return fields
