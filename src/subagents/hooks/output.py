"""What hook processes said, read with Claude Code's exit-code and JSON-output rules.

Per hook:

* exit 0 — success. Stdout that starts with ``{`` is parsed as the JSON output below; other stdout
  is plain text (shown to the child for SubagentStart, added as context for SessionStart, else
  ignored).
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

Each field is read on its own: one invalid field (``"permissionDecision": "Deny"``) does not
drop the others (a valid ``"decision": "block"`` still blocks). What cannot be understood is
warned about; for **PreToolUse** it fails closed: output that starts with ``{`` but is not a
JSON object, or an invalid value in a field that decides (``decision``, ``continue``,
``permissionDecision``, ``updatedInput``, ``hookSpecificOutput``), blocks the call with a message
naming the hook and the field, instead of letting the tool run unchecked. Elsewhere such output
is a warning (and non-JSON text is read as plain text), and the valid fields still apply.

Several hooks of one event combine: any block blocks (all reasons kept), ``deny`` beats ``ask``
beats ``allow``, contexts are concatenated in config order, the first ``updatedInput`` wins.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from subagents.config_files import load_json
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
        "UserPromptSubmit",
        "PreCompact",
    }
)
"""Events whose exit 2 / ``decision: block`` reaches the model; for the rest it is a warning."""

FEEDBACK_LIMIT: Final = 10_000
"""Cap on the hook text fed back to a model, so a chatty hook cannot flood a context."""

_RANK: Final[dict[str, int]] = {"allow": 1, "ask": 2, "deny": 3}


@dataclass(kw_only=True)
class HookJSONOutput:
    """The fields of a hook's JSON stdout (exit 0) that were understood, Claude Code's names.

    ``problems`` lists each field that was present but invalid (``decisive``: one that could
    change what happens to the call)."""

    continue_: bool = True
    stop_reason: str | None = None
    system_message: str | None = None
    decision: Literal["block", "approve"] | None = None
    reason: str | None = None
    additional_context: str | None = None
    permission_decision: PermissionDecision | None = None
    permission_reason: str | None = None
    updated_input: dict[str, Any] | None = None
    problems: list[str] = field(default_factory=list)
    decisive: list[str] = field(default_factory=list)


def read_json_output(data: dict[str, Any]) -> HookJSONOutput:
    """Read every known field of ``data`` independently (see the module docstring)."""
    out = HookJSONOutput()
    reader = _FieldReader(data, out, prefix="")
    out.continue_ = reader.take("continue", bool, decisive=True, default=True)
    out.stop_reason = reader.take("stopReason", str)
    reader.take("suppressOutput", bool)  # accepted; hook stdout is never echoed to the user
    out.system_message = reader.take("systemMessage", str)
    out.decision = reader.choice("decision", ("block", "approve"), decisive=True)
    out.reason = reader.take("reason", str)
    specific = data.get("hookSpecificOutput")
    if specific is None:
        return out
    if not isinstance(specific, dict):
        out.problems.append("hookSpecificOutput: must be an object")
        out.decisive.append("hookSpecificOutput")
        return out
    inner = _FieldReader(specific, out, prefix="hookSpecificOutput.")
    inner.take("hookEventName", str)
    out.additional_context = inner.take("additionalContext", str)
    out.permission_decision = inner.choice(
        "permissionDecision", ("allow", "deny", "ask"), decisive=True
    )
    out.permission_reason = inner.take("permissionDecisionReason", str)
    out.updated_input = inner.take("updatedInput", dict, decisive=True)
    return out


@dataclass
class _FieldReader:
    """Reads typed fields of a hook's JSON output, noting what was decisive."""

    data: dict[str, Any]
    out: HookJSONOutput
    prefix: str

    def take(self, name: str, kind: type, *, decisive: bool = False, default: Any = None) -> Any:
        value = self.data.get(name)
        if value is None:
            return default
        if isinstance(value, kind) and (kind is bool or not isinstance(value, bool)):
            return value
        shown = type(value).__name__ if isinstance(value, dict | list) else repr(value)
        self._problem(name, f"expected {_KIND_NAMES[kind]}, got {truncate(shown, 80)}", decisive)
        return default

    def choice(self, name: str, allowed: tuple[str, ...], *, decisive: bool) -> Any:
        value = self.data.get(name)
        if value is None or value in allowed:
            return value
        shown = truncate(repr(value), 80)
        self._problem(name, f"{shown} is not one of {', '.join(allowed)}", decisive)
        return None

    def _problem(self, name: str, message: str, decisive: bool) -> None:
        self.out.problems.append(f"{self.prefix}{name}: {message}")
        if decisive:
            self.out.decisive.append(f"{self.prefix}{name}")


_KIND_NAMES: Final = {bool: "true or false", str: "text", dict: "an object"}


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
    data, problem = _json_object(text)
    if data is None:
        if event == "PreToolUse":
            _block(outcome, _not_understood(label, problem))
        else:
            warn(f"{label} printed {problem}, read as plain text")
            outcome.plain_outputs.append(text)
        return
    parsed = read_json_output(data)
    for item in parsed.problems:
        warn(f"{label} printed an invalid field, ignored: {item}")
    if event == "PreToolUse" and parsed.decisive:
        _block(outcome, _not_understood(label, f"invalid {', '.join(parsed.decisive)}"))
    _apply_json(event, parsed, outcome, warn)


def _json_object(text: str) -> tuple[dict[str, Any] | None, str]:
    """The JSON object ``text`` holds, or ``None`` and what is wrong with it."""
    try:
        data = load_json(text)
    except ValueError as exc:  # invalid JSON, or nested past the bound
        return None, f"invalid JSON ({_one_line(str(exc))})"
    if not isinstance(data, dict):
        return None, "JSON that is not an object"
    return data, ""


def _not_understood(label: str, problem: str) -> str:
    return (
        f"{label} printed output that cannot be understood ({problem}); the call is blocked "
        "rather than run unchecked. Fix the hook's output (see the hooks JSON output format)."
    )


def _one_line(text: str) -> str:
    return truncate(" ".join(text.split()), 200)


def _apply_json(
    event: str, parsed: HookJSONOutput, outcome: HookOutcome, warn: Callable[[str], None]
) -> None:
    if parsed.system_message:
        warn(parsed.system_message)
    if not parsed.continue_:
        outcome.stop = True
        outcome.stop_reason = (
            outcome.stop_reason or parsed.stop_reason or f"stopped by {event} hook"
        )
    if parsed.decision == "block":
        reason = parsed.reason or f"blocked by {event} hook"
        if event in BLOCKING_EVENTS:
            _block(outcome, reason)
        else:
            warn(f"{event} hook asked to block, which this event cannot do: {reason}")
    elif parsed.decision == "approve":
        _decide(outcome, "allow", parsed.reason or "")
    if parsed.permission_decision is not None:
        _decide(outcome, parsed.permission_decision, parsed.permission_reason or "")
    if parsed.updated_input is not None and outcome.updated_input is None:
        outcome.updated_input = parsed.updated_input
    if parsed.additional_context:
        outcome.contexts.append(parsed.additional_context)


def _block(outcome: HookOutcome, reason: str) -> None:
    outcome.blocked = True
    outcome.block_reasons.append(reason)


def _decide(outcome: HookOutcome, decision: PermissionDecision, reason: str) -> None:
    current = outcome.permission
    if current is None or _RANK[decision] > _RANK[current]:
        outcome.permission = decision
        outcome.permission_reason = reason
