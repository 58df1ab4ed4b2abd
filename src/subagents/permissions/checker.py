"""``PermissionChecker``: the ``can_use_tool`` callable the loop consults before every call.

It takes the pure verdict of ``decision.decide`` and resolves an ``ask``:

- in ``dontAsk`` mode (or below a ``dontAsk`` ancestor) an ask is a deny;
- a background agent's ask is routed to the same callback as the main session's and waits
  for the answer when ``route_background_asks`` is on (as Claude Code does since 2.1.186);
  otherwise it is denied at once, because nobody would see the prompt and the child would hang;
- with no ``ask_callback`` (a headless run) an ask is a deny;
- otherwise the callback decides, within ``ask_timeout`` seconds; no answer in time is a deny.

Every deny and allow is counted per agent (``denials.DenialTracker``); once an agent's breaker
trips, its calls are denied with a message telling it to stop, and the runtime can read
``breaker_tripped(agent_id)`` to end it.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from subagents.events import AgentRef
from subagents.permissions.context import PermissionContext
from subagents.permissions.decision import allowed_without_rules, decide, decide_off_loop
from subagents.permissions.denials import DenialLimits, DenialTracker
from subagents.permissions.read_rules import read_denial
from subagents.permissions.rules import PermissionRule
from subagents.permissions.updates import RULE_UPDATES, apply_permission_updates
from subagents.permissions.verdicts import Decision
from subagents.tools.base import (
    ALLOW,
    CURRENT_TOOL_USE_ID,
    HOOK_APPROVED,
    PermissionResult,
    Tool,
    ToolContext,
)

DEFAULT_ASK_TIMEOUT = 300.0


@dataclass(frozen=True, kw_only=True, slots=True)
class PermissionRequest:
    """What a permission prompt shows: the call, who makes it, and why it needs approval."""

    tool_name: str
    input: dict[str, Any]
    agent: AgentRef
    subject: str
    """The call in words, e.g. "Bash with command `git push`"."""
    reason: str
    rule: PermissionRule | None = None
    background: bool = False
    tool_use_id: str | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class AskAnswer:
    """A prompt's answer with more than yes/no (an SDK ``can_use_tool`` callback): a deny
    ``message`` for the model, or an allow with ``updated_input`` replacing the call's input."""

    allow: bool
    message: str = ""
    updated_input: dict[str, Any] | None = None
    added_rules: tuple[PermissionRule, ...] = ()
    """Allow rules the person granted for the rest of the session with this allow ("yes, and
    don't ask again"): the checker that asked adds them for every agent of its session
    (``PermissionChecker.add_session_rules``), and a teammate's relay carries them to the
    teammate's session."""


AskCallback = Callable[[PermissionRequest], Awaitable[bool | AskAnswer]]


def serialized(callback: AskCallback) -> AskCallback:
    """Wrap ``callback`` so concurrent asks (several children at once) prompt one at a time."""
    lock = asyncio.Lock()

    async def ask(request: PermissionRequest) -> bool | AskAnswer:
        async with lock:
            return await callback(request)

    return ask


@dataclass(kw_only=True, eq=False)  # identity: checkers are members of a set (``family``)
class PermissionChecker:
    """One agent's permission gate; ``for_child`` makes a child's, sharing callback and counts."""

    context: PermissionContext
    ask_callback: AskCallback | None = None
    ask_timeout: float = DEFAULT_ASK_TIMEOUT
    background: bool = False
    """Treat the agent as a background one whatever its context says. In a session the
    placement is read from the calling context (``ctx.owner.is_background``), so a child
    moved to the background is treated as one from its next call."""
    route_background_asks: bool = True
    denial_limits: DenialLimits | None = field(default_factory=DenialLimits)
    """None turns the breaker off (e.g. for an interactive main agent)."""
    trackers: dict[str, DenialTracker] = field(default_factory=dict)
    denied: list[dict[str, Any]] = field(default_factory=list)
    """Every denied call of this agent and its children (shared, like ``trackers``):
    ``{tool_name, tool_use_id, tool_input, agent_id}`` (the result's ``permission_denials``)."""
    family: weakref.WeakSet[PermissionChecker] = field(default_factory=weakref.WeakSet)
    """Every checker of the session — this one, the one it was made from, their children —
    (shared, like ``trackers``; weak: a finished child's checker goes with it). A rule change
    for the session reaches each (``apply_updates``), as Claude Code's session rules hold for
    its subagents, running or started later."""

    def __post_init__(self) -> None:
        self.family.add(self)

    async def __call__(
        self, tool: Tool[Any], args: BaseModel, ctx: ToolContext
    ) -> PermissionResult:
        tracker = self.trackers.get(ctx.agent.agent_id) or self.tracker(ctx.agent.agent_id)
        if tracker.tripped:
            tracker.record_denial()
            _observe(ctx, tool, Decision(behavior="deny"), "breaker", None)
            return PermissionResult(
                behavior="deny",
                message=f"Permission to use {tool.name} was denied. {tracker.stop_message()}",
            )
        if tool.name == "Bash":  # only a long command goes off the loop
            decision = await decide_off_loop(self.context, tool, args, ctx)
        else:
            decision = decide(self.context, tool, args, ctx)
        rule, decided_by = decision.rule, "rule" if decision.rule is not None else "mode"
        updated: dict[str, Any] | None = None
        if decision.behavior == "ask":
            decided_by = "hook" if HOOK_APPROVED.get() else "ask"
            decision, updated = await self._resolve_ask(decision, tool, args, ctx)
        if ctx.observer is not None:  # off: not even the call (this runs for every tool call)
            _observe(ctx, tool, decision, decided_by, rule)
        if decision.behavior == "allow":
            tracker.record_allow()
            if updated is None:
                return ALLOW
            return PermissionResult(behavior="allow", updated_input=updated)
        self._record_denial(tool, args, ctx)
        message = decision.message
        if tracker.record_denial():
            message = f"{message}\n\n{tracker.stop_message()}"
        return PermissionResult(behavior="deny", message=message)

    def allowed_at_once(self, tool: Tool[Any], args: BaseModel, ctx: ToolContext) -> bool:
        """``tools.base.InstantPermission``: True where awaiting this check would allow the
        call by the mode alone (``decide``'s read-only step, which telemetry does not record),
        counted as that allow is; False sends the call to ``__call__`` (a tripped breaker, a
        tool the agent does not hold, Bash, any deny or ask rule, a call that is not
        read-only). An agent with no tracker yet — no call of it was awaited — is answered
        too, and gets none: a fresh tracker is not tripped and an allow leaves its counts as
        they are (none in a row, none in all), so ``tracker`` makes the same one at the first
        awaited call. A coordinator's first response — a swarm's launches — is answered at
        once (``scheduling._answer_at_once``), and a child all of whose calls are allowed at
        once never makes one."""
        tracker = self.trackers.get(ctx.agent.agent_id)
        if tracker is not None and tracker.tripped:
            return False
        context = self.context
        held = context.tools
        if (held is not None and tool.name not in held) or tool.name == "Bash":
            return False
        if not allowed_without_rules(context, tool, args):
            return False
        if tracker is not None:
            tracker.consecutive = 0  # ``record_allow``, inlined: this runs for every call
        return True

    def tracker(self, agent_id: str) -> DenialTracker:
        """The denial counts of ``agent_id`` (created on first use)."""
        tracker = self.trackers.get(agent_id)
        if tracker is None:
            tracker = DenialTracker(limits=self.denial_limits)
            self.trackers[agent_id] = tracker
        return tracker

    def breaker_tripped(self, agent_id: str) -> bool:
        tracker = self.trackers.get(agent_id)
        return tracker is not None and tracker.tripped  # after every model call of a child

    def read_denial(self, path: Path | str, *, asks: bool) -> str | None:
        """This agent's read rules for one file a tool touches (``tools.base.ReadGuard``)."""
        context = self.context
        if not context.deny and not (asks and context.ask):
            return None  # no rules: every Read of most sessions, no path object to build
        return read_denial(context.deny, context.ask, context.scope, Path(path), asks=asks)

    def agent_type_denial(self, agent_type: str) -> str | None:
        """Refusal text when a deny rule forbids spawning ``agent_type`` (see the context)."""
        return self.context.agent_type_denial(agent_type)

    def for_child(
        self, context: PermissionContext, *, background: bool = False
    ) -> PermissionChecker:
        """A checker for a child: its own context, the same prompt channel and denial book.
        Every field is carried over (``dataclasses.replace`` without its per-field argument
        handling and ``__init__``: a checker per child of a 1,000-child swarm), one store
        each in the class's order: an update of the new object's ``__dict__`` made it a dict
        of its own (8.6 k instructions against 4.7 k; its attributes then read through that
        dict, not the class's shared key table). ``tests/test_permissions.py`` checks every
        field is carried, so a field added to the class must be added here."""
        child = _new(type(self))
        child.context = context
        child.ask_callback = self.ask_callback
        child.ask_timeout = self.ask_timeout
        child.background = background
        child.route_background_asks = self.route_background_asks
        child.denial_limits = self.denial_limits
        child.trackers = self.trackers
        child.denied = self.denied
        child.family = family = self.family
        family.add(child)
        return child

    def apply_updates(self, updates: list[Any], warn: Callable[[str], None]) -> None:
        """Permission updates (an SDK allow's ``updatedPermissions``, ``/permissions``): rule
        changes for every checker of the session, the mode and directories for this one. All
        or none: an invalid update raises before any context changes."""
        context = apply_permission_updates(self.context, updates, warn)
        rules = [u for u in updates if u["type"] in RULE_UPDATES]
        others = [m for m in self.family if m is not self] if rules else []
        changed = [(m, apply_permission_updates(m.context, rules, _quiet)) for m in others]
        self.context = context
        for member, new in changed:
            member.context = new

    def add_session_rules(self, rules: Sequence[PermissionRule]) -> None:
        """Allow ``rules`` for every agent of the session (an ask answered "don't ask again")."""
        for member in list(self.family):
            held = {str(r) for r in member.context.allow}
            new = tuple(r for r in rules if str(r) not in held)
            if new:
                member.context = replace(member.context, allow=member.context.allow + new)

    def _record_denial(self, tool: Tool[Any], args: BaseModel, ctx: ToolContext) -> None:
        self.denied.append(
            {
                "tool_name": tool.name,
                "tool_use_id": CURRENT_TOOL_USE_ID.get(),
                "tool_input": args.model_dump(mode="json", by_alias=True, exclude_none=True),
                "agent_id": ctx.agent.agent_id,
            }
        )

    async def _resolve_ask(
        self, decision: Decision, tool: Tool[Any], args: BaseModel, ctx: ToolContext
    ) -> tuple[Decision, dict[str, Any] | None]:
        subject = decision.subject or tool.name
        if HOOK_APPROVED.get():
            return Decision(behavior="allow", subject=subject), None  # a PreToolUse hook allowed
        if self.context.denies_asks:
            return _deny(
                f"Permission to use {subject} was denied: permission mode 'dontAsk' denies "
                "anything that is not allowed by a rule."
            ), None
        background = self.background or (ctx.owner is not None and ctx.owner.is_background)
        if background and not (self.route_background_asks and self.ask_callback):
            return _deny(
                f"Permission to use {tool.name} was denied: background agents cannot show "
                "permission prompts (fail rather than hang)"
            ), None
        if self.ask_callback is None:
            why = f" ({decision.message})" if decision.message else ""
            return _deny(
                f"Permission to use {subject} was denied: it needs approval and this run has "
                "no one to ask (headless). Add an allow rule to the settings or choose "
                f"another permission mode.{why}"
            ), None
        request = PermissionRequest(
            tool_name=tool.name,
            input=args.model_dump(mode="json", by_alias=True, exclude_none=True),
            agent=ctx.agent,
            subject=subject,
            reason=decision.message,
            rule=decision.rule,
            background=background,
            tool_use_id=CURRENT_TOOL_USE_ID.get(),
        )
        return await self._ask(request)

    async def _ask(self, request: PermissionRequest) -> tuple[Decision, dict[str, Any] | None]:
        assert self.ask_callback is not None
        subject = request.subject
        try:
            async with asyncio.timeout(self.ask_timeout):
                granted = await self.ask_callback(request)
        except TimeoutError:
            return _deny(
                f"Permission to use {subject} was denied: no answer to the permission prompt "
                f"within {self.ask_timeout:g} s."
            ), None
        except Exception as exc:  # a broken prompt must fail closed, not crash the agent
            return _deny(
                f"Permission to use {subject} was denied: the permission prompt failed "
                f"({type(exc).__name__}: {exc})."
            ), None
        if isinstance(granted, AskAnswer):
            if granted.allow:
                if granted.added_rules:
                    self.add_session_rules(granted.added_rules)
                return Decision(behavior="allow", subject=subject), granted.updated_input
            reason = granted.message or "denied by the user"
            return _deny(f"Permission to use {subject} was denied: {reason}"), None
        if granted:
            return Decision(behavior="allow", subject=subject), None
        return _deny(f"Permission to use {subject} was denied by the user."), None


_new = object.__new__


def _quiet(_warning: str) -> None:
    """The other checkers' warnings of an update: this checker's were given already."""


def _deny(message: str) -> Decision:
    return Decision(behavior="deny", message=message)


def _observe(
    ctx: ToolContext, tool: Tool[Any], decision: Decision, by: str, rule: PermissionRule | None
) -> None:
    """Tell telemetry who decided (``decided_by``: rule, mode, hook, ask, breaker) and by which
    rule; the message quotes the call, so telemetry keeps it only when tool details are on.
    An allow by the mode alone (a read-only call, ``bypassPermissions``, ``acceptEdits``) is
    the common case and says nothing a trace reader needs: it is not recorded."""
    if ctx.observer is None or (by == "mode" and decision.behavior == "allow"):
        return
    attributes: dict[str, str] = {
        "tool": tool.name,
        "behavior": decision.behavior,
        "decided_by": by,
    }
    if rule is not None:
        attributes["rule"] = str(rule)
        if rule.source:
            attributes["rule_source"] = rule.source
    if decision.message:
        attributes["message"] = decision.message
    ctx.observer.record(ctx.agent, "permission.decision", attributes)
