"""The local model's prompt rendering, tool-call schema and lenient reply parser (no engine)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from subagents.messages import Message, user_message
from subagents.models.base import ModelError, ModelRequest, RequestMetadata, ToolSchema, complete
from subagents.models.local import EngineResult, LocalModel, local_model_for, usage_from
from subagents.models.local_install import INSTALL_HINT, QWEN_SPEC, SMOLLM2_SPEC
from subagents.models.local_prompt import (
    call_schema,
    inline_refs,
    is_stuck_repeat,
    parse_reply,
    render_messages,
    reply_tool_name,
)

READ = ToolSchema(
    name="Read",
    description="Read a file.",
    input_schema={
        "type": "object",
        "properties": {"file_path": {"type": "string"}, "limit": {"type": "integer"}},
        "required": ["file_path"],
    },
)


def conversation() -> list[Message]:
    return [
        user_message("look at a.py"),
        {
            "role": "assistant",
            "content": [
                {
                    "type": "tool_use",
                    "id": "toolu_1",
                    "name": "Read",
                    "input": {"file_path": "a.py"},
                }
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": "print(1)"},
            ],
        },
        {"role": "assistant", "content": [{"type": "text", "text": "It prints 1."}]},
        user_message("and b.py?"),
        {
            "role": "assistant",
            "content": [
                {
                    "type": "tool_use",
                    "id": "toolu_2",
                    "name": "Read",
                    "input": {"file_path": "b.py"},
                }
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_2",
                    "content": [{"type": "text", "text": "no such file"}],
                    "is_error": True,
                },
            ],
        },
    ]


def test_renders_tools_calls_and_results_as_the_model_answers() -> None:
    chat = render_messages("You are terse.", conversation(), [READ])
    roles = ["system", "user", "assistant", "user", "assistant", "user", "assistant", "user"]
    assert [m["role"] for m in chat] == roles
    system = chat[0]["content"]
    assert system.startswith("You are terse.")
    assert "- Read: Read a file." in system and '"file_path"' in system
    assert "- reply:" in system
    assert json.loads(chat[2]["content"]) == {"name": "Read", "input": {"file_path": "a.py"}}
    assert chat[3]["content"].startswith("[result of Read]\nprint(1)")
    assert json.loads(chat[4]["content"]) == {"name": "reply", "input": {"text": "It prints 1."}}
    assert chat[7]["content"].startswith("[error from Read]\nno such file")


def test_rendering_is_prefix_stable_so_forks_share_the_cache() -> None:
    messages = conversation()
    full = render_messages("sys", messages, [READ])
    for cut in range(1, len(messages)):
        assert render_messages("sys", messages[:cut], [READ]) == full[: cut + 1]


def test_without_tools_the_prompt_is_plain_chat() -> None:
    chat = render_messages("sys", [user_message("hi"), {"role": "assistant", "content": "yo"}], [])
    assert chat == [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "yo"},
    ]


def test_call_schema_allows_each_tool_or_reply() -> None:
    schema = call_schema([READ])
    names = [option["properties"]["name"]["const"] for option in schema["oneOf"]]
    assert names == ["Read", "reply"]
    read = schema["oneOf"][0]
    assert read["required"] == ["name", "input"]
    assert read["properties"]["input"]["required"] == ["file_path"]


def test_refs_are_inlined_and_recursion_is_bounded() -> None:
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {"edits": {"type": "array", "items": {"$ref": "#/$defs/Edit"}}},
        "$defs": {
            "Edit": {
                "type": "object",
                "properties": {"old": {"type": "string"}, "next": {"$ref": "#/$defs/Edit"}},
            }
        },
    }
    inlined = inline_refs(schema)
    assert "$defs" not in json.dumps(inlined)
    item = inlined["properties"]["edits"]["items"]
    assert item["properties"]["old"] == {"type": "string"}
    assert item["properties"]["next"]["properties"]["old"] == {"type": "string"}


@pytest.mark.parametrize(
    ("raw", "name", "arguments", "text"),
    [
        ('{"name": "Read", "input": {"file_path": "x"}}', "Read", {"file_path": "x"}, None),
        ('{"name": "reply", "input": {"text": "done"}}', None, None, "done"),
        ('Sure:\n```json\n{"name": "Read", "input": {"file_path": "y"}}\n```', "Read", None, None),
        (
            'I will call {"name": "Read", "arguments": "{\\"file_path\\": \\"z\\"}"} now',
            "Read",
            None,
            None,
        ),
        ("just words, {not json}", None, None, "just words, {not json}"),
        ('{"name": "reply", "input": {"text": "cut off \\u00', None, None, "cut off "),
        ('{"name": "Read", "input": {"file_pa', None, None, '{"name": "Read", "input": {"file_pa'),
    ],
)
def test_parse_reply_is_lenient(
    raw: str, name: str | None, arguments: dict[str, Any] | None, text: str | None
) -> None:
    parsed = parse_reply(raw, [READ])
    assert parsed.tool_name == name
    if arguments is not None:
        assert parsed.tool_input == arguments
    if name is not None:
        assert parsed.tool_input is not None and "file_path" in parsed.tool_input
        [block] = parsed.content()
        assert block["type"] == "tool_use" and block["name"] == name
    else:
        assert parsed.text is not None
        if text is not None:
            assert parsed.text == text


def test_a_real_tool_named_reply_keeps_its_name() -> None:
    tools = [ToolSchema(name="reply", description="post a reply", input_schema={})]
    assert reply_tool_name(tools) == "reply_to_user"
    parsed = parse_reply('{"name": "reply", "input": {"body": "x"}}', tools)
    assert parsed.tool_name == "reply"
    final = parse_reply('{"name": "reply_to_user", "input": {"text": "bye"}}', tools)
    assert final.text == "bye"


def test_usage_maps_cached_and_evaluated_prompt_tokens() -> None:
    result = EngineResult(
        usage={
            "completion_tokens": 9,
            "prompt_tokens": 120,
            "prompt_tokens_details": {"cached_tokens": 100},
        },
        timings={"cache_n": 100, "prompt_n": 20, "predicted_n": 9},
    )
    usage = usage_from(result)
    assert (usage.input_tokens, usage.output_tokens, usage.cache_read_input_tokens) == (20, 9, 100)
    bare = usage_from(EngineResult(usage={"completion_tokens": 3, "prompt_tokens": 50}))
    assert (bare.input_tokens, bare.output_tokens, bare.cache_read_input_tokens) == (50, 3, 0)


def test_model_specs() -> None:
    assert local_model_for("").spec is QWEN_SPEC
    assert local_model_for("smollm2").spec is SMOLLM2_SPEC
    custom = local_model_for("/models/x.gguf")
    assert custom.spec is None and custom.path == Path("/models/x.gguf")
    with pytest.raises(ValueError, match=r"local:/path/to/model\.gguf"):
        local_model_for("gpt-4")


async def test_missing_model_is_a_clear_non_retryable_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("SUBAGENTS_MODELS_DIR", str(tmp_path))
    request = ModelRequest(
        model="local",
        system="s",
        messages=[user_message("hi")],
        tools=[],
        metadata=RequestMetadata(agent_id="a", agent_type="main", prompt="hi"),
    )
    with pytest.raises(ModelError) as caught:
        await complete(LocalModel(), request)
    assert caught.value.kind == "invalid_request"
    assert INSTALL_HINT in str(caught.value)


def _round(call_input: dict[str, Any], result: str, n: int) -> list[Message]:
    return [
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": f"t{n}", "name": "Glob", "input": call_input}],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": f"t{n}", "content": result}],
        },
    ]


def test_stuck_repeat_needs_two_identical_calls_with_identical_results() -> None:
    ask = [user_message("list files")]
    star = {"pattern": "*"}
    twice = ask + _round(star, "a.txt", 1) + _round(star, "a.txt", 2)
    assert is_stuck_repeat(twice, "Glob", star)
    assert not is_stuck_repeat(twice, "Glob", {"pattern": "*.py"})
    assert not is_stuck_repeat(ask + _round(star, "a.txt", 1), "Glob", star)
    polling = ask + _round(star, "a.txt", 1) + _round(star, "a.txt b.txt", 2)
    assert not is_stuck_repeat(polling, "Glob", star)
    new_question = [*twice, user_message("and now?")]
    assert not is_stuck_repeat(new_question, "Glob", star)
