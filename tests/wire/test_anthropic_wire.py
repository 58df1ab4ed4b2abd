"""The Anthropic provider against a local server speaking the Messages API, through the real SDK."""

from __future__ import annotations

import asyncio
import copy
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from wire_server import AnthropicWire, WireServer

from subagents.abort import AbortSignal
from subagents.events import AgentRef, Event
from subagents.loop.query import LoopSpec, run_loop
from subagents.messages import Message, tool_result_text, user_message
from subagents.models.anthropic import AnthropicModel
from subagents.models.base import (
    MessageDone,
    ModelError,
    ModelRequest,
    RequestMetadata,
    TextDelta,
    ToolSchema,
    complete,
)
from subagents.models.resolve import MODEL_ALIASES, resolve_alias, resolve_model
from subagents.models.retry import ModelCaller, RetryPolicy
from subagents.tools.base import CallInfo, Tool, ToolContext, ToolInput, ToolOutput

EPHEMERAL = {"type": "ephemeral"}
TOOLS = [
    ToolSchema(name="Read", description="read a file", input_schema={"type": "object"}),
    ToolSchema(name="Echo", description="echo text", input_schema={"type": "object"}),
]


def make_request(messages: list[Message] | None = None, **kwargs: Any) -> ModelRequest:
    return ModelRequest(
        model="",
        system=kwargs.pop("system", "You are a test agent."),
        messages=messages if messages is not None else [user_message("hello")],
        tools=kwargs.pop("tools", list(TOOLS)),
        metadata=RequestMetadata(agent_id="a1", agent_type="test", prompt="hello"),
        **kwargs,
    )


def caller_for(
    model: AnthropicModel, notices: list[tuple[str, dict[str, Any]]], **kw: Any
) -> ModelCaller:
    policy = RetryPolicy(max_attempts=kw.pop("max_attempts", 4), base_delay_s=0.001)
    return ModelCaller(
        model=model, policy=policy, on_notice=lambda s, d: notices.append((s, d)), **kw
    )


def strip_cache_control(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: strip_cache_control(v) for k, v in node.items() if k != "cache_control"}
    if isinstance(node, list):
        return [strip_cache_control(v) for v in node]
    return node


# --- streaming and assembly -------------------------------------------------------------------


async def test_streams_text_thinking_and_tool_use_with_full_usage(
    anthropic_wire: AnthropicWire, wire_server: WireServer
) -> None:
    usage = {
        "input_tokens": 11,
        "output_tokens": 42,
        "cache_creation_input_tokens": 300,
        "cache_read_input_tokens": 2000,
    }
    blocks = [
        {"type": "thinking", "thinking": "Let me look at the file.", "signature": "sig-abc"},
        {"type": "text", "text": "Reading it now."},
        {"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {"path": "a.txt", "n": 3}},
    ]
    wire_server.queue(anthropic_wire.reply(blocks, stop_reason="tool_use", usage=usage))
    model = anthropic_wire.model()

    events = [e async for e in model.stream(make_request())]

    texts = [e.text for e in events if isinstance(e, TextDelta)]
    assert "".join(texts) == "Reading it now."
    assert len(texts) == 2  # streamed as it arrived, not in one piece at the end
    done = events[-1]
    assert isinstance(done, MessageDone)
    assert done.message == {
        "role": "assistant",
        "content": [
            {"type": "thinking", "thinking": "Let me look at the file.", "signature": "sig-abc"},
            {"type": "text", "text": "Reading it now."},
            {
                "type": "tool_use",
                "id": "toolu_1",
                "name": "Read",
                "input": {"path": "a.txt", "n": 3},
            },
        ],
    }
    assert done.usage.to_dict() == usage
    assert done.stop_reason == "tool_use"
    assert done.model == "claude-test"


async def test_a_long_thinking_stream_is_assembled_whole(
    anthropic_wire: AnthropicWire, wire_server: WireServer
) -> None:
    """Over a thousand thinking and text deltas (kept as pieces, joined once per block: adding
    each delta to the block's string was quadratic) and a signature arriving mid-block, then
    replaced at its end, on both transports, streamed and not."""
    pieces = [f"step {i} — ü; " for i in range(1200)]
    reply = anthropic_wire.reply(
        [
            {"type": "thinking", "thinking": "", "signature": "sig-1"},
            {"type": "text", "text": ""},
        ]
    )
    assert reply.events is not None
    head, events = reply.events[:3], reply.events[3:]
    deltas: list[tuple[str | None, Any]] = [
        ("content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta})
        for index, delta in (
            *((0, {"type": "thinking_delta", "thinking": p}) for p in pieces[:600]),
            (0, {"type": "signature_delta", "signature": "sig-0"}),
            *((0, {"type": "thinking_delta", "thinking": p}) for p in pieces[600:]),
        )
    ]
    text = [
        ("content_block_delta", {"type": "content_block_delta", "index": 1, "delta": delta})
        for delta in ({"type": "text_delta", "text": p.upper()} for p in pieces)
    ]
    split = next(i for i, event in enumerate(events) if event[0] == "content_block_stop")
    reply.events = [*head, *deltas, *events[: split + 2], *text, *events[split + 2 :]]
    for _ in range(2):
        wire_server.queue(reply)
    model = anthropic_wire.model()

    streamed = [e async for e in model.stream(make_request())]
    done = await complete(model, make_request())

    assert isinstance(streamed[-1], MessageDone)
    assert "".join(e.text for e in streamed if isinstance(e, TextDelta)) == "".join(pieces).upper()
    for message in (streamed[-1].message, done.message):
        assert message["content"] == [
            {"type": "thinking", "thinking": "".join(pieces), "signature": "sig-1"},
            {"type": "text", "text": "".join(pieces).upper()},
        ]


async def test_invalid_tool_json_is_kept_under_a_named_key(
    anthropic_wire: AnthropicWire, wire_server: WireServer
) -> None:
    bad = {
        "type": "tool_use",
        "id": "toolu_1",
        "name": "Echo",
        "raw_json": '{"text": "unterminated',
    }
    wire_server.queue(anthropic_wire.reply([bad], stop_reason="tool_use"))

    done = await complete(anthropic_wire.model(), make_request())

    assert isinstance(done.message["content"], list)
    block = done.message["content"][0]
    assert block["type"] == "tool_use"
    assert block["input"] == {"invalid_json_arguments": '{"text": "unterminated'}


# --- what goes on the wire --------------------------------------------------------------------


async def test_request_places_three_cache_breakpoints_and_passes_thinking(
    anthropic_wire: AnthropicWire, wire_server: WireServer
) -> None:
    wire_server.queue(anthropic_wire.text("ok"))
    history: list[Message] = [
        user_message("first"),
        {"role": "assistant", "content": [{"type": "text", "text": "answer"}]},
        user_message([{"type": "text", "text": "second"}, {"type": "text", "text": "third"}]),
    ]
    before = copy.deepcopy(history)
    thinking = {"type": "enabled", "budget_tokens": 2048}
    request = make_request(history, thinking=thinking, max_tokens=4096)

    await complete(anthropic_wire.model("claude-x"), request)

    sent = wire_server.requests[0]
    assert sent.method == "POST" and sent.path == "/v1/messages"
    # The SDK sends the key as x-api-key or (newer releases) as a bearer token.
    assert "test-key" in (sent.headers.get("x-api-key"), sent.headers.get("authorization", "")[7:])
    body = sent.body
    assert body["model"] == "claude-x" and body["stream"] is True and body["max_tokens"] == 4096
    assert body["thinking"] == thinking
    assert body["system"] == [
        {"type": "text", "text": "You are a test agent.", "cache_control": EPHEMERAL}
    ]
    assert [t.get("cache_control") for t in body["tools"]] == [None, EPHEMERAL]
    assert body["tools"][0] == TOOLS[0].to_dict()
    marked = [
        (m, b)
        for m, msg in enumerate(body["messages"])
        for b, block in enumerate(msg["content"] if isinstance(msg["content"], list) else [])
        if "cache_control" in block
    ]
    assert marked == [(2, 1)]  # the last block of the last message, and nowhere else
    assert body["messages"][0] == {"role": "user", "content": "first"}
    assert history == before  # the live history is never mutated
    assert "cache_control" not in TOOLS[-1].to_dict()


async def test_a_string_last_message_becomes_a_cached_text_block(
    anthropic_wire: AnthropicWire, wire_server: WireServer
) -> None:
    wire_server.queue(anthropic_wire.text("ok"))

    await complete(anthropic_wire.model(), make_request([user_message("just a string")], tools=[]))

    body = wire_server.requests[0].body
    assert body["messages"] == [
        {
            "role": "user",
            "content": [{"type": "text", "text": "just a string", "cache_control": EPHEMERAL}],
        }
    ]
    assert "tools" not in body


async def test_a_fork_request_repeats_the_parents_cached_prefix_byte_for_byte(
    anthropic_wire: AnthropicWire, wire_server: WireServer
) -> None:
    """The parent's call writes system + tools + history to the cache; a fork sends the same
    system and tool bytes and the parent's history as its prefix, so it reads that cache."""
    wire_server.queue(anthropic_wire.text("parent"), anthropic_wire.text("fork"))
    model = anthropic_wire.model()
    parent_history: list[Message] = [
        user_message("task"),
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "t1", "name": "Echo", "input": {}}],
        },
        user_message([{"type": "tool_result", "tool_use_id": "t1", "content": "echoed"}]),
    ]
    await complete(model, make_request(parent_history))
    fork_history = [*parent_history, user_message("fork directive: do part B")]
    await complete(model, make_request(fork_history))

    parent, fork = (r.body for r in wire_server.requests)
    assert json.dumps(fork["system"]) == json.dumps(parent["system"])
    assert json.dumps(fork["tools"]) == json.dumps(parent["tools"])
    prefix = fork["messages"][: len(parent["messages"])]
    assert strip_cache_control(prefix) == strip_cache_control(parent["messages"])
    assert parent["messages"][-1]["content"][-1]["cache_control"] == EPHEMERAL
    assert fork["messages"][-1]["content"][-1]["cache_control"] == EPHEMERAL


async def test_calls_reuse_one_keep_alive_connection(
    anthropic_wire: AnthropicWire, wire_server: WireServer
) -> None:
    wire_server.queue(*(anthropic_wire.text(f"answer {i}") for i in range(3)))
    wire_server.queue(anthropic_wire.error(529, "overloaded_error"), anthropic_wire.text("last"))
    model = anthropic_wire.model()

    for _ in range(3):
        await complete(model, make_request())
    with pytest.raises(ModelError):
        await complete(model, make_request())  # an error response keeps the connection too
    done = await complete(model, make_request())

    assert done.message["content"] == [{"type": "text", "text": "last"}]
    assert len(wire_server.requests) == 5 and wire_server.connections == 1


# --- errors, retries, fallback ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "error_type", "kind"),
    [(529, "overloaded_error", "overloaded"), (500, "api_error", "api_error")],
)
async def test_server_errors_are_retried_then_succeed(
    anthropic_wire: AnthropicWire, wire_server: WireServer, status: int, error_type: str, kind: str
) -> None:
    wire_server.queue(anthropic_wire.error(status, error_type), anthropic_wire.text("recovered"))
    notices: list[tuple[str, dict[str, Any]]] = []

    done = await caller_for(anthropic_wire.model(), notices).call(make_request())

    assert done.message["content"] == [{"type": "text", "text": "recovered"}]
    assert len(wire_server.requests) == 2
    assert [(s, d["error"], d["error_status"], d["attempt"]) for s, d in notices] == [
        ("api_retry", kind, status, 1)
    ]


async def test_rate_limit_honours_retry_after(
    anthropic_wire: AnthropicWire, wire_server: WireServer
) -> None:
    limited = anthropic_wire.error(429, "rate_limit_error", headers={"retry-after": "0.2"})
    wire_server.queue(limited, anthropic_wire.text("after the wait"))
    notices: list[tuple[str, dict[str, Any]]] = []

    done = await caller_for(anthropic_wire.model(), notices).call(make_request())

    assert done.message["content"] == [{"type": "text", "text": "after the wait"}]
    ((subtype, data),) = notices
    assert subtype == "api_retry" and data["error"] == "rate_limit"
    assert data["retry_delay_ms"] >= 200  # base delay is 1 ms: only the header explains this


async def test_connection_dropped_mid_stream_is_retried(
    anthropic_wire: AnthropicWire, wire_server: WireServer
) -> None:
    wire_server.queue(
        anthropic_wire.text("never finished", drop_after=4), anthropic_wire.text("whole")
    )
    notices: list[tuple[str, dict[str, Any]]] = []

    done = await caller_for(anthropic_wire.model(), notices).call(make_request())

    assert done.message["content"] == [{"type": "text", "text": "whole"}]
    assert [d["error"] for _s, d in notices] == ["connection"]


async def test_a_dropped_stream_is_never_a_short_answer(
    anthropic_wire: AnthropicWire, wire_server: WireServer
) -> None:
    wire_server.queue(anthropic_wire.text("cut short", drop_after=4))

    with pytest.raises(ModelError) as caught:
        await complete(anthropic_wire.model(), make_request())

    assert caught.value.kind == "connection"


async def test_a_cleanly_ended_stream_without_message_stop_is_a_connection_error(
    anthropic_wire: AnthropicWire, wire_server: WireServer
) -> None:
    reply = anthropic_wire.text("half")
    assert reply.events is not None
    reply.events = reply.events[:-2]  # no message_delta, no message_stop; chunked body ends
    wire_server.queue(reply)

    with pytest.raises(ModelError, match="before message_stop") as caught:
        await complete(anthropic_wire.model(), make_request())

    assert caught.value.kind == "connection" and caught.value.retryable


async def test_empty_text_blocks_are_not_kept(
    anthropic_wire: AnthropicWire, wire_server: WireServer
) -> None:
    call = {"type": "tool_use", "id": "t1", "name": "Echo", "input": {"text": "x"}}
    wire_server.queue(anthropic_wire.reply([{"type": "text", "text": ""}, call]))

    done = await complete(anthropic_wire.model(), make_request())

    assert done.message["content"] == [call]


async def test_an_error_event_inside_the_stream_is_mapped_by_its_type(
    anthropic_wire: AnthropicWire, wire_server: WireServer
) -> None:
    wire_server.queue(anthropic_wire.stream_error("overloaded_error"), anthropic_wire.text("fine"))
    notices: list[tuple[str, dict[str, Any]]] = []

    done = await caller_for(anthropic_wire.model(), notices).call(make_request())

    assert done.message["content"] == [{"type": "text", "text": "fine"}]
    assert [d["error"] for _s, d in notices] == ["overloaded"]


@pytest.mark.parametrize(
    ("status", "error_type", "kind"),
    [
        (401, "authentication_error", "auth"),
        (403, "permission_error", "auth"),
        (400, "invalid_request_error", "invalid_request"),
    ],
)
async def test_client_errors_are_not_retried(
    anthropic_wire: AnthropicWire, wire_server: WireServer, status: int, error_type: str, kind: str
) -> None:
    wire_server.queue(anthropic_wire.error(status, error_type), anthropic_wire.text("unused"))
    notices: list[tuple[str, dict[str, Any]]] = []

    with pytest.raises(ModelError) as caught:
        await caller_for(anthropic_wire.model(), notices).call(make_request())

    assert (caught.value.kind, caught.value.status) == (kind, status)
    assert "claude-test" in str(caught.value)
    assert len(wire_server.requests) == 1 and notices == []


async def test_retries_are_bounded(anthropic_wire: AnthropicWire, wire_server: WireServer) -> None:
    wire_server.queue(*(anthropic_wire.error(529, "overloaded_error") for _ in range(3)))
    notices: list[tuple[str, dict[str, Any]]] = []

    with pytest.raises(ModelError) as caught:
        await caller_for(anthropic_wire.model(), notices, max_attempts=3).call(make_request())

    assert caught.value.kind == "overloaded"
    assert len(wire_server.requests) == 3 and len(notices) == 2


async def test_an_unknown_model_falls_back_and_the_switch_is_reported(
    anthropic_wire: AnthropicWire, wire_server: WireServer
) -> None:
    wire_server.queue(anthropic_wire.error(404, "not_found_error"), anthropic_wire.text("from b"))
    notices: list[tuple[str, dict[str, Any]]] = []
    primary = anthropic_wire.model("claude-retired")
    caller = caller_for(primary, notices, fallback=primary.with_model_id("claude-current"))

    done = await caller.call(make_request())

    assert done.message["content"] == [{"type": "text", "text": "from b"}]
    assert done.model == "claude-current"
    assert [r.body["model"] for r in wire_server.requests] == ["claude-retired", "claude-current"]
    assert [(s, d["from_model"], d["to_model"]) for s, d in notices] == [
        ("model_fallback", "claude-retired", "claude-current")
    ]
    assert caller.model.name == "claude-current"  # the switch sticks for the rest of the run


# --- cancellation, optional import ------------------------------------------------------------


async def test_abort_closes_the_stream(
    anthropic_wire: AnthropicWire, wire_server: WireServer
) -> None:
    wire_server.queue(anthropic_wire.text("first words then silence", stall=True))
    abort = AbortSignal()
    seen: list[str] = []

    async def consume() -> None:
        async for event in anthropic_wire.model().stream(make_request(abort=abort)):
            if isinstance(event, TextDelta):
                seen.append(event.text)
                abort.abort("user interrupt")

    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(consume(), timeout=10)
    await asyncio.wait_for(wire_server.client_hung_up.wait(), timeout=10)
    assert seen[0] == "first words "


async def test_a_silent_server_times_out_as_a_connection_error(
    wire_server: WireServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("API_TIMEOUT_MS", "300")
    wire = AnthropicWire(wire_server)
    wire_server.queue(wire.text("first words then silence", stall=True))
    model = wire.model()

    with pytest.raises(ModelError, match=r"no data from the server for 0.3 s") as caught:
        await asyncio.wait_for(complete(model, make_request()), timeout=10)

    assert caught.value.kind == "connection" and caught.value.retryable
    await asyncio.wait_for(wire_server.client_hung_up.wait(), timeout=10)
    await model.aclose()


def test_importing_the_providers_does_not_import_the_sdks() -> None:
    code = (
        "import sys, subagents, subagents.models.anthropic, subagents.models.openai\n"
        "assert 'anthropic' not in sys.modules, 'anthropic SDK imported'\n"
        "assert 'openai' not in sys.modules, 'openai SDK imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_a_missing_sdk_names_the_extra_when_the_sdk_path_is_needed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "anthropic", None)

    with pytest.raises(ImportError, match=r"pip install 'subagents\[anthropic\]'"):
        AnthropicModel("claude-x", api_key="k", transport="sdk")
    monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:9")  # a proxy: only the SDK handles it
    with pytest.raises(ImportError, match=r"pip install 'subagents\[anthropic\]'"):
        AnthropicModel("claude-x", api_key="k")


def test_a_proxy_chooses_the_sdk_and_no_proxy_keeps_the_lean_path(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("ALL_PROXY", "all_proxy", "https_proxy", "NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:9")
    assert AnthropicModel("claude-x", api_key="k").transport == "sdk"
    monkeypatch.setenv("NO_PROXY", "example.com,.anthropic.com")
    assert AnthropicModel("claude-x", api_key="k").transport == "lean"
    monkeypatch.setenv("no_proxy", "example.com")  # the lower-case spelling wins, as in urllib
    assert AnthropicModel("claude-x", api_key="k").transport == "sdk"
    monkeypatch.setenv("SUBAGENTS_HTTP", "sdk")
    monkeypatch.delenv("HTTPS_PROXY")
    assert AnthropicModel("claude-x", api_key="k").transport == "sdk"


async def test_the_lean_transport_needs_no_sdk(
    wire_server: WireServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "anthropic", None)
    monkeypatch.setitem(sys.modules, "httpx2", None)
    wire = AnthropicWire(wire_server)
    wire_server.queue(wire.text("no SDK needed"))
    model = wire.model()

    done = await complete(model, make_request())

    assert model.transport == "lean"
    assert done.message["content"] == [{"type": "text", "text": "no SDK needed"}]
    await model.aclose()


# --- end to end: the agent loop over the wire -------------------------------------------------


class EchoInput(ToolInput):
    text: str


class EchoTool(Tool[EchoInput]):
    name = "Echo"
    description = "Echo the text back, upper-cased."
    input_model = EchoInput

    async def call(self, args: EchoInput, ctx: ToolContext, info: CallInfo) -> ToolOutput:
        return ToolOutput(content=args.text.upper())


async def test_agent_loop_runs_a_tool_call_and_a_final_answer_over_the_wire(
    anthropic_wire: AnthropicWire, wire_server: WireServer, tmp_path: Path
) -> None:
    call = {"type": "tool_use", "id": "toolu_9", "name": "Echo", "input": {"text": "ping"}}
    wire_server.queue(
        anthropic_wire.reply([{"type": "text", "text": "Calling."}, call], stop_reason="tool_use"),
        anthropic_wire.text("The tool said PING."),
    )
    events: list[Event] = []
    ctx = ToolContext(
        cwd=tmp_path,
        roots=(tmp_path,),
        abort=AbortSignal(),
        agent=AgentRef(agent_id="main", agent_type="main"),
        emit=events.append,
    )
    spec = LoopSpec(
        caller=ModelCaller(model=anthropic_wire.model(), policy=RetryPolicy(base_delay_s=0.001)),
        system="You echo.",
        tools=[EchoTool()],
        ctx=ctx,
        messages=[user_message("echo ping")],
        prompt="echo ping",
    )

    outcome = await run_loop(spec)

    assert outcome.reason == "completed", outcome.error
    assert outcome.final_text == "The tool said PING."
    assert outcome.stats.num_turns == 2 and outcome.stats.tool_use_count == 1
    second = wire_server.requests[1].body
    result = second["messages"][-1]["content"][0]
    assert result["type"] == "tool_result" and result["tool_use_id"] == "toolu_9"
    assert tool_result_text(result) == "PING"
    assert result["cache_control"] == EPHEMERAL
    assert second["tools"][0]["name"] == "Echo" and "text" in json.dumps(second["tools"][0])


# --- provider spec and aliases ----------------------------------------------------------------


async def test_resolve_model_builds_the_provider_from_the_environment(
    anthropic_wire: AnthropicWire, wire_server: WireServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "env-key")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", wire_server.url)
    wire_server.queue(anthropic_wire.text("one"), anthropic_wire.text("two"))

    model = resolve_model("anthropic:sonnet")
    assert isinstance(model, AnthropicModel)
    anthropic_wire.models.append(model)
    haiku = resolve_alias(model, "haiku")
    await complete(model, make_request())
    await complete(haiku, make_request())

    sent = [r.body["model"] for r in wire_server.requests]
    assert sent == [MODEL_ALIASES["sonnet"]["anthropic"], MODEL_ALIASES["haiku"]["anthropic"]]
    assert resolve_alias(model, "claude-custom-id").name == "claude-custom-id"
    assert resolve_alias(model, "inherit") is model
    with pytest.raises(ValueError, match="anthropic:"):
        resolve_model("anthropic:")
