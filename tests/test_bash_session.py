"""The Bash tool as a session runs it: a scripted main agent calling Bash, both ways a shell is
run (the ``way`` fixture: ``start_piped`` and a pidfd, or asyncio's subprocesses).

What the model gets back is read from the requests it received (the tool results), and the
processes a command started are looked for in ``/proc`` afterwards: none may be left.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from pathlib import Path
from typing import Any

from subagents import ScriptedModel, Session, SessionOptions


def is_gone(pid: int, within_s: float = 5.0) -> bool:
    """No process ``pid``, not even a zombie."""
    deadline = time.monotonic() + within_s
    while Path(f"/proc/{pid}").exists():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def make_session(tmp_path: Path, commands: list[str]) -> tuple[Session, ScriptedModel]:
    turns: list[dict[str, Any]] = [
        {"tool_calls": [{"name": "Bash", "input": {"command": command}}]} for command in commands
    ]
    turns.append({"text": "done"})
    model = ScriptedModel.from_dict({"agents": [{"agent_type": "main", "turns": turns}]})
    session = Session(
        SessionOptions(
            model=model,
            cwd=tmp_path,
            home=tmp_path / "home",
            permission_mode="bypassPermissions",
        )
    )
    return session, model


def tool_results(model: ScriptedModel) -> list[str]:
    """The text of every tool result the model was sent, in order."""
    last = model.requests[-1]
    texts = []
    for message in last["messages"]:
        if isinstance(message["content"], list):
            for block in message["content"]:
                if block.get("type") == "tool_result":
                    content = block["content"]
                    texts.append(content if isinstance(content, str) else json.dumps(content))
    return texts


async def test_a_session_gets_each_commands_output_and_exit_and_nothing_outlives_it(
    way: str, tmp_path: Path
) -> None:
    (tmp_path / ".claude").mkdir()
    (tmp_path / ".claude" / "settings.json").write_text(json.dumps({"env": {"PROBE": "v7"}}))
    leftover = tmp_path / "leftover.pid"
    session, model = make_session(
        tmp_path,
        [
            "echo one; echo two >&2; echo three",  # one pipe: the order they were written
            f"sleep 1000 >/dev/null 2>&1 & echo $! > {leftover}; echo bye; exit 3",
            "kill -TERM $$",
            'cat; echo "$PROBE in $(pwd)"',  # stdin closed; settings env; the project folder
            "seq 1 20000",
        ],
    )
    result = await session.run("go")
    assert result.result == "done"
    first, second, third, fourth, fifth = tool_results(model)
    assert first == "one\ntwo\nthree"
    assert second == "bye\nExit code 3"
    assert third == "Exit code 143"  # 128 + SIGTERM
    assert fourth == f"v7 in {tmp_path.resolve()}"
    # The tool keeps a head and a tail (the session's result cap may cut the tail's end).
    assert fifth.startswith("1\n2\n3\n") and "\n19990\n" in fifth
    assert "characters of output omitted ...]" in fifth
    assert is_gone(int(leftover.read_text()))


async def test_a_cancelled_session_leaves_no_process_of_its_command(
    way: str, tmp_path: Path
) -> None:
    shell_pid, child_pid = tmp_path / "shell.pid", tmp_path / "child.pid"
    session, _ = make_session(
        tmp_path, [f"echo $$ > {shell_pid}; sleep 1000 & echo $! > {child_pid}; sleep 1000"]
    )
    run = asyncio.create_task(session.run("go"))
    deadline = time.monotonic() + 30
    while not (child_pid.exists() and child_pid.read_text().strip()):
        assert time.monotonic() < deadline, "the command never started"
        assert not run.done(), run
        await asyncio.sleep(0.02)
    run.cancel()
    try:
        await run
    except asyncio.CancelledError:
        pass
    for path in (child_pid, shell_pid):
        pid = int(path.read_text())
        assert is_gone(pid), f"{path.name}: {pid} still exists"
        assert not os.path.exists(f"/proc/{pid}")


async def test_a_background_command_notifies_the_session_and_leaves_nothing(
    way: str, tmp_path: Path
) -> None:
    leftover, ended = tmp_path / "leftover.pid", tmp_path / "ended"
    command = (
        f"sleep 1000 >/dev/null & echo $! > {leftover}; echo bg-out; echo bg-err >&2; "
        f"touch {ended}; exit 2"
    )
    # The agent's next call outlasts the command, so its notification rides with that result.
    meanwhile = f"while [ ! -e {ended} ]; do sleep 0.05; done; sleep 1"
    turns: list[dict[str, Any]] = [
        {
            "tool_calls": [
                {"name": "Bash", "input": {"command": command, "run_in_background": True}}
            ]
        },
        {"tool_calls": [{"name": "Bash", "input": {"command": meanwhile}}]},
        {"text": "done"},
    ]
    model = ScriptedModel.from_dict({"agents": [{"agent_type": "main", "turns": turns}]})
    session = Session(
        SessionOptions(
            model=model,
            cwd=tmp_path,
            home=tmp_path / "home",
            permission_mode="bypassPermissions",
        )
    )
    result = await session.run("go")
    assert result.subtype == "success", result.payload
    woke = json.dumps([r["messages"][-1] for r in model.requests])
    assert "<task-notification>" in woke and "<status>failed</status>" in woke
    assert "<exit-code>2</exit-code>" in woke
    assert "bg-out\\nbg-err" in woke  # one output file, in the order written
    assert is_gone(int(leftover.read_text()))
