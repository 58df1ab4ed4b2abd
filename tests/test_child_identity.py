"""A running ``Child`` keeps its job's run and id as plain attributes (``__post_init__``), and
reads its placement from the run each time: through a session, each launched child's are its
job's, and a move to the background shows at once."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from cli_helpers import agent_call
from subagents.agents.child_state import Child
from subagents.agents.children import Children
from subagents.session import Session, SessionOptions
from subagents.testing import ScriptedModel


async def test_a_childs_run_and_id_are_its_jobs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    launched: list[Child] = []
    real = Children.start

    def capture(self: Children, *args: Any, **kwargs: Any) -> Child:
        child = real(self, *args, **kwargs)
        launched.append(child)
        return child

    monkeypatch.setattr(Children, "start", capture)
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
    assert sorted(child.run.description for child in launched) == ["bg", "fg"]
    for child in launched:
        assert child.run is child.job.run is child.job.frame.run
        assert child.agent_id == child.job.run.agent_id == child.job.run.ref.agent_id
        assert child.background == child.run.is_background == (child.run.description == "bg")
    foreground = next(child for child in launched if not child.background)
    foreground.job.run.is_background = True  # what ``move_to_background`` sets
    assert foreground.background
