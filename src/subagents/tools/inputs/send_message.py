"""The SendMessage tool's input, imported at the first call (``tools.base.LazyInput``); until
then a run sends the schema from ``tools/input_schemas.json``."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from subagents.tools.base import BuiltinToolInput


class SendMessageInput(BuiltinToolInput):
    to: str = Field(min_length=1, description="Recipient: an agent name or an agent id")
    message: str | dict[str, Any] = Field(
        description=(
            'The message text, or a structured message such as {"type": "shutdown_request"} '
            "(in a team)"
        )
    )
    summary: str | None = Field(default=None, description="A 5-10 word preview of the message")
