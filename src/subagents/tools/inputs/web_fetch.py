"""The WebFetch tool's input, imported at the first call (``tools.base.LazyInput``); until
then a run sends the schema from ``tools/input_schemas.json``."""

from __future__ import annotations

from pydantic import Field

from subagents.tools.base import BuiltinToolInput


class WebFetchInput(BuiltinToolInput):
    url: str = Field(min_length=1, max_length=4000, description="The http(s) URL to fetch.")
    prompt: str | None = Field(default=None, description="What you are looking for on the page.")
