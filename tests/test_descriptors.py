"""Many children at once stay within a small file-descriptor limit.

Each running child has a transcript and durable sidecar writes; holding a descriptor per child
would make a fan-out of a few hundred background children fail with ``EMFILE`` under the common
soft limit of 1,024. The run below happens in a subprocess whose limit is 150 (soft and hard, so
nothing can raise it), with 200 background children alive at the same time.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

CHILDREN = 200
LIMIT = 150

PRELUDE = textwrap.dedent(
    """
    import asyncio, json, resource, sys
    from pathlib import Path
    resource.setrlimit(resource.RLIMIT_NOFILE, (FD_LIMIT, FD_LIMIT))
    from subagents.config import RuntimeConfig
    from subagents.session import Session, SessionOptions
    from subagents.testing import ScriptedModel

    folder, children = Path(sys.argv[1]), int(sys.argv[2])
    calls = [
        {"name": "Agent", "input": {"description": f"job {i}", "prompt": f"job {i}",
         "subagent_type": "general-purpose", "run_in_background": True}}
        for i in range(children)
    ]
    """
)
"""Lower the descriptor limit, then start ``children`` background children from main."""

PROGRAM = PRELUDE + textwrap.dedent(
    """
    script = {"agents": [
        {"agent_type": "main",
         "turns": [{"tool_calls": calls}] + [{"text": "ok"}] * (children * 3)},
        {"agent_type": "general-purpose", "turns": [
            {"tool_calls": [{"name": "Glob", "input": {"pattern": "*.txt"}}], "delay_ms": 300},
            {"text": "done", "delay_ms": 100},
        ]},
    ]}
    session = Session(SessionOptions(
        model=ScriptedModel.from_dict(script), cwd=folder, home=folder / "home",
        background_wait_ms=30000,
        config=RuntimeConfig(max_concurrent_subagents=children + 10, tool_concurrency=children),
    ))
    result = asyncio.run(session.run("go"))
    children_done = [r for r in result.agents[1:] if r.status == "completed"]
    print(json.dumps({"subtype": result.subtype, "completed": len(children_done)}))
    """
)


def test_two_hundred_background_children_within_150_descriptors(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("x")
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            PROGRAM.replace("FD_LIMIT", str(LIMIT)),
            str(tmp_path),
            str(CHILDREN),
        ],
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    outcome = json.loads(proc.stdout.strip().splitlines()[-1])
    assert outcome == {"subtype": "success", "completed": CHILDREN}, proc.stderr[-3000:]
    sidecars = list((tmp_path / "home").rglob("agents/*.json"))
    statuses = {json.loads(p.read_text())["status"] for p in sidecars}
    assert len(sidecars) == CHILDREN and statuses == {"completed"}
    assert "Too many open files" not in proc.stderr


def test_the_cli_lifts_the_soft_open_file_limit_for_its_shells(tmp_path: Path) -> None:
    """Started under a soft limit of 256 (hard 4,096), the command's Bash sees the hard one."""
    import os
    import resource

    from cli_helpers import recorded, write_script

    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 4096:
        import pytest

        pytest.skip(f"hard open-file limit {hard} is below 4096")
    script = write_script(
        tmp_path,
        [
            {
                "agent_type": "main",
                "turns": [
                    {"tool_calls": [{"name": "Bash", "input": {"command": "ulimit -n"}}]},
                    {"text": "checked"},
                ],
            }
        ],
    )

    def limited() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (256, 4096))

    proc = subprocess.run(
        [
            *(sys.executable, "-m", "subagents", "-p", "go", "--model", f"scripted:{script}"),
            *("--permission-mode", "bypassPermissions"),
        ],
        cwd=tmp_path,
        env={**os.environ, "SUBAGENTS_HOME": str(tmp_path / "home")},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        preexec_fn=limited,
    )
    assert proc.returncode == 0, proc.stderr
    results = [
        block
        for request in recorded(tmp_path)
        for message in request["messages"]
        if isinstance(message["content"], list)
        for block in message["content"]
        if block.get("type") == "tool_result"
    ]
    assert results and "4096" in json.dumps(results[-1]["content"])


TOOL_PROGRAM = PRELUDE + textwrap.dedent(
    """
    child_calls = [
        {"name": "Bash", "input": {"command": "sleep 0.2; echo shell-ok"}},
        {"name": "Grep", "input": {"pattern": "needle", "path": "src"}},
    ]
    script = {"agents": [
        {"agent_type": "main",
         "turns": [{"tool_calls": calls}] + [{"text": "ok"}] * (children * 3)},
        {"agent_type": "general-purpose", "turns": [
            {"tool_calls": child_calls, "delay_ms": 100},
            {"text": "done: {{tool_results}}"},
        ]},
    ]}
    session = Session(SessionOptions(
        model=ScriptedModel.from_dict(script), cwd=folder, home=folder / "home",
        background_wait_ms=120000, permission_mode="bypassPermissions",
        config=RuntimeConfig(max_concurrent_subagents=children + 10, tool_concurrency=children),
    ))
    result = asyncio.run(session.run("go"))
    texts = [r.result_text or "" for r in result.agents[1:]]
    print(json.dumps({
        "completed": sum(r.status == "completed" for r in result.agents[1:]),
        "shell_ok": sum("shell-ok" in t for t in texts),
        "grep_ok": sum("src/a.txt" in t for t in texts),
        "emfile": sum("Too many open files" in t for t in texts),
    }))
    """
)


def test_many_children_running_tools_wait_for_descriptors_instead_of_failing(
    tmp_path: Path,
) -> None:
    """Issue 13 item 10: 120 children each run Bash (and Grep, which starts rg) and a PreToolUse
    hook under a 200-descriptor limit; every call waits for a process slot, none fails."""
    children, limit = 120, 200
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "a.txt").write_text("needle\n")
    hook = {"hooks": [{"type": "command", "command": "cat > /dev/null; exit 0"}]}
    (tmp_path / ".claude").mkdir()
    (tmp_path / ".claude" / "settings.json").write_text(
        json.dumps({"hooks": {"PreToolUse": [dict(hook, matcher="Bash")]}})
    )
    program = TOOL_PROGRAM.replace("FD_LIMIT", str(limit))
    proc = subprocess.run(
        [sys.executable, "-c", program, str(tmp_path), str(children)],
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    outcome = json.loads(proc.stdout.strip().splitlines()[-1])
    assert outcome == {
        "completed": children,
        "shell_ok": children,
        "grep_ok": children,
        "emfile": 0,
    }, proc.stderr[-3000:]


def _open_temp_files() -> int:
    import os

    count = 0
    for name in os.listdir("/proc/self/fd"):
        try:
            count += os.readlink(f"/proc/self/fd/{name}").endswith(".tmp")
        except OSError:
            pass
    return count


def test_records_waiting_for_a_slow_sync_round_share_one_descriptor(
    tmp_path: Path, monkeypatch: Any
) -> None:
    """While a sync round is slow (a busy disk, a loaded machine), each loop iteration that
    stages a record write makes a commit of its own; they wait for the next round, and each
    kept its temp file open until then — 58 at once among the 200 children above, which under
    load took the run past its 150 descriptors. One open descriptor per file system serves the
    round's ``syncfs``; the others are closed as the commits wait."""
    import asyncio
    import os
    import threading

    from subagents.state import ProjectState
    from subagents.store import FileStore, atomic
    from subagents.store import pipeline as pipeline_module
    from subagents.store.durable import DurableRecords
    from subagents.store.writer import DurableWriter
    from subagents.testing.store_conformance import make_record

    if not atomic.needs_sync(os.stat(tmp_path).st_dev):
        import pytest

        pytest.skip("the test folder is on a RAM file system: commits take no sync round")
    gate, real = threading.Event(), pipeline_module.sync_round

    def slow_round(*commits: Any) -> None:
        gate.wait(timeout=30)
        real(*commits)

    monkeypatch.setattr(pipeline_module, "sync_round", slow_round)
    project = "/srv/descriptor-project"
    store = FileStore(ProjectState(home=tmp_path / "home", project=Path(project)))
    writer = DurableWriter(name="test-descriptors")
    durable = DurableRecords(
        store=store, writer=writer, session_id="session-1", project_path=project
    )
    ids = [f"a{i:08d}" for i in range(30)]

    async def run() -> int:
        first = durable.started(make_record("a99999999", project_path=project))
        await asyncio.sleep(0)  # its round starts, and waits for the gate
        starts = []
        for agent_id in ids:  # one commit per loop iteration, all waiting for the next round
            starts.append(durable.started(make_record(agent_id, project_path=project)))
            await asyncio.sleep(0)
        waiting = _open_temp_files()
        gate.set()
        await asyncio.wait_for(asyncio.gather(first, *starts), timeout=30)
        await durable.drain()
        return waiting

    try:
        waiting = asyncio.run(run())
    finally:
        gate.set()
        durable.close()
        writer.close()
    assert waiting <= 2, waiting  # the round's own commit's and one for the thirty waiting
    assert _open_temp_files() == 0
    assert all(store.get(agent_id).status == "running" for agent_id in ids)  # type: ignore[union-attr]


@pytest.mark.parametrize("soft", [200, 256, 1024, 4096])
def test_the_transcripts_and_the_process_slots_fit_in_the_limit(
    soft: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The process slots are what the limit leaves beside the transcripts' budget and the
    reserve. They were counted beside a quarter of the limit, while under 256 the transcripts
    keep their minimum of 64 open: at 200, 64 + 10 slots x 8 + 64 = 208 descriptors."""
    import resource

    from subagents import descriptors
    from subagents.store import transcript

    def budgets() -> tuple[int, int]:
        transcript.max_open_transcripts.cache_clear()
        descriptors.max_processes.cache_clear()
        return transcript.max_open_transcripts(), descriptors.max_processes()

    monkeypatch.setattr(resource, "getrlimit", lambda _: (soft, soft))
    try:
        transcripts, slots = budgets()
    finally:
        monkeypatch.undo()
        budgets()  # the real limit's again, for the rest of this process
    assert transcripts + slots * descriptors.PROCESS_COST + descriptors.RESERVE <= soft
    assert transcripts == max(64, soft // 4) and slots >= descriptors.MIN_SLOTS
