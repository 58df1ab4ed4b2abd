"""The task registry: state machine, ids, safe output files, eviction, per-type kill dispatch."""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

import pytest

from subagents import ids
from subagents.agents.tasks import (
    TERMINAL_STATUSES,
    KillFn,
    TaskOutputError,
    TaskRegistry,
    TaskState,
    TaskStatus,
    TaskType,
    UnknownTaskError,
    is_terminal,
    open_output_file,
)

ALL_TYPES: list[TaskType] = [
    "local_bash",
    "local_agent",
    "remote_agent",
    "in_process_teammate",
    "local_workflow",
    "monitor",
    "dream",
]


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def status_of(task: TaskState) -> str:
    """The status, read through a call so the type checker does not keep an earlier narrowing."""
    return task.status


def new_task(registry: TaskRegistry, task_type: TaskType = "local_agent") -> TaskState:
    return registry.create(task_type, description="d", owner_agent_id="main", session_id="s1")


def test_lifecycle_pending_running_terminal() -> None:
    registry = TaskRegistry()
    task = new_task(registry)
    assert (task.status, task.started_at) == ("pending", None)
    assert registry.start(task.id) is True
    assert status_of(task) == "running" and task.started_at is not None
    assert registry.start(task.id) is False  # only from pending
    assert registry.running() == [task]
    assert registry.finish(task.id, "completed", result="ok") is True
    assert (task.status, task.result, task.error) == ("completed", "ok", None)
    assert task.ended_at is not None and task.ended_at >= task.started_at
    assert registry.running() == []


@pytest.mark.parametrize("first", sorted(TERMINAL_STATUSES))
@pytest.mark.parametrize("second", sorted(TERMINAL_STATUSES))
def test_terminal_is_final(first: str, second: str) -> None:
    registry = TaskRegistry()
    task = new_task(registry)
    registry.start(task.id)
    assert registry.finish(task.id, first, error="first") is True  # type: ignore[arg-type]
    assert registry.finish(task.id, second, error="second") is False  # type: ignore[arg-type]
    assert registry.start(task.id) is False
    assert task.status == first and task.error == "first"


def test_pending_task_can_end_without_running() -> None:
    registry = TaskRegistry()
    task = new_task(registry)
    assert registry.finish(task.id, "failed", error="could not start") is True
    assert registry.start(task.id) is False
    assert task.status == "failed"


def test_finish_needs_a_terminal_status() -> None:
    registry = TaskRegistry()
    task = new_task(registry)
    with pytest.raises(ValueError, match="terminal status"):
        registry.finish(task.id, "running")
    assert task.status == "pending"


def test_is_terminal() -> None:
    statuses: list[TaskStatus] = ["pending", "running", "completed", "failed", "killed"]
    assert [s for s in statuses if is_terminal(s)] == ["completed", "failed", "killed"]


def test_mark_notified_once() -> None:
    registry = TaskRegistry()
    task = new_task(registry)
    assert registry.mark_notified(task.id) is True
    assert registry.mark_notified(task.id) is False
    assert task.notified is True


def test_unknown_ids() -> None:
    registry = TaskRegistry()
    task = new_task(registry)
    with pytest.raises(UnknownTaskError, match="b00000000"):
        registry.get("b00000000")
    assert registry.find(task.id[:5]) is None  # exact ids only, no prefix matching
    assert registry.find(task.id) is task
    with pytest.raises(ValueError, match="Unknown task type"):
        registry.create("shell", description="", owner_agent_id="m", session_id="s")  # type: ignore[arg-type]


def test_ids_have_type_letter_and_are_unique() -> None:
    registry = TaskRegistry()
    letters = {"local_bash": "b", "local_agent": "a", "remote_agent": "r"}
    letters |= {"in_process_teammate": "t", "local_workflow": "w", "monitor": "m", "dream": "d"}
    for task_type in ALL_TYPES:
        task = new_task(registry, task_type)
        assert re.fullmatch(rf"{letters[task_type]}[0-9a-z]{{8}}", task.id), task.id
        assert ids.is_valid_id(task.id)
    many = {ids.new_id("local_bash") for _ in range(5000)}
    assert len(many) == 5000


def test_output_file_is_private_and_exclusive(tmp_path: Path) -> None:
    directory = tmp_path / "tasks"
    path = open_output_file(directory, "b12345678")
    assert path == directory / "b12345678.output"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(directory.stat().st_mode) == 0o700
    assert path.read_bytes() == b""
    with pytest.raises(TaskOutputError, match="existing file"):
        open_output_file(directory, "b12345678")


def test_pre_existing_file_is_refused_and_kept(tmp_path: Path) -> None:
    (tmp_path / "a00000001.output").write_text("someone else's")
    with pytest.raises(TaskOutputError, match=r"a00000001\.output.*existing file"):
        open_output_file(tmp_path, "a00000001")
    assert (tmp_path / "a00000001.output").read_text() == "someone else's"


@pytest.mark.parametrize("dangling", [False, True])
def test_planted_symlink_is_never_written_through(tmp_path: Path, dangling: bool) -> None:
    target = tmp_path / "precious.txt"
    if not dangling:
        target.write_text("keep me")
    directory = tmp_path / "tasks"
    directory.mkdir()
    (directory / "b0badf00d.output").symlink_to(target)
    with pytest.raises(TaskOutputError, match="symlink"):
        open_output_file(directory, "b0badf00d")
    if dangling:
        assert not target.exists()
    else:
        assert target.read_text() == "keep me"
        assert stat.S_IMODE(target.stat().st_mode) != 0 and target.stat().st_size == 7


def test_registry_refuses_a_symlink_at_the_next_output_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Even if an attacker guessed the next id, the registry does not write through the link."""
    target = tmp_path / "victim"
    target.write_text("original")
    directory = tmp_path / "tasks"
    directory.mkdir()
    (directory / "bpredict1.output").symlink_to(target)
    monkeypatch.setattr(ids, "new_id", lambda task_type="local_agent": "bpredict1")
    registry = TaskRegistry()
    with pytest.raises(TaskOutputError, match="symlink"):
        registry.create(
            "local_bash", description="x", owner_agent_id="m", session_id="s", output_dir=directory
        )
    assert target.read_text() == "original"
    assert registry.list() == []


@pytest.mark.parametrize("bad", ["../etc/pwd", "b1234567", "B12345678", "x12345678", ""])
def test_output_file_needs_a_valid_id(tmp_path: Path, bad: str) -> None:
    with pytest.raises(TaskOutputError, match="Invalid task id"):
        open_output_file(tmp_path, bad)
    assert list(tmp_path.iterdir()) == []


def test_create_with_output_dir(tmp_path: Path) -> None:
    registry = TaskRegistry()
    task = registry.create(
        "local_agent", description="x", owner_agent_id="m", session_id="s", output_dir=tmp_path
    )
    assert task.output_path == tmp_path / f"{task.id}.output"
    assert task.output_path.exists()
    assert oct(os.stat(task.output_path).st_mode & 0o777) == oct(0o600)


def test_an_output_file_is_kept_as_text_and_read_as_a_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A thousand background children share one folder: each task keeps its output file as
    text (no ``pathlib`` join, no ``Path`` object per task); ``output_path`` reads it as a
    ``Path``, and setting it sets the text."""
    registry = TaskRegistry()
    directory = tmp_path / "tasks"
    joins: list[object] = []
    join = Path.__truediv__
    monkeypatch.setattr(Path, "__truediv__", lambda self, key: joins.append(key) or join(self, key))
    tasks = [
        registry.create(
            "local_agent", description="x", owner_agent_id="m", session_id="s", output_dir=directory
        )
        for _ in range(3)
    ]
    assert joins == []
    monkeypatch.undo()
    for task in tasks:
        assert task.output_file == f"{directory}/{task.id}.output"
        assert task.output_path == directory / f"{task.id}.output"
        assert stat.S_IMODE(os.stat(task.output_file).st_mode) == 0o600
    assert stat.S_IMODE(directory.stat().st_mode) == 0o700
    moved = tasks[0]
    moved.output_path = tmp_path / "elsewhere.output"
    assert moved.output_file == str(tmp_path / "elsewhere.output")
    moved.output_path = None
    assert moved.output_file is None and moved.output_path is None
    root_task = TaskRegistry().create(
        "local_bash", description="x", owner_agent_id="m", session_id="s"
    )
    assert root_task.output_file is None and root_task.output_path is None


def test_a_removed_output_folder_is_made_again(tmp_path: Path) -> None:
    """The folder is made private once per process; removed since, it is made again (0700)."""
    registry = TaskRegistry()
    directory = tmp_path / "tasks"
    first = registry.create(
        "local_agent", description="x", owner_agent_id="m", session_id="s", output_dir=directory
    )
    assert first.output_path is not None
    first.output_path.unlink()
    directory.rmdir()
    second = registry.create(
        "local_agent", description="x", owner_agent_id="m", session_id="s", output_dir=directory
    )
    assert second.output_path is not None and second.output_path.exists()
    assert stat.S_IMODE(directory.stat().st_mode) == 0o700


def test_eviction_after_grace() -> None:
    clock = FakeClock()
    registry = TaskRegistry(evict_grace_s=30, clock=clock)
    done, alive = new_task(registry), new_task(registry)
    registry.start(alive.id)
    registry.finish(done.id, "completed")
    assert done.evict_after == 1030.0 and alive.evict_after is None
    clock.now = 1029.9
    assert registry.evict_expired() == []
    assert registry.find(done.id) is done
    clock.now = 1030.0
    assert registry.evict_expired() == [done.id]
    assert registry.find(done.id) is None
    assert registry.list() == [alive]
    assert registry.evict_expired(now=10**9) == []  # running tasks are never evicted


def test_create_evicts_expired_tasks() -> None:
    clock = FakeClock()
    registry = TaskRegistry(evict_grace_s=5, clock=clock)
    old = new_task(registry)
    registry.finish(old.id, "failed")
    clock.now += 6
    new_task(registry)
    assert registry.find(old.id) is None


def test_terminal_listeners_once_per_transition() -> None:
    registry = TaskRegistry()
    seen: list[tuple[str, str]] = []

    def broken(task: TaskState) -> None:
        raise RuntimeError("listener bug")

    registry.on_terminal(broken)
    registry.on_terminal(lambda task: seen.append((task.id, task.status)))
    task = new_task(registry)
    registry.finish(task.id, "failed")
    registry.finish(task.id, "completed")
    assert seen == [(task.id, "failed")]


async def test_kill_dispatches_per_type() -> None:
    registry = TaskRegistry()
    calls: list[tuple[str, str]] = []

    def kind(name: str) -> KillFn:
        async def kill(task: TaskState) -> None:
            calls.append((name, task.id))

        return kill

    registry.register_kind("local_bash", kind("bash"))
    registry.register_kind("local_agent", kind("agent"))
    shell, agent, dream = (new_task(registry, t) for t in ("local_bash", "local_agent", "dream"))
    for task in (shell, agent, dream):
        registry.start(task.id)
    assert await registry.kill(agent.id) is True
    assert await registry.kill(shell.id) is True
    assert await registry.kill(dream.id) is True  # no kill operation: only marked killed
    assert calls == [("agent", agent.id), ("bash", shell.id)]
    assert [t.status for t in (shell, agent, dream)] == ["killed"] * 3
    assert await registry.kill(shell.id) is False  # already terminal: nothing called
    assert len(calls) == 2


async def test_kill_of_terminal_task_does_nothing() -> None:
    registry = TaskRegistry()
    called: list[str] = []

    async def kill(task: TaskState) -> None:
        called.append(task.id)

    registry.register_kind("local_agent", kill)
    task = new_task(registry)
    registry.finish(task.id, "completed", result="r")
    assert await registry.kill(task.id) is False
    assert called == [] and task.status == "completed"


async def test_task_that_completes_while_being_killed_keeps_its_status() -> None:
    registry = TaskRegistry()

    async def kill(task: TaskState) -> None:
        registry.finish(task.id, "completed", result="made it")

    registry.register_kind("local_agent", kill)
    task = new_task(registry)
    registry.start(task.id)
    assert await registry.kill(task.id) is False
    assert task.status == "completed"


async def test_failing_kill_operation_still_ends_killed() -> None:
    registry = TaskRegistry()

    async def kill(task: TaskState) -> None:
        raise OSError("cannot signal")

    registry.register_kind("monitor", kill)
    task = new_task(registry, "monitor")
    registry.start(task.id)
    with pytest.raises(OSError, match="cannot signal"):
        await registry.kill(task.id)
    assert task.status == "killed"


def test_ids_are_a_type_letter_and_eight_alphabet_characters_and_nothing_else_passes() -> None:
    from subagents.ids import ALPHABET, TYPE_LETTERS, is_valid_id, new_id

    for task_type, letter in TYPE_LETTERS.items():
        for _ in range(200):
            value = new_id(task_type)
            assert value[0] == letter and len(value) == 9
            assert set(value[1:]) <= set(ALPHABET) and is_valid_id(value)
    drawn = {new_id()[1:] for _ in range(2000)}
    assert len(drawn) == 2000 and set("".join(drawn)) == set(ALPHABET)  # every character drawn
    for bad in (
        "",
        "a",
        "a1234567",
        "a123456789",
        "x12345678",
        "A12345678",
        "a1234567Z",
        "a12 45678",
        "a1234567\n",
        "a\u00e91234567",
        "a-1234567",
        "aa123456é",
    ):
        assert not is_valid_id(bad), bad


def test_a_forked_process_never_hands_out_its_parents_next_ids() -> None:
    """Ids are drawn 64 at a time: a fork must not inherit the undrawn ones."""
    import os

    from subagents.ids import new_id

    new_id()  # the pool now holds ids the parent will hand out next
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child process
        os.write(write, " ".join(new_id() for _ in range(64)).encode())
        os._exit(0)
    os.close(write)
    os.waitpid(pid, 0)
    with os.fdopen(read) as pipe:
        child = set(pipe.read().split())
    parent = {new_id() for _ in range(64)}
    assert len(child) == 64 and not child & parent
