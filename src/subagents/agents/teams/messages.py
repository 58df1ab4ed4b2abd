"""SendMessage inside a team: to a member's name or id, to ``team-lead``, or to ``*``.

Structured messages (``{"type": "shutdown_request"}``, ``shutdown_response``, plan approval) are
recognised from a JSON object message. A message goes to the recipient's durable mailbox; when a
teammate writes to another teammate, the lead's mailbox first gets an internal ``member_busy``
line, so the lead knows the recipient has work (docs/teams.md, "the lead hears its team when the
team is quiet"). A teammate that approves a shutdown ends after its current turn.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

from subagents.agents.teams.config import find_member, member_alive, teammates
from subagents.agents.teams.files import LEAD_NAME, TeamError
from subagents.agents.teams.host import MEMBER_BUSY, TeamHost
from subagents.agents.teams.inbox import TeamInbox
from subagents.agents.teams.mailbox import STRUCTURED_TYPES, new_message
from subagents.agents.teams.membership import TeamMembership
from subagents.loop.inbox import Inbox
from subagents.tools.base import ToolContext, ToolError, ToolOutput

BROADCAST = "*"
SHUTDOWN_HINT = (
    "\n\nThe lead asks you to shut down. If your work is finished, reply with SendMessage to "
    'team-lead, message {"type": "shutdown_response", "request_id": "<this request_id>", '
    '"approve": true}; to keep working, send approve false with a reason.'
)


def structured(message: str) -> dict[str, Any] | None:
    """The structured message a JSON object text is, else None."""
    text = message.strip()
    if not text.startswith("{"):
        return None
    try:
        data = json.loads(text)
    except ValueError:
        return None
    if isinstance(data, dict) and data.get("type") in STRUCTURED_TYPES:
        return data
    return None


async def team_send(
    team: TeamMembership,
    ctx: ToolContext,
    args: Any,
    *,
    host: TeamHost | None,
    inbox: Inbox | None,
) -> ToolOutput | None:
    """Deliver within the team; None when ``args.to`` is not a member (plain SendMessage)."""
    target = args.to.strip()
    try:
        config = await asyncio.to_thread(team.directory.load, team.team_name)
    except TeamError as exc:
        raise ToolError(str(exc)) from exc
    if target == BROADCAST:
        recipients = [m["name"] for m in config["members"] if m["name"] != team.name]
        recipients = [n for n in recipients if n == LEAD_NAME or _alive(config, n)]
    else:
        member = find_member(config, target)
        if member is None:
            return None
        if member["name"] != LEAD_NAME and not member_alive(member):
            raise ToolError(
                f"Teammate {member['name']} is no longer active (it shut down or stopped); "
                "spawn it again with the Agent tool to give it more work"
            )
        recipients = [member["name"]]
    if not recipients:
        raise ToolError(f"Team {team.team_name} has no other active member to message")
    fields = _fields(args.message, team)
    await asyncio.to_thread(_deliver, team, recipients, args, fields)
    if team.is_lead and host is not None:
        host.sent_work([n for n in recipients if n != LEAD_NAME])
    approved = fields.get("type") == "shutdown_response" and fields.get("approve") is True
    if approved and isinstance(inbox, TeamInbox):
        inbox.shut_down(approved=True)
    listed = ", ".join(recipients)
    return ToolOutput(
        content=f"Message sent to {listed} (delivered at their next turn).",
        metadata={"to": target, "recipients": recipients, **fields},
    )


def _alive(config: dict[str, Any], name: str) -> bool:
    return any(m["name"] == name and member_alive(m) for m in teammates(config))


def _fields(message: str, team: TeamMembership) -> dict[str, Any]:
    data = structured(message)
    if data is None:
        return {}
    kind = data["type"]
    fields: dict[str, Any] = {"type": kind}
    if kind.endswith("_request"):
        fields["request_id"] = str(data.get("request_id") or f"{kind[:-8]}-{uuid.uuid4().hex[:8]}")
    elif data.get("request_id"):
        fields["request_id"] = str(data["request_id"])
    if kind.endswith("_response"):
        approve = data.get("approve")
        if not isinstance(approve, bool):
            raise ToolError(f"A {kind} needs approve: true or false")
        fields["approve"] = approve
    for key in ("reason", "feedback"):
        if isinstance(data.get(key), str):
            fields[key] = data[key]
    return fields


def _deliver(
    team: TeamMembership, recipients: list[str], args: Any, fields: dict[str, Any]
) -> None:
    text = fields.get("reason") or fields.get("feedback") or args.message
    if fields.get("type") == "shutdown_request":
        text = f"{fields.get('reason') or 'Your work is done.'}{SHUTDOWN_HINT}"
    elif fields.get("type") == "shutdown_response":
        verdict = "approved" if fields["approve"] else "refused"
        text = f"{team.name} {verdict} the shutdown request." + (
            f" Reason: {fields['reason']}" if fields.get("reason") else ""
        )
    for name in recipients:
        if not team.is_lead and name != LEAD_NAME:
            busy = new_message(name, LEAD_NAME, "", type=MEMBER_BUSY)
            team.mailbox(LEAD_NAME).put(busy)
        message = new_message(team.name, name, text, summary=args.summary, **fields)
        team.mailbox(name).put(message)
