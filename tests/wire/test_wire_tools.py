"""A request's tool list is converted and encoded once per list (``models/wire_tools.py``), and
what goes on the wire is what a fresh conversion would send: on both transports of both HTTP
providers, for one list sent again, and for a list changed in place between two calls."""

from __future__ import annotations

from typing import Any

import orjson
from wire_server import AnthropicWire, OpenAIWire, WireServer

from subagents.messages import user_message
from subagents.models.anthropic import cached_tools
from subagents.models.base import ModelRequest, RequestMetadata, ToolSchema, complete
from subagents.models.openai import to_openai_tools
from subagents.models.wire_tools import WireTools


def schema(name: str) -> ToolSchema:
    return ToolSchema(
        name=name,
        description=f"the {name} tool, with a description long enough to matter",
        input_schema={"type": "object", "properties": {"path": {"type": "string"}}},
    )


def request(tools: list[ToolSchema]) -> ModelRequest:
    return ModelRequest(
        model="",
        system="You are a test agent.",
        messages=[user_message("hello")],
        tools=tools,
        metadata=RequestMetadata(agent_id="a1", agent_type="test", prompt="hello"),
    )


async def test_anthropic_sends_each_call_the_tools_of_that_moment(
    anthropic_wire: AnthropicWire, wire_server: WireServer
) -> None:
    tools = [schema("Read"), schema("Echo")]
    model = anthropic_wire.model()
    for _ in range(3):
        wire_server.queue(anthropic_wire.text("ok"))
    await complete(model, request(tools))
    await complete(model, request(tools))
    tools.append(schema("Grep"))  # the same list object, changed in place
    await complete(model, request(tools))
    sent = [r.body["tools"] for r in wire_server.requests]
    assert sent[0] == sent[1] == cached_tools(tools[:2])
    assert sent[2] == cached_tools(tools)
    assert [t["name"] for t in sent[2]] == ["Read", "Echo", "Grep"]
    raw = wire_server.requests[0].raw
    assert orjson.dumps(cached_tools(tools[:2])) in raw  # the bytes a fresh encoding gives


async def test_openai_sends_each_call_the_tools_of_that_moment(
    openai_wire: OpenAIWire, wire_server: WireServer
) -> None:
    tools = [schema("Read")]
    model = openai_wire.model()
    for _ in range(3):
        wire_server.queue(openai_wire.reply(text="ok", finish_reason="stop"))
    await complete(model, request(tools))
    await complete(model, request(tools))
    tools[0] = schema("Write")  # replaced in place
    await complete(model, request(tools))
    sent = [r.body["tools"] for r in wire_server.requests]
    assert sent[0] == sent[1] == to_openai_tools([schema("Read")])
    assert sent[2] == to_openai_tools(tools)


def test_one_list_is_converted_once_and_encoded_once() -> None:
    calls: list[int] = []

    def convert(tools: Any) -> list[dict[str, Any]]:
        calls.append(len(tools))
        return [{"name": t.name} for t in tools]

    memo = WireTools(convert)
    tools = [schema("Read"), schema("Echo")]
    first = memo.dicts(tools)
    assert memo.dicts(tools) is first and calls == [2]
    assert memo.dicts(list(tools)) == first and calls == [2, 2]  # another list: its own entry
    fragment = memo.fragment(first)
    assert memo.fragment(first) is fragment
    assert orjson.dumps({"tools": fragment}) == orjson.dumps({"tools": first})
    other = [{"name": "x"}]
    assert memo.fragment(other) is other  # not one it made: sent as it is
    tools.pop()
    assert memo.dicts(tools) == [{"name": "Read"}] and calls == [2, 2, 1]
