"""``run_agent`` reads the frame's fields once (not through ``AgentJob``'s forwarding
properties): every agent's loop — the main one, foreground and background children — still
gets its own frame's objects (system prompt, tools, schemas, live history, thinking, counters)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from cli_helpers import agent_call
from subagents.agents import agent_run
from subagents.agents.agent_run import AgentFrame
from subagents.loop.query import LoopOutcome, LoopSpec
from subagents.session import Session, SessionOptions
from subagents.testing import ScriptedModel


async def test_each_loop_gets_its_frames_objects(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    specs: list[LoopSpec] = []
    real = agent_run.run_loop

    async def capture(spec: LoopSpec) -> LoopOutcome:
        specs.append(spec)
        return await real(spec)

    monkeypatch.setattr(agent_run, "run_loop", capture)
    launches = [
        agent_call("fg job", "Explore", description="fg"),
        agent_call("bg job", "general-purpose", description="bg", run_in_background=True),
    ]
    script: dict[str, Any] = {
        "agents": [
            {"agent_type": "main", "turns": [{"tool_calls": launches}, *[{"text": "ok"}] * 3]},
            {"agent_type": "Explore", "turns": [{"text": "explored"}]},
            {"agent_type": "general-purpose", "turns": [{"text": "done"}]},
        ]
    }
    session = Session(
        SessionOptions(model=ScriptedModel.from_dict(script), cwd=tmp_path, home=tmp_path / "h")
    )
    await session.run("go")
    assert len(specs) == 3
    for spec in specs:
        frame = spec.ctx.owner
        assert isinstance(frame, AgentFrame)
        assert spec.system is frame.system and spec.tools is frame.tools
        assert spec.messages is frame.messages is frame.run.messages
        assert spec.tool_schemas is frame.tool_schemas and spec.thinking is frame.thinking
        assert spec.stats is frame.run.stats and spec.prompt == frame.run.prompt
        assert spec.team_name is None and spec.member_name is None
