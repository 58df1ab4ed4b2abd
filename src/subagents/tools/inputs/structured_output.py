"""The StructuredOutput tool's input, imported at the tool's first call (``tools.base.LazyInput``).
Not in ``tools/input_schemas.json``: the tool's schema is the caller's (``--json-schema``)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class StructuredOutputInput(BaseModel):
    """Any JSON object: the caller's schema is checked in ``call`` (pydantic cannot hold it)."""

    model_config = ConfigDict(extra="allow", defer_build=True)  # only with --json-schema
