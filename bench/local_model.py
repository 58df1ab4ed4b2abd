"""Speed of the embedded local model (Qwen2.5-Coder-1.5B Q4_K_M on xllamacpp), CPU only.

Figures printed (one JSON object, plus a readable summary on stderr):

* ``load_s``            verify (stamp) + load of the engine;
* ``generation_tok_s``  decode speed of a free-text answer (engine timings);
* ``prompt_tok_s``      prompt evaluation speed on the cold long prefix;
* ``agent_steps``       per model call of a 3-step agent loop (list files, read one, reply)
                        run through ``run_loop`` with tools decoded under the grammar:
                        latency, prompt tokens evaluated, tokens served from cache, output tokens;
* ``fork``              a request whose long shared prefix (~2.5k tokens: system prompt, tools,
                        a conversation with a big tool result) is cold vs. already cached, the
                        way a fork re-sends its parent's history: ``cold_s``, ``warm_slot_s``
                        (prefix in the slot), ``warm_ram_s`` (slot overwritten by an unrelated
                        request in between, prefix restored from the RAM prompt cache) and the
                        speed-ups;
* ``peak_rss_mb``.

Run once (it takes about a minute or two on 2 cores): ``python bench/local_model.py``
(``--model local:smollm2`` for the small model). Needs ``subagents model install`` first.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import Field

from subagents.abort import AbortSignal
from subagents.events import AgentRef
from subagents.loop.query import Budget, LoopSpec, run_loop
from subagents.messages import Message, user_message
from subagents.models.base import (
    MessageDone,
    ModelRequest,
    RequestMetadata,
    StreamEvent,
    ToolSchema,
    complete,
)
from subagents.models.local import LocalModel, local_model_for
from subagents.models.retry import ModelCaller, RetryPolicy
from subagents.tools.base import CallInfo, Tool, ToolContext, ToolInput, ToolOutput


@dataclass(kw_only=True)
class TimedModel:
    """Wraps a model and records each call's latency and usage."""

    inner: LocalModel
    name: str = "timed"
    steps: list[dict[str, Any]] = field(default_factory=list)

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        started = time.perf_counter()
        async for event in self.inner.stream(request):
            if isinstance(event, MessageDone):
                usage = event.usage
                self.steps.append(
                    {
                        "latency_s": round(time.perf_counter() - started, 2),
                        "prompt_evaluated": usage.input_tokens,
                        "prompt_cached": usage.cache_read_input_tokens,
                        "output_tokens": usage.output_tokens,
                        "stop_reason": event.stop_reason,
                    }
                )
            yield event


class ListInput(ToolInput):
    path: str = Field(default=".", description="folder to list")


class ListTool(Tool[ListInput]):
    name = "list_files"
    description = "List the files of a folder of the project."
    input_model = ListInput

    def is_read_only(self, args: ListInput) -> bool:
        return True

    async def call(self, args: ListInput, ctx: ToolContext, info: CallInfo) -> ToolOutput:
        folder = (ctx.cwd / args.path).resolve()
        return ToolOutput(content="\n".join(sorted(p.name for p in folder.iterdir())))


class ReadInput(ToolInput):
    file_path: str = Field(description="file to read, relative to the project")


class ReadTool(Tool[ReadInput]):
    name = "read_file"
    description = "Read a text file of the project."
    input_model = ReadInput

    def is_read_only(self, args: ReadInput) -> bool:
        return True

    async def call(self, args: ReadInput, ctx: ToolContext, info: CallInfo) -> ToolOutput:
        return ToolOutput(content=(ctx.cwd / args.file_path).read_text())


def _request(system: str, messages: list[Message], tools: list[ToolSchema], n: int) -> ModelRequest:
    return ModelRequest(
        model="local",
        system=system,
        messages=messages,
        tools=tools,
        metadata=RequestMetadata(agent_id="bench", agent_type="main", prompt="bench"),
        max_tokens=n,
    )


async def generation_speed(model: LocalModel) -> dict[str, Any]:
    """Decode speed on a free-text answer, read from the engine's own timings."""
    engine = await asyncio.to_thread(model.engine)
    body = model.request_body(
        _request(
            "You are a helpful coding assistant.",
            [user_message("Explain in detail how a hash map works, with an example in Python.")],
            [],
            160,
        ),
        mode="free",
    )
    result = await asyncio.to_thread(engine.chat, body, threading.Event(), None)
    return {
        "generation_tok_s": round(float(result.timings.get("predicted_per_second", 0.0)), 1),
        "generated_tokens": result.timings.get("predicted_n"),
    }


async def agent_loop(model: LocalModel, project: Path) -> list[dict[str, Any]]:
    """A 3-step loop: list the project, read the file that answers, reply."""
    (project / "config.toml").write_text('[server]\nport = 8731\nhost = "127.0.0.1"\n')
    (project / "main.py").write_text("import tomllib\nprint('hello')\n")
    (project / "README.md").write_text("A tiny service.\n")
    timed = TimedModel(inner=model)
    prompt = (
        "Which port does the server in this project listen on? "
        "List the project folder ('.') first, then read the file that says."
    )
    outcome = await run_loop(
        LoopSpec(
            caller=ModelCaller(model=timed, policy=RetryPolicy()),
            system="You are a coding agent working in a small project. Use the tools.",
            tools=[ListTool(), ReadTool()],
            ctx=ToolContext(
                cwd=project,
                roots=(project,),
                abort=AbortSignal(),
                agent=AgentRef(agent_id="bench", agent_type="main"),
            ),
            messages=[user_message(prompt)],
            prompt=prompt,
            budget=Budget(max_turns=6),
        )
    )
    print(f"agent loop: {outcome.reason}: {outcome.final_text!r}", file=sys.stderr)
    return timed.steps


def long_history(nonce: str) -> tuple[str, list[Message], list[ToolSchema]]:
    """A parent agent's state worth ~2.5k tokens: system prompt, tools, a big tool result."""
    system = f"[session {nonce}] You are a senior Python reviewer. Be precise and brief."
    tools = [ListTool().schema(), ReadTool().schema()]
    code = "\n".join(
        f"def handler_{i}(request):\n    value = request.get('field_{i}', {i})\n"
        f"    return {{'id': {i}, 'value': value * {i % 7 + 1}}}\n"
        for i in range(50)
    )
    messages: list[Message] = [
        user_message("Review app/handlers.py."),
        {
            "role": "assistant",
            "content": [
                {
                    "type": "tool_use",
                    "id": "t1",
                    "name": "read_file",
                    "input": {"file_path": "app/handlers.py"},
                }
            ],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "t1", "content": code}],
        },
    ]
    return system, messages, tools


async def fork_speedup(model: LocalModel) -> dict[str, Any]:
    """Same long prefix: cold, then warm in the slot, then warm from the RAM cache."""
    system, history, tools = long_history(uuid.uuid4().hex)

    async def ask(question: str) -> tuple[float, MessageDone]:
        messages = [*history, {"role": "assistant", "content": [{"type": "text", "text": "Read."}]}]
        messages.append(user_message(question))
        started = time.perf_counter()
        done = await complete(model, _request(system, messages, tools, 24))
        return time.perf_counter() - started, done

    cold_s, cold = await ask("Fork A: in one sentence, what do the handlers return?")
    warm_s, warm = await ask("Fork B: in one sentence, is any handler unsafe?")
    other, _o, _t = long_history(uuid.uuid4().hex)
    await complete(model, _request(other, [user_message("Say OK.")], [], 4))  # evicts the slot
    ram_s, ram = await ask("Fork C: in one sentence, name one handler.")
    return {
        "prefix_tokens": cold.usage.input_tokens + cold.usage.cache_read_input_tokens,
        "cold_s": round(cold_s, 2),
        "warm_slot_s": round(warm_s, 2),
        "warm_ram_s": round(ram_s, 2),
        "cold_evaluated": cold.usage.input_tokens,
        "warm_slot_cached": warm.usage.cache_read_input_tokens,
        "warm_ram_cached": ram.usage.cache_read_input_tokens,
        "speedup_slot": round(cold_s / warm_s, 1),
        "speedup_ram": round(cold_s / ram_s, 1),
        "prompt_tok_s": round(cold.usage.input_tokens / max(cold_s, 1e-9), 1),
    }


async def main(spec: str) -> dict[str, Any]:
    model = local_model_for(spec.partition(":")[2])
    started = time.perf_counter()
    await asyncio.to_thread(model.engine)
    figures: dict[str, Any] = {
        "model": model.name,
        "load_s": round(time.perf_counter() - started, 2),
    }
    figures.update(await generation_speed(model))
    with tempfile.TemporaryDirectory() as folder:
        figures["agent_steps"] = await agent_loop(model, Path(folder))
    figures["fork"] = await fork_speedup(model)
    figures["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
    return figures


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="local", help="local (default) or local:smollm2")
    result = asyncio.run(main(parser.parse_args().model))
    print(json.dumps(result, indent=2))
