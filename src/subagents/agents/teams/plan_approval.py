"""A plan-mode teammate's ``ExitPlanMode`` waits for its lead's answer (Claude Code's plan
approval).

The teammate's call sends the lead a ``plan_approval_request`` (the plan as its text, a fresh
``request_id``) and waits — until the lead answers or the teammate is stopped — for the
``plan_approval_response`` with that id, which the lead's model sends with SendMessage
(``approve`` true or false, optional ``feedback``). The teammate's mailbox watcher hands the
answer to the waiting call (``TeamMembership.approvals``); the answer is also delivered as an
ordinary message, so nothing read from the mailbox is dropped. While it waits the teammate
counts as waiting on its lead, not busy, so the lead hears the request at once.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from subagents.abort import AbortSignal
from subagents.agents.teams.files import LEAD_NAME
from subagents.agents.teams.mailbox import new_message
from subagents.agents.teams.membership import TeamMembership

REQUEST = "plan_approval_request"
RESPONSE = "plan_approval_response"


def request_text(plan: str, sender: str, request_id: str) -> str:
    """What the lead reads: the plan, then how to answer it."""
    return (
        f"{plan}\n\n{sender} is in plan mode and asks you to approve this plan before it "
        f"acts. Reply with SendMessage to {sender}, message "
        f'{{"type": "{RESPONSE}", "request_id": "{request_id}", "approve": true}}; to send '
        'it back, use "approve": false with "feedback" saying what to change.'
    )


async def ask_lead(team: TeamMembership, plan: str, abort: AbortSignal) -> tuple[bool, str]:
    """Send the plan to the lead and wait for its answer: (approved, by whom / why not)."""
    request_id = f"plan_approval-{uuid.uuid4().hex[:8]}"
    text = request_text(plan, team.name, request_id)
    message = new_message(team.name, LEAD_NAME, text, type=REQUEST, request_id=request_id)
    async with team.awaiting_lead(message) as answer:
        unsubscribe = abort.on_abort(lambda _reason: _cancel(answer))
        try:
            await asyncio.shield(answer)
        except asyncio.CancelledError:
            if not abort.aborted:
                raise  # the call itself was cancelled
        finally:
            unsubscribe()
        if answer.cancelled() or not answer.done():
            return False, f"stopped while waiting for the team lead ({abort.reason})"
        response = answer.result()
    if response.get("approve") is True:
        return True, "by the team lead"
    feedback = str(response.get("feedback") or response.get("reason") or "").strip()
    return False, "the team lead sent it back" + (f": {feedback}" if feedback else "")


def answered(team: TeamMembership, message: dict[str, Any]) -> None:
    """Hand a ``plan_approval_response`` to the call waiting for it (if any still waits)."""
    if message.get("type") != RESPONSE:
        return
    waiting = team.approvals.get(str(message.get("request_id")))
    if waiting is not None and not waiting.done():
        waiting.set_result(message)


def _cancel(future: asyncio.Future[dict[str, Any]]) -> None:
    future.cancel()
