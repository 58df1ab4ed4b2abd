"""The Anthropic provider: the Messages API through the official ``anthropic`` SDK, streamed.

Our messages are already Anthropic-shaped, so the request is mostly a copy. What we add:

* **Prompt caching.** Three ``cache_control: ephemeral`` breakpoints: the system prompt, the last
  tool, and the last content block of the last message. Every call therefore writes the whole
  conversation to the cache, and the next call (one turn later, or a fork whose history starts
  with the parent's exact bytes) reads that prefix back. The breakpoints are placed on copies;
  the agent's history and a fork's shared tool array are never mutated.
* **Thinking.** ``request.thinking`` is passed as the ``thinking`` parameter; thinking blocks come
  back with their signature so they can be sent again on the next turn.
* **Streaming.** Raw stream events are assembled here (not by the SDK's helper) so that a stream
  that ends without ``message_stop`` — a dropped connection — is an error, never a short answer.

The SDK client is built with ``max_retries=0``: ``ModelCaller`` owns retries and backoff, and
needs every error raw (see ``_sdk_support`` for the mapping to ``ModelError`` kinds).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from subagents.messages import ContentBlock, Message, Usage
from subagents.models._sdk_support import (
    EPHEMERAL,
    load_sdk,
    parse_tool_arguments,
    relay,
)
from subagents.models.base import MessageDone, ModelError, ModelRequest, StreamEvent


class AnthropicModel:
    """A Claude model behind the Messages API. ``client`` may be any ``AsyncAnthropic``."""

    provider = "anthropic"

    def __init__(
        self,
        name: str,
        *,
        client: Any = None,
        api_key: str | None = None,
        base_url: str | None = None,
    ) -> None:
        self.name = name
        self._sdk = load_sdk("anthropic", "anthropic")
        if client is None:
            client = self._sdk.AsyncAnthropic(api_key=api_key, base_url=base_url, max_retries=0)
        self.client: Any = client

    def with_model_id(self, model_id: str) -> AnthropicModel:
        """A sibling for another Claude model, sharing this one's client (and its connections)."""
        return AnthropicModel(model_id, client=self.client)

    async def aclose(self) -> None:
        """Close the SDK client's connections (shared with siblings from ``with_model_id``)."""
        await self.client.close()

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        params = build_params(request, self.name)
        async for event in relay(
            lambda: self.client.messages.create(**params),
            StreamAssembler(),
            model=self.name,
            label=f"anthropic model {self.name!r}",
            sdk=self._sdk,
            abort=request.abort,
        ):
            yield event


def build_params(request: ModelRequest, model: str) -> dict[str, Any]:
    """The ``messages.create`` arguments for ``request``, cache breakpoints included."""
    params: dict[str, Any] = {
        "model": model,
        "max_tokens": request.max_tokens,
        "messages": cached_messages(request.messages),
        "stream": True,
    }
    if request.system:
        params["system"] = [{"type": "text", "text": request.system, "cache_control": EPHEMERAL}]
    if request.tools:
        params["tools"] = cached_tools(request.tools)
    if request.thinking:
        params["thinking"] = request.thinking
    return params


def cached_tools(tools: Sequence[Any]) -> list[dict[str, Any]]:
    """Tool dicts with a breakpoint on the last; accepts ``ToolSchema``s or ready dicts."""
    out = [dict(t.to_dict()) if hasattr(t, "to_dict") else dict(t) for t in tools]
    out[-1]["cache_control"] = EPHEMERAL
    return out


def cached_messages(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """The history with a breakpoint on the last cacheable block of the last message.

    Thinking blocks cannot carry ``cache_control``, and an empty text cannot be cached, so the
    breakpoint goes on the last block that can take it.
    """
    out: list[dict[str, Any]] = [dict(m) for m in messages]
    if not out:
        return out
    last = out[-1]
    content = last["content"]
    blocks: list[dict[str, Any]] = (
        [{"type": "text", "text": content}] if isinstance(content, str) else list(content)
    )
    for index in range(len(blocks) - 1, -1, -1):
        block = blocks[index]
        if block.get("type") in ("thinking", "redacted_thinking"):
            continue
        if block.get("type") == "text" and not block.get("text"):
            continue
        blocks[index] = {**block, "cache_control": EPHEMERAL}
        last["content"] = blocks
        break
    return out


@dataclass(kw_only=True)
class StreamAssembler:
    """Builds the assistant message, usage and stop reason from raw Messages stream events."""

    blocks: dict[int, dict[str, Any]] = field(default_factory=dict)
    partial_json: dict[int, list[str]] = field(default_factory=dict)
    usage: dict[str, int] = field(default_factory=dict)
    stop_reason: str = "end_turn"
    stopped: bool = False

    def feed(self, event: Any) -> str | None:
        """Apply one event; returns text to show live, if the event carried some."""
        kind = event.type
        if kind == "message_start":
            self._merge_usage(event.message.usage)
        elif kind == "content_block_start":
            self.blocks[event.index] = start_block(event.content_block)
        elif kind == "content_block_delta":
            return self._apply_delta(event.index, event.delta)
        elif kind == "content_block_stop":
            self._finish_block(event.index)
        elif kind == "message_delta":
            if event.delta.stop_reason:
                self.stop_reason = event.delta.stop_reason
            self._merge_usage(event.usage)
        elif kind == "message_stop":
            self.stopped = True
        return None

    def done(self, model: str, label: str) -> MessageDone:
        if not self.stopped:
            raise ModelError("connection", f"{label}: stream ended before message_stop")
        # An empty text block is legal in a response but rejected when sent back next turn.
        content = [
            cast(ContentBlock, block)
            for _index, block in sorted(self.blocks.items())
            if not (block.get("type") == "text" and not block.get("text"))
        ]
        message: Message = {"role": "assistant", "content": content}
        return MessageDone(
            message=message,
            usage=Usage.from_dict(dict(self.usage)),
            stop_reason=self.stop_reason,
            model=model,
        )

    def _apply_delta(self, index: int, delta: Any) -> str | None:
        block = self.blocks.setdefault(index, {"type": "text", "text": ""})
        kind = delta.type
        if kind == "text_delta":
            block["text"] = block.get("text", "") + delta.text
            return str(delta.text)
        if kind == "thinking_delta":
            block["thinking"] = block.get("thinking", "") + delta.thinking
        elif kind == "signature_delta":
            block["signature"] = delta.signature
        elif kind == "input_json_delta":
            self.partial_json.setdefault(index, []).append(delta.partial_json)
        return None

    def _finish_block(self, index: int) -> None:
        block = self.blocks.get(index)
        if block is not None and block.get("type") == "tool_use" and index in self.partial_json:
            block["input"] = parse_tool_arguments("".join(self.partial_json.pop(index)))

    def _merge_usage(self, usage: Any) -> None:
        """Counters are cumulative: a later non-null value replaces an earlier one."""
        if usage is None:
            return
        for key in Usage().to_dict():
            value = getattr(usage, key, None)
            if value is not None:
                self.usage[key] = int(value)


def start_block(block: Any) -> dict[str, Any]:
    """Our dict for a ``content_block_start`` block; unknown kinds are kept as the API sent them."""
    kind = block.type
    if kind == "text":
        return {"type": "text", "text": block.text or ""}
    if kind == "thinking":
        started: dict[str, Any] = {"type": "thinking", "thinking": block.thinking or ""}
        if getattr(block, "signature", None):
            started["signature"] = block.signature
        return started
    if kind == "tool_use":
        return {"type": "tool_use", "id": block.id, "name": block.name, "input": block.input or {}}
    if kind == "redacted_thinking":
        return {"type": "redacted_thinking", "data": block.data}
    dumped: dict[str, Any] = block.model_dump(mode="json", exclude_none=True)
    return dumped
