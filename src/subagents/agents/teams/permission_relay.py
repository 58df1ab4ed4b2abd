"""A process teammate's permission asks go to its lead's user (Claude Code: a teammate's
permission requests bubble up to the lead).

Teammate side. When its lead can ask someone (the lead's session has an ask callback: the
terminal UI's ask bar, the SDK's ``can_use_tool``; the spawn's ``ask_lead``), ``LeadAsker.ask``
is the teammate session's ``AskCallback``: it sends the lead a ``permission_request`` (a fresh
``request_id``, the tool and its input, the subject and reason a prompt shows, who asks) and waits
for the ``permission_response`` with that id (``allow``, a deny ``message``, ``updated_input``,
and ``added_rules``: what the lead's user allowed for the rest of the session, which the
teammate's checker adds for every agent of the teammate's session).
The checker bounds the wait (``ask_timeout``: a deny) and a cancelled call withdraws it. The
teammate's mailbox watcher hands answers over (``answered``); they are consumed, never shown to
the teammate's model, which did not ask. A headless lead has no one to ask: its teammates deny
by themselves, as before, without a round trip.

Lead side. ``LeadRelay`` answers each request from an active member with the lead's callback
(the request names the teammate; ``background=True``), bounded like any ask, and writes the
answer to that member's mailbox; the rules an allow grants for the session are added to the
lead's session as well (``grant``). A request from a name that is not an active teammate (left
over from a killed run, or written by some other process) is dropped with a warning: nothing is
shown, and no mailbox is written for a name the team does not have.

Trust: mailboxes are files of the user, so any process of the user can write a line. A forged
answer must carry the request id, which only the asking process and the lead's mailbox hold;
a teammate reading the lead's mailbox and writing its own would need tool calls outside its
project, which ask — the exposure Claude Code's file mailboxes have.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from subagents.agents.teams.config import find_member, member_alive
from subagents.agents.teams.files import LEAD_NAME, TeamError
from subagents.agents.teams.mailbox import new_message
from subagents.agents.teams.membership import TeamMembership
from subagents.events import AgentRef
from subagents.permissions.checker import (
    DEFAULT_ASK_TIMEOUT,
    AskAnswer,
    AskCallback,
    PermissionRequest,
)
from subagents.permissions.rules import PermissionRule, parse_rule

log = logging.getLogger(__name__)

REQUEST = "permission_request"
RESPONSE = "permission_response"


@dataclass(kw_only=True)
class LeadAsker:
    """A teammate's ``AskCallback``: the lead's user answers (see the module docstring)."""

    team: TeamMembership

    async def ask(self, request: PermissionRequest) -> bool | AskAnswer:
        team = self.team
        message = new_message(
            team.name,
            LEAD_NAME,
            f"{team.name} asks permission to use {request.subject}",
            type=REQUEST,
            request_id=f"permission-{uuid.uuid4().hex}",
            tool_name=request.tool_name,
            input=request.input,
            subject=request.subject,
            reason=request.reason,
            agent_id=request.agent.agent_id,
            agent_type=request.agent.agent_type,
            tool_use_id=request.tool_use_id,
        )
        async with team.awaiting_lead(message) as answer:
            return _answer(await answer)


def answered(team: TeamMembership, message: dict[str, Any]) -> bool:
    """Hand a ``permission_response`` from the lead to the ask waiting for it; True when the
    message was one (consumed: the teammate's model never reads it)."""
    if message.get("type") != RESPONSE:
        return False
    if message.get("from") != LEAD_NAME:
        log.warning("%s: a permission_response not from %s, ignored", team.name, LEAD_NAME)
        return True
    waiting = team.approvals.get(str(message.get("request_id")))
    if waiting is not None and not waiting.done():
        waiting.set_result(message)
    return True


def _answer(response: dict[str, Any]) -> AskAnswer:
    updated = response.get("updated_input")
    if response.get("allow") is True:
        return AskAnswer(
            allow=True,
            updated_input=updated if isinstance(updated, dict) else None,
            added_rules=_rules(response.get("added_rules")),
        )
    message = str(response.get("message") or "").strip()
    return AskAnswer(allow=False, message=message or "the team lead's user said no")


def _rules(raw: object) -> tuple[PermissionRule, ...]:
    """The allow rules the lead's user granted for the session with this answer; one that does
    not parse is dropped (logged), the others hold."""
    if not isinstance(raw, list):
        return ()
    rules: list[PermissionRule] = []
    for text in raw:
        try:
            rules.append(parse_rule(str(text), "the team lead's answer"))
        except ValueError as exc:
            log.warning("%s", exc)
    return tuple(rules)


@dataclass(kw_only=True)
class LeadRelay:
    """The lead's side: asks its user on behalf of its teammates."""

    ask: AskCallback
    lead_session_id: str
    timeout: float = DEFAULT_ASK_TIMEOUT
    grant: Callable[[tuple[PermissionRule, ...]], None] | None = None
    """Adds an answer's ``added_rules`` to the lead's session too: the user allowed the call for
    the session, not only for this teammate (the terminal UI and the SDK add them themselves; a
    library callback only returns them; a rule already held adds nothing)."""
    _tasks: set[asyncio.Task[None]] = field(default_factory=set)

    def arrived(self, team: TeamMembership, message: dict[str, Any]) -> None:
        """A ``permission_request`` arrived in the lead's mailbox: answer it in its own task
        (the mailbox watcher goes on meanwhile)."""
        name = f"permission-relay:{team.team_name}/{message.get('from')}"
        task = asyncio.get_running_loop().create_task(self._relay(team, message), name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def settled(self) -> None:
        """Wait until every request in flight has been answered (or dropped)."""
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def close(self) -> None:
        """The lead's run is over: withdraw the asks still shown."""
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _relay(self, team: TeamMembership, message: dict[str, Any]) -> None:
        sender = await asyncio.to_thread(_active_member, team, message)
        if sender is None:
            return
        request = self._request(sender, team.team_name, message)
        if request is None:
            log.warning("%s: a malformed permission_request from %s, dropped", team.name, sender)
            return
        try:
            async with asyncio.timeout(self.timeout):
                granted = await self.ask(request)
        except TimeoutError:
            granted = AskAnswer(allow=False, message=f"no answer within {self.timeout:g} s")
        except Exception as exc:  # a broken prompt fails closed; the lead goes on
            granted = AskAnswer(allow=False, message=f"the permission prompt failed ({exc})")
        if not isinstance(granted, AskAnswer):
            granted = AskAnswer(allow=granted, message="" if granted else "denied by the user")
        if granted.allow and granted.added_rules and self.grant is not None:
            self.grant(granted.added_rules)
        reply = new_message(
            LEAD_NAME,
            sender,
            "allowed" if granted.allow else "denied",
            type=RESPONSE,
            request_id=str(message.get("request_id")),
            allow=granted.allow,
            message=granted.message or None,
            updated_input=granted.updated_input,
            added_rules=[str(rule) for rule in granted.added_rules] or None,
        )
        await asyncio.to_thread(team.mailbox(sender).put, reply)

    def _request(
        self, sender: str, team_name: str, message: dict[str, Any]
    ) -> PermissionRequest | None:
        tool_input, tool_name = message.get("input"), message.get("tool_name")
        if not isinstance(tool_input, dict) or not isinstance(tool_name, str) or not tool_name:
            return None
        agent_id, agent_type = message.get("agent_id"), message.get("agent_type")
        reason = str(message.get("reason") or "")
        tool_use_id = message.get("tool_use_id")
        return PermissionRequest(
            tool_name=tool_name,
            input=tool_input,
            agent=AgentRef(
                agent_id=str(agent_id or sender),
                agent_type=str(agent_type or "teammate"),
                parent_agent_id=self.lead_session_id,
            ),
            subject=str(message.get("subject") or tool_name),
            reason=f"teammate {sender} of team {team_name}" + (f": {reason}" if reason else ""),
            background=True,
            tool_use_id=tool_use_id if isinstance(tool_use_id, str) else None,
        )


def _active_member(team: TeamMembership, message: dict[str, Any]) -> str | None:
    """The sender's member name when it is an active teammate of the team, else None."""
    sender = message.get("from")
    try:
        config = team.directory.load(team.team_name)
    except TeamError:
        return None
    member = find_member(config, sender) if isinstance(sender, str) else None
    if member is None or member["name"] == LEAD_NAME or not member_alive(member):
        log.warning("%s: a permission_request from %r, not an active teammate", team.name, sender)
        return None
    return str(member["name"])
