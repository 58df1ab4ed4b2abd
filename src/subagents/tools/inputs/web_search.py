"""The WebSearch tool's input, imported at the first call (``tools.base.LazyInput``); until
then a run sends the schema from ``tools/input_schemas.json``."""

from __future__ import annotations

from pydantic import Field

from subagents.tools.base import BuiltinToolInput


class WebSearchInput(BuiltinToolInput):
    query: str = Field(min_length=2, max_length=500, description="The search query.")
    allowed_domains: list[str] | None = Field(default=None, description="Only these sites.")
    blocked_domains: list[str] | None = Field(default=None, description="Never these sites.")
