"""A session outlives its event loop and loses no write (docs/durability.md, "A session that
outlives its loop").

A library user may run one held ``Session`` across two ``asyncio.run`` calls. The first loop can
close with a record write still on its way: a commit round on the writer thread whose end (the
renames that publish it) was to come back to that loop, or a hand-over callback it never ran.
The next loop must carry those writes on, and the session's ``close`` there must drain them:
every child's record ends on disk, read back by a fresh reader, and no temp file is left.
"""

from __future__ import annotations

import asyncio
import json
import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from subagents import Session, SessionOptions
from subagents.state import ProjectState
from subagents.store import FileStore, atomic
from subagents.store import pipeline as pipeline_module
from subagents.store.durable import DurableRecords
from subagents.store.writer import DurableWriter
from subagents.testing import ScriptedModel
from subagents.testing.store_conformance import make_record

SHM = Path("/dev/shm")


@pytest.fixture(params=["disk", "tmpfs"])
def folder(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Path]:
    """State on an ordinary disk folder (commits go through the writer thread's sync rounds)
    or on tmpfs (commits take no thread: ``needs_sync`` is False there)."""
    if request.param == "disk":
        if not atomic.needs_sync(os.stat(tmp_path).st_dev):
            pytest.skip("the test folder is on a RAM file system")
        yield tmp_path
        return
    if not SHM.is_dir() or atomic.needs_sync(os.stat(SHM).st_dev):
        pytest.skip("no tmpfs at /dev/shm")
    root = SHM / f"subagents-outlives-{uuid.uuid4().hex[:12]}"
    root.mkdir()
    try:
        yield root
    finally:
        import shutil

        shutil.rmtree(root, ignore_errors=True)


def _background(job: str) -> dict[str, Any]:
    return {
        "name": "Agent",
        "input": {
            "description": job,
            "prompt": job,
            "subagent_type": "general-purpose",
            "run_in_background": True,
        },
    }


def _script() -> dict[str, Any]:
    main_turns = [
        {"tool_calls": [_background("job one")]},
        {"text": "first turn done"},
        {"tool_calls": [_background("job two")]},
        {"text": "second turn done"},
    ]
    return {
        "agents": [
            {"agent_type": "main", "turns": main_turns},
            # Still running when the first loop ends: asyncio.run cancels it, and its records
            # (running, then killed) are in flight as that loop closes.
            {
                "agent_type": "general-purpose",
                "match": "job one",
                "turns": [{"text": "one", "delay_ms": 400}],
            },
            {"agent_type": "general-purpose", "match": "job two", "turns": [{"text": "two"}]},
        ]
    }


def _records_on_disk(home: Path) -> list[tuple[str, str]]:
    found = []
    for path in home.rglob("agents/*.json"):
        record = json.loads(path.read_text())
        found.append((record["status"], record["agentType"]))
    return sorted(found)


def _temp_files(home: Path) -> list[str]:
    return sorted(p.name for p in home.rglob("agents/.*.tmp"))


@pytest.mark.parametrize("eventfd", [True, False], ids=["eventfd", "call_soon_threadsafe"])
def test_a_held_session_across_two_asyncio_runs_loses_no_record(
    folder: Path, eventfd: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not eventfd:  # a round's end comes back through call_soon_threadsafe, as off Linux
        monkeypatch.setattr(pipeline_module, "_eventfd_notify", lambda: None)
    home = folder / "home"
    options = SessionOptions(model=ScriptedModel.from_dict(_script()), cwd=folder, home=home)
    session = Session(options).hold()

    async def first() -> str:
        result = await asyncio.wait_for(session.run("go"), timeout=30)
        return result.result

    async def second() -> str:
        result = await asyncio.wait_for(session.run("again"), timeout=30)
        await asyncio.wait_for(session.close(), timeout=30)
        return result.result

    assert asyncio.run(first()) == "first turn done"
    assert asyncio.run(second()) == "second turn done"
    assert _records_on_disk(home) == [
        ("completed", "general-purpose"),
        ("killed", "general-purpose"),
    ]
    assert _temp_files(home) == []
    # A fresh reader of the project sees both children, the killed one terminal too.
    store = FileStore(ProjectState(home=home, project=folder))
    agents = store.list_agents(str(folder.resolve()))
    assert sorted(a.status for a in agents) == ["completed", "killed"]


def test_writes_queued_on_a_loop_that_closed_before_handing_them_over(folder: Path) -> None:
    """``loop.run_until_complete`` stops after the iteration its coroutine's end is seen in: a
    write queued by a callback in that iteration leaves its hand-over callback unrun when the
    loop closes. The next loop's writes must not wait behind that dead callback (they hung
    there, as the hand-over looked already scheduled), and both records reach the disk."""
    project = str(folder / "project")
    store = FileStore(ProjectState(home=folder / "home", project=Path(project)))
    writer = DurableWriter(name="test-outlives")
    durable = DurableRecords(
        store=store, writer=writer, session_id="session-1", project_path=project
    )

    async def queue_one() -> None:
        # Runs in the loop's last iteration, after which nothing scheduled runs.
        asyncio.get_running_loop().call_soon(
            lambda: durable.started(make_record("a00000001", project_path=project))
        )

    async def write_more() -> None:
        await asyncio.wait_for(
            durable.started(make_record("a00000002", project_path=project)), timeout=10
        )
        await asyncio.wait_for(durable.drain(), timeout=10)

    loop = asyncio.new_event_loop()
    try:
        loop.run_until_complete(queue_one())
    finally:
        loop.close()
    try:
        asyncio.run(write_more())
    finally:
        durable.close()
        writer.close()
    fresh = FileStore(ProjectState(home=folder / "home", project=Path(project)))
    assert [r.status if r else None for r in map(fresh.get, ["a00000001", "a00000002"])] == [
        "running",
        "running",
    ]
    assert _temp_files(folder / "home") == []


def test_a_held_session_run_again_honours_stop_requests(tmp_path: Path) -> None:
    """The stop-request poller (and the owner's heartbeat beside it) ended with the first
    loop; a held session's next turn on a new loop starts it again there, so ``subagents tasks
    stop`` from another process still stops a child launched in that turn."""
    script = {
        "agents": [
            {
                "agent_type": "main",
                "turns": [
                    {"text": "first turn done"},
                    {"tool_calls": [_background("slow job")]},
                    {"text": "launched"},
                ],
            },
            {
                "agent_type": "general-purpose",
                "match": "slow job",
                "turns": [{"text": "finished", "delay_ms": 20_000}],
            },
        ]
    }
    home = tmp_path / "home"
    options = SessionOptions(model=ScriptedModel.from_dict(script), cwd=tmp_path, home=home)
    session = Session(options).hold()
    other = FileStore(ProjectState(home=home, project=tmp_path))  # as another process reads
    project = str(tmp_path.resolve())

    async def first() -> str:
        return (await asyncio.wait_for(session.run("go"), timeout=30)).result

    async def second() -> str | None:
        result = await asyncio.wait_for(session.run("again"), timeout=30)
        assert result.result == "launched"
        running: list[str] = []
        for _ in range(200):  # the running record is published by the writer's next round
            running = [a.agent_id for a in other.list_agents(project) if a.status == "running"]
            if running:
                break
            await asyncio.sleep(0.05)
        (child,) = running
        other.request_stop(child)
        status = None
        for _ in range(200):  # the poller looks every 0.5 s; the child would run 20 s
            await asyncio.sleep(0.05)
            record = other.get(child)
            status = record.status if record else None
            if status != "running":
                break
        await asyncio.wait_for(session.close(), timeout=30)
        return status

    assert asyncio.run(first()) == "first turn done"
    assert asyncio.run(second()) == "killed"
