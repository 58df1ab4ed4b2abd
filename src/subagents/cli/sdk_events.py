"""Claude Code's stream-json shape, added to our events (SPEC §19 fields stay as they are).

``SdkShaper.lines(event)`` turns one event into the JSON lines to print: the event's own line
with Claude Code's fields added (``uuid``, ``session_id``, ``parent_tool_use_id``,
``message.id/model/usage/stop_reason``, ``tool_use_result``), plus the lines the SDK reads that
have no counterpart of ours (``system/task_started|task_progress|task_notification`` for
background children, ``stream_event`` partial messages). See ``docs/headless-protocol.md``.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from subagents.events import (
    AgentRef,
    AssistantEvent,
    Event,
    InitEvent,
    NotificationEvent,
    ProgressEvent,
    ResultEvent,
    SystemEvent,
    ToolResultsEvent,
)
from subagents.messages import ContentBlock, Message

NOTIFICATION_STATUS = {"completed": "completed", "failed": "failed", "killed": "stopped"}
"""Our terminal task statuses -> the SDK's ``task_notification`` statuses."""


@dataclass(kw_only=True)
class SdkShaper:
    """Adds Claude Code's fields; remembers which Agent call started each child."""

    session_id: str
    init_fields: Callable[[], dict[str, Any]] = dict
    """Extra ``init`` fields known only to the CLI (version, permission mode, agents...)."""
    partial_messages: bool = False
    _parent_calls: dict[str, str | None] = field(default_factory=dict)

    def lines(self, event: Event) -> list[dict[str, Any]]:
        if isinstance(event, AssistantEvent):
            return self._assistant(event)
        if isinstance(event, ToolResultsEvent):
            return self._tool_results(event)
        line = self._stamp(event.to_dict(), _agent_of(event))
        if isinstance(event, InitEvent):
            line.update(self.init_fields())
            return [line]
        if isinstance(event, SystemEvent) and event.subtype == "agent_started":
            return [line, *self._task_started(event)]
        if isinstance(event, ProgressEvent) and event.subtype == "agent_progress":
            return [line, self._task_progress(event)]
        if isinstance(event, NotificationEvent):
            return [line, self._task_notification(event)]
        return [line]

    def parent_tool_use_id(self, agent: AgentRef | None) -> str | None:
        if agent is None or agent.parent_agent_id is None:
            return None
        return self._parent_calls.get(agent.agent_id)

    # -- the event kinds -------------------------------------------------------------------

    def _assistant(self, event: AssistantEvent) -> list[dict[str, Any]]:
        line = self._stamp(event.to_dict(), event.agent)
        message: dict[str, Any] = {
            "id": f"msg_{uuid.uuid4().hex[:24]}",
            "type": "message",
            **event.message,
            "content": [_sdk_block(b) for b in _blocks(event.message)],
            "model": event.model,
            "stop_reason": event.stop_reason,
            "stop_sequence": None,
            "usage": event.usage.to_dict(),
        }
        line["message"] = message
        if not self.partial_messages:
            return [line]
        parent = line["parent_tool_use_id"]
        stream = [self._stream_line(e, parent) for e in partial_events(message)]
        return [*stream, line]

    def _tool_results(self, event: ToolResultsEvent) -> list[dict[str, Any]]:
        """One line per tool result, as Claude Code sends them; other blocks (input that rode
        along) go with the last line."""
        blocks = _blocks(event.message)
        results = [b for b in blocks if b["type"] == "tool_result"]
        others = [b for b in blocks if b["type"] != "tool_result"]
        if not results:
            return [self._user_line(event, blocks, None)]
        lines = []
        for index, block in enumerate(results):
            content: list[ContentBlock] = [block]
            if index == len(results) - 1:
                content += others
            output = event.outputs[index] if index < len(event.outputs) else None
            lines.append(self._user_line(event, content, _tool_use_result(block, output)))
        return lines

    def _user_line(
        self, event: ToolResultsEvent, content: list[ContentBlock], result: Any
    ) -> dict[str, Any]:
        line = self._stamp(event.to_dict(), event.agent)
        line["message"] = {"role": "user", "content": content}
        if result is not None:
            line["tool_use_result"] = result
        return line

    def _task_started(self, event: SystemEvent) -> list[dict[str, Any]]:
        data = event.data
        self._parent_calls[event.agent.agent_id] = data.get("tool_use_id")
        if not data.get("background"):
            # Only background work is a "task" to the SDK: it holds stdin open until the task's
            # notification, which a foreground child never gets (its result is the tool result).
            return []
        return [
            self._system(
                "task_started",
                event.agent,
                task_id=data["task_id"],
                description=data.get("description", ""),
                task_type="local_agent",
                tool_use_id=data.get("tool_use_id"),
            )
        ]

    def _task_progress(self, event: ProgressEvent) -> dict[str, Any]:
        data = event.data
        activities = data.get("recent_activities") or []
        last = activities[-1].split(":", 1)[0] if activities else None
        return self._system(
            "task_progress",
            event.agent,
            task_id=event.agent.agent_id,
            description=data.get("description", ""),
            usage={
                "total_tokens": data.get("total_tokens", 0),
                "tool_uses": data.get("tool_use_count", 0),
                "duration_ms": data.get("elapsed_ms", 0),
            },
            tool_use_id=self._parent_calls.get(event.agent.agent_id),
            last_tool_name=last,
        )

    def _task_notification(self, event: NotificationEvent) -> dict[str, Any]:
        return self._system(
            "task_notification",
            event.agent,
            task_id=event.task_id,
            status=NOTIFICATION_STATUS.get(event.status, "failed"),
            output_file=event.output_file or "",
            summary=event.summary,
            tool_use_id=self._parent_calls.get(event.task_id),
            usage=event.usage,
        )

    # -- helpers ---------------------------------------------------------------------------

    def _system(self, subtype: str, agent: AgentRef, **fields: Any) -> dict[str, Any]:
        line = {"type": "system", "subtype": subtype, **fields}
        line.update(agent.to_dict())
        return self._stamp(line, agent)

    def _stream_line(self, event: dict[str, Any], parent: str | None) -> dict[str, Any]:
        return {
            "type": "stream_event",
            "uuid": str(uuid.uuid4()),
            "session_id": self.session_id,
            "event": event,
            "parent_tool_use_id": parent,
        }

    def _stamp(self, line: dict[str, Any], agent: AgentRef | None) -> dict[str, Any]:
        line = dict(line)
        line.setdefault("session_id", self.session_id)
        line["uuid"] = str(uuid.uuid4())
        if line.get("type") in ("assistant", "user", "system"):
            line.setdefault("parent_tool_use_id", self.parent_tool_use_id(agent))
        return line


def _agent_of(event: Event) -> AgentRef | None:
    if isinstance(event, ResultEvent):
        return None
    return event.agent


def _blocks(message: Message) -> list[ContentBlock]:
    content = message["content"]
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return list(content)


def _sdk_block(block: ContentBlock) -> ContentBlock:
    """The SDK's parser needs a ``signature`` on every thinking block."""
    if block["type"] == "thinking" and "signature" not in block:
        return {**block, "signature": ""}
    return block


def _tool_use_result(block: ContentBlock, output: dict[str, Any] | None) -> Any:
    """The tool's structured output; a tool without one reports its text, as Claude Code's
    built-in tools without structure do."""
    if output is not None:
        return output
    content = block.get("content", "")
    if isinstance(content, list):
        content = "\n".join(p.get("text", "") for p in content if isinstance(p, dict))
    return {"content": content, "is_error": bool(block.get("is_error"))}


def partial_events(message: dict[str, Any]) -> list[dict[str, Any]]:
    """The Anthropic stream events that build ``message``, block by block."""
    start = {**message, "content": [], "stop_reason": None}
    events: list[dict[str, Any]] = [{"type": "message_start", "message": start}]
    for index, block in enumerate(message["content"]):
        events += _block_events(index, block)
    events.append(
        {
            "type": "message_delta",
            "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
            "usage": {"output_tokens": message["usage"].get("output_tokens", 0)},
        }
    )
    events.append({"type": "message_stop"})
    return events


def _block_events(index: int, block: dict[str, Any]) -> list[dict[str, Any]]:
    kind = block["type"]
    if kind == "tool_use":
        empty: dict[str, Any] = {**block, "input": {}}
        delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
    elif kind == "thinking":
        empty = {**block, "thinking": ""}
        delta = {"type": "thinking_delta", "thinking": block["thinking"]}
    else:
        empty = {**block, "text": ""}
        delta = {"type": "text_delta", "text": block.get("text", "")}
    return [
        {"type": "content_block_start", "index": index, "content_block": empty},
        {"type": "content_block_delta", "index": index, "delta": delta},
        {"type": "content_block_stop", "index": index},
    ]
