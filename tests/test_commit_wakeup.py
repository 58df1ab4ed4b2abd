"""A commit round comes back to the loop through its pipeline's own wake-up descriptor.

The writer thread used to end each sync round with ``loop.call_soon_threadsafe``, whose wake-up
``send`` releases the GIL, so the thread had to take it back from the busy loop only to go back
to sleep. The pipeline now owns an ``eventfd`` it writes with the GIL held and a reader of its
loop's (``store/pipeline.py``). What must hold: no round goes through ``call_soon_threadsafe``;
a session after another one's loop closed still completes its rounds (a wake-up keyed by the
loop's ``id`` hung there, as a new loop took the old one's id); no descriptor is left behind
across sessions; a failed sync still fails its commits; where there is no ``eventfd`` the old
way still works.
"""

from __future__ import annotations

import asyncio
import gc
import os
import threading
from collections.abc import Callable
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

PROJECT = "/srv/wakeup-project"
CHILDREN = 3


def _on_a_disk(folder: Path) -> None:
    if not atomic.needs_sync(os.stat(folder).st_dev):
        pytest.skip("the test folder is on a RAM file system: commits take no sync round")


def _eventfds() -> int:
    count = 0
    for name in os.listdir("/proc/self/fd"):
        try:
            count += os.readlink(f"/proc/self/fd/{name}") == "anon_inode:[eventfd]"
        except OSError:
            pass  # the listing's own descriptor, closed by now
    return count


def _descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))


def _fanout_script() -> dict[str, Any]:
    calls = [
        {
            "name": "Agent",
            "input": {
                "description": f"job {i}",
                "prompt": f"job {i}",
                "subagent_type": "general-purpose",
            },
        }
        for i in range(CHILDREN)
    ]
    return {
        "agents": [
            {"agent_type": "main", "turns": [{"tool_calls": calls}, {"text": "all done"}]},
            {"agent_type": "general-purpose", "turns": [{"text": "done"}]},
        ]
    }


async def _session(folder: Path) -> list[str]:
    options = SessionOptions(
        model=ScriptedModel.from_dict(_fanout_script()), cwd=folder, home=folder / "home"
    )
    result = await asyncio.wait_for(Session(options).run("go"), timeout=60)
    assert not result.is_error, result.result
    return [agent.status for agent in result.agents[1:]]


def _statuses_on_disk(home: Path) -> list[str]:
    import json

    return sorted(json.loads(p.read_text())["status"] for p in home.rglob("agents/*.json"))


class _CountingLoop(asyncio.SelectorEventLoop):
    """Records which threads call ``call_soon_threadsafe``."""

    callers: list[str]

    def call_soon_threadsafe(  # type: ignore[override]
        self, callback: Callable[..., object], *args: Any, context: Any = None
    ) -> asyncio.Handle:
        name = getattr(callback, "__qualname__", repr(callback))
        self.callers.append(f"{threading.current_thread().name}: {name}")
        return super().call_soon_threadsafe(callback, *args, context=context)


def test_a_sessions_commit_rounds_end_without_call_soon_threadsafe(tmp_path: Path) -> None:
    _on_a_disk(tmp_path)
    loops: list[_CountingLoop] = []

    def factory() -> _CountingLoop:
        loop = _CountingLoop()
        loop.callers = []
        loops.append(loop)
        return loop

    with asyncio.Runner(loop_factory=factory) as runner:
        statuses = runner.run(_session(tmp_path))
    assert statuses == ["completed"] * CHILDREN
    assert _statuses_on_disk(tmp_path / "home") == ["completed"] * CHILDREN
    # (A drain that finds the writer's last future pending is woken through
    # call_soon_threadsafe by asyncio.wrap_future: not a round, and rare.)
    rounds = [call for call in loops[0].callers if call.endswith("CommitPipeline._end_round")]
    assert rounds == []


def test_sessions_one_after_another_complete_and_leave_no_descriptor(tmp_path: Path) -> None:
    """Each session runs on a loop of its own (``asyncio.run``); the loops come and go, and
    a new one often takes a closed one's id (the case that hung a wake-up keyed by it)."""
    _on_a_disk(tmp_path)
    asyncio.run(_session(tmp_path / "warm"))  # (the first session opens what stays open)
    gc.collect()
    before, eventfds = _descriptors(), _eventfds()
    for i in range(12):
        folder = tmp_path / f"s{i}"
        folder.mkdir()
        assert asyncio.run(_session(folder)) == ["completed"] * CHILDREN
        assert _statuses_on_disk(folder / "home") == ["completed"] * CHILDREN
        assert _eventfds() == eventfds
    gc.collect()
    assert _descriptors() == before


def _records(store: FileStore, writer: DurableWriter) -> DurableRecords:
    return DurableRecords(store=store, writer=writer, session_id="session-1", project_path=PROJECT)


async def _child(durable: DurableRecords, agent_id: str) -> None:
    await durable.started(make_record(agent_id, project_path=PROJECT))
    await durable.finished(agent_id, status="completed")
    await asyncio.wait_for(durable.drain(), timeout=20)


def test_one_session_s_records_on_a_second_loop_after_the_first_closed(tmp_path: Path) -> None:
    _on_a_disk(tmp_path)
    store = FileStore(ProjectState(home=tmp_path / "home", project=Path(PROJECT)))
    writer = DurableWriter(name="test-wakeup")
    durable = _records(store, writer)
    eventfds = _eventfds()
    try:
        for i in range(6):  # each asyncio.run a new loop; the pipeline of the last one is left
            asyncio.run(_child(durable, f"a0000000{i}"))
            gc.collect()
            assert _eventfds() <= eventfds + 1
    finally:
        durable.close()
        writer.close()
    assert _eventfds() == eventfds
    statuses = [store.get(f"a0000000{i}") for i in range(6)]
    assert [s.status if s else None for s in statuses] == ["completed"] * 6


def test_a_failed_sync_fails_its_commits_through_the_wakeup(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _on_a_disk(tmp_path)

    def failing(*_: object) -> None:
        raise OSError(5, "injected write-back failure")

    monkeypatch.setattr(pipeline_module, "sync_round", failing)
    store = FileStore(ProjectState(home=tmp_path / "home", project=Path(PROJECT)))
    writer = DurableWriter(name="test-wakeup-fail")
    durable = _records(store, writer)

    async def run() -> BaseException | None:
        started = durable.started(make_record("a00000001", project_path=PROJECT))
        await asyncio.wait_for(durable.drain(), timeout=20)
        return started.exception()

    try:
        error = asyncio.run(run())
    finally:
        durable.close()
        writer.close()
    assert isinstance(error, OSError) and "injected" in str(error)
    assert store.get("a00000001") is None  # nothing unsynced was renamed into place


@pytest.mark.parametrize("eventfd", [True, False], ids=["eventfd", "call_soon_threadsafe"])
def test_rounds_keep_their_order_with_and_without_the_eventfd(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, eventfd: bool
) -> None:
    _on_a_disk(tmp_path)
    if not eventfd:
        monkeypatch.setattr(pipeline_module, "_eventfd_notify", lambda: None)
    store = FileStore(ProjectState(home=tmp_path / "home", project=Path(PROJECT)))
    writer = DurableWriter(name="test-wakeup-order")
    durable = _records(store, writer)
    seen: list[str] = []

    async def run() -> None:
        ids = [f"a0000001{i}" for i in range(5)]
        for agent_id in ids:  # five starts in one iteration, then their ends while they sync
            durable.started(make_record(agent_id, project_path=PROJECT))
        await asyncio.sleep(0)
        ends = [durable.finished(agent_id, status="completed") for agent_id in ids]
        for agent_id, end in zip(ids, ends, strict=True):
            end.add_done_callback(lambda _, agent_id=agent_id: seen.append(agent_id))
        await asyncio.wait_for(asyncio.gather(*ends), timeout=20)
        await durable.drain()

    try:
        asyncio.run(run())
    finally:
        durable.close()
        writer.close()
    assert seen == [f"a0000001{i}" for i in range(5)]
    assert all(store.get(f"a0000001{i}").status == "completed" for i in range(5))  # type: ignore[union-attr]


def test_a_round_of_renames_only_syncs_their_folder_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Three commits renamed in one round and nothing staged with them (no descriptor left for
    a ``syncfs``): one directory ``fsync`` for the three, not one per commit."""
    _on_a_disk(tmp_path)
    gate, real = threading.Event(), pipeline_module.sync_round
    folder_syncs: list[str] = []
    real_fsync_dir = atomic.fsync_dir

    def gated(*commits: Any) -> None:
        gate.wait(timeout=30)
        real(*commits)

    def counted(path: str | Path) -> None:
        folder_syncs.append(str(path))
        real_fsync_dir(path)

    monkeypatch.setattr(pipeline_module, "sync_round", gated)
    monkeypatch.setattr(atomic, "fsync_dir", counted)
    store = FileStore(ProjectState(home=tmp_path / "home", project=Path(PROJECT)))
    writer = DurableWriter(name="test-wakeup-renames")
    durable = _records(store, writer)
    ids = ["a00000021", "a00000022", "a00000023"]

    async def run() -> None:
        first = durable.started(make_record(ids[0], project_path=PROJECT))
        await asyncio.sleep(0)  # round 1 (its data) waits for the gate
        later = []
        for agent_id in ids[1:]:  # two commits of their own, waiting for round 2
            later.append(durable.started(make_record(agent_id, project_path=PROJECT)))
            await asyncio.sleep(0)
        gate.set()  # round 2: the two's data and the first's rename; round 3: the two's renames
        await asyncio.wait_for(asyncio.gather(first, *later), timeout=30)
        await durable.drain()

    try:
        asyncio.run(run())
    finally:
        gate.set()
        durable.close()
        writer.close()
    assert [s.status if s else None for s in map(store.get, ids)] == ["running"] * 3
    agents = str(store.sidecar_path(ids[0]).parent)  # type: ignore[union-attr]
    assert folder_syncs.count(agents) == 1, folder_syncs


def test_a_forked_process_closing_its_copy_leaves_the_parents_wakeup(tmp_path: Path) -> None:
    """The loop's epoll instance is shared across ``fork``: a child that closed the records it
    inherited must not unregister the parent's wake-up, or the parent's next round would never
    come back to its loop."""
    _on_a_disk(tmp_path)
    store = FileStore(ProjectState(home=tmp_path / "home", project=Path(PROJECT)))
    writer = DurableWriter(name="test-wakeup-fork")
    durable = _records(store, writer)
    loop = asyncio.new_event_loop()
    try:
        loop.run_until_complete(_child(durable, "a00000031"))
        pid = os.fork()
        if pid == 0:  # the child: close what it inherited, and leave at once
            try:
                durable.close()
            finally:
                os._exit(0)
        os.waitpid(pid, 0)
        second = asyncio.wait_for(_child(durable, "a00000032"), timeout=20)
        loop.run_until_complete(second)  # times out if the child unregistered it
    finally:
        durable.close()
        writer.close()
        loop.close()
    assert [store.get(i).status for i in ("a00000031", "a00000032")] == ["completed"] * 2  # type: ignore[union-attr]
