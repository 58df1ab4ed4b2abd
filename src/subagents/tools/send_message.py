"""SendMessage: talk to another agent of this session, by name or id (SPEC §9, §11).

The behaviour lives in ``agents/messaging.py`` (reached through ``ctx.services.send_message``);
this module is the tool's input and description.

A running recipient gets the message in its inbox, delivered at its next boundary (between turns,
never inside a model output); nothing polls. A finished recipient is resumed to receive it: a
``resume_from`` run in the background with the message as its prompt, and the recipient's name
now points to that new run, so the conversation goes on under the same name. Inside a team
(docs/teams.md) ``to`` may also be a member's name, ``team-lead`` or ``*`` (every other
member), and the message a structured one (``{"type": "shutdown_request"}``); ``*`` outside a
team is refused.

The message is wrapped as ``<teammate-message from=... summary=...>`` with every runtime tag in
the sender's text escaped, so a message cannot pose as a notification or a directive.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

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
    from subagents.tools.inputs.send_message import SendMessageInput


class SendMessageTool(Tool["SendMessageInput"]):
    name = "SendMessage"
    description = descriptions.SEND_MESSAGE
    input_model = LazyInput["SendMessageInput"](
        "subagents.tools.inputs.send_message", "SendMessageInput"
    )
    requires_permission = False

    def is_concurrency_safe(self, args: SendMessageInput) -> bool:
        return True

    async def call(self, args: SendMessageInput, ctx: ToolContext, info: CallInfo) -> ToolOutput:
        if ctx.services is None:
            raise ToolError("SendMessage needs a session runtime; run it inside a Session")
        message = args.message
        if isinstance(message, dict):
            message = json.dumps(message, ensure_ascii=False)
        if not message.strip():
            raise ToolError("message must not be empty")
        return await ctx.services.send_message(ctx, args.to, message, args.summary)
