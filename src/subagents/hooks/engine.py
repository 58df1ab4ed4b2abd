"""``HookEngine``: the session's hooks, fired at the moments SPEC §12 names.

The loop reaches the engine through ``ToolContext.hooks`` (the ``LoopHooks`` protocol:
PreToolUse, PostToolUse / PostToolUseFailure, Stop / SubagentStop); the agent runtime, the team
tools and the session call the other events directly.

Scoping. ``for_agent`` registers an agent definition's frontmatter ``hooks`` for one agent id
(its ``Stop`` becomes ``SubagentStop``, as in Claude Code). Every event *about* an agent — its
tool calls, its start and its stop — runs with the settings hooks plus that agent's own, whichever
engine instance the caller holds; once the agent's SubagentStop has fired the scope is dropped.
Engines derived with ``for_agent`` share one session state, so pairing and block counting are
per session, not per instance.

Pairing. SubagentStart and SubagentStop are always paired, once each: ``subagent_start`` for an
agent already running is a no-op, SubagentStop fires at most once per run (a *blocked* stop does
not count: the agent keeps running and will stop again), and ``ensure_stopped`` — which the
runtime calls in a ``finally`` for every child, killed, failed or recovered after a crash — fires
it only if nothing did. A resumed agent (started again after it stopped) gets a new pair.

Stop loops. A Stop or SubagentStop hook may block the same agent at most
``MAX_CONSECUTIVE_STOP_BLOCKS`` times in a row; the next block is ignored with a warning, so a
hook that always says "keep going" cannot keep an agent alive forever.

``continue: false`` from a tool-event hook stops the agent: its abort signal fires with the
hook's ``stopReason`` (the loop then ends with reason ``aborted``). For Stop/SubagentStop it just
means "do not block"; for TaskCreated/TeammateIdle it is ignored.
"""

from __future__ import annotations

import copy
import logging
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Literal

from subagents.hooks.config import HookConfig, parse_hooks
from subagents.hooks.matchers import CallConditions, ToolCall
from subagents.hooks.output import HookOutcome, interpret
from subagents.hooks.runner import clean_environment, run_hooks
from subagents.tools.base import (
    CompactVerdict,
    PreToolVerdict,
    StopVerdict,
    ToolContext,
    ToolOutput,
)

MAX_CONSECUTIVE_STOP_BLOCKS: Final = 8

_log = logging.getLogger(__name__)

_AgentStatus = Literal["new", "running", "stopping", "stopped"]


@dataclass(frozen=True, kw_only=True)
class PromptVerdict:
    """What the UserPromptSubmit hooks said about one prompt."""

    refusal: str | None = None
    """Set when a hook refused the prompt: why."""
    context: str = ""
    """Context the hooks added for the model."""


@dataclass(kw_only=True)
class _AgentRecord:
    """What the hook engine knows of one agent: status, type, transcript."""

    status: _AgentStatus = "new"
    agent_type: str
    transcript_path: str = ""


@dataclass(kw_only=True)
class _SessionState:
    """Shared by an engine and every engine derived from it with ``for_agent``."""

    agents: dict[str, _AgentRecord] = field(default_factory=dict)
    scoped: dict[str, HookConfig] = field(default_factory=dict)
    stop_blocks: dict[str, int] = field(default_factory=dict)


class HookEngine:
    """Fires command hooks for one session; implements ``subagents.tools.base.LoopHooks``."""

    def __init__(
        self,
        config: HookConfig,
        *,
        session_id: str,
        transcript_path: str | Path,
        project_dir: Path,
        on_warning: Callable[[str], None] | None = None,
        environ: Mapping[str, str] | None = None,
        conditions: CallConditions | None = None,
    ) -> None:
        """``on_warning`` receives what the user should see (failed hooks, systemMessage);
        ``environ`` is the parent environment the hook whitelist is taken from (default
        ``os.environ``); ``conditions`` matches handlers' ``if`` rules (without one, every ``if``
        holds)."""
        self._base = config
        self._session_id = session_id
        self._transcript_path = str(transcript_path)
        self._project_dir = project_dir
        self._on_warning = on_warning
        self._env = clean_environment(project_dir, os.environ if environ is None else environ)
        self._home = Path(self._env.get("HOME") or Path.home())
        self._conditions = conditions
        self._state = _SessionState()
        self._owner: str | None = None

    @property
    def config(self) -> HookConfig:
        """The hooks in force for this engine's agent (settings + its frontmatter)."""
        return self._config_for(self._owner)

    def for_agent(
        self,
        definition_hooks: Mapping[str, Any] | None,
        agent_id: str,
        agent_type: str,
        *,
        transcript_path: str | Path | None = None,
        source: str | None = None,
    ) -> HookEngine:
        """An engine for agent ``agent_id`` with its definition's frontmatter hooks added.

        Raises ``HookConfigError`` (naming ``source``) for malformed frontmatter hooks."""
        self._record(agent_id, agent_type, transcript_path)
        if definition_hooks:
            # Their warnings were reported when the definition was read (agents.agent_file).
            where = source or f"agent definition {agent_type!r}"
            own = parse_hooks(definition_hooks, where).with_stop_as_subagent_stop()
            self._state.scoped[agent_id] = self._base.merged(own)
        derived = copy.copy(self)
        derived._owner = agent_id
        return derived

    # -- LoopHooks -------------------------------------------------------------------------

    async def pre_tool_use(
        self, tool_name: str, tool_input: dict[str, Any], tool_use_id: str, ctx: ToolContext
    ) -> PreToolVerdict:
        """PreToolUse: exit 2 or ``deny`` refuses the call with the hook's reason."""
        fields = {"tool_name": tool_name, "tool_input": tool_input, "tool_use_id": tool_use_id}
        outcome = await self._fire_tool_event("PreToolUse", tool_name, fields, ctx)
        context = outcome.context_text()
        if outcome.stop:
            self._halt(ctx, "PreToolUse", outcome)
            return PreToolVerdict(decision="deny", reason=outcome.stop_reason)
        if outcome.blocked:
            return PreToolVerdict(
                decision="deny", reason=outcome.block_reason, additional_context=context
            )
        return PreToolVerdict(
            decision=outcome.permission,
            reason=outcome.permission_reason,
            updated_input=outcome.updated_input,
            additional_context=context,
        )

    async def post_tool_use(
        self,
        tool_name: str,
        tool_input: dict[str, Any],
        tool_use_id: str,
        output: ToolOutput,
        ctx: ToolContext,
    ) -> str:
        """PostToolUse, or PostToolUseFailure for an error result; returns text for the model."""
        fields: dict[str, Any] = {
            "tool_name": tool_name,
            "tool_input": tool_input,
            "tool_use_id": tool_use_id,
        }
        if output.is_error:
            event = "PostToolUseFailure"
            fields.update(error=output.content, is_interrupt=False)
        else:
            event = "PostToolUse"
            fields["tool_response"] = _tool_response(output)
        outcome = await self._fire_tool_event(event, tool_name, fields, ctx)
        if outcome.stop:
            self._halt(ctx, event, outcome)
        parts = [f"{event} hook feedback:\n{outcome.block_reason}"] if outcome.blocked else []
        parts.append(outcome.context_text())
        return "\n\n".join(p for p in parts if p)

    async def stop(self, final_text: str, ctx: ToolContext) -> StopVerdict:
        """Stop for the main agent, SubagentStop for a child; a block keeps it running."""
        agent = ctx.agent
        if agent.parent_agent_id is not None:
            return await self._subagent_stop(
                agent.agent_id, agent.agent_type, None, final_text, ctx=ctx, blockable=True
            )
        fields = {
            "stop_hook_active": agent.agent_id in self._state.stop_blocks,
            "last_assistant_message": final_text,
        }
        outcome = await self._fire("Stop", None, fields, agent_id=agent.agent_id, ctx=ctx)
        return self._stop_verdict(agent.agent_id, "Stop", outcome)

    async def pre_compact(
        self, trigger: str, instructions: str, ctx: ToolContext
    ) -> CompactVerdict:
        """PreCompact (matcher: the trigger, auto|manual); exit 2 or ``decision: block`` skips
        this compaction; additional context and plain output add to the instructions."""
        fields = {"trigger": trigger, "custom_instructions": instructions}
        outcome = await self._fire_agent_event("PreCompact", trigger, fields, ctx)
        if outcome.blocked:
            return CompactVerdict(block=True, reason=outcome.block_reason)
        return CompactVerdict(instructions=outcome.context_text(with_plain_output=True))

    async def post_compact(self, trigger: str, summary: str, ctx: ToolContext) -> None:
        """PostCompact, with the summary; it cannot block."""
        fields = {"trigger": trigger, "compact_summary": summary}
        await self._fire_agent_event("PostCompact", trigger, fields, ctx)

    # -- agent lifecycle -------------------------------------------------------------------

    async def subagent_start(
        self, agent_id: str, agent_type: str, *, transcript_path: str | Path | None = None
    ) -> str:
        """SubagentStart (once per run); returns the text to show the child ("" for none)."""
        record = self._record(agent_id, agent_type, transcript_path)
        if record.status in ("running", "stopping"):
            return ""
        record.status = "running"
        fields = {"agent_id": agent_id, "agent_type": agent_type}
        outcome = await self._fire("SubagentStart", agent_type, fields, agent_id=agent_id)
        return outcome.context_text(with_plain_output=True)

    async def subagent_stop(
        self, agent_id: str, agent_type: str, transcript_path: str | Path
    ) -> StopVerdict:
        """SubagentStop for a child that finished; a block asks the runtime to keep it going."""
        return await self._subagent_stop(
            agent_id, agent_type, transcript_path, None, ctx=None, blockable=True
        )

    async def ensure_stopped(
        self, agent_id: str, agent_type: str, transcript_path: str | Path
    ) -> None:
        """Fire SubagentStop unless it already fired for this run (killed, failed, recovered)."""
        await self._subagent_stop(
            agent_id, agent_type, transcript_path, None, ctx=None, blockable=False
        )

    # -- teams and session -----------------------------------------------------------------

    async def task_created(
        self,
        task_id: str,
        subject: str,
        description: str,
        teammate_name: str | None,
        team_name: str | None,
    ) -> str | None:
        """TaskCreated; a block returns the reason (the task is then deleted, a tool error)."""
        fields = {
            "task_id": task_id,
            "task_subject": subject,
            "task_description": description,
            "teammate_name": teammate_name,
            "team_name": team_name,
        }
        outcome = await self._fire("TaskCreated", None, fields)
        return outcome.block_reason if outcome.blocked else None

    async def teammate_idle(self, teammate_name: str, team_name: str) -> str | None:
        """TeammateIdle; a block returns feedback that keeps the teammate working."""
        fields = {"teammate_name": teammate_name, "team_name": team_name}
        outcome = await self._fire("TeammateIdle", None, fields)
        return outcome.block_reason if outcome.blocked else None

    async def session_start(self, source: str) -> str:
        """SessionStart (source: startup|resume|clear|compact); returns context for the model."""
        outcome = await self._fire("SessionStart", source, {"source": source})
        return outcome.context_text(with_plain_output=True)

    async def user_prompt_submit(self, prompt: str) -> PromptVerdict:
        """UserPromptSubmit, before a prompt reaches the main agent: exit 2, ``decision:
        block`` or ``continue: false`` refuse it (it never enters the history); otherwise
        ``additionalContext`` and plain stdout are context for the model, as in Claude Code."""
        outcome = await self._fire("UserPromptSubmit", None, {"prompt": prompt})
        if outcome.blocked or outcome.stop:
            reason = outcome.block_reason if outcome.blocked else outcome.stop_reason
            return PromptVerdict(refusal=reason)
        return PromptVerdict(context=outcome.context_text(with_plain_output=True))

    async def session_end(self, reason: str) -> None:
        """SessionEnd; it cannot block, failures are only warnings."""
        await self._fire("SessionEnd", reason, {"reason": reason})

    # -- internals -------------------------------------------------------------------------

    def _config_for(self, agent_id: str | None) -> HookConfig:
        if agent_id is None:
            return self._base
        return self._state.scoped.get(agent_id, self._base)

    def _record(
        self, agent_id: str, agent_type: str, transcript_path: str | Path | None
    ) -> _AgentRecord:
        record = self._state.agents.get(agent_id)
        if record is None:
            record = self._state.agents[agent_id] = _AgentRecord(agent_type=agent_type)
        record.agent_type = agent_type
        if transcript_path is not None:
            record.transcript_path = str(transcript_path)
        return record

    async def _fire(
        self,
        event: str,
        subject: str | None,
        fields: Mapping[str, Any],
        *,
        agent_id: str | None = None,
        ctx: ToolContext | None = None,
        call: ToolCall | None = None,
    ) -> HookOutcome:
        """Run the matching commands of ``event`` and combine what they said."""
        commands = self._config_for(agent_id).commands_for(event, subject, call)
        if not commands:
            return HookOutcome()
        payload = {
            "session_id": self._session_id,
            "transcript_path": self._transcript_path,
            "cwd": str(ctx.cwd if ctx is not None else self._project_dir),
            "hook_event_name": event,
            **fields,
        }
        runs = await run_hooks(
            commands,
            payload,
            cwd=self._project_dir,
            env=self._env,
            processes=ctx.processes if ctx is not None else None,
        )
        return interpret(event, runs, self._warn)

    async def _fire_tool_event(
        self, event: str, tool_name: str, fields: dict[str, Any], ctx: ToolContext
    ) -> HookOutcome:
        agent = ctx.agent
        if agent.parent_agent_id is not None:
            fields.update(agent_id=agent.agent_id, agent_type=agent.agent_type)
        call = ToolCall(
            tool_name=tool_name,
            tool_input=fields["tool_input"],
            cwd=ctx.cwd,
            project_root=self._project_dir,
            home=self._home,
            conditions=self._conditions,
        )
        return await self._fire(
            event, tool_name, fields, agent_id=agent.agent_id, ctx=ctx, call=call
        )

    async def _fire_agent_event(
        self, event: str, subject: str, fields: dict[str, Any], ctx: ToolContext
    ) -> HookOutcome:
        """An event about the agent ``ctx`` belongs to: its scoped hooks; a child's id and type
        in the payload, as for tool events."""
        agent = ctx.agent
        if agent.parent_agent_id is not None:
            fields.update(agent_id=agent.agent_id, agent_type=agent.agent_type)
        return await self._fire(event, subject, fields, agent_id=agent.agent_id, ctx=ctx)

    async def _subagent_stop(
        self,
        agent_id: str,
        agent_type: str,
        transcript_path: str | Path | None,
        last_message: str | None,
        *,
        ctx: ToolContext | None,
        blockable: bool,
    ) -> StopVerdict:
        record = self._record(agent_id, agent_type, transcript_path)
        if record.status in ("stopping", "stopped"):
            return StopVerdict()
        previous, record.status = record.status, "stopping"
        verdict = StopVerdict()
        try:
            fields: dict[str, Any] = {
                "agent_id": agent_id,
                "agent_type": agent_type,
                "agent_transcript_path": record.transcript_path,
                "stop_hook_active": agent_id in self._state.stop_blocks,
            }
            if last_message is not None:
                fields["last_assistant_message"] = last_message
            outcome = await self._fire(
                "SubagentStop", agent_type, fields, agent_id=agent_id, ctx=ctx
            )
            if blockable:
                verdict = self._stop_verdict(agent_id, "SubagentStop", outcome)
        finally:
            # Also on cancellation: the hook ran (or was killed), so it counts as fired.
            if verdict.block:
                record.status = previous
            else:
                record.status = "stopped"
                self._state.scoped.pop(agent_id, None)
                self._state.stop_blocks.pop(agent_id, None)
        return verdict

    def _stop_verdict(self, agent_id: str, event: str, outcome: HookOutcome) -> StopVerdict:
        """Apply the consecutive-block limit to a Stop/SubagentStop outcome."""
        blocks = self._state.stop_blocks
        if outcome.stop or not outcome.blocked:
            blocks.pop(agent_id, None)
            return StopVerdict()
        count = blocks.get(agent_id, 0)
        if count >= MAX_CONSECUTIVE_STOP_BLOCKS:
            blocks.pop(agent_id, None)
            self._warn(
                f"{event} hooks blocked agent {agent_id} {count} times in a row; "
                "ignoring the block and letting it stop"
            )
            return StopVerdict()
        blocks[agent_id] = count + 1
        return StopVerdict(block=True, reason=outcome.block_reason)

    def _halt(self, ctx: ToolContext, event: str, outcome: HookOutcome) -> None:
        """``continue: false``: stop the agent the way a user interrupt would."""
        self._warn(f"{event} hook stopped agent {ctx.agent.agent_id}: {outcome.stop_reason}")
        ctx.abort.abort(f"stopped by {event} hook: {outcome.stop_reason}")

    def _warn(self, message: str) -> None:
        if self._on_warning is None:
            _log.warning("%s", message)
        else:
            self._on_warning(message)


def _tool_response(output: ToolOutput) -> dict[str, Any]:
    """What PostToolUse hooks see of a result: its text, plus structured metadata if any."""
    response: dict[str, Any] = {"content": output.content}
    if output.metadata:
        response["metadata"] = output.metadata
    return response
