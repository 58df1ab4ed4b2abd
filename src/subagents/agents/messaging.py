"""SendMessage's behaviour: deliver to a running agent's inbox, or resume a finished one.

A running recipient gets the message in its inbox, delivered at its next boundary (between turns,
never inside a model output); nothing polls. A finished recipient is resumed to receive it: a
``resume_from`` run in the background with the message as its prompt, and the recipient's name
now points to that new run, so the conversation goes on under the same name. Inside a team
(docs/teams.md) ``to`` may also be a member's name, ``team-lead`` or ``*`` (every other
member), and the message a structured one (``{"type": "shutdown_request"}``); ``*`` outside a
team is refused.

The message is wrapped as ``<teammate-message from=... summary=...>`` with every runtime tag in
the sender's text escaped, so a message cannot pose as a notification or a directive. The tool
(``tools/send_message.py``) only validates its input and calls ``send_message`` through
``SessionServices.send_message``, which keeps ``tools/`` free of imports from ``agents/``.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING

from subagents.agents.agent_run import AgentFrame
from subagents.agents.assembly import assemble
from subagents.agents.children import Children
from subagents.agents.mcp_scope import attach_child_servers
from subagents.agents.notifications import escape_runtime_tags
from subagents.agents.resume import resume_spec, session_store, settle_writes
from subagents.agents.runtime import AgentRuntime
from subagents.loop.inbox import InboxItem
from subagents.store.errors import StoreError
from subagents.store.protocol import Store
from subagents.store.records import SidecarRecord
from subagents.tools.base import ToolContext, ToolError, ToolOutput

if TYPE_CHECKING:
    from subagents.agents.teams.host import TeamHost

BROADCAST = "*"
_NO_SESSION = "SendMessage needs a session runtime; run it inside a Session"


@dataclass(kw_only=True, frozen=True)
class AgentMessage:
    """One SendMessage call: recipient (name or id), text, optional preview."""

    to: str
    message: str
    summary: str | None = None


async def send_message(
    runtime: AgentRuntime,
    children: Children,
    ctx: ToolContext,
    args: AgentMessage,
    *,
    teams: TeamHost | None = None,
) -> ToolOutput:
    frame = ctx.owner
    if isinstance(frame, AgentFrame) and frame.team is not None:
        from subagents.agents.teams.messages import team_send  # teams are opt-in

        sent = await team_send(
            frame.team, ctx, args, host=teams, inbox=children.inboxes.get(ctx.agent.agent_id)
        )
        if sent is not None:
            return sent
    if args.to.strip() == BROADCAST:
        raise ToolError(
            "SendMessage to '*' needs a team, and teams are not available in this runtime: "
            "address one agent by name or id"
        )
    target = args.to.strip()
    agent_id = children.names.get(target, target)
    inbox = children.inboxes.get(agent_id)
    if inbox is not None:
        inbox.put(InboxItem(id=f"message:{uuid.uuid4()}", text=wrap(args, ctx)))
        return ToolOutput(
            content=f"Message delivered to {target} (it will read it at its next turn).",
            metadata={"to": target, "agentId": agent_id, "delivered": True},
        )
    return await _resume_with(args, target, agent_id, ctx, runtime, children)


def wrap(args: AgentMessage, ctx: ToolContext) -> str:
    """The message as the recipient sees it: sender, preview, and defused text."""
    text, _ = escape_runtime_tags(args.message)
    summary, _ = escape_runtime_tags(args.summary or "")
    import html  # its entity table is the largest dict a -p start-up would build

    sender = html.escape(ctx.agent.agent_id, quote=True)
    preview = f' summary="{html.escape(summary, quote=True)}"' if summary else ""
    return f'<teammate-message from="{sender}"{preview}>\n{text}\n</teammate-message>'


async def _resume_with(
    args: AgentMessage,
    target: str,
    agent_id: str,
    ctx: ToolContext,
    runtime: AgentRuntime,
    children: Children,
) -> ToolOutput:
    """A finished recipient: resume it in the background with the message as its prompt."""
    frame = ctx.owner
    if not isinstance(frame, AgentFrame):
        raise ToolError(_NO_SESSION)
    records = children.records
    await settle_writes(records)
    store, _, _ = session_store(records)
    record = _record(store, agent_id)
    if record is None:
        known = ", ".join(sorted(children.names)) or "none"
        raise ToolError(
            f"SendMessage: no agent named or with id {target!r}. Known agent names: {known}"
        )
    if not record.is_terminal:
        raise ToolError(
            f"SendMessage: agent {agent_id} is running, but not in this process, so its inbox "
            "cannot be reached from here; wait for it to finish, then message it again"
        )
    spec = resume_spec(
        runtime,
        records,
        ctx,
        frame,
        source_id=agent_id,
        prompt=args.message,
        description=args.summary or f"message to {target}",
        background=True,
    )
    await attach_child_servers(runtime, spec)  # its definition's own MCP servers, again
    try:
        job = assemble(runtime, ctx, frame, spec)
    except BaseException:
        if spec.mcp is not None:
            await spec.mcp.close()
        raise
    names = sorted({n for n, i in children.names.items() if i == agent_id or n == target})
    launched = children.launch(job, name=names[0] if names else None)
    for name in names[1:]:
        children.names[name] = job.run.agent_id
    new_id = job.run.agent_id
    called = f" ({', '.join(names)} now points to it)" if names else ""
    return ToolOutput(
        content=(
            f"{target} had finished, so it was resumed to receive the message: the conversation "
            f"continues in the background as agent {new_id}{called}. You will be notified when "
            "it answers; do not poll."
        ),
        metadata={
            **(launched.metadata or {}),
            "to": target,
            "resumedFrom": agent_id,
            "agentId": new_id,
        },
    )


def _record(store: Store, agent_id: str) -> SidecarRecord | None:
    try:
        return store.get(agent_id)
    except StoreError:
        return None
