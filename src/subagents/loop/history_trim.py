"""Shrinking a history without a model: sizes, tool-result clearing, dropping the oldest turns.

Pure functions over messages (docs/compaction.md §2). They never mutate a message: a changed
message is a new object, because a fork's history holds its parent's message objects.

* ``message_chars`` — the size estimate the loop's running count adds for each user message
  (characters; a token is about four). Cheap: one ``len`` per block.
* ``plan_clearing`` — which old, large results of re-runnable tools can become a short stub.
* ``keep_newest`` — the newest messages that fit a budget, cut at a user message, as a valid
  conversation (results whose call was cut off become plain text).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from subagents.json_codec import dumps
from subagents.messages import (
    ContentBlock,
    Message,
    ToolResultBlock,
    ToolUseBlock,
    text_block,
    tool_result_text,
)

CHARS_PER_TOKEN = 4
CLEARABLE_TOOLS = frozenset(
    {"Read", "Grep", "Glob", "Bash", "WebFetch", "WebSearch", "TaskOutput", "NotebookRead"}
)
"""Tools whose output the agent can fetch again by calling them; an Agent's report is not."""

_ARGUMENT_KEYS = ("file_path", "pattern", "command", "url", "query", "task_id", "path")


def message_chars(message: Message) -> int:
    """Characters of a message's text, tool results and tool calls (for the running count)."""
    content = message["content"]
    if isinstance(content, str):
        return len(content)
    return blocks_chars(content)


def blocks_chars(blocks: Iterable[ContentBlock]) -> int:
    """``message_chars`` of a message made of ``blocks``."""
    total = 0
    for block in blocks:
        kind = block["type"]
        if kind == "text":
            total += len(block["text"])  # type: ignore[typeddict-item]
        elif kind == "tool_result":
            inner = block["content"]  # type: ignore[typeddict-item]
            total += len(inner) if isinstance(inner, str) else parts_chars(inner)
        elif kind == "tool_use":
            total += len(block["name"]) + len(dumps(block["input"]))  # type: ignore[typeddict-item]
        elif kind == "thinking":
            total += len(block["thinking"])  # type: ignore[typeddict-item]
    return total


def parts_chars(parts: Iterable[object]) -> int:
    """Characters of a tool result given as parts (its text parts; an image counts none)."""
    total = 0
    for part in parts:
        if isinstance(part, dict) and isinstance(part.get("text"), str):
            total += len(part["text"])
    return total


def history_tokens(system: str, messages: Sequence[Message]) -> int:
    """Estimated tokens of a system prompt and a history (characters / 4)."""
    chars = len(system)
    for message in messages:  # a loop, not ``sum`` of a generator: every agent's loop starts here
        chars += message_chars(message)
    return chars // CHARS_PER_TOKEN


# -- tool-result clearing ---------------------------------------------------------------------


@dataclass(kw_only=True, frozen=True)
class ClearingPlan:
    """The stub of each result to clear, by tool_use id, and the characters it saves."""

    stubs: dict[str, str]
    saved_chars: int


def plan_clearing(messages: Sequence[Message], *, keep_recent: int, min_chars: int) -> ClearingPlan:
    """Old results of ``CLEARABLE_TOOLS`` over ``min_chars``, all but the ``keep_recent``
    newest results of the history (whatever their tool), with the stub for each."""
    calls = _calls_by_id(messages)
    results = [
        block
        for message in messages
        if message["role"] == "user" and not isinstance(message["content"], str)
        for block in message["content"]
        if block["type"] == "tool_result"
    ]
    older = results[: max(0, len(results) - keep_recent)]
    stubs: dict[str, str] = {}
    saved = 0
    for block in older:
        call = calls.get(block["tool_use_id"])
        if call is None or call["name"] not in CLEARABLE_TOOLS:
            continue
        size = len(tool_result_text(block))
        if size <= min_chars or _is_stub(block):
            continue
        stub = clearing_stub(call, size)
        stubs[call["id"]] = stub
        saved += size - len(stub)
    return ClearingPlan(stubs=stubs, saved_chars=saved)


CLEARED_PREFIX = "[Earlier result of "


def clearing_stub(call: ToolUseBlock, size: int) -> str:
    """What the model sees instead of a cleared result: which call it was, and what to do."""
    argument = next(
        (
            f" ({key}: {str(call['input'][key])[:200]})"
            for key in _ARGUMENT_KEYS
            if isinstance(call["input"].get(key), str)
        ),
        "",
    )
    return (
        f"{CLEARED_PREFIX}{call['name']}{argument}, {size:,} characters, cleared to free "
        "context. Call the tool again if you need its output.]"
    )


def _is_stub(block: ToolResultBlock) -> bool:
    content = block["content"]
    return isinstance(content, str) and content.startswith(CLEARED_PREFIX)


def _calls_by_id(messages: Sequence[Message]) -> dict[str, ToolUseBlock]:
    calls: dict[str, ToolUseBlock] = {}
    for message in messages:
        if message["role"] != "assistant" or isinstance(message["content"], str):
            continue
        for block in message["content"]:
            if block["type"] == "tool_use":
                calls[block["id"]] = block
    return calls


# -- dropping the oldest turns ----------------------------------------------------------------


def keep_newest(messages: Sequence[Message], budget_chars: int) -> list[Message]:
    """The newest messages within ``budget_chars``, starting with a user message.

    The cut is at the oldest user message whose tail fits; tool results at the start of the
    kept part whose calls were cut off become text blocks. If not even the last user message
    and what follows fit, that message's text is cut to the budget."""
    start = _fitting_start(messages, budget_chars)
    if start is None:
        return []
    kept = list(messages[start:])
    kept[0] = _as_opening(kept[0], budget_chars)
    return kept


def cut_before(messages: Sequence[Message], index: int) -> list[Message]:
    """The history from the first user message at or after ``index`` (a valid conversation)."""
    for start in range(max(0, index), len(messages)):
        if messages[start]["role"] == "user":
            kept = list(messages[start:])
            kept[0] = _as_opening(kept[0], None)
            return kept
    return list(messages)


def _fitting_start(messages: Sequence[Message], budget_chars: int) -> int | None:
    total = 0
    start: int | None = None
    last_user: int | None = None
    for index in range(len(messages) - 1, -1, -1):
        total += message_chars(messages[index])
        if messages[index]["role"] != "user":
            continue
        last_user = index if last_user is None else last_user
        if total > budget_chars:
            break
        start = index
    return start if start is not None else last_user


def _as_opening(message: Message, budget_chars: int | None) -> Message:
    """``message`` as the first of a history: tool results become text (their calls are gone),
    the whole cut to ``budget_chars`` when given."""
    content = message["content"]
    blocks: list[ContentBlock] = []
    for block in [text_block(content)] if isinstance(content, str) else content:
        if block["type"] == "tool_result":
            text = tool_result_text(block)
            blocks.append(text_block(f"[Result of an earlier tool call]\n{text}"))
        else:
            blocks.append(block)
    if budget_chars is not None:
        blocks = _cut_blocks(blocks, budget_chars)
    return {"role": "user", "content": blocks}


def _cut_blocks(blocks: list[ContentBlock], budget_chars: int) -> list[ContentBlock]:
    out: list[ContentBlock] = []
    left = max(0, budget_chars)
    for block in blocks:
        if block["type"] != "text":
            out.append(block)
            continue
        text = block["text"]
        if len(text) > left:
            text = text[:left] + f"\n[... {len(block['text']) - left:,} characters cut ...]"
        left = max(0, left - len(text))
        out.append(text_block(text))
    return out
