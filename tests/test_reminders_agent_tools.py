"""``reminders_for`` tells an agent that holds the Agent tool (or its alias) by one set
operation: compared with the plain ``any`` over the names, for random tool lists, and the
catalog feed it makes keeps every name."""

from __future__ import annotations

import random
from pathlib import Path

from subagents.agents.reminders import AGENT_TOOL_NAMES, reminders_for
from subagents.session import Session, SessionOptions
from subagents.testing import ScriptedModel

NAMES = ["Read", "Write", "Bash", "Agent", "Task", "agent", "Tasks", "Glob", "TaskOutput", ""]


def test_an_agent_tool_is_found_as_the_plain_any_finds_it(tmp_path: Path) -> None:
    model = ScriptedModel.from_dict({"agents": [{"agent_type": "main", "turns": [{"text": "x"}]}]})
    session = Session(SessionOptions(model=model, cwd=tmp_path, home=tmp_path / "home"))
    runtime = session.runtime
    rng = random.Random(7)
    for _ in range(300):
        names = [rng.choice(NAMES) for _ in range(rng.randrange(0, 8))]
        plain = any(name in AGENT_TOOL_NAMES for name in names)
        reminders = reminders_for(runtime, None, names)
        assert (reminders is not None) is plain, names
        if reminders is not None:
            assert reminders.catalog is not None
            assert reminders.catalog.caller_tools == tuple(names)
