"""``HistoryConversions``: a history sent as chat-completions messages, converted once per
message, must always be what converting the whole history afresh gives — as dicts
(``convert``, the SDK transport) and as JSON bytes (``encoded``, the lean transport) — however
the history was appended to, edited in place, replaced or shortened between calls."""

from __future__ import annotations

import copy
import json
import math
import random
from typing import Any

import orjson
import pytest

from subagents.models.openai_messages import (
    HistoryConversions,
    _acyclic_json,
    to_openai_messages,
)

SYSTEM = "You are a worker."


def _value(rng: random.Random, depth: int = 0) -> Any:
    kind = rng.randrange(9 if depth < 3 else 6)
    if kind == 0:
        return rng.choice(["", "a", "é ü", "line\nbreak", 'q"uote\\', "\u2028", "😀", "\x00\x1f"])
    if kind == 1:
        return rng.choice([0, -1, 7, 2**53, -(2**63), 2**64 - 1])
    if kind == 2:
        return rng.choice([0.5, -1e-07, 1e300, 3.0, -0.0])
    if kind == 3:
        return rng.choice([True, False])
    if kind == 4:
        return None
    if kind == 5:
        return rng.choice(["x", "path", "π"])
    if kind in (6, 7):
        return {
            rng.choice("abcdé") + str(i): _value(rng, depth + 1) for i in range(rng.randrange(4))
        }
    return [_value(rng, depth + 1) for _ in range(rng.randrange(4))]


def test_the_shared_encoder_writes_what_json_dumps_writes() -> None:
    rng = random.Random(1)
    for _ in range(3000):
        value = _value(rng)
        assert _acyclic_json(value) == json.dumps(value), value
    for special in (math.nan, math.inf, [-math.inf], {"a": (1, 2)}, "s", 1, None):
        assert _acyclic_json(special) == json.dumps(special)
    with pytest.raises(TypeError):
        _acyclic_json({"a": {1, 2}})
    assert _acyclic_json({"a": 1}) == '{"a": 1}'  # the encoder holds no state from the error


def _turn(rng: random.Random, number: int) -> list[dict[str, Any]]:
    call = f"call_{number}"
    assistant: list[dict[str, Any]] = []
    for _ in range(rng.choice([0, 1, 1, 1, 2])):  # none, one, or two text blocks
        assistant.append({"type": "text", "text": rng.choice(["", "ok", "I'll look."])})
    for extra in range(rng.randint(1, 2)):
        assistant.append(
            {"type": "tool_use", "id": f"{call}_{extra}", "name": "Read", "input": _value(rng)}
        )
    results: list[dict[str, Any]] = [
        {
            "type": "tool_result",
            "tool_use_id": block["id"],
            "content": rng.choice(["done", "", [{"type": "text", "text": "a"}]]),
            **({"is_error": True} if rng.random() < 0.2 else {}),
        }
        for block in assistant
        if block["type"] == "tool_use"
    ]
    if rng.random() < 0.3:
        results.append({"type": "text", "text": "and a note"})
    return [{"role": "assistant", "content": assistant}, {"role": "user", "content": results}]


def _edit(rng: random.Random, history: list[dict[str, Any]]) -> None:
    """Change one message in place, somewhere nested or at its top."""
    message = rng.choice(history)
    content = message["content"]
    if isinstance(content, str) or not content:
        message["content"] = content + "!" if isinstance(content, str) else "now text"
        return
    block = rng.choice(content)
    if block["type"] == "tool_use":
        block["input"] = _value(rng) if rng.random() < 0.5 else {"edited": [1, 2]}
    elif block["type"] == "tool_result":
        block["content"] = "a changed result"
    else:
        block["text"] = block.get("text", "") + " more"


def _check(
    conversions: HistoryConversions,
    agent: str,
    history: list[dict[str, Any]],
    system: str = SYSTEM,
) -> None:
    expected = to_openai_messages(system, history)  # type: ignore[arg-type]
    encoded = conversions.encoded(agent, system, history)  # type: ignore[arg-type]
    assert encoded == orjson.dumps(expected)
    assert conversions.convert(agent + "-dicts", system, history) == expected  # type: ignore[arg-type]


def test_random_histories_are_sent_as_they_are_at_each_call() -> None:
    """Growing histories of two agents, edited in place (nested tool inputs, results, texts),
    replaced by an equal copy, by another history, shortened, and sent again unchanged."""
    rng = random.Random(5)
    conversions = HistoryConversions()
    histories: dict[str, list[dict[str, Any]]] = {
        "a": [{"role": "user", "content": "job a"}],
        "b": [{"role": "user", "content": "job b"}],
    }
    turns = 0
    for _ in range(600):
        agent = rng.choice("ab")
        history = histories[agent]
        action = rng.random()
        if action < 0.45:
            turns += 1
            history += _turn(rng, turns)
        elif action < 0.7:
            _edit(rng, history)
        elif action < 0.75:
            histories[agent] = history = copy.deepcopy(history)
        elif action < 0.8:
            histories[agent] = history = [{"role": "user", "content": "summary"}]
        elif action < 0.85 and len(history) > 2:
            del history[rng.randrange(1, len(history)) :]
        # Mostly the agent's own prompt; now and then none or another one (``encoded``
        # keeps the system message's JSON per agent: it must follow the prompt sent).
        system = rng.choice([SYSTEM] * 8 + ["", "Another prompt ✓"])
        _check(conversions, agent, history, system)


def test_a_history_orjson_cannot_encode_is_converted_as_dicts() -> None:
    conversions = HistoryConversions()
    history: list[dict[str, Any]] = [
        {"role": "user", "content": "job"},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "c", "name": "R", "input": {"n": 2**70}}],
        },
    ]
    assert conversions.encoded("a", SYSTEM, history) is None  # type: ignore[arg-type]
    assert conversions.convert("a", SYSTEM, history) == to_openai_messages(SYSTEM, history)  # type: ignore[arg-type]
