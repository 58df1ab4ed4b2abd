"""What hook processes said, read with Claude Code's exit-code and JSON-output rules.

Per hook:

* exit 0 — success. Stdout that starts with ``{`` is parsed as the JSON output below; other stdout
  is plain text (shown to the child for SubagentStart, added as context for SessionStart, else
  ignored). JSON that does not parse is a warning and is then read as plain text.
* exit 2 — a blocking error: stderr is fed back to the model (the tool call is denied, the agent
  is kept running, the task is not created ...). For events that cannot block (SubagentStart,
  SessionStart, SessionEnd) it is only shown to the user, as Claude Code does.
* anything else, a timeout, or a failure to start — a non-blocking error, shown to the user as a
  warning and never to the model.

JSON output fields: ``continue`` (false stops the agent, ``stopReason`` says why), ``decision``
(``block``, or the older ``approve`` = allow for PreToolUse) with ``reason``, ``systemMessage``
(a warning for the user), ``suppressOutput`` (accepted; we never echo hook stdout to the
user anyway), and ``hookSpecificOutput`` with
``additionalContext``, ``permissionDecision`` (allow|deny|ask) + ``permissionDecisionReason``, and
``updatedInput``.

Several hooks of one event combine: any block blocks (all reasons kept), ``deny`` beats ``ask``
beats ``allow``, contexts are concatenated in config order, the first ``updatedInput`` wins.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from subagents.hooks.runner import HookRun
from subagents.tools.base import truncate

PermissionDecision = Literal["allow", "deny", "ask"]

BLOCKING_EVENTS: Final = frozenset(
    {
        "PreToolUse",
        "PostToolUse",
        "PostToolUseFailure",
        "SubagentStop",
        "Stop",
        "TaskCreated",
        "TeammateIdle",
    }
)
"""Events whose exit 2 / ``decision: block`` reaches the model; for the rest it is a warning."""

FEEDBACK_LIMIT: Final = 10_000
"""Cap on the hook text fed back to a model, so a chatty hook cannot flood a context."""

_RANK: Final[dict[str, int]] = {"allow": 1, "ask": 2, "deny": 3}


class HookSpecificOutput(BaseModel):
    """``hookSpecificOutput`` of a hook's JSON output."""

    model_config = ConfigDict(extra="allow")

    hookEventName: str | None = None
    additionalContext: str | None = None
    permissionDecision: PermissionDecision | None = None
    permissionDecisionReason: str | None = None
    updatedInput: dict[str, Any] | None = None


class HookJSONOutput(BaseModel):
    """A hook's JSON stdout (exit 0), with Claude Code's field names."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)

    continue_: bool = Field(default=True, alias="continue")
    stopReason: str | None = None
    suppressOutput: bool = False
    systemMessage: str | None = None
    decision: Literal["block", "approve"] | None = None
    reason: str | None = None
    hookSpecificOutput: HookSpecificOutput | None = None


@dataclass(kw_only=True)
class HookOutcome:
    """The combined verdict of every hook that ran for one event occurrence."""

    blocked: bool = False
    block_reasons: list[str] = field(default_factory=list)
    permission: PermissionDecision | None = None
    permission_reason: str = ""
    updated_input: dict[str, Any] | None = None
    contexts: list[str] = field(default_factory=list)
    """``additionalContext`` values, in config order."""
    plain_outputs: list[str] = field(default_factory=list)
    """Non-JSON stdout of successful hooks."""
    stop: bool = False
    stop_reason: str = ""

    @property
    def block_reason(self) -> str:
        return truncate("\n".join(self.block_reasons), FEEDBACK_LIMIT)

    def context_text(self, *, with_plain_output: bool = False) -> str:
        """Context for the model: additionalContext, plus plain stdout where the event shows it."""
        parts = self.contexts + (self.plain_outputs if with_plain_output else [])
        return truncate("\n".join(p for p in parts if p), FEEDBACK_LIMIT)


def interpret(event: str, runs: Sequence[HookRun], warn: Callable[[str], None]) -> HookOutcome:
    """Combine the runs of one event into a ``HookOutcome``; non-blocking errors go to ``warn``."""
    outcome = HookOutcome()
    for run in runs:
        _interpret_run(event, run, outcome, warn)
    return outcome


def _interpret_run(
    event: str, run: HookRun, outcome: HookOutcome, warn: Callable[[str], None]
) -> None:
    label = f"{event} hook {run.command.command!r} ({run.command.source or 'settings'})"
    if run.error:
        warn(f"{label} could not start: {run.error}")
    elif run.timed_out:
        warn(f"{label} timed out after {run.command.timeout:g}s and was killed")
    elif run.exit_code == 2:
        reason = run.stderr.strip() or f"{event} hook {run.command.command!r} exited with status 2"
        if event in BLOCKING_EVENTS:
            _block(outcome, reason)
        else:
            warn(f"{label} exited with status 2 (this event cannot block): {reason}")
    elif run.exit_code != 0:
        detail = run.stderr.strip() or "(no stderr)"
        warn(f"{label} failed with exit code {run.exit_code}: {truncate(detail, 2000)}")
    else:
        _interpret_success(event, run, outcome, label, warn)


def _interpret_success(
    event: str, run: HookRun, outcome: HookOutcome, label: str, warn: Callable[[str], None]
) -> None:
    text = run.stdout.strip()
    if not text.startswith("{"):
        if text:
            outcome.plain_outputs.append(text)
        return
    try:
        parsed = HookJSONOutput.model_validate(json.loads(text))
    except (ValueError, ValidationError) as exc:
        warn(f"{label} printed invalid JSON output, read as plain text: {exc}")
        outcome.plain_outputs.append(text)
        return
    _apply_json(event, parsed, outcome, warn)


def _apply_json(
    event: str, parsed: HookJSONOutput, outcome: HookOutcome, warn: Callable[[str], None]
) -> None:
    if parsed.systemMessage:
        warn(parsed.systemMessage)
    if not parsed.continue_:
        outcome.stop = True
        outcome.stop_reason = outcome.stop_reason or parsed.stopReason or f"stopped by {event} hook"
    if parsed.decision == "block":
        reason = parsed.reason or f"blocked by {event} hook"
        if event in BLOCKING_EVENTS:
            _block(outcome, reason)
        else:
            warn(f"{event} hook asked to block, which this event cannot do: {reason}")
    elif parsed.decision == "approve":
        _decide(outcome, "allow", parsed.reason or "")
    specific = parsed.hookSpecificOutput
    if specific is None:
        return
    if specific.permissionDecision is not None:
        _decide(outcome, specific.permissionDecision, specific.permissionDecisionReason or "")
    if specific.updatedInput is not None and outcome.updated_input is None:
        outcome.updated_input = specific.updatedInput
    if specific.additionalContext:
        outcome.contexts.append(specific.additionalContext)


def _block(outcome: HookOutcome, reason: str) -> None:
    outcome.blocked = True
    outcome.block_reasons.append(reason)


def _decide(outcome: HookOutcome, decision: PermissionDecision, reason: str) -> None:
    current = outcome.permission
    if current is None or _RANK[decision] > _RANK[current]:
        outcome.permission = decision
        outcome.permission_reason = reason
