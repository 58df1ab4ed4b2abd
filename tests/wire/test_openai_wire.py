"""The OpenAI-compatible provider against a local chat-completions server, through the real SDK."""

from __future__ import annotations

import email.utils
import json
import time
from pathlib import Path
from typing import Any

import pytest
from wire_server import OpenAIWire, WireServer

from subagents.abort import AbortSignal
from subagents.events import AgentRef
from subagents.loop.query import LoopSpec, run_loop
from subagents.messages import Message, user_message
from subagents.models._sdk_support import retry_after_seconds
from subagents.models.base import (
    MessageDone,
    ModelError,
    ModelRequest,
    RequestMetadata,
    TextDelta,
    ToolSchema,
    complete,
)
from subagents.models.openai import OpenAIModel
from subagents.models.openai_messages import to_openai_messages
from subagents.models.resolve import resolve_alias, resolve_model
from subagents.models.retry import ModelCaller, RetryPolicy
from subagents.tools.base import CallInfo, Tool, ToolContext, ToolInput, ToolOutput

SCHEMA = {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}
TOOLS = [ToolSchema(name="Read", description="read a file", input_schema=SCHEMA)]

Notices = list[tuple[str, dict[str, Any]]]


def make_request(messages: list[Message] | None = None, **kwargs: Any) -> ModelRequest:
    return ModelRequest(
        model="",
        system=kwargs.pop("system", "You are a test agent."),
        messages=messages if messages is not None else [user_message("hello")],
        tools=kwargs.pop("tools", list(TOOLS)),
        metadata=RequestMetadata(agent_id="a1", agent_type="test", prompt="hello"),
        **kwargs,
    )


def caller_for(model: OpenAIModel, notices: Notices, **kw: Any) -> ModelCaller:
    policy = RetryPolicy(max_attempts=kw.pop("max_attempts", 4), base_delay_s=0.001)
    return ModelCaller(
        model=model, policy=policy, on_notice=lambda s, d: notices.append((s, d)), **kw
    )


# --- streaming and assembly -------------------------------------------------------------------


async def test_streams_text_and_maps_usage_with_cached_tokens(
    openai_wire: OpenAIWire, wire_server: WireServer
) -> None:
    usage = {
        "prompt_tokens": 1200,
        "completion_tokens": 30,
        "total_tokens": 1230,
        "prompt_tokens_details": {"cached_tokens": 1000},
    }
    wire_server.queue(openai_wire.reply(text="Hello from the server.", usage=usage))

    events = [e async for e in openai_wire.model().stream(make_request())]

    texts = [e.text for e in events if isinstance(e, TextDelta)]
    assert len(texts) == 2 and "".join(texts) == "Hello from the server."
    done = events[-1]
    assert isinstance(done, MessageDone)
    assert done.message == {
        "role": "assistant",
        "content": [{"type": "text", "text": "Hello from the server."}],
    }
    assert done.usage.to_dict() == {
        "input_tokens": 200,
        "output_tokens": 30,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 1000,
    }
    assert done.stop_reason == "end_turn" and done.model == "gpt-test"


async def test_parallel_tool_calls_are_assembled_by_index(
    openai_wire: OpenAIWire, wire_server: WireServer
) -> None:
    calls = [
        ("call_a", "Read", json.dumps({"path": "a.txt"})),
        ("call_b", "Read", json.dumps({"path": "b/with spaces.txt"})),
    ]
    wire_server.queue(openai_wire.reply(text="Reading both.", tool_calls=calls))

    done = await complete(openai_wire.model(), make_request())

    assert done.message["content"] == [
        {"type": "text", "text": "Reading both."},
        {"type": "tool_use", "id": "call_a", "name": "Read", "input": {"path": "a.txt"}},
        {
            "type": "tool_use",
            "id": "call_b",
            "name": "Read",
            "input": {"path": "b/with spaces.txt"},
        },
    ]
    assert done.stop_reason == "tool_use"


async def test_invalid_arguments_and_missing_ids_do_not_fail_the_call(
    openai_wire: OpenAIWire, wire_server: WireServer
) -> None:
    wire_server.queue(openai_wire.reply(tool_calls=[(None, "Read", '{"path": "a.t')]))

    done = await complete(openai_wire.model(), make_request())

    (block,) = done.message["content"]
    assert block["type"] == "tool_use"
    assert block["input"] == {"invalid_json_arguments": '{"path": "a.t'}
    assert block["id"].startswith("call_") and len(block["id"]) > len("call_")


# --- what goes on the wire --------------------------------------------------------------------


async def test_history_and_tools_are_converted_to_chat_completions(
    openai_wire: OpenAIWire, wire_server: WireServer
) -> None:
    wire_server.queue(openai_wire.reply(text="done"))
    history: list[Message] = [
        user_message("read two files"),
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "hmm", "signature": "s"},
                {"type": "text", "text": "Reading."},
                {"type": "tool_use", "id": "c1", "name": "Read", "input": {"path": "a"}},
                {"type": "tool_use", "id": "c2", "name": "Read", "input": {"path": "b"}},
            ],
        },
        user_message(
            [
                {"type": "tool_result", "tool_use_id": "c1", "content": "A"},
                {
                    "type": "tool_result",
                    "tool_use_id": "c2",
                    "content": [{"type": "text", "text": "no such file"}],
                    "is_error": True,
                },
                {"type": "text", "text": "a message that arrived meanwhile"},
            ]
        ),
    ]

    await complete(openai_wire.model(), make_request(history, max_tokens=1234))

    sent = wire_server.requests[0]
    assert sent.path == "/v1/chat/completions"
    body = sent.body
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert body["max_tokens"] == 1234 and body["model"] == "gpt-test"
    assert body["tools"] == [
        {
            "type": "function",
            "function": {"name": "Read", "description": "read a file", "parameters": SCHEMA},
        }
    ]
    assert body["messages"] == [
        {"role": "system", "content": "You are a test agent."},
        {"role": "user", "content": "read two files"},
        {
            "role": "assistant",
            "content": "Reading.",
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "Read", "arguments": '{"path": "a"}'},
                },
                {
                    "id": "c2",
                    "type": "function",
                    "function": {"name": "Read", "arguments": '{"path": "b"}'},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "A"},
        {"role": "tool", "tool_call_id": "c2", "content": "Error: no such file"},
        {"role": "user", "content": "a message that arrived meanwhile"},
    ]


async def test_base_url_and_key_come_from_the_environment(
    openai_wire: OpenAIWire, wire_server: WireServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", wire_server.url + "/v1")
    monkeypatch.setenv("OPENAI_API_KEY", "env-key")
    wire_server.queue(openai_wire.reply(text="hi"))
    model = OpenAIModel("env-model")
    openai_wire.models.append(model)

    await complete(model, make_request())

    assert wire_server.requests[0].headers["authorization"] == "Bearer env-key"
    assert wire_server.requests[0].body["model"] == "env-model"


async def test_a_keyless_local_server_gets_a_placeholder_key(
    openai_wire: OpenAIWire, wire_server: WireServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    wire_server.queue(openai_wire.reply(text="hi"))

    await complete(openai_wire.model(api_key=None), make_request())

    assert wire_server.requests[0].headers["authorization"] == "Bearer not-needed"


# --- errors, retries, fallback ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "kind"), [(500, "api_error"), (503, "api_error"), (529, "overloaded")]
)
async def test_server_errors_are_retried_then_succeed(
    openai_wire: OpenAIWire, wire_server: WireServer, status: int, kind: str
) -> None:
    wire_server.queue(openai_wire.error(status, "server_error"), openai_wire.reply(text="ok"))
    notices: Notices = []

    done = await caller_for(openai_wire.model(), notices).call(make_request())

    assert done.message["content"] == [{"type": "text", "text": "ok"}]
    assert [(d["error"], d["error_status"]) for _s, d in notices] == [(kind, status)]


async def test_rate_limit_honours_retry_after(
    openai_wire: OpenAIWire, wire_server: WireServer
) -> None:
    limited = openai_wire.error(429, "rate_limit_exceeded", headers={"retry-after": "0.2"})
    wire_server.queue(limited, openai_wire.reply(text="waited"))
    notices: Notices = []

    done = await caller_for(openai_wire.model(), notices).call(make_request())

    assert done.message["content"] == [{"type": "text", "text": "waited"}]
    ((subtype, data),) = notices
    assert (subtype, data["error"], data["error_status"]) == ("api_retry", "rate_limit", 429)
    assert data["retry_delay_ms"] >= 200


async def test_retry_after_ms_is_honoured(openai_wire: OpenAIWire, wire_server: WireServer) -> None:
    limited = openai_wire.error(429, "rate_limit_exceeded", headers={"retry-after-ms": "300"})
    wire_server.queue(limited, openai_wire.reply(text="waited"))
    notices: Notices = []

    await caller_for(openai_wire.model(), notices).call(make_request())

    assert [d["retry_delay_ms"] >= 300 for _s, d in notices] == [True]


def test_retry_after_accepts_seconds_and_http_dates() -> None:
    in_a_minute = email.utils.formatdate(time.time() + 60, usegmt=True)

    assert retry_after_seconds({"retry-after": "7"}) == 7.0
    assert 55 <= (retry_after_seconds({"retry-after": in_a_minute}) or 0) <= 61
    assert retry_after_seconds({"retry-after": "soon"}) is None
    assert retry_after_seconds({}) is None


async def test_connection_dropped_mid_stream_is_retried(
    openai_wire: OpenAIWire, wire_server: WireServer
) -> None:
    calls = [("call_a", "Read", '{"path": "a"}')]
    wire_server.queue(
        openai_wire.reply(tool_calls=calls, drop_after=3), openai_wire.reply(text="ok")
    )
    notices: Notices = []

    done = await caller_for(openai_wire.model(), notices).call(make_request())

    assert done.message["content"] == [{"type": "text", "text": "ok"}]
    assert [d["error"] for _s, d in notices] == ["connection"]
    assert len(wire_server.requests) == 2


@pytest.mark.parametrize(("status", "kind"), [(401, "auth"), (400, "invalid_request")])
async def test_client_errors_are_not_retried(
    openai_wire: OpenAIWire, wire_server: WireServer, status: int, kind: str
) -> None:
    wire_server.queue(
        openai_wire.error(status, "invalid_request_error"), openai_wire.reply(text="x")
    )
    notices: Notices = []

    with pytest.raises(ModelError) as caught:
        await caller_for(openai_wire.model(), notices).call(make_request())

    assert (caught.value.kind, caught.value.status) == (kind, status)
    assert len(wire_server.requests) == 1 and notices == []


async def test_a_model_the_server_does_not_serve_falls_back(
    openai_wire: OpenAIWire, wire_server: WireServer
) -> None:
    wire_server.queue(openai_wire.error(404, "invalid_request_error"), openai_wire.reply(text="b"))
    notices: Notices = []
    primary = openai_wire.model("llama-missing")
    caller = caller_for(primary, notices, fallback=primary.with_model_id("qwen-local"))

    done = await caller.call(make_request())

    assert done.message["content"] == [{"type": "text", "text": "b"}]
    assert [r.body["model"] for r in wire_server.requests] == ["llama-missing", "qwen-local"]
    assert [(s, d["from_model"], d["to_model"]) for s, d in notices] == [
        ("model_fallback", "llama-missing", "qwen-local")
    ]


# --- end to end -------------------------------------------------------------------------------


class ReadInput(ToolInput):
    path: str


class FakeRead(Tool[ReadInput]):
    name = "Read"
    description = "read a file"
    input_model = ReadInput

    def is_concurrency_safe(self, args: ReadInput) -> bool:
        return True

    async def call(self, args: ReadInput, ctx: ToolContext, info: CallInfo) -> ToolOutput:
        return ToolOutput(content=f"contents of {args.path}")


async def test_agent_loop_answers_parallel_calls_and_reports_bad_arguments(
    openai_wire: OpenAIWire, wire_server: WireServer, tmp_path: Path
) -> None:
    calls = [("c1", "Read", '{"path": "x"}'), ("c2", "Read", '{"path": ')]
    wire_server.queue(openai_wire.reply(tool_calls=calls), openai_wire.reply(text="All read."))
    ctx = ToolContext(
        cwd=tmp_path,
        roots=(tmp_path,),
        abort=AbortSignal(),
        agent=AgentRef(agent_id="main", agent_type="main"),
    )
    spec = LoopSpec(
        caller=ModelCaller(model=openai_wire.model(), policy=RetryPolicy(base_delay_s=0.001)),
        system="sys",
        tools=[FakeRead()],
        ctx=ctx,
        messages=[user_message("read")],
        prompt="read",
    )

    outcome = await run_loop(spec)

    assert outcome.reason == "completed" and outcome.final_text == "All read."
    tool_messages = [m for m in wire_server.requests[1].body["messages"] if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in tool_messages] == ["c1", "c2"]
    assert tool_messages[0]["content"] == "contents of x"
    assert tool_messages[1]["content"].startswith("Error: ")
    assert "invalid_json_arguments" in tool_messages[1]["content"]


async def test_resolve_model_builds_an_openai_compatible_model(
    openai_wire: OpenAIWire, wire_server: WireServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", wire_server.url + "/v1")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    wire_server.queue(openai_wire.reply(text="hi"))

    model = resolve_model("openai:qwen2.5-coder")
    assert isinstance(model, OpenAIModel)
    openai_wire.models.append(model)
    await complete(model, make_request())

    assert wire_server.requests[0].body["model"] == "qwen2.5-coder"
    assert resolve_alias(model, "sonnet") is model  # no alias entry: a local server keeps its model


# --- converting each message once (openai_messages.HistoryConversions) ----------------------


def _tool_turn(call_id: str, path: str) -> list[Message]:
    return [
        {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": call_id, "name": "Read", "input": {"path": path}}
            ],
        },
        user_message(
            [{"type": "tool_result", "tool_use_id": call_id, "content": f"text of {path}"}]
        ),
    ]


async def test_a_growing_history_is_sent_as_it_is_now_even_when_changed_in_place(
    openai_wire: OpenAIWire, wire_server: WireServer
) -> None:
    """Each message is converted once per agent, yet what is sent is always the history as
    it is at the call: appended, edited in place (a nested tool input, a tool result), or
    replaced by another list (compaction), for interleaved agents."""
    model = openai_wire.model()
    history: list[Message] = [user_message("read files"), *_tool_turn("c1", "a")]
    other: list[Message] = [user_message("another agent")]

    async def send(messages: list[Message], agent_id: str = "a1") -> list[dict[str, Any]]:
        wire_server.queue(openai_wire.reply(text="ok"))
        request = make_request(messages)
        request.metadata = RequestMetadata(agent_id=agent_id, agent_type="test", prompt="p")
        await complete(model, request)
        sent: list[dict[str, Any]] = wire_server.requests[-1].body["messages"]
        assert sent == to_openai_messages("You are a test agent.", messages)  # the reference
        return sent

    await send(history)
    await send(other, agent_id="a2")
    history += _tool_turn("c2", "b")
    assert (await send(history))[-1]["content"] == "text of b"

    history[1]["content"][0]["input"]["path"] = "edited"  # type: ignore[index]
    history[2]["content"][0]["content"] = "a changed result"  # type: ignore[index]
    sent = await send(history)
    assert sent[2]["tool_calls"][0]["function"]["arguments"] == '{"path": "edited"}'
    assert sent[3]["content"] == "a changed result"

    compacted: list[Message] = [user_message("summary of the work so far"), *_tool_turn("c3", "c")]
    sent = await send(compacted)
    assert [m.get("content") for m in sent[1:2]] == ["summary of the work so far"]
    assert (await send(other, agent_id="a2"))[1]["content"] == "another agent"

    compacted[-1]["content"][0]["content"] = "the last message, edited"  # type: ignore[index]
    assert (await send(compacted))[-1]["content"] == "the last message, edited"
    del compacted[1:]  # shortened
    assert len(await send(compacted)) == 2
    compacted[0] = user_message("summary of the work so far")  # equal, but another object
    compacted += _tool_turn("c4", "d")
    compacted[1]["content"][0]["input"] = {"path": ("a", "tuple")}  # type: ignore[index]
    await send(compacted)  # JSON-encodes differently from its copy: converted every time
    compacted[1]["content"][0]["input"]["path"] = ("b",)  # type: ignore[index]
    assert '"b"' in (await send(compacted))[2]["tool_calls"][0]["function"]["arguments"]
