"""The control protocol of ``claude-agent-sdk``, in the direction where we ask.

``ControlChannel.request`` writes ``{"type": "control_request", "request_id", "request"}`` and
waits (bounded) for the matching ``control_response`` read from stdin. On top of it:

* ``sdk_ask_callback``: permission asks become ``can_use_tool`` requests (the main agent's and
  background children's); the answer may allow with ``updatedInput`` and
  ``updatedPermissions``, or deny with a message and ``interrupt``;
* ``sdk_hooks``: the ``initialize`` request's hook matchers become hook entries whose command is
  a ``hook_callback`` request, so they run where command hooks run, with the same input JSON;
* ``mcp_message`` is the seam for SDK in-process MCP servers (``request("mcp_message", …)``):
  until an MCP client layer exists (issue 17) nothing sends it, and SDK servers are reported
  as failed in ``init``.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from subagents.hooks.config import (
    DEFAULT_TIMEOUT_S,
    HOOK_EVENTS,
    HookCommand,
    HookConfig,
    MatcherGroup,
)
from subagents.hooks.matchers import compile_matcher
from subagents.permissions.checker import AskAnswer, AskCallback, PermissionChecker
from subagents.permissions.checker import PermissionRequest as Ask
from subagents.permissions.rules import PermissionRule
from subagents.permissions.updates import allowed_rules

Line = dict[str, Any]


class ControlError(Exception):
    """The other side answered with an error, or could not answer (stdin closed, timeout)."""


@dataclass(kw_only=True)
class ControlChannel:
    """Requests to the SDK and their answers."""

    write: Callable[[Line], None]
    on_waiting: Callable[[int], None] = lambda _count: None
    """Told how many of our requests await an answer (``requires_action`` while > 0)."""
    _pending: dict[str, asyncio.Future[Line]] = field(default_factory=dict)
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    closed: bool = False

    async def request(self, subtype: str, wait_s: float | None, **fields: Any) -> Line:
        if self.closed:
            raise ControlError(f"cannot send {subtype}: the SDK's input stream is closed")
        request_id = f"sa_req_{next(self._ids)}"
        future: asyncio.Future[Line] = asyncio.get_running_loop().create_future()
        self._pending[request_id] = future
        self.on_waiting(len(self._pending))
        self.write(
            {
                "type": "control_request",
                "request_id": request_id,
                "request": {"subtype": subtype, **fields},
            }
        )
        try:
            async with asyncio.timeout(wait_s):
                return await future
        except (TimeoutError, asyncio.CancelledError):
            self.write({"type": "control_cancel_request", "request_id": request_id})
            raise
        finally:
            self._pending.pop(request_id, None)
            self.on_waiting(len(self._pending))

    def resolve(self, message: Line) -> None:
        """A ``control_response`` from stdin; an unknown id (an answer too late) is ignored."""
        response = message.get("response")
        if not isinstance(response, dict):
            return
        future = self._pending.get(str(response.get("request_id")))
        if future is None or future.done():
            return
        if response.get("subtype") == "error":
            future.set_exception(ControlError(str(response.get("error") or "error")))
        else:
            body = response.get("response")
            future.set_result(body if isinstance(body, dict) else {})

    def close(self) -> None:
        """No more answers can come: every waiting request fails now."""
        self.closed = True
        for future in self._pending.values():
            if not future.done():
                future.set_exception(ControlError("the SDK's input stream closed"))


# -- can_use_tool ------------------------------------------------------------------------------


@dataclass(kw_only=True)
class SdkPermissions:
    """Answers permission asks through the SDK's ``can_use_tool`` callback."""

    channel: ControlChannel
    checker: Callable[[], PermissionChecker]
    interrupt: Callable[[str], object]
    warn: Callable[[str], None]
    directories: Callable[[tuple[Path, ...], tuple[Path, ...]], object] = lambda _a, _r: None
    """Told the directories an update added and removed, so file tools can reach them."""
    timeout: float | None = None

    def callback(self) -> AskCallback:
        return self.ask

    async def ask(self, request: Ask) -> bool | AskAnswer:
        fields: dict[str, Any] = {
            "tool_name": request.tool_name,
            "input": request.input,
            "permission_suggestions": suggestions(request),
            "blocked_path": None,
            "decision_reason": request.reason,
            "title": f"Claude wants to use {request.subject}",
            "display_name": request.tool_name,
            "tool_use_id": request.tool_use_id or "",
        }
        if request.agent.parent_agent_id is not None:
            fields["agent_id"] = request.agent.agent_id
        answer = await self.channel.request("can_use_tool", self.timeout, **fields)
        return self._read(answer)

    def _read(self, answer: Line) -> AskAnswer:
        if answer.get("behavior") == "allow":
            updates = answer.get("updatedPermissions")
            added: tuple[PermissionRule, ...] = ()
            if isinstance(updates, list) and self._apply(updates):
                added = allowed_rules(updates)
            updated = answer.get("updatedInput")
            return AskAnswer(
                allow=True,
                updated_input=updated if isinstance(updated, dict) else None,
                added_rules=added,
            )
        if answer.get("interrupt"):
            self.interrupt("interrupted by the permission callback")
        return AskAnswer(allow=False, message=str(answer.get("message") or "denied by the user"))

    def _apply(self, updates: list[Any]) -> bool:
        """Rule changes for every agent of the session, the mode and directories for the
        main agent's checker (``PermissionChecker.apply_updates``); False when none applied."""
        checker = self.checker()
        before = checker.context.additional_directories
        try:
            checker.apply_updates(updates, self.warn)
        except (ValueError, TypeError, KeyError) as exc:
            self.warn(f"updatedPermissions not applied (none of them): {exc}")
            return False
        after = checker.context.additional_directories
        added = tuple(d for d in after if d not in before)
        removed = tuple(d for d in before if d not in after)
        if added or removed:
            self.directories(added, removed)
        return True


def suggestions(request: Ask) -> list[Line]:
    """What Claude Code suggests with an ask: allow this tool (or this rule) for the session."""
    rule: Line = {"toolName": request.tool_name}
    if request.rule is not None and request.rule.specifier is not None:
        rule["ruleContent"] = request.rule.specifier
    return [{"type": "addRules", "rules": [rule], "behavior": "allow", "destination": "session"}]


# -- hooks ---------------------------------------------------------------------------------------


def sdk_hooks(channel: ControlChannel, raw: Mapping[str, Any] | None) -> HookConfig:
    """The ``initialize`` request's ``hooks`` as a ``HookConfig`` of callback entries; an
    event this runtime never fires is left out with a warning (``HookConfig.warnings``)."""
    if not raw:
        return HookConfig()
    events: dict[str, tuple[MatcherGroup, ...]] = {}
    warnings: list[str] = []
    for event, matchers in raw.items():
        if event not in HOOK_EVENTS:
            warnings.append(f"SDK hooks: {event} hooks are not supported, ignored")
            continue
        if not isinstance(matchers, list):
            raise TypeError(f"initialize: hooks.{event}: expected a list of matchers")
        groups = tuple(_group(channel, event, m) for m in matchers)
        events[event] = groups
    return HookConfig(events=events, warnings=tuple(warnings))


def _group(channel: ControlChannel, event: str, raw: Any) -> MatcherGroup:
    if not isinstance(raw, dict):
        raise TypeError(f"initialize: hooks.{event}: a matcher must be an object")
    timeout = float(raw.get("timeout") or DEFAULT_TIMEOUT_S)
    blocks = raw.get("onFailure") not in (None, "continue")
    commands = tuple(
        HookCommand(
            command=f"sdk-callback:{callback_id}",
            timeout=timeout,
            source="SDK hooks",
            callback=_callback(channel, str(callback_id)),
            blocks_on_failure=blocks,
        )
        for callback_id in raw.get("hookCallbackIds") or []
    )
    return MatcherGroup(matcher=compile_matcher(raw.get("matcher")), commands=commands)


def _callback(channel: ControlChannel, callback_id: str) -> Any:
    async def call(payload: Mapping[str, Any]) -> Mapping[str, Any]:
        # The hook's own timeout bounds it (the runner), so the request itself waits unbounded.
        return await channel.request(
            "hook_callback",
            None,
            callback_id=callback_id,
            input=dict(payload),
            tool_use_id=payload.get("tool_use_id"),
        )

    return call
