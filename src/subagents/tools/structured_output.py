"""StructuredOutput: the main agent gives its final answer as JSON matching a caller's schema.

With ``--json-schema`` (the SDK's ``output_format``), as in Claude Code, the model is given this
tool whose input schema *is* the caller's schema; a call whose input does not validate is an
error the model sees (and can correct); a valid one is kept as the run's
``structured_output``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from subagents.models.base import ToolSchema
from subagents.tools.base import CallInfo, LazyInput, Tool, ToolContext, ToolError, ToolOutput

if TYPE_CHECKING:  # imported at the tool's first call: only runs with --json-schema have one
    from subagents.tools.inputs.structured_output import StructuredOutputInput


class StructuredOutputTool(Tool["StructuredOutputInput"]):
    name = "StructuredOutput"
    description = (
        "Return your final answer as structured data. Call this exactly once, when you are "
        "done, with input that matches this tool's schema."
    )
    input_model = LazyInput["StructuredOutputInput"](
        "subagents.tools.inputs.structured_output", "StructuredOutputInput"
    )
    requires_permission = False

    def __init__(self, schema: dict[str, Any]) -> None:
        from jsonschema import Draft202012Validator

        Draft202012Validator.check_schema(schema)
        self._schema = schema
        self._validator = Draft202012Validator(schema)
        self.value: Any = None
        """The last valid answer (None until the model gave one)."""

    def schema(self) -> ToolSchema:
        return ToolSchema(name=self.name, description=self.description, input_schema=self._schema)

    def is_concurrency_safe(self, args: StructuredOutputInput) -> bool:
        return True

    async def call(
        self, args: StructuredOutputInput, ctx: ToolContext, info: CallInfo
    ) -> ToolOutput:
        value = args.model_dump(mode="json")
        errors = sorted(self._validator.iter_errors(value), key=lambda e: list(e.path))
        if errors:
            details = "; ".join(_describe(e) for e in errors[:10])
            raise ToolError(f"StructuredOutput does not match the schema: {details}")
        self.value = value
        return ToolOutput(
            content="Structured output recorded.", metadata={"structured_output": value}
        )


def _describe(error: Any) -> str:
    where = "/".join(str(p) for p in error.path) or "(root)"
    return f"{where}: {error.message}"
