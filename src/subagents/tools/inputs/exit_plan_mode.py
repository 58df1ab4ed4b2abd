"""The ExitPlanMode tool's input, imported at the first call (``tools.base.LazyInput``); until
then a run sends the schema from ``tools/input_schemas.json``."""

from __future__ import annotations

from pydantic import Field

from subagents.tools.base import BuiltinToolInput

MAX_PLAN_CHARS = 50_000


class ExitPlanModeInput(BuiltinToolInput):
    plan: str = Field(min_length=1, max_length=MAX_PLAN_CHARS, description="The plan (Markdown).")
