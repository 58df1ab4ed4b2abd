"""The lean transport's per-call objects are built without keyword calls (``object.__new__``
and every field set: a class called with keywords packs them into a dict and unpacks it for
``__init__``). Each must still be the object the keyword constructor gives: every field set
(an unset slot raises on reading), each equal to the plain form's."""

from __future__ import annotations

import dataclasses
import random
from pathlib import Path

import pytest

from subagents.messages import Usage
from subagents.models import _sse
from subagents.models._http import Origin
from subagents.models._lean import LeanCall, LeanEndpoint
from subagents.models.anthropic import AnthropicModel, StreamAssembler
from subagents.models.base import MessageDone, ModelRequest, RequestMetadata, message_done
from subagents.models.openai import ChunkAssembler, OpenAIModel, map_usage

RECORDED = Path(__file__).resolve().parents[2] / "bench" / "recorded"


def _plain(done: MessageDone) -> MessageDone:
    usage = Usage(**{field.name: getattr(done.usage, field.name) for field in _fields(Usage)})
    return MessageDone(
        message=done.message, usage=usage, stop_reason=done.stop_reason, model=done.model
    )


def _fields(cls: type) -> tuple[dataclasses.Field[object], ...]:
    return dataclasses.fields(cls)


def test_message_done_is_what_the_keyword_constructor_gives() -> None:
    usage = Usage(input_tokens=3, output_tokens=4)
    done = message_done({"role": "assistant", "content": []}, usage, "tool_use", "m")
    assert done == MessageDone(
        message={"role": "assistant", "content": []}, usage=usage, stop_reason="tool_use", model="m"
    )
    assert done.type == "message_done"
    assert dataclasses.asdict(done)  # reads every field


@pytest.mark.parametrize("path", sorted(RECORDED.glob("*.sse")), ids=lambda path: path.name)
def test_each_recorded_streams_message_is_what_the_keyword_constructors_give(path: Path) -> None:
    assembler = ChunkAssembler() if path.name.startswith("openai") else StreamAssembler()
    decoder = _sse.SSEDecoder()
    assembler.feed_records(decoder.records(path.read_bytes()) + decoder.flush_records())
    done = assembler.done("m", "label")
    assert done == _plain(done) and done.type == "message_done"
    assert dataclasses.asdict(done)["usage"] == done.usage.to_dict()
    assert done.usage.total > 0  # the recordings carry usage: it was read, not defaulted


def test_an_anthropic_stream_without_usage_has_every_counter_zero() -> None:
    assembler = StreamAssembler()
    assembler.feed({"type": "message_stop"})
    assert assembler.done("m", "label").usage == Usage()


def test_openai_usage_is_what_the_keyword_constructor_gives() -> None:
    rng = random.Random(5)
    for _ in range(300):
        prompt = rng.choice([None, 0, 5, 1000, "12"])
        usage: dict[str, object] = {
            "prompt_tokens": prompt,
            "completion_tokens": rng.choice([None, 0, 7, "3"]),
        }
        if rng.random() < 0.6:
            usage["prompt_tokens_details"] = {
                "cached_tokens": rng.choice([None, 0, 2, 900]),
                "cache_write_tokens": rng.choice([None, 0, 1, 50]),
            }
        details = usage.get("prompt_tokens_details") or {}
        assert isinstance(details, dict)
        cached = int(details.get("cached_tokens") or 0)
        written = int(details.get("cache_write_tokens") or 0)
        plain = Usage(
            input_tokens=max(int(prompt or 0) - cached - written, 0),
            output_tokens=int(usage["completion_tokens"] or 0),  # type: ignore[call-overload]
            cache_read_input_tokens=cached,
            cache_creation_input_tokens=written,
        )
        mapped = map_usage(usage)
        assert mapped == plain
        assert dataclasses.asdict(mapped) == plain.to_dict()


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_a_lean_call_is_what_the_keyword_constructor_gives(provider: str) -> None:
    endpoint = LeanEndpoint(origin=Origin.parse("http://127.0.0.1:9"), path="/", headers=b"")
    model = (
        OpenAIModel("m", _endpoint=endpoint)
        if provider == "openai"
        else AnthropicModel("m", _endpoint=endpoint)
    )
    request = ModelRequest(
        model="m",
        system="s",
        messages=[{"role": "user", "content": "go"}],
        tools=[],
        metadata=RequestMetadata(agent_id="a1", agent_type="main", prompt="go"),
    )
    call = model._lean_call(request)
    assert call is not None
    plain = LeanCall(
        endpoint=endpoint,
        body=call.body,
        assembler=call.assembler,
        model="m",
        label=model.label,
        status_message=model.status_message,
        event_message=model.event_message,
        abort=None,
    )
    assert call == plain  # compares every field: an unset one would raise
    assert type(call.assembler) is type(model.assembler())
