"""The OpenAI-compatible provider: chat completions through the official ``openai`` SDK, streamed.

It covers OpenAI itself and the local servers that speak the same protocol (Ollama, vLLM,
LM Studio, llama.cpp server). Our Anthropic-shaped history is converted on every call:

* the system prompt becomes the first ``system`` message;
* an assistant message's ``tool_use`` blocks become its ``tool_calls`` (arguments as JSON text);
  thinking blocks have no equivalent and are left out;
* a user message's ``tool_result`` blocks become ``role: "tool"`` messages, in order, right after
  the assistant message that called them (the protocol requires that place); its text blocks
  follow as one user message. Chat completions have no error flag for a tool result, so an
  ``is_error`` result's text is prefixed with ``Error: ``.

Streaming accumulates text and parallel tool-call deltas by their ``index``. Arguments that are
not valid JSON do not fail the call: the tool input becomes ``{"invalid_json_arguments": raw}``,
which every tool's input model rejects as an unknown field, so the loop returns an ``is_error``
result naming it and the model can try again. Usage comes from the final chunk
(``stream_options.include_usage``): cached prompt tokens are reported as cache reads and left out
of ``input_tokens``, so the four counters add up the way Anthropic's do.

The SDK client is built with ``max_retries=0``: ``ModelCaller`` owns retries.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from subagents.messages import ContentBlock, Message, Usage, blocks_of, tool_result_text
from subagents.models._sdk_support import (
    load_sdk,
    parse_tool_arguments,
    relay,
)
from subagents.models.base import MessageDone, ModelError, ModelRequest, StreamEvent

KEYLESS_PLACEHOLDER = "not-needed"
"""API key sent when none is configured: local servers ignore it, the SDK insists on one."""

_STOP_REASONS = {
    "stop": "end_turn",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "length": "max_tokens",
}


class OpenAIModel:
    """A chat-completions model. ``client`` may be any ``AsyncOpenAI``.

    ``max_tokens_param`` names the output cap: ``max_tokens`` is what every compatible server
    understands; OpenAI's reasoning models want ``max_completion_tokens``.
    """

    provider = "openai"

    def __init__(
        self,
        name: str,
        *,
        client: Any = None,
        api_key: str | None = None,
        base_url: str | None = None,
        max_tokens_param: str = "max_tokens",
    ) -> None:
        self.name = name
        self.max_tokens_param = max_tokens_param
        self._sdk = load_sdk("openai", "openai")
        if client is None:
            client = self._sdk.AsyncOpenAI(
                api_key=api_key or os.environ.get("OPENAI_API_KEY") or KEYLESS_PLACEHOLDER,
                base_url=base_url or os.environ.get("OPENAI_BASE_URL") or None,
                max_retries=0,
            )
        self.client: Any = client

    def with_model_id(self, model_id: str) -> OpenAIModel:
        """A sibling for another model on the same server, sharing this one's client."""
        return OpenAIModel(model_id, client=self.client, max_tokens_param=self.max_tokens_param)

    async def aclose(self) -> None:
        """Close the SDK client's connections (shared with siblings from ``with_model_id``)."""
        await self.client.close()

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        params = self.build_params(request)
        async for event in relay(
            lambda: self.client.chat.completions.create(**params),
            ChunkAssembler(),
            model=self.name,
            label=f"openai model {self.name!r}",
            sdk=self._sdk,
            abort=request.abort,
        ):
            yield event

    def build_params(self, request: ModelRequest) -> dict[str, Any]:
        params: dict[str, Any] = {
            "model": self.name,
            "messages": to_openai_messages(request.system, request.messages),
            "stream": True,
            "stream_options": {"include_usage": True},
            self.max_tokens_param: request.max_tokens,
        }
        if request.tools:
            params["tools"] = to_openai_tools(request.tools)
        return params


def to_openai_tools(tools: Sequence[Any]) -> list[dict[str, Any]]:
    """Function tools from ``ToolSchema``s or Anthropic-shaped tool dicts."""
    out: list[dict[str, Any]] = []
    for tool in tools:
        spec = tool.to_dict() if hasattr(tool, "to_dict") else tool
        function = {
            "name": spec["name"],
            "description": spec.get("description", ""),
            "parameters": spec.get("input_schema") or {"type": "object", "properties": {}},
        }
        out.append({"type": "function", "function": function})
    return out


def to_openai_messages(system: str, messages: Sequence[Message]) -> list[dict[str, Any]]:
    """Our history as chat-completions messages (see the module docstring for the mapping)."""
    out: list[dict[str, Any]] = [{"role": "system", "content": system}] if system else []
    for message in messages:
        if message["role"] == "assistant":
            out.append(_assistant_message(blocks_of(message)))
        else:
            out.extend(_user_messages(message))
    return out


def _assistant_message(blocks: list[ContentBlock]) -> dict[str, Any]:
    text = "\n".join(b["text"] for b in blocks if b["type"] == "text" and b["text"])
    calls = [
        {
            "id": b["id"],
            "type": "function",
            "function": {"name": b["name"], "arguments": json.dumps(b["input"])},
        }
        for b in blocks
        if b["type"] == "tool_use"
    ]
    converted: dict[str, Any] = {"role": "assistant", "content": text or None}
    if calls:
        converted["tool_calls"] = calls
    elif not text:
        converted["content"] = ""
    return converted


def _user_messages(message: Message) -> list[dict[str, Any]]:
    if isinstance(message["content"], str):
        return [{"role": "user", "content": message["content"]}]
    out: list[dict[str, Any]] = []
    texts: list[str] = []
    for block in message["content"]:
        if block["type"] == "tool_result":
            content = tool_result_text(block)
            if block.get("is_error"):
                content = f"Error: {content}"
            out.append({"role": "tool", "tool_call_id": block["tool_use_id"], "content": content})
        elif block["type"] == "text":
            texts.append(block["text"])
    if texts:
        out.append({"role": "user", "content": "\n".join(texts)})
    return out


@dataclass(kw_only=True)
class _ToolCallSlot:
    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)


@dataclass(kw_only=True)
class ChunkAssembler:
    """Builds the assistant message from ``chat.completion.chunk``s."""

    text: list[str] = field(default_factory=list)
    calls: dict[int, _ToolCallSlot] = field(default_factory=dict)
    finish_reason: str | None = None
    usage: Usage = field(default_factory=Usage)

    def feed(self, chunk: Any) -> str | None:
        """Apply one chunk; returns text to show live, if it carried some."""
        if getattr(chunk, "usage", None) is not None:
            self.usage = map_usage(chunk.usage)
        shown: list[str] = []
        for choice in chunk.choices or []:
            if choice.index != 0:
                continue
            delta = choice.delta
            if delta is not None and delta.content:
                self.text.append(delta.content)
                shown.append(delta.content)
            for call in (delta.tool_calls if delta is not None else None) or []:
                self._apply_tool_delta(call)
            if choice.finish_reason:
                self.finish_reason = choice.finish_reason
        return "".join(shown) or None

    def _apply_tool_delta(self, call: Any) -> None:
        slot = self.calls.setdefault(call.index if call.index is not None else 0, _ToolCallSlot())
        if call.id and not slot.id:
            slot.id = call.id
        function = call.function
        if function is not None:
            slot.name += function.name or ""
            slot.arguments.append(function.arguments or "")

    def done(self, model: str, label: str) -> MessageDone:
        if self.finish_reason is None:
            raise ModelError("connection", f"{label}: stream ended before a finish_reason")
        content: list[ContentBlock] = []
        text = "".join(self.text)
        if text:
            content.append({"type": "text", "text": text})
        for index in sorted(self.calls):
            slot = self.calls[index]
            content.append(
                {
                    "type": "tool_use",
                    # Some local servers send no id; the loop needs one to pair the result.
                    "id": slot.id or f"call_{uuid.uuid4().hex[:24]}",
                    "name": slot.name,
                    "input": parse_tool_arguments("".join(slot.arguments)),
                }
            )
        if not content:
            content.append({"type": "text", "text": ""})
        stop = _STOP_REASONS.get(self.finish_reason, self.finish_reason)
        if self.calls:
            stop = "tool_use"
        return MessageDone(
            message={"role": "assistant", "content": content},
            usage=self.usage,
            stop_reason=stop,
            model=model,
        )


def map_usage(usage: Any) -> Usage:
    """Chat-completions usage as our four counters; cached prompt tokens count once, as reads."""
    prompt = int(usage.prompt_tokens or 0)
    details = getattr(usage, "prompt_tokens_details", None)
    cached = int(getattr(details, "cached_tokens", None) or 0)
    written = int(getattr(details, "cache_write_tokens", None) or 0)
    return Usage(
        input_tokens=max(prompt - cached - written, 0),
        output_tokens=int(usage.completion_tokens or 0),
        cache_read_input_tokens=cached,
        cache_creation_input_tokens=written,
    )
