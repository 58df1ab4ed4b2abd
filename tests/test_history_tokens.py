"""``history_tokens`` (a loop now, not ``sum`` of a generator) gives what the old sum gave on
random histories of text, tool calls, tool results (text or parts) and thinking."""

from __future__ import annotations

import random
from typing import Any

from subagents.loop.history_trim import CHARS_PER_TOKEN, history_tokens, message_chars


def _block(rng: random.Random) -> dict[str, Any]:
    text = "x" * rng.randrange(0, 200)
    kind = rng.choice(["text", "tool_use", "tool_result", "tool_result_parts", "thinking"])
    if kind == "text":
        return {"type": "text", "text": text}
    if kind == "tool_use":
        return {"type": "tool_use", "id": "t", "name": "Read", "input": {"file_path": text}}
    if kind == "tool_result":
        return {"type": "tool_result", "tool_use_id": "t", "content": text}
    if kind == "tool_result_parts":
        parts = [{"type": "text", "text": text}, {"type": "text", "text": text[:7]}]
        return {"type": "tool_result", "tool_use_id": "t", "content": parts}
    return {"type": "thinking", "thinking": text, "signature": "s"}


def test_history_tokens_is_the_old_sum() -> None:
    rng = random.Random(15)
    for _ in range(300):
        messages: list[Any] = []
        for _ in range(rng.randrange(0, 8)):
            role = rng.choice(["user", "assistant"])
            if rng.random() < 0.3:
                messages.append({"role": role, "content": "y" * rng.randrange(0, 300)})
            else:
                blocks = [_block(rng) for _ in range(rng.randrange(0, 5))]
                messages.append({"role": role, "content": blocks})
        system = "s" * rng.randrange(0, 500)
        old = (len(system) + sum(message_chars(m) for m in messages)) // CHARS_PER_TOKEN
        assert history_tokens(system, messages) == old
