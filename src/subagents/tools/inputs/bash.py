"""The Bash tool's input, imported at the first call (``tools.base.LazyInput``); until
then a run sends the schema from ``tools/input_schemas.json``."""

from __future__ import annotations

from pydantic import Field, field_validator

from subagents.tools.base import BuiltinToolInput
from subagents.tools.shell_timeouts import DEFAULT_TIMEOUT_MS, MAX_TIMEOUT_MS


class BashInput(BuiltinToolInput):
    """Arguments of one Bash call (Claude Code's field names)."""

    command: str = Field(description="The bash command to run.")
    timeout: int | None = Field(
        default=None,
        gt=0,
        description=f"Timeout in ms (default {DEFAULT_TIMEOUT_MS}, max {MAX_TIMEOUT_MS}).",
    )
    description: str | None = Field(
        default=None, description="What the command does, in 5-10 words."
    )
    run_in_background: bool | None = Field(
        default=None,
        description="Run the command in the background and return at once; read its output later.",
    )

    @field_validator("timeout")
    @classmethod
    def _clamp_timeout(cls, value: int | None) -> int | None:
        """A timeout past the maximum is clamped rather than refused: the intent is clear."""
        return None if value is None else min(value, MAX_TIMEOUT_MS)
