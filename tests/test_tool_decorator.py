"""``@tool``: a typed async function as a tool, used through ``Session`` as a model would."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any, Literal

import pytest
from pydantic import BaseModel

from subagents import (
    CallInfo,
    FunctionTool,
    ScriptedModel,
    Session,
    SessionOptions,
    ToolContext,
    ToolError,
    ToolOutput,
    tool,
)
from subagents.tools.function_tool import parse_docstring


@tool(read_only=True)
async def word_count(
    text: str, min_length: int = 1, unit: Literal["words", "chars"] = "words"
) -> int:
    """Count the words of a text.

    Args:
        text: The text to count.
        min_length: Shorter words are not counted.
        unit: What to count.
    """
    if unit == "chars":
        return len(text)
    return sum(len(word) >= min_length for word in text.split())


class Note(BaseModel):
    title: str
    tags: list[str] = []


@tool(name="SaveNote")
async def save_note(note: Note, ctx: ToolContext, info: CallInfo) -> dict[str, Any]:
    """Save a note.

    :param note: The note to save.
    """
    if not note.title.strip():
        raise ToolError("a note needs a title")
    return {
        "saved": note.title,
        "tags": note.tags,
        "agent": ctx.agent.agent_type,
        "call": info.tool_use_id,
    }


def call(name: str, **tool_input: Any) -> dict[str, Any]:
    return {"name": name, "input": tool_input}


async def run(
    tmp_path: Path, turns: list[dict[str, Any]], tools: list[Any], **options: Any
) -> tuple[Any, ScriptedModel]:
    model = ScriptedModel.from_dict({"agents": [{"agent_type": "main", "turns": turns}]})
    session = Session(
        SessionOptions(
            model=model,
            cwd=tmp_path,
            home=tmp_path / "home",
            tools=tools,
            load_settings=False,
            **options,
        )
    )
    return await session.run("go"), model


def results_of(request: dict[str, Any]) -> list[dict[str, Any]]:
    return [b for b in request["messages"][-1]["content"] if b["type"] == "tool_result"]


def text_of(block: dict[str, Any]) -> str:
    content = block["content"]
    return content if isinstance(content, str) else "".join(part["text"] for part in content)


def test_the_schema_comes_from_the_signature_and_the_docstring() -> None:
    schema = word_count.schema()
    assert isinstance(word_count, FunctionTool)
    assert (schema.name, schema.description) == ("word_count", "Count the words of a text.")
    properties = schema.input_schema["properties"]
    assert properties["text"] == {"type": "string", "description": "The text to count."}
    assert (
        properties["min_length"]["default"] == 1 and properties["min_length"]["type"] == "integer"
    )
    assert properties["unit"]["enum"] == ["words", "chars"]
    assert schema.input_schema["required"] == ["text"]
    assert schema.input_schema["additionalProperties"] is False
    save = save_note.schema()
    assert save.name == "SaveNote" and set(save.input_schema["properties"]) == {
        "note"
    }  # no ctx, info
    assert save.input_schema["properties"]["note"]["description"] == "The note to save."


async def test_a_session_model_sees_the_tool_and_gets_its_results(tmp_path: Path) -> None:
    turns = [
        {
            "tool_calls": [
                call("word_count", text="a bb ccc", min_length=2),
                call("SaveNote", note={"title": "t", "tags": ["x"]}),
            ]
        },
        {"tool_calls": [call("word_count", text=3), call("SaveNote", note={"title": " "})]},
        {"text": "done"},
    ]
    result, model = await run(
        tmp_path, turns, [word_count, save_note], permission_mode="bypassPermissions"
    )
    assert result.result == "done"
    first, second, third = model.requests
    assert {t["name"] for t in first["tools"]} == {"word_count", "SaveNote"}
    sent = next(t for t in first["tools"] if t["name"] == "word_count")
    assert sent["input_schema"] == word_count.schema().input_schema  # the bytes the model gets
    count, saved = results_of(second)
    assert text_of(count) == "2" and not count.get("is_error")
    assert json.loads(text_of(saved)) == {
        "saved": "t",
        "tags": ["x"],
        "agent": "main",
        "call": saved["tool_use_id"],
    }
    invalid, refused = results_of(third)
    assert invalid["is_error"] and "text" in text_of(invalid)  # validated against the signature
    assert refused["is_error"] and text_of(refused) == "a note needs a title"


async def test_read_only_decides_what_needs_permission(tmp_path: Path) -> None:
    """A read-only tool runs without approval; the other one needs it (headless: denied)."""
    turns = [
        {"tool_calls": [call("word_count", text="a b"), call("SaveNote", note={"title": "t"})]},
        {"text": "done"},
    ]
    _, model = await run(tmp_path, turns, [word_count, save_note])
    count, saved = results_of(model.requests[1])
    assert text_of(count) == "2"
    assert saved["is_error"] and "needs approval" in text_of(saved)


async def test_read_only_decides_what_plan_mode_allows(tmp_path: Path) -> None:
    turns = [
        {"tool_calls": [call("word_count", text="a b"), call("SaveNote", note={"title": "t"})]},
        {"text": "done"},
    ]
    _, model = await run(tmp_path, turns, [word_count, save_note], permission_mode="plan")
    count, saved = results_of(model.requests[1])
    assert text_of(count) == "2"
    assert saved["is_error"] and "plan mode allows only read-only" in text_of(saved)


async def test_concurrency_safe_calls_of_one_turn_run_side_by_side(tmp_path: Path) -> None:
    running: list[int] = [0]
    peak: dict[str, int] = {}

    def probe(label: str) -> Any:
        async def body(n: int) -> str:
            running[0] += 1
            peak[label] = max(peak.get(label, 0), running[0])
            await asyncio.sleep(0.05)
            running[0] -= 1
            return str(n)

        body.__name__ = label
        body.__doc__ = f"Probe {label}."
        return body

    side_by_side = tool(concurrency_safe=True)(probe("together"))
    one_at_a_time = tool(probe("alone"))
    turns = [
        {"tool_calls": [call("together", n=i) for i in range(3)]},
        {"tool_calls": [call("alone", n=i) for i in range(3)]},
        {"text": "done"},
    ]
    tools = [side_by_side, one_at_a_time]
    _, model = await run(tmp_path, turns, tools, permission_mode="bypassPermissions")
    assert peak == {"together": 3, "alone": 1}
    assert [text_of(b) for b in results_of(model.requests[2])] == ["0", "1", "2"]  # call order


def test_a_returned_tool_output_is_kept_and_the_function_stays_callable() -> None:
    @tool
    async def raw(flag: bool) -> ToolOutput:
        """Return a prepared result."""
        return ToolOutput(content="prepared", is_error=flag)

    assert raw.is_read_only(raw.input_model(flag=True)) is False
    assert asyncio.run(raw.function(flag=True)).is_error


def test_mistakes_are_refused_when_decorating() -> None:
    def sync(x: int) -> int:
        """Sync."""
        return x

    async def varargs(*items: int) -> int:
        """Var."""
        return 0

    async def untyped(x) -> int:  # type: ignore[no-untyped-def]
        """Untyped."""
        return 0

    async def undocumented(x: int) -> int:
        return x

    async def fine(x: int) -> int:
        """Fine."""
        return x

    with pytest.raises(TypeError, match="must be async"):
        tool(sync)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"\*args"):
        tool(varargs)
    with pytest.raises(TypeError, match="'x' needs a type annotation"):
        tool(untyped)
    with pytest.raises(ValueError, match="needs a description"):
        tool(undocumented)
    with pytest.raises(ValueError, match="must match"):
        tool(name="has space")(fine)
    assert tool(description="Given.")(undocumented).description == "Given."


@pytest.mark.parametrize(
    "doc",
    [
        "Do it.\n\nArgs:\n    path (str): Where\n        to look.\n    depth: How deep.\n\nReturns:\n    x",
        "Do it.\n\n:param path: Where\n    to look.\n:param int depth: How deep.\n:returns: x",
        "Do it.\n\nParameters\n----------\npath : str\n    Where\n    to look.\ndepth : int\n    How deep.\n",
    ],
    ids=["google", "sphinx", "numpy"],
)
def test_docstring_styles(doc: str) -> None:
    assert parse_docstring(doc) == ("Do it.", {"path": "Where to look.", "depth": "How deep."})


async def test_a_child_inherits_an_extra_tool_and_runs_it(tmp_path: Path) -> None:
    """``extra_tools`` join the built-in ones; a general-purpose child gets them as any tool."""
    agent = {"description": "count", "prompt": "count it", "subagent_type": "general-purpose"}
    model = ScriptedModel.from_dict(
        {
            "agents": [
                {
                    "agent_type": "main",
                    "turns": [
                        {"tool_calls": [call("Agent", **agent)]},
                        {"text": "{{tool_results}}"},
                    ],
                },
                {
                    "agent_type": "general-purpose",
                    "turns": [
                        {"tool_calls": [call("word_count", text="one two three")]},
                        {"text": "counted {{tool_results}}"},
                    ],
                },
            ]
        }
    )
    options = SessionOptions(
        model=model,
        cwd=tmp_path,
        home=tmp_path / "home",
        extra_tools=[word_count],
        load_settings=False,
    )
    result = await Session(options).run("go")
    assert "counted 3" in result.result
    child = next(r for r in model.requests if r["agent_type"] == "general-purpose")
    names = [t["name"] for t in child["tools"]]
    assert "word_count" in names and "Read" in names  # the built-ins are still there
